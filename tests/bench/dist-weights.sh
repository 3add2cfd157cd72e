#!/usr/bin/env bash
# Bench: weight sharding (sharding=weights, ZeRO-3) against optimizer
# sharding (sharding=optimizer, ZeRO-1) on the gpt2 preset (124M
# parameters, T=64), 2 ranks x 1 thread x micro-batch 4, in the same run:
#   - the step time ratio weights / optimizer (target <= 1.15): the median
#     step time after warm-up of each;
#   - the bytes a rank sends per step against the ring lower bound
#     ((3P - E)(N-1)/N x 4 bytes per micro-batch: the weights gathered for
#     forward and for backward, the embeddings once, the gradients
#     reduce-scattered), as loom-train reports it, and against the issue's
#     bound of one all-gather and one reduce-scatter (2P (N-1)/N x 4);
#   - how much of the gathering waits (the rest overlaps compute);
#   - the peak RSS per rank of a 24-layer, 1024-wide GPT (gpt2-medium's
#     shape, 355M parameters) at B=1, T=64: 2 ranks with sharding=weights vs
#     one process (target <= 0.6x), and on 4 ranks.
# A short run on a shared 2-core machine: the times are noisy.
BENCH=dist-weights
. "$(dirname "$0")/dist-common.inc"
RANK="--rank \$OMPI_COMM_WORLD_RANK --world \$OMPI_COMM_WORLD_SIZE"

for s in optimizer weights; do
	$MPI -np 2 sh -c "$FEED --batch 4 $RANK | $TRAIN --log-every 1000 --set micro_batch=4,sharding=$s --log $T/$s.json" \
		2> "$T/$s.err"
	grep -E 'data parallel' "$T/$s.err" | sed 's/^/  /'
done
o=$(med seconds "$T/optimizer.json")
w=$(med seconds "$T/weights.json")
r=$(echo "$w / $o" | bc -l)
printf 'gpt2, T=64, 2 ranks x micro-batch 4, 1 thread each: sharding=optimizer %.3f s/step, sharding=weights %.3f s/step\n' "$o" "$w"
printf 'FIGURE step time sharding=weights / sharding=optimizer (gpt2, 2 ranks): %.3fx (target <= 1.15) %s\n' \
	"$r" "$([ "$(echo "$r <= 1.15" | bc -l)" = 1 ] && echo ok || echo MISS)"
line=$(grep 'sharding=weights)' "$T/weights.err")
ratio=$(echo "$line" | sed -E 's/.*; ([0-9.]+)x\)$/\1/')
sent=$(echo "$line" | sed -E 's/.* s of it waiting for weights\); ([0-9.]+ [kMG]?B) sent.*/\1/')
printf 'FIGURE bytes sent per step per rank vs the ring bound of weight sharding: %sx (%s per step)\n' "$ratio" "$sent"
P=$(loom-train -c gpt2 --dry-run | awk '/^parameters:/ {print $2}')
python3 - "$sent" "$P" <<'EOF'
import sys
v, u = sys.argv[1].split()
b = float(v) * {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}[u]
p = int(sys.argv[2])
print("  against one all-gather + one reduce-scatter of the weights, 2P(N-1)/N x 4 = %.1f MB: %.3fx" % (2 * p * 0.5 * 4 / 1e6, b / (2 * p * 0.5 * 4)))
EOF
wait_s=$(echo "$line" | sed -E 's/.*: ([0-9.]+) s per step blocked.*\(([0-9.]+) s of it waiting.*/\2/')
printf 'weights gathered per step, waited for: %s s of a %.3f s step (the rest of the gathering overlaps compute)\n' "$wait_s" "$w"

# --- peak RSS per rank, gpt2-medium's shape, B=1, T=64 -------------------------
MED="loom-train -c gpt2 --set n_layer=24,n_embd=1024,n_head=16,seq_len=64,micro_batch=1,grad_accum=1,global_batch=0 --threads 1 -q --steps 2"
rss_figure "gpt2-medium shape, B=1 T=64, sharding=weights" "$FEED --batch 1" "$FEED --batch 1 $RANK" "$MED" sharding=weights
