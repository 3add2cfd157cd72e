#!/usr/bin/env bash
# Bench: data-parallel loom-train on the gpt2 preset (124M parameters, T=64),
# the same global batch of 8 records: 2 ranks x 1 thread x micro-batch 4
# under mpirun vs 1 rank x 1 thread x micro-batch 8, in the same run.
#   scaling efficiency = (tokens/s of 2 ranks / tokens/s of 1 rank) / 2
# (target >= 0.85), and the bytes each rank sends per step against the ring
# all-reduce lower bound 2 (N-1)/N x parameter bytes (the "2 x parameter
# bytes" of large N).  Tokens/s is the median over the steps after
# warm-up.  A short run on a shared 2-core machine: figures are noisy.
BENCH=dist
. "$(dirname "$0")/dist-common.inc"

sh -c "$FEED --batch 8 | $TRAIN -q --set micro_batch=8 --log $T/one.json"
mpirun --oversubscribe --bind-to none -np 2 sh -c \
	"$FEED --batch 4 --rank \$OMPI_COMM_WORLD_RANK --world \$OMPI_COMM_WORLD_SIZE | $TRAIN --log-every 1000 --set micro_batch=4 --log $T/two.json" \
	2> "$T/two.err"
grep -E 'data parallel' "$T/two.err" | sed 's/^/  /'
one=$(med tokens_per_s "$T/one.json")
two=$(med tokens_per_s "$T/two.json")
eff=$(echo "$two / $one / 2" | bc -l)
printf 'gpt2, T=64, global batch 8, 1 thread per rank: 1 rank %.1f tokens/s, 2 ranks %.1f tokens/s\n' "$one" "$two"
printf 'FIGURE data-parallel scaling efficiency, 2 ranks vs 1 (gpt2): %.2f (target >= 0.85) %s\n' \
	"$eff" "$([ "$(echo "$eff >= 0.85" | bc -l)" = 1 ] && echo ok || echo MISS)"

# What this machine allows: two single-thread sgemm processes at once
# against one alone (1.0 = two independent cores; about 0.5 when the two
# vCPUs share one core's FMA units or the machine is busy).
g1=$(loom-train --bench-sgemm --threads 1 | awk '{print $2}')
loom-train --bench-sgemm --threads 1 > "$T/s1" & loom-train --bench-sgemm --threads 1 > "$T/s2"; wait
g2=$(cat "$T/s1" "$T/s2" | awk '{s += $2} END {print s}')
ceil=$(echo "$g2 / 2 / $g1" | bc -l)
printf 'sgemm 1 thread: %.1f GFLOP/s alone, %.1f GFLOP/s for two processes at once: compute ceiling for 2 ranks %.2f\n' "$g1" "$g2" "$ceil"
printf 'FIGURE scaling efficiency relative to that ceiling (communication and ZeRO-1 overhead only): %.2f (target >= 0.85) %s\n' \
	"$(echo "$eff / $ceil" | bc -l)" "$([ "$(echo "$eff / $ceil >= 0.85" | bc -l)" = 1 ] && echo ok || echo MISS)"

# bytes per step: loom-train's own count of what each rank sends
line=$(grep -E 'sent per step per rank' "$T/two.err" || true)
ratio=$(echo "$line" | sed -nE 's/.*; ([0-9.]+)x\)$/\1/p')
NP=$(loom-train -c gpt2 --dry-run | sed -nE 's/^parameters: ([0-9]+).*/\1/p')
printf 'FIGURE bytes sent per step per rank vs ring all-reduce lower bound 2(N-1)/N x %d x 4 bytes (N=2): %sx (target <= 1.05) %s\n' \
	"$NP" "${ratio:-?}" "$([ -n "$ratio" ] && [ "$(echo "$ratio <= 1.05" | bc -l)" = 1 ] && echo ok || echo MISS)"

# Bytes on the wire: 2 ranks over TCP on a private loopback (a network
# namespace of our own, so only this job's traffic is counted), small
# preset; the difference between a 25- and a 5-step run is 20 steps of
# gradient exchange and parameter all-gather, headers included.
if command -v unshare >/dev/null && command -v ip >/dev/null && unshare -n true 2>/dev/null; then
	python3 -c "
import random
r = random.Random(2); print(' '.join(str(r.randrange(4096)) for _ in range(400 * 65)))" > "$T/s.txt"
	loom-shard -q -f text -L 65 -n 2 -o "$T/s" "$T/s.txt"
	wire() { unshare -n sh -c 'ip link set lo up
		b0=$(awk "/lo:/{print \$10}" /proc/net/dev)
		OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo \
		mpirun --oversubscribe --bind-to none -np 2 sh -c "loom-feed -q -m '"$T"'/s.manifest.json --batch 4 --seq 64 --seed 1 --epochs 0 --rank \$OMPI_COMM_WORLD_RANK --world 2 | loom-train -q -c small --threads 1 --set micro_batch=4 --steps '"$1"'" >/dev/null 2>&1
		b1=$(awk "/lo:/{print \$10}" /proc/net/dev); echo $((b1 - b0))'; }
	w5=$(wire 5)
	w25=$(wire 25)
	SP=$(loom-train -c small --dry-run | sed -nE 's/^parameters: ([0-9]+).*/\1/p')
	wr=$(echo "($w25 - $w5) / 20 / 2 / ($SP * 4)" | bc -l)
	printf 'FIGURE bytes on the wire per step per rank (TCP loopback, small preset, %d parameters) vs ring lower bound: %.4fx (target <= 1.05) %s\n' \
		"$SP" "$wr" "$([ "$(echo "$wr <= 1.05" | bc -l)" = 1 ] && echo ok || echo MISS)"
else
	echo "dist bench: no network namespace here (unshare -n); wire bytes not measured"
fi
