#!/usr/bin/env bash
# loom-train on the tiny preset: training, determinism, exact resume after
# SIGKILL, SIGTERM save, checkpoints, eval, and every bad-input case.
. "$(dirname "$0")/lib.sh"

MK="/usr/bin/python3 $TESTS/mkframes.py"
F=$T/frames
FR=136                      # bytes per frame: 64 + 4 x 9 x 2
$MK 4 9 60 128 1 > "$F"
export OMP_NUM_THREADS=2


run loom-train -q -c tiny --steps 40 --log "$T/a.json" < "$F"
is_rc 0 "tiny preset trains on frames"
is "$(wc -l < "$T/a.json")" 40 "one JSON log line per step"
like "$T/a.json" '"tokens_per_s":' "log has tokens/s"
like "$T/a.json" '^\{"step":40,"loss":[0-9.]+,"lr":[0-9.e-]+,"grad_norm":[0-9.]+,"tokens":1280,' \
	"last line: step, loss, lr, grad_norm, tokens"
first=$(losses "$T/a.json" | sed -n 1p | cut -d' ' -f2)
last=$(losses "$T/a.json" | tail -1 | cut -d' ' -f2)
ok "loss falls ($first -> $last)" /usr/bin/python3 -c "import sys; sys.exit(not $last < $first - 0.5)"

run loom-train -q -c tiny --steps 40 --log "$T/b.json" < "$F"
is "$(losses "$T/b.json")" "$(losses "$T/a.json")" "same data + seed + threads: bit-identical losses"
run loom-train -q -c tiny --steps 40 --seed 7 --log "$T/c.json" < "$F"
ok "another seed gives another curve" test "$(losses "$T/c.json")" != "$(losses "$T/a.json")"
run loom-train -q -c tiny --steps 40 --recompute --log "$T/r.json" < "$F"
is "$(losses "$T/r.json")" "$(losses "$T/a.json")" "--recompute: identical losses"

# padded frames (loom-feed --pad): padded targets carry no loss, even with a
# pad id outside the vocabulary; eval counts only the real targets
mkdir -p "$T/pad"
seq 0 599 | awk '{ print $1 % 100 }' > "$T/pad/tokens.txt"
loom-shard -q -f text -L 6 --no-shuffle -o "$T/pad/p" "$T/pad/tokens.txt"
loom-feed -q -m "$T/pad/p.manifest.json" --batch 4 --seq 8 --seed 1 --pad 1000 > "$T/pad/frames"
run loom-train -q -c tiny --steps 20 --save "$T/pad/ck" --log "$T/pad/log" < "$T/pad/frames"
is_rc 0 "trains on frames padded with an id outside the vocabulary"
like "$T/pad/log" '"step":20,"loss":[0-9.]+' "with finite losses"
run loom-eval --checkpoint "$T/pad/ck" < "$T/pad/frames"
like "$out" '"tokens":480,' "eval counts 5 real targets per 6-token record (99 records: 24 frames of 4)"

run loom-train -c tiny --steps 10 --log-every 5 < "$F"
like "$err" '^loom-train: step 5/10 loss [0-9.]+ lr' "human progress line every --log-every steps"
like "$err" 'done: 10 steps' "summary line"
run loom-train -v -c tiny --steps 2 < "$F"
is_rc 0 "train -v"
like "$err" "^loom-train: OpenBLAS (detected )?core '[A-Za-z0-9]+'" "-v names the OpenBLAS core"
like "$err" "threads, (AVX-512|AVX2|baseline) kernels, B=4 T=8" "-v names the kernels' instruction set"

# --- checkpoints -------------------------------------------------------------
run loom-train -q -c tiny --steps 12 --save "$T/ck" --save-every 4 --keep 2 < "$F"
is_rc 0 "train with --save --save-every --keep"
is "$(cd "$T/ck" && ls | tr '\n' ' ')" "latest step-00000008 step-00000012 " "--keep 2 prunes old checkpoints"
is "$(readlink "$T/ck/latest")" "step-00000012" "latest points to the final step"
for f in model.safetensors optimizer.safetensors config.json state.json; do
	ok "checkpoint has $f" test -s "$T/ck/latest/$f"
done
like "$T/ck/latest/config.json" '"model_type": "gpt2"' "config.json has HF keys"
like "$T/ck/latest/config.json" '"seq_len": 8' "config.json carries loom's config"
no_tmp_left "$T/ck" "no temporary checkpoint debris"

# --- exact resume after SIGKILL ----------------------------------------------
run loom-train -q -c tiny --steps 40 --log "$T/full.json" < "$F"
mkfifo "$T/fifo"
( head -c $((FR * 23)) "$F"; exec sleep 60 ) > "$T/fifo" &
feeder=$!
loom-train -q -c tiny --steps 40 --save "$T/kill" --save-every 5 --log "$T/k1.json" < "$T/fifo" 2>/dev/null &
trainer=$!
for _ in $(seq 1 400); do [ "$(wc -l 2>/dev/null < "$T/k1.json")" = 23 ] && [ "$(readlink "$T/kill/latest")" = step-00000020 ] && break; sleep 0.05; done
kill -9 $trainer; wait $trainer 2>/dev/null
kill $feeder 2>/dev/null; wait $feeder 2>/dev/null
is "$(readlink "$T/kill/latest")" "step-00000020" "killed with SIGKILL after step 20's checkpoint"
is "$(wc -l < "$T/k1.json")" 23 "the killed run logged past its checkpoint (steps 21..23)"
run loom-train -q --resume latest --save "$T/kill" --log "$T/k1.json" < "$F"
is_rc 0 "--resume latest"
is "$(losses "$T/k1.json")" "$(losses "$T/full.json")" \
	"resumed run: same loss, lr and grad norm at steps 21..40 as the uninterrupted run; log lines past the checkpoint replaced"

# --- SIGTERM: finish the step, save, exit 0 ---------------------------------
( head -c $((FR * 7)) "$F"; exec sleep 60 ) > "$T/fifo" &
feeder=$!
loom-train -q -c tiny --steps 40 --save "$T/term" --log "$T/t.json" < "$T/fifo" 2>"$T/term.err" &
trainer=$!
for _ in $(seq 1 200); do [ "$(wc -l 2>/dev/null < "$T/t.json")" = 7 ] && break; sleep 0.05; done
kill -TERM $trainer
rc=0; wait $trainer || rc=$?
kill $feeder 2>/dev/null; wait $feeder 2>/dev/null
is_rc 0 "SIGTERM: exit 0"
is "$(readlink "$T/term/latest")" "step-00000007" "SIGTERM: saved the last finished step"
run loom-train -q -c tiny --steps 40 --init-from "$T/term" --steps 8 < "$F"
is_rc 0 "--init-from a checkpoint (weights only)"

# --- eval -------------------------------------------------------------------
$MK 4 9 3 128 99 > "$T/eval"
run loom-train -c tiny --steps 10 --eval-every 5 --eval-data "$T/eval" --log "$T/e.json" < "$F"
is_rc 0 "--eval-every with --eval-data"
like "$err" 'eval step 10: loss [0-9.]+ ppl [0-9.]+ acc' "eval line on stderr"
like "$T/e.json" '"eval_loss":' "eval line in the log"

# --- bad input ----------------------------------------------------------------
$MK 4 9 6 128 1 --corrupt magic@3 > "$T/bad"
run loom-train -q -c tiny --steps 10 < "$T/bad"
is_rc 1 "bad magic: exit 1"
like "$err" '^loom-train: stdin: frame 3 .*magic' "bad magic names the frame"
is "$(wc -l < "$err")" 1 "one line"
$MK 4 9 6 128 1 --corrupt crc@2 > "$T/bad"
run loom-train -q -c tiny --steps 10 < "$T/bad"
is_rc 1 "bad payload checksum: exit 1"
like "$err" 'frame 2 .*checksum' "checksum error names the frame"
$MK 4 9 6 128 1 --corrupt shape@4 > "$T/bad"
run loom-train -q -c tiny --steps 10 < "$T/bad"
is_rc 1 "frame of another shape: exit 1"
like "$err" 'frame 4 .*shape' "shape error names the frame"
head -c $((FR * 3 + 50)) "$F" > "$T/bad"
run loom-train -q -c tiny --steps 10 < "$T/bad"
is_rc 1 "truncated stream: exit 1"
like "$err" 'frame 3' "truncation names the frame"
run loom-train -q -c tiny --steps 10 < /dev/null
is_rc 1 "empty input: exit 1"
run loom-train -q -c tiny --set n_positions=16,seq_len=16 --steps 10 < "$F"
is_rc 1 "seq_len larger than the records: exit 1"
like "$err" '^loom-train: stdin: frame 0: seq_len: 16 needs records of 17 tokens, the batches have 9$' \
	"seq_len rule named"
run loom-train -q -c tiny --set micro_batch=8 --steps 10 < "$F"
is_rc 1 "micro_batch differs from the frames: exit 1"
like "$err" 'micro_batch: 8, but the batches have 4 records' "micro_batch rule named"
$MK 4 9 6 300 1 > "$T/bad"
run loom-train -q -c tiny --steps 10 < "$T/bad"
is_rc 1 "token id >= vocab_size: exit 1"
like "$err" 'outside the vocabulary' "vocabulary error"
run loom-train -q --resume "$T/nope" < "$F"
is_rc 1 "resume from a missing checkpoint: exit 1"
run loom-train -q --frobnicate
is_rc 2 "unknown option: exit 2"
run loom-train --help
is_rc 0 "--help exits 0"
like "$out" '^usage: loom-train' "--help on stdout"
done_testing
