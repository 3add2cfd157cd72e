#!/usr/bin/env bash
# mirror.sh - serve a directory over HTTP on 127.0.0.1 with lighttpd (which
# answers Range requests), e.g. a dump mirror laid out by make-mirror.sh.
#
#   mirror.sh start DIR STATE_DIR [PORT]   start; prints the base URL
#   mirror.sh stop STATE_DIR               stop the server started there
#   mirror.sh flush STATE_DIR              write out buffered access.log lines
#                                          (lighttpd buffers them a few seconds)
#   mirror.sh available                    exit 0 when lighttpd is installed
#
# lighttpd is looked for on PATH, then in /usr/sbin, /usr/local/sbin and
# /sbin (a user's PATH often lacks the sbin directories).
# STATE_DIR (created) holds lighttpd.conf, the server's pid and, in
# pid.start, its start time (stop and flush signal that process only, never
# one given its pid after it ended), url, access.log (one line per request:
# status, body bytes sent, Range header) and error.log.  Without PORT a free
# port is chosen.  MIRROR_KBPS=N in the environment throttles each
# connection to N kB/s (to watch progress).  lighttpd runs in the
# foreground (-D) as a background child of this script, so `stop` (or
# killing its pid) ends it.
set -euo pipefail
prog=mirror.sh
die() { echo "$prog: $*" >&2; exit 1; }
usage() { sed -n '2,21s/^# \{0,1\}//p' "$0" >&2; exit 2; }

PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

lighttpd_path() {
	local d
	command -v lighttpd && return
	for d in /usr/sbin /usr/local/sbin /sbin; do
		[ -x "$d/lighttpd" ] && { echo "$d/lighttpd"; return; }
	done
	return 1
}

free_port() {
	"$PY" -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

listening() { # port
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# started PID, ours PID START: a process known by its start time too
. "$(dirname "$0")/proc.bash"

start() {
	local dir=$1 state=$2 want_port=${3:-} port pid since tries
	[ -d "$dir" ] || die "'$dir' is not a directory"
	local httpd
	httpd=$(lighttpd_path) || die "lighttpd is not installed (not on PATH, nor in /usr/sbin, /usr/local/sbin or /sbin; make deps)"
	mkdir -p "$state"
	dir=$(cd "$dir" && pwd)
	state=$(cd "$state" && pwd)
	for tries in 1 2 3 4 5; do
		port=${want_port:-$(free_port)}
		cat >"$state/lighttpd.conf" <<-EOF
		server.document-root = "$dir"
		server.bind = "127.0.0.1"
		server.port = $port
		server.errorlog = "$state/error.log"
		server.modules = ( "mod_accesslog" )
		accesslog.filename = "$state/access.log"
		accesslog.format = "%h %t \"%r\" %s %b \"%{Range}i\""
		mimetype.assign = ( ".json" => "application/json", ".txt" => "text/plain",
		                    "" => "application/octet-stream" )
		EOF
		if [ -n "${MIRROR_KBPS:-}" ]; then
			[[ $MIRROR_KBPS =~ ^[0-9]+$ ]] || die "MIRROR_KBPS: '$MIRROR_KBPS' is not a number"
			echo "connection.kbytes-per-second = $MIRROR_KBPS" >>"$state/lighttpd.conf"
		fi
		: >"$state/access.log"
		"$httpd" -D -f "$state/lighttpd.conf" </dev/null >>"$state/error.log" 2>&1 &
		pid=$!
		since=$(started "$pid")
		for _ in $(seq 50); do
			listening "$port" && break
			ours "$pid" "$since" || break
			sleep 0.05
		done
		if ours "$pid" "$since" && listening "$port"; then
			echo "$pid" >"$state/pid"
			echo "$since" >"$state/pid.start"
			echo "http://127.0.0.1:$port" >"$state/url"
			echo "http://127.0.0.1:$port"
			return 0
		fi
		! ours "$pid" "$since" || kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		[ -z "$want_port" ] || break
	done
	die "lighttpd did not start (see $state/error.log)"
}

stop() {
	local state=$1 pid since
	[ -f "$state/pid" ] || return 0
	pid=$(cat "$state/pid")
	since=$(cat "$state/pid.start" 2>/dev/null || true)
	if ours "$pid" "$since" && kill "$pid" 2>/dev/null; then
		for _ in $(seq 50); do
			ours "$pid" "$since" || break
			sleep 0.05
		done
		! ours "$pid" "$since" || kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$state/pid" "$state/pid.start"
}

flush() {
	local state=$1 pid
	[ -f "$state/pid" ] || die "no server running in '$state'"
	pid=$(cat "$state/pid")
	ours "$pid" "$(cat "$state/pid.start" 2>/dev/null || true)" ||
		die "the server started in '$state' (pid $pid) has ended"
	kill -HUP "$pid"
}

case ${1:-} in
start) [ $# -ge 3 ] && [ $# -le 4 ] || usage; start "$2" "$3" "${4:-}" ;;
stop) [ $# -eq 2 ] || usage; stop "$2" ;;
flush) [ $# -eq 2 ] || usage; flush "$2" ;;
available) [ $# -eq 1 ] || usage; lighttpd_path >/dev/null ;;
-h|--help) sed -n '2,21s/^# \{0,1\}//p' "$0"; exit 0 ;;
*) usage ;;
esac
