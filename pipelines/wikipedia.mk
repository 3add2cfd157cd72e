# pipelines/wikipedia.mk - Wikipedia dump -> verified TFRecord shards, as make targets.
#
#   make -f pipelines/wikipedia.mk WIKI=enwiki DATE=latest OUT=data \
#        [VOCAB=gpt2|train|DIR] [SEQ=2049] [SHARDS=64] [VAL=F] [MIRROR=URL] [DUMP=path] [JOBS=N]
#
# Stages, each a real file so an interrupted run resumes where it stopped
# and a finished one does nothing (`make -q` is true):
#   $(OUT)/$(NAME).dump            path of the fetched (or given) dump      loom-fetch
#   $(OUT)/$(NAME).txt             article text (VOCAB=train only)          loom-extract
#   $(OUT)/$(NAME).vocab/          trained vocabulary (VOCAB=train only)    loom-bpe train
#   $(OUT)/$(NAME)/                shards + .index + manifest               extract | encode | shard
#                                  (VAL=F: and a validation split of about F
#                                  of the records, $(NAME).val.manifest.json)
#   $(OUT)/$(NAME)/verified        every record's CRCs and index checked    loom-index
# extract | bpe encode | shard stream into each other; the shard directory
# is built under a temporary name and renamed only when the whole pipe
# succeeded (pipefail), so a failure upstream never leaves shards behind.
# Every tool writes its own outputs atomically, so `make -j` is safe.
#
# Every variable given on the command line or in the environment must be
# plain (WIKI a-z 0-9 _, DATE YYYYMMDD or latest, numbers, paths of
# letters, digits and ._/+@,-, MIRROR a URL, *_FLAGS such words and spaces;
# never a $): make stops with one line naming a variable that is not.
#
# DATE=latest is resolved once by loom-fetch (the real date is in the file
# names under $(OUT)/dumps); to move to a newer dump, name its DATE (that
# is what pipelines/retrain does) or remove $(OUT)/$(NAME).dump.

WIKI    ?= enwiki
DATE    ?= latest
OUT     ?= data
VOCAB   ?= gpt2
SEQ     ?= 2049
SHARDS  ?= 64
SEED    ?= 1
VAL     ?=
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
VOCAB_SIZE ?= 32000
MIRROR  ?=
DUMP    ?=
NAME    ?= $(WIKI)-$(DATE)
EXTRACT_FLAGS ?=
SHARD_FLAGS   ?=

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DELETE_ON_ERROR:

# The tools (LOOM_BIN) and the checks of the variables: pipelines/vars.mk.
HERE := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
include $(HERE)/vars.mk
$(call loom_check,WIKI,$(chars_name),a wiki name (a-z 0-9 _))
$(call loom_check,DATE,$(chars_name),YYYYMMDD or latest)
$(if $(filter-out latest,$(DATE)),$(call loom_check,DATE,$(chars_num),YYYYMMDD or latest))
$(if $(filter-out latest,$(DATE)),$(if $(filter 8,$(words $(call loom_spread,$(DATE),$(chars_num)))),,$(call loom_error,DATE,YYYYMMDD or latest)))
$(foreach v,SEQ SHARDS SEED JOBS VOCAB_SIZE,$(call loom_check,$v,$(chars_num),a whole number))
$(call loom_check,VAL,$(chars_num) .,a fraction such as 0.01)
$(foreach v,OUT VOCAB DUMP NAME LOOM_BIN,$(call loom_check,$v,$(chars_path),a plain path (letters digits ._/+@$(comma)-)))
$(call loom_check,MIRROR,$(chars_url),a plain URL (letters digits ._~:/@%+=$(comma)[]-))
$(foreach v,EXTRACT_FLAGS SHARD_FLAGS,$(call loom_check_words,$v,$(chars_flag),plain options (letters digits ._/+@$(comma)=:- and spaces)))
$(foreach v,WIKI DATE OUT VOCAB SEQ SHARDS SEED JOBS VOCAB_SIZE NAME,$(call loom_need,$v))

FETCH   := $(LOOM_BIN)loom-fetch
EXTRACT := $(LOOM_BIN)loom-extract
BPE     := $(LOOM_BIN)loom-bpe
SHARD   := $(LOOM_BIN)loom-shard
INDEX   := $(LOOM_BIN)loom-index

ifeq ($(VOCAB),train)
VOCAB_DIR   := $(OUT)/$(NAME).vocab
VOCAB_ARG   := $(VOCAB_DIR)
VOCAB_DEP   := $(VOCAB_DIR)/encoder.json
VOCAB_NTOK   = $$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' '$(VOCAB_DIR)/encoder.json')
TEXT_SOURCE  = cat '$(OUT)/$(NAME).txt'
TEXT_DEP    := $(OUT)/$(NAME).txt
else ifeq ($(VOCAB),gpt2)
VOCAB_ARG   := gpt2
VOCAB_DEP   :=
VOCAB_NTOK   = 50257
TEXT_SOURCE  = '$(EXTRACT)' -j $(JOBS) $(EXTRACT_FLAGS) "$$(cat '$(OUT)/$(NAME).dump')"
TEXT_DEP    :=
else ifneq ($(wildcard $(VOCAB)/encoder.json),)
# an existing vocabulary directory (encoder.json + vocab.bpe), e.g. one
# trained on an earlier dump, so token ids stay the same across dumps
VOCAB_DIR   := $(VOCAB)
VOCAB_ARG   := $(VOCAB)
VOCAB_DEP   := $(VOCAB)/encoder.json
VOCAB_NTOK   = $$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' '$(VOCAB_DIR)/encoder.json')
TEXT_SOURCE  = '$(EXTRACT)' -j $(JOBS) $(EXTRACT_FLAGS) "$$(cat '$(OUT)/$(NAME).dump')"
TEXT_DEP    :=
else
$(error VOCAB must be gpt2, train or a directory with encoder.json, not '$(VOCAB)')
endif

.PHONY: all shards fetch clean-tmp
all: $(OUT)/$(NAME)/verified
shards: $(OUT)/$(NAME)/$(NAME).manifest.json
fetch: $(OUT)/$(NAME).dump

# 1. the dump: a local file (DUMP=) or loom-fetch (verified, resumable).
ifneq ($(DUMP),)
$(OUT)/$(NAME).dump: $(DUMP)
	@mkdir -p '$(OUT)'
	echo '$(abspath $(DUMP))' > '$@.tmp' && mv '$@.tmp' '$@'
else
$(OUT)/$(NAME).dump:
	@mkdir -p '$(OUT)/dumps'
	'$(FETCH)' $(if $(MIRROR),--mirror '$(MIRROR)') --wiki '$(WIKI)' --date '$(DATE)' \
	  -o '$(OUT)/dumps' > '$@.list'
	grep -v -e '-index\.txt\.bz2$$' '$@.list' | grep -m1 'pages-articles' > '$@.tmp'
	rm -f '$@.list' && mv '$@.tmp' '$@'
endif

# 2. text and vocabulary, only when training a vocabulary (read twice).
$(OUT)/$(NAME).txt: $(OUT)/$(NAME).dump
	'$(EXTRACT)' -j $(JOBS) $(EXTRACT_FLAGS) -o '$@' "$$(cat '$<')"

$(OUT)/$(NAME).vocab/encoder.json: $(OUT)/$(NAME).txt
	'$(BPE)' train --vocab-size $(VOCAB_SIZE) -o '$(OUT)/$(NAME).vocab' '$<'

# 3. extract | encode | shard into a temporary directory, renamed when done.
$(OUT)/$(NAME)/$(NAME).manifest.json: $(OUT)/$(NAME).dump $(TEXT_DEP) $(VOCAB_DEP)
	rm -rf '$(OUT)/.$(NAME).tmp' && mkdir -p '$(OUT)/.$(NAME).tmp'
	$(TEXT_SOURCE) \
	  | '$(BPE)' encode --vocab '$(VOCAB_ARG)' --format u32 \
	  | '$(SHARD)' --input-format u32 --seq $(SEQ) --shards $(SHARDS) --seed $(SEED) \
	      --vocab-size $(VOCAB_NTOK) $(if $(VAL),--val-fraction $(VAL)) $(SHARD_FLAGS) \
	      -o '$(OUT)/.$(NAME).tmp/$(NAME)'
	rm -rf '$(OUT)/$(NAME)' && mv '$(OUT)/.$(NAME).tmp' '$(OUT)/$(NAME)'

# 4. verify every record and that each .index matches its shard.
$(OUT)/$(NAME)/verified: $(OUT)/$(NAME)/$(NAME).manifest.json
	'$(INDEX)' --verify --check '$(OUT)/$(NAME)/$(NAME)'-*.tfrecord \
	  $(if $(VAL),'$(OUT)/$(NAME)/$(NAME)'.val-*.tfrecord)
	date -u +%FT%TZ > '$@.tmp' && mv '$@.tmp' '$@'

clean-tmp:
	rm -rf '$(OUT)'/.*.tmp '$(OUT)'/*.tmp
