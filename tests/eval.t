#!/usr/bin/env bash
# loom-eval: the JSON line of a trained tiny checkpoint, generation, and
# every checkpoint / frame refusal.
. "$(dirname "$0")/lib.sh"

# Learnable data: ids count up modulo 128 (the tiny preset's vocabulary),
# so a trained model predicts id+1; GPT-2 ids 64.. are the bytes 'a'..
python3 -c "print(' '.join(str(i % 128) for i in range(4000)))" > "$T/tok.txt"
run loom-shard -q -f text -L 9 -o "$T/d" "$T/tok.txt"
is_rc 0 "shards"
M="$T/d.manifest.json"
loom-feed -m "$M" -b 4 -t 8 -s 1 -e 0 -q 2>"$T/feed.err" |
	loom-train --config tiny --steps 100 --save "$T/ck" --save-every 20 --threads 1 -q \
	2>"$T/train.err"
is "$?" 0 "loom-feed | loom-train --config tiny --steps 100"
ok "checkpoints saved" test -L "$T/ck/latest" -a -d "$T/ck/step-00000100"
loom-feed -m "$M" -b 8 -t 8 -s 2 -q > "$T/val.bin"

run loom-eval --checkpoint "$T/ck" -j 1 < "$T/val.bin"
is_rc 0 "eval a trained checkpoint"
is "$(wc -l < "$out")" 1 "one line"
python3 - "$out" > "$T/check.txt" <<'EOF'
import json, math, sys
j = json.loads(open(sys.argv[1]).read())
print(sorted(j) == sorted(['checkpoint', 'step', 'loss', 'perplexity', 'accuracy',
                           'tokens', 'frames', 'seconds']),
      j['step'], j['tokens'], j['frames'],
      abs(j['perplexity'] - math.exp(j['loss'])) < 1e-6 * j['perplexity'],
      0 < j['loss'] < 5, j['accuracy'] > 0.9, j['checkpoint'].endswith('step-00000100'))
EOF
is "$(cat "$T/check.txt")" "True 100 3520 55 True True True True" \
	"JSON: keys, step 100, 55 frames x 8 x 8 tokens, ppl = exp(loss), accuracy > 0.9"
run loom-eval --checkpoint "$T/ck/step-00000020" -j 1 < "$T/val.bin"
loss20=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["loss"])' "$out")
run loom-eval --checkpoint "$T/ck/latest" -j 1 < "$T/val.bin"
loss100=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["loss"])' "$out")
ok "loss at step 100 ($loss100) below step 20 ($loss20)" \
	python3 -c "import sys; sys.exit(not $loss100 < $loss20)"
run loom-eval --checkpoint "$T/ck" --batches 3 -j 1 < "$T/val.bin"
like "$out" '"tokens":192,"frames":3' "--batches 3 evaluates 3 frames"
loom-feed -m "$M" -b 8 -t 8 -s 2 -q | loom-eval --checkpoint "$T/ck" -j 1 > "$T/piped.json"
loom-eval --checkpoint "$T/ck" -j 1 < "$T/val.bin" > "$T/file.json"
is "$(cut -d, -f2-7 "$T/piped.json")" "$(cut -d, -f2-7 "$T/file.json")" \
	"piped from loom-feed: the same numbers as from a file"

# --- generate ---------------------------------------------------------------
run loom-eval generate --checkpoint "$T/ck" --vocab gpt2 --prompt a -n 12 --temperature 0 -j 1
is_rc 0 "generate"
is "$(cat "$out")" "abcdefghijklm" "greedy generation continues the learned pattern"
run loom-eval generate --checkpoint "$T/ck" --vocab gpt2 --prompt a -n 12 --temperature 0 --no-prompt -j 1
is "$(cat "$out")" "bcdefghijklm" "--no-prompt prints only the continuation"
run loom-eval generate --checkpoint "$T/ck" --vocab gpt2 --prompt k -n 30 --seed 7 -j 1
cp "$out" "$T/s7.txt"
run loom-eval generate --checkpoint "$T/ck" --vocab gpt2 --prompt k -n 30 --seed 7 -j 1
same_file "$out" "$T/s7.txt" "sampling: same seed, same text"
is "$(head -c 1 "$out")" "k" "sampled text starts with the prompt"
run loom-eval generate --checkpoint "$T/ck" --vocab gpt2 --prompt 'The' -n 5
is_rc 1 "prompt ids outside the model's vocabulary"
like "$err" "token 464 \\(position 0\\) is outside the model's vocabulary of 128 ids" "says which token"
run loom-eval generate --checkpoint "$T/ck" --prompt a
is_rc 2 "generate needs --vocab when the checkpoint has none"
like "$err" "^loom-eval: generate: the checkpoint .*/ck/step-00000100 holds no vocabulary \\(trained without loom-train --vocab\\): give --vocab V$" "says so"
run loom-eval generate --checkpoint "$T/ck" --vocab "$T/novocab" --prompt a
is_rc 1 "missing vocabulary"

# --- a checkpoint carries its tokenizer ---------------------------------------
python3 -c "
import random
random.seed(3)
w = ['loom', 'thread', 'weave', 'warp', 'weft', 'shuttle', 'the', 'a', 'of']
for i in range(300): print(' '.join(random.choice(w) for _ in range(12)))" > "$T/text.txt"
loom-bpe train -q -n 280 -o "$T/voc" "$T/text.txt"
eot=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["<|endoftext|>"])' "$T/voc/encoder.json")
n_ids=$((eot + 1))
run loom-train -q -c tiny --vocab "$T/voc" --steps 2 < "$T/val.bin"
is_rc 2 "--vocab larger than the preset's vocab_size: exit 2"
like "$err" "^loom-train: --vocab $T/voc has $n_ids ids, but vocab_size is 128 \\(from preset 'tiny'\\): --set vocab_size=$n_ids$" \
	"names the preset's size and the --set that fixes it"
loom-feed -m "$M" -b 4 -t 8 -s 1 -e 0 -q |
	loom-train -q -c tiny --set vocab_size=$n_ids --vocab "$T/voc" --steps 40 --save "$T/vck" --threads 1 2>"$T/vtrain.err"
is "$?" 0 "loom-train --vocab DIR"
for f in vocab.json merges.txt; do ok "the checkpoint has $f" test -s "$T/vck/latest/$f"; done
ok "vocab.json has encoder.json's tokens and ids" python3 -c '
import json, sys
sys.exit(json.load(open(sys.argv[1])) != json.load(open(sys.argv[2])))' "$T/vck/latest/vocab.json" "$T/voc/encoder.json"
same_file "$T/vck/latest/merges.txt" "$T/voc/vocab.bpe" "merges.txt is vocab.bpe"
python3 - "$T/vck/latest" > "$T/vcheck" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1] + '/config.json'))
s = json.load(open(sys.argv[1] + '/state.json'))
print(c['bos_token_id'], c['eos_token_id'], c['loom_vocab'].endswith('/voc'), sorted(s['files']))
EOF
is "$(cat "$T/vcheck")" "$eot $eot True ['config.json', 'merges.txt', 'model.safetensors', 'optimizer.safetensors', 'vocab.json']" \
	"config.json: bos/eos_token_id and the vocabulary's name; state.json checksums the tokenizer files"
run loom-eval generate --checkpoint "$T/vck" --prompt 'the loom' -n 8 --temperature 0 -j 1
is_rc 0 "generate needs no --vocab when the checkpoint has one"
cp "$out" "$T/gen1"
run loom-eval generate --checkpoint "$T/vck" --vocab "$T/voc" --prompt 'the loom' -n 8 --temperature 0 -j 1
same_file "$out" "$T/gen1" "... and says what --vocab DIR would"
loom-feed -m "$M" -b 4 -t 8 -s 1 -e 0 -q |
	loom-train -q --resume "$T/vck" --steps 44 --save "$T/vck" --threads 1 2>/dev/null
ok "a resumed run keeps the vocabulary" test "$(readlink "$T/vck/latest")" = step-00000044 -a -s "$T/vck/latest/vocab.json"
printf x >> "$T/vck/latest/merges.txt"
run loom-eval generate --checkpoint "$T/vck" --prompt 'the' -n 2 -j 1
is_rc 1 "a damaged merges.txt is found"
like "$err" "vck/step-00000044/merges.txt: [0-9]+ bytes, but state.json records" "names merges.txt"

# --- usage --------------------------------------------------------------------
run loom-eval --help
is_rc 0 "--help"
like "$out" "usage: loom-eval" "usage on stdout"
run loom-eval < "$T/val.bin"
is_rc 2 "--checkpoint is required"
run loom-eval --checkpoint "$T/ck" --prompt x < "$T/val.bin"
is_rc 2 "--prompt without generate"

# --- bad frames ---------------------------------------------------------------
head -c 1000 "$T/val.bin" > "$T/cut.bin"
run loom-eval --checkpoint "$T/ck" -j 1 < "$T/cut.bin"
is_rc 1 "frames cut short"
like "$err" "^loom-eval: stdin: frame 4 at byte 832: stream ends inside the payload \\(104 of 144 bytes\\)" \
	"names the frame and byte offset"
head -c $((6 * 208)) "$T/val.bin" > "$T/noend.bin"
run loom-eval --checkpoint "$T/ck" -j 1 < "$T/noend.bin"
is_rc 1 "stream without an end-of-stream frame (feeder died)"
like "$err" "stream ended after frame 6 \\(byte 1248\\) without an end-of-stream frame" "says so"
cp "$T/val.bin" "$T/crc.bin"
printf '\x55' | dd of="$T/crc.bin" bs=1 seek=$((2 * 208 + 100)) conv=notrunc 2>/dev/null
run loom-eval --checkpoint "$T/ck" -j 1 < "$T/crc.bin"
is_rc 1 "payload corrupted"
like "$err" "frame 2 at byte 416: payload checksum mismatch" "checksum error names the frame"
python3 -c "print(' '.join(str(i % 128) for i in range(400)))" > "$T/long.txt"
loom-shard -q -f text -L 17 -o "$T/long" "$T/long.txt"
loom-feed -m "$T/long.manifest.json" -b 2 -t 16 -s 1 -q > "$T/long.bin"
run loom-eval --checkpoint "$T/ck" -j 1 < "$T/long.bin"
is_rc 1 "records longer than the model's positions"
like "$err" "need T = 16 positions, the model has n_positions 8" "says so"

# --- bad checkpoints ----------------------------------------------------------
fresh() { rm -rf "$T/bad"; cp -r "$T/ck/step-00000100" "$T/bad"; }
fresh
truncate -s 5000 "$T/bad/model.safetensors"
run loom-eval --checkpoint "$T/bad" < "$T/val.bin"
is_rc 1 "truncated model.safetensors"
like "$err" "^loom-eval: .*bad/model.safetensors: .*(truncated|end past the data)" "one clear line"
is "$(wc -l < "$err")" 1 "exactly one line"
fresh
printf 'XXXXXXXX' | dd of="$T/bad/model.safetensors" bs=1 seek=0 conv=notrunc 2>/dev/null
run loom-eval --checkpoint "$T/bad" --no-verify < "$T/val.bin"
is_rc 1 "bad header size"
like "$err" "model.safetensors: header size [0-9]+ at byte 0 is not plausible" "bad header refused"
fresh
printf '!!' | dd of="$T/bad/model.safetensors" bs=1 seek=8 conv=notrunc 2>/dev/null
run loom-eval --checkpoint "$T/bad" --no-verify < "$T/val.bin"
is_rc 1 "bad JSON header"
like "$err" "model.safetensors: bad JSON header at byte 8" "JSON error with its byte"
fresh
sed -i 's/"n_embd": 64/"n_embd": 32/' "$T/bad/config.json"
run loom-eval --checkpoint "$T/bad" --no-verify < "$T/val.bin"
is_rc 1 "config does not match the tensors"
like "$err" "is \\[128, 64\\] but config.json \\(n_embd 32" "names the tensor and both shapes"
fresh
sed -i 's/"n_layer": 2/"n_layer": 3/' "$T/bad/config.json"
run loom-eval --checkpoint "$T/bad" --no-verify < "$T/val.bin"
is_rc 1 "config has more layers than the tensors"
like "$err" "tensor 'transformer.h.2.ln_1.weight' is missing" "names the missing tensor"
fresh
python3 - "$T/bad/model.safetensors" <<'EOF'
import json, struct, sys
p = sys.argv[1]
d = open(p, 'rb').read()
n, = struct.unpack('<Q', d[:8])
h = json.loads(d[8:8 + n])
# swap the shape of a square-free tensor: same bytes, wrong shape
t = h['transformer.h.0.attn.c_attn.weight']
t['shape'] = t['shape'][::-1]
b = json.dumps(h).encode()
b += b' ' * (-len(b) % 8)
open(p, 'wb').write(struct.pack('<Q', len(b)) + b + d[8 + n:])
EOF
run loom-eval --checkpoint "$T/bad" --no-verify < "$T/val.bin"
is_rc 1 "a tensor of the wrong shape"
like "$err" "c_attn.weight' is \\[192, 64\\] but config.json .* needs \\[64, 192\\]" "wrong shape named"
run loom-eval --checkpoint "$T/nothing" < "$T/val.bin"
is_rc 1 "missing checkpoint"
mkdir -p "$T/empty"
run loom-eval --checkpoint "$T/empty" < "$T/val.bin"
is_rc 1 "a directory that is not a checkpoint"
like "$err" "is not a checkpoint \\(no config.json, no latest\\)" "says so"

# --- checksums: every file is verified against state.json ---------------------
fresh
size=$(stat -c %s "$T/bad/model.safetensors")
printf '\x5a' | dd of="$T/bad/model.safetensors" bs=1 seek=$((size - 4000)) conv=notrunc 2>/dev/null
run loom-eval --checkpoint "$T/bad" -j 1 < "$T/val.bin"
is_rc 1 "one flipped byte in model.safetensors' weights"
like "$err" "^loom-eval: .*/bad/model.safetensors: checksum mismatch \\(CRC-32C [0-9a-f]{8}, state.json records [0-9a-f]{8}\\): the file is corrupt$" \
	"names the file and both checksums"
is "$(wc -l < "$err")" 1 "one line"
run loom-eval --checkpoint "$T/bad" -j 1 --no-verify < "$T/val.bin"
is_rc 0 "--no-verify evaluates it anyway"
fresh
sed -i 's/"n_positions": 8/"n_positions": 8 /' "$T/bad/config.json"
run loom-eval --checkpoint "$T/bad" -j 1 < "$T/val.bin"
is_rc 1 "an edited config.json"
like "$err" "bad/config.json: [0-9]+ bytes, but state.json records" "names config.json"
fresh
rm "$T/bad/state.json"
run loom-eval --checkpoint "$T/bad" -j 1 < "$T/val.bin"
is_rc 1 "a checkpoint without state.json"
like "$err" "^loom-eval: .*/bad: state.json is missing$" "names the missing part"
fresh
python3 - "$T/bad/state.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); del d["files"]; json.dump(d, open(sys.argv[1], "w"))
EOF
run loom-eval --checkpoint "$T/bad" -j 1 < "$T/val.bin"
is_rc 0 "a checkpoint of an older loom (no checksums) is accepted"
like "$err" "bad: state.json records no checksums \\(written by an older loom\\): not verified" \
	"with a warning"

# --- a loss that is not finite ------------------------------------------------
fresh
python3 - "$T/bad/model.safetensors" <<'EOF'
import json, struct, sys
p = sys.argv[1]
d = bytearray(open(p, 'rb').read())
n, = struct.unpack('<Q', d[:8])
h = json.loads(d[8:8 + n])
b, e = h['transformer.wte.weight']['data_offsets']
d[8 + n + b:8 + n + e] = struct.pack('<f', 3e38) * ((e - b) // 4)   # finite, but overflows
open(p, 'wb').write(d)
EOF
run loom-eval --checkpoint "$T/bad" -j 1 --no-verify < "$T/val.bin"
is_rc 1 "weights that overflow: exit 1"
like "$err" "^loom-eval: .*/bad: the loss is not finite \\((nan|inf|-nan)\\)" "says the loss is not finite, names the checkpoint"
unlike "$err" "out of memory" "not 'out of memory'"

done_testing
