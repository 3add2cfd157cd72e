#!/usr/bin/env bash
# pipelines/squad.mk: a SQuAD file -> loom-squad prepare -> loom-feed
# --manifest | loom-train (bert-tiny, a few steps) -> loom-eval squad -c ->
# predictions and their score; stages are files (a finished run does
# nothing), variables are checked.
. "$(dirname "$0")/lib.sh"
cd "$T"
export OMP_NUM_THREADS=1
BIN=$(dirname "$(command -v loom-train)")/
make_squad sq.json vocab.txt
MK="make -s -f $TESTS/../pipelines/squad.mk LOOM_BIN=$BIN TRAIN=sq.json DEV=sq.json OUT=out
	CONFIG=bert-tiny VOCAB=vocab.txt SEQ=32 STRIDE=16 EPOCHS=4 SET=vocab_size=32,lr=2e-3"

run $MK ckpt
is_rc 0 "squad.mk ckpt: features and fine-tuning"
ok "  the features' manifest" test -f out/train/train.manifest.json
is "$(readlink out/ckpt/latest)" step-00000020 "  40 features / micro_batch 8 x 4 epochs: 20 steps"
like out/ckpt/latest/config.json '"BertForQuestionAnswering"' "  a HuggingFace BERT QA checkpoint"
same_file out/ckpt/latest/vocab.txt vocab.txt "  with its vocabulary"
is "$(wc -l < out/train.jsonl)" 20 "  the training log"
run make -q -f "$TESTS/../pipelines/squad.mk" LOOM_BIN="$BIN" TRAIN=sq.json DEV=sq.json \
	OUT=out CONFIG=bert-tiny VOCAB=vocab.txt SEQ=32 STRIDE=16 EPOCHS=4 SET=vocab_size=32,lr=2e-3 ckpt
is_rc 0 "  done: make -q is true"

run make -s -f "$TESTS/../pipelines/squad.mk" TRAIN='a b.json' DEV=sq.json ckpt
is_rc 2 "a TRAIN with a space: refused"
like "$err" "TRAIN='a b.json' is not a plain path" "  naming the variable"
run make -s -f "$TESTS/../pipelines/squad.mk" DEV=sq.json ckpt
is_rc 2 "no TRAIN: refused"
like "$err" "TRAIN is empty" "  naming it"

run $MK
is_rc 0 "squad.mk: predictions and score"
like out/score.json '^\{"exact_match": [0-9.]+, "f1": [0-9.]+\}$' "  the official script's line"
ok "  predictions for the 40 questions" /usr/bin/python3 -c \
	'import json; import sys; sys.exit(len(json.load(open("out/predictions.json"))) != 40)'

done_testing
