#!/usr/bin/env bash
# BERT training speed (issue 20): a bert-base question-answering training
# step (forward with dropout, backward, AdamW; build/bench/bert_step) at
# B x T (default 2 x 384, one row in four padded) in fp32, and bf16 where
# the CPU has bf16 matrix instructions, against the same step in PyTorch
# (tests/bench/bert_ref.py step: modeling_bert.py's equations, fp32,
# torch.set_num_threads(THREADS)).  Target: PyTorch's step time >= 2x
# loom's (fp32).  The machine is shared: loom and PyTorch alternate for
# ROUNDS rounds and each keeps its best step.
# Env: PRESET (bert-base), B (2), T (384), STEPS (timed steps per run after
# a warm-up, 2), ROUNDS (2), THREADS (2).
set -u
cd "$(dirname "$0")/../.."
PRESET=${PRESET:-bert-base}
B=${B:-2}
T=${T:-384}
STEPS=${STEPS:-2}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-2}
PY=/usr/bin/python3
BIN=${LOOM_BUILD:-build}/bench/bert_step
[ -x "$BIN" ] || { echo "$BIN not built (make bench)"; exit 1; }
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"

precs=fp32
grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo && precs="fp32 bf16"
have_torch=0
$PY -c 'import torch' 2>/dev/null && have_torch=1

declare -A best
keep() { # name ms
	local cur=${best[$1]:-}
	if [ -z "$cur" ] || awk -v a="$2" -v b="$cur" 'BEGIN { exit !(a < b) }'; then
		best[$1]=$2
	fi
}
for r in $(seq "$ROUNDS"); do
	for p in $precs; do
		out=$(OMP_NUM_THREADS=$THREADS "$BIN" "$PRESET" "$B" "$T" "$p" "$STEPS") || exit 1
		echo "round $r loom $p: $out"
		keep "loom $p" "$(echo "$out" | awk '{print $2}')"
	done
	if [ $have_torch = 1 ]; then
		out=$(OMP_NUM_THREADS=$THREADS $PY tests/bench/bert_ref.py step "$PRESET" "$B" "$T" "$STEPS" "$THREADS") || exit 1
		echo "round $r PyTorch fp32: $out"
		keep torch "$(echo "$out" | awk '{print $2}')"
	fi
done

. tests/bench/fig.bash
tok=$((B * T))
for p in $precs; do
	ms=${best["loom $p"]}
	awk -v n="$PRESET $p" -v ms="$ms" -v tok="$tok" -v b="$B" -v t="$T" 'BEGIN {
		printf "bert-step: %s training step at B=%d T=%d: %.0f ms, %.0f tokens/s\n", n, b, t, ms, tok / (ms / 1e3) }'
done
[ "$precs" = fp32 ] && echo "bert-step: $PRESET bf16 training step: skipped (no bf16 matrix instructions on this CPU)"
if [ $have_torch = 1 ]; then
	awk -v n="$PRESET" -v ms="${best[torch]}" -v tok="$tok" 'BEGIN {
		printf "bert-step: %s PyTorch fp32 training step: %.0f ms, %.0f tokens/s\n", n, ms, tok / (ms / 1e3) }'
	fig "$PRESET training step vs PyTorch (fp32), times faster" \
		"$(awk -v ms="${best[torch]}" -v l="${best["loom fp32"]}" 'BEGIN { printf "%.2f", ms / l }')" ">=" 2 x
else
	echo "bert-step: $PRESET training step vs PyTorch: skipped (python3-torch unavailable)"
fi
