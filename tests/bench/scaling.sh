#!/usr/bin/env bash
# Every core of a machine (issue 29): loom-train's tokens/s by thread count
# at gpt2 B=8,T=128 and bert-base B=2,T=384 (masked-LM: the same trunk as
# question answering), each run with --profile, on synthetic frames.  Per
# shape and thread count: tokens/s, the speedup over the first count, and
# the serial share of a step (--profile: the time outside the ops that run
# as a team of threads); then the speedup of each op kind from the first
# count to the last, which says where the time goes as threads grow.
# Targets (issue 29): serial share at 1 thread < 1% (<= 0.01), 2 threads
# >= 1.95x, and where 16 are measured, gpt2 1 -> 16 threads >= 12x.
# Figures come from the mean of the timed steps (the first step, which
# also sets up, is left out) of the best of ROUNDS runs per count, the
# counts alternating within each round; on a shared machine the speedups
# are noisy, the serial share much less so.  So each count also gets the
# speedup its work allows, from --profile's cpu (the CPU seconds of the
# step: what the load of other processes does not stretch): on n threads
# serial + (cpu - serial) / n, the step with a core per thread, against
# the first count's; and the load average is printed with each shape.
# First the products alone (build/bench/mm_scaling, when built): at 1
# and 2 threads, threaded by OpenBLAS, by loom's team (what loom runs) and
# by oneDNN, for information.
# (tests/bench/threads.sh is another benchmark: the default thread count
# beside busy processes.)
# Env: THREADS (thread counts, default "1 2"; "1 2 4 8 16" on a
# 16-core machine), STEPS (timed steps per run, default 3), ROUNDS
# (runs per count, default 1), SHAPES (default "gpt2:8:128 bert-base:2:384"),
# LOOM_TRAIN (the command that runs loom-train, default loom-train: a
# loader and --library-path for a machine without the libraries).
set -u
cd "$(dirname "$0")/../.."
. tests/bench/fig.bash
THREADS=${THREADS:-1 2}
STEPS=${STEPS:-3}
ROUNDS=${ROUNDS:-1}
SHAPES=${SHAPES:-gpt2:8:128 bert-base:2:384}
LOOM_TRAIN=${LOOM_TRAIN:-loom-train}
PY=${PY:-/usr/bin/python3}
[ -x "$PY" ] || PY=python3
W=$(mktemp -d "${TMPDIR:-/tmp}/loom-bench-scaling.XXXXXX")
trap 'rm -rf "$W"' EXIT
# the thread count is --threads alone
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS GOTO_NUM_THREADS
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs; threads: $THREADS"
# the products alone, 1 and 2 threads, three ways (tests/bench/mm_scaling.c)
MM=${LOOM_BUILD:-build}/bench/mm_scaling
if [ -x "$MM" ]; then
	for m in gpt2 bert; do
		echo "products of a $m step (one layer's and a twelfth of the head's), best of $((ROUNDS * 3)) rounds, load average $(cut -d' ' -f1-3 /proc/loadavg):"
		"$MM" "$m" $((ROUNDS * 3)) | sed 's/^/  /' || exit 1
	done
fi

# summary LOG THREADS: "seconds serial_share work" over the profile lines
# after the first (work: serial + (cpu - serial) / THREADS), and each op's
# mean seconds as JSON on a second line
summary() {
	$PY - "$1" "$2" <<'PY'
import json, sys
ps = [json.loads(l)["profile"] for l in open(sys.argv[1]) if '"profile"' in l]
ps = ps[1:] if len(ps) > 1 else ps
n = len(ps)
sec = sum(p["seconds"] for p in ps) / n
ser = sum(p["serial"] for p in ps) / n
cpu = sum(p["cpu"] for p in ps) / n
ops = {k: sum(p["ops"][k] for p in ps) / n for k in ps[0]["ops"]}
print("%.6f %.6f %.6f" % (sec, ser / sec, ser + (cpu - ser) / int(sys.argv[2])))
print(json.dumps(ops))
PY
}

for shape in $SHAPES; do
	IFS=: read -r preset b t <<<"$shape"
	case $preset in
	bert*)	vocab=30522 rec=$((t - 2)) set="task=mlm," ;; # [CLS] record [SEP]
	*)	vocab=50257 rec=$((t + 1)) set= ;;
	esac
	$PY tests/mkframes.py "$b" "$rec" $((STEPS + 1)) "$vocab" 1 > "$W/frames" || exit 1
	echo "$preset B=$b T=$t: load average $(cut -d' ' -f1-3 /proc/loadavg)"
	first= last=
	for th in $THREADS; do
		[ -n "$first" ] || first=$th
		last=$th
		unset "best_$th" "work_$th"
	done
	for r in $(seq "$ROUNDS"); do
		for th in $THREADS; do
			rm -f "$W/log"
			$LOOM_TRAIN -q -c "$preset" --threads "$th" --steps $((STEPS + 1)) --profile \
				--log "$W/log" --set "${set}micro_batch=$b,seq_len=$t,grad_accum=1,warmup_steps=0" \
				< "$W/frames" || exit 1
			summary "$W/log" "$th" > "$W/s"
			read -r sec share work < "$W/s"
			eval "best=\${best_$th:-} bwork=\${work_$th:-}"
			if [ -z "$best" ] || $PY -c "import sys; sys.exit(not $sec < $best)"; then
				eval "best_$th=\$sec share_$th=\$share"
				sed -n 2p "$W/s" > "$W/ops-$th"
			fi
			if [ -z "$bwork" ] || $PY -c "import sys; sys.exit(not $work < $bwork)"; then
				eval "work_$th=\$work"
			fi
		done
	done
	for th in $THREADS; do
		eval "best=\$best_$th bshare=\$share_$th work=\$work_$th"
		tps=$($PY -c "print('%.1f' % ($b * $t / $best))")
		[ "$th" != "$first" ] || ftps=$tps fwork=$work
		sp=$($PY -c "print('%.2f' % ($tps / $ftps))")
		wsp=$($PY -c "print('%.2f' % ($fwork / $work))")
		pct=$($PY -c "print('%.3f' % (100 * $bshare))")
		echo "$preset B=$b T=$t threads $th: $tps tok/s, ${sp}x over $first thread(s) (${wsp}x with a core per thread), serial share $pct%"
		eval "tps_$th=\$tps"
	done
	echo "$preset B=$b T=$t: load average $(cut -d' ' -f1-3 /proc/loadavg)"
	if [ "$first" != "$last" ]; then
		echo "$preset B=$b T=$t per op, $first -> $last threads (seconds per step, speedup):"
		$PY - "$W/ops-$first" "$W/ops-$last" <<'PY'
import json, sys
a, z = (json.load(open(f)) for f in sys.argv[1:3])
for k in sorted(a, key=lambda k: -a[k]):
    if a[k] >= 1e-3:
        print("  %-17s %8.4f s -> %8.4f s  %5.2fx" % (k, a[k], z[k], a[k] / z[k] if z[k] else 0))
PY
	fi
	if [ "$first" = 1 ]; then
		fig "$preset B=$b,T=$t serial share of a step at 1 thread (--profile)" \
			"$($PY -c "print('%.4f' % $share_1)")" "<=" 0.01 ""
		for th in $THREADS; do
			case $th in
			2) fig "$preset B=$b,T=$t tokens/s, 2 threads over 1" \
				"$($PY -c "print('%.2f' % ($tps_2 / $tps_1))")" ">=" 1.95 x ;;
			16) [ "$preset" = gpt2 ] &&
				fig "$preset B=$b,T=$t tokens/s, 16 threads over 1" \
					"$($PY -c "print('%.2f' % ($tps_16 / $tps_1))")" ">=" 12 x ;;
			esac
		done
	fi
done
