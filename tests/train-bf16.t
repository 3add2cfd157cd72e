#!/usr/bin/env bash
# Mixed precision (precision=bf16: matmuls in bf16 through oneDNN, the rest
# fp32) and loom-train's clock: the refusal on a CPU without bf16 (simulated
# with LOOM_NO_BF16=1), the ETA in the log and progress lines, the dry-run
# time estimate, the OPENBLAS_CORETYPE warning; on a CPU with bf16: a bf16
# run tracks the fp32 loss, exact resume after SIGKILL, checkpoints stay
# fp32, loom-eval --precision.
. "$(dirname "$0")/lib.sh"

F=$T/frames
FR=136                      # bytes per frame: 64 + 4 x 9 x 2
make_frames 4 9 60 128 1 > "$F"
export OMP_NUM_THREADS=2

# --- on any CPU ---------------------------------------------------------------
LOOM_NO_BF16=1 run loom-train -c tiny --set precision=bf16 --steps 5 < "$F"
is_rc 1 "precision=bf16 on a CPU without bf16 (LOOM_NO_BF16=1): exit 1"
like "$err" '^loom-train: precision=bf16: bf16 matmul is unavailable \(LOOM_NO_BF16 is set\)$' \
	"the refusal names what is missing"
is "$(wc -l < "$err")" 1 "in one line"
LOOM_NO_BF16=1 run loom-train --dry-run -c tiny --set precision=bf16
is_rc 1 "--dry-run refuses it too"
run loom-train -q -c tiny --set precision=bf17 < "$F"
is_rc 2 "an unknown precision is a usage error"
like "$err" '^loom-train: precision: must be one of fp32\|bf16' "naming the choices"
LOOM_NO_BF16=1 run loom-train --print-config -c tiny --set precision=bf16
like "$out" '"precision": "bf16"' "--print-config shows the key (no CPU check)"

run loom-train -c tiny --steps 10 --log-every 5 --log "$T/eta.json" < "$F"
like "$err" '^loom-train: step 5/10 loss [0-9.]+ lr .* tok/s ETA [0-9]+:[0-9][0-9](:[0-9][0-9])?$' "progress line carries the ETA"
is "$(grep -c '"eta_s":[0-9.]*}$' "$T/eta.json")" 10 "every log line carries eta_s"
like "$T/eta.json" '"step":10,.*"eta_s":0\.0}' "ETA 0 at the last step"

run loom-train --dry-run -c tiny --steps 1000
is_rc 0 "--dry-run"
like "$out" '^matmul probe: [0-9.]+ GFLOP/s \(fp32, 32x64x256, [0-9]+ threads?\)$' "dry-run probes the matmul rate"
like "$out" '^time per step: [0-9.]+(s|m|h|d).* \(at MFU 0\.[0-9]+' "dry-run: time per step"
like "$out" '^time of the run: .* \(1000 steps\)$' "dry-run: time of the run"

# OPENBLAS_CORETYPE weaker than the CPU: said once, honoured, not under -q
if grep -qw avx /proc/cpuinfo; then
	OPENBLAS_CORETYPE=Prescott run loom-train -v -c tiny --steps 2 < "$F"
	is_rc 0 "OPENBLAS_CORETYPE=Prescott on a CPU with AVX trains"
	like "$err" "^loom-train: OPENBLAS_CORETYPE=Prescott holds OpenBLAS to weaker kernels than this CPU runs \((Sandybridge|Haswell|SkylakeX):" \
		"the weaker core is named in one line"
	is "$(grep -c OPENBLAS_CORETYPE "$err")" 1 "once"
	like "$err" "^loom-train: OpenBLAS core 'Prescott'" "the user's choice is honoured"
	OPENBLAS_CORETYPE=Prescott run loom-train -q -c tiny --steps 2 < "$F"
	is "$(cat "$err")" "" "-q: no warning"
else
	skip 1 "no AVX: no weaker OpenBLAS core to choose"
fi

# --- bf16 hardware ------------------------------------------------------------
if ! grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
	skip 1 "this CPU has no bf16 matmul (avx512_bf16, amx_bf16)"
	done_testing
	exit
fi

# a learnable stream with noise (the loss has a floor well above 0)
make_frames 4 9 300 128 3 --noise 0.3 > "$T/learn"
run loom-train -q -c tiny --steps 300 --log "$T/f32.json" < "$T/learn"
is_rc 0 "fp32: 300 steps"
run loom-train -q -c tiny --steps 300 --set precision=bf16 --log "$T/b16.json" < "$T/learn"
is_rc 0 "bf16: 300 steps"
mean_tail() { losses "$1" | tail -20 | awk '{ s += $2 } END { printf "%.6f", s / NR }'; }
a=$(mean_tail "$T/f32.json"); b=$(mean_tail "$T/b16.json")
ok "bf16 tracks fp32 within 2% after 300 steps (mean of steps 281-300: $b vs $a)" \
	/usr/bin/python3 -c "import sys; sys.exit(not abs($b - $a) <= 0.02 * $a)"
ok "and the losses are bf16's own (not the fp32 run's)" test "$(losses "$T/b16.json")" != "$(losses "$T/f32.json")"
run loom-train -q -c tiny --steps 300 --set precision=bf16 --log "$T/b16b.json" < "$T/learn"
is "$(losses "$T/b16b.json")" "$(losses "$T/b16.json")" "bf16: same data + seed + threads: bit-identical losses"
run loom-train -v -c tiny --steps 1 --set precision=bf16 < "$F"
like "$err" "bf16 matmuls \(oneDNN\)" "-v names the bf16 matmul backend"

# exact resume after SIGKILL, in bf16
run loom-train -q -c tiny --steps 40 --set precision=bf16 --log "$T/full.json" < "$F"
mkfifo "$T/fifo"
( head -c $((FR * 23)) "$F"; exec sleep 60 ) > "$T/fifo" &
feeder=$! feeder_t=$(pid_token $!)
loom-train -q -c tiny --steps 40 --set precision=bf16 --save "$T/kill" --save-every 5 --log "$T/k1.json" < "$T/fifo" 2>/dev/null &
trainer=$! trainer_t=$(pid_token $!)
for _ in $(seq 1 400); do [ "$(wc -l 2>/dev/null < "$T/k1.json")" = 23 ] && [ "$(readlink "$T/kill/latest")" = step-00000020 ] && break; sleep 0.05; done
signal_ours KILL "$trainer_t" loom-train; wait $trainer 2>/dev/null
signal_ours TERM "$feeder_t"; wait $feeder 2>/dev/null
is "$(readlink "$T/kill/latest")" "step-00000020" "bf16: killed with SIGKILL after step 20's checkpoint"
like "$T/kill/latest/config.json" '"precision": "bf16"' "the checkpoint stores precision"
/usr/bin/python3 -c '
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
h = json.loads(f.read(n)); print(sorted({v["dtype"] for k, v in h.items() if k != "__metadata__"}))
' "$T/kill/latest/model.safetensors" > "$T/dtypes"
is "$(cat "$T/dtypes")" "['F32']" "and its weights in fp32 safetensors"
run loom-train -q --resume latest --save "$T/kill" --log "$T/k1.json" < "$F"
is_rc 0 "bf16: --resume latest"
is "$(losses "$T/k1.json")" "$(losses "$T/full.json")" \
	"bf16 resumed run: same loss, lr and grad norm at steps 21..40 as the uninterrupted run"

# loom-eval --precision
run loom-eval -c "$T/kill" < "$F"
is_rc 0 "loom-eval of a bf16 checkpoint (its precision)"
cp "$out" "$T/ev_b16"
run loom-eval -c "$T/kill" --precision fp32 < "$F"
is_rc 0 "loom-eval --precision fp32"
ok "bf16 and fp32 eval losses agree within 1%" /usr/bin/python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))["loss"]; b = json.load(open(sys.argv[2]))["loss"]
sys.exit(not (a != b and abs(a - b) <= 0.01 * b))' "$T/ev_b16" "$out"
LOOM_NO_BF16=1 run loom-eval -c "$T/kill" --precision bf16 < "$F"
is_rc 1 "loom-eval --precision bf16 on a CPU without bf16: exit 1"
like "$err" '^loom-eval: precision=bf16: bf16 matmul is unavailable' "named"
run loom-eval -c "$T/kill" --precision fp16 < "$F"
is_rc 2 "loom-eval --precision fp16: usage error"
done_testing
