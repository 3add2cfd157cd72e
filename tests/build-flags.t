#!/usr/bin/env bash
# The Makefile rebuilds when the flags change (CC, CFLAGS, CPPFLAGS, OPT,
# ARCH, SAN, PREFIX; LDFLAGS, LIBS for programs) and only then: in a scratch
# build directory, one small object is compiled for real, the rest of a
# test program's tree is touched (make -t), and make -q / make -n and the
# objects' modification times show what a flag change rebuilds; a program
# is relinked under a temporary name, then renamed into place.
. "$(dirname "$0")/lib.sh"
# make exports its command-line variables to recipes: under `make asan` OPT,
# SAN and B arrive here; this test sets the flags it compares itself
unset B CC CFLAGS CPPFLAGS LDFLAGS LIBS OPT ARCH SAN WERROR PREFIX DESTDIR
ROOT=$(cd "$TESTS/.." && pwd)
cd "$ROOT"
B=$T/b
OBJ=$B/obj/lib/common/loom_utf8.o
mk() { make -C "$ROOT" B="$B" "$@"; }
mtime() { stat -c %y "$1"; }

run mk -s "$OBJ"
is_rc 0 "one object built in a scratch build dir"
ok "its flags recorded in \$(B)/LOOM-CFLAGS" grep -q -- '-O2' "$B/LOOM-CFLAGS"
flags0=$(cat "$B/LOOM-CFLAGS") t_obj=$(mtime "$OBJ") t_flags=$(mtime "$B/LOOM-CFLAGS")

run mk -q "$OBJ"
is_rc 0 "make -q: up to date when nothing changed"
run mk -n "$OBJ"
is_rc 0 "make -n"
is "$(grep -c '^cc' "$out")" 0 "  nothing to compile"
run mk -s "$OBJ"
is_rc 0 "make again"
is "$(mtime "$OBJ")" "$t_obj" "make again: the object is not rebuilt"
is "$(mtime "$B/LOOM-CFLAGS")" "$t_flags" "nor the flags file rewritten"

rel=$(realpath --relative-to="$ROOT" "$B")
run make -C "$ROOT" -q B="$rel" "$rel/obj/lib/common/loom_utf8.o"
is_rc 0 "the same build named by a relative path (B=$rel): up to date, not rebuilt"

for v in OPT=-O0 CFLAGS=-O1 CPPFLAGS=-DLOOM_X ARCH=-mavx2 SAN=-fsanitize=undefined \
	 PREFIX=/opt/x CC=gcc; do
	run mk -q "$v" "$OBJ"
	is_rc 1 "make -q $v: the object is out of date"
done
run mk -n PREFIX=/opt/x "$OBJ"
is_rc 0 "make -n PREFIX=/opt/x"
like "$out" "LOOM_SHARE_DIR='\"/opt/x/share/loom\"'.*loom_utf8.c" "make -n PREFIX=/opt/x: recompiled for /opt/x"
is "$(cat "$B/LOOM-CFLAGS")" "$flags0" "dry runs (-n, -q) leave the flags file alone"
is "$(mtime "$OBJ")" "$t_obj" "and the object"

run mk OPT=-O0 "$OBJ"
is_rc 0 "make OPT=-O0"
like "$out" '^cc .* -O0 .*loom_utf8.c' "recompiles with -O0"
ok "the object is rebuilt" test "$(mtime "$OBJ")" != "$t_obj"
ok "the flags file now says -O0" grep -q -- '-O0' "$B/LOOM-CFLAGS"
run mk -q OPT=-O0 "$OBJ"
is_rc 0 "make -q OPT=-O0 afterwards: up to date"
run mk -q "$OBJ"
is_rc 1 "make -q with the default -O2 again: out of date"
run mk -s "$OBJ"
is_rc 0 "make with -O2 again"
ok "the flags file is back to -O2" grep -q -- '-O2' "$B/LOOM-CFLAGS"

# link flags: touch (make -t) the whole tree of one test program
PROG=$B/tests/utf8.t
for d in lib/*/; do mkdir -p "$B/obj/$d"; done
mkdir -p "$B/obj/tests" "$B/tests" # make -t runs no recipe, so no mkdir
run mk -t "$PROG"
is_rc 0 "make -t: the tree of $PROG touched"
run mk -q "$PROG"
is_rc 0 "make -q: the program is up to date"
t_prog=$(mtime "$PROG")
for v in LDFLAGS=-s LIBS=-lz; do
	run mk -q "$v" "$PROG"
	is_rc 1 "make -q $v: the program is out of date"
	run mk -n "$v" "$PROG"
	is "$(grep -c '^{ cc' "$out") $(grep -c '^cc .* -c ' "$out")" "1 0" \
		"make -n $v: relinks, compiles nothing"
done
ok "the link flags are in \$(B)/LOOM-LDFLAGS" grep -q -- '-lm' "$B/LOOM-LDFLAGS"
# a program is linked under a temporary name and renamed over the old one:
# a test running it while the build relinks finds one or the other, never
# a file ld is still writing (not yet executable: "Permission denied")
ok "make -n: the link writes $PROG.tmp-\$\$" grep -qF -- "-o $PROG.tmp-\$\$ " "$out"
ok "  and renames it over the program" grep -qF -- "&& mv -f $PROG.tmp-\$\$ $PROG;" "$out"
is "$(mtime "$PROG")" "$t_prog" "dry runs did not touch the program"
done_testing
