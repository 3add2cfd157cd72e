#!/usr/bin/env bash
# loom-eval squad: official SQuAD v1.1 scores of a predictions file.  The
# expected lines are what evaluate-v1.1.py prints for these files (run by
# hand; its rules: lower-case, drop punctuation and a/an/the, split at white
# space; EM and token F1, the maximum over the gold answers).
. "$(dirname "$0")/lib.sh"

cat > "$T/data.json" <<'J'
{"version": "1.1", "data": [{"title": "T", "paragraphs": [
 {"context": "The Normans were in Normandy, a region in France. Café au lait costs 3 euros.",
  "qas": [
   {"id": "q1", "question": "Who?", "answers": [{"text": "The Normans", "answer_start": 0}, {"text": "Normans", "answer_start": 4}]},
   {"id": "q2", "question": "Where?", "answers": [{"text": "Normandy", "answer_start": 20}, {"text": "in Normandy, a region in France", "answer_start": 17}]},
   {"id": "q3", "question": "What?", "answers": [{"text": "Café au lait", "answer_start": 50}]},
   {"id": "q4", "question": "How much?", "answers": [{"text": "3 euros", "answer_start": 69}]}]},
 {"context": "Ünïcödé text: ΑΘΉΝΑ and naïve cafés.",
  "qas": [
   {"id": "q5", "question": "Name?", "answers": [{"text": "ΑΘΉΝΑ", "answer_start": 14}]},
   {"id": "q6", "question": "Who?", "answers": [{"text": "naïve cafés", "answer_start": 24}]}]}]}]}
J
cat > "$T/p1.json" <<'J'
{"q1": "the normans!", "q2": "a region in France", "q3": "CAFÉ AU LAIT.", "q5": "αθήνα", "q6": "an naïve cafe", "extra": "ignored"}
J
p1=$T/p1.json p1_before=$(cat "$T/p1.json")
cat > "$T/p2.json" <<'J'
{"q1": "Normans", "q2": "France", "q3": "au", "q4": "three euros", "q5": "", "q6": "cafés naïve"}
J

run loom-eval squad --data "$T/data.json" --predictions "$T/p1.json"
is_rc 0 "squad: scores a predictions file"
is "$(cat "$out")" '{"exact_match": 50.0, "f1": 70.83333333333333}' \
	"squad: evaluate-v1.1.py's line (q4 unanswered: 0)"
is "$(cat "$err")" "loom-eval: squad: 1 of 6 questions unanswered (scored 0)" \
	"squad: the unanswered count, one line on stderr"
run loom-eval squad --data "$T/data.json" --predictions "$T/p2.json"
is "$(cat "$out")" '{"exact_match": 16.666666666666668, "f1": 55.555555555555564}' \
	"squad: partial overlaps, Python's float repr"
run loom-eval squad -q --data "$T/data.json" --predictions "$T/p2.json"
is "$(cat "$err")" "" "squad -q: nothing on stderr"
echo '{}' > "$T/none.json"
run loom-eval squad --data "$T/data.json" --predictions "$T/none.json"
is "$(cat "$out")" '{"exact_match": 0.0, "f1": 0.0}' "squad: no predictions, 0.0 as Python prints it"
like "$err" "6 of 6 questions unanswered" "squad: all unanswered"

sed 's/"version": "1.1"/"version": "2.0"/' "$T/data.json" > "$T/v2.json"
run loom-eval squad --data "$T/v2.json" --predictions "$T/p1.json"
is_rc 0 "squad: another version is scored"
like "$err" 'v2.json: version "2.0", not 1.1' "squad: ... with a warning naming the file"

# Python lower-cases a word-final capital sigma to U+03C2 (Final_Sigma),
# skipping case-ignorable characters such as the apostrophe (ΑΣ'Σ: ασ'ς)
cat > "$T/greek.json" <<'J'
{"version": "1.1", "data": [{"title": "G", "paragraphs": [
 {"context": "ΣΊΣΥΦΟΣ ΑΣ'Σ", "qas": [
  {"id": "g1", "question": "?", "answers": [{"text": "ΣΊΣΥΦΟΣ", "answer_start": 0}]},
  {"id": "g2", "question": "?", "answers": [{"text": "ΑΣ'Σ", "answer_start": 8}]}]}]}]}
J
echo '{"g1": "σίσυφος", "g2": "ασ'"'"'ς"}' > "$T/gp1.json"
echo '{"g1": "σίσυφοσ", "g2": "ασ'"'"'σ"}' > "$T/gp2.json"
run loom-eval squad -q --data "$T/greek.json" --predictions "$T/gp1.json"
is "$(cat "$out")" '{"exact_match": 100.0, "f1": 100.0}' "squad: a final capital sigma lower-cases to U+03C2"
run loom-eval squad -q --data "$T/greek.json" --predictions "$T/gp2.json"
is "$(cat "$out")" '{"exact_match": 0.0, "f1": 0.0}' "squad: ... and so differs from U+03C3, as in Python"

# refusals: one line naming the file (and question), exit 1
echo '{"q1": 3}' > "$T/bad.json"
run loom-eval squad --data "$T/data.json" --predictions "$T/bad.json"
is_rc 1 "squad: a prediction that is not a string"
like "$err" "bad.json.*q1" "squad: names the file and the question"
is "$(wc -l < "$err")" 1 "squad: one line"
is "$(wc -c < "$out")" 0 "squad: no score printed"
printf '{"q1": "x",' > "$T/cut.json"
run loom-eval squad --data "$T/data.json" --predictions "$T/cut.json"
is_rc 1 "squad: predictions not JSON"
like "$err" "cut.json:1:" "squad: names the file and its line"
run loom-eval squad --data "$T/nothere.json" --predictions "$T/p1.json"
is_rc 1 "squad: a missing data file"
like "$err" "nothere.json" "squad: names it"
sed 's/"answer_start": 50/"answer_start": 51/' "$T/data.json" > "$T/off.json"
run loom-eval squad --data "$T/off.json" --predictions "$T/p1.json"
is_rc 1 "squad: an answer_start not at its text"
like "$err" "off.json: question q3" "squad: names the file and the question"

# usage
run loom-eval squad --data "$T/data.json"
is_rc 2 "squad: --predictions is required"
like "$err" "required" "squad: says so"
run loom-eval squad --data "$T/data.json" --predictions "$T/p1.json" -c "$T/ck"
is_rc 1 "squad -c: predicts with a checkpoint (tests/eval-squad-bert.t), here a missing one"
like "$err" "ck" "squad -c: names it"
is "$(cat "$p1")" "$p1_before" "squad -c: a failed prediction leaves the predictions file as it was"
run loom-eval squad --help
is_rc 0 "squad --help"
like "$out" "usage: loom-eval squad --data FILE.json --predictions P.json" "squad --help: its usage"

done_testing
