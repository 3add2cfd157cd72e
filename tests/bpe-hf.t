#!/usr/bin/env bash
# loom-bpe --vocab FILE.json: HuggingFace tokenizer.json (byte-level BPE).
#  - a small file by hand, laid out as HF's BpeTrainer writes it (specials
#    first, only the bytes it saw, merges as [a, b] pairs, no decoder);
#  - GPT-2 converted to tokenizer.json here (merges as "a b" strings and as
#    pairs): the same ids as --vocab gpt2, and as HF tokenizers on the
#    tricky strings (tests/data/tricky_expected.json);
#  - loom-bpe train's own tokenizer.json: the same ids as its encoder.json
#    + vocab.bpe;
#  - refusals that name what is unsupported or broken.
. "$(dirname "$0")/lib.sh"
PY=python3
cd "$T" || exit 1

# --- by hand ----------------------------------------------------------------
cat > hand.json <<'EOF'
{
  "version": "1.0",
  "added_tokens": [
    {"id": 0, "content": "<|endoftext|>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true},
    {"id": 9, "content": "<sep here>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": null,
  "decoder": null,
  "model": {
    "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
    "vocab": {"<|endoftext|>": 0, "a": 1, "b": 2, "c": 3, "Ġ": 4, "ab": 5, "abc": 6, "Ġa": 7, "Ċ": 8},
    "merges": [["a", "b"], ["ab", "c"], ["Ġ", "a"]]
  }
}
EOF
# "abc" -> a b c -> ab c -> abc;  " ab" -> Ġ a b -> Ġ ab (rank 0 before
# Ġ a);  " cab" -> Ġ c a b -> Ġ c ab;  " a" -> Ġa
printf 'abc ab cab a\n' > t1.txt
run loom-bpe encode --vocab hand.json --eos none -f text t1.txt
is_rc 0 "a hand-written HF-trainer-style tokenizer.json loads"
is "$(cat "$out")" "6 4 5 4 3 5 7" "  ids by merge rank: abc, Ġ ab, Ġ c ab, Ġa"
run loom-bpe encode -q --vocab hand.json -f text t1.txt
is "$(cat "$out")" "6 4 5 4 3 5 7 0" "  <|endoftext|> (added token, id 0) is the default --eos"
printf 'ab<sep here>c' > t2.txt
run loom-bpe encode -q --vocab hand.json --eos none --docs whole --allow-special -f text t2.txt
is "$(cat "$out")" "5 9 3" "  an added token with a space is matched as its text (--allow-special)"
printf '6 4 5 4 3 5 7 0\n' > ids.txt
run loom-bpe decode --vocab hand.json -f text ids.txt
is_rc 0 "decode with it"
is "$(cat "$out")" "abc ab cab a<|endoftext|>" "  gives the text back"

printf 'abc\nab cab\nabd a\n' > t3.txt
run loom-bpe encode --vocab hand.json -f text t3.txt
is_rc 1 "a byte without a token: exit 1"
is "$(cat "$err")" "loom-bpe: t3.txt: line 3: byte 0x64 'd' at offset 2 has no token in the vocabulary" \
	"  one line naming the file, line, byte and offset"
printf 'ab\tc' > t4.txt
run loom-bpe encode --vocab hand.json --docs whole -f text t4.txt
is "$(cat "$err")" "loom-bpe: t4.txt: byte 0x09 at offset 2 has no token in the vocabulary" \
	"  a control byte is named by its value"

# --- GPT-2 as tokenizer.json --------------------------------------------------
"$PY" - "$SHARE/vocab/gpt2" <<'EOF'
import json, sys
d = sys.argv[1]
vocab = json.load(open(d + "/encoder.json", encoding="utf-8"))
merges = [l.rstrip("\n") for l in open(d + "/vocab.bpe", encoding="utf-8")][1:]
merges = [m for m in merges if m]
bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
for name, ms in (("gpt2-str.json", merges), ("gpt2-pair.json", [m.split(" ") for m in merges])):
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": 50256, "content": "<|endoftext|>", "single_word": False,
                             "lstrip": False, "rstrip": False, "normalized": True, "special": True}],
           "normalizer": None, "pre_tokenizer": bl, "post_processor": bl, "decoder": bl,
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": "", "end_of_word_suffix": "",
                     "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": ms}}
    json.dump(tok, open(name, "w", encoding="utf-8"), ensure_ascii=False)
EOF
ok "GPT-2 converted to tokenizer.json (merges as strings and as pairs)" test -s gpt2-str.json -a -s gpt2-pair.json
# the tricky strings, one JSON line each, and the regression text
"$PY" - "$TESTS/data/tricky.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1], encoding="utf-8"))
open("tricky.jsonl", "w").write("".join(json.dumps({"text": x}) + "\n" for x in s))
EOF
for v in gpt2 gpt2-str.json gpt2-pair.json; do
	loom-bpe encode -q --vocab $v --docs jsonl --eos none -m 0 -f text tricky.jsonl > "tricky.$v" &&
	loom-bpe encode -q --vocab $v -f u32 "$TESTS/data/bpe-regress.txt" > "regress.$v" || echo "encode with $v failed"
done
same_file tricky.gpt2 tricky.gpt2-str.json "GPT-2 via tokenizer.json (\"a b\" merges): the tricky strings' ids = --vocab gpt2"
same_file tricky.gpt2 tricky.gpt2-pair.json "GPT-2 via tokenizer.json ([a, b] merges): the same"
same_file regress.gpt2 regress.gpt2-str.json "  and the regression text's ids"
run "$PY" - "$TESTS/data/tricky_expected.json" tricky.gpt2-pair.json <<'EOF'
import json, sys
exp = json.load(open(sys.argv[1], encoding="utf-8"))
got = open(sys.argv[2]).read().split("\n")
bad = [i for i, e in enumerate(exp) if got[i].split() != [str(x) for x in e["ids"]]]
print("mismatch", bad) if bad else print("all", len(exp))
EOF
is "$(cat "$out")" "all 66" "  = HuggingFace tokenizers' ids on all 66 tricky strings"

# --- loom-bpe train's own tokenizer.json ---------------------------------------
printf 'the cat sat on the mat\nthe rat ate the hat\n' > small.txt
loom-bpe train -q -n 280 -o own small.txt
loom-bpe encode -q --vocab own -f text small.txt > own.dir
run loom-bpe encode -q --vocab own/tokenizer.json -f text small.txt
is_rc 0 "loom-bpe train's tokenizer.json loads"
same_file "$out" own.dir "  the same ids as its encoder.json + vocab.bpe"

# --- refusals ------------------------------------------------------------------
refuse() { # name regex file
	run loom-bpe encode --vocab "$3" -f text t1.txt
	is_rc 1 "$1: exit 1"
	like "$err" "$2" "  $1: message"
}
sed 's/"normalizer": null/"normalizer": {"type": "Lowercase"}/' hand.json > norm.json
refuse "a normalizer" "^loom-bpe: 'norm.json': normalizer Lowercase: loom reads byte-level BPE without a normalizer$" norm.json
sed 's/"type": "ByteLevel", "add_prefix_space": false/"type": "Whitespace", "add_prefix_space": false/' hand.json > ws.json
refuse "another pre-tokenizer" "'ws.json': pre_tokenizer Whitespace, not ByteLevel" ws.json
sed 's/"add_prefix_space": false/"add_prefix_space": true/' hand.json > aps.json
refuse "add_prefix_space" "'aps.json': pre_tokenizer ByteLevel with add_prefix_space true" aps.json
sed 's/"type": "BPE"/"type": "WordPiece"/' hand.json > wp.json
# loom-bpe reads it with its WordPiece loader, which refuses the rest by name
refuse "a WordPiece model with a ByteLevel pre-tokenizer" "'wp.json': pre_tokenizer ByteLevel, not BertPreTokenizer" wp.json
sed 's/\["ab", "c"\]/["ab", "x"]/' hand.json > badmerge.json
refuse "a merge of an unknown token" "^loom-bpe: 'badmerge.json' model.merges\[1\]: merge \"ab x\": second part is not in the vocabulary$" badmerge.json
sed 's/\["ab", "c"\]/["ab", "c", "d"]/' hand.json > threemerge.json
refuse "a merge of three parts" "'threemerge.json': model.merges\[1\] is not \"A B\" or \[\"A\", \"B\"\]" threemerge.json
sed 's/"c": 3,/"c": 2,/' hand.json > dupid.json
refuse "two tokens with one id" "'dupid.json': entry \"[bc]\": duplicate id 2" dupid.json
head -c 500 hand.json > trunc.json
refuse "a truncated file" "'trunc.json': truncated JSON at line" trunc.json
# features loom does not implement: one line naming the file and the feature
sed 's/"post_processor": null/"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {}}/' hand.json > tmpl.json
refuse "a TemplateProcessing post-processor" "^loom-bpe: 'tmpl.json': post_processor TemplateProcessing adds tokens around the text, which loom does not \\(only a ByteLevel post-processor is read\\)$" tmpl.json
sed 's/"post_processor": null/"post_processor": {"type": "BertProcessing", "sep": ["<sep here>", 9], "cls": ["<|endoftext|>", 0]}/' hand.json > bertp.json
refuse "a BertProcessing post-processor" "'bertp.json': post_processor BertProcessing adds tokens" bertp.json
sed 's/"post_processor": null/"post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true}/' hand.json > blpost.json
run loom-bpe encode -q --vocab blpost.json --eos none -f text t1.txt
is "$(cat "$out")" "6 4 5 4 3 5 7" "a ByteLevel post-processor (offsets only) is read: the same ids"
sed 's/"dropout": null/"dropout": 0.1/' hand.json > dropout.json
refuse "BPE dropout" "^loom-bpe: 'dropout.json': model.dropout is set: BPE dropout is not supported \\(loom's merges are deterministic\\)$" dropout.json
sed 's/"dropout": null/"dropout": 0.0/' hand.json > dropout0.json
run loom-bpe encode -q --vocab dropout0.json --eos none -f text t1.txt
is "$(cat "$out")" "6 4 5 4 3 5 7" "dropout 0.0 is no dropout: read"
sed 's/"byte_fallback": false/"byte_fallback": false, "ignore_merges": true/' hand.json > ignm.json
refuse "ignore_merges" "'ignm.json': model.ignore_merges true is not supported" ignm.json
sed 's/"version": "1.0",/"version": "1.0", "truncation": {"direction": "Right", "max_length": 512, "strategy": "LongestFirst", "stride": 0},/' hand.json > trunc512.json
refuse "truncation" "^loom-bpe: 'trunc512.json': truncation is set: loom does not truncate the ids \\(want \"truncation\": null\\)$" trunc512.json
sed 's/"version": "1.0",/"version": "1.0", "padding": {"strategy": {"Fixed": 16}, "pad_id": 0},/' hand.json > pad.json
refuse "padding" "'pad.json': padding is set: loom does not pad the ids" pad.json
sed '0,/"rstrip": false/s//"rstrip": true/' hand.json > rstrip.json
refuse "an added token with rstrip" "^loom-bpe: 'rstrip.json': added_tokens\\[0\\] \"<\\|endoftext\\|>\": rstrip true is not supported \\(loom matches an added token as its text only\\)$" rstrip.json
sed 's/"type": "BPE"/"type": "Unigram"/' hand.json > uni.json
refuse "a Unigram model" "'uni.json': model type Unigram, not BPE" uni.json
sed 's/\["ab", "c"\]/"abc"/' hand.json > onepart.json
refuse "a merge of one part" "^loom-bpe: 'onepart.json' model.merges\\[1\\]: \"abc\": not a merge \"A B\"$" onepart.json
echo '{"model": {"vocab": {}}}' > novocab.json
refuse "no merges" "'novocab.json': not a tokenizer.json with model.vocab and model.merges" novocab.json
# fields of the wrong JSON type are refused by name, not taken for their
# default ("true" is a string, not true)
sed 's/"type": "BPE"/"type": 7/' hand.json > type7.json
refuse "model.type a number" "^loom-bpe: 'type7.json': model.type is not a string$" type7.json
sed 's/"add_prefix_space": false/"add_prefix_space": "true"/' hand.json > apsstr.json
refuse "add_prefix_space a string" "^loom-bpe: 'apsstr.json': pre_tokenizer.add_prefix_space is not true, false or null$" apsstr.json
sed 's/"use_regex": true}/"use_regex": 0}/' hand.json > rx0.json
refuse "use_regex a number" "^loom-bpe: 'rx0.json': pre_tokenizer.use_regex is not true, false or null$" rx0.json
sed 's/"continuing_subword_prefix": null/"continuing_subword_prefix": 1/' hand.json > csp.json
refuse "continuing_subword_prefix a number" "^loom-bpe: 'csp.json': model.continuing_subword_prefix is not a string$" csp.json
sed 's/"byte_fallback": false/"byte_fallback": false, "ignore_merges": "yes"/' hand.json > ignstr.json
refuse "ignore_merges a string" "^loom-bpe: 'ignstr.json': model.ignore_merges is not true, false or null$" ignstr.json
sed '0,/"rstrip": false/s//"rstrip": "false"/' hand.json > rstripstr.json
refuse "an added token's rstrip a string" "^loom-bpe: 'rstripstr.json': added_tokens\\[0\\] \"<\\|endoftext\\|>\": rstrip is not true, false or null$" rstripstr.json

done_testing
