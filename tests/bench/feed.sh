#!/usr/bin/env bash
# Bench: loom-feed alone into /dev/null (GPT-2 shapes: batch 8 x 1025
# tokens, random ids of the GPT-2 vocabulary) against `cat` of the same
# shard bytes, and against what the trainer can consume: the gpt2 preset's
# training FLOPs per token at the sgemm peak loom-train measures in this
# run (an upper bound on the trainer's tokens/s).  The feeder must never be
# the bottleneck.  Figures are noisy on a shared 2-core machine: each time
# is the best of 3 runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
MTOK=${FEED_BENCH_MTOKENS:-8}
T=$(mktemp -d "${TMPDIR:-/tmp}/loom-bench-feed.XXXXXX")
trap 'rm -rf "$T"' EXIT

python3 - "$T/tok.u16" "$MTOK" <<'EOF'
import array, os, sys
n = int(sys.argv[2]) * 1000000
a = array.array('H', os.urandom(2 * n))
a = array.array('H', (x % 50257 for x in a))
open(sys.argv[1], 'wb').write(a.tobytes())
EOF
loom-shard -q -f u16 -L 1025 -n 4 --vocab-size 50257 -o "$T/d" "$T/tok.u16"
M="$T/d.manifest.json"
REC=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records"])' "$M")
BYTES=$(cat "$T"/d-*.tfrecord | wc -c)

best() { # command... ; prints best-of-3 wall seconds
	local b= t0 t1 s
	for _ in 1 2 3; do
		t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N)
		s=$(echo "$t1 - $t0" | bc -l)
		if [ -z "$b" ] || [ "$(echo "$s < $b" | bc -l)" = 1 ]; then b=$s; fi
	done
	printf '%.4f' "$b"
}
cat_shards() { cat "$T"/d-*.tfrecord > /dev/null; }
feed() { loom-feed -m "$M" --batch 8 --seq 1024 --seed 1 -q "$@" > /dev/null; }
cat_shards
t_cat=$(best cat_shards)
t_feed=$(best feed)
t_feed1=$(best feed -j 1)
FRAMES=$((REC / 8))
OUTB=$((FRAMES * (64 + 8 * 1025 * 2) + 64))
printf 'loom-feed: %d records (%.1f MB of shards) in %.3f s (%.3f s with 1 thread): %.0f records/s, %.0f tokens/s, %.1f MB/s in, %.1f MB/s out; cat: %.3f s (%.1f MB/s)\n' \
	"$REC" "$(echo "$BYTES / 1000000" | bc -l)" "$t_feed" "$t_feed1" \
	"$(echo "$REC / $t_feed" | bc -l)" "$(echo "$REC * 1025 / $t_feed" | bc -l)" \
	"$(echo "$BYTES / $t_feed / 1000000" | bc -l)" "$(echo "$OUTB / $t_feed / 1000000" | bc -l)" \
	"$t_cat" "$(echo "$BYTES / $t_cat / 1000000" | bc -l)"

# What the trainer could consume at best: sgemm peak / training FLOPs per token.
peak=$(loom-train --bench-sgemm 2>/dev/null | awk '/sgemm_gflops/ {print $2}')
fpt=$(loom-train --config gpt2 --dry-run 2>/dev/null | awk '/^FLOPs per token/ {print $4}')
need=$(awk -v p="$peak" -v f="$fpt" 'BEGIN { printf "%.1f", p * 1e9 / f }')
have=$(awk -v r="$REC" -v t="$t_feed" 'BEGIN { printf "%.1f", r * 1025 / t }')
printf 'trainer upper bound (gpt2, %s GFLOP/s sgemm peak, %s FLOPs/token): %.0f tokens/s\n' \
	"$peak" "$fpt" "$need"

# cat does no decoding, checksums or shuffling: a reference, not a target.
printf 'FIGURE loom-feed vs cat of the shard bytes: %.1fx (reference: cat only copies)\n' \
	"$(echo "$t_feed / $t_cat" | bc -l)"
r=$(awk -v h="$have" -v n="$need" 'BEGIN { printf "%.0f", h / n }')
okk=ok; [ "$r" -ge 100 ] || okk=MISS
printf 'FIGURE loom-feed tokens/s vs gpt2 trainer at 100%% MFU: %sx (target >= 100) %s\n' "$r" "$okk"
