#!/usr/bin/env bash
# loom-train --profile: each step's time per op, split into parallel and
# serial, on stderr and in --log (lib/common/loom_profile.h).  Checks the
# table's sums (ops >= 0, parallel ops + serial = the step, the ops within
# the step), that it is there for GPT and BERT, at 1 and 2 threads, and that
# profiling changes no result.
. "$(dirname "$0")/lib.sh"

F=$T/frames
make_frames 4 9 6 128 1 > "$F"

# check_log LOG STEPS: every profile line of LOG sums sensibly
check_log() {
	/usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
prof = [r for r in rows if "profile" in r]
steps = [r["step"] for r in rows if "loss" in r]
bad = []
if [r["step"] for r in prof] != steps or len(steps) != int(sys.argv[2]):
    bad.append("profile steps %s, loss steps %s" % ([r["step"] for r in prof], steps))
want = {"data", "embed_fwd", "embed_bwd", "matmul_fwd", "matmul_bwd", "attention_fwd",
        "attention_bwd", "layernorm_fwd", "layernorm_bwd", "gelu_fwd", "gelu_bwd",
        "elementwise_fwd", "elementwise_bwd", "crossentropy_fwd", "crossentropy_bwd",
        "optimizer", "rigl", "comm"}
for r in prof:
    p = r["profile"]
    ops = p["ops"]
    if set(ops) != want:
        bad.append("step %d: ops %s" % (r["step"], sorted(ops)))
    if any(v < 0 for v in ops.values()):
        bad.append("step %d: a negative op" % r["step"])
    if not p["seconds"] > 0:
        bad.append("step %d: seconds %g" % (r["step"], p["seconds"]))
    if not p["cpu"] > 0:
        bad.append("step %d: cpu %g" % (r["step"], p["cpu"]))
    # 6 significant digits in the log: sums agree within that rounding
    tol = 2e-5 * p["seconds"] + 1e-9
    if abs(p["parallel"] + p["serial"] - p["seconds"]) > tol:
        bad.append("step %d: parallel + serial != seconds" % r["step"])
    if sum(ops.values()) > p["seconds"] + tol:
        bad.append("step %d: ops sum to %g > %g" % (r["step"], sum(ops.values()), p["seconds"]))
    par = sum(v for k, v in ops.items() if k not in ("data", "comm"))
    if abs(par - p["parallel"]) > tol:
        bad.append("step %d: parallel %g, its ops %g" % (r["step"], p["parallel"], par))
    if not 0 <= p["serial_share"] <= 1 or abs(p["serial_share"] * p["seconds"] - p["serial"]) > tol:
        bad.append("step %d: serial_share %g" % (r["step"], p["serial_share"]))
    for k in ("matmul_fwd", "matmul_bwd", "attention_fwd", "attention_bwd", "layernorm_fwd",
              "layernorm_bwd", "gelu_fwd", "gelu_bwd", "crossentropy_fwd", "optimizer", "data"):
        if not ops[k] > 0:
            bad.append("step %d: %s not timed" % (r["step"], k))
print("; ".join(bad) if bad else "ok")
PY
}

for th in 1 2; do
	run loom-train -c tiny --steps 3 --threads $th --profile --log "$T/p$th.json" < "$F"
	is_rc 0 "--profile --threads $th"
	is "$(grep -Ec '^loom-train: step [123] profile: [0-9.]* s: serial [0-9.]*%, parallel [0-9.]*% \|( [a-z_]* [0-9.]*%)*$' "$err")" 3 \
		"a line on stderr per step ($th threads)"
	is "$(check_log "$T/p$th.json" 3)" ok "the log's profile lines sum sensibly ($th threads)"
done
run loom-train -c tiny --steps 3 --threads 2 --log "$T/plain.json" < "$F"
is "$(losses "$T/p2.json")" "$(losses "$T/plain.json")" "profiling leaves training bit-identical"
unlike "$T/plain.json" profile "no profile without --profile"
unlike "$err" profile "(nor on stderr)"
run loom-train -q -c tiny --steps 3 --profile --log "$T/q.json" < "$F"
is "$(wc -c < "$err")" 0 "-q: nothing on stderr"
is "$(check_log "$T/q.json" 3)" ok "(the log has it)"

# BERT (masked-LM): the same table
make_frames 2 17 4 128 3 > "$T/b"
run loom-train -c bert-tiny --set task=mlm,vocab_size=128,seq_len=16 --steps 2 --threads 2 \
	--profile --log "$T/bert.json" < "$T/b"
is_rc 0 "bert-tiny mlm --profile"
is "$(check_log "$T/bert.json" 2)" ok "BERT's profile lines sum sensibly"

run loom-train --help
like "$out" '--profile' "--help lists --profile"
done_testing
