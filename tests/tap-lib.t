#!/usr/bin/env bash
# tests/lib.sh itself: a failing check's diagnostics never swallow the next
# check's TAP line (a `like` on a long file quotes its first 600 bytes, cut
# mid-line; an stderr without a final newline), so prove sees every test;
# hang_guard ends a command that outlives it and says what was running.
. "$(dirname "$0")/lib.sh"

# a child test script: a failing like on a 700-byte line, a failing is_rc
# on an stderr without a final newline, then a passing check each
cat > "$T/child.t" <<CHILD
. "$TESTS/lib.sh"
printf '%0700d\n' 0 > "\$T/long"
like "\$T/long" '^x' "fails, quoting 600 bytes of one line"
ok "the line after a cut diagnostic" true
run sh -c 'printf "no newline" >&2; exit 3'
is_rc 0 "fails, quoting an stderr without a final newline"
ok "the line after it" true
done_testing
CHILD
run bash "$T/child.t"
is_rc 1 "the child fails (two checks fail)"
is "$(grep -E '^(not )?ok ' "$out" | cut -d' ' -f1-3 | tr '\n' ,)" \
	"not ok 1,ok 2 -,not ok 3,ok 4 -," "every TAP line on a line of its own"
like "$out" '^1\.\.4$' "  and the plan"
like "$err" '^# exit code 3, expected 0$' "  a failure's diagnostics on stderr, which prove shows without -v"
like "$err" '^# stderr: no newline$' "  with the command's stderr"

# hang_guard: a command that ends in time keeps its status; one that does
# not is ended, with all its processes (its group), after a listing of them
run hang_guard 300 sh -c 'echo out; exit 3'
is_rc 3 "hang_guard: the command's exit status"
is "$(cat "$out")" out "  and its output"
mark="999.$$"
run hang_guard 1 sh -c "sleep $mark & wait"
is_rc 124 "hang_guard: a command still running after the limit: exit 124"
like "$err" '^hang guard: still running after 1 s: PID STAT WCHAN SECONDS COMMAND$' "  its processes listed"
like "$err" "^hang guard: +[0-9]+ +[A-Za-z+<]+ .* sh -c sleep $mark & wait\$" "  the command's among them"
for _ in $(seq 1 300); do pgrep -f "^sleep $mark\$" >/dev/null || break; sleep 0.1; done
ok "  and nothing of it is left running" eval "! pgrep -f '^sleep $mark\$' >/dev/null"
done_testing
