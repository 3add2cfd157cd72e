#!/usr/bin/env bash
# Bench: tensor parallelism (tensor_parallel=T) on the gpt2 preset (124M
# parameters, vocabulary padded to 50304, T=64, micro-batch 4):
#   - tokens/s of 2 tensor-parallel ranks x 1 thread against one process
#     with 2 threads (goal >= 0.8x): the median step time after warm-up
#     (one process's steps of a run before the ranks' runs and one after,
#     as the shared machine's load moves);
#     the same with sequence_parallel=1; where rank 0's step goes (its
#     loom-train --profile ops over the steps after warm-up, and the time
#     outside every op);
#   - the bytes a rank sends per step in the all-reduces against the
#     model's count (4 [B,T,C] a layer, the embeddings', the LM head's and
#     the loss's, ring 2(T-1)/T), as loom-train reports them, and the time
#     it waits in them;
#   - the peak RSS per rank of a 24-layer, 1024-wide GPT (gpt2-medium's
#     shape) at B=1, T=1024, recompute off: T=2 against one process
#     (target <= 0.6x), and T=4; with sequence_parallel=1 (target <= 0.55x).
# A short run on a shared 2-core machine: the times are noisy.
BENCH=tp
. "$(dirname "$0")/dist-common.inc"
GPT2="--set micro_batch=4,vocab_size=50304"

one() {
	$FEED --batch 4 | loom-train -c gpt2 --threads 2 --steps "$STEPS" --log-every 1000 \
		--set seq_len=64,grad_accum=1,warmup_steps=0 $GPT2 --log "$T/one$1.json" 2> "$T/one.err"
}
one 1
$MPI -np 2 sh -c "$FEED --batch 4 | $TRAIN --log-every 1000 $GPT2,tensor_parallel=2 --profile --log $T/tp.json" \
	2> "$T/tp.err"
$MPI -np 2 sh -c "$FEED --batch 4 | $TRAIN -q --log-every 1000 $GPT2,tensor_parallel=2,sequence_parallel=1 --profile --log $T/sp.json"
one 2
cat "$T/one1.json" "$T/one2.json" > "$T/one.json"
o=$(med seconds "$T/one.json")
# shares LOG: rank 0's ops of at least 1% of its steps after warm-up, and
# the time outside every op
shares() {
	python3 - "$1" "$WARM" <<'EOF'
import json, sys
p = [d["profile"] for d in map(json.loads, open(sys.argv[1])) if "profile" in d and d["step"] > int(sys.argv[2])]
tot = sum(x["seconds"] for x in p)
ops = {k: sum(x["ops"][k] for x in p) / tot for k in p[0]["ops"]}
top = sorted(((v, k) for k, v in ops.items() if v >= 0.01), reverse=True)
print(" ".join("%s %.1f%%" % (k, 100 * v) for v, k in top), "outside the ops %.1f%%" % (100 - 100 * sum(ops.values())))
EOF
}
for run in tp sp; do
	what=tensor_parallel=2
	[ $run = tp ] || what+=,sequence_parallel=1
	t=$(med seconds "$T/$run.json")
	r=$(echo "$o / $t" | bc -l)
	printf 'gpt2, T=64, micro-batch 4: 1 process x 2 threads %.3f s/step, %s x 1 thread %.3f s/step\n' "$o" "$what" "$t"
	printf 'FIGURE tokens/s, %s x 1 thread / 1 process x 2 threads (gpt2): %.3fx (goal >= 0.8) %s\n' \
		"$what" "$r" "$([ "$(echo "$r >= 0.8" | bc -l)" = 1 ] && echo ok || echo MISS)"
	echo "  rank 0's step: $(shares "$T/$run.json")"
done
line=$(grep 'tensor parallel: 2 ranks per replica' "$T/tp.err")
echo "  ${line#loom-train: rank 0: }"
printf 'FIGURE bytes sent per step per rank vs the model'"'"'s count of the all-reduces: %sx\n' \
	"$(echo "$line" | sed -E 's/.*; ([0-9.]+)x\)$/\1/')"

# --- peak RSS per rank, gpt2-medium's shape, B=1, T=1024 -----------------------
python3 - "$T/long.u16" <<'PY'
import array, os, sys
n = 8 * 1025
a = array.array('H', (x % 50257 for x in array.array('H', os.urandom(2 * n))))
open(sys.argv[1], 'wb').write(a.tobytes())
PY
loom-shard -q -f u16 -L 1025 -n 1 --vocab-size 50257 -o "$T/l" "$T/long.u16"
LFEED="loom-feed -q -m $T/l.manifest.json --seq 1024 --seed 1 --epochs 0 --batch 1"
MED="loom-train -c gpt2 --set n_layer=24,n_embd=1024,n_head=16,vocab_size=50304,seq_len=1024,micro_batch=1,grad_accum=1 --threads 1 -q --steps 2"
rss_figure "gpt2-medium shape, B=1 T=1024, tensor_parallel" "$LFEED" "$LFEED" "$MED" tensor_parallel=\$OMPI_COMM_WORLD_SIZE
rss_figure "gpt2-medium shape, B=1 T=1024, tensor_parallel, sequence_parallel=1" "$LFEED" "$LFEED" "$MED" \
	tensor_parallel=\$OMPI_COMM_WORLD_SIZE,sequence_parallel=1 0.55
