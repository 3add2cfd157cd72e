#!/usr/bin/env bash
# make gen-check: the committed Unicode tables (lib/token/loom_unicode_tab.c,
# loom_wordpiece_tab.c) are what their generators write from the installed
# Unicode data, and a table that is not is named.  Skipped where the data
# (Debian's unicode-data) or python3 is missing, or the data is of another
# Unicode version than the tables.
. "$(dirname "$0")/lib.sh"
unset B UCD GEN_PY GEN_TABDIR
ROOT=$(cd "$TESTS/.." && pwd)
UCD=/usr/share/unicode
[ -r "$UCD/UnicodeData.txt" ] || skip_all "no Unicode data in $UCD (Debian package unicode-data)"
command -v python3 >/dev/null || skip_all "no python3"
have=$(sed -n '1s/^# PropList-\(.*\)\.txt$/\1/p' "$UCD/PropList.txt")
want=$(sed -n 's/^const char loom_uc_version\[\] = "\(.*\)";$/\1/p' "$ROOT/lib/token/loom_unicode_tab.c")
[ "$have" = "$want" ] || skip_all "Unicode data $have in $UCD, the tables are from $want"

run make -s -C "$ROOT" B="$T/b" gen-check
is_rc 0 "make gen-check: the committed tables are current (Unicode $want)"
like "$out" "loom_unicode_tab.c loom_wordpiece_tab.c are what their generators write" "  it says so"
is "$(cat "$err")" "" "  nothing on stderr"

# a table one character off is named, with the differing line
mkdir "$T/tab"
cp "$ROOT/lib/token/loom_unicode_tab.c" "$T/tab/"
sed 's/^const uint8_t loom_wp_stage1\[4352\] = {$/const uint8_t loom_wp_stage1[4353] = {/' \
	"$ROOT/lib/token/loom_wordpiece_tab.c" > "$T/tab/loom_wordpiece_tab.c"
ok "a copy of loom_wordpiece_tab.c with one line changed" \
	grep -q 'loom_wp_stage1\[4353\]' "$T/tab/loom_wordpiece_tab.c"
run make -s -C "$ROOT" B="$T/b" GEN_TABDIR="$T/tab" gen-check
is_rc 2 "make gen-check fails on a table that is not current"
like "$err" "make gen-check: $T/tab/loom_wordpiece_tab.c is not what lib/token/gen_wordpiece_tab.py writes" \
	"  naming the table and its generator"
like "$err" "^< const uint8_t loom_wp_stage1\[4353\] = {" "  and the line that differs"
unlike "$err" "loom_unicode_tab.c" "  not the table that is current"

run make -s -C "$ROOT" B="$T/b" UCD="$T/none" gen-check
is_rc 2 "no Unicode data: make gen-check fails"
like "$err" "no Unicode data in $T/none \\(Debian package unicode-data" "  saying where it looked"
done_testing
