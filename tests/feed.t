#!/usr/bin/env bash
# loom-feed: determinism, epochs, rank/world slices, skipping and resuming,
# padding, short records, bad shards, quiet under | head.
. "$(dirname "$0")/lib.sh"

# 2001 tokens -> 222 records of 9 tokens: record i holds 9i .. 9i+8, so a
# record is named by its first token / 9.
seq 0 2000 | tr '\n' ' ' > "$T/tok.txt"
run loom-shard -q -f text -L 9 --no-shuffle -n 2 -o "$T/d" "$T/tok.txt"
is_rc 0 "loom-shard makes the test shards"
M="$T/d.manifest.json"

run loom-feed --help
is_rc 0 "--help exits 0"
like "$out" 'usage: loom-feed' "--help prints usage on stdout"
run loom-feed -m "$M" --batch 4 --seq 8
is_rc 2 "missing --seed is a usage error"
like "$err" 'required' "usage error says what is required"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --rank 2 --world 2
is_rc 2 "--rank must be below --world"

# --- frames -------------------------------------------------------------
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1
is_rc 0 "feed one epoch"
cp "$out" "$T/a.bin"
like "$err" '^loom-feed: 55 batches of 4x9 \(rank 0 of 1\) from 222 records in 2 shards' \
	"summary on stderr: 222 records -> 55 batches of 4"
is "$(stat -c %s "$T/a.bin")" $((55 * (64 + 4 * 9 * 2) + 64)) \
	"55 u16 frames + end-of-stream frame"
is "$(python3 - "$T/a.bin" <<'EOF'
import struct, sys
d = open(sys.argv[1], 'rb').read()
off, seqs, end = 0, [], None
while off < len(d):
    magic, ver, hs, dt, fl, b, s = struct.unpack_from('<4sHHHHII', d, off)
    seq, = struct.unpack_from('<Q', d, off + 24)
    pay, = struct.unpack_from('<Q', d, off + 40)
    if fl & 1: end = seq
    else: seqs.append(seq)
    off += 64 + pay
print(magic.decode(), dt, b, s, seqs == list(range(55)), end)
EOF
)" "LMBF 1 4 9 True 55" "frames: magic, u16, 4x9, seq 0..54, END says 55"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1
same_file "$out" "$T/a.bin" "same seed: byte-identical stream"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 -j 1
same_file "$out" "$T/a.bin" "one read-ahead thread: same bytes"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 -j 5
same_file "$out" "$T/a.bin" "five read-ahead threads: same bytes"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 2
ok "another seed: another order" sh -c '! cmp -s "$1" "$2"' _ "$out" "$T/a.bin"
run loom-feed "$T"/d-0000[01]-of-00002.tfrecord --batch 4 --seq 8 --seed 1
same_file "$out" "$T/a.bin" "shards on the command line = the manifest's"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --dtype u32
is "$(stat -c %s "$out")" $((55 * (64 + 4 * 9 * 4) + 64)) "--dtype u32 frames"
run loom-feed -m "$M" --batch 4 --seq 7 --seed 1 --text -q
is "$(head -1 "$out" | awk '{print NF}')" 11 "records longer than T+1 are cut (--seq 7: 8 ids)"

# --- epochs and the permutation -----------------------------------------
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --epochs 2 --text -q
cp "$out" "$T/e2.txt"
is "$(wc -l < "$T/e2.txt")" 440 "two epochs: 2 x 55 x 4 records"
is "$(awk '$2 == "0" {print $4}' "$T/e2.txt" | sort -u | wc -l)" 220 \
	"epoch 0: 220 distinct records"
is "$(awk '$2 == "1" {print $4}' "$T/e2.txt" | sort -u | wc -l)" 220 \
	"epoch 1: 220 distinct records"
ok "epoch 1 has another order" \
	test "$(awk '$2 == "0" {print $4}' "$T/e2.txt" | head -20)" != \
	     "$(awk '$2 == "1" {print $4}' "$T/e2.txt" | head -20)"
ok "records are whole: 9 consecutive ids" \
	awk '{ for (i = 5; i <= NF; i++) if ($i != $4 + i - 4) exit 1 }' "$T/e2.txt"
ok "records start at multiples of 9" awk '$4 % 9 { exit 1 }' "$T/e2.txt"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --text -q
ok "epoch 0 of a 2-epoch run = the 1-epoch run" \
	test "$(awk '$2 == "0"' "$T/e2.txt")" = "$(cat "$out")"

# --- rank / world -------------------------------------------------------
run loom-feed -m "$M" --batch 2 --seq 8 --seed 1 --rank 0 --world 2 --text -q
cp "$out" "$T/r0.txt"
run loom-feed -m "$M" --batch 2 --seq 8 --seed 1 --rank 1 --world 2 --text -q
cp "$out" "$T/r1.txt"
is "$(wc -l < "$T/r0.txt") $(wc -l < "$T/r1.txt")" "110 110" "each rank: 55 frames of 2"
is "$(cat "$T/r0.txt" "$T/r1.txt" | awk '{print $4}' | sort | uniq -d | wc -l)" 0 \
	"rank slices are disjoint"
# rank 0's rows then rank 1's rows of each seq = the world=1 frame
python3 - "$T/r0.txt" "$T/r1.txt" "$T/w1.txt" <<'EOF'
import sys
def rows(p):
    d = {}
    for line in open(p):
        head, ids = line.split(':')
        d.setdefault(int(head.split()[0]), []).append(ids)
    return d
a, b = rows(sys.argv[1]), rows(sys.argv[2])
with open(sys.argv[3], 'w') as f:
    for s in sorted(a):
        for r, ids in enumerate(a[s] + b[s]):
            f.write('%d 0 %d:%s' % (s, r, ids))
EOF
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --text -q
same_file "$T/w1.txt" "$out" "union of the ranks' frames = the world=1 frames, in order"
run loom-feed -m "$M" --batch 2 --seq 8 --seed 1 --rank 1 --world 2
like "$err" 'rank 1 of 2' "summary names the rank"

# --- skipping and resuming ---------------------------------------------
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --epochs 2 --skip-batches 50 --text -q
ok "--skip-batches 50 = the stream from seq 50 on" \
	test "$(cat "$out")" = "$(awk '$1 >= 50' "$T/e2.txt")"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --skip-batches 55
is_rc 0 "skipping everything is fine"
is "$(stat -c %s "$out")" 64 "only the end-of-stream frame"
mkdir -p "$T/ck/step-00000007"
echo '{}' > "$T/ck/step-00000007/config.json"
cat > "$T/ck/step-00000007/state.json" <<'EOF'
{"step": 7, "data": {"next_seq": 60, "epoch": 1, "seed": 1, "batch": 4, "seq_len": 9, "world": 1}}
EOF
ln -s step-00000007 "$T/ck/latest"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --epochs 2 --resume "$T/ck" --text -q
is_rc 0 "--resume CKPT"
ok "--resume starts at the checkpoint's next_seq" \
	test "$(cat "$out")" = "$(awk '$1 >= 60' "$T/e2.txt")"
run loom-feed -m "$M" --batch 2 --seq 8 --seed 1 --rank 1 --world 2 --epochs 2 --resume "$T/ck" --text -q
is_rc 0 "--resume on 2 ranks (same global batch)"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 2 --resume "$T/ck"
is_rc 1 "--resume with another seed is refused"
like "$err" 'trained on --seed 1, not 2' "seed mismatch message"
run loom-feed -m "$M" --batch 8 --seq 8 --seed 1 --resume "$T/ck"
is_rc 1 "--resume with another global batch is refused"
like "$err" "global batch is 4 records" "batch mismatch message"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --resume "$T/nope"
is_rc 1 "--resume of a missing checkpoint"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --resume "$T/ck" --skip-batches 3
is_rc 2 "--resume and --skip-batches exclude each other"
# a state.json whose data position disagrees with itself: frames consumed
# (next_seq 60) by batches of 0 records on 0 ranks
mkdir -p "$T/ck0/step-00000007"
echo '{}' > "$T/ck0/step-00000007/config.json"
echo '{"step": 7, "data": {"next_seq": 60, "epoch": 1, "seed": 1, "batch": 0, "seq_len": 9, "world": 0}}' \
	> "$T/ck0/step-00000007/state.json"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --resume "$T/ck0/step-00000007" --text -q
is_rc 1 "--resume of a state.json with data.batch 0 and data.world 0: exit 1"
is "$(cat "$err")" "loom-feed: --resume: $T/ck0/step-00000007/state.json: data.batch is 0, expected at least 1 (the frames' records per frame: data.next_seq 60, batch 0, seq_len 9, world 0)" \
	"  one line naming the file, the key and what was expected"
is "$(wc -c < "$out")" 0 "  nothing on stdout"
# a state.json that disagrees with itself in other ways: an epoch that is
# not the one of next_seq (55 batches an epoch here), samples that next_seq
# batches cannot hold: exit 1, not a line and exit 0
mkdir -p "$T/ck1/step-00000007"
echo '{}' > "$T/ck1/step-00000007/config.json"
echo '{"step": 7, "samples": 28, "data": {"next_seq": 60, "epoch": 3, "seed": 1, "batch": 4, "seq_len": 9, "world": 1}}' \
	> "$T/ck1/step-00000007/state.json"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --resume "$T/ck1/step-00000007" --text -q
is_rc 1 "--resume of a state.json whose data.epoch is not next_seq's: exit 1"
is "$(cat "$err")" "loom-feed: --resume: $T/ck1/step-00000007: state.json disagrees with itself: data.epoch is 3, but data.next_seq 60 is in epoch 1 of this manifest (55 batches an epoch)" \
	"  one line saying which keys disagree"
is "$(wc -c < "$out")" 0 "  nothing on stdout"
echo '{"step": 7, "samples": 280, "data": {"next_seq": 60, "epoch": 1, "seed": 1, "batch": 4, "seq_len": 9, "world": 1}}' \
	> "$T/ck1/step-00000007/state.json"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --resume "$T/ck1/step-00000007" --text -q
is_rc 1 "--resume of a state.json with more samples than next_seq batches hold: exit 1"
is "$(cat "$err")" "loom-feed: --resume: $T/ck1/step-00000007: state.json disagrees with itself: 'samples' is 280, but data.next_seq 60 batches of 4 x 1 hold 240" \
	"  one line saying which keys disagree"
echo '{"step": 7, "samples": 28, "data": {"next_seq": 55, "epoch": 0, "seed": 1, "batch": 4, "seq_len": 9, "world": 1}}' \
	> "$T/ck1/step-00000007/state.json"
run loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --epochs 2 --resume "$T/ck1/step-00000007" --text -q
is_rc 0 "--resume at an epoch's end (epoch 0, next_seq 55 = K): agrees"

# The whole contract: train 20 steps saving at 10; resume from step 10 with
# loom-feed --resume | loom-train --resume: steps 11..20 are bit-identical.
python3 -c "print(' '.join(str((i * 7) % 128) for i in range(3000)))" > "$T/r.txt"
loom-shard -q -f text -L 9 -o "$T/r" "$T/r.txt"
loom-feed -q -m "$T/r.manifest.json" -b 4 -t 8 -s 3 -e 0 |
	loom-train -c tiny --steps 20 --threads 1 -q --save "$T/rck" --save-every 10 \
		--log "$T/full.jsonl" 2>"$T/train.err"
is "$?" 0 "feed | train 20 steps, checkpoint at 10"
loom-feed -q -m "$T/r.manifest.json" -b 4 -t 8 -s 3 -e 0 --resume "$T/rck/step-00000010" |
	loom-train --resume "$T/rck/step-00000010" --threads 1 -q --log "$T/res.jsonl" 2>>"$T/train.err"
is "$?" 0 "loom-feed --resume | loom-train --resume"
is "$(grep -o '"step":[0-9]*,"loss":[0-9.e-]*' "$T/res.jsonl")" \
	"$(grep -o '"step":[0-9]*,"loss":[0-9.e-]*' "$T/full.jsonl" | tail -n 10)" \
	"resumed steps 11..20 have the uninterrupted run's losses, bit for bit"

# --- short records and --pad --------------------------------------------
run loom-shard -q -f text -L 5 --no-shuffle -o "$T/s" "$T/tok.txt"
run loom-feed -m "$T/s.manifest.json" --batch 4 --seq 8 --seed 1
is_rc 1 "records shorter than T+1 are an error"
like "$err" 's.manifest.json: records have seq_len 5 tokens but --seq 8 needs 9' \
	"error names the manifest and the lengths"
run loom-feed "$T"/s-00000-of-00001.tfrecord --batch 4 --seq 8 --seed 1
is_rc 1 "short records given as shards: error too"
like "$err" "s-00000-of-00001.tfrecord: record [0-9]+ has 5 tokens but --seq 8 needs 9 \\(use --pad ID" \
	"error names the shard, the record and the fix"
run loom-feed -m "$T/s.manifest.json" --batch 4 --seq 8 --seed 1 --pad 50256 --text -q
is_rc 0 "--pad ID pads short records"
ok "padded records: 5 ids then 4 x the pad id" \
	awk '{ if (NF != 12 || $9 != 50256 || $12 != 50256 || $8 == 50256) exit 1 }' "$out"
run loom-feed -m "$T/s.manifest.json" --batch 4 --seq 8 --seed 1 --pad 50256
python3 - "$out" > "$T/pad.txt" <<'EOF'
import struct, sys
d = open(sys.argv[1], 'rb').read()
fl, = struct.unpack_from('<H', d, 10)
pad, = struct.unpack_from('<I', d, 20)
print(fl & 2, pad)
EOF
is "$(cat "$T/pad.txt")" "2 50256" "frames carry the PAD flag and pad id"

# --- bad input ------------------------------------------------------------
cp "$T/d-00000-of-00002.tfrecord" "$T/bad.tfrecord"
cp "$T/d-00000-of-00002.tfrecord.index" "$T/bad.tfrecord.index"
printf '\xff' | dd of="$T/bad.tfrecord" bs=1 seek=30 conv=notrunc 2>/dev/null
run loom-feed "$T/bad.tfrecord" --batch 4 --seq 8 --seed 1
is_rc 1 "a corrupt shard is an error"
like "$err" 'bad.tfrecord: record [0-9]+ at byte [0-9]+: .*CRC' "error names shard, record, byte, CRC"
run loom-feed "$T/nope.tfrecord" --batch 4 --seq 8 --seed 1
is_rc 1 "missing shard"
like "$err" "nope.tfrecord" "missing shard named"
run loom-feed -m "$M" --batch 300 --seq 8 --seed 1
is_rc 1 "fewer records than one global batch"
like "$err" '222 records are fewer than one global batch of 300' \
	"says so"
echo '{"shards": 3}' > "$T/m.json"
run loom-feed -m "$T/m.json" --batch 4 --seq 8 --seed 1
is_rc 1 "manifest without shards"

# --- the manifest's sizes and checksums -----------------------------------
mkdir "$T/mv"
run loom-shard -q -f text -L 9 --no-shuffle -n 2 -o "$T/mv/v" "$T/tok.txt"
run loom-feed -m "$T/mv/v.manifest.json" --verify --text -b 4 -t 8 -s 1 -q
is_rc 0 "--verify: every shard has its recorded size and sha256"
same_file "$out" <(loom-feed -m "$M" --text -b 4 -t 8 -s 1 -q) "  same batches as without --verify"
cp "$T/mv/v-00001-of-00002.tfrecord" "$T/mv/keep"
head -c -1 "$T/mv/keep" > "$T/mv/v-00001-of-00002.tfrecord"
run loom-feed -m "$T/mv/v.manifest.json" --text -b 4 -t 8 -s 1 -q
is_rc 1 "a shard one byte shorter than the manifest says: exit 1"
is "$(cat "$err")" "loom-feed: $T/mv/v.manifest.json: shard '$T/mv/v-00001-of-00002.tfrecord' is $(($(stat -c %s "$T/mv/keep") - 1)) bytes, the manifest says $(stat -c %s "$T/mv/keep")" \
	"  one line naming the shard and both sizes"
is "$(wc -c < "$out")" 0 "  nothing on stdout"
{ cat "$T/mv/keep"; printf x; } > "$T/mv/v-00001-of-00002.tfrecord"
run loom-feed -m "$T/mv/v.manifest.json" --text -b 4 -t 8 -s 1 -q
is_rc 1 "a shard one byte longer: exit 1"
like "$err" "shard '.*v-00001-of-00002.tfrecord' is [0-9]+ bytes, the manifest says" "  says so"
# same size, one byte changed in a record's payload: only --verify sees it
cp "$T/mv/keep" "$T/mv/v-00001-of-00002.tfrecord"
flip "$T/mv/v-00001-of-00002.tfrecord" 20 1
run loom-feed -m "$T/mv/v.manifest.json" --verify --text -b 4 -t 8 -s 1 -q
is_rc 1 "--verify: a shard with one byte changed: exit 1"
like "$err" "^loom-feed: .*v.manifest.json: shard '.*v-00001-of-00002.tfrecord' has sha256 [0-9a-f]{64}, the manifest says [0-9a-f]{64}$" \
	"  one line naming the shard and both checksums"
run loom-feed "$T/mv/v-00000-of-00002.tfrecord" --verify --text -b 4 -t 8 -s 1 -q
is_rc 2 "--verify without --manifest: usage error"
# keys of the wrong type are refused by name, not skipped
cp "$T/mv/keep" "$T/mv/v-00001-of-00002.tfrecord"
for kv in 'bytes "123"' 'bytes -5' 'records "9"' 'index 7' 'sha256 12' 'file 3'; do
	set -- $kv
	/usr/bin/python3 - "$T/mv/v.manifest.json" "$T/mv/bad.manifest.json" "$1" "$2" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["shards"][1][sys.argv[3]] = json.loads(sys.argv[4])
json.dump(m, open(sys.argv[2], "w"))
PY
	run loom-feed -m "$T/mv/bad.manifest.json" --text -b 4 -t 8 -s 1 -q
	is_rc 1 "manifest: shards[1].$1 is $2: exit 1"
	if [ "$1" = file ]; then
		is "$(cat "$err")" "loom-feed: $T/mv/bad.manifest.json: shards[1] has no \"file\"" "  one line naming the key"
	else
		like "$err" "^loom-feed: $T/mv/bad.manifest.json: shards\[1\]\.$1 is $2, expected (a whole number >= 0|a string)( or null)?\$" \
			"  one line naming the file, the key and what was expected"
	fi
done
/usr/bin/python3 -c '
import json, sys
m = json.load(open(sys.argv[1])); m["seq_len"] = "9"; json.dump(m, open(sys.argv[2], "w"))' \
	"$T/mv/v.manifest.json" "$T/mv/bad.manifest.json"
run loom-feed -m "$T/mv/bad.manifest.json" --text -b 4 -t 8 -s 1 -q
is "$rc $(cat "$err")" "1 loom-feed: $T/mv/bad.manifest.json: seq_len is \"9\", expected a whole number >= 0" \
	"manifest: seq_len a string: exit 1, named"

# --- terminals ----------------------------------------------------------
if command -v script >/dev/null; then
	script -qec "loom-feed -m '$M' --batch 4 --seq 8 --seed 1" /dev/null > "$T/tty.out" 2>&1
	is "$?" 2 "binary frames to a terminal: refused (exit 2)"
	like "$T/tty.out" 'refusing to write binary data to a terminal' "says why"
	script -qec "loom-feed -m '$M' --batch 4 --seq 8 --seed 1 --text -q | head -1" /dev/null > "$T/tty.out" 2>&1
	like "$T/tty.out" '^0 0 0:' "--text may go to a terminal"
fi

# --- pipes ----------------------------------------------------------------
rc=0
loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --epochs 0 2>"$T/head.err" | head -c 1000 > /dev/null
is "${PIPESTATUS[0]}" 0 "endless feed | head -c: exit 0"
is "$(cat "$T/head.err")" "" "| head -c: nothing on stderr"
# (endless: a finite feed may end before head does, and then says its summary)
loom-feed -m "$M" --batch 4 --seq 8 --seed 1 --epochs 0 --text 2>"$T/head.err" | head -2 > "$T/two.txt"
is "$(wc -l < "$T/two.txt")" 2 "--text | head -2"
is "$(cat "$T/head.err")" "" "--text | head: quiet"

# --- a squad-features set (loom-squad prepare): the record shape and the
# features come from the manifest; version-2 frames carry every feature.
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' the cat sat on mat who what '?' . where \
	> "$T/vocab.txt"
cat > "$T/sq.json" <<'EOF'
{"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": "The cat sat on the mat.", "qas": [
 {"id": "q1", "question": "Who sat?", "answers": [{"text": "The cat", "answer_start": 0}]},
 {"id": "q2", "question": "Where sat the cat?", "answers": [{"text": "the mat", "answer_start": 15}]}]}]}]}
EOF
run loom-squad prepare -q --vocab "$T/vocab.txt" --seq 12 --stride 2 -n 2 "$T/sq.json" -o "$T/sq"
is_rc 0 "loom-squad prepare: 5 features in 2 shards"
SQ="$T/sq.manifest.json"
run loom-feed -m "$SQ" --batch 2 --seed 3 --text
is_rc 0 "loom-feed --manifest of a squad-features set: no --seq needed"
like "$err" '^loom-feed: 2 batches of 2x12 \+ 10 features \(rank 0 of 1\) from 5 records in 2 shards' \
	"  the summary names the shape and the features"
cp "$out" "$T/sq.txt"
# Each row, back as loom-cat's JSON of the record with that unique_ids: the
# same ids and the same values of every feature.
loom-cat "$T"/sq-0000[01]-of-00002.tfrecord > "$T/sq.jsonl"
is "$(python3 - "$T/sq.txt" "$T/sq.jsonl" <<'EOF'
import json, sys
recs = {}
for line in open(sys.argv[2]):
    r = json.loads(line)
    recs[r["unique_ids"][0]] = r
rows = bad = 0
for line in open(sys.argv[1]):
    head, *parts = line.rstrip("\n").split(" | ")
    ids = [int(x) for x in head.split(": ")[1].split()]
    feats = {p.split()[0]: [int(x) for x in p.split()[1:]] for p in parts}
    r = recs[feats["unique_ids"][0]]
    want = {k: v for k, v in r.items() if k != "input_ids"}
    rows += 1
    bad += ids != r["input_ids"] or feats != want
print(rows, bad, len(feats))
EOF
)" "4 0 10" "  each row: the record's ids and all 10 other features, as loom-cat reads them"
run loom-feed -m "$SQ" --batch 2 --seed 3
is_rc 0 "  binary frames"
is "$(od -A n -t u2 -j 4 -N 2 "$out" | tr -d ' ')" 2 "  of version 2"
cp "$out" "$T/sq.bin"
run loom-feed -m "$SQ" --batch 2 --seq 11 --seed 3
is "$rc:$(cat "$err")" "1:loom-feed: $SQ: a squad-features set gives the record length (12 tokens): leave --seq out" \
	"  --seq with such a set: one line"
run loom-feed -m "$SQ" --batch 2 --seed 3 --pad 0
like "$err" 'the records of a squad-features set all have 12 tokens' "  --pad with such a set: refused"
sed 's/"squad-features"/"other-kind"/' "$SQ" > "$T/other.manifest.json"
run loom-feed -m "$T/other.manifest.json" --batch 2 --seed 3
is "$rc:$(cat "$err")" "1:loom-feed: $T/other.manifest.json: a \"other-kind\" set: loom-feed reads token-stream sets (loom-shard's) and squad-features sets" \
	"  a set of a kind it does not know: one line"
# loom-train (the GPT; only task=squad reads features) reads token frames only: one line, exit 1.
loom-train -c tiny --steps 1 -q < "$T/sq.bin" > /dev/null 2> "$T/train.err"
is "$?:$(cat "$T/train.err")" "1:loom-train: stdin: frame 0 at byte 0: a frame with features (version 2): this reader reads token frames only; SQuAD features train task=squad, which needs a BERT preset (-c squad-base, bert-base, bert-tiny)" \
	"loom-train (GPT) refuses version-2 frames with one line"
# --world 2: the ranks' rows together are world 1's --batch 4 rows.
loom-feed -q -m "$SQ" --batch 4 --seed 3 --text | cut -d: -f2- | sort > "$T/w1.txt"
for r in 0 1; do loom-feed -q -m "$SQ" --batch 2 --world 2 --rank $r --seed 3 --text; done |
	cut -d: -f2- | sort > "$T/w2.txt"
ok "  --world 2 ranks together = --batch 4 (features included)" cmp -s "$T/w1.txt" "$T/w2.txt"

# --- --bucket: records of similar size in a batch ---------------------------
# 64 records of 2..16 ids (sizes in the index differ with the count)
/usr/bin/python3 - "$T" "$TESTS" <<'EOF'
import random, subprocess, sys
r = random.Random(5)
ex = []
for i in range(64):
    ids = ",".join(str(1000 + r.randrange(5000)) for _ in range(r.randrange(2, 17)))
    ex.append(subprocess.run(["/usr/bin/python3", sys.argv[2] + "/tfrecord_ref.py", "example",
                              "input_ids=int:" + ids], capture_output=True, text=True,
                             check=True).stdout.strip())
subprocess.run(["/usr/bin/python3", sys.argv[2] + "/tfrecord_ref.py", "write",
                sys.argv[1] + "/v.tfrecord"] + ex, check=True)
EOF
loom-index -q "$T/v.tfrecord"
V="loom-feed -q $T/v.tfrecord --seq 16 --seed 1 --pad 0 --text"
# the rows' real lengths (ids other than the pad): the sum of each batch's spread
spread() { awk -F: '{ n = split($2, a, " "); r = 0; for (i = 1; i <= n; i++) r += a[i] != 0
	k = $1; sub(/ [0-9]+$/, "", k); if (!(k in lo) || r < lo[k]) lo[k] = r
	if (!(k in hi) || r > hi[k]) hi[k] = r }
	END { s = 0; for (k in lo) s += hi[k] - lo[k]; print s }'; }
run $V --batch 4 --bucket 4 --epochs 2
is_rc 0 "--bucket 4: two epochs"
cp "$out" "$T/b.txt"
$V --batch 4 --epochs 2 > "$T/nb.txt"
is "$(cut -d: -f2 "$T/b.txt" | sort | md5sum)" "$(cut -d: -f2 "$T/nb.txt" | sort | md5sum)" \
	"  every record once an epoch, as without it"
sb=$(spread < "$T/b.txt") snb=$(spread < "$T/nb.txt")
ok "  batches of similar lengths: spread $sb, $snb without" test "$sb" -lt "$snb"
ok "  the same bytes again" sh -c "$V --batch 4 --bucket 4 --epochs 2 | cmp -s - '$T/b.txt'"
$V --batch 4 --bucket 4 --epochs 2 --skip-batches 13 > "$T/skip.txt"
ok "  --skip-batches 13 gives the run from batch 13 (resume)" \
	sh -c "tail -n +53 '$T/b.txt' | cmp -s - '$T/skip.txt'"
for r in 0 1; do $V --batch 2 --world 2 --rank $r --bucket 4 --epochs 2; done |
	cut -d: -f2- | sort > "$T/bw2.txt"
ok "  --world 2 ranks together = --batch 4 (the same windows)" \
	sh -c "cut -d: -f2- '$T/b.txt' | sort | cmp -s - '$T/bw2.txt'"
run $V --batch 4 --bucket 5000
is "$rc" 2 "--bucket over 4096: usage error"

done_testing
