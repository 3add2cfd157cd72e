#!/usr/bin/env bash
# loom-shard --val-fraction / --val-records: a validation split in
# PREFIX.val-*.tfrecord + PREFIX.val.manifest.json, disjoint from the
# training shards, their union the set of a run without a split, chosen by
# the seed; both sets committed in one run or neither.
. "$(dirname "$0")/lib.sh"
cd "$T"
seq 0 9999 | paste -d' ' - - - - - - - - - - > t.txt
ids() { loom-cat --ids "$@" | sort; }

run loom-shard -q -f text -L 11 -n 2 -o all/w t.txt
is_rc 0 "no split"
run loom-shard -f text -L 11 -n 2 --val-fraction 0.1 -o s/w t.txt
is_rc 0 "--val-fraction 0.1"
like "$err" '^loom-shard: 10000 tokens -> [0-9]+ records .* -> s/w.manifest.json; validation [0-9]+ records -> s/w.val.manifest.json$' "one summary line names both manifests"
ok "the validation shard and its index" test -s s/w.val-00000-of-00001.tfrecord -a -s s/w.val-00000-of-00001.tfrecord.index
ids s/w-*.tfrecord > train.ids
ids s/w.val-*.tfrecord > val.ids
ids all/w-*.tfrecord > all.ids
is "$(comm -12 train.ids val.ids | wc -l)" 0 "no record in both sets"
is "$(sort train.ids val.ids | cmp - all.ids && echo same)" same "their union is the set without a split"
nval=$(wc -l < val.ids)
ok "about a tenth in the validation split ($nval of 909)" test "$nval" -ge 50 -a "$nval" -le 130
/usr/bin/python3 - s/w.manifest.json s/w.val.manifest.json > got <<'PY'
import json, sys
t, v = (json.load(open(p)) for p in sys.argv[1:])
print(t["records"] + v["records"], t["split"], v["split"], v["split_rule"] == t["split_rule"],
      sum(s["records"] for s in v["shards"]) == v["records"])
PY
is "$(cat got)" "909 training validation True True" "manifests: records add up, each says its side of the same rule"
run loom-shard -q -f text -L 11 -n 2 --val-fraction 0.1 -o s2/w t.txt
ok "the same seed: the same validation shard" cmp s/w.val-00000-of-00001.tfrecord s2/w.val-00000-of-00001.tfrecord
run loom-shard -q -f text -L 11 -n 2 --val-fraction 0.1 --seed 7 -o s3/w t.txt
ids s3/w.val-*.tfrecord > val7.ids
ok "another seed: another split" test -s val7.ids -a "$(cmp -s val7.ids val.ids; echo $?)" = 1
run loom-feed -q --manifest s/w.val.manifest.json --batch 2 --seq 10 --seed 1 --text --epochs 1
is_rc 0 "loom-feed reads the validation manifest"

run loom-shard -q -f text -L 11 --no-shuffle --val-records 3 -o r/w t.txt
is "$(loom-cat --ids r/w.val-00000-of-00001.tfrecord)" "0 1 2 3 4 5 6 7 8 9 10
11 12 13 14 15 16 17 18 19 20 21
22 23 24 25 26 27 28 29 30 31 32" "--val-records 3 --no-shuffle: the first 3 records of the stream"
is "$(loom-cat --ids r/w-00000-of-00001.tfrecord | head -1)" "33 34 35 36 37 38 39 40 41 42 43" "  training starts after them"
run loom-shard -q -f text -L 11 --val-records 5 -o r2/w t.txt
is "$(loom-cat --ids r2/w.val-*.tfrecord | wc -l) $(loom-cat --ids r2/w-*.tfrecord | wc -l)" "5 904" "--val-records 5 (shuffled): 5 and 904"

# neither set when one side is empty: nothing committed, nothing left
run loom-shard -f text -L 11 --val-fraction 1e-15 --seed 1 -o e/w t.txt
is_rc 1 "a fraction that selects no record: exit 1"
like "$err" "the validation split has none of the 909 samples" "  says so"
is "$(ls -A e)" "" "  neither manifest nor shard left"
run loom-shard -f text -L 11 --val-records 909 -o e/w t.txt
is_rc 1 "--val-records takes every record: exit 1"
like "$err" "none is left for training" "  says so"
is "$(ls -A e)" "" "  nothing left"
# a second run replaces both sets
run loom-shard -q -f text -L 11 -n 2 --val-fraction 0.2 -o s/w t.txt
ok "a second run (0.2) replaces the validation set of the first (0.1)" \
	test "$(ids s/w.val-*.tfrecord | wc -l)" -gt "$(wc -l < val.ids)"
is "$(ls s | wc -l)" 8 "  nothing left over: 2 + 1 shards, their indexes, 2 manifests"

# killed (SIGKILL) at every file-system step of removing leftovers and
# committing: each manifest in place names a complete set
run loom-shard -q -f text -L 11 -n 2 --val-fraction 0.1 -o k/w t.txt
bad= n=0
while :; do
	rc=0
	{ LOOM_SHARD_TEST_KILL_AT=$n loom-shard -q -f text -L 11 -n 2 --val-fraction 0.2 --seed 2 -o k/w t.txt 2>/dev/null || rc=$?; } 2>/dev/null
	for m in k/w.manifest.json k/w.val.manifest.json; do
		loom-feed -q --manifest "$m" --verify --batch 1 --seq 10 --seed 0 --epochs 1 > /dev/null 2>&1 ||
			bad="$bad kill-at-$n:$m"
	done
	[ "$rc" = 0 ] && break
	n=$((n + 1))
	[ $n -lt 200 ] || { bad="$bad never-finished"; break; }
done
is "$bad" "" "killed at each of $n steps: both manifests always name complete sets"
is "$(/usr/bin/python3 -c 'import json; print(json.load(open("k/w.manifest.json"))["seed"], json.load(open("k/w.val.manifest.json"))["seed"])')" "2 2" "  the run that finished replaced both"

fails_with 2 "exclude each other" "--val-fraction with --val-records" loom-shard -f text --val-fraction 0.1 --val-records 3 -o x t.txt
fails_with 2 "leaves nothing for training" "--val-fraction 1" loom-shard -f text --val-fraction 1 -o x t.txt
done_testing
