#!/usr/bin/env bash
# loom-train --tensorboard DIR: an event file TensorBoard reads (TFRecord of
# tensorflow.Event, decoded here by tests/tb_events.py with the standard
# library), flushed at each log line, readable after SIGKILL.
. "$(dirname "$0")/lib.sh"

F=$T/frames
FR=136                      # bytes per frame: 64 + 4 x 9 x 2
make_frames 4 9 60 128 1 > "$F"
make_frames 4 9 4 128 2 > "$T/eval"
export OMP_NUM_THREADS=2
events() { /usr/bin/python3 "$TESTS/tb_events.py" "$@"; }

run loom-train -q -c tiny --steps 20 --eval-every 10 --eval-data "$T/eval" \
	--log "$T/log.json" --tensorboard "$T/tb/run1" < "$F"
is_rc 0 "--tensorboard: trains"
is "$(ls "$T/tb/run1" | wc -l)" 1 "one file in DIR (made with its parents)"
tf=$(ls "$T"/tb/run1/events.out.tfevents.* 2>/dev/null)
like <(basename "$tf") "^events\.out\.tfevents\.[0-9]{10}\.$(hostname | sed 's/\./\\./g')\$" \
	"named events.out.tfevents.<time>.<host>"
events "$tf" > "$T/ev" 2> "$T/ev.err"
is "$?:$(cat "$T/ev.err")" "0:" "every record's CRCs check and every event decodes"
like <(head -1 "$T/ev") '^version brain\.Event:2 1[0-9]{9}\.[0-9]+$' "first event: file_version, with a wall time"
like <(sed -n 2p "$T/ev") '^0 config text text 7 ```\\n\{\\n  "n_layer": 2,' \
	"then the configuration: a text summary (text plugin, DT_STRING)"
like "$T/ev" '"preset": "tiny"' "the whole configuration"
for tag in train/loss train/lr train/grad_norm train/tokens_per_s; do
	is "$(grep -c "^[0-9]* $tag scalar " "$T/ev")" 20 "$tag: a scalar per step"
done
is "$(grep -c ' eval/loss scalar ' "$T/ev")" 2 "eval/loss at each evaluation"
like "$T/ev" '^20 eval/perplexity scalar [0-9.]+$' "eval/perplexity"
like "$T/ev" '^20 eval/accuracy scalar [0-9.]+$' "eval/accuracy"
# the same numbers as the JSON log (as float32)
/usr/bin/python3 - "$T/log.json" "$T/ev" > "$T/cmp" <<'PY'
import json, struct, sys
log = [json.loads(l) for l in open(sys.argv[1])]
want = {(str(j["step"]), "train/loss"): j["loss"] for j in log if "loss" in j}
want.update({(str(j["step"]), "eval/loss"): j["eval_loss"] for j in log if "eval_loss" in j})
got = {}
for l in open(sys.argv[2]):
    f = l.split()
    if len(f) == 4 and f[2] == "scalar" and (f[0], f[1]) in want:
        got[(f[0], f[1])] = float(f[3])
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
bad = [k for k in want if k not in got or f32(got[k]) != f32(want[k])]
print(len(want), len(got), bad)
PY
is "$(cat "$T/cmp")" "22 22 []" "the event file's losses are the JSON log's"

# a sparse run: the mask updates' density and churn
run loom-train -q -c tiny --steps 12 --set sparsity=0.5,block_size=8,prune_every=5 \
	--tensorboard "$T/tb/sparse" < "$F"
is_rc 0 "sparse run"
events "$T"/tb/sparse/events.* > "$T/evs"
like "$T/evs" '^5 sparsity/density scalar 0\.5$' "sparsity/density at the mask update"
like "$T/evs" '^5 sparsity/churn scalar [0-9.e-]+$' "sparsity/churn"

# flushed at each log line: a run killed mid-way leaves whole records
mkfifo "$T/fifo"
( head -c $((FR * 7)) "$F"; exec sleep 60 ) > "$T/fifo" &
feeder=$! feeder_t=$(pid_token $!)
loom-train -q -c tiny --steps 40 --tensorboard "$T/tb/killed" < "$T/fifo" 2>/dev/null &
trainer=$! trainer_t=$(pid_token $!)
for _ in $(seq 1 6000); do
	[ "$(events "$T"/tb/killed/events.* 2>/dev/null | grep -c ' train/loss ')" = 7 ] && break
	sleep 0.05
done
signal_ours KILL "$trainer_t" loom-train; wait $trainer 2>/dev/null
signal_ours TERM "$feeder_t"; wait $feeder 2>/dev/null
events "$T"/tb/killed/events.* > "$T/evk" 2> "$T/evk.err"
is "$?:$(cat "$T/evk.err")" "0:" "killed with SIGKILL: the file reads to its end"
is "$(grep -c ' train/loss ' "$T/evk")" 7 "with every step trained before the kill"

# a directory that cannot be made: one line, before training
run loom-train -q -c tiny --steps 2 --tensorboard /dev/null/tb < "$F"
is_rc 1 "--tensorboard in a file: exit 1"
like "$err" '^loom-train: --tensorboard: .*/dev/null' "names the path"
is "$(wc -l < "$err")" 1 "one line"

done_testing
