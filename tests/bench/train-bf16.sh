#!/usr/bin/env bash
# bf16 figures (issue 12), all measured in this one run, gpt2 preset at
# B=8, T=256 on THREADS threads:
#  - tokens/s of loom-train precision=bf16 against precision=fp32 (target
#    >= 1.8x) and against PyTorch bf16 autocast (python3-torch; >= 3x);
#  - the bf16 and fp32 matmul probe rates (loom-train --dry-run, the MLP
#    product 2048x768x3072) and the MFU of each precision against its own
#    probe (bf16 target >= 0.7).  The dry-run's assumed MFU comes from here.
# Runs alternate (ROUNDS) and each side keeps its best timed step: this
# machine is shared and its speed drifts.
# Env: STEPS (timed steps, default 3), ROUNDS (default 2), THREADS (2).
set -u
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-3}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-2}
PY=/usr/bin/python3
W=$(mktemp -d "${TMPDIR:-/tmp}/loom-bench-bf16.XXXXXX")
trap 'rm -rf "$W"' EXIT
command -v loom-train >/dev/null || { echo "loom-train not on PATH (make bench)"; exit 1; }
if ! grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
	echo "FIGURE bf16: skipped (this CPU has no avx512_bf16 or amx_bf16)"
	exit 0
fi
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(grep -owE 'amx_bf16|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
have_torch=0
$PY -c 'import torch' 2>/dev/null && have_torch=1
B=8 T=256
$PY tests/mkframes.py $B $((T + 1)) $((STEPS + 1)) 50257 1 > "$W/frames"

figure() { # name value target-op target unit
	local ok
	ok=$($PY -c "import sys; v,t=float(sys.argv[1]),float(sys.argv[3]); print('ok' if (v>=t if sys.argv[2]=='>=' else v<=t) else 'MISSED')" "$2" "$3" "$4")
	echo "FIGURE $1: $2$5 (target $3 $4$5) $ok"
}
best() { $PY -c "import sys; print(max(float(x) for x in sys.argv[1:]))" "$@"; }
probe() { # precision -> GFLOP/s
	loom-train --threads "$THREADS" --dry-run -c gpt2 --set "micro_batch=$B,seq_len=$T,precision=$1" |
		awk '/^matmul probe:/ {print $3}'
}
run_loom() { # precision -> best timed tokens/s
	loom-train -q -c gpt2 --threads "$THREADS" --log "$W/log" \
		--set "micro_batch=$B,seq_len=$T,grad_accum=1,warmup_steps=0,precision=$1" < "$W/frames" || exit 1
	$PY -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
print("%.2f" % (int(sys.argv[2]) / min(r["seconds"] for r in rows)))' "$W/log" $((B * T))
}

p32= p16= l32= l16= tb=
for r in $(seq "$ROUNDS"); do
	p32="$p32 $(probe fp32)"; p16="$p16 $(probe bf16)"
	x=$(run_loom fp32); l32="$l32 $x"; echo "round $r: loom-train fp32 $x tokens/s"
	x=$(run_loom bf16); l16="$l16 $x"; echo "round $r: loom-train bf16 $x tokens/s"
	if [ $have_torch = 1 ]; then
		x=$($PY tests/bench/train_torch.py $B $T $((STEPS + 1)) "$THREADS" bf16 2>/dev/null | awk '{print $2}')
		tb="$tb $x"; echo "round $r: pytorch bf16 autocast $x tokens/s"
	fi
	echo "round $r: matmul probes fp32 $p32 / bf16 $p16 GFLOP/s (so far)"
done
p32=$(best $p32) p16=$(best $p16) l32=$(best $l32) l16=$(best $l16)
params=$(loom-train --dry-run -c gpt2 | awk '/^parameters:/ {print $2}')
fpt=$($PY -c "print(6*$params + 12*12*$T*768)")
echo "best of $ROUNDS: loom fp32 $l32, loom bf16 $l16 tokens/s; probes fp32 $p32, bf16 $p16 GFLOP/s"
figure "bf16 matmul probe (2048x768x3072) vs fp32" "$($PY -c "print('%.2f' % ($p16 / $p32))")" ">=" 1.8 "x"
figure "loom-train gpt2 B=8,T=256 bf16 vs fp32 tokens/s" "$($PY -c "print('%.2f' % ($l16 / $l32))")" ">=" 1.8 "x"
figure "loom-train gpt2 B=8,T=256 bf16 MFU (bf16 probe $p16 GFLOP/s)" "$($PY -c "print('%.2f' % ($fpt * $l16 / ($p16 * 1e9)))")" ">=" 0.7 ""
echo "FIGURE loom-train gpt2 B=8,T=256 fp32 MFU against the fp32 probe ($p32 GFLOP/s): $($PY -c "print('%.2f' % ($fpt * $l32 / ($p32 * 1e9)))")"
if [ $have_torch = 1 ]; then
	tb=$(best $tb)
	figure "loom-train bf16 vs PyTorch bf16 autocast gpt2 B=8,T=256 tokens/s ($l16 vs $tb)" "$($PY -c "print('%.2f' % ($l16 / $tb))")" ">=" 3 "x"
else
	echo "FIGURE loom-train bf16 vs PyTorch bf16: skipped (python3-torch not installed)"
fi
