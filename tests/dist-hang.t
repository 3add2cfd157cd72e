#!/usr/bin/env bash
# A rank that stops answering under mpirun (dist_timeout): a stopped
# loom-train (rank 1, then rank 0) makes the other exit with one line
# naming it, and the whole job ends instead of hanging; a rank whose feeder
# goes quiet names its input and every rank stops at that step.  The hang
# guard (np's timeout 300) must never be what ends a job.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dist-lib.sh"

run loom-train --print-config
like "$out" '"dist_timeout": 1800' "dist_timeout defaults to 1800 s"

# stopped R N [save]: N ranks, dist_timeout=3, rank R's loom-train stopped
# (SIGSTOP) once rank 0 has logged 6 steps; in $T/hR, checkpoints every 5
# steps with `save`.  Sets rc and $err like np.
stopped() {
	local r=$1 n=$2 dir="$T/h$1" save=${3:+--save ck --save-every 5} mp
	mkdir -p "$dir"
	{ np "$n" "cd h$r; $FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4,dist_timeout=3 --steps 100000 --log log.json $save & p=\$!; cat /proc/\$p/stat > pid.\$R; wait \$p"; exit $rc; } &
	mp=$!
	for _ in $(seq 1 2400); do
		[ -s "$dir/pid.$r" ] && [ -s "$dir/log.json" ] && [ "$(wc -l < "$dir/log.json")" -ge 6 ] && break
		sleep 0.1
	done
	signal_ours STOP "$(pid_token "$dir/pid.$r")" "rank $r's loom-train"
	rc=0; wait $mp || rc=$?
}

# Each rank's shell saves its loom-train's /proc/PID/stat line in pid.R (its
# pid and start time, for pid_token): a pid of a rank that ended may already
# be another process's (pids wrap at 32768 on a busy machine), which must be
# neither waited for, stopped nor killed.

# reap DIR: whatever gone found still there is killed, so that nothing of
# this case runs on into the next (a loaded machine may be slow to end it)
reap() {
	local f
	for f in "$1"/pid.*; do signal_ours KILL "$(pid_token "$f")"; done
	return 0
}

# gone DIR: every rank's loom-train ended (or is a zombie left to be reaped)
gone() {
	local f t
	for f in "$1"/pid.*; do
		t=$(pid_token "$f")
		for _ in $(seq 1 1200); do
			still_ours "$t" || break
			sleep 0.1
		done
		still_ours "$t" && return 1
	done
	return 0
}

# --- rank 1 stops: rank 0 names it --------------------------------------------
stopped 1 2 save
ok "rank 1 stopped: the job ends, exit non-zero (exit $rc, not the hang guard's 124)" test "$rc" -ne 0 -a "$rc" -ne 124
is "$(grep -c '^loom-train' "$err")" 1 "one line from loom-train (and mpirun's report)"
like "$err" '^loom-train: rank 0: rank 1 has not answered for [0-9]+ s \(stopped, hung or its host unreachable\): stopping all 2 ranks \(dist_timeout=3, in the [a-z -]+\)$' \
	"rank 0 names rank 1"
ok "no rank left running" gone "$T/h1"
reap "$T/h1"
ok "latest is a complete checkpoint" test -s "$T/h1/ck/latest/model.safetensors" -a -s "$T/h1/ck/latest/optimizer.safetensors"
no_tmp_left "$T/h1/ck" "no half-written checkpoint"

# resume accepts another dist_timeout, with --config too (a run setting)
n=$(readlink "$T/h1/ck/latest" | sed 's/^step-0*//')
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W --resume h1/ck/latest | loom-train -q -c tiny --threads 1 --resume h1/ck --set decay=constant,micro_batch=4,dist_timeout=600 --steps $((n + 2))"
is_rc 0 "--resume --config with another dist_timeout"

# --- rank 0 stops: rank 1 names it -------------------------------------------
stopped 0 2
ok "rank 0 stopped: the job ends, exit non-zero (exit $rc, not 124)" test "$rc" -ne 0 -a "$rc" -ne 124
is "$(grep -c '^loom-train' "$err")" 1 "one line from loom-train"
like "$err" '^loom-train: rank 1: rank 0 has not answered for [0-9]+ s \(stopped, hung or its host unreachable\): stopping all 2 ranks' \
	"rank 1 names rank 0"
ok "no rank left running" gone "$T/h0"
reap "$T/h0"

# --- 3 ranks, rank 2 stops: ranks 0 and 1 both wait; the first to call the
# roll (the lower, if both do) reports, naming rank 2, not the live one ---
stopped 2 3
ok "rank 2 of 3 stopped: the job ends, exit non-zero (exit $rc, not 124)" test "$rc" -ne 0 -a "$rc" -ne 124
is "$(grep -c '^loom-train' "$err")" 1 "one line from loom-train"
like "$err" '^loom-train: rank [01]: rank 2 has not answered for [0-9]+ s \(stopped, hung or its host unreachable\): stopping all 3 ranks' \
	"one rank names rank 2, not the live one"
ok "no rank left running" gone "$T/h2"
reap "$T/h2"

# --- rank 1's feeder goes quiet inside frame 23 (byte 3000) and keeps its pipe
# open until loom-train is gone: rank 1 names its input, every rank stops ---
QUIET="/usr/bin/python3 -c 'import os, select, sys; os.write(1, sys.stdin.buffer.read(3000)); p = select.poll(); p.register(1, 0); p.poll()'"
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | { if [ \$R = 1 ]; then $QUIET; else cat; fi; } | $TRAIN -q --set micro_batch=4,dist_timeout=3 --steps 100 --save q --save-every 5"
is_rc 1 "a quiet feeder: exit 1 (not the hang guard's 124)"
like "$err" '^loom-train: rank 1: stdin: no data for 3 s \(dist_timeout\) after 22 frames: its loom-feed stopped sending' \
	"rank 1 names its input"
like "$err" '^loom-train: stopping all 2 ranks at step 23: rank 1 failed \(message above\)' "rank 0 stops every rank at that step"
is "$(grep -c '^loom-train' "$err")" 2 "those two lines"
is "$(readlink "$T/q/latest")" step-00000020 "latest stays at the last complete checkpoint"
no_tmp_left "$T/q" "no half-written checkpoint"

done_testing
