#!/usr/bin/env bash
# share/python/loom_data.py (standard library only) against loom's tools:
# loom-shard's shards read by it = loom-cat's output; loom-feed's frames
# read by it = loom-feed --text; corrupted or cut data is refused naming
# the record or frame and its byte offset.
. "$(dirname "$0")/lib.sh"
PY=python3
LD="$SHARE/python/loom_data.py"
cd "$T" || exit 1

# data: 3000 ids with an irregular pattern, u32 (ids above 2^16 too)
awk 'BEGIN { x = 7; for (i = 0; i < 3000; i++) { x = (x * 1103515245 + 12345) % 2147483648;
	printf "%d%s", (i % 7 == 0 ? x % 100000 : x % 50257), (i % 50 == 49 ? "\n" : " ") } }' > ids.txt
run loom-shard -q -f text -L 33 --shards 2 -o data/w ids.txt
is_rc 0 "loom-shard makes two shards"
S0=data/w-00000-of-00002.tfrecord S1=data/w-00001-of-00002.tfrecord

run "$PY" -c "import sys; sys.path.insert(0, '$SHARE/python'); import loom_data
assert loom_data.crc32c(b'123456789') == 0xE3069283
assert loom_data.crc32c(bytes(32)) == 0x8A9136AA
assert 'torch' not in sys.modules
print('ok')"
is "$(cat "$out")" "ok" "the module imports without torch; CRC-32C check values"

loom-cat --ids "$S0" "$S1" > cat.ids
run "$PY" "$LD" ids "$S0" "$S1"
is_rc 0 "loom_data.py ids reads the shards"
same_file "$out" cat.ids "  the same ids as loom-cat --ids"
ok "  (and they are not nothing: $(wc -l < cat.ids) records)" test "$(wc -l < cat.ids)" -gt 80
loom-cat "$S0" > cat.json
run "$PY" "$LD" json "$S0"
same_file "$out" cat.json "  JSON records as loom-cat prints them"

# frames: u32 and u16 payloads, a second epoch, rank 1 of 2
for args in "--batch 4 --seq 32 --seed 3" "--batch 3 --seq 20 --seed 9 --epochs 2 --dtype u32" \
	    "--batch 2 --seq 32 --seed 5 --rank 1 --world 2"; do
	loom-feed -q --manifest data/w.manifest.json $args --text > feed.txt
	loom-feed -q --manifest data/w.manifest.json $args > frames.bin
	run "$PY" "$LD" frames frames.bin
	is_rc 0 "frames ($args): read"
	same_file "$out" feed.txt "  = loom-feed --text"
done
rc=0
loom-feed -q --manifest data/w.manifest.json --batch 4 --seq 32 --seed 3 | "$PY" "$LD" frames > "$out" 2>"$err" || rc=$?
is_rc 0 "frames from a pipe"
loom-feed -q --manifest data/w.manifest.json --batch 4 --seq 32 --seed 3 --text > feed.txt
same_file "$out" feed.txt "  = loom-feed --text"

# an IterableDataset-like use: inputs and targets are rows shifted by one
run "$PY" - "$SHARE/python" <<'EOF'
import subprocess, sys
sys.path.insert(0, sys.argv[1])
from loom_data import read_frames
p = subprocess.Popen(["loom-feed", "-q", "--manifest", "data/w.manifest.json", "--batch", "4",
                      "--seq", "32", "--seed", "3"], stdout=subprocess.PIPE)
n = 0
for fr in read_frames(p.stdout):
    rows = fr.rows()
    x = [r[:-1] for r in rows]; y = [r[1:] for r in rows]
    assert len(x) == 4 and all(len(r) == 32 for r in x) and x[0][1:] == y[0][:-1]
    n += 1
print(n, p.wait())
EOF
like "$out" '^[1-9][0-9]* 0$' "batches through a Popen pipe, rows of T+1 ids"

# --- bad data ------------------------------------------------------------------
size=$(stat -c %s "$S0")
cp "$S0" bad.tfrecord
printf 'X' | dd of=bad.tfrecord bs=1 seek=200 conv=notrunc 2>/dev/null
run "$PY" "$LD" ids bad.tfrecord
is_rc 1 "a flipped byte in a shard: exit 1"
like "$err" '^loom_data.py: bad.tfrecord: record 1 at byte [0-9]+: payload CRC mismatch$' "  names the record and its offset"
head -c $((size - 5)) "$S0" > cut.tfrecord
run "$PY" "$LD" ids cut.tfrecord
is_rc 1 "a cut shard: exit 1"
like "$err" 'cut.tfrecord: record [0-9]+ at byte [0-9]+: truncated record' "  says truncated"

# records loom-cat --ids refuses: input_ids as floats, as bytes, an empty
# Feature, no input_ids; loom_data.py refuses the same, with the same line
run "$PY" - "$SHARE/python" <<'PYEOF'
import struct, sys
sys.path.insert(0, sys.argv[1])
from loom_data import crc32c
def masked(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF
def ld(fn, b):  # a length-delimited protobuf field
    n, v = len(b), b""
    while True:
        v += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            break
    return bytes([fn << 3 | 2]) + v + b
def example(key, feature):
    return ld(1, ld(1, ld(1, key) + ld(2, feature)))
def record(p):
    h = struct.pack("<Q", len(p))
    return h + struct.pack("<I", masked(crc32c(h))) + p + struct.pack("<I", masked(crc32c(p)))
good = example(b"input_ids", ld(3, ld(1, bytes([1, 2, 3]))))
for name, ex in (("float", example(b"input_ids", ld(2, ld(1, struct.pack("<f", float("nan")))))),
                 ("bytes", example(b"input_ids", ld(1, ld(1, b"hi")))),
                 ("empty", example(b"input_ids", b"")),
                 ("nokey", example(b"other", ld(3, ld(1, bytes([1])))))):
    open(name + ".tfrecord", "wb").write(record(good) + record(ex))
print("ok")
PYEOF
is "$(cat "$out")" ok "shards with a float, a bytes, an empty and a missing input_ids"
for kind in float bytes empty nokey; do
	crc=0; loom-cat --ids $kind.tfrecord > cat.out 2> cat.err || crc=$?
	is "$crc" 1 "$kind: loom-cat --ids refuses it: exit 1"
	run "$PY" "$LD" ids $kind.tfrecord
	is_rc 1 "  and loom_data.py ids: exit 1"
	is "$(sed 's/^loom_data.py: //' "$err")" "$(sed 's/^loom-cat: //' cat.err)" "  with loom-cat's line"
	is "$(wc -l < "$err")" 1 "  one line on stderr"
	same_file "$out" cat.out "  after the same good records"
done
like "$err" "^loom_data.py: nokey.tfrecord: record 1 at byte 40: no feature 'input_ids'$" "the record and its byte offset"
run "$PY" - "$SHARE/python" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
from loom_data import read_ids, parse_example, read_tfrecord, LoomDataError
for path in ("float.tfrecord", "missing.tfrecord"):
    try:
        list(read_ids(path))
    except LoomDataError as e:
        print(e)
print(parse_example(list(read_tfrecord("bytes.tfrecord"))[1]))
PYEOF
is "$(cat "$out")" "float.tfrecord: record 1 at byte 40: feature 'input_ids' is a float list, not an int64 list
cannot open 'missing.tfrecord': No such file or directory
{'input_ids': [b'hi']}" "as a library: LoomDataError with the message; parse_example still reads any feature"
for mode in ids json frames; do
	run "$PY" "$LD" $mode missing.file
	is_rc 1 "$mode: a missing file: exit 1"
	is "$(cat "$err")" "loom_data.py: cannot open 'missing.file': No such file or directory" "  one line, no traceback"
done
mkdir adir
run "$PY" "$LD" ids adir
is "$rc: $(cat "$err")" "1: loom_data.py: cannot open 'adir': Is a directory" "a directory: one line, exit 1"

loom-feed -q --manifest data/w.manifest.json --batch 4 --seq 32 --seed 3 > frames.bin
fsize=$(stat -c %s frames.bin)
cp frames.bin badf.bin
# frames of 4 x 33 u32 ids (ids above 2^16 make --dtype auto choose u32): 592 bytes
printf 'X' | dd of=badf.bin bs=1 seek=$((592 + 64 + 10)) conv=notrunc 2>/dev/null
run "$PY" "$LD" frames badf.bin
is_rc 1 "a flipped payload byte in frame 1: exit 1"
like "$err" '^loom_data.py: badf.bin: frame 1 at byte 592: payload checksum mismatch' "  names the frame and its offset"
head -c $((fsize - 64)) frames.bin > nofin.bin
run "$PY" "$LD" frames nofin.bin
is_rc 1 "a stream without its end-of-stream frame: exit 1"
like "$err" 'without an end-of-stream frame' "  says so"
head -c $((2 * 592 + 30)) frames.bin > cutf.bin
run "$PY" "$LD" frames cutf.bin
like "$err" 'cutf.bin: frame 2 at byte 1184: truncated header \(30 of 64 bytes\)' "a frame cut inside its header"
head -c $((592 + 100)) frames.bin > cutp.bin
run "$PY" "$LD" frames cutp.bin
like "$err" 'cutp.bin: frame 1 at byte 592: truncated payload \(36 of 528 bytes\)' "a frame cut inside its payload"

# --- version-2 frames (a squad-features set): ids and features --------------------
make_squad sq.json sqvocab.txt 6
run loom-squad prepare -q --vocab sqvocab.txt --seq 32 --stride 8 sq.json -o sqd/sq
is_rc 0 "a squad-features set"
loom-feed -q --manifest sqd/sq.manifest.json --batch 3 --seed 2 --text > feed2.txt
loom-feed -q --manifest sqd/sq.manifest.json --batch 3 --seed 2 > frames2.bin
run "$PY" "$LD" frames frames2.bin
is_rc 0 "loom_data.py frames reads version-2 frames"
same_file "$out" feed2.txt "  = loom-feed --text, every feature of every record"
ok "  (and they are not nothing: $(wc -l < feed2.txt) records)" test "$(wc -l < feed2.txt)" -ge 6
run "$PY" - "$SHARE/python" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
from loom_data import read_frames, LoomDataError
frames = list(read_frames(open("frames2.bin", "rb")))
fr = frames[0]
t = fr.bert_inputs(make=lambda rows: rows)   # lists: no torch needed
print(sorted(t))
print(len(t["input_ids"]), len(t["input_ids"][0]), len(t["token_type_ids"][0]),
      len(t["attention_mask"][0]), t["start_positions"][:1] == fr.feature("start_positions")[:1])
# the mask is 1 exactly where the ids are not [PAD] (0); segment 1 follows [SEP]
print(all((i != 0) == (m == 1) for row, mrow in zip(t["input_ids"], t["attention_mask"])
          for i, m in zip(row, mrow)))
print(sorted(fr.tensors(make=len)))
PYEOF
is "$(cat "$out")" "['attention_mask', 'end_positions', 'input_ids', 'start_positions', 'token_type_ids']
3 32 32 32 True
True
['doc_start', 'end_positions', 'example_index', 'input_ids', 'input_mask', 'is_impossible', 'segment_ids', 'start_positions', 'token_end', 'token_start', 'unique_ids']" \
	"bert_inputs(): BertForQuestionAnswering's arguments, rows of [B, T] and [B]; tensors(): every feature"
if "$PY" -c "import torch" 2>/dev/null; then
	run "$PY" - "$SHARE/python" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
from loom_data import read_frames
x = next(read_frames(open("frames2.bin", "rb"))).bert_inputs()
print(tuple(x["input_ids"].shape), tuple(x["start_positions"].shape), x["input_ids"].dtype)
PYEOF
	is "$(cat "$out")" "(3, 32) (3,) torch.int64" "  with torch: long tensors of [B, T] and [B]"
else
	skip 1 "no torch here: bert_inputs() as tensors"
fi
# a version-1 frame relabelled version 2 without FEATURES: refused as loom's readers do
run "$PY" - "$SHARE/python" <<'PYEOF'
import struct, sys
sys.path.insert(0, sys.argv[1])
from loom_data import crc32c
b = bytearray(open("frames.bin", "rb").read())
b[4] = 2
b[60:64] = struct.pack("<I", crc32c(bytes(b[:60])))
open("v2plain.bin", "wb").write(b)
PYEOF
run "$PY" "$LD" frames v2plain.bin
is "$rc: $(cat "$err")" "1: loom_data.py: v2plain.bin: frame 0 at byte 0: a version-2 frame without features (flag FEATURES): token frames are version 1" \
	"a version-2 frame without features: one line, exit 1"
run loom-train -q -c tiny --steps 1 < v2plain.bin
like "$err" "frame 0 at byte 0: a version-2 frame without features" "  loom-train says the same"
cp frames2.bin bad2.bin
printf 'X' | dd of=bad2.bin bs=1 seek=80 conv=notrunc 2>/dev/null
run "$PY" "$LD" frames bad2.bin
like "$err" "^loom_data.py: bad2.bin: frame 0 at byte 0: payload checksum mismatch" \
	"a flipped byte in a feature table: the payload checksum"

# --- loom-feed found without PATH: the checkout's build/bin ---------------------
mkdir -p co/share/python co/build/bin
cp "$LD" co/share/python/
ln -s "$(command -v loom-feed)" co/build/bin/loom-feed
run env PATH=/usr/bin:/bin "$PY" - "$T/co/share/python" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
from loom_data import feed_frames, find_feed
print(find_feed().endswith("co/build/bin/loom-feed"))
n = sum(1 for _ in feed_frames(["--manifest", "data/w.manifest.json", "--batch", "4",
                                "--seq", "32", "--seed", "3"]))
print(n > 0)
PYEOF
is "$rc: $(cat "$out")" "0: True
True" "feed_frames without loom-feed on PATH runs the checkout's build/bin/loom-feed"
rm co/build/bin/loom-feed
run env PATH=/usr/bin:/bin "$PY" - "$T/co/share/python" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
from loom_data import feed_frames, LoomDataError
try:
    next(feed_frames(["--batch", "1"]))
except LoomDataError as e:
    print(e)
PYEOF
like "$out" "^loom-feed is not on PATH, nor at [^ ]*/co/build/bin/loom-feed or [^ ]*/bin/loom-feed: build loom \\(make\\) or give feed=PATH$" \
	"  none anywhere: one line saying where it looked and what to do"

done_testing
