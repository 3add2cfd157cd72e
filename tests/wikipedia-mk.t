#!/usr/bin/env bash
# pipelines/wikipedia.mk on the bundled sample: local dump and local mirror,
# resumable stages, `make -q` true when done, VOCAB=train, failure leaves no shards.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$TESTS/.." && pwd)
P=$ROOT/pipelines
BIN=$(dirname "$(command -v loom-shard)")/
DUMP=$SHARE/sample/samplewiki-20260101-pages-articles-multistream.xml.bz2
mk() { make -s -f "$P/wikipedia.mk" LOOM_BIN="$BIN" WIKI=samplewiki SEQ=33 SHARDS=2 "$@"; }

run mk DATE=20260101 DUMP="$DUMP" OUT="$T/a" -j2
is_rc 0 "local dump -> shards (make -j2)"
d=$T/a/samplewiki-20260101
ok "manifest" test -f "$d/samplewiki-20260101.manifest.json"
ok "two shards with indexes" test -f "$d/samplewiki-20260101-00001-of-00002.tfrecord.index"
ok "verified stamp" test -f "$d/verified"
like "$err" '^loom-extract: .* articles written' "extract summary"
like "$err" '^loom-bpe: encode: ' "encode summary"
like "$err" '^loom-shard: ' "shard summary"
like "$err" '^loom-index: .*verified' "verify summary"
run mk DATE=20260101 DUMP="$DUMP" OUT="$T/a" -q
is_rc 0 "make -q: nothing left to do"
run mk DATE=20260101 DUMP="$DUMP" OUT="$T/a"
# (make may warn about clock skew on files written a moment ago; no stage may run)
is "$(cat "$out"; grep -v -e 'in the future' -e 'Clock skew' "$err")" "" "a finished run does nothing"

rm "$d/verified"
run mk DATE=20260101 DUMP="$DUMP" OUT="$T/a" -n
like "$out" "loom-index'? --verify" "an interrupted run resumes at the missing stage"
unlike "$out" 'loom-extract' "and does not redo the earlier ones"

# a failing stage in the middle of the pipe leaves no shard directory
run mk DATE=20260101 DUMP="$DUMP" OUT="$T/b" SHARD_FLAGS=--vocab-size=10
ok "pipe failure fails the target" test "$rc" != 0
ok "no shard directory" test ! -e "$T/b/samplewiki-20260101"

run mk DATE=20260101 DUMP="$DUMP" OUT="$T/c" VOCAB=train VOCAB_SIZE=300
is_rc 0 "VOCAB=train"
ok "vocabulary trained" test -f "$T/c/samplewiki-20260101.vocab/vocab.bpe"
like "$T/c/samplewiki-20260101/samplewiki-20260101.manifest.json" '"vocab_size": 300' "manifest has the vocab size"

# VAL=F: a validation split beside the shards, verified with them
run mk DATE=20260101 DUMP="$DUMP" OUT="$T/v" VAL=0.2 SHARD_FLAGS=-q
is_rc 0 "VAL=0.2"
ok "the validation split's manifest, shard and index" test -s "$T/v/samplewiki-20260101/samplewiki-20260101.val.manifest.json" \
	-a -s "$T/v/samplewiki-20260101/samplewiki-20260101.val-00000-of-00001.tfrecord.index"
flip "$T/v/samplewiki-20260101/samplewiki-20260101.val-00000-of-00001.tfrecord" -3
rm "$T/v/samplewiki-20260101/verified"
run mk DATE=20260101 DUMP="$DUMP" OUT="$T/v" VAL=0.2
ok "  verified with the training shards: a flipped byte in it fails" test "$rc" != 0
run mk DATE=20260101 DUMP="$DUMP" OUT="$T/v" VAL=0.2x
ok "VAL=0.2x refused" test "$rc" != 0
like "$err" "VAL='0.2x' is not a fraction" "  naming VAL"

"$P/mirror.sh" available || { done_testing; exit; }
"$P/make-mirror.sh" "$SHARE/sample" samplewiki 20260101 "$T/mirror" >/dev/null
URL=$("$P/mirror.sh" start "$T/mirror" "$T/ms")
trap '"$P/mirror.sh" stop "$T/ms" 2>/dev/null; rm -rf "$T"' EXIT
run mk DATE=latest MIRROR="$URL" OUT="$T/m"
is_rc 0 "DATE=latest from a mirror"
like "$T/m/samplewiki-latest.dump" 'dumps/samplewiki-20260101-pages-articles-multistream.xml.bz2$' "real date resolved"
ok "shards" test -f "$T/m/samplewiki-latest/verified"
"$P/mirror.sh" stop "$T/ms"
run mk DATE=latest MIRROR="$URL" OUT="$T/m" -q
is_rc 0 "done stays done with the mirror down"
done_testing
