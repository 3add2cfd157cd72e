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
# also sets up, is left out) of the best of ROUNDS runs per count; on a
# shared machine the speedups are noisy, the serial share much less so.
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

# summary LOG: "seconds serial_share" over the profile lines after the first,
# and each op's mean seconds as JSON on a second line
summary() {
	$PY - "$1" <<'PY'
import json, sys
ps = [json.loads(l)["profile"] for l in open(sys.argv[1]) if '"profile"' in l]
ps = ps[1:] if len(ps) > 1 else ps
n = len(ps)
sec = sum(p["seconds"] for p in ps) / n
ser = sum(p["serial"] for p in ps) / n
ops = {k: sum(p["ops"][k] for p in ps) / n for k in ps[0]["ops"]}
print("%.6f %.6f" % (sec, ser / sec))
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
	first= last=
	for th in $THREADS; do
		best=
		for r in $(seq "$ROUNDS"); do
			rm -f "$W/log"
			$LOOM_TRAIN -q -c "$preset" --threads "$th" --steps $((STEPS + 1)) --profile \
				--log "$W/log" --set "${set}micro_batch=$b,seq_len=$t,grad_accum=1,warmup_steps=0" \
				< "$W/frames" || exit 1
			summary "$W/log" > "$W/s"
			read -r sec share < "$W/s"
			if [ -z "$best" ] || $PY -c "import sys; sys.exit(not $sec < $best)"; then
				best=$sec bshare=$share
				sed -n 2p "$W/s" > "$W/ops-$th"
			fi
		done
		tps=$($PY -c "print('%.1f' % ($b * $t / $best))")
		[ -n "$first" ] || first=$th ftps=$tps
		last=$th
		sp=$($PY -c "print('%.2f' % ($tps / $ftps))")
		pct=$($PY -c "print('%.3f' % (100 * $bshare))")
		echo "$preset B=$b T=$t threads $th: $tps tok/s, ${sp}x over $first thread(s), serial share $pct%"
		eval "tps_$th=\$tps share_$th=\$bshare"
	done
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
