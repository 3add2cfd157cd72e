#!/usr/bin/env bash
# pipelines/train-mpi.sh under a real Slurm: a one-node cluster on this
# machine (munged, slurmctld and slurmd of Debian's slurm-wlm, their key,
# configuration, state and logs in the test's directory), the 2-rank
# training through `srun --mpi=pmix` and through the batch script of
# train-mpi.sh -h (the one loom-train(1) SEVERAL MACHINES shows) under
# `sbatch`: the same losses, step for step, as `mpirun -np 2`, and the
# same checkpoint.  `scancel --signal=USR1` stops a job cleanly (rank 0
# saves, exit 0), one task too (Slurm signals every process of the step:
# loom-train must not get the USR1 twice); srun without PMI is refused in
# one line.
#
# Slurm's daemons run as root and bind 127.0.0.1 (NoInAddrAny: the address
# the host name resolves to) on free ports; the EXIT trap stops them.  Where
# it can, the test runs in namespaces of its own (unshare): a network of
# the loopback only, so nothing is reachable from outside (it holds a
# documentation address, 192.0.2.1, for getaddrinfo's AI_ADDRCONFIG to
# resolve host names at all), and pids, so that nothing outlives the test
# even when it is killed.  Skipped, with the reason, without Slurm, munge,
# root, PMIx or when the cluster does not come up.
if [ -z "${SLURM_T_UNSHARED:-}" ] && [ "$(id -u)" = 0 ] &&
	command -v unshare >/dev/null && command -v ip >/dev/null &&
	unshare --net --pid --fork --mount-proc true 2>/dev/null; then
	SLURM_T_UNSHARED=1 unshare --net --pid --fork --mount-proc --kill-child=SIGTERM \
		bash -c 'ip link set lo up && ip addr add 192.0.2.1/32 dev lo &&
			exec bash "$0" "$@"' "$0" "$@" &
	ns=$!
	# unshare ignores TERM and INT itself; the test (pid 1 in there) takes them
	trap 'kill -TERM $(cat "/proc/$ns/task/$ns/children" 2>/dev/null) 2>/dev/null' HUP INT TERM
	while :; do
		s=0
		wait "$ns" || s=$?
		kill -0 "$ns" 2>/dev/null || exit "$s"
	done
fi
unshared=${SLURM_T_UNSHARED:-}
. "$(dirname "$0")/lib.sh"

for c in munged mungekey slurmctld slurmd srun sbatch scontrol sinfo; do
	command -v "$c" >/dev/null 2>&1 ||
		skip_all "$c not installed (make deps installs slurm-wlm and munge)"
done
[ "$(id -u)" = 0 ] || skip_all "slurmd runs as root only"
# a caller inside a Slurm job or an MPI launcher: not this cluster's
for _v in $(compgen -e); do
	case $_v in SLURM_* | PMI_* | PMIX_* | OMPI_*) unset "$_v" ;; esac
done

# --- a one-node cluster in $T/slurm --------------------------------------------
D=$T/slurm
mkdir -p "$D/munge" "$D/state" "$D/spool" "$D/tmp"
chmod 700 "$D/munge"
pids=() # pid_token of each daemon
stop_cluster() { # TERM each daemon, KILL what is still there after ~10 s
	local p i
	[ "${#pids[@]}" -gt 0 ] || return 0
	# the jobs first: a slurmstepd ends with its step
	scancel --full --user=root 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		[ -z "$(squeue -h 2>/dev/null)" ] && break
		sleep 0.1
	done
	for p in "${pids[@]}"; do signal_ours TERM "$p"; done
	for p in "${pids[@]}"; do
		for ((i = 0; i < 100; i++)); do
			still_ours "$p" || break
			sleep 0.1
		done
		signal_ours KILL "$p"
		wait "${p%% *}" 2>/dev/null
	done
	pids=()
}
trap 'stop_cluster; rm -rf "$T"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
# a daemon's log, quoted, for a failure's diagnostics
quote_log() { tail -n 15 "$1" 2>/dev/null | _quoted "# $(basename "$1"): "; }

mungekey -c -k "$D/munge/key" 2>"$D/mungekey.err" ||
	skip_all "mungekey cannot create a key: $(head -1 "$D/mungekey.err")"
munged -F --force --key-file="$D/munge/key" --socket="$D/munge/socket" \
	--pid-file="$D/munge/pid" --log-file="$D/munge/log" --seed-file="$D/munge/seed" \
	>"$D/munged.out" 2>&1 &
pids+=("$(pid_token $!)")

# two free ports on 127.0.0.1 (any two in a network namespace of our own)
read -r ctld_port slurmd_port < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s:
    x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
export SLURM_CONF=$D/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=loomtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
AuthType=auth/munge
AuthInfo=socket=$D/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
TmpFS=$D/tmp
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
SelectType=select/linear
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=loom Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
# munged answers before slurmctld asks it for a credential
for ((i = 0; i < 600; i++)); do
	[ -S "$D/munge/socket" ] && break
	still_ours "${pids[0]}" || break
	sleep 0.1
done
[ -S "$D/munge/socket" ] || { quote_log "$D/munged.out"; skip_all "munged did not start"; }
slurmctld -D -i -f "$SLURM_CONF" >"$D/slurmctld.out" 2>&1 &
pids+=("$(pid_token $!)")
slurmd -D -N localhost -f "$SLURM_CONF" >"$D/slurmd.out" 2>&1 &
pids+=("$(pid_token $!)")
# up when the node is idle; a daemon that exits ends the wait (bounded: a
# minute and more on a busy core)
up=0
for ((i = 0; i < 600; i++)); do
	if [ "$(sinfo -h -o %T 2>/dev/null)" = idle ]; then up=1; break; fi
	for p in "${pids[@]}"; do still_ours "$p" || break 2; done
	sleep 0.1
done
if [ "$up" != 1 ]; then
	quote_log "$D/slurmctld.log"
	quote_log "$D/slurmd.log"
	quote_log "$D/slurmd.out"
	skip_all "the one-node Slurm cluster did not come up (logs above)"
fi
srun --mpi=list >"$D/mpi.list" 2>&1
grep -qw pmix "$D/mpi.list" || skip_all "this Slurm has no PMIx plugin (srun --mpi=list: $(tr '\n' ' ' <"$D/mpi.list"))"

. "$(dirname "$0")/dist-lib.sh"
WRAP="$TESTS/../pipelines/train-mpi.sh"
# what each rank runs: the environment of tests/train-mpi.t, and a
# session directory of Open MPI and PMIx's own in $T
export BATCH=4 SEQ=8 EPOCHS=0 THREADS=1 TMPDIR=$D/tmp
ARGS=(--steps 30 --set decay=constant --log-every 10)
if [ -n "$unshared" ]; then
	diag "in namespaces of its own (network: loopback only)"
	# mpirun's out-of-band channel takes no loopback interface unless told
	export OMPI_MCA_oob_tcp_if_include=lo
fi

# --- the reference: mpirun -np 2 --------------------------------------------
(cd "$T" && timeout 300 mpirun -np 2 "$WRAP" "$M" tiny m "${ARGS[@]}" --log m.json >m.out 2>m.err)
is "$?" 0 "mpirun -np 2 train-mpi.sh: 30 steps"
is "$(losses "$T/m.json" | wc -l)" 30 "  30 losses"

# --- srun --mpi=pmix -----------------------------------------------------------
run timeout 300 srun --mpi=pmix --kill-on-bad-exit=1 -N 1 -n 2 --chdir="$T" \
	"$WRAP" "$M" tiny s "${ARGS[@]}" --log s.json
is_rc 0 "srun --mpi=pmix -n 2 train-mpi.sh: 30 steps"
like "$err" '^loom-train: rank 0: data parallel: 2 ranks ' "  loom-train joined the 2 ranks"
is "$(losses "$T/s.json")" "$(losses "$T/m.json")" "  the losses of mpirun -np 2, step for step"
same_file "$T/s/latest/model.safetensors" "$T/m/latest/model.safetensors" "  and the same model"

# --- sbatch: the batch script of train-mpi.sh -h (loom-train(1)) ---------------
"$WRAP" -h | sed -n '/^  #!\/bin\/bash$/,/^  srun /s/^  //p' >"$T/help.sbatch"
# the man page shows the same script (its srun line continued with \e)
sed -n '/^#!\/bin\/bash$/,/ckpt$/p' "$SHARE/man/man1/loom-train.1" |
	sed -e ':a' -e '/\\e$/{N;s/ \\e\n */ /;ba' -e '}' >"$T/man.sbatch"
same_file "$T/man.sbatch" "$T/help.sbatch" "train-mpi.sh -h and loom-train(1) show the same batch script"
# on this cluster: one node of 2 CPUs, the test's sizes, data and checkpoint
sed -e 's/^#SBATCH --nodes=2 --ntasks-per-node=2 --cpus-per-task=16$/#SBATCH --nodes=1 --ntasks-per-node=2 --cpus-per-task=1/' \
	-e 's/^export BATCH=8 SEQ=1024 /export BATCH=4 SEQ=8 EPOCHS=0 /' \
	-e "s|pipelines/train-mpi\\.sh data/wiki\\.manifest\\.json gpt2 ckpt\$|$WRAP $M tiny b ${ARGS[*]} --log b.json|" \
	"$T/help.sbatch" >"$T/train.sbatch"
is "$(diff "$T/help.sbatch" "$T/train.sbatch" | grep -c '^>')" 3 "  adapted in its three lines"
like "$T/train.sbatch" '^srun --mpi=pmix --kill-on-bad-exit=1 ' "  srun with PMIx, as shipped"
unset BATCH SEQ EPOCHS THREADS # the script sets them
run timeout 300 sbatch --wait --chdir="$T" --output="$T/b.out" --error="$T/b.err" "$T/train.sbatch"
is_rc 0 "sbatch --wait train.sbatch: the job ends well"
like "$out" '^Submitted batch job [0-9]+$' "  submitted"
like "$T/b.err" '^loom-train: rank 0: data parallel: 2 ranks ' "  loom-train joined the 2 ranks"
is "$(losses "$T/b.json")" "$(losses "$T/m.json")" "  the losses of mpirun -np 2, step for step"
same_file "$T/b/latest/model.safetensors" "$T/m/latest/model.safetensors" "  and the same model"
export BATCH=4 SEQ=8 EPOCHS=0 THREADS=1

# --- scancel --signal=USR1: every rank stops at the same step, rank 0 saves -----
# usr1_job SCRIPT NAME: submit SCRIPT (output NAME.err), signal it once
# NAME.json holds 3 steps, wait for its end (bounded waits); sets $rc
# (scancel's) and leaves `scontrol show job` in NAME.job
usr1_job() {
	local job i
	job=$(sbatch --parsable --chdir="$T" --output="$T/$2.out" --error="$T/$2.err" "$1")
	for ((i = 0; i < 1200; i++)); do
		[ -s "$T/$2.json" ] && [ "$(wc -l <"$T/$2.json")" -ge 3 ] && break
		sleep 0.1
	done
	run scancel --signal=USR1 "$job"
	for ((i = 0; i < 1200; i++)); do
		[ -z "$(squeue -h -j "$job" 2>/dev/null)" ] && break
		sleep 0.1
	done
	scontrol show job "$job" >"$T/$2.job"
}
sed -e "s| b --steps 30 | u --steps 1000000 |" -e 's|--log b\.json$|--log u.json|' \
	"$T/train.sbatch" >"$T/endless.sbatch"
usr1_job "$T/endless.sbatch" u
is_rc 0 "scancel --signal=USR1 on a running job"
like "$T/u.job" ' JobState=COMPLETED ' "  the job completes"
like "$T/u.job" ' ExitCode=0:0$' "  exit 0"
step=$(readlink "$T/u/latest")
last=$(losses "$T/u.json" | awk 'END { printf "step-%08d", $1 }')
is "$step" "$last" "  rank 0 saved the last step"
like "$T/u.err" '^loom-train: rank 0: User defined signal 1: stopping after step [0-9]+ \(sent by pid [0-9]+, slurmstepd, to rank [01]\)$' \
	"  and said so, naming who sent it"

# one task: Slurm signals every process of the step, so loom-train gets the
# USR1 from Slurm and must not get a second one from the script
sed -e 's/--ntasks-per-node=2/--ntasks-per-node=1/' -e "s| u --steps | o --steps |" \
	-e 's|--log u\.json$|--log o.json|' "$T/endless.sbatch" >"$T/one.sbatch"
usr1_job "$T/one.sbatch" o
like "$T/o.job" ' ExitCode=0:0$' "scancel --signal=USR1, one task: exit 0"
like "$T/o.err" '^loom-train: User defined signal 1: stopping after step [0-9]+ \(sent by pid [0-9]+, slurmstepd\)$' "  a clean stop"

# --- srun without PMI: one line, not ranks that cannot meet ------------------
run timeout 300 srun --mpi=none -N 1 -n 2 --chdir="$T" "$WRAP" "$M" tiny x "${ARGS[@]}"
is_rc 2 "srun --mpi=none: exit 2"
like "$err" 'train-mpi\.sh: started by srun without PMI, so loom-train cannot join the other ranks: srun --mpi=pmix' \
	"  the reason"
ok "  nothing trained" test ! -e "$T/x"

# --- nothing left running -------------------------------------------------------
daemons=("${pids[@]}")
stop_cluster
left=
for p in "${daemons[@]}"; do still_ours "$p" && left="$left ${p%% *}"; done
is "$left" "" "the daemons stopped"
if [ -n "$unshared" ]; then # (outside, another Slurm's are not ours)
	is "$(ps -C slurmstepd -o stat= | grep -vc '^Z')" 0 "  and no slurmstepd is left"
else
	skip 1 "not in a pid namespace of its own"
fi
done_testing
