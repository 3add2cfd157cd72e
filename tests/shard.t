#!/usr/bin/env bash
# loom-shard: windows, input formats, shuffle determinism (in memory and
# spilled), sharding, manifest, and every bad input (one clear line, exit 1,
# no output left behind).
. "$(dirname "$0")/lib.sh"
REF="python3 $TESTS/tfrecord_ref.py"
cd "$T"

# ids 1..N, 10 per line
ids() { seq 1 "$1" | paste -d' ' - - - - - - - - - -; }
# u16 / u32 little-endian of the same ids
bin() { python3 -c "import sys,struct; n=int(sys.argv[1]); w=sys.argv[2]; sys.stdout.buffer.write(b''.join(struct.pack('<'+w, i) for i in range(1, n+1)))" "$1" "$2"; }
differ() { ! cmp -s "$1" "$2"; }

ids 100 > t100.txt
touch .stamp

# --- windows: Graphcore semantics ------------------------------------------
run loom-shard -f text -L 10 --no-shuffle -o o1 t100.txt
is_rc 0 "text input, L=10"
like "$err" '^loom-shard: 100 tokens -> 9 records \(seq 10, stride 10\) in 1 shard, .* stream order, .* -> o1.manifest.json$' "summary line"
is "$(wc -l < "$err")" 1 "one summary line only"
ok "shard, index and manifest exist" test -s o1-00000-of-00001.tfrecord -a -s o1-00000-of-00001.tfrecord.index -a -s o1.manifest.json
loom-cat --ids o1-00000-of-00001.tfrecord > got.txt
$REF windows 10 10 0 < t100.txt > want.txt
same_file got.txt want.txt "9 windows 1..10, 11..20, ... 81..90 (start < n - L)"
$REF ids o1-00000-of-00001.tfrecord > ref_ids.txt
same_file ref_ids.txt want.txt "independent Python reader decodes the same samples"
is "$($REF verify o1-00000-of-00001.tfrecord)" "9 records" "independent CRC check passes"
is "$(cat o1-00000-of-00001.tfrecord.index)" "$($REF idx o1-00000-of-00001.tfrecord)" "index == tfrecord2idx's"
no_tmp_left . "no temporaries"

for spec in "10 3 0" "10 3 1" "10 10 1" "7 20 1" "4 1 0" "10 7 1"; do
	set -- $spec
	ids 25 > t25.txt
	run loom-shard -f text -L "$1" -s "$2" $([ "$3" = 1 ] && echo --keep-tail) --no-shuffle -o w t25.txt
	loom-cat --ids w-00000-of-00001.tfrecord > got.txt
	$REF windows "$1" "$2" "$3" < t25.txt > want.txt
	same_file got.txt want.txt "25 tokens, L=$1 S=$2 keep-tail=$3: $(wc -l < want.txt) samples as specified"
done
ids 24 > t24.txt
run loom-shard -f text -L 10 --keep-tail --no-shuffle -o w t24.txt
is "$(loom-cat --ids w-00000-of-00001.tfrecord | wc -l)" 2 "24 tokens, L=10: tail of 4 < L/2 dropped"
ids 25 > t25.txt
run loom-shard -f text -L 10 --keep-tail --no-shuffle -o w t25.txt
is "$(loom-cat --ids w-00000-of-00001.tfrecord | tail -1)" "21 22 23 24 25" "25 tokens: tail 21..25 kept"
like "$err" '3 records .*1 tail' "summary mentions the tail"
ids 10 | head -1 > t10.txt
run loom-shard -f text -L 10 --keep-tail --no-shuffle -o w t10.txt
is "$(loom-cat --ids w-00000-of-00001.tfrecord)" "1 2 3 4 5 6 7 8 9 10" "n == L: no window, the tail is the whole stream"

# --- input formats and multiple inputs --------------------------------------
bin 100 H > t.u16
bin 100 I > t.u32
run loom-shard -f u16 -L 10 --no-shuffle -o u16 t.u16
same_file u16-00000-of-00001.tfrecord o1-00000-of-00001.tfrecord "u16 input == text input"
run loom-shard -f u32 -L 10 --no-shuffle -o u32 t.u32
same_file u32-00000-of-00001.tfrecord o1-00000-of-00001.tfrecord "u32 input == text input"
run loom-shard -L 10 --no-shuffle -o def t.u16
same_file def-00000-of-00001.tfrecord o1-00000-of-00001.tfrecord "default format is u16"
ids 100 | head -4 > a.txt; ids 100 | tail -6 > b.txt
run loom-shard -f text -L 10 --no-shuffle -o two a.txt b.txt
same_file two-00000-of-00001.tfrecord o1-00000-of-00001.tfrecord "two inputs are one stream"
rc=0; loom-shard -f u32 -L 10 --no-shuffle -o stdin < t.u32 2>"$err" || rc=$?
is_rc 0 "stdin input"
same_file stdin-00000-of-00001.tfrecord o1-00000-of-00001.tfrecord "stdin == file"
printf '1\t2\r\n3   4\n\n5' > ws.txt
run loom-shard -f text -L 2 --keep-tail --no-shuffle -o ws ws.txt
is "$(loom-cat --ids ws-00000-of-00001.tfrecord | tr '\n' '|')" "1 2|3 4|5|" "any whitespace separates text ids; no final newline needed"
printf '0 4294967295 65536\n' > big.txt
run loom-shard -f text -L 2 --keep-tail --no-shuffle -o big big.txt
is "$(loom-cat --ids big-00000-of-00001.tfrecord | tr '\n' '|')" "0 4294967295|65536|" "ids up to 2^32-1"

# --- sharding ---------------------------------------------------------------
ids 1000 > t1000.txt
run loom-shard -f text -L 10 --no-shuffle -n 3 -o rr t1000.txt
is "$(ls rr-*.tfrecord | tr '\n' ' ')" "rr-00000-of-00003.tfrecord rr-00001-of-00003.tfrecord rr-00002-of-00003.tfrecord " "--shards 3 names"
is "$(loom-cat --ids rr-00001-of-00003.tfrecord | head -2 | cut -d' ' -f1 | tr '\n' ' ')" "11 41 " "round robin: shard 1 has samples 1, 4, ..."
n=0; for f in rr-*.tfrecord; do n=$((n + $(loom-cat --ids "$f" | wc -l))); done
is "$n" 99 "99 samples over 3 shards"
run loom-shard -f text -L 10 --no-shuffle -n 12 -o many t100.txt
is_rc 0 "more shards than records"
like "$err" '^loom-shard: warning: 9 records for 12 shards: 3 shards are empty$' "  warns about the empty shards"
is "$(ls many-*-of-00012.tfrecord | wc -l)" 12 "  all 12 shards exist (3 empty)"
run loom-shard -f text -L 10 --no-shuffle -r 40 -o rp t1000.txt
is "$(ls rp-*.tfrecord | tr '\n' ' ')" "rp-00000-of-00003.tfrecord rp-00001-of-00003.tfrecord rp-00002-of-00003.tfrecord " "--records-per-shard 40: 3 shards"
is "$(for f in rp-*.tfrecord; do loom-cat --ids $f | wc -l; done | tr '\n' ' ')" "40 40 19 " "  of 40, 40, 19 records, in order"
is "$(loom-cat --ids rp-00001-of-00003.tfrecord | head -1 | cut -d' ' -f1)" 401 "  shard 1 starts at sample 40"

# --- manifest ---------------------------------------------------------------
H=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
run loom-shard -f text -L 10 -n 2 --seed 7 --vocab-size 1001 --vocab-sha256 $H -o man t1000.txt
is_rc 0 "manifest run"
run python3 - man.manifest.json <<'EOF'
import hashlib, json, os, sys
m = json.load(open(sys.argv[1]))
errs = []
def check(c, what):
    if not c: errs.append(what)
check(m["schema_version"] == 1, "schema_version")
check(m["seq_len"] == 10 and m["stride"] == 10, "seq_len/stride")
check(m["vocab_size"] == 1001, "vocab_size")
check(m["vocab_sha256"] == "0123456789abcdef" * 4, "vocab_sha256")
check(m["seed"] == 7 and m["shuffle"] is True, "seed/shuffle")
check(m["tokens"] == 1000 and m["records"] == 99, "tokens/records")
check(m["feature"] == "input_ids" and m["input_format"] == "text", "feature/format")
check(m["command"][-1] == "t1000.txt" and "--seed" in m["command"], "command")
check(len(m["shards"]) == 2, "2 shards")
tot = 0
for s in m["shards"]:
    data = open(s["file"], "rb").read()
    check(hashlib.sha256(data).hexdigest() == s["sha256"], "sha256 " + s["file"])
    check(len(data) == s["bytes"], "bytes " + s["file"])
    check(os.path.exists(s["index"]), "index " + s["index"])
    check(len(open(s["index"]).read().splitlines()) == s["records"], "records " + s["file"])
    tot += s["records"]
check(tot == 99, "total records")
print("\n".join(errs) or "ok")
EOF
is "$(cat "$out")" "ok" "manifest: schema, options, per-shard records/bytes/sha256 all true"

run loom-shard -f text -L 10 --no-sha256 --vocab-sha256 ${H^^} -o nosha t1000.txt
is_rc 0 "--no-sha256"
is "$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["shards"][0]["sha256"], m["vocab_sha256"] == "0123456789abcdef" * 4)' nosha.manifest.json)" "None True" "  sha256 null in the manifest; --vocab-sha256 stored lower-case"
loom-shard -q -f text -L 10 -o withsha t1000.txt
same_file nosha-00000-of-00001.tfrecord withsha-00000-of-00001.tfrecord "  same shard bytes as with hashing"

# --- shuffle ----------------------------------------------------------------
ids 20000 > t20k.txt
run loom-shard -f text -L 16 --seed 42 -n 2 -o s1 t20k.txt
run loom-shard -f text -L 16 --seed 42 -n 2 -o s2 t20k.txt
ok "same seed: byte-identical shards" cmp -s s1-00000-of-00002.tfrecord s2-00000-of-00002.tfrecord
run loom-shard -f text -L 16 --seed 42 -n 2 -j 1 -o sj t20k.txt
ok "  --threads 1 gives the same bytes" cmp -s s1-00000-of-00002.tfrecord sj-00000-of-00002.tfrecord
run loom-shard -f text -L 16 --seed 42 -n 2 -j 3 --no-shuffle -o sk t20k.txt
run loom-shard -f text -L 16 --seed 42 -n 2 -j 1 --no-shuffle -o sl t20k.txt
ok "  --no-shuffle: --threads 3 == --threads 1" cmp -s sk-00001-of-00002.tfrecord sl-00001-of-00002.tfrecord
# 300k ids are 1.2 MB of raw u32 samples: more than --memory 1M keeps
ids 300000 > t300k.txt
run loom-shard -f text -L 16 --seed 42 -n 2 -o s1m t300k.txt
run loom-shard -f text -L 16 --seed 42 -n 2 --memory 1M -o s3 t300k.txt
is_rc 0 "--memory 1M run"
like "$err" 'spilled' "  spills to bucket files"
ok "  identical shards whatever the memory limit" cmp -s s1m-00000-of-00002.tfrecord s3-00000-of-00002.tfrecord
ok "  (second shard too)" cmp -s s1m-00001-of-00002.tfrecord s3-00001-of-00002.tfrecord
same_file s1m-00000-of-00002.tfrecord.index s3-00000-of-00002.tfrecord.index "  and indexes"
no_tmp_left . "  no temporaries left after a spill"
is "$(ls -A | grep -c loom-shard)" 0 "  no bucket files left"
run loom-shard -f text -L 16 --seed 43 -n 2 -o s4 t20k.txt
ok "another seed: another order" differ s1-00000-of-00002.tfrecord s4-00000-of-00002.tfrecord
run loom-shard -f text -L 16 --no-shuffle -o s5 t20k.txt
(loom-cat --ids s1-00000-of-00002.tfrecord; loom-cat --ids s1-00001-of-00002.tfrecord) | sort > a.txt
loom-cat --ids s5-00000-of-00001.tfrecord | sort > b.txt
same_file a.txt b.txt "shuffled records are a permutation of the stream's"
ok "  and not in stream order" differ <(loom-cat --ids s1-00000-of-00002.tfrecord | head -5) <(loom-cat --ids s5-00000-of-00001.tfrecord | head -5)

# --- bad input: one line, exit 1, nothing left ------------------------------
bad() { # name expected-regex args...
	local name=$1 re=$2; shift 2
	rm -rf bad; mkdir bad
	fails_with 1 "$re" "$name" loom-shard "$@"
	is "$(ls -A bad | wc -l)" 0 "$name: no output file"
}
printf '1 2 3\n4 abc 6\n' > notnum.txt
bad "text token not a number" '^loom-shard: notnum.txt: line 2: token .abc. is not a number$' -f text -L 2 -o bad/x notnum.txt
printf '1 2 3\n4 5\n4294967296 6\n' > huge.txt
bad "text token >= 2^32" '^loom-shard: huge.txt: line 3: token .4294967296. is >= 2\^32$' -f text -L 2 -o bad/x huge.txt
printf '1 2 -3\n' > neg.txt
bad "negative token" "line 1: token '-3' is not a number" -f text -L 2 -o bad/x neg.txt
: > empty.txt
bad "empty input" '^loom-shard: no samples: the input has 0 tokens; a sample needs more than --seq 2 ' -f text -L 2 -o bad/x empty.txt
bad "too short input" 'no samples: the input has 3 tokens' -f text -L 4 -o bad/x <(echo 1 2 3)
printf 'abc' > odd.u16
bad "u16 input cut mid-token" '^loom-shard: odd.u16: input ends inside a u16 token \(1 stray byte at byte 2\)$' -f u16 -L 1 -o bad/x odd.u16
bad "token >= --vocab-size" 'token 1000 at position 999 is not below the vocabulary size 1000' -f text -L 10 --vocab-size 1000 -o bad/x t1000.txt
bad "missing input" "^loom-shard: cannot open 'nope.txt': No such file or directory$" -f text -o bad/x nope.txt
# an error in the second input, after samples were written
ids 100 > good.txt
bad "error in a later input" 'notnum.txt: line 2' -f text -L 2 --no-shuffle -o bad/x good.txt notnum.txt
bad "bad input with spilling shuffle" 'notnum.txt: line 2' -f text -L 2 --memory 1M -o bad/x t300k.txt notnum.txt
run loom-shard -f text -L 10 -q -o new/sub/dir/x t100.txt
is_rc 0 "missing output directories are created (mkdir -p)"
ok "  shards and manifest under new/sub/dir" test -s new/sub/dir/x-00000-of-00001.tfrecord -a -s new/sub/dir/x.manifest.json
no_tmp_left new/sub/dir "  no temporary debris there"
: > plainfile
run loom-shard -f text -L 10 -o plainfile/x t100.txt
is_rc 1 "a file where the output directory should be: exit 1"
is "$(cat "$err")" "loom-shard: 'plainfile' is not a directory" "  said before reading any input"

run loom-shard -f text -L 10 --tmpdir no/such/tmp -o x t100.txt
is_rc 1 "missing --tmpdir: exit 1"
is "$(cat "$err")" "loom-shard: temporary directory 'no/such/tmp' does not exist" "  said before reading any input"

# --- usage ------------------------------------------------------------------
run loom-shard --help
is_rc 0 "--help exits 0"
like "$out" '^usage: loom-shard' "  usage on stdout"
like "$out" 'T \+ 1' "  documents seq-len = T + 1"
run loom-shard t100.txt
is_rc 2 "missing -o: exit 2"
run loom-shard -o x -n 2 -r 3 t100.txt
is_rc 2 "--shards with --records-per-shard: exit 2"
run loom-shard -o x -f u8 t100.txt
is_rc 2 "unknown format: exit 2"
run loom-shard -o x -L 0 t100.txt
is_rc 2 "--seq-len 0: exit 2"
run loom-shard -o x --vocab-sha256 xyz t100.txt
is_rc 2 "bad --vocab-sha256: exit 2"
done_testing
