#!/usr/bin/env bash
# pipelines/squad.mk: a SQuAD file -> loom-squad prepare -> loom-feed
# --manifest | loom-train (bert-tiny, a few steps) -> loom-eval squad -c ->
# predictions and their score; stages are files (a finished run does
# nothing; a changed variable redoes exactly the stages it shapes),
# variables are checked; EPOCHS fractions, STEPS, steps= in SET; the
# predictions use the training windows, recorded in the checkpoint.
. "$(dirname "$0")/lib.sh"
cd "$T"
export OMP_NUM_THREADS=1
BIN=$(dirname "$(command -v loom-train)")/
make_squad sq.json vocab.txt
SQMK=$TESTS/../pipelines/squad.mk
V=(LOOM_BIN="$BIN" TRAIN=sq.json DEV=sq.json OUT=out CONFIG=bert-tiny VOCAB=vocab.txt SEQ=32 STRIDE=16
	SET=vocab_size=32,lr=2e-3)
MK="make -s -f $SQMK ${V[*]} EPOCHS=4"

run $MK ckpt
is_rc 0 "squad.mk ckpt: features and fine-tuning"
ok "  the features' manifest" test -f out/train/train.manifest.json
is "$(readlink out/ckpt/latest)" step-00000020 "  40 features / micro_batch 8 x 4 epochs: 20 steps"
like out/ckpt/latest/config.json '"BertForQuestionAnswering"' "  a HuggingFace BERT QA checkpoint"
same_file out/ckpt/latest/vocab.txt vocab.txt "  with its vocabulary"
is "$(wc -l < out/train.jsonl)" 20 "  the training log"
like out/ckpt/latest/config.json '"doc_stride": 16' "  the windows' stride recorded in the checkpoint"
run make -q -f "$SQMK" "${V[@]}" EPOCHS=4 ckpt
is_rc 0 "  done: make -q is true"

# a changed variable: exactly the stages it shapes
for v in EPOCHS=3 STEPS=5 SET=vocab_size=32,lr=1e-3 INIT=out/ckpt/latest CONFIG=bert-base SEED=2; do
	run make -q -f "$SQMK" "${V[@]}" EPOCHS=4 "$v" ckpt
	is_rc 1 "$v: make -q is false"
	run make -n -f "$SQMK" "${V[@]}" EPOCHS=4 "$v" ckpt
	like "$out" "loom-train" "  $v: fine-tuning redone"
	unlike "$out" "loom-squad" "  $v: the features are not"
done
cp sq.json sq2.json
for v in SEQ=24 STRIDE=8 MAX_QUERY=8 VOCAB=bert-base-uncased TRAIN=sq2.json; do
	run make -n -f "$SQMK" "${V[@]}" EPOCHS=4 "$v" ckpt
	like "$out" "loom-squad.* prepare" "$v: the features redone"
	like "$out" "loom-train" "  and the fine-tuning"
done
run make -q -f "$SQMK" "${V[@]}" EPOCHS=4 ckpt
is_rc 0 "back to the first values: make -q is true again"

run $MK EPOCHS=1.5 ckpt
is_rc 0 "EPOCHS=1.5"
is "$(readlink out/ckpt/latest)" step-00000007 "  5 batches a pass x 1.5: 7 steps (rounded down)"
ok "  the old checkpoints removed" test ! -e out/ckpt/step-00000020
run make -s -f "$SQMK" "${V[@]/SET=*/SET=vocab_size=32,lr=2e-3,steps=3}" ckpt
is_rc 0 "SET=...,steps=3"
is "$(readlink out/ckpt/latest)" step-00000003 "  3 steps: steps= in SET is not overridden"
run make -s -f "$SQMK" "${V[@]}" STEPS=12 ckpt
is_rc 0 "STEPS=12"
is "$(readlink out/ckpt/latest)" step-00000012 "  12 steps (3 passes fed)"
run make -s -f "$SQMK" "${V[@]/SET=*/SET=vocab_size=32,steps=3}" STEPS=4 ckpt
is_rc 2 "STEPS=4 and steps=3 in SET: refused"
like "$err" "STEPS=4 but SET has steps=3" "  naming both"
run make -s -f "$SQMK" "${V[@]}" EPOCHS=1e3 ckpt
is_rc 2 "EPOCHS=1e3: refused"

run make -s -f "$TESTS/../pipelines/squad.mk" TRAIN='a b.json' DEV=sq.json ckpt
is_rc 2 "a TRAIN with a space: refused"
like "$err" "TRAIN='a b.json' is not a plain path" "  naming the variable"
run make -s -f "$TESTS/../pipelines/squad.mk" DEV=sq.json ckpt
is_rc 2 "no TRAIN: refused"
like "$err" "TRAIN is empty" "  naming it"

run make -s -f "$SQMK" "${V[@]}" STEPS=12
is_rc 0 "squad.mk: predictions and score"
like out/score.json '^\{"exact_match": [0-9.]+, "f1": [0-9.]+\}$' "  the official script's line"
ok "  predictions for the 40 questions" /usr/bin/python3 -c \
	'import json; import sys; sys.exit(len(json.load(open("out/predictions.json"))) != 40)'
run make -q -f "$SQMK" "${V[@]}" STEPS=12
is_rc 0 "  done: make -q is true"
cp sq.json dev2.json
run make -n -f "$SQMK" "${V[@]}" STEPS=12 DEV=dev2.json
like "$out" "loom-eval.* squad" "DEV=dev2.json: the predictions redone"
unlike "$out" "loom-train|loom-squad" "  nothing else"

# KEEP_BEST=eval/f1: evaluations during training on EVAL_DEV (a subset of
# DEV here), the best checkpoint kept and predicted with
/usr/bin/python3 -c 'import json,sys; d=json.load(open("sq.json")); p=d["data"][0]["paragraphs"]
d["data"][0]["paragraphs"]=p[:10]; json.dump(d, open("sub.json", "w"))'
run make -s -f "$SQMK" "${V[@]}" STEPS=12 KEEP_BEST=eval/f1 EVAL_DEV=sub.json
is_rc 0 "KEEP_BEST=eval/f1 EVAL_DEV=sub.json"
like "$err" "loom-train: eval step 5: exact_match [0-9.]+ f1 [0-9.]+ \(10 questions, 10 features" \
	"  EVAL_DEV scored every pass (5 steps) with --eval-squad"
like "$err" "loom-train: best step 5: eval/f1 [0-9.]+ \(the first\): saved out/ckpt/best -> best-00000005" \
	"  the first evaluation promoted"
ok "  EVAL_DEV's features for --eval-data" test -f out/evaldev/evaldev.manifest.json
ok "  out/ckpt/best" test -e out/ckpt/best/model.safetensors
run loom-eval squad -q -c out/ckpt/best --data sq.json --predictions pbest.json
ok "  the predictions are the best checkpoint's" cmp -s pbest.json out/predictions.json
run make -q -f "$SQMK" "${V[@]}" STEPS=12 KEEP_BEST=eval/f1 EVAL_DEV=sub.json
is_rc 0 "  done: make -q is true"
for v in EVAL_EVERY=3 KEEP_BEST=eval/loss; do
	run make -n -f "$SQMK" "${V[@]}" STEPS=12 KEEP_BEST=eval/f1 EVAL_DEV=sub.json "$v"
	like "$out" "--eval-every [0-9a-z$]+ --keep-best 'eval.(f1|loss)'" "$v: fine-tuning redone, with --keep-best"
	unlike "$out" "loom-squad" "  nothing prepared again"
done
run make -n -f "$SQMK" "${V[@]}" STEPS=12 KEEP_BEST=eval/f1 EVAL_DEV=sq.json
like "$out" "'sq.json' -o 'out/evaldev/evaldev'" "EVAL_DEV=sq.json: its features made"
like "$out" "loom-train" "  and the fine-tuning redone"
run make -s -f "$SQMK" "${V[@]}" STEPS=12 KEEP_BEST=eval/bleu EVAL_DEV=sub.json
is_rc 2 "KEEP_BEST=eval/bleu: make fails"
like "$err" "^loom-train: --keep-best eval/bleu: not a metric" "  loom-train's line says why"
run make -s -f "$SQMK" "${V[@]}" STEPS=12
is_rc 0 "KEEP_BEST unset again: trained and predicted with the last checkpoint"
ok "  no best" test ! -e out/ckpt/best

# loom-eval squad -c takes the windows from the checkpoint
run loom-eval squad -c out/ckpt/latest --data sq.json --predictions p.json --logits l.jsonl
is_rc 0 "loom-eval squad -c on the checkpoint, no window options"
is "$(/usr/bin/python3 -c 'import json,sys; print(len(json.loads(open(sys.argv[1]).readline())["input_ids"]))' l.jsonl)" 32 \
	"  its features are the training ones (seq 32)"
ok "  the predictions squad.mk made" cmp -s p.json out/predictions.json

done_testing
