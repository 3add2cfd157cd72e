#!/usr/bin/env bash
# loom-extract benchmarks (make bench), each a ratio measured in this run:
#   1. single-stream dump, -j 1, vs `bzip2 -dc dump > /dev/null` (<= 1.5x)
#   2. multistream dump + index, -j 2 vs its own -j 1             (>= 1.7x)
#   3. peak memory (max RSS) at -j 2                              (< 200 MB)
# Uses the real jawiki samples in ../shared (see /work/shared/README.md).
# Timings are the best of $REPS runs (the machine may be shared: noisy).
set -u
cd "$(dirname "$0")/../.."
DATA=${LOOM_BENCH_DATA:-../shared/data/wiki}
SINGLE=$DATA/jawiki-sample.xml.bz2
MULTI=$DATA/jawiki-sample-multistream.xml.bz2
REPS=${REPS:-3}
EXTRACT=$(command -v loom-extract || echo build/bin/loom-extract)
if [ ! -r "$SINGLE" ] || [ ! -r "$MULTI" ]; then
	echo "SKIP loom-extract bench: no $SINGLE / $MULTI"
	exit 0
fi

best() { # command... -> best wall seconds of $REPS runs
	local b= t0 t1 t
	for _ in $(seq "$REPS"); do
		t0=$(date +%s.%N)
		"$@" >/dev/null 2>&1 || { echo "bench: '$*' failed" >&2; exit 1; }
		t1=$(date +%s.%N)
		t=$(echo "$t1 - $t0" | bc -l)
		if [ -z "$b" ] || [ "$(echo "$t < $b" | bc -l)" = 1 ]; then b=$t; fi
	done
	echo "$b"
}
ratio() { echo "scale=2; $1 / $2" | bc -l; }
verdict() { # value op target
	if [ "$(echo "$1 $2 $3" | bc -l)" = 1 ]; then echo ok; else echo MISSED; fi
}

bz=$(best bzip2 -dc "$SINGLE")
s1=$(best "$EXTRACT" -q -j 1 "$SINGLE")
r=$(ratio "$s1" "$bz")
printf 'single-stream: bzip2 -dc %.3f s, loom-extract -j 1 %.3f s\n' "$bz" "$s1"
echo "FIGURE loom-extract -j 1 (single stream) vs bzip2 -dc: ${r}x (target <= 1.5x) $(verdict "$r" '<=' 1.5)"

cpu() { # command... -> user+sys CPU seconds (independent of other load)
	local tf; tf=$(mktemp)
	/usr/bin/time -o "$tf" -f '%U %S' "$@" >/dev/null 2>&1
	awk '{ print $1 + $2 }' "$tf"; rm -f "$tf"
}
cbz=$(cpu bzip2 -dc "$SINGLE")
cex=$(cpu "$EXTRACT" -q -j 1 "$SINGLE")
echo "cpu time: bzip2 -dc $cbz s, loom-extract -j 1 $cex s (all threads): $(ratio "$cex" "$cbz")x of the decompression floor"

# what two cores give right now: two independent bzip2 -dc at once vs one
two() { bzip2 -dc "$SINGLE" >/dev/null & bzip2 -dc "$SINGLE" >/dev/null; wait; }
b2=$(best two)
cap=$(echo "scale=2; 2 * $bz / $b2" | bc -l)
echo "machine: 2 x bzip2 -dc at once ${b2} s vs one ${bz} s: ${cap}x the throughput of one core (the ceiling for -j 2)"
m1=$(best "$EXTRACT" -q -j 1 "$MULTI")
m2=$(best "$EXTRACT" -q -j 2 "$MULTI")
r=$(ratio "$m1" "$m2")
printf 'multistream: -j 1 %.3f s, -j 2 %.3f s\n' "$m1" "$m2"
echo "FIGURE loom-extract multistream -j 2 vs -j 1: ${r}x faster (target >= 1.7x) $(verdict "$r" '>=' 1.7)"

peak=0
for f in "$SINGLE" "$MULTI"; do
	tf=$(mktemp)
	/usr/bin/time -o "$tf" -f '%M' "$EXTRACT" -q -j 2 "$f" >/dev/null 2>&1
	kb=$(tail -n 1 "$tf"); rm -f "$tf"
	[ "$kb" -gt "$peak" ] && peak=$kb
done
mb=$(echo "scale=1; $peak / 1024" | bc -l)
echo "FIGURE loom-extract -j 2 peak memory: ${mb} MB (target < 200 MB) $(verdict "$mb" '<' 200)"
