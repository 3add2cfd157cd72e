#!/usr/bin/env bash
# tests/lib.sh itself: a failing check's diagnostics never swallow the next
# check's TAP line (a `like` on a long file quotes its first 600 bytes, cut
# mid-line; an stderr without a final newline), so prove sees every test.
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
done_testing
