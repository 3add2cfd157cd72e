#!/usr/bin/env bash
# loom-eval squad -c: a BERT checkpoint's SQuAD predictions.  The model is
# a HuggingFace directory that tests/squad_bert.py writes (a small random
# BERT whose QA head makes "paris ... seine" the span to win where it is
# valid); the predictions must be run_squad.py's post-processing of the
# logits loom-eval writes (--logits), done again in Python with windows and
# a tokenizer of its own (which also checks loom's features); then every
# refusal: one line, exit 1 (2 for usage), no predictions file left.
. "$(dirname "$0")/lib.sh"

PY=$TESTS/squad_bert.py
mkdir "$T/hf" "$T/novocab"
/usr/bin/python3 "$PY" make "$T/hf"
/usr/bin/python3 "$PY" make "$T/novocab" --no-vocab
export OMP_NUM_THREADS=2

cat > "$T/dev.json" <<'J'
{"version": "1.1", "data": [{"title": "Paris", "paragraphs": [
 {"context": "The capital of France is Paris, on the river Seine. It has many museums, and people live there. The Louvre is a large art museum. The Eiffel tower was built in 1889 in Paris. Which city? Paris, on the Seine.",
  "qas": [
   {"id": "q1", "question": "What is the capital of France?", "answers": [{"text": "Paris", "answer_start": 25}]},
   {"id": "q2", "question": "When was the Eiffel tower built?", "answers": [{"text": "1889", "answer_start": 160}]}]},
 {"context": "The river Seine flows through Paris.",
  "qas": [
   {"id": "q3", "question": "Which river?", "answers": [{"text": "Seine", "answer_start": 10}]}]},
 {"context": "People live there, museums are famous.",
  "qas": [
   {"id": "q4", "question": "Who lives there?", "answers": [{"text": "People", "answer_start": 0}]}]}]}]}
J
W=(--seq 32 --stride 8 --max-query 8)

run loom-eval squad -c "$T/hf" --data "$T/dev.json" --predictions "$T/out/pred.json" \
	--logits "$T/out/logits.jsonl" "${W[@]}"
is_rc 0 "squad -c: predicts and scores"
is "$(cat "$out")" '{"exact_match": 25.0, "f1": 35.0}' "squad -c: the official line for its predictions"
like "$err" '^loom-eval: squad: 4 questions, 12 features, [0-9.]+ s; 0 with no valid span' \
	"squad -c: questions and features on stderr"
is "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["q1"])' "$T/out/pred.json")" \
	"Paris, on the river Seine" "squad -c: the span the head makes win, the context's exact bytes"
is "$(wc -l < "$T/out/logits.jsonl")" 12 "--logits: one line per feature"
run /usr/bin/python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    assert sorted(d) == ["attention_mask", "end_logits", "feature", "id", "input_ids",
                         "start_logits", "token_type_ids", "window"], sorted(d)
    assert all(len(d[k]) == 32 for k in ("input_ids", "token_type_ids", "attention_mask",
                                          "start_logits", "end_logits"))
print("ok")' "$T/out/logits.jsonl"
is "$(cat "$out")" ok "--logits: id, feature, window and five arrays of --seq values"
run /usr/bin/python3 "$PY" post "$T/dev.json" "$T/out/logits.jsonl" "$T/hf/vocab.txt" \
	"${W[@]}" --n-best 20 --max-answer 30
is "$rc" 0 "Python's post-processing of the logits ran (and found loom's features its own)"
cp "$out" "$T/ref.json"
is "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])) == json.load(open(sys.argv[2])))' \
	"$T/ref.json" "$T/out/pred.json")" True "squad -c: the predictions run_squad.py's post-processing makes"
no_tmp_left "$T/out" "squad -c: no temporary file left"

# without --logits the features run at their real lengths, packed (a
# small --tokens makes several batches of uneven sizes): the same answers
run loom-eval squad -q -c "$T/hf" --data "$T/dev.json" --predictions "$T/packed.json" \
	--tokens 40 "${W[@]}"
is_rc 0 "squad -c, packed rows, --tokens 40"
is "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])) == json.load(open(sys.argv[2])))' \
	"$T/packed.json" "$T/out/pred.json")" True "  the padded run's predictions"

# other limits give other answers, again Python's
run loom-eval squad -q -c "$T/hf" --data "$T/dev.json" --predictions "$T/p2.json" \
	--logits "$T/l2.jsonl" "${W[@]}" --n-best 3 --max-answer 2 --batch 5 -j 1
is_rc 0 "squad -c --n-best 3 --max-answer 2 --batch 5"
is "$(cat "$err")" "" "squad -c -q: nothing on stderr"
/usr/bin/python3 "$PY" post "$T/dev.json" "$T/l2.jsonl" "$T/hf/vocab.txt" "${W[@]}" \
	--n-best 3 --max-answer 2 > "$T/ref2.json"
is "$(/usr/bin/python3 -c 'import json,sys; a = json.load(open(sys.argv[1])); print(a == json.load(open(sys.argv[2])), len(a["q1"].split()) <= 2)' \
	"$T/ref2.json" "$T/p2.json")" "True True" "--n-best 3 --max-answer 2: Python's answers, at most 2 tokens"
is "$(/usr/bin/python3 -c 'import json,sys
a = [json.loads(l) for l in open(sys.argv[1])]; b = [json.loads(l) for l in open(sys.argv[2])]
print(len(a) == len(b) and all(x["input_ids"] == y["input_ids"] and
      max(abs(p - q) for k in ("start_logits", "end_logits") for p, q in zip(x[k], y[k])) < 1e-3
      for x, y in zip(a, b)))' "$T/l2.jsonl" "$T/out/logits.jsonl")" True \
	"--batch 5 -j 1: the logits of --batch 8 (to rounding)"

run loom-eval squad -c "$T/hf" --data "$T/dev.json" --predictions "$T/p4.json" "${W[@]}" --progress
like "$err" "squad: [0-9]+ of 12 features, [0-9.]+ features/s, ETA [0-9:?]+" \
	"--progress: a progress line off a terminal, with the rate and ETA"
like "$err" "squad: [0-9]+ questions, 12 features, [0-9.]+ s" "  and the summary line"
ok "... the same predictions" cmp -s "$T/p4.json" "$T/out/pred.json"

# the tokenizer: --vocab when the directory has none
run loom-eval squad -c "$T/novocab" --data "$T/dev.json" --predictions "$T/p3.json" "${W[@]}"
is_rc 2 "no vocab.txt and no --vocab: usage error"
like "$err" "novocab holds no vocab.txt: give --vocab V" "... says so"
ok "... no predictions file" test ! -e "$T/p3.json"
run loom-eval squad -q -c "$T/novocab" --vocab "$T/hf/vocab.txt" --data "$T/dev.json" \
	--predictions "$T/p3.json" "${W[@]}"
is_rc 0 "--vocab V for a directory without one"
ok "... the same predictions" cmp -s "$T/p3.json" "$T/out/pred.json"

# casing: the checkpoint's tokenizer_config.json (do_lower_case) decides,
# with its vocab.txt or a --vocab; --lowercase/--cased win; the subcommand
# word may follow -c (git's way)
run loom-eval -v -c "$T/hf" squad --data "$T/dev.json" --predictions "$T/pv.json" "${W[@]}"
is_rc 0 "loom-eval -c DIR squad: the word after -c"
like "$err" "vocabulary .*hf \(.*hf/vocab.txt\): [0-9]+ WordPiece tokens \(ids 0\.\.[0-9]+\), lower-cased \(by tokenizer_config.json's do_lower_case\)" \
	"  -v: the checkpoint's do_lower_case decided"
ok "  the same predictions" cmp -s "$T/pv.json" "$T/out/pred.json"
cp -r "$T/hf" "$T/hfc"
echo '{"do_lower_case": false}' > "$T/hfc/tokenizer_config.json"
run loom-eval squad -v -c "$T/hfc" --data "$T/dev.json" --predictions "$T/pc.json" "${W[@]}"
like "$err" "cased \(by tokenizer_config.json's do_lower_case\)" "do_lower_case false: cased"
run loom-eval squad -v -c "$T/hfc" --vocab "$T/hf/vocab.txt" --data "$T/dev.json" \
	--predictions "$T/pc.json" "${W[@]}"
like "$err" "\), cased \(by the checkpoint's tokenizer_config.json\)" "  with --vocab too: the checkpoint's casing"
run loom-eval squad -v -c "$T/hfc" --lowercase --data "$T/dev.json" --predictions "$T/pl.json" "${W[@]}"
like "$err" "lower-cased \(by --lowercase\)" "--lowercase wins"
ok "  the lower-cased predictions" cmp -s "$T/pl.json" "$T/out/pred.json"
fails_with 2 "contradict each other" "--lowercase --cased" \
	loom-eval squad -c "$T/hfc" --cased --lowercase --data "$T/dev.json" --predictions "$T/x.json"

# refusals: one line, exit 1, no predictions file
fails_with 1 "nothere" "a missing checkpoint" \
	loom-eval squad -c "$T/nothere" --data "$T/dev.json" --predictions "$T/x.json"
make_frames 4 9 20 128 1 > "$T/frames"
loom-train -q -c tiny --steps 1 --save "$T/gpt" < "$T/frames"
fails_with 1 'config.json: model_type is "gpt2", not "bert"' "a GPT checkpoint" \
	loom-eval squad -c "$T/gpt" --data "$T/dev.json" --predictions "$T/x.json"
printf '{"version": "1.1", "data": [' > "$T/cut.json"
fails_with 1 "cut.json" "a malformed SQuAD file" \
	loom-eval squad -c "$T/hf" --data "$T/cut.json" --predictions "$T/x.json"
head -n 20 "$T/hf/vocab.txt" > "$T/small.txt"
fails_with 1 "small.txt: 20 tokens, but the model .*hf has vocab_size 46: not its tokenizer" \
	"a vocabulary of another size" \
	loom-eval squad -c "$T/hf" --vocab "$T/small.txt" --data "$T/dev.json" --predictions "$T/x.json" "${W[@]}"
mkdir "$T/mlm" && cp "$T/hf"/* "$T/mlm"
sed -i 's/BertForQuestionAnswering/BertForMaskedLM/' "$T/mlm/config.json"
/usr/bin/python3 - "$T/mlm/model.safetensors" <<'P'
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); h.pop("qa_outputs.weight"); h.pop("qa_outputs.bias")
end = max(v["data_offsets"][1] for k, v in h.items() if k != "__metadata__")
b = json.dumps(h).encode(); b += b" " * (-len(b) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(b)) + b + raw[8 + n:8 + n + end])
P
fails_with 1 "no question-answering head \(qa_outputs.weight\): a BertForMaskedLM checkpoint" \
	"a checkpoint without the QA head" \
	loom-eval squad -c "$T/mlm" --data "$T/dev.json" --predictions "$T/x.json" "${W[@]}"
fails_with 1 "hf is a BERT checkpoint \\(model_type \"bert\"\\), and this command takes a GPT's: for its SQuAD predictions run 'loom-eval squad -c [^ ]*/hf --data DEV.json --predictions OUT.json'\$" \
	"a BERT checkpoint for the GPT's loss: points to loom-eval squad -c" \
	loom-eval -c "$T/hf" < /dev/null
fails_with 1 "hf is a BERT checkpoint .* run 'loom-eval squad -c" "a BERT checkpoint to generate" \
	loom-eval generate -c "$T/hf" --prompt a -n 1
# a directory whose vocab.txt lacks [SEP] (its line renamed: same size):
# the message names that file and the token
mkdir "$T/nosep" && cp "$T/hf"/* "$T/nosep"
sed -i 's/^\[SEP\]$/[unused9]/' "$T/nosep/vocab.txt"
fails_with 1 "^loom-eval: '[^']*/nosep/vocab.txt' lacks \\[SEP\\], which a BERT's input needs \\(\\[CLS\\] question \\[SEP\\] context \\[SEP\\] \\[PAD\\]\\.\\.\\.\\)$" \
	"a BERT directory whose vocab.txt lacks [SEP]" \
	loom-eval squad -c "$T/nosep" --data "$T/dev.json" --predictions "$T/x.json" "${W[@]}"
sed 's/^\[CLS\]$/[unused9]/' "$T/hf/vocab.txt" > "$T/nocls.txt"
fails_with 1 "^loom-eval: --vocab: '[^']*/nocls.txt' lacks \\[CLS\\], which a BERT's input needs" \
	"--vocab V whose vocab.txt lacks [CLS]" \
	loom-eval squad -c "$T/hf" --vocab "$T/nocls.txt" --data "$T/dev.json" --predictions "$T/x.json" "${W[@]}"
ok "no predictions file after any refusal" test ! -e "$T/x.json"
no_tmp_left "$T" "... and no temporary file"

# usage
fails_with 2 "seq 128 is longer than the model's 64 positions" "--seq past the model's positions" \
	loom-eval squad -c "$T/hf" --data "$T/dev.json" --predictions "$T/x.json" --seq 128
fails_with 2 "need -c DIR" "--logits without -c" \
	loom-eval squad --data "$T/dev.json" --predictions "$T/pred.json" --logits "$T/l.jsonl"
run loom-eval squad --help
like "$out" "loom-eval squad -c DIR --data FILE.json --predictions OUT.json" "squad --help: the -c usage"

done_testing
