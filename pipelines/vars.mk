# pipelines/vars.mk - what the pipelines' makefiles share (included by
# wikipedia.mk and squad.mk, which set HERE, their own directory, first).
#
# The tools: LOOM_BIN (a directory ending in /); else, installed as
# PREFIX/share/loom/pipelines/*.mk, PREFIX/bin; else on PATH; else the build
# tree next to this file.
INSTALLED_BIN := $(if $(filter %/share/loom/pipelines,$(HERE)),$(wildcard $(HERE:%/share/loom/pipelines=%)/bin/loom-train))
LOOM_BIN ?= $(if $(INSTALLED_BIN),$(dir $(INSTALLED_BIN)),$(shell command -v loom-train >/dev/null 2>&1 || echo $(HERE)/../build/bin/))
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
