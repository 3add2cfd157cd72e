#!/usr/bin/env bash
# make demo: the loom pipeline on data bundled in share/, one stage at a time.
# Each stage prints its summary line; outputs land in $DEMO_OUT (demo-out/
# in the current directory).  Also runs as installed, from
# PREFIX/share/loom/pipelines/demo.sh (tools in PREFIX/bin, or on PATH).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SAMPLE=$HERE/../share/sample            # the source tree
[ -d "$SAMPLE" ] || SAMPLE=$HERE/../sample  # installed: PREFIX/share/loom/sample
if [[ $HERE == */share/loom/pipelines ]] && [ -x "$HERE/../../../bin/loom-fetch" ]; then
	PATH=$(cd "$HERE/../../../bin" && pwd):$PATH
fi
OUT=${DEMO_OUT:-demo-out}
rm -rf "$OUT"
mkdir -p "$OUT"
stage() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

BIN=$(dirname "$(command -v loom-fetch)")
stage "build: $(ls "$BIN" | grep -c '^loom-') tools in $BIN"

# loom-fetch: the bundled sample dump laid out like dumps.wikimedia.org,
# served by lighttpd on 127.0.0.1 (stopped on exit, even on failure).
stage "loom-fetch: samplewiki --date latest from a local HTTP mirror"
"$HERE/make-mirror.sh" "$SAMPLE" samplewiki 20260101 "$OUT/mirror" >/dev/null
trap '"$HERE/mirror.sh" stop "$OUT/mirror-state"' EXIT
MIRROR=$("$HERE/mirror.sh" start "$OUT/mirror" "$OUT/mirror-state")
loom-fetch --mirror "$MIRROR" --wiki samplewiki --date latest -o "$OUT/dumps" >"$OUT/dumps.list"
"$HERE/mirror.sh" stop "$OUT/mirror-state"

# loom-extract: the dump (as fetched, else the bundled one) -> one article per line.
stage "loom-extract: wikitext -> $OUT/sample.txt (one article per line)"
DUMP=$(find "$OUT/dumps" -name '*-pages-articles-multistream.xml.bz2' 2>/dev/null | head -n 1)
[ -n "$DUMP" ] || DUMP=$SAMPLE/samplewiki-20260101-pages-articles-multistream.xml.bz2
loom-extract -j 2 -o "$OUT/sample.txt" "$DUMP"
head -n 3 "$OUT/sample.txt" | cut -c 1-100

# loom-bpe: GPT-2 token ids (u16), <|endoftext|> after each article.
stage "loom-bpe encode --vocab gpt2: $OUT/sample.txt -> $OUT/sample.tokens (u16)"
loom-bpe encode --vocab gpt2 -j 2 -o "$OUT/sample.tokens" "$OUT/sample.txt"

# loom-shard / loom-index / loom-cat on a generated token stream (self-contained:
# 400k pseudo-random GPT-2-sized ids, u16 little-endian).
stage "loom-shard: 400k generated tokens -> $OUT/shards/demo-*.tfrecord"
mkdir -p "$OUT/shards"
python3 -c 'import random, struct, sys
r = random.Random(1)
sys.stdout.buffer.write(struct.pack("<400000H", *(min(int(r.paretovariate(0.6)) - 1, 50256) for _ in range(400000))))' > "$OUT/tokens.u16"
loom-shard -o "$OUT/shards/demo" -n 2 --seq 1025 --seed 1 --vocab-size 50257 "$OUT/tokens.u16"
stage "loom-index: --verify --stats"
loom-index --verify --stats "$OUT"/shards/demo-*-of-00002.tfrecord
stage "loom-cat: --range 0:2"
loom-cat --range 0:2 "$OUT/shards/demo-00000-of-00002.tfrecord" | cut -c 1-100 | head -n 2

# loom-feed | loom-train: the mini preset (4 layers, 128 hidden, GPT-2 vocab)
# on the sample's own tokens, records of 33 tokens every 8; the loss falls
# from ~10.8 (ln 50257).  Checkpoints in $OUT/ckpt, one JSON line per step.
stage "loom-feed | loom-train -c mini: $OUT/sample.tokens, 150 steps -> $OUT/ckpt"
mkdir -p "$OUT/train"
loom-shard -q -o "$OUT/train/sample" --seq 33 --stride 8 --seed 1 --vocab-size 50257 "$OUT/sample.tokens"
loom-feed -q -m "$OUT/train/sample.manifest.json" --batch 4 --seq 32 --seed 1 --epochs 0 |
	loom-train -c mini --steps 150 --log-every 25 --save "$OUT/ckpt" --log "$OUT/train.jsonl"

# loom-eval: the trained checkpoint on the same records, in another order
# (the sample is too small to hold data out), then a sampled continuation.
stage "loom-eval: $OUT/ckpt on the sample's records"
loom-feed -q -m "$OUT/train/sample.manifest.json" --batch 4 --seq 32 --seed 0 |
	loom-eval --checkpoint "$OUT/ckpt"
stage "loom-eval generate: 40 tokens after 'Augusta Ada'"
loom-eval generate --checkpoint "$OUT/ckpt" --vocab gpt2 --prompt 'Augusta Ada' -n 40 --seed 1

# loom-plot: the training log as a chart a person can open, and a sparkline here.
stage "loom-plot: the loss curve -> $OUT/loss.svg"
loom-plot "$OUT/train.jsonl" -o "$OUT/loss.svg" --title "loom demo: training loss"
echo "open $OUT/loss.svg in a browser to see the chart"
