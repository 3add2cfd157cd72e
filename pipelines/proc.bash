# proc.bash - sourced by the pipelines that signal processes they started
# (mirror.sh, retrain).  A process is known by its pid and its start time:
# once a process has ended, its pid, or the number of its process group,
# may be another's a moment later (pids wrap within minutes on a busy
# machine), so a pid alone must not be signalled or waited for.

# started PID: the start time of process PID (field 22 of /proc/PID/stat,
# after the command name), empty when there is none
started() {
	local s f
	{ read -r s <"/proc/$1/stat"; } 2>/dev/null || return 0
	read -ra f <<<"${s##*) }"
	echo "${f[19]:-}"
}
# ours PID START: PID is still the process that started at START
ours() { [ -n "$2" ] && [ "$(started "$1")" = "$2" ]; }

# members GROUP: "PID START" of each process now in process group GROUP
members() {
	local stat s f
	for stat in /proc/[0-9]*/stat; do
		{ read -r s <"$stat"; } 2>/dev/null || continue
		read -ra f <<<"${s##*) }"
		[ "${f[2]}" = "$1" ] && echo "${s%% *} ${f[19]}"
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
