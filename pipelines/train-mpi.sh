#!/usr/bin/env bash
# pipelines/train-mpi.sh - data-parallel training on several machines with
# OpenMPI: one `loom-feed --rank r --world N | loom-train` pipe per rank.
#
#   pipelines/train-mpi.sh -np 8 --hostfile hosts data/wiki.manifest.json gpt2 ckpt \
#       [loom-train options...]
#
# hosts is an OpenMPI hostfile, one machine per line with its slots:
#   node1 slots=4
#   node2 slots=4
# Each machine needs loom on PATH, the manifest and its shards at the same
# path (a shared filesystem, or a copy), and the checkpoint directory shared
# (rank 0 writes it, every rank reads it to resume).  Run it again after a
# stop: it resumes from SAVE/latest, on any number of ranks (give the same
# global batch: BATCH x ranks).
#
# Environment: BATCH (records per rank per micro-batch, default 8), SEQ
# (1024), SEED (1), EPOCHS (1; 0 = endless), THREADS (threads per rank,
# default: cores / ranks per machine), MPIRUN_ARGS (extra mpirun options).
#
# To stop cleanly: kill -USR1 <pid of mpirun>.  mpirun forwards SIGUSR1 to
# every rank; all ranks finish the same step, rank 0 saves, all exit 0.
# A rank that dies or a feeder that fails stops every rank with one error
# naming the rank; SAVE/latest stays at the last complete checkpoint.
set -euo pipefail

usage() {
	echo "usage: $0 [-np N] [--hostfile FILE] MANIFEST CONFIG SAVE [loom-train options...]" >&2
	exit 2
}

# The per-rank side: this script runs itself under mpirun with --rank-main.
if [ "${1:-}" = --rank-main ]; then
	shift
	manifest=$1 config=$2 save=$3
	shift 3
	r=${OMPI_COMM_WORLD_RANK:?not started by mpirun} w=${OMPI_COMM_WORLD_SIZE}
	feed_resume=() train_resume=(--config "$config")
	if [ -L "$save/latest" ]; then
		feed_resume=(--resume "$save/latest")
		train_resume=(--resume latest)
	fi
	train_resume+=(--set "micro_batch=${BATCH:-8}")
	# mpirun forwards SIGUSR1 to this shell: pass it on to loom-train (every
	# rank finishes the same step, rank 0 saves, all exit 0); the feeder
	# ignores it
	trap '' USR1
	loom-feed --manifest "$manifest" --batch "${BATCH:-8}" --seq "${SEQ:-1024}" \
		--seed "${SEED:-1}" --epochs "${EPOCHS:-1}" --rank "$r" --world "$w" -q \
		"${feed_resume[@]}" |
		loom-train "${train_resume[@]}" --save "$save" ${THREADS:+--threads "$THREADS"} "$@" &
	trainer=$!
	sig=0
	trap 'sig=1; kill -USR1 $trainer 2>/dev/null' USR1
	trap 'sig=1; kill -TERM $trainer 2>/dev/null' TERM INT
	while :; do
		s=0
		wait "$trainer" || s=$?
		[ "$s" -gt 128 ] && [ "$sig" = 1 ] && { sig=0; continue; } # a trap ran
		break
	done
	# killed by a signal: die of it too, so mpirun names this rank and signal
	if [ "$s" -gt 128 ]; then
		trap - "$((s - 128))"
		kill -s "$((s - 128))" $$
	fi
	exit "$s"
fi

np=() hostfile=()
while [ $# -gt 0 ]; do
	case $1 in
	-np|-n) np=(-np "$2"); shift 2 ;;
	--hostfile) hostfile=(--hostfile "$2"); shift 2 ;;
	-h|--help) usage ;;
	*) break ;;
	esac
done
[ $# -ge 3 ] || usage
command -v mpirun >/dev/null || { echo "$0: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
exec mpirun "${np[@]}" "${hostfile[@]}" --bind-to none ${MPIRUN_ARGS:-} \
	$(for v in BATCH SEQ SEED EPOCHS THREADS PATH; do [ -n "${!v:-}" ] && printf -- "-x %s " "$v"; done) \
	"$(cd "$(dirname "$0")" && pwd)/$(basename "$0")" --rank-main "$@"
