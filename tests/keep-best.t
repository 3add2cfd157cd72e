#!/usr/bin/env bash
# loom-train --keep-best METRIC: after each evaluation that improves on the
# best so far, the checkpoint as SAVE/best (-> best-NNNNNNNN, switched
# atomically), the metric, value and step in its state.json and in every
# later checkpoint's; a resumed run keeps the best so far (no worse one
# promoted); a metric the run does not report is refused (exit 2).  SQuAD
# with --eval-squad (eval/f1), and a GPT (eval/perplexity).  Every file is
# written here.
. "$(dirname "$0")/lib.sh"
cd "$T"
export OMP_NUM_THREADS=1
py() { /usr/bin/python3 -c "$@"; }
# LOG KEY SIGN: "step value" of each evaluation whose KEY beats every
# earlier one (SIGN 1: higher is better, -1: lower); promoted LOG: "step
# value" of each promotion the log records
improved() { py 'import json,sys
best, s = None, float(sys.argv[3])
for l in open(sys.argv[1]):
    j = json.loads(l)
    if sys.argv[2] in j and (best is None or s * j[sys.argv[2]] > s * best):
        best = j[sys.argv[2]]; print(j["step"], "%.9g" % best)' "$@"; }
promoted() { py 'import json,sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if "best_metric" in j: print(j["step"], "%.9g" % j["best_value"])' "$1"; }

make_squad sq.json vocab.txt
run loom-squad prepare -q --vocab vocab.txt --seq 32 --stride 16 sq.json -o sq/sq
is_rc 0 "loom-squad prepare: 40 features"
loom-feed -q --manifest sq/sq.manifest.json --batch 8 --seed 2 > eval.frames
set_ok="vocab_size=32,dropout=0,attn_dropout=0,lr=2e-3,warmup_proportion=0,decay=constant,doc_stride=16"
F="loom-feed -q --manifest sq/sq.manifest.json --batch 8 --seed 1 --epochs 0"
A="--eval-data eval.frames --eval-every 10 --eval-squad sq.json --save ck --keep-best eval/f1"

run sh -c "$F | loom-train -c bert-tiny --set $set_ok --steps 40 --vocab vocab.txt $A --save-every 10 --log log.jsonl"
is_rc 0 "--keep-best eval/f1 over 40 steps, an evaluation every 10"
# the promotions expected: each evaluation whose f1 beats every earlier one
want=$(improved log.jsonl eval_f1 1)
got=$(promoted log.jsonl)
is "$got" "$want" "  promoted exactly at the evaluations that improved f1 ($(echo $want | tr '\n' ' '))"
last=$(echo "$want" | tail -1 | cut -d' ' -f1)
ok "  a promotion after step 10 (what the resume below checks)" test "$last" -gt 10
is "$(grep -c '"best_metric":"eval/f1"' log.jsonl)" "$(echo "$want" | wc -l)" "  one log line each"
like "$err" "^loom-train: best step 10: eval/f1 [0-9.]+ \(the first\): saved ck/best -> best-00000010$" \
	"  the first promotion in one line"
like "$err" "^loom-train: best step $last: eval/f1 [0-9.]+ \(was [0-9.]+ at step [0-9]+\): saved ck/best -> best-$(printf %08d "$last")$" \
	"  the last one says what it replaced"
is "$(readlink ck/best)" "best-$(printf %08d "$last")" "ck/best -> best-$(printf %08d "$last") (relative)"
is "$(ls -d ck/best-* | wc -l)" 1 "  the earlier best directories removed"
is "$(readlink ck/latest)" step-00000040 "  latest still the last step"
is "$(py 'import json,sys; b=json.load(open(sys.argv[1]))["best"]; print(b["metric"], b["step"], "%.9g" % b["value"])' ck/best/state.json)" \
	"eval/f1 $(echo "$want" | tail -1)" "  its state.json: the metric, step and value"
is "$(py 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' ck/best/state.json)" "$last" \
	"  the checkpoint of that step"
is "$(py 'import json,sys; b=json.load(open(sys.argv[1]))["best"]; print(b["step"])' ck/step-00000040/state.json)" "$last" \
	"  a later step's state.json carries the best so far"
# every promotion fell on a --save-every step: the step's checkpoint is the
# best's files, linked, not the model written twice
L8=$(printf %08d "$last")
is "$(stat -c %i ck/step-$L8/model.safetensors ck/step-$L8/optimizer.safetensors ck/step-$L8/state.json)" \
	"$(stat -c %i ck/best-$L8/model.safetensors ck/best-$L8/optimizer.safetensors ck/best-$L8/state.json)" \
	"  step-$L8 and best-$L8 share their files (hard links)"
is "$(stat -c %h ck/step-00000010/model.safetensors)" 1 \
	"  step 10 (promoted, then replaced as best) keeps its files, one link each now"
em=$(py 'import json,sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if j.get("step") == int(sys.argv[2]) and "eval_exact_match" in j: print(j["eval_exact_match"])' log.jsonl "$last")
run loom-eval squad -q -c ck/best --data sq.json --predictions pb.json
is "$(py 'import json,sys; print(json.load(open(sys.argv[1]))["exact_match"])' "$out")" "$em" \
	"  loom-eval squad -c ck/best scores what the evaluation at step $last did ($em)"

# --resume keeps the best so far: from step 10, whose record is step 10's,
# SAVE/best (step $last) is better, so the same evaluations promote nothing
ino=$(stat -c %i ck/best/model.safetensors)
run sh -c "$F --resume ck/step-00000010 | loom-train --resume ck/step-00000010 $A --log log2.jsonl -v"
is_rc 0 "--resume ck/step-00000010 with --keep-best eval/f1"
like "$err" "^loom-train: --keep-best: the best so far is eval/f1 [0-9.]+ at step $last$" \
	"  -v: the best so far, SAVE/best's"
unlike "$err" "best step" "  no evaluation promoted (none beats it)"
is "$(readlink ck/best):$(stat -c %i ck/best/model.safetensors)" "best-$(printf %08d "$last"):$ino" \
	"  ck/best untouched"
# another metric: the run starts without a best
run sh -c "$F --resume ck/step-00000030 | loom-train -q --resume ck/step-00000030 ${A/eval\/f1/eval/loss} --log log3.jsonl"
is_rc 0 "--resume with --keep-best eval/loss"
like log3.jsonl '^\{"step":40,"best_metric":"eval/loss","best_value":[0-9.]+\}$' \
	"  its first evaluation promotes"
is "$(readlink ck/best)" best-00000040 "  ck/best -> best-00000040"
is "$(py 'import json,sys; print(json.load(open(sys.argv[1]))["best"]["metric"])' ck/best/state.json)" eval/loss \
	"  recorded as eval/loss"

# a metric the run does not report: one line, exit 2, nothing written
fails_with 2 "^loom-train: --keep-best eval/perplexity: task=squad reports no perplexity" \
	"eval/perplexity for task=squad" sh -c "$F | loom-train -c bert-tiny --set $set_ok --steps 2 --vocab vocab.txt ${A/eval\/f1/eval/perplexity} --save u1"
fails_with 2 "^loom-train: --keep-best eval/f1: the run reports it only with --eval-squad DEV.json$" \
	"eval/f1 without --eval-squad" loom-train -c bert-tiny --keep-best eval/f1 --eval-data eval.frames --eval-every 2 --save u2
fails_with 2 "^loom-train: --keep-best eval/bleu: not a metric \(one of: eval/loss eval/perplexity eval/accuracy eval/exact_match eval/f1\)$" \
	"an unknown metric" loom-train -c bert-tiny --keep-best eval/bleu --eval-data eval.frames --eval-every 2 --save u3
fails_with 2 "^loom-train: --keep-best needs --save DIR and --eval-every N" "without --save" \
	loom-train -c bert-tiny --keep-best eval/loss --eval-data eval.frames --eval-every 2
fails_with 2 "^loom-train: --keep-best needs --save DIR and --eval-every N" "without --eval-every" \
	loom-train -c bert-tiny --keep-best eval/loss --eval-data eval.frames --save u4
ok "  nothing written" test ! -e u1 -a ! -e u2 -a ! -e u3 -a ! -e u4

# a GPT by perplexity (lower is better); --keep prunes the steps, never best
make_frames 4 9 60 128 1 > frames
make_frames 4 9 2 128 7 > ev
run loom-train -c tiny --steps 20 --eval-every 5 --eval-data ev --keep-best eval/perplexity \
	--save g --save-every 5 --keep 1 --threads 1 --log g.jsonl < frames
is_rc 0 "a GPT: --keep-best eval/perplexity, --keep 1"
want=$(improved g.jsonl eval_ppl -1)
got=$(promoted g.jsonl)
is "$got" "$want" "  promoted at each lower perplexity"
is "$(ls g | tr '\n' ' ')" "best best-$(printf %08d "$(echo "$want" | tail -1 | cut -d' ' -f1)") latest step-00000020 " \
	"  one step kept, and the best"
run loom-eval -c g/best --threads 1 < ev
is "$(py 'import json,sys; print("%.9g" % json.load(open(sys.argv[1]))["perplexity"])' "$out")" \
	"$(echo "$want" | tail -1 | cut -d' ' -f2)" "  loom-eval -c g/best: the perplexity it was promoted with"

# under mpirun: rank 0 evaluates and decides, every rank takes part in the
# save (the optimizer's shards gathered; sharding=weights: every rank
# evaluates and writes its slices of SAVE/best)
if command -v mpirun >/dev/null 2>&1 && loom-train --version 2>/dev/null | grep -q 'Open MPI'; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	seq 0 2000 | awk '{ printf "%d ", ($1 * 7) % 128 }' > tok.txt
	run loom-shard -q -f text -L 9 --no-shuffle -n 2 -o d tok.txt
	for sh in optimizer weights; do
		run timeout 300 mpirun -np 2 sh -c "cd '$T'; loom-feed -q -m d.manifest.json --seq 8 --seed 1 \
		  --batch 4 --epochs 0 --rank \$OMPI_COMM_WORLD_RANK --world 2 | loom-train -q -c tiny \
		  --threads 1 --set sharding=$sh --steps 20 --eval-every 5 --eval-data ev \
		  --keep-best eval/loss --save m-$sh --log m-$sh.jsonl"
		is_rc 0 "2 ranks, sharding=$sh: --keep-best eval/loss"
		want=$(improved "m-$sh.jsonl" eval_loss -1)
		is "$(promoted "m-$sh.jsonl")" "$want" "  promoted at each lower loss"
		run loom-eval -c "m-$sh/best" --threads 1 < ev
		is "$(py 'import json,sys; print("%.9g" % json.load(open(sys.argv[1]))["loss"])' "$out")" \
			"$(echo "$want" | tail -1 | cut -d' ' -f2)" "  m-$sh/best: the model promoted"
		# the last step's save: the best's files when step 20 promoted
		run loom-eval -c "m-$sh/latest" --threads 1 < ev
		is "$(py 'import json,sys; print("%.9g" % json.load(open(sys.argv[1]))["loss"])' "$out")" \
			"$(py 'import json,sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if j.get("step") == 20 and "eval_loss" in j: print("%.9g" % j["eval_loss"])' "m-$sh.jsonl")" \
			"  m-$sh/latest: step 20's model$(test "$(echo "$want" | tail -1 | cut -d' ' -f1)" = 20 && echo ', linked from best')"
	done
else
	skip 8 "mpirun or an MPI build missing"
fi
done_testing
