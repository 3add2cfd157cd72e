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

# The tools: LOOM_BIN (a directory ending in /); else, installed as
# PREFIX/share/loom/pipelines/wikipedia.mk, PREFIX/bin; else on PATH; else
# the build tree next to this file.
HERE   := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
INSTALLED_BIN := $(if $(filter %/share/loom/pipelines,$(HERE)),$(wildcard $(HERE:%/share/loom/pipelines=%)/bin/loom-extract))
LOOM_BIN ?= $(if $(INSTALLED_BIN),$(dir $(INSTALLED_BIN)),$(shell command -v loom-extract >/dev/null 2>&1 || echo $(HERE)/../build/bin/))
# Values from the command line or the environment reach file names and
# recipes: each must be plain (the characters listed below; no $, quotes,
# spaces or other shell or make syntax), else make stops naming it.  Recipes
# quote them too.
empty :=
space := $(empty) $(empty)
comma := ,
chars_num  := 0 1 2 3 4 5 6 7 8 9
chars_name := $(chars_num) a b c d e f g h i j k l m n o p q r s t u v w x y z _
chars_path := $(chars_name) A B C D E F G H I J K L M N O P Q R S T U V W X Y Z . / + @ $(comma) -
chars_flag := $(chars_path) = :
chars_url  := $(chars_flag) ~ % [ ]
# $(call loom_strip,TEXT,CHARS): TEXT less every character of CHARS
loom_strip = $(if $2,$(call loom_strip,$(subst $(firstword $2),,$1),$(wordlist 2,$(words $2),$2)),$1)
# $(call loom_spread,TEXT,CHARS): TEXT with a space after each character of CHARS
loom_spread = $(if $2,$(call loom_spread,$(subst $(firstword $2),$(firstword $2) ,$1),$(wordlist 2,$(words $2),$2)),$1)
define newline


endef
# $(call loom_check,VAR,CHARS,what VAR must be): a value set outside this
# file holds no $ (make would expand it), and only CHARS; loom_check_words:
# words of CHARS separated by spaces
loom_dollar = $(if $(filter command environment,$(origin $1)),$(findstring $$,$(value $1)))
loom_error  = $(error $1='$(subst $(newline),\n,$(value $1))' is not $2)
loom_check  = $(if $(or $(loom_dollar),$(call loom_strip,$($1),$2)),$(call loom_error,$1,$3))
loom_check_words = $(if $(or $(loom_dollar),$(call loom_strip,$(subst $(space),,$($1)),$2)),$(call loom_error,$1,$3))
loom_need   = $(if $($1),,$(error $1 is empty))
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
	  | '$(SHARD)' --input-format u32 --seq-len $(SEQ) --shards $(SHARDS) --seed $(SEED) \
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
