#!/usr/bin/env bash
# Data-parallel loom-train under mpirun (2 ranks on this machine): the same
# loss curve as one process with the same global batch, checkpoints that
# move between 1 and 2 ranks, per-rank start-up report, and faults (a
# feeder closing early, a killed rank, a wrong --rank) that stop every rank
# with one error naming the rank and leave `latest` valid.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dist-lib.sh"

# --- same global batch, same seed: the same curve ----------------------------
run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8 --steps 20 --log $T/one.json"
is_rc 0 "1 rank x micro-batch 8"
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN --set micro_batch=4 --steps 20 --log-every 10 --log two.json"
is_rc 0 "2 ranks x micro-batch 4 under mpirun"
is "$(wc -l < "$T/two.json")" 20 "rank 0 writes the log, one line per step"
d=$(maxrel "$T/two.json" "$T/one.json" 1 20)
ok "2 x 4 vs 1 x 8: losses within 1e-5 relative over 20 steps (max $d)" small "$d"
like "$T/two.json" '"step":20,.*"tokens":1280,' "tokens count all ranks"
like "$err" '^loom-train: rank 0: data parallel: 2 ranks \(Open MPI [^)]*\); AdamW state per rank [0-9.]+ kB \(1/2 of [0-9.]+ kB\)' \
	"start-up: world size and optimizer memory per rank"
like "$err" 'rank 0: step 20/20 loss' "rank 0 logs progress"
unlike "$err" 'rank 1: step' "other ranks stay quiet"
like "$err" 'sent per step per rank \(ring all-reduce lower bound .*; 1\.0[0-9]*x\)' \
	"bytes per step reported against the ring lower bound"
run sh -c "$FEED --batch 4 --epochs 0 | $TRAIN -q --set micro_batch=4,grad_accum=2 --steps 20 --log $T/acc.json"
d=$(maxrel "$T/two.json" "$T/acc.json" 1 20)
ok "2 x 4 vs 1 x 4 x accumulation 2: within 1e-5 (max $d)" small "$d"

# --- loss_weighting=inverse_count: each micro-batch's objective is
# normalised by its own counted targets, and ranks and accumulation average
# them, so the split of the global batch still does not matter -----------
/usr/bin/python3 -c '
import random
r = random.Random(2); out = []
for i in range(400):
    x = r.randrange(128)
    for j in range(9):
        out.append(x); x = (3 * x + 1) % 128 if r.random() < 0.5 else r.randrange(6)
print(" ".join(map(str, out)))' > "$T/rep.txt"
run loom-shard -q -f text -L 9 --no-shuffle -n 2 -o "$T/rep" "$T/rep.txt"
RFEED="loom-feed -q -m $T/rep.manifest.json --seq 8 --seed 1"
WTRAIN="$TRAIN --set loss_weighting=inverse_count -q --steps 20"
run sh -c "$RFEED --batch 8 --epochs 0 | $WTRAIN --set micro_batch=8 --log $T/w1.json"
is_rc 0 "weighted: 1 rank x micro-batch 8 (records with repeated tokens)"
np 2 "$RFEED --batch 4 --epochs 0 --rank \$R --world \$W | $WTRAIN --set micro_batch=4 --log w2.json"
is_rc 0 "weighted: 2 ranks x micro-batch 4"
run sh -c "$RFEED --batch 4 --epochs 0 | $WTRAIN --set micro_batch=4,grad_accum=2 --log $T/wa.json"
d=$(maxrel "$T/w2.json" "$T/w1.json" 1 20)
ok "weighted: 2 x 4 vs 1 x 8 within 1e-5 (max $d)" small "$d"
d=$(maxrel "$T/wa.json" "$T/w1.json" 1 20)
ok "weighted: 1 x 4 x accumulation 2 vs 1 x 8 within 1e-5 (max $d)" small "$d"
run sh -c "$RFEED --batch 8 --epochs 0 | $TRAIN -q --steps 20 --set micro_batch=8 --log $T/wn.json"
ok "weighted and unweighted curves differ" test "$(losses "$T/w1.json")" != "$(losses "$T/wn.json")"

# --- checkpoints move between rank counts: 1 -> 2 -> 1 -----------------------
run sh -c "$FEED --batch 8 --epochs 0 | $TRAIN -q --set micro_batch=8 --steps 6 --save $T/ck --log $T/r1.json"
is_rc 0 "1 rank: steps 1-6, checkpoint"
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W --resume ck/latest | loom-train -q --threads 1 --resume ck --save ck --set micro_batch=4 --steps 13 --log r2.json"
is_rc 0 "2 ranks resume it: steps 7-13, checkpoint"
is "$(readlink "$T/ck/latest")" step-00000013 "rank 0 wrote step 13"
ok "the 2-rank checkpoint is complete" test -s "$T/ck/latest/optimizer.safetensors" -a -s "$T/ck/latest/state.json"
like "$T/ck/latest/state.json" '"samples": *104' "state counts samples of all ranks"
run sh -c "$FEED --batch 8 --epochs 0 --resume $T/ck/latest | loom-train -q --threads 1 --resume $T/ck --save $T/ck --set micro_batch=8 --steps 20 --log $T/r3.json"
is_rc 0 "1 rank resumes the 2-rank checkpoint: steps 14-20"
cat "$T/r1.json" "$T/r2.json" "$T/r3.json" > "$T/r.json"
d=$(maxrel "$T/r.json" "$T/one.json" 1 20)
ok "1 -> 2 -> 1 ranks: the uninterrupted curve within 1e-5 (max $d)" small "$d"
run sh -c "$FEED --batch 4 --epochs 0 | loom-train -q --threads 1 --resume $T/ck --set micro_batch=4 --steps 21"
is_rc 2 "resume with another global batch is refused"
like "$err" 'global_batch: 8 != micro_batch \(4\) x grad_accum \(1\) x data_parallel \(1\)' "and says why"
no_tmp_left "$T/ck" "no temporary checkpoint debris"
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | loom-train -q --threads 1 --resume ck/\$(printf step-%08d \$((6 + 7 * (1 - R)))) --set micro_batch=4 --steps 30"
failed "ranks resumed from different checkpoints are refused (exit $rc)"
like "$err" '^loom-train: ranks disagree on the step: rank 0 is at step 14, rank 1 at step 7' "naming the ranks and steps"

# --- bf16 on 2 ranks: a resumed run repeats the uninterrupted one exactly --
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
	B16="--set micro_batch=4,precision=bf16"
	np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q $B16 --steps 12 --log bf.json"
	is_rc 0 "bf16, 2 ranks: 12 steps"
	np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q $B16 --steps 6 --save bk --log bh.json"
	is_rc 0 "bf16, 2 ranks: steps 1-6, checkpoint"
	like "$T/bk/latest/config.json" '"precision": *"bf16"' "the checkpoint records precision=bf16"
	np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W --resume bk/latest | loom-train -q --threads 1 --resume bk --set micro_batch=4 --steps 12 --log bh.json"
	is_rc 0 "bf16, 2 ranks: resumed, steps 7-12"
	is "$(sed -E 's/,"tokens_per_s".*//' "$T/bh.json")" "$(sed -E 's/,"tokens_per_s".*//' "$T/bf.json")" \
		"resumed bf16 losses, lr and norms identical to the uninterrupted run's"
else
	skip 5 "this CPU has no bf16 matmul (avx512_bf16, amx_bf16)"
fi

# --- every input ends together: a normal end --------------------------------
np 2 "$FEED --batch 4 --epochs 1 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4 --steps 1000 --allow-short --save e"
is_rc 0 "all feeders end at the same step (--allow-short): exit 0"
is "$(readlink "$T/e/latest")" step-00000049 "checkpoint at the last full step (49 global batches of 8 per epoch)"

# stop_saved ERR DIR NAME: the step of ERR's "stopping after step N" line
# (into $step) is DIR/latest
stop_saved() {
	step=$(sed -nE 's/.*stopping after step ([0-9]+).*/\1/p' "$1")
	is "$(readlink "$2/latest")" "$(printf 'step-%08d' "${step:-0}")" "$3"
}

# --- SIGUSR1 to mpirun (pipelines/train-mpi.sh passes it on): clean stop ---
WRAP="$TESTS/../pipelines/train-mpi.sh"
(cd "$T" && BATCH=4 SEQ=8 EPOCHS=0 THREADS=1 exec "$WRAP" -np 2 "$M" tiny u --steps 100000 --log-every 5 >"$T/u.out" 2>"$T/u.err") &
mp=$! mp_t=$(pid_token $!)
# signal once step 5 is done (the handlers are set before step 1)
for _ in $(seq 1 600); do grep -q 'step 5/' "$T/u.err" 2>/dev/null && break; sleep 0.1; done
signal_ours USR1 "$mp_t" "mpirun's train-mpi.sh"
rc=0; wait $mp || rc=$?
is "$rc" 0 "SIGUSR1 to mpirun: every rank stops after the same step, exit 0"
like "$T/u.err" '^loom-train: rank 0: User defined signal 1: stopping after step [0-9]+ \(sent by pid [0-9]+, mpirun, to rank [01]\)$' \
	"rank 0 says so, naming mpirun, which passed it on"
stop_saved "$T/u.err" "$T/u" "checkpoint of that step"
(cd "$T" && BATCH=8 SEQ=8 EPOCHS=0 THREADS=1 timeout 300 "$WRAP" -np 1 "$M" tiny u --steps $((step + 3)) -q >"$T/u.out" 2>"$T/u.err")
is "$?" 0 "the wrapper resumes it on 1 rank (micro-batch 8)"
is "$(readlink "$T/u/latest")" "$(printf 'step-%08d' $((step + 3)))" "and saves 3 steps later"

# --- a TERM to one rank (as from a stray kill): every rank stops after the
# same step and exits 0, and rank 0's line names the rank and the sender,
# so that a job stopped this way says by whom --------------------------------
mkdir -p "$T/s"
{ np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN --set micro_batch=4 --steps 100000 --log-every 5 --save s & p=\$!; cat /proc/\$p/stat > s/pid.\$R; wait \$p"; exit $rc; } &
mp=$!
for _ in $(seq 1 600); do [ -s "$T/s/pid.1" ] && grep -q 'step 5/' "$err" 2>/dev/null && break; sleep 0.1; done
signal_ours TERM "$(pid_token "$T/s/pid.1")" "rank 1's loom-train"
rc=0; wait $mp || rc=$?
is "$rc" 0 "a TERM to rank 1 alone: every rank stops after the same step, exit 0"
like "$err" "^loom-train: rank 0: Terminated: stopping after step [0-9]+ \\(sent by pid $$, bash, to rank 1\\)\$" \
	"  rank 0's line names the rank it reached and the process that sent it"
stop_saved "$err" "$T/s" "  and that step is saved"

# --- every input ends inside the first step: an error, nothing saved ---------
np 2 "$FEED --batch 4 --epochs 1 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4,grad_accum=100 --steps 5 --save n"
is_rc 1 "every input ends inside step 1: exit 1"
is "$(grep -c '^loom-train' "$err")" 1 "  one line, from rank 0 (and mpirun's report)"
like "$err" '^loom-train: stdin: input ended after 49 micro-batches, but a step needs 100 \(grad_accum\): no step trained, nothing saved' \
	"  the micro-batches that came and those a step needs"
ok "  no checkpoint" test ! -e "$T/n"

# --- faults -----------------------------------------------------------------
# (not -q: should this job ever end by a stop signal, exit 0 after a clean
# stop, 'failed' shows rank 0's "stopping after step N" line; it failed
# once with exit 0 or 124 and, then, no stderr to tell which: issue 28)
np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | { if [ \$R = 1 ]; then head -c 3000; else cat; fi; } | $TRAIN --set micro_batch=4 --steps 100 --save f --save-every 5"
failed "a feeder that closes its pipe mid-frame stops every rank (exit $rc)"
like "$err" '^loom-train: rank 1: stdin: frame 22 at byte 2992: stream ends inside the frame header' \
	"the rank says what broke"
like "$err" '^loom-train: stopping all 2 ranks at step 23: rank 1 failed' "rank 0: one line naming the rank"
is "$(readlink "$T/f/latest")" step-00000020 "latest stays at the last complete checkpoint"
ok "and it is complete" test -s "$T/f/latest/model.safetensors" -a -s "$T/f/latest/state.json"
no_tmp_left "$T/f" "no half-written checkpoint"

np 2 "$FEED --batch 4 --rank \$R --world \$W --epochs \$((R + 1)) | $TRAIN -q --set micro_batch=4 --steps 1000"
is_rc 1 "a feeder that ends early (END frame) while others have data: exit 1"
like "$err" 'stopping all 2 ranks at step 50: the input of rank 0 ended early' "names the rank"

mkdir -p "$T/k"
{ np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4 --steps 100000 --save k --save-every 10 & p=\$!; cat /proc/\$p/stat > k/pid.\$R; wait \$p; s=\$?; [ \$s -gt 128 ] && kill -\$((s - 128)) \$\$; exit \$s"; exit $rc; } &
mp=$!
for _ in $(seq 1 200); do [ -L "$T/k/latest" ] && [ -s "$T/k/pid.1" ] && break; sleep 0.1; done
signal_ours KILL "$(pid_token "$T/k/pid.1")" "rank 1's loom-train"
rc=0; wait $mp || rc=$?
failed "a killed rank stops every rank (exit $rc, not the hang guard's 124)"
# rank 0 may still be on its way out when mpirun returns (a loaded machine):
# it must end by itself within a generous bound, not be left running (its
# pid, once it ended, may be another process's: pid_token)
r0=$(pid_token "$T/k/pid.0")
for _ in $(seq 1 600); do still_ours "$r0" || break; sleep 0.1; done
ok "no rank left running (rank 0 ended or is a zombie)" eval '! still_ours "$r0"'
like "$err" 'rank 1 .*exited on signal 9' "mpirun names the killed rank"
ok "latest still points at a complete checkpoint" test -s "$T/k/latest/model.safetensors" -a -s "$T/k/latest/optimizer.safetensors"

np 2 "$FEED --batch 4 --epochs 0 --rank 0 --world \$W | $TRAIN -q --set micro_batch=4 --steps 5"
failed "frames for the wrong rank are refused (exit $rc)"
like "$err" 'rank 1: stdin: frames from loom-feed --rank 0 --world 2, but this is rank 1 of 2' \
	"and the message names both"

np 2 "$FEED --batch 4 --epochs 0 --rank \$R --world \$W | $TRAIN -q --set micro_batch=4,data_parallel=3 --steps 5"
failed "--set data_parallel disagreeing with mpirun -np is refused"
like "$err" 'data_parallel: 3, but loom-train runs as 2 ranks' "naming both numbers"

done_testing
