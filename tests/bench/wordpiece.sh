#!/usr/bin/env bash
# BERT WordPiece (lib/token/loom_wordpiece.c, driven by build/bench/wordpiece)
# against HuggingFace tokenizers (npm), single thread, bert-base-uncased:
# first the ids must be equal on every line of ~20 MB of real text (the
# Wikipedia samples, English and Japanese, then English documentation) and
# on every Unicode code point, then the encoding throughput by CPU time;
# the same for the command line: `loom-bpe encode --vocab bert-base-uncased
# -j 1` (ids equal to HuggingFace's on every non-empty line, then its
# throughput by CPU time, reading the file and writing u16 ids).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${LOOM_BUILD:-$ROOT/build}
SHARED=${LOOM_SHARED:-$ROOT/../shared}
W=$BUILD/bench-wordpiece
NPM=$BUILD/bench-npm
MB=${WORDPIECE_BENCH_MB:-20}
VOCAB=share/vocab/bert-base-uncased/vocab.txt
WP=$BUILD/bench/wordpiece
mkdir -p "$W"
[ -x "$WP" ] || { echo "wordpiece: $WP missing (make bench builds it)"; exit 1; }
. tests/bench/lib.bash
CORPUS=$(corpus "$MB")
echo "wordpiece: corpus $(wc -c < "$CORPUS") bytes, $(wc -l < "$CORPUS") lines"

if [ ! -d "$NPM/node_modules/tokenizers" ]; then
	mkdir -p "$NPM"
	( cd "$NPM" && { [ -f package.json ] || npm init -y >/dev/null; } &&
	  npm install --no-audit --no-fund tokenizers >/dev/null 2>&1 ) ||
		{ echo "wordpiece: cannot install npm tokenizers (no network or npm?): skipped"; exit 0; }
fi
export NODE_PATH=$NPM/node_modules RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false

# --- ids equal: every line of the corpus, and "x<c>x <c> É<c>" for every code point
"$WP" "$VOCAB" < "$CORPUS" > "$W/loom.ids"
node tests/bench/wordpiece-ref.js ids "$VOCAB" "$CORPUS" "$W/ref.ids"
if cmp -s "$W/loom.ids" "$W/ref.ids"; then
	echo "wordpiece: ids equal to HuggingFace on all $(wc -l < "$W/ref.ids") lines ($(wc -w < "$W/ref.ids") tokens)"
else
	echo "wordpiece: IDS DIFFER from HuggingFace: $(cmp "$W/loom.ids" "$W/ref.ids" | head -1)"
	exit 1
fi
if [ ! -s "$W/allcp.txt" ]; then
	/usr/bin/python3 -c '
import sys
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or cp == 10:
            continue
        c = chr(cp)
        f.write("x%sx %s \u00c9%s\n" % (c, c, c))' "$W/allcp.txt"
fi
"$WP" "$VOCAB" < "$W/allcp.txt" > "$W/loom-cp.ids"
node tests/bench/wordpiece-ref.js ids "$VOCAB" "$W/allcp.txt" "$W/ref-cp.ids"
if cmp -s "$W/loom-cp.ids" "$W/ref-cp.ids"; then
	echo "wordpiece: ids equal to HuggingFace on all $(wc -l < "$W/ref-cp.ids") code points"
else
	echo "wordpiece: IDS DIFFER from HuggingFace on a code point: $(cmp "$W/loom-cp.ids" "$W/ref-cp.ids" | head -1)"
	exit 1
fi

# --- throughput by CPU time, best of 2
LOOM=0 HF=0
for _ in 1 2; do
	/usr/bin/time -f '%U %S' -o "$W/time" "$WP" "$VOCAB" -t "$CORPUS" > /dev/null
	r=$(awk -v n="$(wc -c < "$CORPUS")" '{ s = $1 + $2; print (s > 0) ? n / 1e6 / s : 0 }' "$W/time")
	LOOM=$(awk -v a="$LOOM" -v r="$r" 'BEGIN { print (r > a) ? r : a }')
	r=$(node tests/bench/wordpiece-ref.js time "$VOCAB" "$CORPUS" | awk '/^MBPS/ { print $3 }')
	HF=$(awk -v a="$HF" -v r="$r" 'BEGIN { print (r > a) ? r : a }')
done
echo "wordpiece: loom $LOOM MB/s, HuggingFace tokenizers $HF MB/s (CPU time, one thread)"
fig "WordPiece encode vs HuggingFace tokenizers, one thread" "$(awk -v a="$LOOM" -v b="$HF" 'BEGIN { printf "%.2f", a / b }')" ">=" 5 x

# --- loom-bpe encode --vocab bert-base-uncased -j 1
BPE=$BUILD/bin/loom-bpe
[ -x "$BPE" ] || { echo "wordpiece: $BPE missing (make all)"; exit 1; }
"$BPE" encode --vocab bert-base-uncased -j 1 -q -f text --eos none "$CORPUS" > "$W/cli.ids"
if grep -v '^$' "$W/ref.ids" | cmp -s - "$W/cli.ids"; then
	echo "wordpiece: loom-bpe encode: ids equal to HuggingFace on all $(wc -l < "$W/cli.ids") non-empty lines"
else
	echo "wordpiece: loom-bpe encode: IDS DIFFER from HuggingFace: $(grep -v '^$' "$W/ref.ids" | cmp - "$W/cli.ids" | head -1)"
	exit 1
fi
CLI=0
for _ in 1 2; do
	/usr/bin/time -f '%U %S' -o "$W/time" "$BPE" encode --vocab bert-base-uncased -j 1 -q \
		-o "$W/cli.u16" "$CORPUS"
	r=$(awk -v n="$(wc -c < "$CORPUS")" '{ s = $1 + $2; print (s > 0) ? n / 1e6 / s : 0 }' "$W/time")
	CLI=$(awk -v a="$CLI" -v r="$r" 'BEGIN { print (r > a) ? r : a }')
done
echo "wordpiece: loom-bpe encode --vocab bert-base-uncased -j 1: $CLI MB/s (CPU time)"
fig "loom-bpe encode --vocab bert-base-uncased -j 1 vs HuggingFace tokenizers, one core" "$(awk -v a="$CLI" -v b="$HF" 'BEGIN { printf "%.2f", a / b }')" ">=" 5 x
rm -f "$W/loom.ids" "$W/ref.ids" "$W/loom-cp.ids" "$W/ref-cp.ids" "$W/cli.ids" "$W/cli.u16"
