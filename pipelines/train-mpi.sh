#!/usr/bin/env bash
# pipelines/train-mpi.sh - data-parallel loom-train on one or several
# machines: one `loom-feed --rank R --world W MANIFEST | loom-train` pipe
# per rank, under Open MPI's mpirun or Slurm's srun.
#
# Started by a launcher (Open MPI's mpirun, or srun with PMI), it is one
# rank: R and W come from OMPI_COMM_WORLD_RANK/SIZE, or SLURM_PROCID and
# SLURM_STEP_NUM_TASKS, or PMI_RANK/PMI_SIZE.  Started by hand, it runs
# mpirun on itself with -np, -H or --hostfile (and forwards the variables
# below to every host).
#
# One machine, 2 ranks (both forms do the same):
#   mpirun -np 2 pipelines/train-mpi.sh data/wiki.manifest.json gpt2 ckpt --steps 1000
#   pipelines/train-mpi.sh -np 2 data/wiki.manifest.json gpt2 ckpt --steps 1000
#
# Several machines with Open MPI, 2 ranks on each of host1 and host2:
#   pipelines/train-mpi.sh -H host1:2,host2:2 -np 4 data/wiki.manifest.json gpt2 ckpt
#   mpirun -H host1:2,host2:2 -np 4 -x PATH -x BATCH pipelines/train-mpi.sh data/wiki.manifest.json gpt2 ckpt
#   pipelines/train-mpi.sh --hostfile hosts -np 8 data/wiki.manifest.json gpt2 ckpt
# where hosts is an Open MPI hostfile, one machine per line with its slots
# ("node1 slots=4").
#
# Tensor parallelism (TP=T, loom-train(1) TENSOR PARALLELISM): the ranks are
# replicas of T neighbouring ranks that split each layer; rank R reads
# replica R/T's frames.  Two hosts of 4 cores, each host one replica of 4:
#   TP=4 pipelines/train-mpi.sh -H host1:4,host2:4 -np 8 data/wiki.manifest.json gpt2 ckpt --set vocab_size=50304
#
# Slurm: a batch script (sbatch train.sbatch), one rank per task; srun
# needs PMIx (--mpi=pmix) for loom-train to join the job: Debian's Open MPI
# takes PMIx only (pmi2, which `srun --mpi=list` lists too, fails in
# MPI_Init); --kill-on-bad-exit=1 stops every rank when one fails:
#   #!/bin/bash
#   #SBATCH --nodes=2 --ntasks-per-node=2 --cpus-per-task=16
#   export BATCH=8 SEQ=1024 THREADS=$SLURM_CPUS_PER_TASK
#   srun --mpi=pmix --kill-on-bad-exit=1 pipelines/train-mpi.sh data/wiki.manifest.json gpt2 ckpt
#
# Each machine needs loom on PATH, the manifest and its shards at the same
# path (a shared filesystem, or a copy), and the checkpoint directory SAVE
# shared (rank 0 writes it, or with TP or sharding=weights every rank its
# part; every rank reads it to resume).  Run it again after a stop: it
# resumes from SAVE/latest, on any number of ranks (give the same global
# batch: BATCH x replicas).  `loom-train -c CONFIG --set data_parallel=N
# --dry-run --memory-per-rank 8GB` says how many ranks a model needs and
# the smallest grid of replicas x TP ranks that fits.
#
# Environment: BATCH (records per replica per micro-batch, default 8), TP
# (tensor-parallel ranks per replica, default 1), SEQ
# (1024), SEED (1), EPOCHS (1; 0 = endless), THREADS (threads per rank,
# default: the cores other processes leave free), MPIRUN_ARGS (extra
# mpirun options, by hand only).
#
# To stop cleanly: kill -USR1 <pid of mpirun>, or scancel --signal=USR1
# JOBID under Slurm: every rank finishes the same step, rank 0 saves, all
# exit 0.  A rank that dies or a feeder that fails stops every rank with
# one error naming the rank; SAVE/latest stays at the last complete
# checkpoint.
set -euo pipefail

usage="usage: $0 [-np N] [-H HOST:SLOTS,... | --hostfile FILE] MANIFEST CONFIG SAVE [loom-train options...]"
help() {
	echo "$usage"
	sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//; p}' "$0"
	exit 0
}
bad_usage() {
	echo "$0: $1" >&2
	echo "Try '$0 --help' for more information." >&2
	exit 2
}

# the rank and world of a launcher, if one started us
r='' w='' srun=''
if [ -n "${OMPI_COMM_WORLD_RANK:-}" ]; then
	r=$OMPI_COMM_WORLD_RANK w=$OMPI_COMM_WORLD_SIZE
elif [ -n "${SLURM_PROCID:-}" ] && [ -n "${PMIX_RANK:-}${PMI_RANK:-}" ]; then
	r=$SLURM_PROCID w=${SLURM_STEP_NUM_TASKS:-$SLURM_NTASKS} srun=1
elif [ -n "${PMI_RANK:-}" ]; then
	r=$PMI_RANK w=$PMI_SIZE
elif [ -n "${SLURM_STEP_ID:-}" ] && [ "${1:-}" != -h ] && [ "${1:-}" != --help ]; then
	bad_usage "started by srun without PMI, so loom-train cannot join the other ranks: srun --mpi=pmix (srun --mpi=list shows what the cluster has)"
fi

if [ -n "$r" ]; then
	# --- one rank --------------------------------------------------------
	case ${1:-} in
	-h|--help) help ;;
	-np|-n|-H|--host|--hostfile) bad_usage "$1: started by a launcher already (rank $r of $w): give it to mpirun" ;;
	esac
	[ $# -ge 3 ] || bad_usage "MANIFEST, CONFIG and SAVE are needed"
	manifest=$1 config=$2 save=$3
	shift 3
	feed_resume=() train_resume=(--config "$config")
	if [ -L "$save/latest" ]; then
		feed_resume=(--resume "$save/latest")
		train_resume=(--resume latest)
	fi
	train_resume+=(--set "micro_batch=${BATCH:-8},tensor_parallel=${TP:-1}")
	# tensor parallelism: a replica's ranks read the replica's frames
	r=$((r / ${TP:-1})) w=$((w / ${TP:-1}))
	# SIGUSR1 (and TERM, INT) stop loom-train at a step (every rank
	# finishes the same step, rank 0 saves, all exit 0); the feeder ignores
	# them and ends when loom-train closes the pipe.  mpirun signals this
	# shell only: pass them on.  srun and scancel signal every process of
	# the step themselves: pass nothing on (a second USR1 makes loom-train
	# give up at once).
	trap '' USR1
	fwd=1 feed_ignores=USR1
	[ -z "$srun" ] || fwd='' feed_ignores='USR1 TERM INT'
	# shellcheck disable=SC2086 # the signal names: words on purpose
	{ trap '' $feed_ignores; exec loom-feed --manifest "$manifest" --batch "${BATCH:-8}" \
		--seq "${SEQ:-1024}" --seed "${SEED:-1}" --epochs "${EPOCHS:-1}" --rank "$r" \
		--world "$w" -q "${feed_resume[@]}"; } |
		loom-train "${train_resume[@]}" --save "$save" ${THREADS:+--threads "$THREADS"} "$@" &
	trainer=$!
	sig=0
	trap 'sig=1; [ -z "$fwd" ] || kill -USR1 $trainer 2>/dev/null' USR1
	trap 'sig=1; [ -z "$fwd" ] || kill -TERM $trainer 2>/dev/null' TERM INT
	while :; do
		s=0
		wait "$trainer" || s=$?
		[ "$s" -gt 128 ] && [ "$sig" = 1 ] && { sig=0; continue; } # a trap ran
		break
	done
	# killed by a signal: die of it too, so the launcher names this rank
	# and signal
	if [ "$s" -gt 128 ]; then
		trap - "$((s - 128))"
		kill -s "$((s - 128))" $$
	fi
	exit "$s"
fi

# --- by hand: mpirun on this script ---------------------------------------
mpi=()
while [ $# -gt 0 ]; do
	case $1 in
	-np|-n|-H|--host|--hostfile)
		[ $# -ge 2 ] || bad_usage "$1 needs a value"
		mpi+=("$1" "$2")
		shift 2 ;;
	-h|--help) help ;;
	-*) bad_usage "unknown option '$1' (loom-train options go after SAVE)" ;;
	*) break ;;
	esac
done
[ $# -ge 3 ] || bad_usage "MANIFEST, CONFIG and SAVE are needed"
command -v mpirun >/dev/null || { echo "$0: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
fwd=()
for v in BATCH TP SEQ SEED EPOCHS THREADS PATH; do
	[ -n "${!v:-}" ] && fwd+=(-x "$v")
done
# MPIRUN_ARGS: words, split on purpose
# shellcheck disable=SC2086
exec mpirun "${mpi[@]}" --bind-to none ${MPIRUN_ARGS:-} "${fwd[@]}" \
	"$(cd "$(dirname "$0")" && pwd)/$(basename "$0")" "$@"
