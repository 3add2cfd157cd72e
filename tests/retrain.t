#!/usr/bin/env bash
# pipelines/retrain against a local HTTP mirror serving the bundled sample dump:
# build + train, nothing new, lock held, a newer dump (rebuild + resume),
# dry run, mirror down, bad config.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$TESTS/.." && pwd)
P=$ROOT/pipelines
"$P/mirror.sh" available || skip_all "lighttpd is not installed (make deps)"

"$P/make-mirror.sh" "$SHARE/sample" samplewiki 20260101 "$T/mirror" >/dev/null
URL=$("$P/mirror.sh" start "$T/mirror" "$T/ms")
trap '"$P/mirror.sh" stop "$T/ms" 2>/dev/null; rm -rf "$T"' EXIT
cat > "$T/retrain.conf" <<CONF
# test configuration
WIKI=samplewiki
MIRROR=$URL
STATE=state          # relative to this file
VOCAB=train
VOCAB_SIZE=300
SEQ=9
SHARDS=2
VAL=0.1
PRESET=tiny
STEPS=10
BATCH=4
KEEP=2
THREADS=1
LOOM_BIN=$(dirname "$(command -v loom-train)")
CONF

run "$P/retrain" --config "$T/retrain.conf" -q
is_rc 0 "first run builds and trains"
like "$out" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z retrain: samplewiki-20260101: data rebuilt, train from scratch: loss [0-9.]+ -> [0-9.]+, eval [0-9.]+, promoted samplewiki-20260101-step-00000010' "one summary line"
is "$(wc -l < "$out")" 1 "exactly one line"
is "$(cat "$T/state/data.date")" 20260101 "data date recorded"
ok "best points at the promoted checkpoint" test -f "$T/state/best/model.safetensors"
ok "verified shards" test -f "$T/state/data/samplewiki-20260101/verified"
ok "trained vocabulary kept" test -f "$T/state/vocab/encoder.json"

logs0=$(ls "$T/state/logs" | wc -l)
run "$P/retrain" --config "$T/retrain.conf"
is_rc 0 "second run: nothing new"
like "$out" 'no dump newer than 20260101; nothing to do' "says nothing is new"
is "$(ls "$T/state/logs" | wc -l)" "$logs0" "and neither builds nor trains (no new log)"

# a run in progress holds the lock until told to let go (no sleep to race)
flock "$T/state/retrain.lock" bash -c 'while [ ! -e "$1" ]; do sleep 0.05; done' _ "$T/release" &
holder=$!
while flock -n "$T/state/retrain.lock" true; do sleep 0.05; done   # until it holds it
run timeout 60 "$P/retrain" --config "$T/retrain.conf"
is_rc 75 "lock held: try later, at once (not the 60 s timeout's 124)"
like "$err" 'another run holds .*retrain.lock' "clear message"
touch "$T/release"; wait $holder

mkdir "$T/src2"
for f in "$SHARE"/sample/samplewiki-20260101-*.bz2; do
	b=${f##*/}; cp "$f" "$T/src2/${b/20260101/20260201}"
done
"$P/make-mirror.sh" "$T/src2" samplewiki 20260201 "$T/mirror" >/dev/null

run "$P/retrain" --config "$T/retrain.conf" --dry-run
is_rc 0 "dry run"
like "$out" 'would build samplewiki-20260201 \(newer than 20260101\)' "dry run names the new dump"
like "$out" 'would resume .*runs/latest \(step 10\) for 10 steps' "and the training plan"
ok "dry run changes nothing" test "$(cat "$T/state/data.date")" = 20260101

run "$P/retrain" --config "$T/retrain.conf" -q
is_rc 0 "third run after a newer dump"
like "$out" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z retrain: samplewiki-20260201: data rebuilt, resume .*\(step 10\): loss' "rebuilds and resumes"
is "$(cat "$T/state/data.date")" 20260201 "new data date"
ok "training continued to step 20" test -d "$T/state/runs/step-00000020"
ok "the resumed run's log starts at step 11" \
	grep -q '"step": *11[,}]' "$(ls -t "$T"/state/logs/train-samplewiki-20260201-*.jsonl | head -1)"
like "$out" '(promoted|kept best)' "promotion verdict"
ok "best is valid" test -f "$T/state/best/model.safetensors"

"$P/mirror.sh" stop "$T/ms"
run "$P/retrain" --config "$T/retrain.conf"
is_rc 75 "mirror down: try later"
like "$err" 'not reachable; try later' "says so"

printf 'WIKI=x\nBOGUS=1\n' > "$T/bad.conf"
run "$P/retrain" --config "$T/bad.conf"
is_rc 1 "unknown key"
like "$err" "bad.conf: line 2: unknown key 'BOGUS'" "names file, line and key"
run "$P/retrain"
is_rc 2 "no --config: usage"
is "$(cat "$err")" "retrain: --config FILE is required
Try '$P/retrain --help' for more information." "one line and the hint, not the usage"
done_testing
