#!/usr/bin/env bash
# BERT under mpirun (2 ranks): task=squad and task=mlm train the same loss
# curve as one process with the same global batch (dropout off: its masks
# are drawn per rank), through the GPT's data-parallel layer (the model's
# parameter table and grad_ready hooks, lib/train/loom_dist.h).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dist-lib.sh"

cd "$T"
bert_feeds
BTRAIN="loom-train -q -c bert-tiny --threads 1 --steps 12 --set vocab_size=32,dropout=0,attn_dropout=0,lr=1e-3"
run sh -c "$SFEED --batch 8 | $BTRAIN --set micro_batch=8 --log $T/one.json"
is_rc 0 "squad: 1 rank x micro-batch 8"
np 2 "$SFEED --batch 4 --rank \$R --world \$W | $BTRAIN --set micro_batch=4 --log two.json"
is_rc 0 "squad: 2 ranks x micro-batch 4 under mpirun"
is "$(wc -l < two.json)" 12 "  rank 0 writes the log"
d=$(maxrel two.json one.json 1 12)
ok "  2 x 4 vs 1 x 8: losses within 1e-5 relative over 12 steps (max $d)" small "$d"

# checkpoints: written by 2 ranks (the moments gathered), resumed on 1
np 2 "$SFEED --batch 4 --rank \$R --world \$W | $BTRAIN --set micro_batch=4 --save-every 6 --save ck --log r2.json"
is_rc 0 "squad: 2 ranks save at step 6 and 12"
run sh -c "$SFEED --batch 8 --resume $T/ck/step-00000006 | loom-train -q --threads 1 --resume $T/ck/step-00000006 --set micro_batch=8 --log $T/r1.json"
is_rc 0 "  1 rank resumes the 2 ranks' step 6"
d=$(maxrel r1.json r2.json 7 12)
ok "  steps 7-12 as the 2 ranks trained them (max $d)" small "$d"

# mlm: masks keyed by the record's place in the global batch, not the rank
MTRAIN="loom-train -q -c bert-tiny --threads 1 --steps 6 --set task=mlm,dropout=0,attn_dropout=0,lr=1e-3"
np 2 "$MFEED --batch 2 --rank \$R --world \$W | $MTRAIN --set micro_batch=2 --log m2.json"
is_rc 0 "mlm: 2 ranks x micro-batch 2"
is "$(wc -l < m2.json)" 6 "  six steps logged"
# each rank's loss is the mean over its own masked tokens, and the ranks
# average them (as HuggingFace under DDP): the first step's loss is the
# mean of what one process computes on each rank's frames, which mask the
# same tokens
for r in 0 1; do
	$MFEED --batch 2 --rank $r --world 2 | $MTRAIN --steps 1 --set micro_batch=2 --log r$r.json
done
want=$(/usr/bin/python3 -c 'import json; print(sum(json.loads(open("r%d.json" % r).readline())["loss"] for r in (0, 1)) / 2)')
got=$(/usr/bin/python3 -c 'import json; print(json.loads(open("m2.json").readline())["loss"])')
ok "  step 1: $got = the mean of the ranks' single-process losses ($want)" \
	/usr/bin/python3 -c "import sys; sys.exit(not abs($got - $want) <= 1e-5 * $want)"

done_testing
