#!/usr/bin/env bash
# loom-bpe encode / decode with WordPiece vocabularies: a small vocab.txt
# and tokenizer.json written here (ids worked out by hand with
# HuggingFace's BertTokenizerFast rules: lower-case and strip accents
# unless cased, split at white space and punctuation, greedy longest
# match with "##" continuations, [UNK] for a word with an unknown part),
# and the shipped bert-base-uncased on strings whose ids HuggingFace's
# tokenizers (npm) gave.
. "$(dirname "$0")/lib.sh"

ids() { od -An -tu"$1" -v "$2" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'; }

mkdir -p "$T/bert"
# line number - 1 = id
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' un '##aff' '##able' hello , \
	world '!' cafe Hello café . 東 > "$T/bert/vocab.txt"
#            0      1       2       3       4     5    6        7       8    9
#           10     11    12    13    14  15 16
printf 'UNAFFABLE Hello, world! Café.\n\n東京 hello\n' > "$T/a.txt"

# casing (loom_wordpiece_open): a bare vocab.txt with upper-case tokens is
# cased (lower-cased text could never give "Hello")
run loom-bpe encode --vocab "$T/bert/vocab.txt" -v -f text "$T/a.txt"
is_rc 0 "a bare vocab.txt with upper-case tokens"
is "$(head -1 "$out")" "1 13 9 10 11 1 15 3" "  is cased"
like "$err" "cased \(by its tokens \(upper-case ones\)\)" "  -v says what decided"

run loom-bpe encode --vocab "$T/missing.txt" "$T/a.txt"
is_rc 1 "a vocab.txt that is not there"
like "$err" "missing.txt'?: No such file" "names it (before asking for --lowercase/--cased)"
long=$(printf 'd%.0s' $(seq 5000))
fails_with 1 "path too long" "a vocab.txt path longer than loom-bpe's buffer" \
	loom-bpe encode --vocab "$T/$long.txt" --lowercase "$T/a.txt"
run loom-bpe encode --vocab "$T/bert/vocab.txt" --lowercase -f text "$T/a.txt"
is_rc 0 "encode with a vocab.txt, --lowercase"
is "$(cat "$out")" "$(printf '5 6 7 8 9 10 11 12 15 3\n16 1 8 3')" \
	"ids: un ##aff ##able hello , world ! cafe . [SEP]; 東 [UNK] hello [SEP] (empty line dropped)"
like "$err" "^loom-bpe: encode: 2 documents \(0 dropped\), 14 tokens, 45 bytes" "summary"
run loom-bpe encode --vocab "$T/bert" --lowercase -f text -q "$T/a.txt"
is "$(cat "$out")" "$(printf '5 6 7 8 9 10 11 12 15 3\n16 1 8 3')" "a directory holding vocab.txt"
run loom-bpe encode --vocab "$T/bert/vocab.txt" --cased -f text -q "$T/a.txt"
is "$(cat "$out")" "$(printf '1 13 9 10 11 1 15 3\n16 1 8 3')" \
	"--cased: [UNK] Hello , world ! [UNK] . [SEP] (Café kept, not café)"
cp -r "$T/bert" "$T/my-cased"
run loom-bpe encode --vocab "$T/my-cased/vocab.txt" -f text -q "$T/a.txt"
is "$(head -1 "$out")" "1 13 9 10 11 1 15 3" "a path saying 'cased' is cased"
cp -r "$T/bert" "$T/my-uncased"
run loom-bpe encode --vocab "$T/my-uncased" -f text -q "$T/a.txt"
is_rc 2 "a path saying 'uncased' with upper-case tokens: the casing must be given"
is "$(cat "$err")" "loom-bpe: --vocab $T/my-uncased/vocab.txt: its name says uncased, but it has upper-case tokens ('Hello'): say whether it lower-cases (--lowercase or --cased)
Try 'loom-bpe encode --help' for more information." "  one line naming a token, and the hint"
run loom-train -c bert-tiny --vocab "$T/my-uncased" --print-config
is "$rc:$(head -1 "$err")" "2:loom-train: --vocab $T/my-uncased/vocab.txt: its name says uncased, but it has upper-case tokens ('Hello'): say whether it lower-cases (--lowercase or --cased)" \
	"  loom-train says the same (one mapping of the hint, loom_wordpiece_casing_hint)"
echo '{"do_lower_case": true, "tokenizer_class": "BertTokenizer"}' > "$T/my-uncased/tokenizer_config.json"
run loom-bpe encode --vocab "$T/my-uncased" -f text -q "$T/a.txt"
is "$(head -1 "$out")" "5 6 7 8 9 10 11 12 15 3" "tokenizer_config.json's do_lower_case true lower-cases"
run loom-bpe encode --vocab "$T/my-uncased/vocab.txt" --cased -f text -q "$T/a.txt"
is "$(head -1 "$out")" "1 13 9 10 11 1 15 3" "  --cased overrides it (as BertTokenizer's do_lower_case=)"
run loom-bpe encode --vocab "$T/my-uncased" --lowercase --cased "$T/a.txt"
is_rc 2 "--lowercase --cased: exit 2"
is "$(head -1 "$err")" "loom-bpe: --lowercase and --cased contradict each other: give one" \
	"  one line, not the last one winning"
run loom-bpe encode --vocab "$T/my-uncased" --cased --lowercase "$T/a.txt"
is_rc 2 "--cased --lowercase: exit 2 too"
mkdir -p "$T/lc"
{ printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]'; sed -n '6,$p' "$T/bert/vocab.txt" | grep -v '[A-Z]'; } > "$T/lc/vocab.txt"
run loom-bpe encode --vocab "$T/lc/vocab.txt" -f text -q "$T/a.txt"
is_rc 0 "a bare vocab.txt without upper-case tokens"
is "$(head -1 "$out")" "5 6 7 8 9 10 11 12 14 3" "  lower-cases (bert-base-uncased's kind)"
mkdir -p "$T/lc-cased" && cp "$T/lc/vocab.txt" "$T/lc-cased/"
run loom-bpe encode --vocab "$T/lc-cased/vocab.txt" -f text -q "$T/a.txt"
is_rc 2 "named cased, without upper-case tokens: the casing must be given"

V=(--vocab "$T/my-uncased")
run loom-bpe encode "${V[@]}" -q "$T/a.txt"
is "$(ids 2 "$out")" "5 6 7 8 9 10 11 12 15 3 16 1 8 3" "default format off a terminal: u16"
run loom-bpe encode "${V[@]}" -q -f u32 --eos none "$T/a.txt"
is "$(ids 4 "$out")" "5 6 7 8 9 10 11 12 15 16 1 8" "u32, --eos none"
run loom-bpe encode "${V[@]}" -q -f text --eos 2 --docs whole "$T/a.txt"
is "$(cat "$out")" "5 6 7 8 9 10 11 12 15 16 1 8 2" "--docs whole, --eos 2"
printf 'Hello\nWORLD\0cafe\0' > "$T/n.txt"
run loom-bpe encode "${V[@]}" -q -f text --docs nul "$T/n.txt"
is "$(cat "$out")" "$(printf '8 10 3\n12 3')" "--docs nul: newlines inside a document are spaces"
printf '{"text": "Caf\\u00e9 world"}\n{"body": "x", "text": "un"}\n' > "$T/d.jsonl"
run loom-bpe encode "${V[@]}" -q -f text --docs jsonl "$T/d.jsonl"
is "$(cat "$out")" "$(printf '12 10 3\n5 3')" "--docs jsonl"
run loom-bpe encode "${V[@]}" -q -f text --allow-special "$T/a.txt"
is_rc 2 "--allow-special with WordPiece: usage error"
like "$err" "is WordPiece" "says why"
run loom-bpe encode --vocab gpt2 --lowercase "$T/a.txt"
is_rc 2 "--lowercase with a BPE vocabulary: usage error"
run loom-bpe encode --cased "$T/a.txt"
is_rc 2 "--cased with a BPE vocabulary: usage error"
like "$err" "'gpt2' is a byte-level BPE vocabulary \(they are for WordPiece\)" "says why"
run loom-bpe decode --vocab "$T/bert/vocab.txt" -f text <<< "5 6"
is "$(cat "$out")" "unaff" "decode: a vocab.txt needs no --lowercase/--cased"
run loom-bpe encode "${V[@]}" -v -f text "$T/a.txt"
like "$err" "vocabulary .*my-uncased .*17 WordPiece tokens \(ids 0\.\.16\), lower-cased" "-v: what was loaded"

# -j: the same bytes, with documents longer than a chunk (1 MB): cut at white space
/usr/bin/python3 - "$T/big.txt" <<'PY'
import sys
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for i in range(40):
        f.write(("Hello, world! " * (1 + i * 997 % 50)) + "\n")
    f.write("UNAFFABLE café " * 150000 + "\n")     # 2.4 MB, one document
    f.write("東京 " * 10 + "\n")
PY
run loom-bpe encode "${V[@]}" -q -j 1 "$T/big.txt"
cp "$out" "$T/big1.ids"
run loom-bpe encode "${V[@]}" -q -j 2 "$T/big.txt"
same_file "$out" "$T/big1.ids" "-j 2 gives the same ids as -j 1"
/usr/bin/python3 -c '
import sys
n = [1 + i * 997 % 50 for i in range(40)]
print(sum(4 * k + 1 for k in n) + 150000 * 4 + 1 + 20 + 1)' > "$T/want.n"
is "$(( $(wc -c < "$T/big1.ids") / 2 ))" "$(cat "$T/want.n")" \
	"a 2.4 MB document across chunks: every word whole (4 ids a repeat)"
run loom-bpe encode "${V[@]}" -q -f text --docs whole "$T/big.txt"
is "$(tr ' ' '\n' < "$out" | grep -c '^1$')" 10 "... no word split into [UNK] at a cut"

# --- decode (HuggingFace's WordPiece decoder)
run loom-bpe decode "${V[@]}" --docs lines "$T/big1.ids"
is_rc 0 "decode --docs lines"
run loom-bpe encode "${V[@]}" -q "$T/a.txt"
loom-bpe decode "${V[@]}" -q --docs lines < "$out" > "$T/back.txt"
is "$(cat "$T/back.txt")" "$(printf 'unaffable hello, world! cafe.\n東 [UNK] hello')" \
	"encode | decode --docs lines: ## glued, space before , ! . removed, a line a document"
loom-bpe decode "${V[@]}" -q < "$out" > "$T/whole.txt"
is "$(cat "$T/whole.txt")" "unaffable hello, world! cafe. [SEP] 東 [UNK] hello [SEP]" \
	"--docs whole: [SEP] is text"
loom-bpe decode "${V[@]}" -q --skip-special < "$out" > "$T/skip.txt"
is "$(cat "$T/skip.txt")" "unaffable hello, world! cafe. 東 hello" "--skip-special drops [SEP] and [UNK]"
echo "8 17" > "$T/bad.txt"
run loom-bpe decode "${V[@]}" -f text "$T/bad.txt"
is_rc 1 "an id past the vocabulary"
like "$err" "bad.txt: token 1: id 17 is not in the vocabulary \(17 tokens\)" "names the id and its position"
run loom-bpe decode --skip-special "$T/bad.txt"
is_rc 2 "--skip-special with a BPE vocabulary: usage error"

# --- tokenizer.json with a WordPiece model
/usr/bin/python3 - "$T/bert/vocab.txt" "$T" <<'PY'
import json, sys
toks = open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]
def tj(norm, **model):
    m = {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
         "max_input_chars_per_word": 100, "vocab": {t: i for i, t in enumerate(toks)}}
    m.update(model)
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": i, "content": t, "special": True} for i, t in enumerate(toks[:5])],
            "normalizer": norm, "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {"type": "TemplateProcessing"},
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True}, "model": m}
bert = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
        "strip_accents": None, "lowercase": True}
d = sys.argv[2]
json.dump(tj(bert), open(d + "/tok.json", "w"))
json.dump(tj(dict(bert, lowercase=False)), open(d + "/tok-cased.json", "w"))
json.dump(tj({"type": "NFKC"}), open(d + "/tok-nfkc.json", "w"))
json.dump(tj(bert, unk_token="<unk>"), open(d + "/tok-unk.json", "w"))
PY
run loom-bpe encode --vocab "$T/tok.json" -f text "$T/a.txt"
is_rc 0 "a WordPiece tokenizer.json"
is "$(cat "$out")" "$(printf '5 6 7 8 9 10 11 12 15 3\n16 1 8 3')" "tokenizer.json: the same ids as its vocab.txt"
run loom-bpe encode --vocab "$T/tok-cased.json" -f text -q "$T/a.txt"
is "$(head -1 "$out")" "1 13 9 10 11 1 15 3" "tokenizer.json: normalizer lowercase false"
run loom-bpe encode --vocab "$T/tok.json" --lowercase "$T/a.txt"
is_rc 2 "--lowercase with a tokenizer.json: usage error (the file says)"
run loom-bpe encode --vocab "$T/tok.json" --cased "$T/a.txt"
is_rc 2 "--cased with a tokenizer.json: usage error"
run loom-bpe encode --vocab "$T/tok-nfkc.json" "$T/a.txt"
is_rc 1 "another normalizer refused"
is "$(cat "$err")" "loom-bpe: '$T/tok-nfkc.json': normalizer NFKC, not BertNormalizer (or none)" "named, one line"
run loom-bpe encode --vocab "$T/tok-unk.json" "$T/a.txt"
is_rc 1 "another unk_token refused"
like "$err" "model.unk_token \"<unk>\" is not supported" "named"
run loom-bpe decode --vocab "$T/tok.json" --docs lines -f text <<< "5 6 7 3 8"
is "$(cat "$out")" "$(printf 'unaffable\nhello')" "decode with a tokenizer.json"

# --- the shipped bert-base-uncased (ids from HuggingFace tokenizers)
printf '%s\n' 'Hello, World! UNAFFABLE café 東京' "I don't know." \
	'Ünïcödé naïve résumé — “quotes” 42.5%' 'supercalifragilisticexpialidocious tokenization' > "$T/en.txt"
run loom-bpe encode --vocab bert-base-uncased -f text --eos none "$T/en.txt"
is_rc 0 "bert-base-uncased"
is "$(cat "$out")" "$(printf '%s\n' '7592 1010 2088 999 14477 20961 3468 7668 1879 1755' \
	'1045 2123 1005 1056 2113 1012' '27260 15743 13746 1517 1523 16614 1524 4413 1012 1019 1003' \
	'3565 9289 10128 29181 24411 4588 10288 19312 21273 10085 6313 19204 3989')" \
	"bert-base-uncased: HuggingFace's ids"
run loom-bpe encode --vocab bert-base-uncased -f text -q "$T/en.txt"
like "$out" "^7592 1010 2088 999 14477 20961 3468 7668 1879 1755 102$" "[SEP] (102) ends each document"
loom-bpe encode --vocab bert-base-uncased -q "$T/en.txt" |
	loom-bpe decode --vocab bert-base-uncased -q --docs lines > "$T/en.back"
is "$(cat "$T/en.back")" "$(printf '%s\n' 'hello, world! unaffable cafe 東 京' "i don ' t know." \
	'unicode naive resume — “ quotes ” 42. 5 %' 'supercalifragilisticexpialidocious tokenization')" \
	"bert-base-uncased decode: HuggingFace's text"
done_testing
