#!/usr/bin/env bash
# loom-train on the tiny preset: training, determinism, exact resume after
# SIGKILL, SIGTERM save, checkpoints, eval, and every bad-input case.
. "$(dirname "$0")/lib.sh"

F=$T/frames
FR=136                      # bytes per frame: 64 + 4 x 9 x 2
make_frames 4 9 60 128 1 > "$F"
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
unlike "$err" 'input ended' "  no word of the input ending when the steps were all done"
make_frames 4 9 7 128 1 > "$T/short"
run loom-train -c tiny --steps 10 --log-every 100 --save "$T/short-ck" < "$T/short"
is_rc 1 "input that ends before --steps, at a step's end: exit 1"
is "$(cat "$err" | grep -v '^loom-train: tiny:')" "loom-train: stdin: the input ended after step 7 of 10 (loom-feed --epochs N, or 0 for no end, feeds more): exit 1 once saved (--allow-short: exit 0)
loom-train: done: 7 steps, $(sed -n 's/.*done: 7 steps, //p' "$err")" "  one line says so, before the summary"
is "$(readlink "$T/short-ck/latest")" step-00000007 "  the 7 steps saved"
run loom-train -q -c tiny --steps 10 < "$T/short"
is_rc 1 "  -q: exit 1 too"
is "$(cat "$err")" "loom-train: stdin: the input ended after step 7 of 10 (loom-feed --epochs N, or 0 for no end, feeds more): exit 1 once saved (--allow-short: exit 0)" \
	"  and the line"
run loom-train -q -c tiny --set steps=10 < "$T/short"
is_rc 1 "  --set steps=10: exit 1 too"
run loom-train -c tiny --steps 10 --allow-short --log-every 100 < "$T/short"
is_rc 0 "--allow-short: exit 0"
like "$err" "^loom-train: stdin: the input ended after step 7 of 10 \(loom-feed --epochs N, or 0 for no end, feeds more\)$" \
	"  with the line"
run loom-train -q -c tiny --steps 10 --allow-short < "$T/short"
is "$(cat "$err")" "" "  -q: nothing"
run loom-train -q -c tiny < "$T/short"
is_rc 0 "the preset's steps (no --steps): the input's end ends the run, exit 0"
run loom-train -v -c tiny --steps 2 < "$F"
is_rc 0 "train -v"
like "$err" "^loom-train: OpenBLAS (detected )?core '[A-Za-z0-9]+'" "-v names the OpenBLAS core"
like "$err" "threads, (AVX-512|AVX2|baseline) kernels, B=4 T=8" "-v names the kernels' instruction set"
# -q wins over -v, in either order (cli.h): no -v line, no step line
for qv in "-q -v" "-v -q"; do
	run loom-train $qv -c tiny --steps 2 --log-every 1 < "$F"
	is_rc 0 "train $qv"
	is "$(cat "$err")" "" "train $qv: nothing on stderr"
done

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

# --- damaged checkpoints are refused before training --------------------------
fresh_ck() { rm -rf "$T/dmg"; cp -r "$T/ck/step-00000012" "$T/dmg"; }
fresh_ck
rm "$T/dmg/state.json"
run loom-train -q --resume "$T/dmg" --steps 20 < "$F"
is_rc 1 "--resume of a checkpoint without state.json: exit 1 (not a restart at step 0)"
like "$err" "^loom-train: .*/dmg: state.json is missing$" "names the checkpoint and the missing file"
is "$(wc -l < "$err")" 1 "one line"
for part in optimizer.safetensors model.safetensors; do
	fresh_ck
	rm "$T/dmg/$part"
	run loom-train -q --resume "$T/dmg" --steps 20 < "$F"
	is_rc 1 "--resume without $part: exit 1"
	like "$err" "^loom-train: .*/dmg: $part is missing \\(state.json lists it\\)$" "names $part"
done
fresh_ck
rm "$T/dmg/config.json"
run loom-train -q --resume "$T/dmg" --steps 20 < "$F"
is_rc 1 "--resume without config.json: exit 1"
like "$err" "^loom-train: .*/dmg: config.json is missing$" "names config.json"
fresh_ck
size=$(stat -c %s "$T/dmg/model.safetensors")
printf '\x5a' | dd of="$T/dmg/model.safetensors" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
run loom-train -q --resume "$T/dmg" --steps 20 < "$F"
is_rc 1 "--resume of a checkpoint with a flipped byte: exit 1"
like "$err" "^loom-train: .*/dmg/model.safetensors: checksum mismatch" "corruption found"
run loom-train -q -c tiny --init-from "$T/dmg" --steps 2 < "$F"
is_rc 1 "--init-from verifies too"
fresh_ck
python3 - "$T/dmg" <<'EOF'
import json, struct, sys
p = sys.argv[1] + '/model.safetensors'
d = bytearray(open(p, 'rb').read())
n, = struct.unpack('<Q', d[:8])
b, e = json.loads(d[8:8 + n])['transformer.h.1.mlp.c_fc.bias']['data_offsets']
d[8 + n + b + 12:8 + n + b + 16] = struct.pack('<f', float('nan'))
open(p, 'wb').write(d)
s = sys.argv[1] + '/state.json'          # as an older loom wrote it: no checksums
j = json.load(open(s)); del j['files']; json.dump(j, open(s, 'w'))
EOF
run loom-train -q --resume "$T/dmg" --steps 20 < "$F"
is_rc 1 "--resume of a checkpoint holding a NaN: exit 1"
like "$err" "model.safetensors: the checkpoint holds non-finite values: tensor 'transformer.h.1.mlp.c_fc.bias' element 3 is nan$" \
	"says the checkpoint holds non-finite values, names the tensor"
unlike "$err" "diverged" "not 'diverged; lower lr'"
like "$err" "state.json records no checksums \\(written by an older loom\\): not verified" \
	"a checkpoint without checksums is read with a warning"

# --- a preset's micro_batch and seq_len come from the frames ------------------
make_frames 8 5 6 128 1 > "$T/b8"
run loom-train -v -c tiny --steps 3 --log "$T/b8.json" < "$T/b8"
is_rc 0 "-c tiny on frames of B=8 x 5 tokens (the preset says 4 x 9)"
like "$err" "micro_batch 8 from the frames \\(preset 'tiny' says 4\\)" "-v: micro_batch from the frames"
like "$err" "seq_len 4 from the frames' records of 5 tokens \\(preset 'tiny' says 8\\)" "-v: seq_len from the frames"
like "$T/b8.json" '"step":3,.*"tokens":96,' "3 steps of 8 x 4 tokens"
make_frames 2 17 4 128 1 > "$T/long"
run loom-train -v -c tiny --steps 2 < "$T/long"
is_rc 0 "records longer than the preset's n_positions: trains on the first n_positions + 1"
like "$err" "the frames' records have 17 tokens, but n_positions is 8 \\(preset 'tiny'\\): training on the first 9 of each record \\(--set n_positions=16" \
	"says n_positions stays the user's call (tests/train-report.t: without -v)"
echo '{ "micro_batch": 8 }' > "$T/mb8.json"
run loom-train -q -c "$T/mb8.json" --steps 2 < "$F"
is_rc 1 "micro_batch from the user's config file disagrees with the frames: exit 1"
like "$err" "micro_batch: 8, but the batches have 4 records \\(micro_batch is from --config $T/mb8.json: change it to 4 there, or feed loom-feed --batch 8\\)$" \
	"names the config file to change"
run loom-train -q -c tiny --steps 2 --set seq_len=6 < "$T/b8"
is_rc 1 "--set seq_len longer than the records"
like "$err" "seq_len: 6 needs records of 7 tokens, the batches have 5 \\(seq_len is from --set: change it to 4 there, or feed loom-feed --seq 6\\)$" \
	"names --set"

make_frames 8 5 20 128 1 > "$T/b8long"
run loom-train -q --resume "$T/ck" --steps 14 < "$T/b8long"
is_rc 1 "--resume on frames shorter than the checkpoint's seq_len"
like "$err" "seq_len: 8 needs records of 9 tokens, the batches have 5 \\(seq_len is the checkpoint's: --set seq_len=4 overrides it, or feed loom-feed --seq 8\\)$" \
	"says the value is the checkpoint's and how to override it"

# --- --resume with the --config the run started with --------------------------
run loom-train -q -c tiny --steps 14 --resume "$T/ck" < "$F"
is_rc 0 "--resume with the same --config (as cron repeats it) is accepted"
sed 's/"lr": [0-9.e-]*/"lr": 0.002/' "$SHARE/presets/tiny.json" > "$T/tiny-lr.json"
run loom-train -q -c "$T/tiny-lr.json" --steps 14 --resume "$T/ck" < "$F"
is_rc 2 "--resume with a --config that disagrees: exit 2"
like "$err" "^loom-train: --resume: --config $T/tiny-lr.json disagrees with the checkpoint .*/ck/step-00000012 on lr: 0.002, the checkpoint has 0.001 " \
	"names the key and both values"
is "$(sed 1d "$err")" "Try 'loom-train --help' for more information." "one line and the hint"

# --- a truncated --eval-data is found before training -------------------------
make_frames 4 9 3 128 99 > "$T/ev"
head -c 300 "$T/ev" > "$T/evcut"
run loom-train -q -c tiny --steps 20 --eval-every 10 --eval-data "$T/evcut" --save "$T/evck" < "$F"
is_rc 1 "truncated --eval-data: exit 1"
like "$err" "^loom-train: $T/evcut: frame 2 " "names the file and the frame"
ok "found at start: no step trained, no checkpoint" test ! -e "$T/evck"

# --- exact resume after SIGKILL ----------------------------------------------
run loom-train -q -c tiny --steps 40 --log "$T/full.json" < "$F"
mkfifo "$T/fifo"
( head -c $((FR * 23)) "$F"; exec sleep 60 ) > "$T/fifo" &
feeder=$! feeder_t=$(pid_token $!)
loom-train -q -c tiny --steps 40 --save "$T/kill" --save-every 5 --log "$T/k1.json" < "$T/fifo" 2>/dev/null &
trainer=$! trainer_t=$(pid_token $!)
for _ in $(seq 1 400); do [ "$(wc -l 2>/dev/null < "$T/k1.json")" = 23 ] && [ "$(readlink "$T/kill/latest")" = step-00000020 ] && break; sleep 0.05; done
signal_ours KILL "$trainer_t" loom-train; wait $trainer 2>/dev/null
signal_ours TERM "$feeder_t"; wait $feeder 2>/dev/null
is "$(readlink "$T/kill/latest")" "step-00000020" "killed with SIGKILL after step 20's checkpoint"
is "$(wc -l < "$T/k1.json")" 23 "the killed run logged past its checkpoint (steps 21..23)"
run loom-train -q --resume latest --save "$T/kill" --log "$T/k1.json" < "$F"
is_rc 0 "--resume latest"
is "$(losses "$T/k1.json")" "$(losses "$T/full.json")" \
	"resumed run: same loss, lr and grad norm at steps 21..40 as the uninterrupted run; log lines past the checkpoint replaced"

# --- SIGTERM: finish the step, save, exit 0 ---------------------------------
( head -c $((FR * 7)) "$F"; exec sleep 60 ) > "$T/fifo" &
feeder=$! feeder_t=$(pid_token $!)
loom-train -c tiny --steps 40 --save "$T/term" --log "$T/t.json" < "$T/fifo" 2>"$T/term.err" &
trainer=$! trainer_t=$(pid_token $!)
for _ in $(seq 1 200); do [ "$(wc -l 2>/dev/null < "$T/t.json")" = 7 ] && break; sleep 0.05; done
signal_ours TERM "$trainer_t" loom-train
rc=0; wait $trainer || rc=$?
signal_ours TERM "$feeder_t"; wait $feeder 2>/dev/null
is_rc 0 "SIGTERM: exit 0"
is "$(readlink "$T/term/latest")" "step-00000007" "SIGTERM: saved the last finished step"
like "$T/term.err" "^loom-train: Terminated: stopping after step 7 \\(sent by pid $$, bash\\)\$" \
	"  and said so, naming the process that sent it (this test's shell)"
run loom-train -q -c tiny --steps 40 --init-from "$T/term" --steps 8 < "$F"
is_rc 0 "--init-from a checkpoint (weights only)"

# --- two runs, one --save directory ---------------------------------------------
( head -c $((FR * 3)) "$F"; exec sleep 60 ) > "$T/fifo" &
feeder=$! feeder_t=$(pid_token $!)
loom-train -q -c tiny --steps 40 --save "$T/lk" --log "$T/lk.json" < "$T/fifo" 2>/dev/null &
trainer=$! trainer_t=$(pid_token $!)
for _ in $(seq 1 6000); do [ "$(wc -l 2>/dev/null < "$T/lk.json")" = 3 ] && break; sleep 0.05; done
run loom-train -q -c tiny --steps 2 --save "$T/lk" < "$F"
is_rc 1 "a second run on a --save directory in use: exit 1"
is "$(cat "$err")" "loom-train: --save $T/lk: another loom-train is writing checkpoints there (it holds '$T/lk/.loom-train.lock')" \
	"  one line naming the directory and the lock"
signal_ours KILL "$trainer_t" loom-train; wait $trainer 2>/dev/null
signal_ours TERM "$feeder_t"; wait $feeder 2>/dev/null
run loom-train -q -c tiny --steps 2 --save "$T/lk" < "$F"
is_rc 0 "once the first run is gone (even by SIGKILL), the directory is free"
is "$(readlink "$T/lk/latest")" "step-00000002" "  and the second run saves there"
ok "  its lock is gone when it ends" test ! -e "$T/lk/.loom-train.lock"

# --- a run that trains nothing fails and writes nothing ------------------------
# every file, link and checksum under a directory
snap() { (cd "$1" && find . -printf '%p %y %l\n' | sort && find . -type f -exec cksum {} + | sort); }
make_frames 4 9 3 128 1 > "$T/three"
run loom-train -q -c tiny --set grad_accum=4 --steps 5 --save "$T/none" < "$T/three"
is_rc 1 "input that ends inside step 1: exit 1"
is "$(cat "$err")" "loom-train: stdin: input ended after 3 micro-batches, but a step needs 4 (grad_accum): no step trained, nothing saved (feed more data, or --set grad_accum=N for smaller steps)" \
	"  one line: the micro-batches that came, those a step needs, the key"
ok "  no checkpoint, not even the directory" test ! -e "$T/none"
snap "$T/ck" > "$T/snap0"
run loom-train -q -c tiny --set grad_accum=4 --steps 5 --save "$T/ck" < "$T/three"
is_rc 1 "the same into a directory of checkpoints: exit 1"
is "$(snap "$T/ck")" "$(cat "$T/snap0")" "  the directory is exactly as it was (latest untouched)"
run loom-train -q -c tiny --set grad_accum=2 --steps 3 --save "$T/ga" < "$F"
snap "$T/ga" > "$T/snap0"
make_frames 4 9 7 128 1 > "$T/seven"    # frames 0..6: 0..5 trained, 6 half a step
run loom-train -q --resume latest --save "$T/ga" --steps 10 < "$T/seven"
is_rc 1 "a resumed run whose input ends inside its first step: exit 1"
like "$err" "^loom-train: stdin: input ended after 1 micro-batch, but a step needs 2 \(grad_accum\): no step trained, nothing saved \(feed more data: the resumed run's steps keep their size\)$" \
	"  one line"
is "$(snap "$T/ga")" "$(cat "$T/snap0")" "  the checkpoint directory is exactly as it was"
run loom-train -q --resume latest --save "$T/ga" < "$F"
is_rc 0 "a resumed run with no step left to do: exit 0"
is "$(snap "$T/ga")" "$(cat "$T/snap0")" "  the checkpoint directory is exactly as it was"

# --- eval -------------------------------------------------------------------
make_frames 4 9 3 128 99 > "$T/eval"
run loom-train -c tiny --steps 10 --eval-every 5 --eval-data "$T/eval" --log "$T/e.json" < "$F"
is_rc 0 "--eval-every with --eval-data"
like "$err" 'eval step 10: loss [0-9.]+ ppl [0-9.]+ acc' "eval line on stderr"
like "$T/e.json" '"eval_loss":' "eval line in the log"

# --- bad input ----------------------------------------------------------------
make_frames 4 9 6 128 1 --corrupt magic@3 > "$T/bad"
run loom-train -q -c tiny --steps 10 < "$T/bad"
is_rc 1 "bad magic: exit 1"
like "$err" '^loom-train: stdin: frame 3 .*magic' "bad magic names the frame"
is "$(wc -l < "$err")" 1 "one line"
make_frames 4 9 6 128 1 --corrupt crc@2 > "$T/bad"
run loom-train -q -c tiny --steps 10 < "$T/bad"
is_rc 1 "bad payload checksum: exit 1"
like "$err" 'frame 2 .*checksum' "checksum error names the frame"
make_frames 4 9 6 128 1 --corrupt shape@4 > "$T/bad"
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
like "$err" '^loom-train: stdin: frame 0: seq_len: 16 needs records of 17 tokens, the batches have 9 \(seq_len is from --set: change it to 8 there, or feed loom-feed --seq 16\)$' \
	"seq_len rule named, with the flag to change"
run loom-train -q -c tiny --set micro_batch=8 --steps 10 < "$F"
is_rc 1 "micro_batch differs from the frames: exit 1"
like "$err" 'micro_batch: 8, but the batches have 4 records \(micro_batch is from --set: change it to 4 there, or feed loom-feed --batch 8\)$' "micro_batch rule named, with the flag to change"
make_frames 4 9 6 300 1 > "$T/bad"
run loom-train -q -c tiny --steps 10 < "$T/bad"
is_rc 1 "token id >= vocab_size: exit 1"
like "$err" "^loom-train: stdin: frame 0: token [0-9]+ \\(record [0-9]+, position [0-9]+\\) is outside the vocabulary: vocab_size is 128 \\(from preset 'tiny'\\); the data needs --set vocab_size=N with N the tokenizer's size, at least [0-9]+ \\(gpt2: 50257\\)$" \
	"vocabulary error names the preset's size and --set vocab_size"
run loom-train -q --resume "$T/nope" < "$F"
is_rc 1 "resume from a missing checkpoint: exit 1"
run loom-train -q --frobnicate
is_rc 2 "unknown option: exit 2"
run loom-train --help
is_rc 0 "--help exits 0"
like "$out" '^usage: loom-train' "--help on stdout"
done_testing
