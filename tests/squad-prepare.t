#!/usr/bin/env bash
# loom-squad prepare: a SQuAD v1.1 file -> BERT features as TFRecord shards
# of tf.train.Example (run_squad.py's names + what maps a window back to
# the text) + index + manifest (formats/squad-features.md), committed as
# loom-shard's sets are; bad input is one line naming the file and the
# question, exit 1, nothing written.  The vocabulary and the SQuAD file are
# written here: every record below is checked by hand.
. "$(dirname "$0")/lib.sh"
cd "$T"

# ids: [PAD] 0 [UNK] 1 [CLS] 2 [SEP] 3 [MASK] 4 the 5 cat 6 sat 7 on 8
# mat 9 who 10 what 11 ? 12 . 13 where 14 ...
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' the cat sat on mat who what '?' . \
	where did dog a '##s' run > vocab.txt
# context bytes: The[0,3) cat[4,7) sat[8,11) on[12,14) the[15,18) mat[19,22) .[22,23)
squad() { # CONTEXT Q1-ANSWER-START: a file of two questions on one paragraph
	cat <<JSON
{"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": "$1", "qas": [
 {"id": "q1", "question": "Who sat?", "answers": [{"text": "The cat", "answer_start": $2}]},
 {"id": "q2", "question": "Where sat the cat?", "answers": [{"text": "the mat", "answer_start": 15}]}]}]}]}
JSON
}
squad "The cat sat on the mat." 0 > sq.json

run loom-squad prepare --vocab vocab.txt --seq 12 --stride 2 sq.json -o out/sq
is_rc 0 "prepare: exit 0"
is "$(wc -c < "$out")" 0 "  nothing on stdout"
like "$err" '^loom-squad: 2 questions -> 5 features \(seq 12, stride 2, max-query 64; 3 with the answer in the window\) in 1 shard, .* -> out/sq.manifest.json$' \
	"  the summary line"
is "$(ls -A out | tr '\n' ' ')" "sq-00000-of-00001.tfrecord sq-00000-of-00001.tfrecord.index sq.manifest.json " \
	"  a shard, its index, the manifest, nothing else"

# By hand: q1 "who sat ?" (3 tokens) leaves 12 - 3 - 3 = 6 context tokens a
# window; the context's 7 tokens give windows at 0 (the cat sat on the mat)
# and 2 (sat on the mat .).  q2 "where sat the cat ?" (5) leaves 4: windows
# at 0, 2 and 4; its answer "the mat" is context tokens 4-5.
run loom-cat out/sq-00000-of-00001.tfrecord
is_rc 0 "loom-cat reads the records"
is "$(wc -l < "$out")" 5 "  five features"
is "$(sed -n 1p "$out")" '{"doc_start":[5],"end_positions":[6],"example_index":[0],"input_ids":[2,10,7,12,3,5,6,7,8,5,9,3],"input_mask":[1,1,1,1,1,1,1,1,1,1,1,1],"is_impossible":[0],"segment_ids":[0,0,0,0,0,1,1,1,1,1,1,1],"start_positions":[5],"token_end":[-1,-1,-1,-1,-1,3,7,11,14,18,22,-1],"token_start":[-1,-1,-1,-1,-1,0,4,8,12,15,19,-1],"unique_ids":[1000000000]}' \
	"  q1, window 0: [CLS] who sat ? [SEP] the cat sat on the mat [SEP]; answer at 5-6, bytes [0,7)"
is "$(sed -n 2p "$out")" '{"doc_start":[5],"end_positions":[0],"example_index":[0],"input_ids":[2,10,7,12,3,7,8,5,9,13,3,0],"input_mask":[1,1,1,1,1,1,1,1,1,1,1,0],"is_impossible":[0],"segment_ids":[0,0,0,0,0,1,1,1,1,1,1,0],"start_positions":[0],"token_end":[-1,-1,-1,-1,-1,11,14,18,22,23,-1,-1],"token_start":[-1,-1,-1,-1,-1,8,12,15,19,22,-1,-1],"unique_ids":[1000000001]}' \
	"  q1, window 1: sat on the mat . [SEP] [PAD]; no answer: 0, 0"
is "$(sed -n 4p "$out")" '{"doc_start":[7],"end_positions":[10],"example_index":[1],"input_ids":[2,14,7,5,6,12,3,7,8,5,9,3],"input_mask":[1,1,1,1,1,1,1,1,1,1,1,1],"is_impossible":[0],"segment_ids":[0,0,0,0,0,0,0,1,1,1,1,1],"start_positions":[9],"token_end":[-1,-1,-1,-1,-1,-1,-1,11,14,18,22,-1],"token_start":[-1,-1,-1,-1,-1,-1,-1,8,12,15,19,-1],"unique_ids":[1000000003]}' \
	"  q2, window 1: sat on the mat; answer at 9-10, bytes [15,22)"
is "$(sed -n 5p "$out" | grep -o '"start_positions":\[[0-9]*\]\|"end_positions":\[[0-9]*\]' | tr '\n' ' ')" \
	'"end_positions":[8] "start_positions":[7] ' "  q2, window 2 (the mat .): answer at 7-8"
run loom-index --verify out/sq-00000-of-00001.tfrecord
is_rc 0 "the index matches the shard"

# The manifest.
vsha=$(sha256sum vocab.txt | cut -d' ' -f1)
fsha=$(sha256sum sq.json | cut -d' ' -f1)
is "$(/usr/bin/python3 - out/sq.manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
print(m["format"], m["schema_version"], m["kind"], m["kind_version"], m["seq_len"], m["stride"],
      m["max_query"], m["lowercase"], m["vocab_size"], m["questions"], m["records"],
      m["answers_in_window"], m["unique_id_base"], m["source"], m["source_version"])
print(" ".join("%s:%s:%s:%d" % (f["name"], f["shape"], f["dtype"], f["length"]) for f in m["features"]))
print(m["vocab_sha256"], m["source_sha256"])
s = m["shards"]
print(len(s), s[0]["file"], s[0]["index"], s[0]["records"], s[0]["bytes"], len(s[0]["sha256"]))
print(" ".join(m["command"][1:]))
PY
)" "loom-tfrecord-shards 1 squad-features 1 12 2 64 True 20 2 5 3 1000000000 sq.json 1.1
unique_ids:record:int64:1 input_ids:token:int64:12 input_mask:token:int64:12 segment_ids:token:int64:12 start_positions:record:int64:1 end_positions:record:int64:1 is_impossible:record:int64:1 example_index:record:int64:1 doc_start:record:int64:1 token_start:token:int64:12 token_end:token:int64:12
$vsha $fsha
1 sq-00000-of-00001.tfrecord sq-00000-of-00001.tfrecord.index 5 $(wc -c < out/sq-00000-of-00001.tfrecord) 64
prepare --vocab vocab.txt --seq 12 --stride 2 -o out/sq sq.json" "the manifest: kind, shape, features, checksums, counts"

# -v: the vocabulary and the file read; none of it under -q.
run loom-squad prepare -v --vocab vocab.txt --seq 12 --stride 2 sq.json -o v/sq
like "$err" '^loom-squad: vocabulary vocab.txt \(vocab.txt\): 20 WordPiece tokens \(ids 0\.\.19\), lower-cased \(by its tokens \(no upper-case ones\)\)$' \
	"-v: the vocabulary and what decided its casing"
like "$err" '^loom-squad: sq.json: 2 questions, 1 paragraphs -> 5 features$' "-v: the file read"
# the casing used is recorded in the manifest; --lowercase --cased is refused
run loom-squad prepare -q --cased --vocab vocab.txt --seq 12 --stride 2 sq.json -o cased/sq
is "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lowercase"])' cased/sq.manifest.json)" \
	False "--cased: the manifest records lowercase false"
is "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lowercase"])' v/sq.manifest.json)" \
	True "  by default (no upper-case tokens): true"
run loom-squad prepare --lowercase --cased --vocab vocab.txt sq.json -o both/sq
is_rc 2 "--lowercase --cased: exit 2"
is "$(head -1 "$err")" "loom-squad: --lowercase and --cased contradict each other: give one" "  one line"
ok "  nothing written" test ! -e both
run loom-squad prepare -v -q --vocab vocab.txt --seq 12 --stride 2 sq.json -o v/sq
is "$(cat "$err")" "" "-v -q: nothing"

# --shards 2: feature r in shard r mod 2, the same records.
run loom-squad prepare -q --vocab vocab.txt --seq 12 --stride 2 -n 2 sq.json -o two/sq
is "$(cat "$err")" "" "-q: nothing on stderr"
is "$(loom-cat two/sq-00000-of-00002.tfrecord | grep -o 'unique_ids":\[[0-9]*' | tr '\n' ' ')" \
	'unique_ids":[1000000000 unique_ids":[1000000002 unique_ids":[1000000004 ' "--shards 2: round robin"

# Bad input: one line naming the file (and the question), exit 1, nothing written.
bad() { # NAME FILE ERROR-LINE [OPTIONS...]
	local name=$1 file=$2 want=$3; shift 3
	rm -rf bad
	run loom-squad prepare --vocab vocab.txt "$@" "$file" -o bad/sq
	is_rc 1 "$name: exit 1"
	is "$(cat "$err")" "$want" "  one line"
	is "$(ls -A bad 2>/dev/null)" "" "  nothing written"
}
printf '{"data": [' > trunc.json
bad "not JSON" trunc.json "loom-squad: trunc.json:1:10: ']' expected near end of file"
squad "The cat sat on the mat." 3 > moved.json
bad "answer_start not at its text" moved.json \
	"loom-squad: moved.json: question q1: answer 0: answer_start 3 is not where its text is in the context"
squad "" 0 > empty.json
bad "empty context" empty.json "loom-squad: empty.json: article 0 paragraph 0: empty context"
# a context of white space and control characters only has no token either
printf '%s\n' '{"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": " \t\u0001 \u3000\u0007 ", "qas": [' \
	'{"id": "q1", "question": "Who sat?", "answers": [{"text": " ", "answer_start": 0}]}]}]}]}' > blank.json
bad "a context of no tokens" blank.json \
	"loom-squad: blank.json: article 0 paragraph 0: a context of no tokens (only white space or control characters)"
# SQuAD 2.0: the first unanswerable question is named (is_impossible, or
# an empty answers array), not taken and failed on in loom-eval
sq2() { # QAS: one paragraph of SQuAD 2.0 questions
	printf '{"version": "v2.0", "data": [{"title": "T", "paragraphs": [{"context": "The cat sat on the mat.", "qas": [%s]}]}]}\n' "$1"
}
sq2 '{"id": "a1", "question": "Who sat?", "answers": [{"text": "The cat", "answer_start": 0}], "is_impossible": false},
 {"id": "a2", "question": "Who ran?", "answers": [], "plausible_answers": [{"text": "The cat", "answer_start": 0}], "is_impossible": true},
 {"id": "a3", "question": "Who flew?", "answers": [], "is_impossible": true}' > v2.json
bad "SQuAD 2.0: is_impossible" v2.json \
	"loom-squad: v2.json: question a2: \"is_impossible\": true: a SQuAD 2.0 question without an answer; loom reads SQuAD v1.1 (every question answered)"
sq2 '{"id": "b1", "question": "Who ran?", "answers": []}' > noans.json
bad "an empty answers array" noans.json \
	"loom-squad: noans.json: question b1: empty \"answers\": a SQuAD 2.0 question without an answer; loom reads SQuAD v1.1 (every question answered)"
bad "a question longer than the window" sq.json \
	"loom-squad: sq.json: question q2: 5 question tokens leave no room for the context in 8 (raise --seq or lower --max-query)" \
	--seq 8
printf '%s\n' '[PAD]' '[UNK]' the > nocls.txt
run loom-squad prepare --vocab nocls.txt sq.json -o bad/sq
is "$rc:$(cat "$err")" "1:loom-squad: 'nocls.txt' lacks [CLS], which a BERT's input needs ([CLS] question [SEP] context [SEP] [PAD]...)" \
	"a vocabulary without [CLS]: names the vocabulary and the token"
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' the > nosep.txt
run loom-squad prepare --vocab nosep.txt sq.json -o bad/sq
is "$rc:$(cat "$err")" "1:loom-squad: 'nosep.txt' lacks [SEP], which a BERT's input needs ([CLS] question [SEP] context [SEP] [PAD]...)" \
	"a vocabulary without [SEP]"
run loom-squad prepare sq.json -o bad/sq
is_rc 2 "no --vocab: exit 2"
like "$err" '^loom-squad: --vocab is required' "  says so"

# bert-base-uncased is the vocabulary in share/vocab.
run loom-squad prepare --vocab bert-base-uncased sq.json -o bert/sq
is_rc 0 "--vocab bert-base-uncased"
is "$(loom-cat bert/sq-00000-of-00001.tfrecord | head -1 | grep -o '"input_ids":\[[0-9,]*' | cut -d, -f1-8)" \
	'"input_ids":[101,2040,2938,1029,102,1996,4937,2938' "  [CLS] who sat ? [SEP] the cat sat: BERT's ids"

# A killed run leaves the old set: old = --seq 12 (5 records), new = --seq 16
# -n 2; killed at each commit step, the manifest names one whole set.
view() { # DIR: the records of the set its manifest names, or what is wrong
	local f
	f=$(sed -n 's/^ *"file": "\(.*\)",$/\1/p' "$1/sq.manifest.json" 2>/dev/null) || { echo none; return; }
	[ -n "$f" ] || { echo none; return; }
	(cd "$1" && loom-cat $f | sort) 2>&1
}
prep() { (cd "$1" && exec loom-squad prepare -q --vocab ../vocab.txt --stride 2 "${@:2}" ../sq.json -o sq); }
mkdir ref-old ref-new && prep ref-old --seq 12 && prep ref-new --seq 16 -n 2
view ref-old > old.view
view ref-new > new.view
ok "old and new sets differ" test "$(cat old.view)" != "$(cat new.view)"
n=0 seen=" " badness=""
while [ $n -lt 100 ]; do
	rm -rf d && mkdir d && prep d --seq 12
	rc=0
	{ (cd d && LOOM_SHARD_TEST_KILL_AT=$n exec loom-squad prepare -q --vocab ../vocab.txt \
		--stride 2 --seq 16 -n 2 ../sq.json -o sq) 2>/dev/null || rc=$?; } 2>/dev/null
	view d > v.txt
	if cmp -s v.txt old.view; then s=old; elif cmp -s v.txt new.view; then s=new; else s="broken($(head -c 100 v.txt))"; fi
	if [ $rc = 0 ]; then
		[ $s = new ] || badness="$badness; completed: $s"
		break
	fi
	[ $rc = 137 ] || { badness="$badness; step $n: exit $rc"; break; }
	case $s in old|new) seen="$seen$s ";; *) badness="$badness; step $n: $s";; esac
	prep d --seq 12
	[ "$(ls -A d)" = "$(ls -A ref-old)" ] || badness="$badness; after step $n left: $(ls -A d | tr '\n' ' ')"
	n=$((n + 1))
done
is "${badness#; }" "" "killed at each of its $n commit steps: the old set or the new, leftovers removed by the next run"
like <(echo "$seen") ' old .* new ' "  kills landed before and after the commit point"
done_testing
