#!/usr/bin/env bash
# share/python/loom_data.py for a DataLoader with workers: each worker takes
# every n-th frame (a fake get_worker_info, no torch needed), so n workers
# yield each of loom-feed's frames once; write_bin / memmap_bin, the flat
# token file of a manifest (memmap only when numpy is installed).
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
LD="$SHARE/python/loom_data.py"
cd "$T" || exit 1
seq 0 2999 | awk '{ printf "%d%s", ($1 * 7919) % 70000, (NR % 50 ? " " : "\n") }' > ids.txt
run loom-shard -q -f text -L 33 --shards 2 -o data/w ids.txt
is_rc 0 "two shards (ids up to 70000: uint32)"
seq 0 999 | awk '{ printf "%d ", $1 % 500 }' > small.txt
run loom-shard -q -f text -L 33 -o data/s small.txt
run loom-feed -q --manifest data/w.manifest.json --batch 2 --seq 32 --seed 3 --text
is_rc 0 "loom-feed --text (the order the workers must give)"
cp "$out" all.txt

cat > workers.py <<'PY'
import sys
from collections import namedtuple
sys.path.insert(0, sys.argv[1])
import loom_data
Info = namedtuple("Info", "id num_workers")
args = ["--manifest", "data/w.manifest.json", "--batch", "2", "--seq", "32", "--seed", "3", "--text"]
assert loom_data.worker_share(lambda: None) == (0, 1)
assert loom_data.worker_share(lambda: Info(1, 3)) == (1, 3)
assert list(loom_data.split_frames(range(7), (1, 3))) == [1, 4]
# two workers, as a DataLoader with num_workers=2 runs them, then its
# round-robin merge of their batches
outs = []
for k in range(2):
    share = loom_data.worker_share(lambda: Info(k, 2))
    frames = list(loom_data.feed_frames([a for a in args if a != "--text"], share))
    outs.append(frames)
print(len(outs[0]), len(outs[1]))
merged = [f for pair in zip(*outs) for f in pair] + outs[0][len(outs[1]):]
for fr in merged:
    for r, row in enumerate(fr.rows()):
        sys.stderr.write("%d %d %d: %s\n" % (fr.seq, fr.epoch, r, " ".join(map(str, row))))
PY
run "$PY" workers.py "$SHARE/python"
is_rc 0 "two fake workers read loom-feed"
n=$(grep -c ' 0: ' all.txt)
ok "  $n frames (more than one, so that two workers share them)" test "$n" -gt 1
is "$(cat "$out")" "$(( (n + 1) / 2 )) $(( n / 2 ))" "  each takes every other frame of the $n"
same_file "$err" all.txt "  merged in turn: every frame once, in loom-feed's order"

# a feeder still exiting after its end-of-stream frame (as a slow exit
# under a sanitizer, or a wrapper script) is waited for, not killed and
# then reported as failed (its output closed first, as a sanitizer does)
printf '#!/bin/sh\nloom-feed "$@"; s=$?; exec >&-; sleep 1; exit $s\n' > slowfeed
chmod +x slowfeed
run "$PY" -c "import sys; sys.path.insert(0, '$SHARE/python'); import loom_data
print(len(list(loom_data.feed_frames(['--manifest', 'data/w.manifest.json', '--batch', '2', '--seq', '32', '--seed', '3'], (0, 1), './slowfeed'))))"
is_rc 0 "a feeder that exits after its stream ended: no error"
is "$(cat "$out")" "$n" "  every frame"
printf '#!/bin/sh\nloom-feed "$@"; exit 3\n' > badfeed
chmod +x badfeed
run "$PY" -c "import sys; sys.path.insert(0, '$SHARE/python'); import loom_data
list(loom_data.feed_frames(['--manifest', 'data/w.manifest.json', '--batch', '2', '--seq', '32', '--seed', '3'], (0, 1), './badfeed'))"
is_rc 1 "a feeder that fails after a clean stream: an error"
like "$err" 'badfeed exited with status 3' "  naming the feeder and its status"

run "$PY" "$LD" bin data/w.manifest.json w.bin
is_rc 0 "loom_data.py bin writes a flat token file"
is "$(cat "$out")" uint32 "  uint32 for ids above 65535"
loom-cat --ids data/w-00000-of-00002.tfrecord data/w-00001-of-00002.tfrecord | tr ' ' '\n' > want.txt
"$PY" -c 'import array, sys; a = array.array("I"); a.frombytes(open(sys.argv[1], "rb").read()); print("\n".join(map(str, a)))' w.bin > got.txt
same_file got.txt want.txt "  the ids of every record, in the manifest's shard order"
run "$PY" "$LD" bin data/s.manifest.json s.bin
is "$(cat "$out") $(stat -c %s s.bin)" "uint16 $(( $(loom-cat --ids data/s-00000-of-00001.tfrecord | wc -w) * 2 ))" "  uint16 when every id fits, 2 bytes an id"
no_tmp_left . "  no temporaries"
echo '{"shards": []}' > bad.json
run "$PY" "$LD" bin bad.json x.bin
is_rc 1 "a manifest without shards: exit 1"
like "$err" 'bad.json: no "shards" list' "  names the file"

if "$PY" -c 'import numpy' 2>/dev/null; then
	run "$PY" -c "import sys; sys.path.insert(0, '$SHARE/python'); import loom_data
m = loom_data.memmap_bin('w.bin', 'uint32'); print(len(m), int(m[0]), int(m[-1]))"
	is "$(cat "$out")" "$(wc -l < want.txt) $(head -1 want.txt) $(tail -1 want.txt)" "memmap_bin maps the file"
else
	skip 1 "numpy is not installed"
fi
done_testing
