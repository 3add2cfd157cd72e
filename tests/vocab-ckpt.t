#!/usr/bin/env bash
# Vocabularies that travel: a HuggingFace tokenizer.json that loom-train
# accepts (here: no token for byte 0x00, an added token with a space, an
# added token holding a printed-byte character) is stored in the checkpoint
# as vocab.json + merges.txt that read back as the same vocabulary; and a
# model whose vocab_size is larger than its tokenizer (a padded vocabulary)
# never generates an id the tokenizer lacks.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1

# ids 0..255: <|endoftext|> then the bytes 0x01..0xff (id = byte value),
# 256..261: merges, 262 "my special", 263 "Ġx" (its text, not a printed " x"),
# 264 "<pad>"; 265 ids in all
/usr/bin/python3 - <<'EOF'
import json
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
pr = {b: chr(c) for b, c in zip(bs, cs)}
vocab = {"<|endoftext|>": 0}
for b in range(1, 256):
    vocab[pr[b]] = b
merges = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["l", "o"], ["lo", "o"], ["loo", "m"]]
for a, b in merges:
    vocab[a + b] = len(vocab)
def added(i, c, special):
    return {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}
bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
tok = {"version": "1.0", "truncation": None, "padding": None,
       "added_tokens": [added(0, "<|endoftext|>", True), added(262, "my special", False),
                        added(263, "\u0120x", False), added(264, "<pad>", True)],
       "normalizer": None, "pre_tokenizer": bl, "post_processor": bl, "decoder": bl,
       "model": {"type": "BPE", "dropout": None, "unk_token": None,
                 "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                 "byte_fallback": False, "vocab": vocab, "merges": merges}}
json.dump(tok, open("tok.json", "w", encoding="utf-8"), ensure_ascii=False)
# training data: ids count up through 244..271, so the model learns id+1
# and, after "loom" (261), wants 262.. and then 265..271, which the
# tokenizer lacks (vocab_size 272 is padded)
print(" ".join(str(244 + i % 28) for i in range(6000)), file=open("ids.txt", "w"))
EOF
printf "the loom" > tl.txt
run loom-bpe encode -q --vocab tok.json --eos none --docs whole -f text tl.txt
is "$(cat "$out")" "116 257 32 261" "tok.json: 'the loom' is t he Ġ loom"

loom-shard -q -f text -L 9 -o d ids.txt || echo "loom-shard failed"
loom-feed -m d.manifest.json -b 4 -t 8 -s 1 -e 0 -q |
	loom-train -q -c tiny --set vocab_size=272 --vocab tok.json --steps 150 --save ck \
		--threads 1 2>train.err
is "$?" 0 "loom-train --vocab tok.json (no byte 0x00, added tokens) with a padded vocab_size"

# --- the checkpoint's vocabulary is tok.json's -------------------------------
ckv="ck/latest/vocab.json,ck/latest/merges.txt"
printf 'the loom my special \xc4\xa0x <pad> Ġx there<|endoftext|>\n' > text.txt
loom-bpe encode -q --vocab tok.json --allow-special -f text text.txt > ids.tok
run loom-bpe encode -q --vocab "$ckv" --allow-special -f text text.txt
is_rc 0 "the checkpoint's vocab.json + merges.txt load"
same_file "$out" ids.tok "  and encode as tok.json does (added tokens, specials, bytes)"
like ids.tok " 262 .* 263 .* 264 " "  (the added tokens are matched as their text)"
tr ' ' '\n' < ids.tok | grep -v '^$' > one.tok
run loom-bpe decode --vocab "$ckv" -f text one.tok
is "$(cat "$out")" "$(loom-bpe decode -q --vocab tok.json -f text one.tok)" "  and decode as tok.json does"
printf '\0' > nul.txt
run loom-bpe encode --vocab "$ckv" --docs whole -f text nul.txt
is_rc 1 "  byte 0x00 still has no token: exit 1"
is "$(cat "$err")" "loom-bpe: nul.txt: byte 0x00 at offset 0 has no token in the vocabulary" \
	"  one line naming the file, the byte and the offset"

# --- generation from the checkpoint alone -------------------------------------
run loom-eval generate --checkpoint ck --prompt 'the loom' -n 40 --temperature 0 --no-stop -j 1
is_rc 0 "generate with no --vocab, greedy, past the tokenizer's 265 ids"
is "$(cat "$err")" "" "  nothing on stderr"
like "$out" "^the loommy special" "  the model's continuation (262 = 'my special') is printed"
run loom-eval generate --checkpoint ck --vocab tok.json --prompt 'the loom' -n 40 --temperature 0 --no-stop -j 1
is "$(cat "$out")" "$(loom-eval generate --checkpoint ck --prompt 'the loom' -n 40 --temperature 0 --no-stop -j 1)" \
	"  the same text as with --vocab tok.json"
run loom-eval generate --checkpoint ck --prompt 'the loom' -n 200 --temperature 2 --seed 5 --no-stop -j 1
is_rc 0 "sampling (temperature 2) never picks an id the tokenizer lacks"
run loom-eval generate --checkpoint ck --prompt 'the loom' -n 200 --temperature 1 --top-k 20 --seed 5 --no-stop -j 1
is_rc 0 "  nor with --top-k 20 (more than the tokenizer's ids among the top 20)"

# --- loom-bpe decode of an id beyond the tokenizer ---------------------------
printf '261 270\n' > beyond.txt
run loom-bpe decode --vocab tok.json -f text beyond.txt
is_rc 1 "decode of id 270 with a 265-id tokenizer: exit 1"
is "$(cat "$err")" "loom-bpe: beyond.txt: id 270 at position 1 is not in the vocabulary (265 ids)" \
	"  one line naming the file, the id, its position and the vocabulary's size"

done_testing
