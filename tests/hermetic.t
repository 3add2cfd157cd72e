#!/usr/bin/env bash
# The tests run in a known environment, whatever the caller exported
# (tests/lib.sh for the shell tests, tests/hermetic.h for the C tests):
# OpenBLAS, OpenMP, oneDNN and loom variables (but LOOM_BUILD) and the
# locale are cleared, LC_ALL=C.UTF-8.
. "$(dirname "$0")/lib.sh"

DIRTY=(OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
	OMP_WAIT_POLICY=active OMP_PROC_BIND=true GOMP_SPINCOUNT=1 GOTO_NUM_THREADS=1
	ONEDNN_VERBOSE=1 LOOM_SHARE=/nonexistent LOOM_NO_BF16=1 LOOM_BUILD=/kept
	LC_ALL=de_DE.UTF-8 LC_NUMERIC=de_DE.UTF-8 LANG=de_DE.UTF-8 LANGUAGE=de)
known='^(OPENBLAS_|GOTO|OMP_|GOMP_|DNNL_|ONEDNN_|LOOM_|LC_|LANG=|LANGUAGE=)'

env | grep -E "$known" | sort > "$T/self"
is "$(cat "$T/self")" "LC_ALL=C.UTF-8${LOOM_BUILD+$'\n'LOOM_BUILD=$LOOM_BUILD}" \
	"this test's environment: LC_ALL=C.UTF-8 (and the Makefile's LOOM_BUILD)"

# a shell test started with all of them exported
env "${DIRTY[@]}" bash -c '. "${0%/*}/lib.sh"; env' "$TESTS/x.t" 2>"$err" |
	grep -E "$known" | sort > "$T/sh"
is "$(cat "$T/sh")" "LC_ALL=C.UTF-8
LOOM_BUILD=/kept" "a shell test under a caller's OPENBLAS_*, OMP_*, LOOM_*, LC_*: cleared"
# (bash itself warns at start when the caller's locale is not installed)
unlike "$err" 'lib\.sh' "quietly"

# a C test (build/tests/hermetic.t) started the same way
C=${LOOM_BUILD:-$TESTS/../build}/tests/hermetic.t
if [ -x "$C" ]; then
	run env "${DIRTY[@]}" "$C"
	is_rc 0 "a C test under the same environment passes"
	is "$(grep -c '^ok' "$out")" 4 "its environment and OpenMP's are the known ones"
	unlike "$out" '^not ok' "no failure"
else
	skip 3 "no $C (make tests)"
fi
done_testing
