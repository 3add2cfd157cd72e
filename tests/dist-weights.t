#!/usr/bin/env bash
# sharding=weights (ZeRO-3) under mpirun: every rank keeps 1/N of the
# weights, gradients and AdamW moments and gathers a unit (the embeddings,
# a layer) when it computes with it.  The loss curve is one process's
# (dense and RigL-sparse, with accumulation and recompute, on 2 and 4
# ranks), checkpoints are written by every rank into the one HF-loadable
# checkpoint and move between rank counts (2 -> 4 -> 1) exactly, a rank
# killed while they save leaves `latest` valid, and evaluation runs on
# every rank.  A BERT likewise (squad: one process's curve).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dist-lib.sh"

WS="sharding=weights"
run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8 --steps 20 --log $T/one.json"
is_rc 0 "1 rank x micro-batch 8"

# --- the same curve as one process -------------------------------------------
same_curve "2 ranks x micro-batch 4, sharding=weights" 2 two.json one.json \
	"$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN --set micro_batch=4,$WS --steps 20 --log-every 10 --log two.json"
like "$err" '^loom-train: rank 0: data parallel: 2 ranks \(Open MPI [^)]*\), sharding=weights: weights, gradients and AdamW state per rank [0-9.]+ [kMG]B \(1/2 of [0-9.]+ [kMG]B\), gathered a layer at a time$' \
	"start-up: what a rank holds"
like "$err" 'rank 0: data parallel \(sharding=weights\): [0-9.]+ s per step blocked in communication \([0-9.]+ s of it waiting for weights\); .* sent per step per rank \(ring lower bound of 1 micro-batch: .*; 1\.0[0-9]*x\)$' \
	"bytes per step reported against the ring bound of weight sharding"
is "$(grep -c 'rank 0: step' "$err")" 2 "rank 0 reports progress"
unlike "$err" 'rank 1: step' "other ranks stay quiet"

same_curve "2 ranks x micro-batch 2 x accumulation 2, recompute" 2 acc.json one.json \
	"$FEED --batch 2 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=2,grad_accum=2,$WS --recompute --steps 20 --log acc.json" 1 20

same_curve "4 ranks x micro-batch 2 (MPI's all-gather and reduce-scatter)" 4 four.json one.json \
	"$FEED --batch 2 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=2,$WS --steps 20 --log four.json" 1 20

# RigL: mask updates at steps 3, 6, 9, 12 from the block norms and
# gradient scores of every rank's slices
SP="sparsity=0.5,block_size=8,prune_every=3,prune_end=14,prune_ratio=0.4"
run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,$SP --steps 16 --log $T/sp1.json"
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4,$SP,$WS --steps 16 --log sp2.json"
is_rc 0 "sparse, 2 ranks, sharding=weights"
is "$(grep -c '"rigl_update"' "$T/sp2.json")" 4 "  four mask updates"
is "$(grep '"rigl_update"' "$T/sp2.json")" "$(grep '"rigl_update"' "$T/sp1.json")" \
	"  the same blocks as one process (counts, density, churn)"
d=$(maxrel "$T/sp2.json" "$T/sp1.json" 1 16)
ok "  losses within 1e-5 of 1 rank over 16 steps (max $d)" small "$d"

# bf16 matmuls: each unit's bf16 copy made when it arrives (a CPU with bf16
# matmul only).  The same grid under sharding=optimizer is the exact
# reference; one rank at micro-batch 8 rounds its bf16 products over other
# row blocks than two ranks at 4 (oneDNN's blocking follows the shape), so
# it is a reference within bf16's precision (8 bits: 3.9e-3), not 1e-5.
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
	run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8,precision=bf16 --steps 20 --log $T/b1.json"
	is_rc 0 "bf16, 1 rank"
	np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4,precision=bf16 --steps 20 --log bo.json"
	is_rc 0 "bf16, 2 ranks, sharding=optimizer"
	same_curve "bf16, 2 ranks, sharding=weights" 2 b2.json bo.json \
		"$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4,precision=bf16,$WS --steps 20 --log b2.json" 1 20
	d=$(maxrel "$T/b2.json" "$T/b1.json" 1 20)
	ok "  within 1e-3 of 1 rank over 20 steps (max $d)" small "$d" 1e-3
else
	skip 5 "this CPU has no bf16 matmul (avx512_bf16, amx_bf16)"
fi

# micro-batches whose every target is ignored (every other record is all
# ignore_id): a rank with such a batch still takes part in backward's
# gathers (it hung the ranks), and the curve is sharding=optimizer's
/usr/bin/python3 -c '
import random
r = random.Random(3); out = []
for i in range(200):
    if i % 2:
        out += [5] * 9
    else:
        x = r.randrange(128)
        for j in range(9):
            out.append(x); x = (3 * x + 1) % 128
print(" ".join(map(str, out)))' > "$T/ign.txt"
run loom-shard -q -f text -L 9 --no-shuffle -n 2 -o "$T/ign" "$T/ign.txt"
IFEED="loom-feed -q -m $T/ign.manifest.json --seq 8 --seed 1 --batch 1 --epochs 0"
np 2 "$IFEED --rank \$R --world \$W | $TRAIN -q --set micro_batch=1,ignore_id=5 --steps 20 --log io.json"
is_rc 0 "targets all ignored on some micro-batches: sharding=optimizer"
np 2 "$IFEED --rank \$R --world \$W | $TRAIN -q --set micro_batch=1,ignore_id=5,$WS --steps 20 --log iw.json"
is_rc 0 "  sharding=weights: the ranks go on (not the hang guard's 124)"
is "$(grep -c '"loss":0,' "$T/iw.json")" "$(grep -c '"loss":0,' "$T/io.json")" "  the same steps without a target"
d=$(/usr/bin/python3 - "$T/iw.json" "$T/io.json" <<'EOF'
import json, sys
a, b = ({d["step"]: d["loss"] for d in map(json.loads, open(p))} for p in sys.argv[1:])
print("%.3g" % max(abs(a[s] - b[s]) / (abs(b[s]) or 1) for s in b) if len(a) == len(b) == 20 else "missing steps")
EOF
)
ok "  the same curve within 1e-5 (max $d)" small "$d"

# --- checkpoints: written by every rank, moved 2 -> 4 -> 1 --------------------
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4,$WS --steps 6 --save ck --log r.json"
is_rc 0 "2 ranks: steps 1-6, checkpoint"
C6="$T/ck/step-00000006"
ok "  one model.safetensors and one optimizer file" test -s "$C6/model.safetensors" -a -s "$C6/optimizer.safetensors"
/usr/bin/python3 - "$C6/model.safetensors" > "$T/shapes" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
for k in ("transformer.wte.weight", "transformer.h.1.mlp.c_fc.weight", "transformer.ln_f.bias"):
    print(k, h[k]["dtype"], h[k]["shape"])
EOF
is "$(cat "$T/shapes")" "transformer.wte.weight F32 [128, 64]
transformer.h.1.mlp.c_fc.weight F32 [64, 256]
transformer.ln_f.bias F32 [64]" "  full tensors in HF names and shapes"
np 4 "$FEED --batch 2 --epochs 0 --rank \$R --world \$W --resume ck/latest | loom-train -q --threads 1 --resume ck --save ck --set micro_batch=2 --steps 13 --log r.json"
is_rc 0 "4 ranks resume it (sharding=weights from the checkpoint): steps 7-13"
is "$(readlink "$T/ck/latest")" step-00000013 "  every rank wrote its part of step 13"
run sh -c "$FEED --batch 8 --epochs 0 --resume $T/ck/latest | loom-train -q --threads 1 --resume $T/ck --set micro_batch=8 --steps 20 --log $T/r.json"
is_rc 0 "1 rank resumes that: steps 14-20"
is "$(wc -l < "$T/r.json")" 20 "  one log line per step"
d=$(maxrel "$T/r.json" "$T/one.json" 1 20)
ok "  2 -> 4 -> 1 ranks: the uninterrupted curve within 1e-5 (max $d)" small "$d"

# the same rank count: bit for bit the uninterrupted run
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W --resume ck/step-00000006 | loom-train -q --threads 1 --resume ck/step-00000006 --set micro_batch=4 --steps 20 --log x.json"
is_rc 0 "2 ranks resume step 6 again"
is "$(sed -E 's/,"tokens_per_s".*//' "$T/x.json")" \
	"$(sed -n '7,20p' "$T/two.json" | sed -E 's/,"tokens_per_s".*//')" \
	"  steps 7-20: losses, lr and norms identical to the uninterrupted 2-rank run"

# a flipped byte in a checkpoint: rank 0 (which alone reads the files
# through for their checksums) names it and the job stops
cp -r "$C6" "$T/bad"
flip "$T/bad/model.safetensors" 5000
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | loom-train -q --threads 1 --resume bad --set micro_batch=4 --steps 8"
ok "resuming a damaged checkpoint on 2 ranks fails (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
like "$err" '^loom-train: rank 0: .*model\.safetensors.*(checksum|CRC)' "  rank 0 names the file"
is "$(grep -c '^loom-train' "$err")" 1 "  in one line"

# loom-eval reads it on one machine
make_frames 2 9 8 128 3 > "$T/ev.frames"
run loom-eval --checkpoint "$T/ck/step-00000013" --threads 1 < "$T/ev.frames"
is_rc 0 "loom-eval reads the sharded run's checkpoint"
like "$out" '"loss":' "  and reports a loss"

# --- a rank killed while the ranks save: latest stays a whole checkpoint ----
rm -rf "$T/k"
mkdir -p "$T/k"
{ np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4,$WS --steps 100000 --save k --save-every 1 --keep 2 & p=\$!; cat /proc/\$p/stat > k/pid.\$R; wait \$p"; echo $rc > "$T/k/rc"; } &
for i in $(seq 600); do
	case $(readlink "$T/k/latest" 2>/dev/null) in step-0000000[4-9]|step-000000[1-9]*) break ;; esac
	sleep 0.1
done
s=$(readlink "$T/k/latest")
ok "the ranks save every step (latest -> $s)" test -n "$s"
signal_ours KILL "$(pid_token "$T/k/pid.1")" "rank 1's loom-train"
wait
ok "a killed rank stops every rank" test "$(cat "$T/k/rc")" -ne 0 -a "$(cat "$T/k/rc")" -ne 124
run loom-eval --checkpoint "$T/k/latest" --threads 1 < "$T/ev.frames"
is_rc 0 "  latest is a whole checkpoint (loom-eval checks every file's checksum)"

# --- evaluation on every rank; sampling refused ------------------------------
make_frames 4 9 4 128 5 > "$T/val.frames"
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4,$WS --steps 4 --eval-every 2 --eval-data val.frames --log ev.json"
is_rc 0 "--eval-every under sharding=weights (every rank takes part)"
is "$(grep -c '"eval_loss"' "$T/ev.json")" 2 "  rank 0 logs two evaluations"
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4,$WS --steps 4 --sample-every 2"
is_rc 2 "--sample-every under sharding=weights: a usage error"
like "$err" "^loom-train: --sample-every: not with sharding=weights over 2 ranks .*loom-eval generate$" "  saying why"
is "$(grep -c '^loom-train' "$err")" 1 "  in one line (and the hint), from rank 0 alone"

# --- a BERT shards its weights too -------------------------------------------
# its units: the embeddings (gathered again for their LayerNorm's backward)
# and each layer, the QA head with the last
bert_feeds
BT="loom-train -c bert-tiny --threads 1 --steps 20 --set vocab_size=32,n_head=4,dropout=0,attn_dropout=0,lr=1e-3"
run sh -c "$SFEED --batch 8 | $BT -q --set micro_batch=8 --log $T/b1.json"
is_rc 0 "BERT squad: 1 rank"
same_curve "BERT squad: 2 ranks, sharding=weights" 2 b2.json b1.json \
	"$SFEED --batch 4 --rank \$R --world \$W | $BT --set micro_batch=4,$WS --log b2.json"
like "$err" 'the embeddings twice, gradients reduce-scattered, 3P\(N-1\)/N x 4 bytes each = [0-9.]+ [kM]B; 1\.0[0-9]*x\)$' \
	"  the bytes it sent: each unit gathered for forward and backward"
run loom-train -c bert-tiny --set sharding=weights,data_parallel=2 --dry-run
is_rc 0 "--dry-run plans a BERT's shards"
like "$out" '^  parameters      8\.7 MB \(1/2 of 17\.5 MB\)$' "  half the weights a rank"
like "$out" '^  gathered layers ' "  and the units it gathers"

done_testing
