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
conf() { # STEPS
	cat > "$T/retrain.conf" <<CONF
WIKI=samplewiki
MIRROR=file://$T/mirror
STATE=state
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

conf 4
run "$P/retrain" --config "$T/retrain.conf" -q
is_rc 0 "a first run promotes a checkpoint"
best=$(readlink "$T/state/best")
sum=$(best_sum)
ok "  best has a model" test -f "$T/state/best/model.safetensors"

# a newer dump, and a run that would train for ever
mkdir "$T/src2"
for f in "$SHARE"/sample/samplewiki-20260101-*.bz2; do
	b=${f##*/}; cp "$f" "$T/src2/${b/20260101/20260201}"
done
"$P/make-mirror.sh" "$T/src2" samplewiki 20260201 "$T/mirror" >/dev/null
conf 999999999
"$P/retrain" --config "$T/retrain.conf" -q > "$T/r.out" 2> "$T/r.err" &
rpid=$!
# until loom-train has logged a step (or retrain ended early)
for _ in $(seq 1 6000); do
	kill -0 $rpid 2>/dev/null || break
	[ -s "$(ls "$T"/state/logs/train-samplewiki-20260201-*.jsonl 2>/dev/null | head -1)" ] && break
	sleep 0.1
done
ok "loom-train is training (it has logged a step)" kill -0 $rpid
ok "  loom-feed and loom-train of the run are running" test -n "$(leftovers)"
is "$(cat "$T/state/retrain.pid")" "$rpid" "retrain.pid holds retrain's pid"
kill -TERM "$(cat "$T/state/retrain.pid")"
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

conf 2
run "$P/retrain" --config "$T/retrain.conf" -q
is_rc 0 "the next run does not exit 75: it resumes and finishes"
like "$out" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z retrain: samplewiki-20260201: data rebuilt, resume .*\(step [0-9]+\): loss' "  from the checkpoint saved on TERM"
done_testing
