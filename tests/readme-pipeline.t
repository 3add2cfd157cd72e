#!/usr/bin/env bash
# Every fenced shell block of README.md (```sh), run as written on the
# bundled sample.
#
# Each block is cut out of README.md here (so the two cannot drift), into
# an empty directory; the test knows every block by its first line, so a
# new block fails it until it is run here too.  Only what the sample, the
# network or this machine forces is changed, each change checked to have
# matched exactly once (subst):
#   - the network: loom-fetch and wikipedia.mk's enwiki DATE=latest run
#     unchanged against a file:// mirror of the sample, laid out as
#     enwiki-20260101 by pipelines/make-mirror.sh and given through
#     LOOM_MIRROR (the environment, not the command line);
#   - the sample's size (~1100 tokens): --seq 1025 --shards 64 become
#     --seq 33 --shards 2, --batch 8 --seq 1024 becomes --batch 4
#     --seq 32, --config gpt2 becomes --config mini (whose micro_batch 4
#     and seq_len 32 agree with those frames, as gpt2's 8 and 1024 agree
#     with the README's), and wikipedia.mk's SEQ=1025 SHARDS=64 VAL=0.01
#     SEQ=33 SHARDS=2 VAL=0.1;
#   - mpirun: 2 ranks of this machine (-np 2, a hostfile of localhost) and
#     --steps 4 on the command line of loom-train (the train-mpi.sh block
#     runs as written);
#   - `make test` is the harness that runs this test: `make -n test` (its
#     plan) instead; `make demo` runs as written (DEMO_OUT in $T), in a
#     copy of the checkout and of the build under test, which it must not
#     rebuild while the other tests run its tools.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$TESTS/.." && pwd)

# every ```sh block, numbered from 1, into $T/blockN.sh
awk -v dir="$T" '/^```sh$/ { n++; code = 1; next }
     code && /^```$/ { code = 0; next }
     code { print > (dir "/block" n ".sh") }' "$ROOT/README.md"
nblocks=$(ls "$T"/block*.sh | wc -l)
first() { head -1 "$T/block$1.sh"; }
known=
for i in $(seq "$nblocks"); do
	case $(first "$i") in
	"make demo "*) B_MAKE=$i ;;
	"loom-fetch "*) B_PIPE=$i ;;
	"mpirun "*) B_MPI=$i ;;
	"loom-train -c gpt3-2.7B "*) B_WRAP=$i ;;
	"make -f pipelines/wikipedia.mk WIKI=enwiki "*) B_MK=$i ;;
	"pipelines/make-mirror.sh "*) B_MIRROR=$i ;;
	"loom-extract dumps/"*) B_BERT=$i ;;
	"R=https://huggingface.co/"*) B_HF=$i ;;
	*) known="$known block $i ('$(first "$i")')" ;;
	esac
done
is "$known" "" "the test knows every sh block of README.md ($nblocks)"

# subst N FROM TO: replace the literal text FROM (exactly once) in block N
subst() {
	local n
	n=$(grep -cF -- "$2" "$T/block$1.sh")
	is "$n" 1 "README block $1 has '$2' once (replaced by '$3')"
	FROM=$2 TO=$3 perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$T/block$1.sh"
}
# runblock N DIR: run block N in DIR (bash -e -o pipefail)
runblock() {
	rc=0
	(cd "$2" && LOOM_MIRROR="file://$T/mirror/" bash -eo pipefail "$T/block$1.sh") \
		>"$out" 2>"$err" || rc=$?
}
# one thread each: the tools run at once on a shared machine
export OMP_NUM_THREADS=1

# --- a mirror with the sample as enwiki-20260101 ---------------------------
mkdir -p "$T/src"
for f in "$SHARE"/sample/samplewiki-20260101-pages-articles-multistream*.bz2; do
	b=${f##*/}
	cp "$f" "$T/src/enwiki${b#samplewiki}"
done
run "$ROOT/pipelines/make-mirror.sh" "$T/src" enwiki 20260101 "$T/mirror"
is_rc 0 "make-mirror.sh lays out the sample as enwiki"

# --- "A pipeline" ------------------------------------------------------------
like "$T/block$B_PIPE.sh" '^loom-eval generate ' "the pipeline ends by generating text"
subst "$B_PIPE" '--seq 1025 --shards 64' '--seq 33 --shards 2'
subst "$B_PIPE" '--batch 8 --seq 1024' '--batch 4 --seq 32'
subst "$B_PIPE" '--config gpt2' '--config mini'
ok "the fetch line is the README's" grep -qx 'loom-fetch --wiki enwiki --date latest -o dumps/' "$T/block$B_PIPE.sh"
mkdir "$T/work"
runblock "$B_PIPE" "$T/work"
is_rc 0 "the README pipeline runs (bash -e -o pipefail)"
ok "  dumps/ created, the dump fetched" \
	test -s "$T/work/dumps/enwiki-20260101-pages-articles-multistream.xml.bz2"
ok "  data/ created with shards, indices and the manifest" \
	test -s "$T/work/data/wiki.manifest.json" -a -s "$T/work/data/wiki-00000-of-00002.tfrecord" \
	-a -s "$T/work/data/wiki-00001-of-00002.tfrecord.index"
ok "  ckpt/ created with latest" test -e "$T/work/ckpt/latest/model.safetensors"
like "$err" '^loom-extract: .* 9 articles written' "  loom-extract wrote the sample's 9 articles"
like "$err" '^loom-train: done: ' "  loom-train finished"
like "$out" '^The history of' "  loom-eval printed the prompt and its continuation"
no_tmp_left "$T/work" "  no temporary files left anywhere"

# --- "BERT and SQuAD": on the pipeline's dump; no SQuAD file is bundled, so
# the test writes a small one (tests/mksquad.py) as train-v1.1.json and
# dev-v1.1.json; bert-tiny for bert-base and squad-base ----------------------
subst "$B_BERT" '--seq 126 --shards 64' '--seq 30 --shards 2'
subst "$B_BERT" '--batch 8 --seq 125' '--batch 4 --seq 29'
subst "$B_BERT" '--config bert-base' '--config bert-tiny'
subst "$B_BERT" 'CONFIG=squad-base' 'CONFIG=bert-tiny'
make_squad "$T/work/train-v1.1.json" "$T/work/squad-vocab.txt"
cp "$T/work/train-v1.1.json" "$T/work/dev-v1.1.json"
ln -s "$ROOT/pipelines" "$T/work/"
runblock "$B_BERT" "$T/work"
is_rc 0 "the README's BERT lines run: masked-LM on the dump, squad.mk from its checkpoint"
ok "  a BertForMaskedLM checkpoint" grep -q BertForMaskedLM "$T/work/ckpt-bert/latest/config.json"
like "$err" "^loom-train: .*ckpt-bert/step-[0-9]+ has no question-answering \\(qa_outputs\\) head: initialised from the seed" \
	"  squad.mk fine-tunes it with a new QA head"
ok "  a BertForQuestionAnswering checkpoint" \
	grep -q BertForQuestionAnswering "$T/work/squad/ckpt/latest/config.json"
like "$T/work/squad/score.json" '^\{"exact_match": [0-9.]+, "f1": [0-9.]+\}$' \
	"  and the score of its predictions on the dev file"

# --- bert-base-uncased by URL: a small HuggingFace directory of the same
# files (tests/squad_bert.py) stands for the Hub, its digests and sizes for
# the real ones ----------------------------------------------------------------
mkdir "$T/hub"
/usr/bin/python3 "$TESTS/squad_bert.py" make "$T/hub"
subst "$B_HF" 'https://huggingface.co/google-bert/bert-base-uncased/resolve/86b5e0934494bd15c9632b12f734a8a67f723594' "file://$T/hub"
for f in config.json:570:7160e1553ad2ca51d8c1cb066be533db31826e12d173824c1bb0cb1a4f187d20 \
	vocab.txt:231508:07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3 \
	model.safetensors:440449768:68d45e234eb4a928074dfd868cead0219ab85354cc53d20e772753c6bb9169d3; do
	IFS=: read -r name size sum <<< "$f"
	subst "$B_HF" "--size $size" "--size $(stat -c %s "$T/hub/$name")"
	subst "$B_HF" "$sum" "$(sha256sum "$T/hub/$name" | cut -d' ' -f1)"
done
mkdir "$T/hf"
runblock "$B_HF" "$T/hf"
is_rc 0 "the README's bert-base-uncased lines fetch and verify (a stand-in directory)"
ok "  the three files" cmp -s "$T/hub/model.safetensors" "$T/hf/bert-base-uncased/model.safetensors"
run loom-train -c squad-base --init-from "$T/hf/bert-base-uncased" --set seq_len=32 --print-config
is_rc 0 "  -c squad-base --init-from it (64 positions: --set seq_len=32)"
like "$out" '"n_layer": 2,' "  the shape from its config.json"

# --- "Training on several machines": on the pipeline's data ------------------
if command -v mpirun >/dev/null; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
	# OpenMPI keeps allocations until exit; leak reports under ASan are its own
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	subst "$B_MPI" '-np 4' '-np 2'
	subst "$B_MPI" '--batch 8 --seq 1024' '--batch 4 --seq 32'
	subst "$B_MPI" '--config gpt2 --save ckpt' '--config mini --steps 2 --save ckpt'
	echo 'localhost slots=2' > "$T/work/hosts"
	rm -rf "$T/work/ckpt"
	runblock "$B_MPI" "$T/work"
	is_rc 0 "the README's mpirun line runs (2 ranks)"
	ok "  a checkpoint" test -e "$T/work/ckpt/latest/model.safetensors"
	# EPOCHS=0: the feeders never end, the run stops at --steps
	runblock "$B_WRAP" "$T/work"
	is_rc 0 "the README's --memory-per-rank and train-mpi.sh lines run as written (2 ranks)"
	like "$out" '^gpt3-2\.7B needs 8 ranks of 8 GiB ' "  the ranks a model needs"
	like "$err" '^loom-train: rank 0: data parallel: 2 ranks' "  train-mpi.sh trains on 2 ranks"
	ok "  a checkpoint" test -e "$T/work/ckpt-mpi/latest/model.safetensors"
else
	skip 9 "mpirun is not installed"
fi

# --- "Pipelines: make and cron" ----------------------------------------------
subst "$B_MK" 'SEQ=1025 SHARDS=64 VAL=0.01' 'SEQ=33 SHARDS=2 VAL=0.1'
mkdir "$T/mk"
ln -s "$ROOT/pipelines" "$ROOT/share" "$T/mk/"
runblock "$B_MK" "$T/mk"
is_rc 0 "the README's wikipedia.mk lines run (enwiki latest from the mirror, the sample with VOCAB=train)"
ok "  enwiki: shards, the validation split, verified" \
	test -s "$T/mk/data/enwiki-latest/enwiki-latest.val.manifest.json" -a -e "$T/mk/data/enwiki-latest/verified"
ok "  samplewiki: shards, the validation split, verified" \
	test -s "$T/mk/data/samplewiki-20260101/samplewiki-20260101.val.manifest.json" \
	-a -e "$T/mk/data/samplewiki-20260101/verified"

mkdir "$T/mirror2"
ln -s "$ROOT/pipelines" "$ROOT/share" "$T/mirror2/"
runblock "$B_MIRROR" "$T/mirror2"
is_rc 0 "the README's make-mirror.sh lines run"
ok "  the sample fetched from the local mirror and sharded" test -e "$T/mirror2/data/samplewiki-latest/verified"

# --- the first block: make demo, make test -----------------------------------
is "$(cat "$T/block$B_MAKE.sh" | sed 's/ *#.*//')" "make demo
make test" "the first block is make demo and make test"
# make demo builds first (make all): in a copy of the checkout and of the
# build under test, never in that build, whose tools the other tests of
# `make check` (prove -j) run meanwhile.  When a source is newer than the
# build (edited while the checks run), make relinks every tool in place,
# and a tool started during its relink fails ("Permission denied": the
# linker makes the file executable last), failing whichever test ran it.
# A source of the copy is made newer, so that its make demo relinks too.
BT=${LOOM_BUILD:-$ROOT/build}
rel=$(realpath -m --relative-to="$ROOT" "$BT")
case $rel in ..|../*) rel=build ;; esac   # (as the build's own .d files name it)
# each tool and libloom.a of the build under test: name, size, mtime
tools_state() { stat -c '%n %s %Y' "$BT"/libloom.a "$BT"/bin/*; }
if "$ROOT/pipelines/mirror.sh" available; then
	mkdir -p "$T/co/$rel"
	cp -a "$ROOT"/Makefile "$ROOT"/formats "$ROOT"/lib "$ROOT"/pipelines "$ROOT"/share \
		"$ROOT"/tools "$T/co/"   # what make all and the demo read (times kept)
	for f in LOOM-CFLAGS LOOM-LDFLAGS gen obj libloom.a bin; do
		[ ! -e "$BT/$f" ] || cp -a "$BT/$f" "$T/co/$rel/"
	done
	before=$(tools_state)
	touch -c "$T/co/lib/common/loom_buf.c"
	rc=0
	DEMO_OUT=$T/demo make -s -C "$T/co" B="$rel" demo >"$out" 2>"$err" || rc=$?
	is_rc 0 "make demo runs (in a copy of the checkout and of the build)"
	ok "  and trains" test -n "$(ls "$T/demo/ckpt" 2>/dev/null)"
	ok "  its make relinked the copy's tools" test "$T/co/$rel/bin/loom-train" -nt "$BT/bin/loom-train"
	is "$(tools_state)" "$before" "  the build under test is left as it was"
else
	skip 4 "lighttpd is not installed (make deps)"
fi
run make -n -C "$ROOT" B="${LOOM_BUILD:-$ROOT/build}" test
is_rc 0 "make -n test: the plan of make test (which runs this test)"
like "$out" 'check' "  it runs the checks"

done_testing
