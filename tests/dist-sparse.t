#!/usr/bin/env bash
# RigL block sparsity under data parallelism (mpirun, 2 ranks): the ranks
# pick the same blocks as one process with the same global batch, and a
# sparse checkpoint moves between 1 and 2 ranks (exact resume on 2 ranks,
# across mask updates).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dist-lib.sh"

# updates at steps 3, 6, 9, 12 (prune_end fixed: --steps changes between runs)
SP="sparsity=0.5,block_size=8,prune_every=3,prune_end=14,prune_ratio=0.4"

# one JSON object per mask update, without the step time
updates() { grep '"rigl_update"' "$1"; }

run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,$SP --steps 16 --log $T/one.json"
is_rc 0 "1 rank x micro-batch 8, sparse"
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4,$SP --steps 16 --log two.json"
is_rc 0 "2 ranks x micro-batch 4, sparse"
is "$(updates "$T/two.json" | wc -l)" 4 "rank 0 logs the four mask updates"
is "$(updates "$T/two.json")" "$(updates "$T/one.json")" \
	"2 ranks update the masks as one process does (same counts, density, churn)"
d=$(maxrel "$T/two.json" "$T/one.json" 1 16)
ok "2 x 4 vs 1 x 8: losses within 1e-5 relative over 16 steps, 4 mask updates (max $d)" small "$d"

# --- exact resume on 2 ranks, then 2 -> 1 ----------------------------------------
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4,$SP --steps 7 --save ck --log r2.json"
is_rc 0 "2 ranks: steps 1-7, checkpoint (after the update at step 6)"
ok "the 2-rank checkpoint has its masks" test -s "$T/ck/latest/sparsity.safetensors"
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W --resume ck/latest | loom-train -q --threads 1 --resume ck --save ck --set micro_batch=4 --steps 13 --log r2.json"
is_rc 0 "2 ranks resume it: steps 8-13 (updates at 9 and 12)"
is "$(sed -E 's/,"tokens_per_s".*//' "$T/r2.json" | head -17)" "$(sed -E 's/,"tokens_per_s".*//' "$T/two.json" | head -17)" \
	"resumed 2-rank run: losses, lr, norms and mask updates identical to the uninterrupted one"
run sh -c "$FEED --batch 8 --epochs 0 --resume $T/ck/latest | loom-train -q --threads 1 --resume $T/ck --set micro_batch=8 --steps 16 --log $T/r1.json"
is_rc 0 "1 rank resumes the 2-rank sparse checkpoint: steps 14-16"
d=$(maxrel "$T/r1.json" "$T/one.json" 14 16)
ok "2 -> 1 ranks: the uninterrupted curve within 1e-5 (max $d)" small "$d"
like "$T/ck/latest/sparsity.safetensors" '"updates":"4"' "the checkpoint counts the 4 updates"

done_testing
