# Shared by the data-parallel tests (dist.t, dist-sparse.t), after lib.sh:
# skips without mpirun or an MPI build, OpenMPI's environment for root and
# one core, shards of learnable records in $T/d.manifest.json ($M), the
# feeder and trainer commands ($FEED, $TRAIN), np (run a command on N
# ranks, under hang_guard's 300 s limit), failed (the job failed by
# itself), maxrel (losses of two logs compared), small (<= 1e-5, or <= $2),
# same_curve (a job's losses one process's), plans_as_sent (--dry-run's
# bytes as a job sent them) and bert_feeds (BERT's data, dist-bert.t,
# bert-tp.t).

command -v mpirun >/dev/null 2>&1 || skip_all "mpirun not installed (make deps installs openmpi-bin)"
loom-train --version 2>/dev/null | grep -q 'Open MPI' ||
	skip_all "loom-train was built without MPI (install libopenmpi-dev and rebuild)"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
# OpenMPI keeps allocations until exit; leak reports under ASan are its own
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export OMP_NUM_THREADS=1

# 400 records of 9 learnable tokens (next = 3 x prev + 1 mod 128)
/usr/bin/python3 -c '
import random
r = random.Random(1); out = []
for i in range(400):
    x = r.randrange(128)
    for j in range(9):
        out.append(x); x = (3 * x + 1) % 128
print(" ".join(map(str, out)))' > "$T/tok.txt"
run loom-shard -q -f text -L 9 --no-shuffle -n 2 -o "$T/d" "$T/tok.txt"
is_rc 0 "test shards"
M="$T/d.manifest.json"
FEED="loom-feed -q -m $M --seq 8 --seed 1"
TRAIN="loom-train -c tiny --set decay=constant --threads 1"

# failed NAME: the job ended by itself with a failure (exit non-zero, and
# not the hang guard's 124); else its exit code and stderr as comments
# (after the guard, its last 40 lines: what each process was doing)
failed() {
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then _report 1 "$1"
	elif [ "$rc" = 124 ]; then _report 0 "$1"; diag "exit code 124"; tail -40 "$err" | _quoted '# stderr: '
	else _report 0 "$1"; diag "exit code $rc"; err_lines; fi
}

# np N 'shell command' : one command per rank, $R = rank, $W = world.  A
# trainer killed by a signal re-raises it, so mpirun names the rank.
np() {
	local n=$1; shift
	run hang_guard 300 mpirun -np "$n" sh -c "R=\$OMPI_COMM_WORLD_RANK; W=\$OMPI_COMM_WORLD_SIZE; cd '$T'; $1"
}

# max relative difference of the losses of log $1 (steps $3..$4) vs log $2
maxrel() { /usr/bin/python3 - "$@" <<'EOF'
import json, sys
def load(p):
    return {d["step"]: d["loss"] for d in map(json.loads, open(p)) if "loss" in d}
a, b = load(sys.argv[1]), load(sys.argv[2])
lo, hi = int(sys.argv[3]), int(sys.argv[4])
steps = range(lo, hi + 1)
if any(s not in a or s not in b for s in steps):
    print("missing steps"); sys.exit()
print("%.3g" % max(abs(a[s] - b[s]) / abs(b[s]) for s in steps))
EOF
}
small() { /usr/bin/python3 -c "import sys; sys.exit(not (float('$1') <= float('${2:-1e-5}')))" 2>/dev/null; }

# same_curve WHAT N LOG BASE 'command' [FROM [TO]]: N ranks run it (np),
# their logged losses ($T/LOG) of steps FROM (1) to TO (BASE's last)
# within 1e-5 relative of $T/BASE's (one process), step by step; $err
# stays the job's
same_curve() {
	np "$2" "$5"
	is_rc 0 "$1"
	local lo=${6:-1} hi=${7:-$(grep -c '"loss"' "$T/$4")} d
	d=$(maxrel "$T/$3" "$T/$4" "$lo" "$hi")
	ok "  losses of steps $lo-$hi within 1e-5 relative of 1 rank (max $d)" small "$d"
	diag "$1 vs 1 rank: max relative loss difference $d"
}

# plans_as_sent NAME LOOM-TRAIN-ARGS...: --dry-run of that grid plans the
# bytes per step per rank that the last job's rank 0 reported sending in its
# tensor-parallel collectives ($err)
plans_as_sent() {
	local name=$1 sent
	shift
	sent=$(sed -n 's/.*; \([0-9.]* [kMG]B\) sent per step per rank in them.*/\1/p' "$err")
	run loom-train "$@" --dry-run
	is_rc 0 "  --dry-run of $name"
	like "$out" "sends $sent per step" "  plans the bytes it sent ($sent)"
}

# BERT's data in $T: 40 squad features (sq/, vocab.txt) and masked-LM
# shards of bert-base-uncased ids (mlm/); their feeders $SFEED and $MFEED
bert_feeds() {
	make_squad "$T/sq.json" "$T/vocab.txt"
	run loom-squad prepare -q --vocab "$T/vocab.txt" --seq 32 --stride 16 "$T/sq.json" -o "$T/sq/sq"
	is_rc 0 "40 squad features"
	SFEED="loom-feed -q --manifest $T/sq/sq.manifest.json --seed 1 --epochs 0"
	for i in $(seq 1 30); do echo "the cat sat on the mat and the dog ran to the park number $i ."; done > "$T/text.txt"
	loom-bpe encode -q --vocab bert-base-uncased < "$T/text.txt" | loom-shard -q --seq-len 30 -o "$T/mlm/m"
	MFEED="loom-feed -q --manifest $T/mlm/m.manifest.json --seq 29 --seed 1 --epochs 0"
}
