#!/usr/bin/env bash
# The default thread count follows the load (lib/kernels/loom_blas.h): with
# more busy processes than CPUs, loom-train, loom-eval and loom-eval
# generate run one thread; an explicit --threads N or OMP_NUM_THREADS stays
# N.  Counts, not times: each tool says under -v what it chose.
. "$(dirname "$0")/lib.sh"

make_frames 2 9 4 128 1 > "$T/frames"
run loom-train -q -c tiny --steps 2 --threads 1 --save "$T/ck" < "$T/frames"
is_rc 0 "a tiny checkpoint"

# cores + 1 processes that never sleep, for as long as the checks run
ncpu=$(nproc)
pids=
trap 'kill $pids 2>/dev/null; rm -rf "$T"' EXIT
for i in $(seq $((ncpu + 1))); do
	sh -c 'while :; do :; done' &
	pids="$pids $!"
done
busy="1 thread \($ncpu CPUs?, ([0-9]+) other tasks? running\)"
others() { sed -nE "s/.*$busy.*/\1/p" "$err" | head -1; }

run loom-eval -v -c "$T/ck" < "$T/frames"
is_rc 0 "loom-eval beside $((ncpu + 1)) busy processes"
like "$err" "^loom-eval: OpenBLAS core '[A-Za-z0-9]+', $busy$" "-v: 1 thread, saying why"
ok "at least the $((ncpu + 1)) busy processes counted ($(others))" test "$(others)" -gt "$ncpu"
unlike "$err" '^loom-eval: frame [0-9]+: [0-9]+ threads' "and it stays 1 (no change is reported)"

# one CPU (taskset): 1 thread whatever the load, and -v still counts the
# others (it said "0 other tasks" there, the count of a look it skipped)
run taskset -c 0 loom-eval -v -c "$T/ck" < "$T/frames"
like "$err" "^loom-eval: OpenBLAS core '[A-Za-z0-9]+', 1 thread \(1 CPU, ([0-9]+) other tasks? running\)$" \
	"on one CPU: 1 thread"
ok "  and the busy processes counted ($(sed -nE 's/.*1 CPU, ([0-9]+) other.*/\1/p' "$err"))" \
	test "$(sed -nE 's/.*1 CPU, ([0-9]+) other.*/\1/p' "$err")" -gt "$ncpu"

run loom-train -v -c tiny --steps 3 < "$T/frames"
is_rc 0 "loom-train beside them"
like "$err" "^loom-train: OpenBLAS core '[A-Za-z0-9]+', $busy$" "-v: 1 thread"
like "$err" "^loom-train: tiny: [0-9]+ parameters, 1 thread," "the model line agrees"
unlike "$err" '^loom-train: step [0-9]+: [0-9]+ threads' "it stays 1 at every step"

run loom-eval generate -v -c "$T/ck" --vocab gpt2 -n 3 --no-stop --prompt a
is_rc 0 "loom-eval generate beside them"
like "$err" "^loom-eval: OpenBLAS core '[A-Za-z0-9]+', $busy$" "generate: 1 thread"

run loom-eval -v -j 2 -c "$T/ck" < "$T/frames"
is_rc 0 "loom-eval -j 2"
like "$err" "^loom-eval: OpenBLAS core '[A-Za-z0-9]+', 2 threads \(set\)$" "-j 2 stays 2"
OMP_NUM_THREADS=2 run loom-train -v -c tiny --steps 2 < "$T/frames"
is_rc 0 "loom-train with OMP_NUM_THREADS=2"
like "$err" "^loom-train: OpenBLAS core '[A-Za-z0-9]+', 2 threads \(set\)$" "OMP_NUM_THREADS=2 stays 2"
run loom-train -v --threads 3 -c tiny --steps 2 < "$T/frames"
is_rc 0 "loom-train --threads 3"
like "$err" "^loom-train: OpenBLAS core '[A-Za-z0-9]+', 3 threads \(set\)$" "--threads 3 stays 3"
done_testing
