#!/usr/bin/env bash
# Loading a large HuggingFace tokenizer.json: a synthetic byte-level BPE of
# ~$VOCAB_BENCH_MB MB (tests/bench/mk_tokenizer.py: ~2M tokens and merges at
# 99 MB), loaded by loom-bpe (a whole run on empty input) and by HuggingFace
# tokenizers (npm, Tokenizer.fromFile) in the same invocation: CPU seconds
# and peak RSS (/usr/bin/time), after checking both give the same ids on a
# sample.  VOCAB_BENCH_BASELINE=path/to/an/older/loom-bpe adds it as a third
# loader (e.g. main's build, for before/after figures).
# Figures are noisy: the machine is shared; CPU time is the fairer figure.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${LOOM_BUILD:-$ROOT/build}
W=$BUILD/bench-vocab
NPM=$BUILD/bench-npm
MB=${VOCAB_BENCH_MB:-99}
mkdir -p "$W"
command -v loom-bpe >/dev/null || { echo "vocab-load: loom-bpe not on PATH (make first)"; exit 1; }

. tests/bench/fig.bash

TOK=$W/tokenizer-$MB.json
if [ ! -s "$TOK" ]; then
	echo "vocab-load: writing a ${MB} MB tokenizer.json to $TOK"
	python3 tests/bench/mk_tokenizer.py "$MB" "$TOK.tmp"
	mv "$TOK.tmp" "$TOK"
fi
echo "vocab-load: $TOK: $(wc -c < "$TOK") bytes"
: > "$W/empty"

# "CPU-seconds peak-MB" of a command (its output discarded)
measure() {
	/usr/bin/time -f '%U %S %M' -o "$W/time" "$@" > /dev/null
	awk '{ printf "%.2f %.0f\n", $1 + $2, $3 / 1024 }' "$W/time"
}
read -r LC LM < <(measure loom-bpe encode -q --vocab "$TOK" -f text "$W/empty")
echo "vocab-load: loom-bpe: $LC s CPU, $LM MB peak RSS (figures below are ratios against the baseline and HF in this run)"

if [ -n "${VOCAB_BENCH_BASELINE:-}" ]; then
	read -r BC BM < <(measure "$VOCAB_BENCH_BASELINE" encode -q --vocab "$TOK" -f text "$W/empty")
	echo "vocab-load: baseline $VOCAB_BENCH_BASELINE: $BC s CPU, $BM MB peak RSS"
	fig "loom-bpe load vs baseline (CPU)" "$(awk -v a="$BC" -v b="$LC" 'BEGIN { printf "%.2f", a / b }')" ">=" 2 x
	fig "loom-bpe load vs baseline (peak RSS)" "$(awk -v a="$BM" -v b="$LM" 'BEGIN { printf "%.2f", a / b }')" ">=" 2 x
fi

if [ ! -d "$NPM/node_modules/tokenizers" ]; then
	echo "vocab-load: installing tokenizers from npm into $NPM"
	mkdir -p "$NPM"
	( cd "$NPM" && { [ -f package.json ] || npm init -y >/dev/null; } &&
	  npm install --no-audit --no-fund tokenizers >/dev/null 2>&1 ) ||
		{ echo "vocab-load: cannot install npm tokenizers (no network or npm?); reference figures skipped"; exit 0; }
fi
export NODE_PATH=$NPM/node_modules
# the same ids on a sample (HF's added tokens are matched in text, so none here)
printf 'the quick brown fox jumps over the lazy dog; tokenizers are fun\n' > "$W/sample.txt"
loom-bpe encode -q --vocab "$TOK" --eos none -f text "$W/sample.txt" > "$W/sample.loom"
node -e '
const { Tokenizer } = require("tokenizers");
const fs = require("fs");
Tokenizer.fromFile(process.argv[1]).encode(fs.readFileSync(process.argv[2], "utf8").trimEnd())
  .then(e => console.log(e.getIds().join(" ")));' "$TOK" "$W/sample.txt" > "$W/sample.hf"
if ! cmp -s "$W/sample.loom" "$W/sample.hf"; then
	echo "vocab-load: loom and HF tokenizers disagree on the sample:"; cat "$W/sample.loom" "$W/sample.hf"; exit 1
fi
echo "vocab-load: loom-bpe and HF tokenizers give the same $(wc -w < "$W/sample.loom") ids on the sample"
read -r HC HM < <(measure node -e 'require("tokenizers").Tokenizer.fromFile(process.argv[1])' "$TOK")
echo "vocab-load: HF tokenizers (node, whole process): $HC s CPU, $HM MB peak RSS"
fig "loom-bpe load vs HF tokenizers (CPU)" "$(awk -v a="$HC" -v b="$LC" 'BEGIN { printf "%.2f", a / b }')" ">=" 2 x
fig "loom-bpe load vs HF tokenizers (peak RSS)" "$(awk -v a="$HM" -v b="$LM" 'BEGIN { printf "%.2f", a / b }')" ">=" 2 x
