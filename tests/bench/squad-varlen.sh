#!/usr/bin/env bash
# Rows at their real length (issue 29): loom-eval squad -c with a random
# bert-base checkpoint on the first six paragraphs of SQuAD's dev-v1.1
# (134 features) and, with BIG=1, its first 3 articles (1,192 features),
# against PyTorch fp32 inference of the same checkpoint on the same
# features (tests/bench/bert_ref.py predict): padded to 384 in batches of 8
# as run_squad.py predicts (goal >= 3x) and at each feature's real length
# one by one, a PyTorch user's dynamic padding (goal >= 1.3x); the full dev
# set's time at loom's rate (goal < 45 min); then fine-tuning at
# micro-batch 8 (qa_loss=real): real tokens/s against PyTorch's padded
# step (goal >= 3x).
# Needs ../shared (the dev set, BERT's vocab.txt) and python3-torch
# (installed when root).  Env: THREADS (default 2), BIG.
set -u
cd "$(dirname "$0")/../.."
SHARED=${LOOM_SHARED:-$PWD/../shared}
DEV=$SHARED/data/squad/dev-v1.1.json VOCAB=$SHARED/data/bert/vocab.txt
THREADS=${THREADS:-2}
PY=/usr/bin/python3
. tests/bench/fig.bash
[ -f "$DEV" ] && [ -f "$VOCAB" ] || { echo "squad-varlen: $DEV or $VOCAB missing: skipped"; exit 0; }
command -v loom-eval >/dev/null || { echo "loom-eval not on PATH (make bench)"; exit 1; }
if ! $PY -c 'import torch' 2>/dev/null && [ "$(id -u)" = 0 ]; then
	echo "installing python3-torch for the reference runs ..."
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null 2>&1; }
fi
have_torch=0
$PY -c 'import torch' 2>/dev/null && have_torch=1 &&
	echo "reference: PyTorch $($PY -c 'import torch; print(torch.__version__)') fp32, $THREADS threads"
W=$(mktemp -d "${TMPDIR:-/tmp}/loom-bench-varlen.XXXXXX")
trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=$THREADS

$PY - "$DEV" "$W" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
a0 = d["data"][0]
json.dump({"version": "1.1", "data": [dict(a0, paragraphs=a0["paragraphs"][:6])]},
          open(sys.argv[2] + "/six.json", "w"))
json.dump({"version": "1.1", "data": d["data"][:3]}, open(sys.argv[2] + "/three.json", "w"))
PY
sets=six
[ -n "${BIG:-}" ] && sets="six three"
for s in six three; do
	loom-squad prepare -q --vocab "$VOCAB" "$W/$s.json" -o "$W/$s" || exit 1
	loom-cat "$W/$s"-*.tfrecord > "$W/$s.jsonl" || exit 1
done
# a random bert-base QA checkpoint: one step of squad-base
loom-feed -q --manifest "$W/six.manifest.json" --batch 2 --seed 1 |
	loom-train -q -c squad-base --set micro_batch=2,grad_accum=1,warmup_steps=0 --steps 1 \
		--threads "$THREADS" --vocab "$VOCAB" --save "$W/ck" || exit 1
avg=$($PY -c 'import json,sys
m = [sum(json.loads(l)["input_mask"]) for l in open(sys.argv[1])]
print("%.1f" % (sum(m) / len(m)))' "$W/six.jsonl")
echo "features of six paragraphs: $(wc -l < "$W/six.jsonl"), $avg real tokens of 384 on average"

rate() { $PY -c "print('%.3f' % ($1 / $2))"; }
for s in $sets; do
	n=$(wc -l < "$W/$s.jsonl")
	loom-eval squad -c "$W/ck/latest" --data "$W/$s.json" --predictions "$W/p.json" \
		-j "$THREADS" > /dev/null 2> "$W/err" || { cat "$W/err"; exit 1; }
	secs=$(sed -n 's/.* features, \([0-9.]*\) s;.*/\1/p' "$W/err")
	loom=$(rate "$n" "$secs")
	echo "$s: loom-eval squad -c: $n features in ${secs}s, $loom features/s"
	if [ "$s" = six ]; then
		fig "full dev set (10,833 features) at loom-eval's rate, $THREADS threads" \
			"$($PY -c "print('%.1f' % (10833 / $loom / 60))")" "<=" 45 " min"
	fi
	[ "$have_torch" = 1 ] || { echo "FIGURE squad $s vs PyTorch: SKIPPED (python3-torch unavailable)"; continue; }
	for m in padded real; do
		t=$($PY tests/bench/bert_ref.py predict "$W/ck/latest" "$W/$s.jsonl" $m "$THREADS" |
			sed -n 's/.*features_per_s //p')
		echo "$s: PyTorch fp32 $m: $t features/s"
		if [ $m = padded ]; then
			fig "squad -c $s, features/s vs PyTorch padded to 384 (batches of 8)" "$(rate "$loom" "$t")" ">=" 3 "x"
		else
			fig "squad -c $s, features/s vs PyTorch at real lengths one by one" "$(rate "$loom" "$t")" ">=" 1.3 "x"
		fi
	done
done

# fine-tuning at micro-batch 8: loom's step over real tokens only, which
# the QA loss over each row's real tokens (qa_loss=real) allows; the
# default, HuggingFace's loss over all positions, reads the padding's
# logits and so computes it
loom-feed -q --manifest "$W/six.manifest.json" --batch 8 --seed 2 --epochs 0 |
	loom-train -q -c squad-base --set micro_batch=8,grad_accum=1,warmup_steps=0,qa_loss=real --steps 4 \
		--threads "$THREADS" --log "$W/log" || exit 1
step=$($PY -c 'import json,sys
r = [json.loads(l)["seconds"] for l in open(sys.argv[1]) if "\"loss\"" in l][1:]
print("%.3f" % min(r))' "$W/log")
lt=$($PY -c "print('%.1f' % (8 * $avg / $step))")
echo "fine-tuning bert-base micro-batch 8: loom ${step}s a step, ~$lt real tokens/s (8 x $avg on average)"
if [ "$have_torch" = 1 ]; then
	tt=$($PY tests/bench/bert_ref.py step bert-base 8 384 2 "$THREADS" | sed -n 's/.*tokens_per_s //p')
	treal=$($PY -c "print('%.1f' % ($tt * $avg / 384))")
	echo "fine-tuning bert-base: PyTorch padded $tt tokens/s, $treal of them real"
	fig "fine-tuning bert-base B8, real tokens/s vs PyTorch padded" "$(rate "$lt" "$treal")" ">=" 3 "x"
fi
