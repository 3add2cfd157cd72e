#!/usr/bin/env bash
# What loom-train says while it trains: the model line at start (without
# -v, not under -q), records cut to a preset's n_positions, samples
# (--sample-every), and no line glued onto the progress line.
. "$(dirname "$0")/lib.sh"

F=$T/frames
make_frames 4 9 60 128 1 > "$F"
make_frames 4 9 4 128 2 > "$T/eval"
export OMP_NUM_THREADS=2

run loom-train -c tiny --steps 3 < "$F"
is_rc 0 "trains"
like <(head -1 "$err") '^loom-train: tiny: 108800 parameters, [0-9]+ threads?, [A-Za-z0-9-]+ kernels, B=4 T=8 grad_accum 1, 3 steps, lr 0\.001, fp32 matmuls \(OpenBLAS\)$' \
	"the first line: size, preset and key settings (without -v)"
is "$(grep -c ' parameters' "$err")" 1 "once"
run loom-train -c tiny --steps 12 --set sparsity=0.5,block_size=8 < "$F"
like <(head -1 "$err") '^loom-train: tiny: 108800 parameters \(59648 live at sparsity 0\.5\), ' \
	"a sparse run: the live parameters too"
run loom-train -q -c tiny --steps 3 < "$F"
is "$(wc -c < "$err")" 0 "-q: no model line"

# records longer than the preset's n_positions allows: said, without -v
make_frames 4 17 10 128 1 > "$T/long"
run loom-train -c tiny --steps 3 < "$T/long"
is_rc 0 "records of 17 tokens on tiny (n_positions 8)"
like <(head -1 "$err") "^loom-train: the frames' records have 17 tokens, but n_positions is 8 \(preset 'tiny'\): training on the first 9 of each record \(--set n_positions=16, or loom-feed --seq 8, uses them whole\)\$" \
	"one line says the records are cut"
run loom-train -c tiny --steps 3 --set seq_len=8 < "$T/long"
unlike "$err" "records have" "not when the user set seq_len"
run loom-train -c tiny --steps 3 --set n_positions=16 < "$T/long"
unlike "$err" "records have" "nor when they fit"
like "$err" 'B=4 T=16 ' "(then seq_len is the data's)"
run loom-train -q -c tiny --steps 3 < "$T/long"
is "$(wc -c < "$err")" 0 "-q: silent"

# --sample-every: a short sample on stderr, in --log and --tensorboard
run loom-train -c tiny --steps 10 --log "$T/plain.json" < "$F"
run loom-train -c tiny --steps 10 --sample-every 5 --sample-tokens 4 --log "$T/s.json" \
	--tensorboard "$T/tb" < "$F"
is_rc 0 "--sample-every 5"
is "$(grep -c '^loom-train: sample step' "$err")" 2 "a line on stderr per sample"
like "$err" '^loom-train: sample step 5 \([0-9.]+ s\): "[0-9]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+"$' \
	"without a vocabulary: the first token of the batch and 4 generated, as ids"
like "$T/s.json" '^\{"step":10,"sample":"[0-9]+( [0-9]+){4}"\}$' "a JSON line {step, sample}"
is "$(losses "$T/s.json")" "$(losses "$T/plain.json")" "sampling leaves training bit-identical"
is "$(/usr/bin/python3 "$TESTS/tb_events.py" "$T"/tb/events.* | grep -c '^[0-9]* samples text text 7 [0-9 ]*$')" 2 \
	"a TensorBoard text summary per sample"
grep '"sample"' "$T/s.json" > "$T/s1"
run loom-train -q -c tiny --steps 10 --sample-every 5 --sample-tokens 4 --log "$T/s2.json" < "$F"
is "$(wc -c < "$err")" 0 "-q: no sample line on stderr"
is "$(grep '"sample"' "$T/s2.json")" "$(cat "$T/s1")" "greedy: the same samples again (and still logged)"
run loom-train -q -c tiny --steps 10 --sample-every 5 --sample-tokens 4 --sample-temperature 1 \
	--sample-prompt " 1 2  3" --log "$T/s3.json" < "$F"
like "$T/s3.json" '^\{"step":5,"sample":"1 2 3( [0-9]+){4}"\}$' "--sample-prompt as ids; sampled at temperature 1"

# with a vocabulary: decoded text
run loom-train -c tiny --set vocab_size=50257 --vocab gpt2 --steps 4 --sample-every 2 \
	--sample-tokens 6 --sample-prompt 'The history of' --log "$T/v.json" < "$F"
is_rc 0 "--vocab gpt2"
like "$err" '^loom-train: sample step 2 \([0-9.]+ s\): "The history of' "the prompt decoded, then the sample"
like "$T/v.json" '^\{"step":4,"sample":"The history of' "in the log too"

fails_with 2 "^loom-train: --sample-prompt 'hello': without --vocab, the prompt is token ids separated by spaces\$" \
	"a text prompt without a vocabulary" loom-train -q -c tiny --steps 2 --sample-every 1 --sample-prompt hello < "$F"
fails_with 2 "^loom-train: --sample-prompt: token 128 is outside the vocabulary of 128 ids\$" \
	"an id outside the vocabulary" loom-train -q -c tiny --steps 2 --sample-every 1 --sample-prompt '5 128' < "$F"
run loom-train -q -c tiny --steps 2 --sample-prompt 1 < "$F"
is_rc 2 "--sample-prompt without --sample-every: exit 2"
like "$err" '^loom-train: --sample-prompt needs --sample-every N$' "says so"

# --progress into a file: the eval line starts a line of its own
run loom-train -c tiny --steps 20 --log-every 0 --eval-every 5 --eval-data "$T/eval" --progress < "$F"
is_rc 0 "--progress into a file"
like "$err" $'\rloom-train: step 1/20 loss' "the progress line is written"
like "$err" $'\r\e\\[Kloom-train: eval step 5: loss' "cleared before the eval line"
unlike "$err" $'ETA [0-9:]+\e\\[Kloom-train' "no line glued onto the progress line"
done_testing
