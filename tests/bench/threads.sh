#!/usr/bin/env bash
# Threads on a busy machine (issue 18): loom-eval of the mini preset
# (88 frames, B=4, T=32) with the default thread count, which follows the
# load (lib/kernels/loom_blas.h), against fixed counts:
#  - beside cores + 1 processes that never sleep: default vs -j 1, target
#    <= 1.3x (before: 2 threads spinning at every barrier, 60-90x);
#  - quiet (as quiet as the machine is): default vs -j <cores> and vs the
#    old behaviour (-j <cores> with OpenMP's spinning wait, GOMP_SPINCOUNT
#    300000 as libgomp's default), target <= 1.15x.
# Times are loom-eval's own "seconds" (the frames, not the checkpoint
# load).  Variants alternate within each of ROUNDS rounds and each keeps its
# best: this machine is shared and its speed drifts.
# Env: ROUNDS (default 3).
set -u
cd "$(dirname "$0")/../.."
# "default threads" means no thread count from the environment either
unset OMP_NUM_THREADS OMP_WAIT_POLICY OMP_DYNAMIC GOMP_SPINCOUNT OPENBLAS_NUM_THREADS GOTO_NUM_THREADS
. tests/bench/fig.bash
ROUNDS=${ROUNDS:-3}
PY=/usr/bin/python3
command -v loom-eval >/dev/null || { echo "loom-eval not on PATH (make bench)"; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/loom-bench-threads.XXXXXX")
pids=
trap 'kill $pids 2>/dev/null; rm -rf "$W"' EXIT
ncpu=$(nproc)
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $ncpu CPUs"
$PY tests/mkframes.py 4 33 88 50257 1 > "$W/frames"
$PY tests/mkframes.py 4 33 3 50257 2 | loom-train -q -c mini --steps 2 --threads 1 --save "$W/ck" || exit 1

secs() { # loom-eval options... -> seconds of the eval
	loom-eval -c "$W/ck" "$@" < "$W/frames" |
		$PY -c 'import json, sys; print(json.load(sys.stdin)["seconds"])'
}
best() { $PY -c "import sys; print(min(float(x) for x in sys.argv[1:]))" "$@"; }

# --- quiet --------------------------------------------------------------------
qd= qj= qo=
for r in $(seq "$ROUNDS"); do
	d=$(secs) j=$(secs -j "$ncpu") o=$(OMP_WAIT_POLICY=active GOMP_SPINCOUNT=300000 secs -j "$ncpu")
	qd="$qd $d" qj="$qj $j" qo="$qo $o"
	echo "quiet round $r (load $(cut -d' ' -f1,4 /proc/loadavg)): default ${d}s, -j $ncpu ${j}s, old ${o}s"
done

# --- beside cores + 1 busy processes -------------------------------------------
for i in $(seq $((ncpu + 1))); do
	sh -c 'while :; do :; done' &
	pids="$pids $!"
done
bd= b1=
for r in $(seq "$ROUNDS"); do
	d=$(secs) j=$(secs -j 1)
	bd="$bd $d" b1="$b1 $j"
	echo "busy round $r (load $(cut -d' ' -f1,4 /proc/loadavg)): default ${d}s, -j 1 ${j}s"
done
kill $pids 2>/dev/null
pids=

qd=$(best $qd) qj=$(best $qj) qo=$(best $qo) bd=$(best $bd) b1=$(best $b1)
echo "best of $ROUNDS: quiet default ${qd}s, -j $ncpu ${qj}s, old ${qo}s; busy default ${bd}s, -j 1 ${b1}s"
ratio() { $PY -c "print('%.2f' % ($1 / $2))"; }
fig "loom-eval mini, default threads beside $((ncpu + 1)) busy processes vs -j 1" "$(ratio "$bd" "$b1")" "<=" 1.3 x
fig "loom-eval mini, quiet: default threads vs -j $ncpu" "$(ratio "$qd" "$qj")" "<=" 1.15 x
fig "loom-eval mini, quiet: default threads vs the old default (-j $ncpu, spinning waits)" "$(ratio "$qd" "$qo")" "<=" 1.15 x
