#!/usr/bin/env bash
# loom-cat: JSON lines (any feature type), --ids, --range through the index,
# stdin, quiet under | head, and bad input (one line, exit 1).
. "$(dirname "$0")/lib.sh"
REF="python3 $TESTS/tfrecord_ref.py"
cd "$T"

seq 1 100 | tr '\n' ' ' > t.txt
loom-shard -q -f text -L 10 --no-shuffle -o s t.txt
f=s-00000-of-00001.tfrecord

run loom-cat $f
is_rc 0 "JSON lines"
is "$(head -2 "$out")" '{"input_ids":[1,2,3,4,5,6,7,8,9,10]}
{"input_ids":[11,12,13,14,15,16,17,18,19,20]}' "  first two records"
is "$(wc -l < "$out")" 9 "  9 lines"
is "$(wc -c < "$err")" 0 "  nothing on stderr"
cp "$out" lines.json
run python3 -c "import json,sys; print(sum(len(json.loads(l)['input_ids']) for l in open(sys.argv[1])))" lines.json
is "$(cat "$out")" 90 "  valid JSON, 90 ids"

run loom-cat --ids $f
is "$(sed -n 9p "$out")" "81 82 83 84 85 86 87 88 89 90" "--ids: bare ids"
$REF ids $f > ref.txt
same_file "$out" ref.txt "  == independent Python decoder"

run loom-cat --range 0:2 $f
is "$(cat "$out")" '{"input_ids":[1,2,3,4,5,6,7,8,9,10]}
{"input_ids":[11,12,13,14,15,16,17,18,19,20]}' "--range 0:2"
run loom-cat --ids --range 7: $f
is "$(cut -d' ' -f1 "$out" | tr '\n' ' ')" "71 81 " "--range 7: to the end"
run loom-cat --ids --range :1 $f
is "$(cat "$out")" "1 2 3 4 5 6 7 8 9 10" "--range :1"
run loom-cat --ids --range 4 $f
is "$(cut -d' ' -f1 "$out")" "41" "--range 4: one record"
run loom-cat --ids --range 50:60 $f
is_rc 0 "--range past the end: nothing, exit 0"
is "$(wc -c < "$out")" 0 "  no output"

# ranges across files: records are numbered across all FILEs
loom-shard -q -f text -L 10 --no-shuffle -r 4 -o m t.txt
run loom-cat --ids --range 3:6 m-00000-of-00003.tfrecord m-00001-of-00003.tfrecord m-00002-of-00003.tfrecord
is "$(cut -d' ' -f1 "$out" | tr '\n' ' ')" "31 41 51 " "--range 3:6 across shard boundaries"
run loom-cat --ids m-0000*-of-00003.tfrecord
same_file "$out" <(loom-cat --ids $f) "several files stream in order"

cat $f | loom-cat --ids - > stdin.txt
same_file stdin.txt <(loom-cat --ids $f) "stdin (-)"

# Any feature types (hand-encoded by the Python reference).
hex=$($REF example "text=bytes:6869,ff00" "score=float:0.5,-2" "ids=int:-1,300" "empty=int:")
$REF write mixed.tfrecord "$hex"
run loom-cat mixed.tfrecord
is "$(cat "$out")" '{"empty":[],"ids":[-1,300],"score":[0.5,-2.0],"text":["hi",{"base64":"/wA="}]}' "bytes, float and int64 features as JSON"
run loom-cat --ids --feature ids mixed.tfrecord
is "$(cat "$out")" "-1 300" "--ids --feature ids"

# Quiet under | head.
seq 1 200000 | tr '\n' ' ' > big.txt
loom-shard -q -f text -L 100 --no-shuffle -o big big.txt
rc=0; loom-cat big-00000-of-00001.tfrecord 2>"$err" | head -1 > /dev/null || rc=$?
is "$(wc -c < "$err")" 0 "| head: no message"
rc=0; (trap '' PIPE; loom-cat big-00000-of-00001.tfrecord 2>"$err" | head -1 > /dev/null) || rc=$?
is "$(wc -c < "$err")" 0 "| head with SIGPIPE ignored: no message either"

# --- bad input --------------------------------------------------------------
bad() { # name regex args... (not fails_with: records before a bad one are printed)
	local name=$1 re=$2; shift 2
	run loom-cat "$@"
	is_rc 1 "$name: exit 1"
	like "$err" "$re" "$name: message"
	is "$(wc -l < "$err")" 1 "$name: one line"
}
cp $f bad.tfrecord; flip bad.tfrecord 80
bad "payload CRC" '^loom-cat: bad.tfrecord: record 1 at byte 47: payload CRC mismatch$' bad.tfrecord
cp $f.index bad.tfrecord.index
bad "payload CRC through the index" '^loom-cat: bad.tfrecord: record 1 at byte 47: payload CRC mismatch$' --range 1:2 bad.tfrecord
run loom-cat --range 0:1 bad.tfrecord
is_rc 0 "  records before it still print"
cp $f trunc.tfrecord; truncate -s -3 trunc.tfrecord
bad "truncated final record" '^loom-cat: trunc.tfrecord: record 8 at byte 376: truncated record' trunc.tfrecord
is "$(wc -l < "$out")" 8 "  after the 8 good records"
$REF write text.tfrecord "$(printf 'not a protobuf at all' | od -v -An -tx1 | tr -d ' \n')"
bad "non-Example payload" '^loom-cat: text.tfrecord: record 0 at byte 0: not a tf.train.Example: ' text.tfrecord
bad "non-Example payload, --ids" '^loom-cat: text.tfrecord: record 0 at byte 0: not a tf.train.Example: ' --ids text.tfrecord
bad "--ids of a missing feature" "^loom-cat: mixed.tfrecord: record 0 at byte 0: no feature 'input_ids'$" --ids mixed.tfrecord
bad "--ids of a float feature" "feature 'score' is a float list, not an int64 list" --ids --feature score mixed.tfrecord
cp $f noidx.tfrecord
bad "--range without an index" "^loom-cat: cannot open 'noidx.tfrecord.index': No such file or directory$" --range 0:1 noidx.tfrecord
cp $f short.tfrecord; head -3 $f.index > short.tfrecord.index
bad "index disagreeing with its file (size)" '^loom-cat: short.tfrecord.index: index disagrees with its file: it covers 141 bytes in 3 records, the file has 423 bytes$' --range 0:1 short.tfrecord
cp $f shifted.tfrecord; printf '0 40\n40 54\n' > shifted.tfrecord.index; tail -n +3 $f.index >> shifted.tfrecord.index
bad "index disagreeing with its file (boundary)" '^loom-cat: shifted.tfrecord: record 0 at byte 0: index disagrees with its file: index says a payload of 24 bytes, the record header says 31$' --range 0:1 shifted.tfrecord
printf '0 47\nx\n' > junk.tfrecord.index; cp $f junk.tfrecord
bad "malformed index" "^loom-cat: junk.tfrecord.index: line 2: not '<offset> <size>'$" --range 0:1 junk.tfrecord
bad "missing file" "^loom-cat: cannot open 'nope': No such file or directory$" nope

loom-cat --ids < $f > nofile.txt
same_file nofile.txt <(loom-cat --ids $f) "no FILE: reads stdin"
run loom-cat < /dev/null
is_rc 0 "no FILE, empty stdin: no records, exit 0"
is "$(cat "$out" "$err")" "" "and no output"
run loom-cat --range 0:1 < $f
is_rc 2 "no FILE with --range: exit 2 (stdin has no index)"
if command -v script >/dev/null; then
	rc=0; script -qec "loom-cat" "$T/tty" > /dev/null 2>&1 < /dev/null || rc=$?
	is_rc 2 "no FILE and stdin a terminal: exit 2"
	like "$T/tty" "^loom-cat: no input file, and stdin is a terminal" "says so"
fi
run loom-cat --range 5:2 $f
is_rc 2 "--range end before start: exit 2"
run loom-cat --range x:2 $f
is_rc 2 "--range not a number: exit 2"
run loom-cat --help
is_rc 0 "--help"
done_testing
