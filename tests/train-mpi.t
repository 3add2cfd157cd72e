#!/usr/bin/env bash
# pipelines/train-mpi.sh: its help shows the multi-host forms (Open MPI,
# Slurm); under `mpirun -np 2` (one rank each) it trains a tiny model on 2
# ranks of this machine and writes a checkpoint, started by hand (-H) it
# resumes it, and with TP=2 the 2 ranks split each layer; usage errors are
# one line and a hint.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dist-lib.sh"
WRAP="$TESTS/../pipelines/train-mpi.sh"

# --- help and usage ----------------------------------------------------------
run "$WRAP" -h
is_rc 0 "-h: exit 0"
like "$out" '^usage: .*train-mpi\.sh \[-np N\] \[-H HOST:SLOTS,\.\.\. \| --hostfile FILE\] MANIFEST CONFIG SAVE' \
	"  the usage line on stdout"
like "$out" '^  mpirun -H host1:2,host2:2 -np 4 .*train-mpi\.sh ' "  several hosts with mpirun -H"
like "$out" '^  pipelines/train-mpi\.sh --hostfile hosts -np 8 ' "  with a hostfile"
like "$out" '^  srun --mpi=pmix --kill-on-bad-exit=1 pipelines/train-mpi\.sh ' "  a Slurm batch script's srun"
like "$out" '^  #SBATCH --nodes=2 --ntasks-per-node=2' "  and its #SBATCH line"
is "$(wc -c < "$err")" 0 "  nothing on stderr"
fails_with 2 "train-mpi\\.sh: MANIFEST, CONFIG and SAVE are needed\$" "no arguments" "$WRAP"
fails_with 2 "train-mpi\\.sh: unknown option '--np' \\(loom-train options go after SAVE\\)\$" \
	"an unknown option" "$WRAP" --np 2 "$M" tiny ck
fails_with 2 "train-mpi\\.sh: started by srun without PMI, so loom-train cannot join the other ranks: srun --mpi=pmix" \
	"srun without PMI" env SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=2 "$WRAP" "$M" tiny ck
fails_with 2 "train-mpi\\.sh: -np: started by a launcher already \\(rank 0 of 2\\): give it to mpirun\$" \
	"-np under a launcher" env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 "$WRAP" -np 2 "$M" tiny ck

# --- mpirun -np 2 train-mpi.sh: one rank each --------------------------------
(cd "$T" && BATCH=4 SEQ=8 EPOCHS=0 THREADS=1 timeout 300 mpirun -np 2 "$WRAP" "$M" tiny ck \
	--steps 30 --set decay=constant --log-every 10 --log log.json >"$T/a.out" 2>"$T/a.err")
is "$?" 0 "mpirun -np 2 train-mpi.sh: 30 steps on 2 ranks"
is "$(readlink "$T/ck/latest")" step-00000030 "  a checkpoint of step 30"
ok "  complete" test -s "$T/ck/latest/model.safetensors" -a -s "$T/ck/latest/optimizer.safetensors"
like "$T/log.json" '"step":30,.*"tokens":1920,' "  tokens of both ranks (30 x 2 x 4 x 8)"
first=$(losses "$T/log.json" | awk 'NR == 1 { print $2 }')
last=$(losses "$T/log.json" | awk 'END { print $2 }')
ok "  it learns: loss $first -> $last" /usr/bin/python3 -c "import sys; sys.exit(not $last < 0.85 * $first)"
like "$T/a.err" '^loom-train: rank 0: data parallel: 2 ranks .*AdamW state per rank 435\.2 kB \(1/2 of 870\.4 kB\), gradient shard 217\.6 kB' \
	"  2 ranks, moments and gradient shard halved"
run loom-train -c tiny --set micro_batch=4,data_parallel=2 --dry-run
like "$out" '^  AdamW m \+ v     435\.2 kB \(1/2 of 870\.4 kB\)$' "  as --dry-run --set data_parallel=2 plans them"
like "$out" '^  gradient shard  217\.6 kB ' "  (and the gradient shard)"

# --- by hand with -H: mpirun on itself, resuming -------------------------------
(cd "$T" && BATCH=4 SEQ=8 EPOCHS=0 THREADS=1 timeout 300 "$WRAP" -H localhost:2 -np 2 "$M" tiny ck \
	--steps 35 -q >"$T/b.out" 2>"$T/b.err")
is "$?" 0 "train-mpi.sh -H localhost:2 -np 2: resumes the run"
is "$(readlink "$T/ck/latest")" step-00000035 "  and saves step 35"
is "$(cat "$T/b.err")" "" "  -q: nothing on stderr"

# --- TP=2: one replica of 2 tensor-parallel ranks, the replica's frames -------
(cd "$T" && TP=2 BATCH=4 SEQ=8 EPOCHS=0 THREADS=1 timeout 300 mpirun -np 2 "$WRAP" "$M" tiny tp \
	--steps 10 >"$T/c.out" 2>"$T/c.err")
is "$?" 0 "TP=2 mpirun -np 2 train-mpi.sh: 10 steps"
like "$T/c.err" '^loom-train: rank 0: tensor parallel: 1 replica x 2 ranks ' "  one replica of 2 ranks"
like "$T/c.err" '^loom-train: rank 0: tiny: .* B=4 T=8 ' "  each rank reads the replica's batch of 4"
is "$(readlink "$T/tp/latest")" step-00000010 "  a checkpoint of step 10"
done_testing
