#!/usr/bin/env bash
# BERT under tensor_parallel=T (mpirun): a replica's T ranks split each
# layer (heads, intermediate width, vocabulary: lib/train/loom_bert.h) and
# train the loss curve of one process, task=squad and task=mlm, T=2, T=4
# and 2x2 (data x tensor), with dropout, with recompute and accumulation,
# and evaluate as it does; checkpoints hold the whole tensors
# and move between grids (T=2 -> T=1 -> 2x2, 1 -> T=2), also with
# sharding=weights (ZeRO-3 over the replicas), each rank reading
# only its slices (a resume's peak RSS that of a fresh start), also of a
# checkpoint without the task's head (--init-from: the new head's slices
# one process's); a checkpoint of the other model is one line, no hang.
# Sequence parallelism (sequence_parallel=1: the LayerNorm, dropout and
# residual regions split by tokens, rows run padded) likewise: the same
# curves (squad T=2, T=4, 2x2, also with sharding=weights, recompute and
# accumulation with evaluation; mlm T=2, T=4), the bytes its gathers,
# scatters and all-reduces send as the plan counts them, and its
# checkpoint resumed by one process.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dist-lib.sh"

cd "$T"
bert_feeds
# 4 heads (T=4: one a rank); dropout on (the same masks on a replica's
# ranks), but off where replicas split the batch (each draws its own, as
# dist-bert.t says); attn_dropout off (a test of its own below); a
# constant learning rate, so a 10-step run resumes as a 20-step one
BTRAIN="loom-train -q -c bert-tiny --threads 1 --steps 20 --set vocab_size=32,n_head=4,dropout=0.1,attn_dropout=0,lr=1e-3,decay=constant,warmup_proportion=0"
D0="--set dropout=0"
# bert-base-uncased's 30522 ids in a vocabulary 4 divides
MTRAIN="loom-train -q -c bert-tiny --threads 1 --steps 20 --set task=mlm,vocab_size=30524,n_head=4,dropout=0.1,attn_dropout=0,lr=1e-3"

# --- the same curves as one process -----------------------------------------
run sh -c "$SFEED --batch 8 | $BTRAIN --set micro_batch=8 --log $T/one.json"
is_rc 0 "squad: 1 rank x micro-batch 8"
same_curve "squad T=2" 2 tp2.json one.json "$SFEED --batch 8 | $BTRAIN --set micro_batch=8,tensor_parallel=2 --log tp2.json"
same_curve "squad T=4 (one head per rank)" 4 tp4.json one.json \
	"$SFEED --batch 8 | $BTRAIN --set micro_batch=8,tensor_parallel=4 --log tp4.json"
# attention dropout: a split head draws the mask its head draws in one
# process (the kernels take the head's index among all of them)
run sh -c "$SFEED --batch 8 | $BTRAIN --set micro_batch=8,attn_dropout=0.1 --log $T/ad1.json"
is_rc 0 "squad with attn_dropout 0.1: 1 rank"
same_curve "squad T=2 with attn_dropout 0.1" 2 ad2.json ad1.json \
	"$SFEED --batch 8 | $BTRAIN --set micro_batch=8,attn_dropout=0.1,tensor_parallel=2 --log ad2.json"
run sh -c "$SFEED --batch 8 | $BTRAIN $D0 --set micro_batch=8 --log $T/one0.json"
same_curve "squad 2x2 (2 replicas x 2 tensor-parallel ranks), dropout off" 4 g22.json one0.json \
	"R=\$((R / 2)); $SFEED --batch 4 --rank \$R --world 2 | $BTRAIN $D0 --set micro_batch=4,tensor_parallel=2 --log g22.json"

# mlm: the vocabulary-parallel loss over the tied decoder
run sh -c "$MFEED --batch 4 | $MTRAIN --set micro_batch=4 --log $T/m1.json"
is_rc 0 "mlm: 1 rank x micro-batch 4"
same_curve "mlm T=2" 2 m2.json m1.json "$MFEED --batch 4 | $MTRAIN --set micro_batch=4,tensor_parallel=2 --log m2.json"
same_curve "mlm T=4" 4 m4.json m1.json "$MFEED --batch 4 | $MTRAIN --set micro_batch=4,tensor_parallel=4 --log m4.json"
np 4 "R=\$((R / 2)); $MFEED --batch 2 --rank \$R --world 2 | $MTRAIN --set micro_batch=2,tensor_parallel=2 --log m22.json"
is_rc 0 "mlm: 2x2"
run sh -c "$MFEED --batch 2 --rank 0 --world 2 | $MTRAIN --steps 1 --set micro_batch=2 --log $T/h0.json;
	   $MFEED --batch 2 --rank 1 --world 2 | $MTRAIN --steps 1 --set micro_batch=2 --log $T/h1.json"
# each replica's loss is the mean over its masked tokens, averaged over
# the replicas (dist-bert.t): step 1 against one process on each half
want=$(/usr/bin/python3 -c 'import json; print(sum(json.loads(open("h%d.json" % r).readline())["loss"] for r in (0, 1)) / 2)')
got=$(/usr/bin/python3 -c 'import json; print(json.loads(open("m22.json").readline())["loss"])')
ok "  step 1: $got = the mean of the replicas' single-process losses ($want)" \
	/usr/bin/python3 -c "import sys; sys.exit(not abs($got - $want) <= 1e-5 * $want)"
is "$(grep -c '"loss"' m22.json)" 20 "  20 steps logged"

# recompute, accumulation 2 and evaluation (squad's features, mlm's masked
# tokens: the vocabulary-parallel loss counts the hits) as one process's
loom-feed -q --manifest "$T/sq/sq.manifest.json" --seed 2 --epochs 1 --batch 8 > ev.frames
loom-feed -q --manifest "$T/mlm/m.manifest.json" --seq 29 --seed 2 --epochs 1 --batch 4 > mev.frames
EV="--steps 4 --set micro_batch=4,grad_accum=2 --recompute --eval-every 2"
run sh -c "$SFEED --batch 4 | $BTRAIN $EV --eval-data ev.frames --log $T/e1.json"
same_curve "squad T=2, recompute, grad_accum 2" 2 e2.json e1.json \
	"$SFEED --batch 4 | $BTRAIN $EV --set tensor_parallel=2 --eval-data ev.frames --log e2.json"
run sh -c "$MFEED --batch 4 | $MTRAIN $EV --eval-data mev.frames --log $T/me1.json"
np 2 "$MFEED --batch 4 | $MTRAIN $EV --set tensor_parallel=2 --eval-data mev.frames --log me2.json"
is_rc 0 "mlm T=2 with evaluation"
evals() { /usr/bin/python3 -c '
import json, sys
for d in map(json.loads, open(sys.argv[1])):
    if "eval_loss" in d: print(d["step"], "%.5f" % d["eval_loss"], "%.4f" % d["eval_acc"])' "$1"; }
is "$(evals e2.json)" "$(evals e1.json)" "  squad: eval loss (5 digits) and exact matches of one process"
is "$(evals me2.json)" "$(evals me1.json)" "  mlm: eval loss and accuracy of one process"
is "$(evals me1.json | wc -l)" 2 "  evaluated at steps 2 and 4"

# --- checkpoints: the whole tensors, resumed on other grids -------------------
np 2 "$SFEED --batch 8 | $BTRAIN $D0 --set micro_batch=8,tensor_parallel=2 --steps 10 --save ck --log r.json"
is_rc 0 "squad: T=2 saves at step 10"
run /usr/bin/python3 -c '
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
print(h["bert.encoder.layer.0.attention.self.query.weight"]["shape"],
      h["bert.encoder.layer.0.output.dense.weight"]["shape"],
      h["bert.embeddings.word_embeddings.weight"]["shape"])' "$T/ck/latest/model.safetensors"
is "$(cat "$out")" "[128, 128] [128, 512] [32, 128]" \
	"  whole tensors in the checkpoint (query [C, C], output dense [C, I], word embeddings [V, C])"
run sh -c "$SFEED --batch 8 --resume $T/ck/latest | loom-train -q --threads 1 --resume $T/ck --set micro_batch=8 --steps 15 --log $T/r.json"
is_rc 0 "1 rank resumes it: steps 11-15"
same_curve "2x2 resumes that: steps 16-20" 4 r.json one0.json \
	"R=\$((R / 2)); $SFEED --batch 4 --rank \$R --world 2 --resume ck/latest | loom-train -q --threads 1 --resume ck --set micro_batch=4,tensor_parallel=2 --steps 20 --log r.json" 1 20
is "$(grep -c '"loss"' r.json)" 20 "  one log line per step"

# exact: a grid that saved and resumed ends with the bytes of one that did
# not (dropout on)
np 2 "$SFEED --batch 8 | $BTRAIN --set micro_batch=8,tensor_parallel=2 --steps 10 --save ckd"
np 2 "$SFEED --batch 8 | $BTRAIN --set micro_batch=8,tensor_parallel=2 --save straight --log s.json"
np 2 "$SFEED --batch 8 --resume ckd/latest | loom-train -q --threads 1 --resume ckd/latest --set micro_batch=8,tensor_parallel=2 --steps 20 --save again --log a.json"
is_rc 0 "T=2 resumes its step-10 checkpoint to step 20"
same_file straight/latest/model.safetensors again/latest/model.safetensors \
	"  weights byte-identical to the uninterrupted T=2 run"
same_file straight/latest/optimizer.safetensors again/latest/optimizer.safetensors \
	"  AdamW moments too"

# sharding=weights: ZeRO-3 over the replicas, each sharding its slices (a
# unit, the embeddings or a layer with the head, gathered as it is used);
# its checkpoint is sharding=optimizer's byte for byte and resumes on
# other grids
W="R=\$((R / 2)); $SFEED --batch 4 --rank \$R --world 2"
same_curve "squad 2x2 with sharding=weights, dropout off" 4 gw.json one0.json \
	"$W | $BTRAIN $D0 --set micro_batch=4,tensor_parallel=2,sharding=weights --log gw.json"
np 4 "$W | $BTRAIN $D0 --set micro_batch=4,tensor_parallel=2,sharding=weights --steps 10 --save wck"
is_rc 0 "  saves at step 10, every rank its chunks of its slices"
np 4 "$W | $BTRAIN $D0 --set micro_batch=4,tensor_parallel=2 --steps 10 --save ock"
same_file wck/latest/model.safetensors ock/latest/model.safetensors \
	"  weights byte-identical to sharding=optimizer's checkpoint"
same_file wck/latest/optimizer.safetensors ock/latest/optimizer.safetensors "  AdamW moments too"
run sh -c "$SFEED --batch 8 --resume $T/wck/latest | loom-train -q --threads 1 --resume $T/wck --set micro_batch=8 --steps 15 --log $T/wr.json"
same_curve "  1 rank resumes it to 15, 2x2 sharding=weights that to 20" 4 wr.json one0.json \
	"$W --resume wck/latest | loom-train -q --threads 1 --resume wck --set micro_batch=4,tensor_parallel=2,sharding=weights --steps 20 --log wr.json" 11 20
# mlm: the decoder gathers the word embeddings again; with recompute and
# accumulation the losses of sharding=optimizer's 2x2 (each replica's loss
# the mean over its masked tokens: not one process's)
MW="R=\$((R / 2)); $MFEED --batch 2 --rank \$R --world 2"
np 4 "$MW | $MTRAIN $D0 --set micro_batch=2,grad_accum=2,tensor_parallel=2 --recompute --log mo.json"
same_curve "mlm 2x2 with sharding=weights, recompute, grad_accum 2" 4 mw.json mo.json \
	"$MW | $MTRAIN $D0 --set micro_batch=2,grad_accum=2,tensor_parallel=2,sharding=weights --recompute --log mw.json" 1 20

# a checkpoint one process saved resumes at T=2
run sh -c "$SFEED --batch 8 | $BTRAIN $D0 --set micro_batch=8 --steps 10 --save $T/ck1"
is_rc 0 "squad: 1 rank saves at step 10"
same_curve "T=2 resumes it to step 20" 2 r1.json one0.json \
	"$SFEED --batch 8 --resume ck1/latest | loom-train -q --threads 1 --resume ck1 --set micro_batch=8,tensor_parallel=2 --steps 20 --log r1.json" 11 20

# a rank reads only its slices of the checkpoint: resuming costs no more
# memory than starting afresh (before, a whole model's weights and
# moments more: 3 x 17.6 MB here)
peak() { sed -n 's/^loom-train: rank 0: done: .*, peak RSS \([0-9.]*\) MB$/\1/p' "$err"; }
RT="loom-train -c bert-tiny --threads 1 --set task=mlm,vocab_size=30524,n_head=4,attn_dropout=0,micro_batch=4,tensor_parallel=2"
np 2 "$MFEED --batch 4 | $RT --steps 2 --save mck"
is_rc 0 "mlm T=2: 2 steps from scratch, saved"
fresh=$(peak)
np 2 "$MFEED --batch 4 --resume mck/latest | $RT --resume mck --steps 4"
is_rc 0 "mlm T=2 resumes it"
resumed=$(peak)
ok "  peak RSS resuming $resumed MB, from scratch $fresh MB: less than the weights' 17.6 MB more" \
	/usr/bin/python3 -c "import sys; sys.exit(not $resumed - $fresh < 17.6)"
diag "mlm T=2 peak RSS of rank 0: $fresh MB from scratch, $resumed MB resuming"

# --init-from a checkpoint without the task's head (the masked-LM one for
# squad): each rank draws its slices of the new head as one process does
run loom-squad prepare -q --vocab bert-base-uncased --seq 32 --stride 16 "$T/sq.json" -o "$T/sqb/sq"
is_rc 0 "squad features in bert-base-uncased's ids"
IFEED="loom-feed -q --manifest $T/sqb/sq.manifest.json --seed 1 --epochs 0 --batch 8"
IT="loom-train -c bert-tiny --threads 1 --steps 5 --set n_head=4,dropout=0.1,attn_dropout=0,micro_batch=8,lr=1e-3 --init-from $T/mck/latest"
run sh -c "$IFEED | $IT --log $T/ih1.json"
is_rc 0 "1 rank: squad --init-from the mlm checkpoint"
np 2 "$IFEED | $IT --set tensor_parallel=2 --log ih2.json"
is_rc 0 "T=2 likewise"
like "$err" 'rank 0: --init-from: the encoder .* loaded; .*/mck/step-00000002 has no question-answering \(qa_outputs\) head: initialised from the seed$' \
	"  saying the head is new"
d=$(maxrel ih2.json ih1.json 1 5)
ok "  within 1e-5 of 1 rank over 5 steps (max $d)" small "$d"
# and 2x2 with sharding=weights (every rank its chunks of the new head's slices)
run sh -c "$IFEED | $IT $D0 --log $T/ih0.json"
same_curve "2x2 with sharding=weights --init-from it" 4 ihw.json ih0.json \
	"R=\$((R / 2)); loom-feed -q --manifest sqb/sq.manifest.json --seed 1 --epochs 0 --batch 4 --rank \$R --world 2 | $IT $D0 --set micro_batch=4,tensor_parallel=2,sharding=weights --log ihw.json" 1 5

# --- sequence parallelism: LayerNorms, dropout, residuals split by tokens -----
# dropout on: a rank's tokens draw the masks they draw in one process
SP=sequence_parallel=1
same_curve "squad T=2, sequence_parallel=1" 2 sp2.json one.json \
	"$SFEED --batch 8 | ${BTRAIN/ -q/} --set micro_batch=8,tensor_parallel=2,$SP --log sp2.json --save sp2 --save-every 10" 1 20
like "$err" '^loom-train: rank 0: tensor parallel: 2 ranks per replica; [0-9.]+ s per step blocked in their collectives; [0-9.]+ [kM]B sent per step per rank in them \(sequence parallel: [^)]*: [0-9.]+ [kM]B; 1\.0000x\)$' \
	"  bytes sent per rank: the model's count of the gathers, scatters and all-reduces"
plans_as_sent "that grid" -c bert-tiny --set vocab_size=32,n_head=4,attn_dropout=0,micro_batch=8,seq_len=32,tensor_parallel=2,$SP
same_curve "squad T=4, sequence_parallel=1" 4 sp4.json one.json \
	"$SFEED --batch 8 | $BTRAIN --set micro_batch=8,tensor_parallel=4,$SP --log sp4.json"
same_curve "squad 2x2, sequence_parallel=1, dropout off" 4 sp22.json one0.json \
	"R=\$((R / 2)); $SFEED --batch 4 --rank \$R --world 2 | $BTRAIN $D0 --set micro_batch=4,tensor_parallel=2,$SP --log sp22.json"
same_curve "squad 2x2, sequence_parallel=1, sharding=weights, dropout off" 4 spw.json one0.json \
	"R=\$((R / 2)); $SFEED --batch 4 --rank \$R --world 2 | $BTRAIN $D0 --set micro_batch=4,tensor_parallel=2,$SP,sharding=weights --log spw.json"
same_curve "squad T=2 SP, recompute, grad_accum 2" 2 spe2.json e1.json \
	"$SFEED --batch 4 | $BTRAIN $EV --set tensor_parallel=2,$SP --eval-data ev.frames --log spe2.json"
is "$(evals spe2.json)" "$(evals e1.json)" "  eval loss (5 digits) and exact matches of one process"
same_curve "mlm T=2, sequence_parallel=1" 2 msp2.json m1.json \
	"$MFEED --batch 4 | $MTRAIN --set micro_batch=4,tensor_parallel=2,$SP --log msp2.json"
same_curve "mlm T=4, sequence_parallel=1" 4 msp4.json m1.json \
	"$MFEED --batch 4 | $MTRAIN --set micro_batch=4,tensor_parallel=4,$SP --log msp4.json"
np 2 "$MFEED --batch 4 | $MTRAIN $EV --set tensor_parallel=2,$SP --eval-data mev.frames --log mspe2.json"
is_rc 0 "mlm T=2 SP with evaluation"
is "$(evals mspe2.json)" "$(evals me1.json)" "  eval loss and accuracy of one process"
# its checkpoint, on another grid: one process resumes it
run sh -c "$SFEED --batch 8 --resume $T/sp2/step-00000010 | loom-train -q --threads 1 --resume $T/sp2/step-00000010 --set micro_batch=8 --steps 20 --log $T/spr.json"
is_rc 0 "1 rank resumes the T=2 SP run's step-10 checkpoint to step 20"
d=$(maxrel spr.json one.json 11 20)
ok "  steps 11-20 within 1e-5 of the uninterrupted 1-rank run (max $d)" small "$d"

# --- what cannot be: one line, no hang ----------------------------------------
fails_with 2 '^loom-train: tensor_parallel: 4 does not divide vocab_size \(30522\): pad the vocabulary to a multiple of it$' \
	"bert-tiny's vocabulary on 4 ranks (--dry-run)" \
	loom-train -c bert-tiny --set task=mlm,attn_dropout=0,n_head=4,tensor_parallel=4 --dry-run
fails_with 2 '^loom-train: tensor_parallel: 2 does not divide n_head \(1\)' \
	"more ranks than heads (--dry-run)" \
	loom-train -c bert-tiny --set n_head=1,attn_dropout=0,tensor_parallel=2 --dry-run
fails_with 2 '^loom-train: sequence_parallel: tensor_parallel=4 does not divide seq_len \(30\): each rank holds seq_len/T of a row.s tokens$' \
	"a BERT's seq_len that sequence_parallel cannot split (--dry-run)" \
	loom-train -c bert-tiny --set vocab_size=32,n_head=4,attn_dropout=0,seq_len=30,tensor_parallel=4,sequence_parallel=1 --dry-run
# a GPT's checkpoint for a BERT run under tensor_parallel
make_frames 2 9 4 128 3 > gpt.frames
run sh -c "loom-train -q -c tiny --threads 1 --steps 1 --set micro_batch=2,seq_len=8 --save $T/gck < $T/gpt.frames"
is_rc 0 "a GPT checkpoint"
np 2 "$SFEED --batch 8 | $BTRAIN --set micro_batch=8,tensor_parallel=2 --steps 2 --init-from gck"
is_rc 2 "--init-from the GPT's checkpoint under tensor_parallel=2: exit 2"
is "$(grep -c '^loom-train' "$err")" 1 "  one line"
like "$err" "^loom-train: --init-from gck: a gpt2 checkpoint \(config.json\), but the model is bert$" \
	"  saying whose checkpoint it is"
np 2 "$FEED --batch 8 | $TRAIN -q --set micro_batch=8,tensor_parallel=2 --steps 2 --init-from ck/latest"
is_rc 2 "a GPT run --init-from a BERT checkpoint under tensor_parallel=2: exit 2"
is "$(grep -c '^loom-train' "$err")" 1 "  one line"
like "$err" "^loom-train: --init-from ck/latest: a bert checkpoint \(config.json\), but the model is gpt$" \
	"  saying so"

done_testing
