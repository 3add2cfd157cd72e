#!/usr/bin/env bash
# Bad input, round four (issue 28): every case of each kind gets one line
# that names the file (and the token, key or question) and says what to do,
# and a non-zero exit; ordinary shell use (a pipe, a FIFO with a writer) is
# taken, not refused.  Every file here is made by the test.
. "$(dirname "$0")/lib.sh"
cd "$T"
TO="timeout 120"

# ids: [PAD] 0 [UNK] 1 [CLS] 2 [SEP] 3 [MASK] 4 the 5 cat 6 sat 7
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' the cat sat > vocab.txt
squad() { # CONTEXT QAS-JSON: a SQuAD file of one paragraph
	printf '{"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": "%s", "qas": [%s]}]}]}\n' "$1" "$2"
}
q1='{"id": "q1", "question": "the cat", "answers": [{"text": "sat", "answer_start": 8}]}'
squad "the cat sat" "$q1" > sq.json

# --- a JSON parser's option names do not leak into messages ------------------
printf '{"lr": "a\\u0000b"}' > nul.json
fails_with 2 "^loom-train: nul.json:1: a string holds \\\\u0000 \\(a NUL character\\), which is not allowed here$" \
	"loom-train -c: a \\u0000 in a string" loom-train -c nul.json --steps 1
unlike "$err" "JSON_ALLOW_NUL" "  no library flag name"
squad "the cat sat" '{"id": "q\u0000", "question": "the cat", "answers": [{"text": "sat", "answer_start": 8}]}' > nulq.json
fails_with 1 "^loom-squad: nulq.json:1:[0-9]+: a string holds \\\\u0000 \\(a NUL character\\), which is not allowed here$" \
	"loom-squad prepare: a \\u0000 in a question id" loom-squad prepare --vocab vocab.txt --seq 12 --stride 2 nulq.json -o o/x

# --- configurations and vocabularies from pipes and FIFOs --------------------
run $TO loom-squad prepare -q --vocab vocab.txt --seq 12 --stride 2 <(cat sq.json) -o p/sq
is_rc 0 "loom-squad prepare <(...): the SQuAD file read from the pipe"
run loom-squad prepare -q --vocab vocab.txt --seq 12 --stride 2 sq.json -o r/sq
is "$(loom-cat p/sq-00000-of-00001.tfrecord)" "$(loom-cat r/sq-00000-of-00001.tfrecord)" \
	"  the same features as from the file"
mkfifo sq.fifo
$TO cat sq.json > sq.fifo &
writer=$!
run $TO loom-squad prepare -q --vocab vocab.txt --seq 12 --stride 2 sq.fifo -o f/sq
wait $writer
is_rc 0 "loom-squad prepare FIFO (with a writer): read"
fails_with 1 "^loom-squad: '/dev/zero' is a device, not a file or a pipe$" \
	"loom-squad prepare /dev/zero" loom-squad prepare --vocab vocab.txt --seq 12 --stride 2 /dev/zero -o z/sq
G=$SHARE/vocab/gpt2
run $TO loom-bpe encode -q -f text --vocab <(cat "$G/encoder.json"),<(cat "$G/vocab.bpe") <<< "hello"
is_rc 0 "loom-bpe encode --vocab <(encoder.json),<(vocab.bpe): read from the pipes"
is "$(cat "$out")" "31373 50256" "  and encodes with them"

# --- a default end-of-document token the vocabulary lacks: said, not dropped ---
printf '%s\n' '[PAD]' '[UNK]' the cat > nosep.txt
fails_with 2 "^loom-bpe: vocabulary 'nosep.txt' has no \\[SEP\\], the default end-of-document token: give --eos ID, or --eos none for documents without one$" \
	"loom-bpe encode: a vocabulary without the default end-of-document token" \
	loom-bpe encode --vocab nosep.txt --lowercase -f text <<< "the cat"
run loom-bpe encode -q --vocab nosep.txt --lowercase --eos none --format text <<< "the cat"
is "$rc:$(cat "$out")" "0:2 3" "  --eos none: documents without one, as asked"

# --- plurals -------------------------------------------------------------------
run loom-squad prepare --vocab vocab.txt --seq 12 --stride 2 sq.json -o s/sq
like "$err" "^loom-squad: 1 question -> 1 feature \\(" "loom-squad: '1 question -> 1 feature'"
run loom-bpe encode --vocab gpt2 <<< "hello"
like "$err" "^loom-bpe: encode: 1 document \\(0 dropped\\)" "loom-bpe encode: '1 document'"

echo "1 2 3 4 5 6 7 8 9 10" > one.txt
run loom-shard -f text -L 9 -o one/d one.txt
like "$err" "^loom-shard: 10 tokens -> 1 record \\(seq 9" "loom-shard: '1 record'"
run loom-index one/d-00000-of-00001.tfrecord
like "$err" "^loom-index: 1 file, 1 record, " "loom-index: '1 file, 1 record'"
run loom-feed -m one/d.manifest.json -b 1 -t 8 -s 1 --text
like "$err" "^loom-feed: 1 batch of 1x9 \\(rank 0 of 1\\) from 1 record in 1 shard " "loom-feed: '1 batch ... 1 record'"
run loom-bpe decode -f text <<< "31373"
like "$err" "^loom-bpe: decode: 1 token, " "loom-bpe decode: '1 token'"

make_frames 4 9 1 128 1 > one.frames
run loom-train -c tiny --steps 1 --threads 1 < one.frames
like "$err" "^loom-train: tiny: [0-9]+ parameters, 1 thread, .* grad_accum 1, 1 step, lr " "loom-train: '1 thread', '1 step'"
like "$err" "^loom-train: done: 1 step, loss " "  and 'done: 1 step'"

# --- loom-plot: a log without points names the file, in its kind's words -------
: > empty.jsonl
fails_with 1 "^loom-plot: no points: empty.jsonl: empty: neither a JSON log nor a TensorBoard event file \\(--y 'loss', 'eval_loss', -x 'step'\\)$" \
	"loom-plot: an empty log" loom-plot empty.jsonl
echo '{"step": 1, "lr": 0.1}' > nokey.jsonl
fails_with 1 "^loom-plot: no points: nokey.jsonl: 1 JSON log line, none with the x key and a --y key \\(--y 'loss', 'eval_loss', -x 'step'\\)$" \
	"loom-plot: a JSON log without the keys" loom-plot nokey.jsonl
# an event file of one event: file_version only (wall_time 1.0)
/usr/bin/python3 "$TESTS/tfrecord_ref.py" write events.tfevents \
	09000000000000f03f1a0d627261696e2e4576656e743a32
fails_with 1 "^loom-plot: no points: events.tfevents: a TensorBoard event file without scalars \\(--y 'loss', 'eval_loss', -x 'step'\\)$" \
	"loom-plot: an event file without scalars" loom-plot events.tfevents
unlike "$err" "line" "  no talk of lines"
echo '{"step": 1, "loss": 2}' > good.jsonl
run loom-plot good.jsonl empty.jsonl
is_rc 0 "loom-plot: an empty log beside a good one: exit 0"
like "$err" "^loom-plot: no points: empty.jsonl: empty" "  a line naming the empty one"

# --- messages that say what to do -----------------------------------------------
fails_with 2 "^loom-train: --lr is not an option but a configuration key: give --set lr=3e-5$" \
	"loom-train --lr 3e-5" loom-train --lr 3e-5 --steps 1
fails_with 2 "^loom-train: --weight_decay is not an option but a configuration key: give --set weight_decay=0.1$" \
	"loom-train --weight_decay=0.1" loom-train --weight_decay=0.1 --steps 1
python3 -c "print(' '.join(str(i % 128) for i in range(400)))" > tok.txt
run loom-shard -q -f text -L 9 -o d tok.txt
is_rc 0 "a token set of 9-token records"
fails_with 2 "^loom-feed: d.manifest.json: a token set, whose frames' length is chosen: give --seq \\(its records have 9 tokens: --seq 8 takes them whole\\)$" \
	"loom-feed -m TOKEN-SET without --seq: the manifest's value suggested" \
	loom-feed -m d.manifest.json -b 2 -s 1
run loom-feed -m d.manifest.json -b 2 -s 1 -t 8 --skip-batches 21 --text
is_rc 0 "loom-feed: the last batch of the epoch"
like "$err" "^loom-feed: 1 batch of 2x9 " "  '1 batch'"
fails_with 1 "^loom-squad: p/sq-00000-of-00001.tfrecord is a TFRecord file \\(prepared features\\?\\), not a SQuAD file: give the SQuAD v1.1 JSON \\(as train-v1.1.json\\)$" \
	"loom-squad prepare of a TFRecord" \
	loom-squad prepare --vocab vocab.txt p/sq-00000-of-00001.tfrecord -o t/sq

done_testing
