#!/usr/bin/env bash
# pipelines/retrain stopped by a TERM to the pid in STATE/retrain.pid while
# loom-train runs: no loom-feed or loom-train of the run is left, the lock
# is free (the next run does not exit 75), the promoted checkpoint is
# intact.  A file:// mirror: no HTTP server needed.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$TESTS/.." && pwd)
P=$ROOT/pipelines
BIN=$(dirname "$(command -v loom-train)")

"$P/make-mirror.sh" "$SHARE/sample" samplewiki 20260101 "$T/mirror" >/dev/null
conf() { # STEPS [STATE]
	cat > "$T/retrain.conf" <<CONF
WIKI=samplewiki
MIRROR=file://$T/mirror
STATE=${2:-state}
VOCAB=train
VOCAB_SIZE=300
SEQ=9
SHARDS=2
VAL=0.1
PRESET=tiny
STEPS=$1
BATCH=4
KEEP=2
THREADS=1
LOOM_BIN=$BIN
CONF
}
# the processes of a run: their command lines name its state directory
leftovers() { pgrep -f "$T/state/" | tr '\n' ' '; }
best_sum() { (cd "$T/state/best" && sha256sum ./*); }

# until loom-train of the run in $1 has logged a step (or retrain $2 ended)
wait_training() {
	for _ in $(seq 1 6000); do
		kill -0 "$2" 2>/dev/null || break
		[ -s "$(ls "$T/$1"/logs/train-samplewiki-*.jsonl 2>/dev/null | head -1)" ] && break
		sleep 0.1
	done
}

# a TERM during the very first run: there is no best to keep, and the line
# does not claim one
conf 999999999 first
"$P/retrain" --config "$T/retrain.conf" -q > "$T/r0.out" 2> "$T/r0.err" &
rpid=$! rtok=$(pid_token $!)
wait_training first $rpid
ok "a first run is training" kill -0 $rpid
is "$(cat "$T/first/retrain.pid")" "$rpid" "  retrain.pid holds retrain's pid"
signal_ours TERM "$rtok" retrain
rc=0; wait $rpid || rc=$?
is "$rc" 143 "  stopped by TERM: exit 143"
is "$(sed -E 's/^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z //' "$T/r0.err")" "retrain: stopped by SIGTERM (no checkpoint was promoted yet: $T/first/best does not exist)" \
	"  the line says no checkpoint was promoted yet"
ok "  and there is none" test ! -e "$T/first/best"
ok "  retrain.pid went with the run" test ! -e "$T/first/retrain.pid"

conf 4
run "$P/retrain" --config "$T/retrain.conf" -q
is_rc 0 "a first run promotes a checkpoint"
best=$(readlink "$T/state/best")
sum=$(best_sum)
ok "  best has a model" test -f "$T/state/best/model.safetensors"
ok "  retrain.pid went with the run" test ! -e "$T/state/retrain.pid"
# VOCAB=train: the checkpoint carries the trained vocabulary
run loom-eval generate --checkpoint "$T/state/best" --prompt "the" -n 3 --seed 1 -j 1
is_rc 0 "loom-eval generate on state/best needs no --vocab"
is "$(ls "$T/state/best" | grep -c '^vocab.json$\|^merges.txt$')" 2 "  best holds vocab.json and merges.txt"

# a lock held by another process: the message names it
flock "$T/state/retrain.lock" bash -c 'while [ ! -e "$1" ]; do sleep 0.05; done' _ "$T/release" &
holder=$!
while flock -n "$T/state/retrain.lock" true; do sleep 0.05; done   # until it holds it
run "$P/retrain" --config "$T/retrain.conf"
is_rc 75 "lock held: try later"
like "$err" "another run holds $T/state/retrain.lock: pid $holder \\(flock $T/state/retrain.lock bash -c " \
	"  naming the process that holds it (pid and command line)"
touch "$T/release"; wait $holder

# a newer dump, and a run that would train for ever
mkdir "$T/src2"
for f in "$SHARE"/sample/samplewiki-20260101-*.bz2; do
	b=${f##*/}; cp "$f" "$T/src2/${b/20260101/20260201}"
done
"$P/make-mirror.sh" "$T/src2" samplewiki 20260201 "$T/mirror" >/dev/null
conf 999999999
"$P/retrain" --config "$T/retrain.conf" -q > "$T/r.out" 2> "$T/r.err" &
rpid=$! rtok=$(pid_token $!)
# until loom-train has logged a step (or retrain ended early)
for _ in $(seq 1 6000); do
	kill -0 $rpid 2>/dev/null || break
	[ -s "$(ls "$T"/state/logs/train-samplewiki-20260201-*.jsonl 2>/dev/null | head -1)" ] && break
	sleep 0.1
done
ok "loom-train is training (it has logged a step)" kill -0 $rpid
ok "  loom-feed and loom-train of the run are running" test -n "$(leftovers)"
is "$(cat "$T/state/retrain.pid")" "$rpid" "retrain.pid holds retrain's pid"
signal_ours TERM "$rtok" retrain
rc=0; wait $rpid || rc=$?
is "$rc" 143 "retrain stops on TERM: exit 128 + 15"
is "$(sed -E 's/^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z //' "$T/r.err")" "retrain: stopped by SIGTERM (the promoted checkpoint, $T/state/best, is kept)" \
	"  one line on stderr (after the time)"
like "$T/r.err" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z retrain: ' "  which starts with the UTC time"
unlike "$T/r.err" 'Killed|Terminated' "  and no job status line of bash's"
left=$(leftovers)
is "$left" "" "no loom-feed or loom-train of the run is left"
for p in $left; do kill -KILL "$p"; done   # (only when the test failed)
ok "the lock is free" flock -n "$T/state/retrain.lock" true
is "$(readlink "$T/state/best")" "$best" "best still points at the promoted checkpoint"
is "$(best_sum)" "$sum" "  which is intact"
ok "loom-train saved a checkpoint on TERM" test -f "$T/state/runs/latest/model.safetensors"
ok "retrain.pid went with the run" test ! -e "$T/state/retrain.pid"

conf 2
run "$P/retrain" --config "$T/retrain.conf" -q
is_rc 0 "the next run does not exit 75: it resumes and finishes"
like "$out" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z retrain: samplewiki-20260201: data rebuilt, resume .*\(step [0-9]+\): loss' "  from the checkpoint saved on TERM"
done_testing
