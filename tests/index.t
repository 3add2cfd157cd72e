#!/usr/bin/env bash
# loom-index: tfrecord2idx-identical indexes, --verify, --check, --stats, and
# every corruption: one clear line naming file, record and byte; exit 1; no
# index written for the bad file.
. "$(dirname "$0")/lib.sh"
REF="python3 $TESTS/tfrecord_ref.py"
cd "$T"

hexof() { head -c "$1" /dev/zero | tr '\0' "$2" | od -v -An -tx1 | tr -d ' \n'; }
# three records of payload 34, 40 and 35 bytes
# (Examples of 13, 19 and 14 one-byte ids: 21 + n bytes each)
ex() { $REF example "input_ids=int:$(seq -s, 1 "$1")"; }
$REF write three.tfrecord "$(ex 13)" "$(ex 19)" "$(ex 14)"
run loom-index three.tfrecord
is_rc 0 "index three records"
is "$(od -c three.tfrecord.index | head -2 | tr -s ' ')" "$(printf '0 50\n50 56\n106 51\n' | od -c | head -2 | tr -s ' ')" "index is exactly '0 50\\n50 56\\n106 51\\n'"
printf '0 50\n50 56\n106 51\n' > want.index
same_file three.tfrecord.index want.index "  byte for byte"
like "$err" '^loom-index: 1 file, 3 records, 157 B, indexes written' "summary line"
$REF idx three.tfrecord > ref.index
same_file three.tfrecord.index ref.index "== the tfrecord2idx loop (Python reference)"

# A real shard: Examples of varying lengths, several files at once.
seq 1 5000 | tr '\n' ' ' > t.txt
loom-shard -q -f text -L 33 -s 17 --keep-tail -n 2 -o sh t.txt
rm -f sh-*.index
run loom-index sh-00000-of-00002.tfrecord sh-00001-of-00002.tfrecord
is_rc 0 "index two shards"
like "$err" '^loom-index: 2 files, 294 records' "  2 files, 294 records"
for f in sh-0000[01]-of-00002.tfrecord; do
	$REF idx "$f" > ref.index
	same_file "$f.index" ref.index "  $f.index == tfrecord2idx's"
done
run loom-index --verify --stats sh-00000-of-00002.tfrecord
is_rc 0 "--verify --stats"
like "$out" '^sh-00000-of-00002.tfrecord: 147 records, [0-9]+ bytes, payload min [0-9]+ max [0-9]+ mean [0-9.]+$' "  stats line on stdout"
like "$err" 'CRCs and Examples verified' "  summary says verified"
run loom-index --stats -n -j 2 sh-00001-of-00002.tfrecord three.tfrecord sh-00000-of-00002.tfrecord
is "$(cut -d: -f1 "$out" | tr '\n' ' ')" "sh-00001-of-00002.tfrecord three.tfrecord sh-00000-of-00002.tfrecord " "-j 2: results in argument order"
run loom-index -o custom.idx three.tfrecord
same_file custom.idx want.index "-o PATH"
run loom-index -o - three.tfrecord
same_file "$out" want.index "-o - writes to stdout"
run loom-index -o - - < three.tfrecord
same_file "$out" want.index "stdin input"
run loom-index --check three.tfrecord
is_rc 0 "--check: matching index"
like "$err" 'indexes match' "  says so"
: > empty.tfrecord
run loom-index --verify empty.tfrecord
is_rc 0 "empty file: a TFRecord of no records"
is "$(wc -c < empty.tfrecord.index)" 0 "  empty index"
no_tmp_left . "no temporaries"

# --- corruptions ------------------------------------------------------------
# bad NAME REGEX FILE [options]: exit 1, exactly one line, no FILE.index
bad() {
	local name=$1 re=$2 f=$3; shift 3
	rm -f "$f.index"
	fails_with 1 "$re" "$name" loom-index "$@" "$f"
	ok "$name: no index written" test ! -e "$f.index"
	no_tmp_left . "$name: no temporary left"
}
cp three.tfrecord trunc.tfrecord; truncate -s 150 trunc.tfrecord
bad "truncated final record" '^loom-index: trunc.tfrecord: record 2 at byte 106: truncated record: length field says 35 payload bytes, the file has 32 bytes left for payload and CRC$' trunc.tfrecord
cp three.tfrecord pay.tfrecord; flip pay.tfrecord 80
bad "flipped payload byte" '^loom-index: pay.tfrecord: record 1 at byte 50: payload CRC mismatch$' pay.tfrecord --verify
run loom-index pay.tfrecord
is_rc 0 "  without --verify payloads are not read (as tfrecord2idx)"
cp three.tfrecord len.tfrecord; flip len.tfrecord 50
bad "flipped length byte" '^loom-index: len.tfrecord: record 1 at byte 50: length CRC mismatch \(length field 8\)$' len.tfrecord
cp three.tfrecord crc.tfrecord; flip crc.tfrecord 60
bad "flipped length-CRC byte" 'record 1 at byte 50: length CRC mismatch' crc.tfrecord
# a length larger than the file, with a valid length CRC
$REF write long.tfrecord "$(ex 13)" "$(hexof 4000 b)"
truncate -s 200 long.tfrecord
bad "length larger than the file" '^loom-index: long.tfrecord: record 1 at byte 50: truncated record: length field says 4000 payload bytes, the file has 138 bytes left' long.tfrecord --verify
$REF write text.tfrecord "$(ex 13)" "$(printf 'hello, world' | od -v -An -tx1 | tr -d ' \n')"
bad "non-Example payload" '^loom-index: text.tfrecord: record 1 at byte 50: not a tf.train.Example: ' text.tfrecord --verify
# a feature name that is not UTF-8 (proto3 strings must be): refused by
# --verify as by loom-cat, with the same reason
badname=$(python3 -c "import sys; sys.path.insert(0, '$TESTS'); import tfrecord_ref as t
print(t.ld(1, t.ld(1, t.ld(1, b'in\\xffids') + t.ld(2, t.ld(3, t.ld(1, b'\\x01'))))).hex())")
$REF write name.tfrecord "$(ex 13)" "$badname"
bad "feature name not UTF-8" '^loom-index: name.tfrecord: record 1 at byte 50: not a tf.train.Example: feature name: invalid UTF-8 at byte 8$' name.tfrecord --verify
run loom-cat name.tfrecord
is_rc 1 "  loom-cat refuses it too: exit 1"
like "$err" '^loom-cat: name.tfrecord: record 1 at byte 50: not a tf.train.Example: feature name: invalid UTF-8 at byte 8$' "  the same reason"
printf 'garbage' > junk.tfrecord
bad "junk file" 'junk.tfrecord: record 0 at byte 0: truncated record header \(7 of 12 bytes\)' junk.tfrecord
printf '0 50\n50 56\n' > three.tfrecord.index
run loom-index --check three.tfrecord
is_rc 1 "index disagreeing with its file: exit 1"
is "$(cat "$err")" "loom-index: three.tfrecord.index: index disagrees with its file 'three.tfrecord' from line 3 on" "  one line naming the first bad line"
same_file three.tfrecord.index <(printf '0 50\n50 56\n') "  --check leaves the index alone"
run loom-index nope.tfrecord
is_rc 1 "missing file: exit 1"
is "$(cat "$err")" "loom-index: cannot open 'nope.tfrecord': No such file or directory" "  message"
# good files still get their index when another fails
rm -f three.tfrecord.index
run loom-index three.tfrecord trunc.tfrecord
is_rc 1 "one bad file among two: exit 1"
ok "  the good file is indexed" cmp -s three.tfrecord.index want.index
ok "  the bad one is not" test ! -e trunc.tfrecord.index

# --- a big file with one bad byte (the 100 MB case is in tests/bench/tfrecord.sh)
head -c 20000000 /dev/urandom > big.u16
loom-shard -q -f u16 -L 2049 --no-shuffle -o big big.u16
rm big.u16
f=big-00000-of-00001.tfrecord
size=$(wc -c < $f)
ok "a ~28 MB shard ($size bytes)" test "$size" -gt 20000000
pos=$((size * 7 / 10))
rec=$(awk -v p=$pos '$1 <= p && p < $1 + $2 { print NR - 1 " " $1 }' $f.index)
flip $f $pos
rm $f.index
run loom-index --verify $f
is_rc 1 "--verify on $size bytes with one bad byte: exit 1"
like "$err" "^loom-index: $f: record ${rec% *} at byte ${rec#* }: (payload|length) CRC mismatch" "  finds it: record ${rec% *} at byte ${rec#* }"
ok "  no index" test ! -e $f.index
rm -f $f

# --- usage ------------------------------------------------------------------
run loom-index
is_rc 2 "no file: exit 2"
run loom-index -o x a b
is_rc 2 "-o with two files: exit 2"
run loom-index --help
is_rc 0 "--help"
like "$out" 'tfrecord2idx' "  mentions tfrecord2idx"
done_testing
