# loom - Wikipedia dump to trained GPT, one Unix pipe at a time.
# `make help` lists the targets.  Sources are found by wildcard:
#   lib/*/*.c              -> $(B)/libloom.a (plus C generated from formats/**/*.proto);
#                             lib/ has one folder per stage: common, wiki, token, data,
#                             kernels, train (every folder is on the include path)
#   $(B)/LOOM-CFLAGS, $(B)/LOOM-LDFLAGS  the flags of the last build (see "build flags")
#   tools/loom-*.c         -> $(B)/bin/loom-*   (+ tools/X_*.c for loom-X, + tools/cli.c)
#   tests/*.c              -> $(B)/tests/*.t    (C unit tests, TAP)
#   tests/fuzz/*.c         -> $(B)/tests/fuzz-*.t (corpus replay) / make fuzz
#   tests/*.t              shell CLI tests (TAP), run by prove with the above
#   tests/bench/*.sh       benchmarks, run by `make bench` only
#   tests/bench/*.c        -> $(B)/bench/*      (programs the benchmarks run)

B       ?= build
PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
OPT     ?= -O2
# Extra code-generation flags; e.g. ARCH=-march=native (see `make bench`).
ARCH    ?=
CFLAGS  ?= $(OPT) -g $(ARCH)
SAN     ?=
WERROR  ?= -Werror
PROVE_J ?= 2

PKGS := libarchive expat libcurl jansson libprotobuf-c openblas libcrypto
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# OpenMPI, when mpicc is installed: only lib/train/loom_dist*.c include mpi.h and
# only loom-train links it (other tools never pull loom_dist*.o from libloom.a).
MPI_CFLAGS := $(if $(shell command -v mpicc 2>/dev/null),$(shell mpicc --showme:compile 2>/dev/null) -DLOOM_HAVE_MPI)
MPI_LIBS   := $(if $(MPI_CFLAGS),$(shell mpicc --showme:link 2>/dev/null))

ALL_CFLAGS  = -std=gnu11 -Wall -Wextra $(WERROR) -pthread -fopenmp $(CFLAGS) $(SAN)
ALL_CPPFLAGS = $(LIB_INC) -Itools -I$(B)/gen -D_GNU_SOURCE \
	-DLOOM_SHARE_DIR='"$(PREFIX)/share/loom"' $(PKG_CFLAGS) $(CPPFLAGS)
ALL_LDFLAGS = -pthread -fopenmp -Wl,--as-needed $(SAN) $(LDFLAGS)
# oneDNN (bf16 matmuls, lib/kernels/loom_mm.c only) ships no pkg-config file.
DNNL_LIBS  := -ldnnl
LIBS        = $(PKG_LIBS) $(DNNL_LIBS) -lm

# Debian packages the build, the tests and the demo need (make deps).
DEPS := build-essential pkg-config perl bzip2 python3 \
	libarchive-dev libexpat1-dev libcurl4-openssl-dev libjansson-dev \
	libprotobuf-c-dev protobuf-c-compiler libopenblas-openmp-dev libdnnl-dev libssl-dev \
	openmpi-bin libopenmpi-dev lighttpd unicode-data slurm-wlm munge

PROTOS   := $(wildcard formats/*/*.proto)
GEN_C    := $(patsubst formats/%.proto,$(B)/gen/%.pb-c.c,$(PROTOS))
GEN_H    := $(GEN_C:.c=.h)
LIB_SRC  := $(wildcard lib/*/*.c)
LIB_INC  := $(patsubst %/,-I%,$(sort $(dir $(LIB_SRC))))
LIB_OBJ  := $(patsubst %.c,$(B)/obj/%.o,$(LIB_SRC)) $(GEN_C:.c=.o)
TOOLS    := $(patsubst tools/%.c,%,$(wildcard tools/loom-*.c))
TOOL_BIN := $(addprefix $(B)/bin/,$(TOOLS))
CLI_OBJ  := $(B)/obj/tools/cli.o
TEST_BIN := $(patsubst tests/%.c,$(B)/tests/%.t,$(wildcard tests/*.c))
FUZZ_SRC := $(filter-out tests/fuzz/replay.c,$(wildcard tests/fuzz/*.c))
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(B)/tests/fuzz-%.t,$(FUZZ_SRC))
BENCH_BIN := $(patsubst tests/bench/%.c,$(B)/bench/%,$(wildcard tests/bench/*.c))
SH_TESTS := $(wildcard tests/*.t)
MANPAGES := $(wildcard share/man/man1/*.1)
PIPE_BIN := $(wildcard pipelines/*.sh) pipelines/retrain

# --- build flags ---------------------------------------------------------
# git's GIT-CFLAGS pattern: $(B)/LOOM-CFLAGS holds the compiler and flags of
# the last build (PREFIX is in them: LOOM_SHARE_DIR is compiled in) and
# $(B)/LOOM-LDFLAGS the link flags; each is rewritten, when make reads this
# file, only if its string changed, and every object (program) depends on
# it, so `make OPT=-O0` or `make PREFIX=/opt/x install` rebuilds instead of
# keeping stale objects, and an unchanged build rebuilds nothing.  Under -n
# or -q nothing is written: a changed file is made phony instead, so the
# dry run shows (make -q reports) the rebuild.  The build directory's own
# -I$(B)/gen is left out: `make B=build` and `make B=$PWD/build` (as the
# tests run make demo on the build under test) are the same build, and
# must not rebuild it.  tests/build-flags.t.
LOOM_CFLAGS  = $(CC) $(filter-out -I$(B)/gen,$(ALL_CPPFLAGS)) $(ALL_CFLAGS) $(MPI_CFLAGS)
LOOM_LDFLAGS = $(CC) $(ALL_LDFLAGS) $(LIBS) $(MPI_LIBS)
LOOM_DRY    := $(findstring n,$(firstword -$(MAKEFLAGS)))$(findstring q,$(firstword -$(MAKEFLAGS)))
# $1: the file under $(B), $2: the name of the variable holding the flags
define loom_track
ifneq ($$(file <$(B)/$1),$$(strip $$($2)))
ifeq ($(LOOM_DRY),)
$$(shell mkdir -p $(B))
$$(file >$(B)/$1,$$(strip $$($2)))
else
.PHONY: $(B)/$1
endif
endif
endef
ifneq ($(filter-out clean help deps install-only gen-check,$(or $(MAKECMDGOALS),all)),)
$(eval $(call loom_track,LOOM-CFLAGS,LOOM_CFLAGS))
$(eval $(call loom_track,LOOM-LDFLAGS,LOOM_LDFLAGS))
endif
$(B)/LOOM-CFLAGS $(B)/LOOM-LDFLAGS: ;

.PHONY: all deps test check asan bench demo install install-only clean help fuzz tests gen-check
.DEFAULT_GOAL := all
# Keep intermediate objects and generated code (but not as .SECONDARY with no
# prerequisites: that would also cover the empty rules -MP writes for
# headers, and a moved header would then leave stale objects unrebuilt).
.PRECIOUS: $(B)/obj/%.o $(B)/gen/%.pb-c.c $(B)/gen/%.pb-c.h

all: $(B)/libloom.a $(TOOL_BIN)
tests: $(TEST_BIN) $(FUZZ_BIN) $(BENCH_BIN)

help:
	@echo 'make            build libloom.a and the tools into $(B)/'
	@echo 'make deps       install the Debian packages loom needs (apt-get, as root)'
	@echo 'make test       deps + build + every test (prove)'
	@echo 'make check      build + every test, without deps'
	@echo 'make gen-check  generate the Unicode tables again, fail if lib/token/loom_*_tab.c differ'
	@echo 'make asan       the test suite under AddressSanitizer + UBSan (build-asan/)'
	@echo 'make bench      benchmarks, each a ratio against a reference run'
	@echo 'make demo       deps + build + the whole pipeline on the bundled sample'
	@echo 'make fuzz FUZZ=NAME [SECONDS=60]  libFuzzer run of tests/fuzz/NAME.c (clang)'
	@echo 'make install    PREFIX=$(PREFIX) DESTDIR=  tools, man pages, share/, pipelines/, docs'
	@echo 'make install-only  the same, of what $(B) holds, without building'
	@echo 'make clean      remove build outputs'
	@echo 'variables: B=build dir, OPT=-O2, ARCH= (e.g. -march=native), CC=cc'
	@echo '           a change of CC, CFLAGS, CPPFLAGS, OPT, ARCH, SAN, PREFIX, LDFLAGS or LIBS rebuilds'

# --- dependencies --------------------------------------------------------
deps:
	@missing=; for p in $(DEPS); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' \
	    || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root (or: sudo apt-get install$$missing)" >&2; exit 1; fi; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq $$missing >/dev/null 2>&1 || \
	  { apt-get update -qq && apt-get install -y -qq $$missing >/dev/null; } || exit 1; \
	fi

# --- build ---------------------------------------------------------------
$(B)/gen/%.pb-c.c $(B)/gen/%.pb-c.h: formats/%.proto
	@mkdir -p $(B)/gen
	protoc-c -Iformats --c_out=$(B)/gen $<

$(B)/gen/%.pb-c.o: $(B)/gen/%.pb-c.c $(GEN_H) $(B)/LOOM-CFLAGS
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -Wno-unused-parameter -MMD -MP -c -o $@ $<

$(B)/obj/%.o: %.c $(B)/LOOM-CFLAGS | $(GEN_H)
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/libloom.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# $(call link,ARGS): cc ARGS linked to a temporary name beside $@, then
# renamed over it, so a test or pipeline that runs the program while it is
# rebuilt gets the old one or the new one, never a missing or half-written
# file (ld writes its output in place and makes it executable at the end).
link = { $(CC) $(ALL_LDFLAGS) -o $@.tmp-$$$$ $(1) && mv -f $@.tmp-$$$$ $@; } || \
	{ rm -f $@.tmp-$$$$; exit 1; }

# A tool loom-X is tools/loom-X.c plus any tools/X_*.c (its subcommands).
.SECONDEXPANSION:
$(B)/bin/%: $(B)/obj/tools/%.o \
	    $$(addprefix $(B)/obj/,$$(subst .c,.o,$$(wildcard tools/$$(subst loom-,,$$*)_*.c))) \
	    $(CLI_OBJ) $(B)/libloom.a $(B)/LOOM-LDFLAGS
	@mkdir -p $(@D)
	$(call link,$(filter-out $(B)/LOOM-%,$^) $(LIBS))

$(B)/tests/%.t: $(B)/obj/tests/%.o $(B)/libloom.a $(B)/LOOM-LDFLAGS
	@mkdir -p $(@D)
	$(call link,$(filter-out $(B)/LOOM-%,$^) $(LIBS))

$(B)/bench/%: $(B)/obj/tests/bench/%.o $(B)/libloom.a $(B)/LOOM-LDFLAGS
	@mkdir -p $(@D)
	$(call link,$(filter-out $(B)/LOOM-%,$^) $(LIBS))

$(B)/tests/fuzz-%.t: tests/fuzz/%.c tests/fuzz/replay.c $(B)/libloom.a \
	    $(B)/LOOM-CFLAGS $(B)/LOOM-LDFLAGS | $(GEN_H)
	@mkdir -p $(@D)
	$(call link,$(ALL_CPPFLAGS) $(ALL_CFLAGS) -DCORPUS_DIR='"tests/fuzz/$*"' \
	  tests/fuzz/$*.c tests/fuzz/replay.c $(B)/libloom.a $(LIBS))

$(B)/obj/lib/train/loom_dist.o $(B)/obj/lib/train/loom_dist_zero.o \
    $(B)/obj/lib/train/loom_dist_ckpt.o: ALL_CPPFLAGS += $(MPI_CFLAGS)
# The GPT kernels never rely on errno or FP traps: let sqrtf, clamps and exp vectorise.
$(B)/obj/lib/kernels/loom_kernels.o: ALL_CFLAGS += -fno-math-errno -fno-trapping-math
$(B)/bin/loom-train: LIBS += $(MPI_LIBS)

-include $(shell find $(B)/obj $(B)/gen -name '*.d' 2>/dev/null)

# --- tests ---------------------------------------------------------------
test: deps
	@$(MAKE) --no-print-directory check

# Each test clears the caller's OpenBLAS, OpenMP, loom and locale variables
# itself (tests/lib.sh, tests/hermetic.h); prove runs in the tests' locale
# too, so that a caller's uninstalled one does not make perl warn per test.
check: all tests
	PATH="$(abspath $(B))/bin:$$PATH" LOOM_BUILD="$(abspath $(B))" LC_ALL=C.UTF-8 \
	  prove -j$(PROVE_J) $(TEST_BIN) $(FUZZ_BIN) $(SH_TESTS)

asan:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory B=build-asan OPT=-O1 \
	  SAN='-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer' \
	  ASAN_OPTIONS=detect_leaks=1 check

bench: deps
	@$(MAKE) --no-print-directory all $(BENCH_BIN)
	@for b in tests/bench/*.sh; do [ -e "$$b" ] || continue; \
	  echo "== $$b"; PATH="$(abspath $(B))/bin:$$PATH" LOOM_BUILD="$(abspath $(B))" bash "$$b" || exit 1; done

FUZZ    ?=
SECONDS ?= 60
fuzz:
	@test -n "$(FUZZ)" || { echo "make fuzz FUZZ=NAME (one of: $(patsubst tests/fuzz/%.c,%,$(FUZZ_SRC)))"; exit 2; }
	@# LOOM_NO_CLONES: clang 14 names a target_clones ifunc NAME.ifunc, which
	@# other files cannot link to (libloom's kernels)
	@$(MAKE) --no-print-directory B=build-fuzz CC=clang OPT=-O1 WERROR=-Wno-pass-failed \
	  CPPFLAGS='$(CPPFLAGS) -DLOOM_NO_CLONES' \
	  SAN='-fsanitize=fuzzer-no-link,address,undefined' build-fuzz/libloom.a
	clang $(ALL_CPPFLAGS:$(B)/%=build-fuzz/%) -std=gnu11 -O1 -g -fopenmp -pthread \
	  -fsanitize=fuzzer,address,undefined -o build-fuzz/fuzz-$(FUZZ) tests/fuzz/$(FUZZ).c \
	  build-fuzz/libloom.a $(LIBS)
	mkdir -p build-fuzz/corpus-$(FUZZ)
	build-fuzz/fuzz-$(FUZZ) -max_total_time=$(SECONDS) build-fuzz/corpus-$(FUZZ) tests/fuzz/$(FUZZ)

demo: deps
	@$(MAKE) --no-print-directory all
	@PATH="$(abspath $(B))/bin:$$PATH" bash pipelines/demo.sh

# --- generated tables ----------------------------------------------------
# lib/token/loom_unicode_tab.c and loom_wordpiece_tab.c are generated from
# the Unicode Character Database (Debian's unicode-data, in $(UCD)) by
# lib/token/gen_unicode_tab.py and gen_wordpiece_tab.py (on ucd.py).
# gen-check generates them again into $(B)/gen-check/ and fails, naming
# the file and its first differing lines, if a committed table (in
# $(GEN_TABDIR)) is not what its generator writes.  tests/gen-check.t runs
# it, so `make test` and `make check` do (a TAP skip where the data is
# missing or of another Unicode version than the tables).
UCD        ?= /usr/share/unicode
GEN_PY     ?= python3
GEN_TABDIR ?= lib/token
GEN_TABS   := loom_unicode_tab.c loom_wordpiece_tab.c
gen-check:
	@[ -r $(UCD)/UnicodeData.txt ] || { echo "make gen-check: no Unicode data in $(UCD) (Debian package unicode-data: make deps installs it)" >&2; exit 1; }
	@mkdir -p $(B)/gen-check
	@rc=0; for t in $(GEN_TABS); do g=lib/token/gen_$${t#loom_}; g=$${g%.c}.py; \
	  PYTHONDONTWRITEBYTECODE=1 $(GEN_PY) $$g $(UCD) > $(B)/gen-check/$$t || exit 1; \
	  if ! cmp -s $(B)/gen-check/$$t $(GEN_TABDIR)/$$t; then rc=1; \
	    echo "make gen-check: $(GEN_TABDIR)/$$t is not what $$g writes (to update: $(GEN_PY) $$g > lib/token/$$t)" >&2; \
	    diff $(GEN_TABDIR)/$$t $(B)/gen-check/$$t | head -n 8 >&2; \
	  fi; done; \
	[ $$rc = 0 ] && echo "make gen-check: $(GEN_TABS) are what their generators write (Unicode data in $(UCD))"; exit $$rc

# --- install -------------------------------------------------------------
# install-only copies what $(B) holds without building it (or checking its
# flags): tests/install.t installs the build under test (make asan's too)
# this way without rebuilding it for PREFIX.
install: all
	@$(MAKE) --no-print-directory install-only
install-only:
	@for f in $(TOOL_BIN); do test -x $$f || { echo "make install-only: $$f is not built (make all)" >&2; exit 1; }; done
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/loom
	install -m 755 $(TOOL_BIN) $(DESTDIR)$(PREFIX)/bin/
	$(if $(MANPAGES),install -m 644 $(MANPAGES) $(DESTDIR)$(PREFIX)/share/man/man1/)
	cd share && find . \( -path ./man -o -path ./bash-completion \) -prune -o -type f -print | \
	  while read -r f; do install -D -m 644 "$$f" "$(DESTDIR)$(PREFIX)/share/loom/$$f"; done
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	for t in $(TOOLS); do install -m 644 share/bash-completion/loom \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions/$$t; done
	install -d $(DESTDIR)$(PREFIX)/share/loom/pipelines
	install -m 755 $(PIPE_BIN) $(DESTDIR)$(PREFIX)/share/loom/pipelines/
	install -m 644 $(filter-out $(PIPE_BIN),$(wildcard pipelines/*)) $(DESTDIR)$(PREFIX)/share/loom/pipelines/
	install -d $(DESTDIR)$(PREFIX)/share/doc/loom/formats $(DESTDIR)$(PREFIX)/share/doc/loom/docs
	install -m 644 README.md $(DESTDIR)$(PREFIX)/share/doc/loom/
	install -m 644 $(wildcard formats/*.md) $(DESTDIR)$(PREFIX)/share/doc/loom/formats/
	install -m 644 $(wildcard docs/*.md) $(DESTDIR)$(PREFIX)/share/doc/loom/docs/

clean:
	rm -rf build build-asan build-fuzz
