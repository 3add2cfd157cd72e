#!/usr/bin/env bash
# loom-plot reads TensorBoard event files (loom-train --tensorboard) as well
# as JSON logs, told apart by their first bytes.
. "$(dirname "$0")/lib.sh"

make_frames 4 9 60 128 1 > "$T/frames"
make_frames 4 9 4 128 2 > "$T/eval"
export OMP_NUM_THREADS=2
run loom-train -q -c tiny --steps 20 --eval-every 10 --eval-data "$T/eval" \
	--log "$T/log.jsonl" --tensorboard "$T/tb" < "$T/frames"
is_rc 0 "a run with both logs"
ev=$(ls "$T"/tb/events.out.tfevents.*)
counts() { sed 's/.*(/(/' "$1"; } # points and steps of each line

run loom-plot "$T/log.jsonl" -o "$T/json.svg"
cp "$out" "$T/json.out"
run loom-plot "$ev" -o "$T/tb.svg"
is_rc 0 "plots an event file"
is "$(wc -c < "$err")" 0 "nothing on stderr"
like "$out" '^loss +[0-9.]+ .* \(20 points, step 1\.\.20\)' "train/loss as the loss series"
like "$out" '^eval_loss +[0-9.]+ .* \(2 points, step 10\.\.20\)' "eval/loss as eval_loss"
is "$(counts "$out")" "$(counts "$T/json.out")" "the same series and points as from the JSON log"
is "$(grep -c 'class="eval"' "$T/tb.svg")" 1 "eval points drawn as in the JSON log's chart"

run loom-plot -p -y train/loss,eval/perplexity "$ev"
is_rc 0 "-y with TensorBoard tags, --panels"
like "$out" '^train/loss +.*\(20 points' "train/loss by its tag"
like "$out" '^eval/perplexity +.*\(2 points' "eval/perplexity by its tag"
like "$out" '^lr +.*\(20 points' "the lr panel from train/lr"
like "$out" '^tokens_per_s +.*\(20 points' "the tokens/s panel from train/tokens_per_s"

run loom-plot -q "$T/log.jsonl" "$ev" -o "$T/both.svg"
is_rc 0 "a JSON log and an event file overlaid"
is "$(grep -c 'class="raw"' "$T/both.svg")" 2 "a curve each"

run sh -c "loom-plot - < '$ev'"
is_rc 0 "an event file on stdin"
like "$out" '^loss .*\(20 points' "read"

# a run still writing: the last record cut short is ignored, with a warning
size=$(wc -c < "$ev")
head -c $((size - 3)) "$ev" > "$T/cut"
run loom-plot "$T/cut"
is_rc 0 "cut event file"
like "$err" "^loom-plot: $T/cut: record [0-9]+ at byte [0-9]+: truncated record .*; incomplete last record ignored\$" "one warning naming the record"
is "$(wc -l < "$err")" 1 "one line"
like "$out" '^loss .*\(20 points' "the points before it"

# a damaged record: an error naming it
cp "$ev" "$T/bad"
flip "$T/bad" 60   # inside record 1's payload (record 0 is 40 bytes)
fails_with 1 "^loom-plot: $T/bad: record 1 at byte [0-9]+: payload CRC mismatch\$" "damaged event file" \
	loom-plot "$T/bad"
done_testing
