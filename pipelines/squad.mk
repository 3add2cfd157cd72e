# pipelines/squad.mk - a SQuAD v1.1 training file -> a fine-tuned BERT ->
# predictions on the dev file, scored as the official v1.1 script does.
#
#   make -f pipelines/squad.mk TRAIN=train-v1.1.json DEV=dev-v1.1.json OUT=squad \
#        [INIT=bert-base-uncased/] [CONFIG=squad-base] [VOCAB=bert-base-uncased]
#        [SEQ=384] [STRIDE=128] [EPOCHS=2] [SEED=1] [SET=key=value,...]
#
# INIT is a HuggingFace BERT directory (config.json + model.safetensors,
# e.g. bert-base-uncased fetched with loom-fetch by URL) or a loom
# checkpoint; without it the model starts from the seed.  CONFIG is a
# loom-train preset or file (squad-base: global batch 32, lr 3e-5, warm-up
# over 10% of the steps then linear decay; squad-large: global batch 128),
# SET more loom-train keys.  The steps are EPOCHS passes over the training
# features at the configuration's global batch.
#
# Stages, each a real file, so an interrupted run resumes where it stopped
# and a finished one does nothing (`make -q` is true):
#   $(OUT)/train/train.manifest.json   features of TRAIN      loom-squad prepare
#   $(OUT)/ckpt/done                   the fine-tuned model   loom-feed --manifest | loom-train
#                                      ($(OUT)/ckpt/latest)
#   $(OUT)/predictions.json            {id: answer} of DEV    loom-eval squad -c
#   $(OUT)/score.json                  {"exact_match", "f1"}  (loom-eval's line)
# `make -f pipelines/squad.mk ... ckpt` stops after training.
#
# Every variable given on the command line or in the environment must be
# plain (paths of letters, digits and ._/+@,-, numbers, SET of key=value
# words): make stops with one line naming a variable that is not.

TRAIN   ?=
DEV     ?=
OUT     ?= squad
INIT    ?=
CONFIG  ?= squad-base
VOCAB   ?= bert-base-uncased
SEQ     ?= 384
STRIDE  ?= 128
EPOCHS  ?= 2
SEED    ?= 1
SET     ?=

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DELETE_ON_ERROR:

HERE := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
include $(HERE)/vars.mk
$(foreach v,SEQ STRIDE EPOCHS SEED,$(call loom_check,$v,$(chars_num),a whole number))
$(foreach v,TRAIN DEV OUT INIT CONFIG VOCAB LOOM_BIN,$(call loom_check,$v,$(chars_path),a plain path (letters digits ._/+@$(comma)-)))
$(call loom_check,SET,$(chars_flag),key=value$(comma)... (letters digits ._/+@$(comma)=:-))
$(foreach v,TRAIN DEV OUT CONFIG VOCAB SEQ STRIDE EPOCHS SEED,$(call loom_need,$v))

SQUAD := $(LOOM_BIN)loom-squad
FEED  := $(LOOM_BIN)loom-feed
TRAINER := $(LOOM_BIN)loom-train
EVAL  := $(LOOM_BIN)loom-eval

# loom-train's configuration: CONFIG, SET and the run's seed
TRAIN_CFG = -c '$(CONFIG)' --seed $(SEED) $(if $(SET),--set '$(SET)')
# a key of the resolved configuration
cfg = $$('$(TRAINER)' $(TRAIN_CFG) --print-config | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["$1"])')

.PHONY: all features ckpt predictions
all: $(OUT)/score.json
features: $(OUT)/train/train.manifest.json
ckpt: $(OUT)/ckpt/done
predictions: $(OUT)/predictions.json

# 1. the training features (shards + index + manifest, committed atomically)
$(OUT)/train/train.manifest.json: $(TRAIN)
	'$(SQUAD)' prepare --vocab '$(VOCAB)' --seq $(SEQ) --stride $(STRIDE) '$(TRAIN)' \
	  -o '$(OUT)/train/train'

# 2. fine-tuning: EPOCHS passes of micro_batch x grad_accum features a step
$(OUT)/ckpt/done: $(OUT)/train/train.manifest.json
	mb=$(call cfg,micro_batch); ga=$(call cfg,grad_accum); \
	records=$$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records"])' '$<'); \
	steps=$$(( records / mb * $(EPOCHS) / ga )); \
	[ "$$steps" -gt 0 ] || { echo "squad.mk: $$records features make no step of $$mb x $$ga" >&2; exit 1; }; \
	'$(FEED)' -q --manifest '$<' --batch $$mb --seed $(SEED) --epochs $(EPOCHS) \
	  | '$(TRAINER)' $(TRAIN_CFG) --steps $$steps --vocab '$(VOCAB)' \
	      $(if $(INIT),--init-from '$(INIT)') --save '$(OUT)/ckpt' --log '$(OUT)/train.jsonl'
	date -u +%FT%TZ > '$@.tmp' && mv '$@.tmp' '$@'

# 3. the dev set's answers, and their score (loom-eval prints the official
# script's line on stdout)
$(OUT)/predictions.json $(OUT)/score.json &: $(OUT)/ckpt/done $(DEV)
	'$(EVAL)' squad -c '$(OUT)/ckpt/latest' --data '$(DEV)' \
	  --predictions '$(OUT)/predictions.json' > '$(OUT)/score.json.tmp'
	mv '$(OUT)/score.json.tmp' '$(OUT)/score.json'
