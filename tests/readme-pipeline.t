#!/usr/bin/env bash
# The README's "A pipeline" block, run as written on the bundled sample.
#
# The block is cut out of README.md here (so the two cannot drift), in an
# empty directory: its output directories (dumps/, data/, ckpt/) do not
# exist beforehand, every tool creates them.  Only what the sample forces
# is changed, each change checked to have matched exactly once:
#   - loom-fetch runs unchanged against a file:// mirror of the sample,
#     laid out as enwiki-20260101 by pipelines/make-mirror.sh and given
#     through LOOM_MIRROR (the environment, not the command line);
#   - the sample has ~760 tokens: --seq-len 1025 --shards 64 become
#     --seq-len 33 --shards 2, --batch 8 --seq 1024 becomes --batch 4
#     --seq 32, and --config gpt2 becomes --config mini (whose micro_batch 4
#     and seq_len 32 agree with those frames, as gpt2's 8 and 1024 agree
#     with the README's).
. "$(dirname "$0")/lib.sh"

# --- the block ----------------------------------------------------------
awk '/^## A pipeline/ { sec = 1; next }
     sec && /^## / { exit }
     sec && /^```sh$/ { code = 1; next }
     code && /^```$/ { exit }
     code { print }' "$TESTS/../README.md" >"$T/block.sh"
ok "README.md has an \"A pipeline\" sh block" test -s "$T/block.sh"
like "$T/block.sh" '^loom-fetch ' "  it starts by fetching a dump"
like "$T/block.sh" '^loom-eval generate ' "  and ends by generating text"

# subst FROM TO: replace the literal text FROM (which must occur exactly once).
subst() {
	local n
	n=$(grep -cF -- "$1" "$T/block.sh")
	is "$n" 1 "README block has '$1' once (replaced by '$2')"
	FROM=$1 TO=$2 perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$T/block.sh"
}
subst '--seq-len 1025 --shards 64' '--seq-len 33 --shards 2'
subst '--batch 8 --seq 1024' '--batch 4 --seq 32'
subst '--config gpt2' '--config mini'
ok "the fetch line is the README's" grep -qx 'loom-fetch --wiki enwiki --date latest -o dumps/' "$T/block.sh"

# --- a mirror with the sample as enwiki-20260101 ---------------------------
mkdir -p "$T/src"
for f in "$SHARE"/sample/samplewiki-20260101-pages-articles-multistream*.bz2; do
	b=${f##*/}
	cp "$f" "$T/src/enwiki${b#samplewiki}"
done
run "$TESTS/../pipelines/make-mirror.sh" "$T/src" enwiki 20260101 "$T/mirror"
is_rc 0 "make-mirror.sh lays out the sample as enwiki"

# --- run it ---------------------------------------------------------------
mkdir "$T/work"
# one thread each: the pipeline's tools run at once on a shared machine
export OMP_NUM_THREADS=1
rc=0
(cd "$T/work" && LOOM_MIRROR="file://$T/mirror/" bash -eo pipefail "$T/block.sh") \
	>"$out" 2>"$err" || rc=$?
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

done_testing
