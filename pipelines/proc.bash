# proc.bash - sourced by the pipelines that signal processes they started
# (mirror.sh, retrain) and by tests/lib.sh.  A process is known by its pid
# and its start time: once a process has ended, its pid, or the number of
# its process group, may be another's a moment later (pids wrap within
# minutes on a busy machine), so a pid alone must not be signalled or
# waited for.

# proc_stat PID|FILE: $proc_pid, $proc_state, $proc_pgrp and $proc_start
# (field 22: the start time) of /proc/PID/stat, or of a copy of it in FILE;
# fails when there is none (the fields after the command name, which may
# hold spaces and ')')
proc_stat() {
	local s f
	proc_pid='' proc_state='' proc_pgrp='' proc_start=''
	case $1 in
	'' | *[!0-9]*) { read -r s <"$1"; } 2>/dev/null ;;
	*) { read -r s <"/proc/$1/stat"; } 2>/dev/null ;;
	esac || return 1
	read -ra f <<<"${s##*) }"
	proc_pid=${s%% *} proc_state=${f[0]:-} proc_pgrp=${f[2]:-} proc_start=${f[19]:-}
	[ -n "$proc_start" ]
}
# started PID: the start time of process PID, empty when there is none
started() { proc_stat "$1" && echo "$proc_start"; return 0; }
# ours PID START: PID is still the process that started at START
ours() { [ -n "$2" ] && [ "$(started "$1")" = "$2" ]; }

# members GROUP: "PID START" of each process now in process group GROUP
members() {
	local stat
	for stat in /proc/[0-9]*/stat; do
		proc_stat "$stat" && [ "$proc_pgrp" = "$1" ] && echo "$proc_pid $proc_start"
	done
	return 0
}
# any_ours LIST: one of the processes of a members LIST still runs (while
# one does, their group's number cannot be another group's)
any_ours() {
	local p s
	while read -r p s; do
		[ -n "$p" ] && ours "$p" "$s" && return 0
	done <<<"$1"
	return 1
}
