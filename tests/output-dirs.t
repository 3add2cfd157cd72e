#!/usr/bin/env bash
# Every tool that takes an output path creates its missing parent
# directories (as mkdir -p), still writing atomically; a file standing
# where a directory should be is an error naming it, exit 1, no debris.
# (loom-fetch: tests/fetch.t; the README pipeline: tests/readme-pipeline.t.)
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
export OMP_NUM_THREADS=1
S="$SHARE/sample/samplewiki-20260101-pages-articles.xml"

run loom-extract -q -o x1/x2/text.txt "$S"
is_rc 0 "loom-extract -o a/b/FILE"
ok "  text written" test -s x1/x2/text.txt

run loom-bpe encode -q --vocab gpt2 -o e1/e2/ids.u16 x1/x2/text.txt
is_rc 0 "loom-bpe encode -o a/b/FILE"
ok "  ids written" test -s e1/e2/ids.u16

run loom-bpe train -q -n 300 -o v1/v2/v3 x1/x2/text.txt
is_rc 0 "loom-bpe train -o a/b/DIR"
ok "  encoder.json, vocab.bpe, tokenizer.json there" \
	test -s v1/v2/v3/encoder.json -a -s v1/v2/v3/vocab.bpe -a -s v1/v2/v3/tokenizer.json

run loom-shard -q -f u16 -L 17 -o s1/s2/w e1/e2/ids.u16
is_rc 0 "loom-shard -o a/b/PREFIX"
ok "  shard and manifest there" test -s s1/s2/w-00000-of-00001.tfrecord -a -s s1/s2/w.manifest.json

run loom-index -q -o i1/i2/w.idx s1/s2/w-00000-of-00001.tfrecord
is_rc 0 "loom-index -o a/b/FILE"
same_file i1/i2/w.idx s1/s2/w-00000-of-00001.tfrecord.index "  the same index as loom-shard's"

rc=0
loom-feed -q --manifest s1/s2/w.manifest.json --batch 2 --seq 16 --seed 1 |
	loom-train -q -c tiny --set vocab_size=50257,n_positions=16,seq_len=16,micro_batch=2 \
		--steps 2 --save c1/c2 --log l1/l2/run.jsonl >"$out" 2>"$err" || rc=$?
is_rc 0 "loom-train --save a/b --log c/d/FILE"
ok "  checkpoint and log there" test -e c1/c2/latest/model.safetensors -a -s l1/l2/run.jsonl

run loom-plot l1/l2/run.jsonl -o p1/p2/loss.svg
is_rc 0 "loom-plot -o a/b/FILE"
like p1/p2/loss.svg '^<svg ' "  chart there"
no_tmp_left . "no temporary files left"

# a plain file where a directory should be
: > plain
for t in "loom-extract -o plain/sub/text.txt $S" \
	 "loom-bpe encode --vocab gpt2 -o plain/sub/ids.txt x1/x2/text.txt" \
	 "loom-bpe train -n 300 -o plain/sub/v x1/x2/text.txt" \
	 "loom-shard -f u16 -L 17 -o plain/sub/w e1/e2/ids.u16" \
	 "loom-plot l1/l2/run.jsonl -o plain/sub/loss.svg"; do
	set -- $t
	run "$@"
	is_rc 1 "$1 $2 ...plain/sub...: exit 1"
	like "$err" "^$1: .*'plain[/a-z.]*'.*(Not a directory|is not a directory)" "  the message names the path"
done
is "$(find . -path './plain*' | sort | tr '\n' ' ')" "./plain " "nothing written under or beside plain"

done_testing
