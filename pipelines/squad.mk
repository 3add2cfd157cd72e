# pipelines/squad.mk - a SQuAD v1.1 training file -> a fine-tuned BERT ->
# predictions on the dev file, scored as the official v1.1 script does.
#
#   make -f pipelines/squad.mk TRAIN=train-v1.1.json DEV=dev-v1.1.json OUT=squad \
#        [INIT=bert-base-uncased/] [CONFIG=squad-base] [VOCAB=bert-base-uncased]
#        [SEQ=384] [STRIDE=128] [MAX_QUERY=64] [EPOCHS=2] [STEPS=N] [SEED=1]
#        [SET=key=value,...] [KEEP_BEST=eval/f1 [EVAL_DEV=dev-subset.json]
#        [EVAL_EVERY=N]]
#
# INIT is a HuggingFace BERT directory (config.json + model.safetensors,
# e.g. bert-base-uncased fetched with loom-fetch by URL) or a loom
# checkpoint; without it the model starts from the seed.  CONFIG is a
# loom-train preset or file (squad-base: global batch 32, lr 3e-5, warm-up
# over 10% of the steps then linear decay; squad-large: global batch 128),
# SET more loom-train keys.  The steps are EPOCHS passes over the training
# features at the configuration's global batch, rounded down (EPOCHS may
# be a fraction, as run_qa.py's num_train_epochs: 0.5 is half a pass);
# STEPS= (or steps=N in SET) caps the run by steps instead, as run_qa.py's
# max_steps overrides num_train_epochs (STEPS and a different steps= in
# SET: refused).  The features' windows (SEQ, STRIDE, MAX_QUERY) are
# recorded in the checkpoint and the predictions use the same.
#
# KEEP_BEST=METRIC (eval/f1, eval/exact_match or eval/loss; empty: off)
# evaluates during training, as run_qa.py's --do_eval with
# load_best_model_at_end: every EVAL_EVERY steps (default: once a pass
# over the training features; a shorter run: once, at its end) loom-train scores
# EVAL_DEV (a SQuAD file, default DEV; a subset of it is quicker) with
# --eval-squad, its loss on EVAL_DEV's features with --eval-data, and
# keeps the checkpoint of the best METRIC as $(OUT)/ckpt/best
# (--keep-best); the predictions are then made with it.
#
# Stages, each a real file, so an interrupted run resumes where it stopped
# and a finished one does nothing (`make -q` is true):
#   $(OUT)/train/train.manifest.json   features of TRAIN      loom-squad prepare
#   $(OUT)/evaldev/evaldev.manifest.json  of EVAL_DEV (KEEP_BEST only)
#   $(OUT)/ckpt/done                   the fine-tuned model   loom-feed --manifest | loom-train
#                                      ($(OUT)/ckpt/latest; KEEP_BEST:
#                                      $(OUT)/ckpt/best, predicted with)
#   $(OUT)/predictions.json            {id: answer} of DEV    loom-eval squad -c
#   $(OUT)/score.json                  {"exact_match", "f1"}  (loom-eval's line)
# `make -f pipelines/squad.mk ... ckpt` stops after training.  Each stage
# also depends on the variables that shape it, kept in a file
# $(OUT)/.STAGE.vars that is rewritten only when the stage is redone: the
# features on TRAIN VOCAB SEQ STRIDE MAX_QUERY, the model on the features
# and CONFIG SET INIT EPOCHS STEPS SEED VOCAB (and KEEP_BEST EVAL_DEV
# EVAL_EVERY), EVAL_DEV's features on EVAL_DEV VOCAB SEQ STRIDE MAX_QUERY,
# the predictions on the model and DEV SEQ STRIDE MAX_QUERY.  Another value redoes exactly the stages it
# shapes and those after them (the model from the start: its old
# checkpoints are removed); the values a stage was made with redo nothing.
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
MAX_QUERY ?= 64
EPOCHS  ?= 2
STEPS   ?=
SEED    ?= 1
SET     ?=
KEEP_BEST ?=
EVAL_DEV ?= $(DEV)
EVAL_EVERY ?=

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DELETE_ON_ERROR:

HERE := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
include $(HERE)/vars.mk
$(foreach v,SEQ STRIDE MAX_QUERY STEPS SEED EVAL_EVERY,$(call loom_check,$v,$(chars_num),a whole number))
$(call loom_check,EPOCHS,$(chars_num) .,a number of passes (2$(comma) 0.5))
$(foreach v,TRAIN DEV OUT INIT CONFIG VOCAB LOOM_BIN KEEP_BEST EVAL_DEV,$(call loom_check,$v,$(chars_path),a plain path (letters digits ._/+@$(comma)-)))
$(call loom_check,SET,$(chars_flag),key=value$(comma)... (letters digits ._/+@$(comma)=:-))
$(foreach v,TRAIN DEV OUT CONFIG VOCAB SEQ STRIDE MAX_QUERY EPOCHS SEED,$(call loom_need,$v))
# steps=N in SET: the run's steps, as STEPS=N
SET_STEPS := $(patsubst steps=%,%,$(filter steps=%,$(subst $(comma), ,$(SET))))
$(if $(and $(STEPS),$(SET_STEPS),$(filter-out $(STEPS),$(SET_STEPS))),$(error STEPS=$(STEPS) but SET has steps=$(SET_STEPS): give one))
RUN_STEPS := $(or $(STEPS),$(SET_STEPS))

# The variables that shape each stage, and what each was last made with
# ($(OUT)/.STAGE.vars, written when the stage is made): a stage whose
# values differ depends on FORCE, so it is redone, and what depends on it
FEATURES_VARS := TRAIN=$(TRAIN) VOCAB=$(VOCAB) SEQ=$(SEQ) STRIDE=$(STRIDE) MAX_QUERY=$(MAX_QUERY)
CKPT_VARS := CONFIG=$(CONFIG) SET=$(SET) INIT=$(INIT) EPOCHS=$(EPOCHS) STEPS=$(RUN_STEPS) SEED=$(SEED) VOCAB=$(VOCAB)$(if $(KEEP_BEST), KEEP_BEST=$(KEEP_BEST) EVAL_DEV=$(EVAL_DEV) EVAL_EVERY=$(EVAL_EVERY))
EVALDEV_VARS := EVAL_DEV=$(EVAL_DEV) VOCAB=$(VOCAB) SEQ=$(SEQ) STRIDE=$(STRIDE) MAX_QUERY=$(MAX_QUERY)
PRED_VARS := DEV=$(DEV) SEQ=$(SEQ) STRIDE=$(STRIDE) MAX_QUERY=$(MAX_QUERY)
changed = $(if $(shell [ "$$(cat '$(OUT)/.$1.vars' 2>/dev/null)" = '$($2)' ] && echo same),,FORCE)
remember = printf '%s\n' '$($2)' > '$(OUT)/.$1.vars'

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
$(OUT)/train/train.manifest.json: $(TRAIN) $(call changed,features,FEATURES_VARS)
	'$(SQUAD)' prepare --vocab '$(VOCAB)' --seq $(SEQ) --stride $(STRIDE) \
	  --max-query $(MAX_QUERY) '$(TRAIN)' -o '$(OUT)/train/train'
	$(call remember,features,FEATURES_VARS)

# the steps and loom-feed's passes, "steps epochs": b = records //
# micro_batch batches a pass, b x EPOCHS // grad_accum steps (or STEPS),
# as many passes as they take
plan = /usr/bin/python3 -c 'import json, math, sys; \
b = json.load(open(sys.argv[1]))["records"] // int(sys.argv[2]); ga = int(sys.argv[3]); \
s = int(sys.argv[5]) if sys.argv[5] else int(b * float(sys.argv[4])) // ga; \
print(s, max(1, math.ceil(s * ga / b)) if b else 0)'

# 1b. KEEP_BEST: EVAL_DEV's features, for loom-train --eval-data
EVALDEV := $(OUT)/evaldev/evaldev.manifest.json
$(EVALDEV): $(EVAL_DEV) $(call changed,evaldev,EVALDEV_VARS)
	'$(SQUAD)' prepare --vocab '$(VOCAB)' --seq $(SEQ) --stride $(STRIDE) \
	  --max-query $(MAX_QUERY) '$(EVAL_DEV)' -o '$(OUT)/evaldev/evaldev'
	$(call remember,evaldev,EVALDEV_VARS)

# KEEP_BEST: loom-train's evaluations (every $$every steps) and promotion
BEST_ARGS = $(if $(KEEP_BEST),--eval-data '$(EVALDEV)' --eval-squad '$(EVAL_DEV)' \
	--eval-every $$every --keep-best '$(KEEP_BEST)')

# 2. fine-tuning: EPOCHS passes (or STEPS steps) of micro_batch x
# grad_accum features a step, from the start
$(OUT)/ckpt/done: $(OUT)/train/train.manifest.json $(if $(KEEP_BEST),$(EVALDEV)) $(call changed,ckpt,CKPT_VARS)
	mb=$(call cfg,micro_batch); ga=$(call cfg,grad_accum); \
	records=$$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records"])' '$<'); \
	read -r steps epochs < <($(plan) '$<' $$mb $$ga '$(EPOCHS)' '$(RUN_STEPS)'); \
	[ "$$steps" -gt 0 ] || { echo "squad.mk: $$records features make no step of $$mb x $$ga" >&2; exit 1; }; \
	every=$(or $(EVAL_EVERY),$$(( records / mb / ga < 1 ? 1 : records / mb / ga ))); \
	[ "$$every" -le "$$steps" ] || every=$$steps; \
	rm -rf '$(OUT)/ckpt'; \
	'$(FEED)' -q --manifest '$<' --batch $$mb --seed $(SEED) --epochs $$epochs \
	  | '$(TRAINER)' $(TRAIN_CFG) --set doc_stride=$(STRIDE),max_query=$(MAX_QUERY) \
	      --steps $$steps --vocab '$(VOCAB)' $(BEST_ARGS) \
	      $(if $(INIT),--init-from '$(INIT)') --save '$(OUT)/ckpt' --log '$(OUT)/train.jsonl'
	date -u +%FT%TZ > '$@.tmp' && mv '$@.tmp' '$@'
	$(call remember,ckpt,CKPT_VARS)

# 3. the dev set's answers with the training windows (with the best
# checkpoint when there is one), and their score (loom-eval prints the
# official script's line on stdout)
$(OUT)/predictions.json $(OUT)/score.json &: $(OUT)/ckpt/done $(DEV) $(call changed,predictions,PRED_VARS)
	ck='$(OUT)/ckpt/best'; [ -e "$$ck" ] || ck='$(OUT)/ckpt/latest'; \
	'$(EVAL)' squad -c "$$ck" --data '$(DEV)' --seq $(SEQ) --stride $(STRIDE) \
	  --max-query $(MAX_QUERY) --predictions '$(OUT)/predictions.json' > '$(OUT)/score.json.tmp'
	mv '$(OUT)/score.json.tmp' '$(OUT)/score.json'
	$(call remember,predictions,PRED_VARS)

FORCE:
