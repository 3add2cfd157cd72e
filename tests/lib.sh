# tests/lib.sh - TAP helpers for loom's shell CLI tests (tests/*.t).
# Source it:  . "${0%/*}/lib.sh"
# Tools are found on PATH (the Makefile puts $(B)/bin first); each test gets
# a fresh scratch directory $T, removed at exit.
#
#   run CMD ARGS...      run a command; sets $rc, $out (stdout file), $err
#   is "$got" "$want" "name"     ok cond-cmd... (use: ok "name" test ...)
#   is_rc N "name"       check $rc of the last run
#   like FILE REGEX "name" / unlike FILE REGEX "name"
#   same_file A B "name" byte-identical files
#   no_tmp_left DIR "name"  no temporary (.tmp-) or output debris in DIR
#   skip N "why"            N skipped tests;  skip_all "why"; done_testing
#   losses LOG           step, loss, lr, grad_norm of a loom-train JSON log
#   complete_words WORD...  bash completion's replies for the last WORD, sorted,
#                        on one line (after . "$SHARE/bash-completion/loom")
#   pid_token PID|FILE   "PID START" of a running process (START: its start time,
#                        field 22 of /proc/PID/stat), taken when the test learns
#                        PID (`CMD & tok=$(pid_token $!)`), or of FILE, a copy of
#                        that line a rank's shell saved (`cat /proc/$p/stat > F`
#                        right after `&`); empty when there is no such process
#   still_ours TOKEN     TOKEN's process still runs (not another one given its
#                        pid since, not a zombie)
#   signal_ours SIG TOKEN [WHAT]  kill -SIG its pid only while still_ours
#                        (else, with WHAT, a comment says it had ended); a pid
#                        ended and reaped may be any other process's by then:
#                        pids wrap every few minutes under make check
#   hang_guard SECS CMD ARGS...  CMD, or, if it still runs after SECS s, exit
#                        124 once its process group is ended (TERM, as
#                        timeout(1)), its processes first listed on stderr
#                        ("hang guard: PID STAT WCHAN SECONDS COMMAND")
set -u
# A known environment, whatever the caller exported: no OpenBLAS, OpenMP,
# oneDNN or loom variables (but LOOM_BUILD, which the Makefile passes on
# purpose) and one locale.  A test about one of them sets it itself.  The C
# tests do the same in tests/hermetic.h.
export LC_ALL=C.UTF-8
for _v in $(compgen -e); do
	case $_v in
	LOOM_BUILD | LC_ALL) ;;
	OPENBLAS_* | GOTO* | OMP_* | GOMP_* | DNNL_* | ONEDNN_* | LOOM_* | LC_* | LANG | LANGUAGE)
		unset "$_v" ;;
	esac
done
unset _v
# the tests' servers (lighttpd, python's http.server) are on this machine:
# never through a caller's proxy (libcurl and urllib read these)
export no_proxy=127.0.0.1,localhost NO_PROXY=127.0.0.1,localhost
# A test runs make as a user would, not as a child of the `make check` that
# started prove (whose jobserver it cannot reach: make warns on stderr).
unset MAKEFLAGS MFLAGS MAKELEVEL
tap_n=0
tap_failed=0
T=$(mktemp -d "${TMPDIR:-/tmp}/loom-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
out="$T/.out"; err="$T/.err"; rc=0

_report() { # pass name
	tap_n=$((tap_n + 1))
	if [ "$1" = 1 ]; then echo "ok $tap_n - $2"
	else echo "not ok $tap_n - $2"; tap_failed=$((tap_failed + 1)); fi
}
diag() { printf '# %s\n' "$@"; }
# _quoted PREFIX: stdin's lines as TAP comments, each ended by a newline,
# the last too (head -c cuts one short; sed would leave it open and glue the
# next test's line to it, which prove then never sees)
_quoted() { awk -v p="$1" '{ print p $0 }'; }
skip() { # count "why": that many tests skipped
	local i; for ((i = 0; i < $1; i++)); do tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP $2"; done
}
run() { rc=0; "$@" >"$out" 2>"$err" || rc=$?; }
ok() { local name=$1; shift; if "$@"; then _report 1 "$name"; else _report 0 "$name"; fi; }
is() {
	if [ "$1" = "$2" ]; then _report 1 "$3"
	else _report 0 "$3"; { diag "     got: '$1'" "expected: '$2'"; } >&2; fi
}
is_rc() {
	if [ "$rc" = "$1" ]; then _report 1 "$2"
	else _report 0 "$2"; { diag "exit code $rc, expected $1"; err_lines; } >&2; fi
}
# stderr's first 5 lines and, of a longer one, its last 5 (where a pipe's or
# make's failure is told), as TAP comments
err_lines() {
	head -5 "$err" | _quoted '# stderr: '
	[ "$(wc -l < "$err")" -le 5 ] || { diag "stderr: ..."; tail -5 "$err" | _quoted '# stderr: '; }
}
like() {
	if grep -Eq -- "$2" "$1"; then _report 1 "$3"
	else _report 0 "$3"; { diag "'$1' does not match /$2/:"; head -c 600 "$1" | _quoted '#   '; } >&2; fi
}
unlike() {
	if ! grep -Eq -- "$2" "$1"; then _report 1 "$3"
	else _report 0 "$3"; { diag "'$1' matches /$2/:"; grep -E -- "$2" "$1" | head -3 | _quoted '#   '; } >&2; fi
}
same_file() {
	if cmp -s "$1" "$2"; then _report 1 "$3"
	else _report 0 "$3"; { diag "$1 and $2 differ:"; cmp "$1" "$2" 2>&1 | head -2 | _quoted '#   '; } >&2; fi
}
no_tmp_left() {
	local left; left=$(find "$1" -name '.*.tmp-*' 2>/dev/null | head -3)
	if [ -z "$left" ]; then _report 1 "$2"; else _report 0 "$2"; { diag "left behind: $left"; } >&2; fi
}
skip_all() { echo "1..0 # SKIP $1"; exit 0; }
# losses of a loom-train JSON-lines log (step loss lr grad_norm), train lines only
losses() { /usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "loss" in d:
        print(d["step"], repr(d["loss"]), repr(d["lr"]), repr(d["grad_norm"]))
' "$1"; }
complete_words() {
	COMP_WORDS=("$@")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	_loom_complete
	printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}
pid_token() { proc_stat "$1" && echo "$proc_pid $proc_start"; return 0; }
still_ours() {
	[ -n "$1" ] && proc_stat "${1%% *}" && [ "$proc_state" != Z ] &&
		[ "$proc_pid $proc_start" = "$1" ]
}
signal_ours() {
	if still_ours "$2"; then kill -"$1" "${2%% *}" 2>/dev/null; return; fi
	[ -z "${3:-}" ] || diag "$3 (pid ${2:+${2%% *}}) had ended: no SIG$1 sent" >&2
	return 1
}
hang_guard() {
	local secs=$1 job timer first s; shift
	set -m; "$@" & job=$!; set +m
	sleep "$secs" & timer=$!
	wait -n -p first "$job" "$timer"; s=$?
	if [ "$first" = "$job" ]; then
		kill "$timer" 2>/dev/null; wait "$timer" 2>/dev/null
		return $s
	fi
	echo "hang guard: still running after $secs s: PID STAT WCHAN SECONDS COMMAND" >&2
	_ps_tree "$job" | sed 's/^/hang guard: /' >&2
	kill -TERM -- "-$job" 2>/dev/null; wait "$job" 2>/dev/null
	return 124
}
_ps_tree() {
	local k
	ps -o pid=,stat=,wchan:24=,etimes=,args= -p "$1"
	for k in $(pgrep -P "$1"); do _ps_tree "$k"; done
}
done_testing() { echo "1..$tap_n"; [ "$tap_failed" = 0 ]; }
# Directory of the test scripts and of the repo's share/.
TESTS=$(cd "${0%/*}" && pwd)
SHARE=$(cd "$TESTS/../share" && pwd)
# proc_stat, the /proc/PID/stat fields pid_token and still_ours read
. "$TESTS/../pipelines/proc.bash"

# --- fixtures ---------------------------------------------------------------
#   fails_with N REGEX NAME CMD ARGS...   exit N, one stderr line matching
#              REGEX (N = 2: and the hint "Try '... --help' ..."), nothing
#              on stdout (four or five checks: "NAME: exit N", ...)
#   flip FILE OFFSET [MASK]   xor the byte at OFFSET (< 0: from the end) with
#              MASK (default 0x20)
#   make_frames B SEQ COUNT VOCAB SEED [opts]   frames as loom-feed writes
#              them, of a learnable rule, on stdout (tests/mkframes.py)
#   make_squad SQUAD.json VOCAB.txt [N]   a SQuAD v1.1 file of N (40)
#              learnable questions and its 32-word vocabulary (tests/mksquad.py)
fails_with() { # N REGEX NAME CMD ARGS...
	local n=$1 re=$2 name=$3; shift 3
	run "$@"
	is_rc "$n" "$name: exit $n"
	like "$err" "$re" "$name: message"
	if [ "$n" = 2 ]; then # a usage error: the line, then a hint to --help
		is "$(wc -l < "$err")" 2 "$name: one line and the hint"
		like "$err" "^Try '.* --help' for more information\.\$" "$name: the hint"
	else
		is "$(wc -l < "$err")" 1 "$name: one line"
	fi
	is "$(wc -c < "$out")" 0 "$name: no stdout"
}
flip() { # FILE OFFSET [MASK]: xor one byte (OFFSET < 0 counts from the end)
	/usr/bin/python3 -c 'import sys
f = open(sys.argv[1], "r+b"); o = int(sys.argv[2])
f.seek(o, 0 if o >= 0 else 2); b = f.read(1)[0]; f.seek(-1, 1)
f.write(bytes([b ^ int(sys.argv[3], 0)]))' "$1" "$2" "${3:-0x20}"
}
make_frames() { /usr/bin/python3 "$TESTS/mkframes.py" "$@"; }
make_squad() { /usr/bin/python3 "$TESTS/mksquad.py" "$@"; }
