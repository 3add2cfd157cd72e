#!/usr/bin/env bash
# BERT against an independent float64 forward (issue 20): loom's BERT
# question-answering model (lib/train/loom_bert.h) at the bert-tiny and
# bert-base shapes, random weights, written as a HuggingFace checkpoint
# (model.safetensors + config.json, build/bench/bert_ref), and its start/end
# logits for two rows (one padded) compared with tests/bench/bert_ref.py:
# modeling_bert.py's equations in plain torch (python3-torch; transformers
# is not needed) in float64.  Target: max |diff| <= 1e-4 at every position.
# Env: PRESETS (default "bert-tiny bert-base"), THREADS (default 2).
set -u
cd "$(dirname "$0")/../.."
PRESETS=${PRESETS:-bert-tiny bert-base}
THREADS=${THREADS:-2}
PY=/usr/bin/python3
BIN=${LOOM_BUILD:-build}/bench/bert_ref
[ -x "$BIN" ] || { echo "$BIN not built (make bench)"; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/loom-bench-bert.XXXXXX")
trap 'rm -rf "$W"' EXIT

if ! $PY -c 'import torch' 2>/dev/null && [ "$(id -u)" = 0 ]; then
	echo "installing python3-torch for the reference forward ..."
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null 2>&1; }
fi
if ! $PY -c 'import torch' 2>/dev/null; then
	echo "FIGURE BERT QA logits vs float64 PyTorch: SKIPPED (python3-torch unavailable)"
	exit 0
fi

for p in $PRESETS; do
	mkdir -p "$W/$p"
	OMP_NUM_THREADS=$THREADS "$BIN" "$p" "$W/$p" >"$W/$p.json" || exit 1
	out=$(OMP_NUM_THREADS=$THREADS $PY tests/bench/bert_ref.py check "$W/$p" "$W/$p.json") || exit 1
	echo "$p: $out"
	echo "$out" | awk -v p="$p" '{
		printf "FIGURE %s QA start/end logits vs float64 PyTorch: max |diff| %.2g (target <= 1e-4) %s\n",
			p, $2, $2 <= 1e-4 ? "ok" : "MISSED" }'
	rm -rf "${W:?}/$p"
done
