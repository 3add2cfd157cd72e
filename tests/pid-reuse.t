#!/usr/bin/env bash
# lib.sh's pid_token / still_ours / signal_ours: a signal reaches the
# process the test started while it runs, and never the stranger that got
# its pid after it ended (pids wrap every few minutes under make check:
# issue 28).  The stranger is made on purpose: writing PID-1 to
# /proc/sys/kernel/ns_last_pid gives the next fork PID (root only; skipped
# where it cannot be written).
. "$(dirname "$0")/lib.sh"

# a process that waits to be signalled, with every signal's default
# disposition whatever the caller ignores (nohup ignores HUP, and a
# shell's background jobs INT and QUIT): its pid in $!
sleeper() { env --default-signal sleep infinity & }

# --- the token of a running process, of a saved stat line, of none -----------
sleeper
p=$!
tok=$(pid_token $p)
echo "$tok" > "$T/tok"
like "$T/tok" "^$p [0-9]+\$" "pid_token: the pid and a start time"
cat "/proc/$p/stat" > "$T/stat"
is "$(pid_token "$T/stat")" "$tok" "pid_token of a saved /proc/PID/stat line: the same token"
ok "still_ours while it runs" still_ours "$tok"
# (bash's job line for the sleep, "Hangup", is not for the TAP stream)
{ run signal_ours HUP "$tok" "the sleep"; w=0; wait $p || w=$?; } 2>/dev/null
is_rc 0 "signal_ours signals a process still running: exit 0"
is "$w" 129 "  the HUP ended it (exit 128 + 1)"
ok "not still_ours once it ended" eval '! still_ours "$tok"'
run signal_ours HUP "$tok" "the sleep"
is_rc 1 "signal_ours on an ended process: exit 1"
like "$err" "^# the sleep \\(pid $p\\) had ended: no SIGHUP sent\$" "  one comment naming it"
run signal_ours HUP "" "nothing"
is_rc 1 "signal_ours on an empty token (pid_token found none): exit 1"
is "$(pid_token 99999999)$(pid_token "$T/none")" "" "pid_token of no process: empty"

# --- a stranger with the recorded pid ---------------------------------------
last=/proc/sys/kernel/ns_last_pid
if ! { read -r cur < $last && echo "$cur" > $last; } 2>/dev/null; then
	skip 10 "$last cannot be written (not root): no stranger can be given a pid"
	done_testing
	exit
fi

# stranger PID TOKEN: a sleeper started with PID (ended and reaped),
# its pid in $s; the next fork after ns_last_pid = PID - 1 has it, unless
# another process forks in between (a busy machine: try again) or it starts
# in the clock tick that TOKEN's process started in (it has TOKEN then: try
# again).  Not to be had: $s empty, exit 1
stranger() {
	local try
	for try in $(seq 1 200); do
		echo $(($1 - 1)) > $last
		sleeper
		s=$!
		if [ $s = "$1" ] && [ "$(pid_token $s)" != "$2" ]; then
			diag "pid $1: a stranger after $try tries"
			return 0
		fi
		kill -KILL $s
		wait $s 2>/dev/null
	done
	s=
	return 1
}
# Signals are told apart by the exit status: of two pending, the lower
# numbered is delivered first, so one sent last, PROF (27), shows only
# when neither HUP (1) nor TERM (15) came before it.

sleeper
v=$!
vt=$(pid_token $v)
kill -KILL $v
wait $v 2>/dev/null
if stranger $v "$vt"; then
	ok "a stranger runs with the ended process's pid ($v)" kill -0 $v
	ok "  not still_ours" eval '! still_ours "$vt"'
	run signal_ours HUP "$vt" "the ended sleep"
	is_rc 1 "  signal_ours sends nothing: exit 1"
	# what a plain kill of the recorded pid does: the stranger gets it
	kill -TERM $v
	rc=0; wait $s 2>/dev/null || rc=$?
	is "$rc" 143 "  a plain kill's TERM ends the stranger (143), signal_ours's HUP did not (129)"
else
	skip 4 "pid $v could not be had for a stranger in 200 tries"
fi

# --- pipelines/proc.bash: what pipelines/retrain waits for after a TERM -----
# (a step's processes by pid and start time, not its group's number, which
# may be another group's once the step's group is empty)
set -m; sleeper; set +m # a process group of its own, as retrain's steps
g=$!
gt=$(pid_token $g)
left=$(members $g)
is "$left" "$gt" "members: the group's process, by pid and start time"
ok "  any_ours while it runs" any_ours "$left"
kill -KILL -- -$g
wait $g 2>/dev/null
ok "  not once it has ended" eval '! any_ours "$left"'
set -m
stranger $g "$gt"
got=$?
set +m
if [ $got = 0 ]; then
	ok "  a stranger's group has the number now (what retrain's old wait, kill -0 -- -GROUP, saw)" kill -0 -- -$g
	ok "  any_ours of the step's processes: still not" eval '! any_ours "$left"'
	kill -KILL $s
	wait $s 2>/dev/null
else
	skip 2 "pid $g could not be had for a stranger in 200 tries"
fi

# --- pipelines/mirror.sh: stop and flush of a server that has ended ----------
MIRROR="$TESTS/../pipelines/mirror.sh"
if ! "$MIRROR" available; then
	skip 6 "lighttpd not installed (make deps)"
else
	mkdir "$T/www"
	run "$MIRROR" start "$T/www" "$T/state"
	is_rc 0 "mirror.sh start"
	m=$(cat "$T/state/pid")
	mt=$(pid_token "$m")
	signal_ours KILL "$mt" lighttpd
	# until init has reaped it (its parent, mirror.sh start, has ended)
	for _ in $(seq 1 600); do [ -e "/proc/$m" ] || break; sleep 0.1; done
	if [ -e "/proc/$m" ]; then
		skip 5 "the killed lighttpd (pid $m) was not reaped"
	elif ! stranger "$m" "$mt"; then
		skip 5 "pid $m could not be had for a stranger in 200 tries"
	else
		stok=$(pid_token $s)
		run "$MIRROR" flush "$T/state"
		is_rc 1 "mirror.sh flush of a server that ended: exit 1"
		is "$(cat "$err")" "mirror.sh: the server started in '$T/state' (pid $m) has ended" "  saying so"
		run "$MIRROR" stop "$T/state"
		is_rc 0 "mirror.sh stop of a server that ended: exit 0"
		ok "  its pid file goes" test ! -e "$T/state/pid" -a ! -e "$T/state/pid.start"
		signal_ours PROF "$stok" "the stranger"
		rc=0; wait $s 2>/dev/null || rc=$?
		is "$rc" $((128 + 27)) "  the stranger with its pid got neither flush's HUP (129) nor stop's TERM (143)"
	fi
fi
done_testing
