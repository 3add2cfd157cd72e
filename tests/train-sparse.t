#!/usr/bin/env bash
# loom-train with RigL block sparsity on the tiny preset: per-update log
# lines, checkpoints (dense model.safetensors with dead blocks exactly 0,
# masks in sparsity.safetensors), exact resume after SIGKILL across mask
# updates, damaged side files, loom-eval's sparsity report.
. "$(dirname "$0")/lib.sh"

F=$T/frames
FR=136                      # bytes per frame: 64 + 4 x 9 x 2
make_frames 4 9 60 128 1 > "$F"
export OMP_NUM_THREADS=2
# updates at steps 5, 10, ..., 25 (prune_end 0 -> 0.75 x 40 = 30)
SP="--set sparsity=0.5,block_size=8,prune_every=5,prune_ratio=0.4"

run loom-train -v -c tiny --steps 40 $SP --log "$T/full.json" --save "$T/ck" < "$F"
is_rc 0 "sparse training runs"
is "$(grep -c '"rigl_update"' "$T/full.json")" 5 "five mask updates logged (steps 5..25, none at or after prune_end 30)"
like "$T/full.json" '^\{"step":5,"rigl_update":1,"prune_ratio":0\.37[0-9]*,"pruned":[0-9]+,"regrown":[0-9]+,"live_blocks":768,"blocks":1536,"density":0\.5,"churn":' \
	"update line: step, count, ratio (cosine), pruned, regrown, live of all blocks, density, churn"
/usr/bin/python3 - "$T/full.json" > "$T/upd" <<'PY'
import json, sys
rows = [d for d in map(json.loads, open(sys.argv[1])) if "rigl_update" in d]
print(" ".join(str(d["step"]) for d in rows))
print(all(d["pruned"] == d["regrown"] > 0 and d["density"] == 0.5 and d["live_blocks"] == 768 for d in rows))
print(all(0 < d["churn"] <= d["pruned"] / 768 for d in rows))
print(all(a["pruned"] > b["pruned"] for a, b in zip(rows, rows[1:])))
PY
is "$(sed -n 1p "$T/upd")" "5 10 15 20 25" "updates every prune_every steps"
is "$(sed -n 2p "$T/upd")" "True" "as many regrown as pruned; density exactly 0.5"
is "$(sed -n 3p "$T/upd")" "True" "churn: a fraction of the live blocks, at most the pruned ones"
is "$(sed -n 4p "$T/upd")" "True" "cosine schedule: fewer blocks replaced at each update"
like "$err" '^loom-train: step 10: RigL update 2: ratio 0\.3[0-9]*, [0-9]+ blocks pruned, [0-9]+ regrown, density 0\.5000 \(768 of 1536 blocks\), churn' \
	"-v: a line per update on stderr"
first=$(losses "$T/full.json" | sed -n 1p | cut -d' ' -f2)
last=$(losses "$T/full.json" | tail -1 | cut -d' ' -f2)
ok "sparse model learns ($first -> $last)" /usr/bin/python3 -c "import sys; sys.exit(not $last < $first - 0.3)"
run loom-train -q -c tiny --steps 40 $SP --log "$T/again.json" < "$F"
is "$(grep rigl_update "$T/again.json")" "$(grep rigl_update "$T/full.json")" "same seed: the same blocks"
is "$(losses "$T/again.json")" "$(losses "$T/full.json")" "same seed: bit-identical losses"

# --- checkpoint: dense model.safetensors, masks beside it ---------------------
C=$T/ck/latest
ok "sparsity.safetensors written" test -s "$C/sparsity.safetensors"
like "$C/state.json" '"sparsity.safetensors": \{' "state.json lists (and checksums) it"
/usr/bin/python3 - "$C" > "$T/ckchk" <<'PY'
import json, struct, sys
def st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return h, b[8 + n:]
mh, md = st(sys.argv[1] + "/model.safetensors")
sh, sd = st(sys.argv[1] + "/sparsity.safetensors")
meta = sh.pop("__metadata__")
mh.pop("__metadata__", None)
print(meta["format"], meta["block_size"], meta["last_update"], meta["updates"])
print(any(".mask" in k for k in mh))
bs, ok, live = int(meta["block_size"]), True, []
for name, t in sorted(sh.items()):
    if not name.endswith(".mask"):
        continue
    w = mh[name[:-5]]
    IC, OC = w["shape"]
    a, e = w["data_offsets"]
    vals = struct.unpack("<%df" % (IC * OC), md[a:e])
    r, c = t["shape"]
    m = sd[t["data_offsets"][0]:t["data_offsets"][1]]
    live.append(sum(m) / len(m))
    for b in range(r * c):
        i, j = divmod(b, c)
        blk = [vals[(i * bs + x) * OC + j * bs + y] for x in range(bs) for y in range(bs)]
        if not m[b] and any(v != 0 for v in blk):
            ok = False
print(len(live), ok, set(live) == {0.5})
PY
is "$(sed -n 1p "$T/ckchk")" "loom-rigl 8 25 5" "metadata: format, block_size, last update step, updates"
is "$(sed -n 2p "$T/ckchk")" "False" "model.safetensors holds only the model's tensors (HF loads it as it is)"
is "$(sed -n 3p "$T/ckchk")" "8 True True" "8 sparse weights; every dead block exactly 0 in model.safetensors; masks at density 0.5"

run loom-eval --checkpoint "$T/ck" < "$F"
is_rc 0 "loom-eval on a sparse checkpoint"
like "$out" '"loss":[0-9.]+,"perplexity":[0-9.]+,' "reports the (unweighted) loss and perplexity"
like "$out" '"sparsity":\{"overall":0\.5,"from":"masks","block_size":8,"layers":\{"transformer\.h\.0\.attn\.c_attn\.weight":0\.5,' \
	"reports the sparsity from the masks, overall and per sparse weight"
rm -rf "$T/nomask"
cp -r "$T/ck/step-00000040" "$T/nomask"
rm "$T/nomask/sparsity.safetensors"
/usr/bin/python3 -c '
import json, sys
p = sys.argv[1] + "/state.json"; d = json.load(open(p)); del d["files"]["sparsity.safetensors"]
json.dump(d, open(p, "w"))' "$T/nomask"
run loom-eval --checkpoint "$T/nomask" < "$F"
is_rc 0 "loom-eval without the side file (a dense evaluation)"
like "$out" '"from":"zero blocks"' "then counts the all-zero blocks"
l1=$(sed 's/.*"loss":\([0-9.]*\).*/\1/' "$out")
run loom-eval --checkpoint "$T/ck" < "$F"
l2=$(sed 's/.*"loss":\([0-9.]*\).*/\1/' "$out")
ok "the dense evaluation gives the sparse loss ($l1 vs $l2)" \
	/usr/bin/python3 -c "import sys; sys.exit(not abs($l1 - $l2) <= 1e-5 * $l2)"

# --- damaged side files --------------------------------------------------------
rm -rf "$T/dmg"
cp -r "$T/ck/step-00000040" "$T/dmg"
rm "$T/dmg/sparsity.safetensors"
run loom-train -q --resume "$T/dmg" --steps 50 < "$F"
is_rc 1 "--resume without sparsity.safetensors: exit 1"
like "$err" "^loom-train: .*/dmg: sparsity.safetensors is missing \\(state.json lists it\\)$" "names the file"
run loom-train -q --resume "$T/nomask" --steps 50 < "$F"
is_rc 1 "--resume of a sparse checkpoint that has no masks at all: exit 1"
like "$err" "^loom-train: .*/nomask: sparsity is 0.5, but the checkpoint has no sparsity.safetensors to resume from" \
	"says what is missing"
rm -rf "$T/dmg"
cp -r "$T/ck/step-00000040" "$T/dmg"
flip "$T/dmg/sparsity.safetensors" -3 1
run loom-train -q --resume "$T/dmg" --steps 50 < "$F"
is_rc 1 "--resume with a flipped bit in sparsity.safetensors: exit 1"
like "$err" "sparsity.safetensors" "names the file"
run loom-train -q --init-from "$T/nomask" $SP --steps 5 -c tiny < "$F"
is_rc 0 "--init-from a checkpoint without masks starts masks from the seed"

# --- state that disagrees with itself --------------------------------------------
run loom-train -q --resume "$T/ck" --set sparsity=0.75 --steps 50 < "$F"
is_rc 2 "--resume --set sparsity= another value: exit 2"
is "$(cat "$err")" "loom-train: --resume: --set sparsity=0.75, but the checkpoint $T/ck/step-00000040 has sparsity 0.5 (its masks hold that density; --init-from $T/ck/step-00000040 starts new masks)
Try 'loom-train --help' for more information." \
	"  one line naming the key, both values and the way out, then the hint"
run loom-train -q --resume "$T/ck" --set sparsity=0 --steps 50 < "$F"
is_rc 2 "--resume --set sparsity=0 (dense) of a sparse checkpoint: exit 2"
run loom-train -q --resume "$T/ck" --set block_size=16 --steps 50 < "$F"
is_rc 2 "--resume --set block_size= another value: exit 2"
like "$err" "^loom-train: --resume: --set block_size=16, but the checkpoint .* has block_size 8 \(its masks' blocks\)$" "  named"
# masks of density 0.5 under a config.json that says 0.75 (state.json
# without checksums, as an older loom wrote it: read with a warning)
rm -rf "$T/dmg"
cp -r "$T/ck/step-00000040" "$T/dmg"
/usr/bin/python3 - "$T/dmg" <<'PY'
import json, sys
d = sys.argv[1]
c = json.load(open(d + "/config.json")); c["loom"]["sparsity"] = 0.75
json.dump(c, open(d + "/config.json", "w"))
s = json.load(open(d + "/state.json")); del s["files"]
json.dump(s, open(d + "/state.json", "w"))
PY
run loom-train -q --resume "$T/dmg" --steps 50 < "$F"
is_rc 1 "--resume: masks whose density is not the config's sparsity: exit 1"
like "$err" "^loom-train: $T/dmg/sparsity.safetensors: tensor 'transformer\.h\.0\.attn\.c_attn\.weight\.mask' has [0-9]+ of [0-9]+ blocks live \(density 0\.5\), but sparsity 0\.75 needs [0-9]+ \(density 0\.25\)$" \
	"  one line naming the file, the tensor and what was expected"
run loom-eval --checkpoint "$T/dmg" < "$F"
is_rc 1 "loom-eval refuses it too"

# --- exact resume after SIGKILL, across mask updates ----------------------------
mkfifo "$T/fifo"
( head -c $((FR * 23)) "$F"; exec sleep 60 ) > "$T/fifo" &
feeder=$! feeder_t=$(pid_token $!)
loom-train -q -c tiny --steps 40 $SP --save "$T/kill" --save-every 10 --log "$T/k1.json" < "$T/fifo" 2>/dev/null &
trainer=$! trainer_t=$(pid_token $!)
for _ in $(seq 1 6000); do [ "$(grep -c '"loss"' 2>/dev/null < "$T/k1.json")" = 23 ] && [ "$(readlink "$T/kill/latest")" = step-00000020 ] && break; sleep 0.05; done
signal_ours KILL "$trainer_t" loom-train; wait $trainer 2>/dev/null
signal_ours TERM "$feeder_t"; wait $feeder 2>/dev/null
is "$(readlink "$T/kill/latest")" "step-00000020" "killed with SIGKILL after step 20's checkpoint (a mask-update step)"
run loom-train -q --resume latest --save "$T/kill" --log "$T/k1.json" < "$F"
is_rc 0 "--resume latest"
is "$(losses "$T/k1.json")" "$(losses "$T/full.json")" \
	"resumed run: the same losses, lr and norms at steps 21..40, past the update at step 25"
is "$(grep rigl_update "$T/k1.json")" "$(grep rigl_update "$T/full.json")" "and the same mask updates"

done_testing
