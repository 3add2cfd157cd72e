#!/usr/bin/env bash
# RigL figures (issue 13), measured in this one run: a sparse model
# (sparsity 0.9, blocks of 16, preset sparse-mlp or sparse-gpt) and the
# dense model of the same shape, trained the same steps on the same frames
# (tests/mkframes.py: a learnable rule), on THREADS threads:
#  - both final losses (mean of the last 5 steps) and eval-free curves;
#  - both tokens/s (the median step, the first two skipped) and their ratio:
#    the step time a user buys sparsity for.
# The vocabulary is VOCAB (default 4096, not GPT-2's 50257) so the LM head
# does not hide the projections; the masks update every 10 steps.
# Env: PRESETS ("sparse-mlp sparse-gpt"), STEPS (100), VOCAB (4096), THREADS (2).
set -u
cd "$(dirname "$0")/../.."
PRESETS=${PRESETS:-sparse-mlp sparse-gpt}
STEPS=${STEPS:-100}
VOCAB=${VOCAB:-4096}
THREADS=${THREADS:-2}
PY=/usr/bin/python3
W=$(mktemp -d "${TMPDIR:-/tmp}/loom-bench-sparse.XXXXXX")
trap 'rm -rf "$W"' EXIT
command -v loom-train >/dev/null || { echo "loom-train not on PATH (make bench)"; exit 1; }
B=8 T=256
$PY tests/mkframes.py $B $((T + 1)) "$STEPS" "$VOCAB" 1 > "$W/frames"
SET="vocab_size=$VOCAB,micro_batch=$B,seq_len=$T,steps=$STEPS,warmup_steps=5,prune_every=10"

train() { # preset name extra-set
	local PRESET=$1; shift
	loom-train -q -c "$PRESET" --threads "$THREADS" --log "$W/$1.json" --set "$SET$2" < "$W/frames" ||
		exit 1
	$PY - "$W/$1.json" $((B * T)) <<'PY'
import json, statistics, sys
rows = [d for d in map(json.loads, open(sys.argv[1])) if "loss" in d]
up = sum(1 for d in map(json.loads, open(sys.argv[1])) if "rigl_update" in d)
sec = statistics.median(r["seconds"] for r in rows[2:])
print("%.4f %.1f %d" % (statistics.mean(r["loss"] for r in rows[-5:]), int(sys.argv[2]) / sec, up))
PY
}
for PRESET in $PRESETS; do
	read -r ls ts us < <(train "$PRESET" sparse "")
	read -r ld td ud < <(train "$PRESET" dense ",sparsity=0")
	echo "preset $PRESET, vocab $VOCAB, B=$B T=$T, $STEPS steps, $THREADS threads; sparse run: $us mask updates"
	echo "FIGURE $PRESET sparse (0.9) final loss: $ls"
	echo "FIGURE $PRESET dense final loss: $ld"
	echo "FIGURE $PRESET sparse tokens/s: $ts"
	echo "FIGURE $PRESET dense tokens/s: $td"
	echo "FIGURE $PRESET sparse / dense tokens/s: $($PY -c "print('%.2f' % ($ts / $td))")x"
done
