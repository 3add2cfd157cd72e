#!/usr/bin/env bash
# tensor_parallel=T under mpirun: the ranks form a grid of N/T data-parallel
# replicas x T tensor-parallel ranks, which split each GPT layer (heads,
# MLP width, vocabulary) and sum their partial activations.  The loss curve
# is one process's (T=2, T=4, 2x2, with dropout, accumulation and
# recompute), --sample-every gives one process's text, checkpoints hold the
# whole tensors and move between grids (T=2 -> T=1 -> 2x2), and a grid
# that cannot be is one line, exit 2.  Sequence parallelism
# (sequence_parallel=1) likewise: the same curves, a checkpoint one process
# resumes, the bytes of its gathers and scatters.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dist-lib.sh"

run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8 --steps 20 --log $T/one.json"
is_rc 0 "1 rank x micro-batch 8"

# --- the same curve as one process -------------------------------------------
# every rank of a replica reads the replica's frames: one replica here
same_curve "T=2: 1 replica x 2 tensor-parallel ranks" 2 tp2.json one.json \
	"$FEED --batch 8 --epochs 0 | $TRAIN --set micro_batch=8,tensor_parallel=2 --steps 20 --log-every 10 --log tp2.json" 1 20
like "$err" '^loom-train: rank 0: tensor parallel: 1 replica x 2 ranks \(Open MPI [^)]*\), each layer split across a replica.s ranks; 55104 parameters per rank$' \
	"  start-up: the grid and what a rank holds"
like "$err" '^loom-train: rank 0: tiny: 108800 parameters' "  the model line counts the whole model"
like "$err" '^loom-train: rank 0: tensor parallel: 2 ranks per replica; [0-9.]+ s per step blocked in their all-reduces; [0-9.]+ kB sent per step per rank in them \(ring all-reduces of 4 \[B,T,C\] a layer, the embeddings., the head.s and the loss.s: [0-9.]+ kB; 1\.0000x\)$' \
	"  the all-reduces' bytes and waits reported"
unlike "$err" 'rank 1: step' "  other ranks stay quiet"
sent=$(sed -n 's/.*; \([0-9.]* kB\) sent per step per rank in them.*/\1/p' "$err")

# --dry-run plans a rank's slices and what it sends
run loom-train -c tiny --set micro_batch=8,tensor_parallel=2 --dry-run
is_rc 0 "--dry-run --set tensor_parallel=2"
like "$out" '^memory plan per rank of 1 x 2 \(data x tensor parallel, sharding=optimizer\) at micro_batch 8 x seq_len 8 \(fp32\):$' \
	"  a plan per rank of the grid"
like "$out" "^tensor parallel: each rank holds 55104 of the 108800 parameters and sends $sent per step in its all-reduces" \
	"  the slices the run held and the bytes it sent ($sent)"

same_curve "T=4 (one head per rank)" 4 tp4.json one.json \
	"$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,tensor_parallel=4 --steps 20 --log tp4.json" 1 20

# 2 replicas x 2: rank r reads replica r/2's frames; ZeRO-1 over the replicas
same_curve "2x2: 2 replicas x 2 tensor-parallel ranks" 4 g22.json one.json \
	"R=\$((R / 2)); $FEED --batch 4 --epochs 0 --rank \$R --world 2 | $TRAIN -q --set micro_batch=4,tensor_parallel=2 --steps 20 --log g22.json" 1 20

# sharding=weights: ZeRO-3 over the replicas, each sharding its slices;
# its checkpoint is sharding=optimizer's byte for byte and resumes on
# other grids
W="R=\$((R / 2)); $FEED --batch 4 --epochs 0 --rank \$R --world 2"
same_curve "2x2 with sharding=weights" 4 gw.json one.json \
	"$W | $TRAIN -q --set micro_batch=4,tensor_parallel=2,sharding=weights --steps 20 --log gw.json" 1 20
np 4 "$W | $TRAIN -q --set micro_batch=4,tensor_parallel=2,sharding=weights --steps 10 --save wck"
is_rc 0 "  saves at step 10, every rank its chunks of its slices"
np 4 "$W | $TRAIN -q --set micro_batch=4,tensor_parallel=2 --steps 10 --save ock"
same_file "$T/wck/latest/model.safetensors" "$T/ock/latest/model.safetensors" \
	"  weights byte-identical to sharding=optimizer's checkpoint"
same_file "$T/wck/latest/optimizer.safetensors" "$T/ock/latest/optimizer.safetensors" \
	"  AdamW moments too"
run sh -c "$FEED --batch 8 --epochs 0 --resume $T/wck/latest | loom-train -q --threads 1 --resume $T/wck --set micro_batch=8 --steps 15 --log $T/wr.json"
same_curve "  1 rank resumes it to 15, 2x2 sharding=weights that to 20" 4 wr.json one.json \
	"$W --resume wck/latest | $TRAIN -q --resume wck --set micro_batch=4,tensor_parallel=2,sharding=weights --steps 20 --log wr.json" 11 20

# dropout: the same masks on a replica's ranks (keyed by the replica), and
# a split head's attention mask the one its head has in the whole layer,
# so the curve is one process's; accumulation and recompute
DROP="dropout=0.1,attn_dropout=0.1"
run sh -c "$FEED --batch 4 --epochs 0 | $TRAIN -q --set micro_batch=4,grad_accum=2,$DROP --recompute --steps 20 --log $T/dr1.json"
same_curve "T=2 with dropout, attn_dropout, accumulation 2 and recompute" 2 dr2.json dr1.json \
	"$FEED --batch 4 --epochs 0 | $TRAIN -q --set micro_batch=4,grad_accum=2,$DROP,tensor_parallel=2 --recompute --steps 20 --log dr2.json" 1 20
same_curve "T=4 (a head a rank) likewise" 4 dr4.json dr1.json \
	"$FEED --batch 4 --epochs 0 | $TRAIN -q --set micro_batch=4,grad_accum=2,$DROP,tensor_parallel=4 --recompute --steps 20 --log dr4.json" 1 20

# evaluation: replica 0's ranks split it; the loss and accuracy of one process
make_frames 8 9 4 128 3 > "$T/val.frames"
run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8 --steps 4 --eval-every 2 --eval-data $T/val.frames --log $T/e1.json"
np 4 "R=\$((R / 2)); $FEED --batch 4 --epochs 0 --rank \$R --world 2 | $TRAIN -q --set micro_batch=4,tensor_parallel=2 --steps 4 --eval-every 2 --eval-data val.frames --log e2.json"
is_rc 0 "2x2 with --eval-every 2"
evals() { /usr/bin/python3 -c '
import json, sys
for d in map(json.loads, open(sys.argv[1])):
    if "eval_loss" in d: print(d["step"], "%.5f" % d["eval_loss"], "%.4f" % d["eval_acc"], d["eval_tokens"])' "$1"; }
is "$(evals "$T/e1.json" | wc -l)" 2 "  one process evaluates at steps 2 and 4"
is "$(evals "$T/e2.json")" "$(evals "$T/e1.json")" "  eval loss (5 digits), accuracy and tokens of one process"

# --sample-every: replica 0's ranks sample together from the vocabulary
# rows' logits summed over them: the text of one process, greedy (the
# step's first token as prompt) and drawn at a temperature from the seed
samples() { sed -n 's/.*"sample":\(.*\)}$/\1/p' "$1"; }
run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8 --steps 20 --sample-every 10 --log $T/sg1.json"
np 2 "$FEED --batch 8 --epochs 0 | $TRAIN --set micro_batch=8,tensor_parallel=2 --steps 20 --sample-every 10 --log sg2.json"
is_rc 0 "T=2 with --sample-every 10"
is "$(samples "$T/sg2.json" | wc -l)" 2 "  samples at steps 10 and 20"
is "$(samples "$T/sg2.json")" "$(samples "$T/sg1.json")" "  greedy: the text of one process"
is "$(grep -c 'sample step' "$err")" 2 "  rank 0 says them, once each"
SAMPLE="--sample-every 10 --sample-prompt '1 4' --sample-temperature 0.8"
run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8 --steps 20 $SAMPLE --log $T/st1.json"
np 4 "R=\$((R / 2)); $FEED --batch 4 --epochs 0 --rank \$R --world 2 | $TRAIN -q --set micro_batch=4,tensor_parallel=2 --steps 20 $SAMPLE --log st2.json"
is_rc 0 "2x2 sampling at temperature 0.8 from a prompt"
is "$(samples "$T/st2.json")" "$(samples "$T/st1.json")" "  the text one process draws from the seed"

# inverse-count loss weighting (the weights from the replica's targets)
run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,loss_weighting=inverse_count --steps 20 --log $T/iw1.json"
same_curve "T=2, loss_weighting=inverse_count" 2 iw2.json iw1.json \
	"$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,loss_weighting=inverse_count,tensor_parallel=2 --steps 20 --log iw2.json" 1 20

# bf16 matmuls (a CPU with bf16 matmul only): the split products round over
# other shapes than one process's, so within bf16's precision, not 1e-5
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
	run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,precision=bf16 --steps 20 --log $T/b1.json"
	np 2 "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,precision=bf16,tensor_parallel=2 --steps 20 --log b2.json"
	is_rc 0 "T=2, bf16 matmuls"
	d=$(maxrel "$T/b2.json" "$T/b1.json" 1 20)
	ok "  within 1e-3 of 1 rank over 20 steps (max $d)" small "$d" 1e-3
	np 2 "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,precision=bf16,tensor_parallel=2,sequence_parallel=1 --steps 20 --log bs2.json"
	is_rc 0 "T=2, bf16 matmuls, sequence_parallel=1"
	d=$(maxrel "$T/bs2.json" "$T/b1.json" 1 20)
	ok "  within 1e-3 of 1 rank over 20 steps (max $d)" small "$d" 1e-3
else
	skip 4 "this CPU has no bf16 matmul (avx512_bf16, amx_bf16)"
fi

# --- checkpoints: the whole tensors, resumed on other grids -----------------
run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8 --steps 20 --save $T/c1 --save-every 10 --log $T/c1.json"
np 2 "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,tensor_parallel=2 --steps 10 --save ck --log r.json"
is_rc 0 "T=2 saves at step 10"
run /usr/bin/python3 -c '
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
print(h["transformer.h.0.attn.c_attn.weight"]["shape"], h["transformer.wte.weight"]["shape"])' \
	"$T/ck/latest/model.safetensors"
is "$(cat "$out")" "[64, 192] [128, 64]" "  whole tensors in the checkpoint (c_attn [C, 3C], wte [V, C])"
run sh -c "$FEED --batch 8 --epochs 0 --resume $T/ck/latest | loom-train -q --threads 1 --resume $T/ck --set micro_batch=8 --steps 15 --log $T/r.json"
is_rc 0 "1 rank resumes it: steps 11-15"
same_curve "2x2 resumes that: steps 16-20" 4 r.json c1.json \
	"R=\$((R / 2)); $FEED --batch 4 --epochs 0 --rank \$R --world 2 --resume ck/latest | loom-train -q --threads 1 --resume ck --set micro_batch=4,tensor_parallel=2 --steps 20 --log r.json" 1 20
is "$(grep -c '"loss"' "$T/r.json")" 20 "  one log line per step"

# --init-from: the weights only, each rank reading its slices
run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8 --init-from $T/ck --steps 5 --log $T/i1.json"
same_curve "T=2 --init-from the T=2 checkpoint" 2 i2.json i1.json \
	"$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,tensor_parallel=2 --init-from ck --steps 5 --log i2.json" 1 5

# exact: a grid that saved and resumed ends with the bytes of one that did not
np 2 "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,tensor_parallel=2 --steps 20 --save straight --log s.json"
np 2 "$FEED --batch 8 --epochs 0 --resume ck/step-00000010 | loom-train -q --threads 1 --resume ck/step-00000010 --set micro_batch=8,tensor_parallel=2 --steps 20 --save again --log a.json"
is_rc 0 "T=2 resumes its step-10 checkpoint to step 20"
same_file "$T/straight/latest/model.safetensors" "$T/again/latest/model.safetensors" \
	"  weights byte-identical to the uninterrupted T=2 run"
same_file "$T/straight/latest/optimizer.safetensors" "$T/again/latest/optimizer.safetensors" \
	"  AdamW moments too"
$FEED --batch 8 --epochs 1 > "$T/ev.frames"
run loom-eval --checkpoint "$T/straight/latest" --threads 1 < "$T/ev.frames"
is_rc 0 "loom-eval reads the T=2 run's checkpoint on one process"
like "$out" '"loss":' "  and reports a loss"

# --- sequence parallelism: LayerNorms, dropout, residuals split by tokens ----
SP=sequence_parallel=1
same_curve "T=2, sequence_parallel=1" 2 sp2.json one.json \
	"$FEED --batch 8 --epochs 0 | $TRAIN --set micro_batch=8,tensor_parallel=2,$SP --steps 20 --log-every 10 --log sp2.json --save sp2 --save-every 10" 1 20
like "$err" '^loom-train: rank 0: tensor parallel: 2 ranks per replica; [0-9.]+ s per step blocked in their collectives; [0-9.]+ kB sent per step per rank in them \(sequence parallel: ring all-gathers and reduce-scatters of \[B,T,C\], 4 a layer forward and 6 backward, the embeddings. and the head.s; all-reduces of the LayerNorm gradients and the loss.s: [0-9.]+ kB; 1\.0000x\)$' \
	"  bytes sent per rank: the model's count of the gathers, scatters and all-reduces"
plans_as_sent "that grid" -c tiny --set micro_batch=8,tensor_parallel=2,$SP

# sp_curve N LOG REF WHAT COMMAND: COMMAND on N ranks logs LOG, within
# 1e-5 of the one-process log REF over 20 steps
sp_curve() {
	np "$1" "$5"
	is_rc 0 "$4"
	d=$(maxrel "$T/$2" "$T/$3" 1 20)
	ok "  within 1e-5 of 1 rank (max $d)" small "$d"
}
sp_curve 4 sp4.json one.json "T=4, sequence_parallel=1 (2 tokens a rank)" \
	"$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,tensor_parallel=4,$SP --steps 20 --log sp4.json"
sp_curve 4 sp22.json one.json "2x2, sequence_parallel=1" \
	"R=\$((R / 2)); $FEED --batch 4 --epochs 0 --rank \$R --world 2 | $TRAIN -q --set micro_batch=4,tensor_parallel=2,$SP --steps 20 --log sp22.json"
# the masks of the split tokens are one process's (drawn by global index)
sp_curve 2 spdr.json dr1.json "T=2 SP with dropout, attn_dropout, accumulation 2 and recompute" \
	"$FEED --batch 4 --epochs 0 | $TRAIN -q --set micro_batch=4,grad_accum=2,$DROP,tensor_parallel=2,$SP --recompute --steps 20 --log spdr.json"
run sh -c "$FEED --batch 4 --epochs 0 | $TRAIN -q --set micro_batch=4,grad_accum=2,dropout=0.1 --steps 20 --log $T/dn1.json"
sp_curve 4 spdn.json dn1.json "T=4 SP with dropout and accumulation 2, no recompute" \
	"$FEED --batch 4 --epochs 0 | $TRAIN -q --set micro_batch=4,grad_accum=2,dropout=0.1,tensor_parallel=4,$SP --steps 20 --log spdn.json"

# its checkpoint: one process resumes it
run sh -c "$FEED --batch 8 --epochs 0 --resume $T/sp2/step-00000010 | loom-train -q --threads 1 --resume $T/sp2/step-00000010 --set micro_batch=8 --steps 20 --log $T/spr.json"
is_rc 0 "1 rank resumes the SP run's step-10 checkpoint to step 20"
d=$(maxrel "$T/spr.json" "$T/c1.json" 11 20)
ok "  steps 11-20 within 1e-5 of the uninterrupted 1-rank run (max $d)" small "$d"

fails_with 2 '^loom-train: sequence_parallel: needs tensor_parallel > 1 \(it splits the tokens across a replica.s ranks\)$' \
	"sequence_parallel without tensor_parallel: one line" \
	loom-train -c tiny --set $SP --dry-run
fails_with 2 '^loom-train: sequence_parallel: tensor_parallel=4 does not divide seq_len \(6\): each rank holds seq_len/T of a row.s tokens$' \
	"a seq_len T does not divide: one line" \
	loom-train -c tiny --set seq_len=6,tensor_parallel=4,$SP --dry-run

# --- grids that cannot be: one line, exit 2, no hang -------------------------
np 3 "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,tensor_parallel=2 --steps 3"
is_rc 2 "3 ranks, tensor_parallel=2: exit 2"
is "$(grep -c '^loom-train' "$err")" 1 "  one line"
like "$err" '^loom-train: tensor_parallel: 2 does not divide the 3 ranks \(mpirun -np\): the grid is replicas x 2 ranks$' \
	"  naming both numbers"
np 2 "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,n_head=1,tensor_parallel=2 --steps 3"
is_rc 2 "tensor_parallel larger than the heads: exit 2"
is "$(grep -c '^loom-train' "$err")" 1 "  one line"
like "$err" '^loom-train: tensor_parallel: 2 does not divide n_head \(1\)' "  saying why"
fails_with 2 '^loom-train: tensor_parallel: 2 does not divide vocab_size \(127\): pad the vocabulary to a multiple of it$' \
	"a vocabulary T does not divide (--dry-run)" \
	loom-train -c tiny --set vocab_size=127,tensor_parallel=2 --dry-run
fails_with 2 '^loom-train: tensor_parallel: not with sparsity' \
	"RigL is refused" loom-train -c tiny --set sparsity=0.5,tensor_parallel=2 --dry-run

# the ranks of a replica must read the same frames
np 2 "$FEED --batch 8 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=8,tensor_parallel=2 --steps 3"
is_rc 1 "each rank reading its own feeder's share: exit 1"
like "$err" 'stdin: frames from loom-feed --rank [01] --world 2, but this rank reads replica 0 of 1 \(tensor_parallel=2: loom-feed --rank 0 --world 1\)' \
	"  naming the feeder a replica needs"
np 2 "$FEED --batch 8 --epochs 0 --seed \$R | $TRAIN -q --set micro_batch=8,tensor_parallel=2 --steps 3"
is_rc 1 "different frames on a replica's ranks: exit 1"
like "$err" 'the 2 tensor-parallel ranks of a replica got different batches' "  caught at the first frame"

done_testing
