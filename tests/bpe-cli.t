#!/usr/bin/env bash
# loom-bpe encode / decode: formats, document modes, round trips, bad input.
. "$(dirname "$0")/lib.sh"

V="$SHARE/vocab/gpt2"
printf 'hello world\nI'"'"'m here\n\nthird line' > "$T/a.txt"

run loom-bpe encode --format text "$T/a.txt"
is_rc 0 "encode text"
is "$(cat "$out")" "$(printf '31373 995 50256\n40 1101 994 50256\n17089 1627 50256')" \
	"ids of three documents (empty line dropped), <|endoftext|> after each"
like "$err" "^loom-bpe: encode: 3 documents \(0 dropped\), 10 tokens, 32 bytes, 0\.3125 tokens/byte, [0-9.]+ MB/s$" \
	"summary: documents, tokens, bytes, tokens per byte, MB/s"

run loom-bpe encode -q "$T/a.txt"
is_rc 0 "default format off a terminal"
is "$(od -An -tu2 -v "$out" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')" \
	"31373 995 50256 40 1101 994 50256 17089 1627 50256" "is u16 little-endian"
is "$(wc -c < "$err")" "0" "-q: no summary"

run loom-bpe encode -q --format u32 --eos none "$T/a.txt"
is "$(od -An -tu4 -v "$out" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')" \
	"31373 995 40 1101 994 17089 1627" "u32, --eos none"

run loom-bpe encode -q --format text --eos 198 --min-tokens 3 "$T/a.txt"
is "$(cat "$out")" "40 1101 994 198" "--min-tokens 3 drops short documents, --eos 198"
run loom-bpe encode --format text --min-tokens 3 "$T/a.txt"
like "$err" "1 document \(2 dropped\)" "summary counts dropped documents"

printf 'x<|endoftext|>y' > "$T/sp.txt"
run loom-bpe encode -q --docs whole --eos none --format text "$T/sp.txt"
is "$(cat "$out")" "87 27 91 437 1659 5239 91 29 88" "special token is plain text by default" 
run loom-bpe encode -q --docs whole --eos none --format text --allow-special "$T/sp.txt"
is "$(cat "$out")" "87 50256 88" "--allow-special recognises it"

# jsonl
printf '{"text": "hello world", "id": 1}\n\n{"title": "x", "text": "caf\\u00e9 \\n ok"}\n' > "$T/d.jsonl"
run loom-bpe encode -q --docs jsonl --format text "$T/d.jsonl"
is_rc 0 "jsonl"
is "$(cat "$out")" "$(printf '31373 995 50256\n66 1878 2634 220 198 12876 50256')" "jsonl text field, escapes decoded"
printf '{"body": "a"}\n' > "$T/e.jsonl"
run loom-bpe encode -q --docs jsonl --field body --format text "$T/e.jsonl"
is "$(cat "$out")" "64 50256" "--field"
printf '{"text": "a"}\n{"text": "b"\n' > "$T/bad.jsonl"
run loom-bpe encode --docs jsonl -o "$T/bad.out" "$T/bad.jsonl"
is_rc 1 "bad JSON line fails"
like "$err" "^loom-bpe: .*bad\.jsonl: line 2: not JSON" "names the file and line"
ok "no output file after a failure" test ! -e "$T/bad.out"
no_tmp_left "$T" "no temporary left"

# round trips
head -c 200000 /dev/urandom > "$T/rnd.bin"
loom-bpe encode -q --docs whole --eos none "$T/rnd.bin" > "$T/rnd.ids"
run loom-bpe decode -q "$T/rnd.ids"
same_file "$out" "$T/rnd.bin" "encode|decode of random bytes (invalid UTF-8, NULs) is byte-exact"
loom-bpe encode -q -j 2 --docs whole --eos none "$T/rnd.bin" > "$T/rnd2.ids"
same_file "$T/rnd.ids" "$T/rnd2.ids" "-j 2 gives the same ids"

printf 'one\ntwo  lines\n\tx\n' > "$T/l.txt"
loom-bpe encode -q "$T/l.txt" | loom-bpe decode -q --docs lines > "$T/l.out"
same_file "$T/l.out" "$T/l.txt" "encode | decode --docs lines gives the lines back"
printf 'one\nline\0two\0' > "$T/n.txt"
loom-bpe encode -q --docs nul --format u32 "$T/n.txt" | loom-bpe decode -q --docs nul --format u32 > "$T/n.out"
same_file "$T/n.out" "$T/n.txt" "--docs nul keeps newlines, round-trips"

# a long single line: cut inside the document, same ids with -j 1 and -j 3
awk 'BEGIN { for (i = 0; i < 90000; i++) printf "Word%d, jumps  over 日本語の文章です。 ", i % 977 }' > "$T/long.txt"
loom-bpe encode -q --format u32 "$T/long.txt" > "$T/long1.ids"
loom-bpe encode -q -j 3 --format u32 "$T/long.txt" > "$T/long3.ids"
same_file "$T/long1.ids" "$T/long3.ids" "a 4 MB line: -j 3 == -j 1"
loom-bpe decode -q --format u32 --docs lines "$T/long1.ids" > "$T/long.out"
printf '\n' >> "$T/long.txt"
same_file "$T/long.out" "$T/long.txt" "a 4 MB line round-trips"
awk 'BEGIN { for (i = 0; i < 200000; i++) printf "word%d <|endoftext|>", i % 7 }' > "$T/sp-long.txt"
for j in 1 2; do
	n=$(loom-bpe encode -q -j $j --docs whole --eos none --allow-special -f text "$T/sp-long.txt" |
		tr ' ' '\n' | grep -c '^50256$')
	is "$n" 200000 "a 3.8 MB document cut into chunks never splits a special token (-j $j)"
done
head -c 1048576 /dev/zero | tr '\0' a > "$T/aaa.txt"
run loom-bpe encode --docs whole --format text "$T/aaa.txt"
is_rc 0 "1 MB run of one letter"
like "$err" "1 document \(0 dropped\), 262145 tokens, 1048576 bytes" "encodes to 262144 tokens of aaaa + eos"
# a 1 MB line then another, from a file: the first chunk ends at a newline,
# nothing is carried to the next (UBSan under make asan: memcpy to NULL)
{ cat "$T/aaa.txt"; printf '\nhello world\n'; } > "$T/aaa2.txt"
bad=
for f in u16 u32 text; do
	for j in 1 2; do
		run loom-bpe encode -q -j $j -f $f "$T/aaa2.txt"
		[ "$rc" = 0 ] && [ ! -s "$err" ] || bad="$bad encode-$f-j$j:rc=$rc:$(head -c 200 "$err")"
		mv "$out" "$T/aaa2.$f"
		run loom-bpe decode -q -f $f --docs lines "$T/aaa2.$f"
		[ "$rc" = 0 ] && [ ! -s "$err" ] || bad="$bad decode-$f-j$j:rc=$rc:$(head -c 200 "$err")"
		cmp -s "$out" "$T/aaa2.txt" || bad="$bad $f-j$j:differs"
	done
done
is "$bad" "" "a 1 MB line then another: encode and decode, u16 / u32 / text, -j 1 / 2, round trip"

: > "$T/empty"
run loom-bpe encode --format text "$T/empty"
is_rc 0 "empty input"
is "$(wc -c < "$out")" "0" "no ids"
like "$err" "0 documents \(0 dropped\), 0 tokens, 0 bytes" "summary of nothing"

# decode errors
printf '31373 60000 995' > "$T/oov.txt"
run loom-bpe decode --format text "$T/oov.txt"
is_rc 1 "decode of an id outside the vocabulary fails"
like "$err" "oov\.txt: id 60000 at position 1 is not in the vocabulary \(50257 ids\)" "names the id and position"
printf 'abc' > "$T/odd.bin"
run loom-bpe decode "$T/odd.bin"
is_rc 1 "odd byte count for u16"
like "$err" "odd\.bin: input ends inside a u16 token \(1 stray byte at byte 2\)" "names the file, the truncation and its offset"
printf '12 x3' > "$T/nan.txt"
run loom-bpe decode --format text "$T/nan.txt"
is_rc 1 "non-number in text ids"
like "$err" "nan\.txt: line 1: token 'x3' is not a number" "names the file, the line and the token"

# bad vocabularies
mkdir -p "$T/v1" "$T/v2" "$T/v3" "$T/v4" "$T/v5"
head -c 100000 "$V/encoder.json" > "$T/v1/encoder.json"; cp "$V/vocab.bpe" "$T/v1/"
run loom-bpe encode --vocab "$T/v1" "$T/a.txt"
is_rc 1 "truncated encoder.json"
like "$err" "^loom-bpe: '.*v1/encoder.json': truncated JSON at line 1 column" "names the file and place"
printf 'not json at all\n' > "$T/v2/encoder.json"; cp "$V/vocab.bpe" "$T/v2/"
run loom-bpe encode --vocab "$T/v2" "$T/a.txt"
is_rc 1 "not JSON"
like "$err" "v2/encoder.json': not valid JSON" "says so"
sed 's/"hello": 31373/"hello": 995/' "$V/encoder.json" > "$T/v3/encoder.json"; cp "$V/vocab.bpe" "$T/v3/"
run loom-bpe encode --vocab "$T/v3" "$T/a.txt"
is_rc 1 "duplicate ids"
like "$err" "duplicate id 995" "names the id"
like "$err" 'entry "(hello|Ġworld)"' "and the entry"
cp "$V/encoder.json" "$T/v4/"; { cat "$V/vocab.bpe"; echo "Ġzzqx y"; } > "$T/v4/vocab.bpe"
run loom-bpe encode --vocab "$T/v4/encoder.json,$T/v4/vocab.bpe" "$T/a.txt"
is_rc 1 "merge part not in the vocabulary"
like "$err" "v4/vocab.bpe' line 50002: merge \"Ġzzqx y\": first part is not in the vocabulary" "names file, line, merge"
sed 's/"<|endoftext|>": 50256/"<|endoftext|>": 70000/' "$V/encoder.json" > "$T/v5/encoder.json"; cp "$V/vocab.bpe" "$T/v5/"
run loom-bpe encode --vocab "$T/v5" --format u16 "$T/a.txt"
is_rc 1 "ids beyond u16"
like "$err" 'entry "<\|endoftext\|>" has id 70000, beyond 65535; use --format u32' "names the entry"
run loom-bpe encode -q --vocab "$T/v5" --format u32 "$T/a.txt"
is_rc 0 "the same vocabulary works with u32"
run loom-bpe encode --vocab "$T/nonexistent" "$T/a.txt"
is_rc 1 "missing vocabulary"
like "$err" "nonexistent" "named"

# a tiktoken rank file made from GPT-2's vocabulary gives GPT-2's ids
python3 - "$V/encoder.json" "$T/gpt2.tiktoken" <<'PY'
import base64, json, sys
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
dec = {chr(c): b for b, c in zip(bs, cs)}
enc = json.load(open(sys.argv[1], encoding="utf-8"))
with open(sys.argv[2], "w") as f:
    for tok, i in sorted(enc.items(), key=lambda kv: kv[1]):
        if tok != "<|endoftext|>":
            f.write("%s %d\n" % (base64.b64encode(bytes(dec[c] for c in tok)).decode(), i))
PY
loom-bpe encode -q --format u32 "$T/long.txt" > "$T/long-gpt2.ids"
run loom-bpe encode -q --vocab "$T/gpt2.tiktoken" --format u32 "$T/long.txt"
is_rc 0 "--vocab FILE.tiktoken"
same_file "$out" "$T/long-gpt2.ids" "the same ids as encoder.json + vocab.bpe (<|endoftext|> added as 50256)"
printf 'YQ== 0\nnot base64!! 1\n' > "$T/bad.tiktoken"
run loom-bpe encode --vocab "$T/bad.tiktoken" "$T/a.txt"
is_rc 1 "bad .tiktoken file"
like "$err" "bad.tiktoken' line 2" "names the file and line"

# usage
run loom-bpe encode --help
is_rc 0 "--help"
like "$out" "usage: loom-bpe encode" "usage on stdout"
run loom-bpe encode --format u8 "$T/a.txt"
is_rc 2 "bad --format"
run loom-bpe encode --eos 99999 "$T/a.txt"
is_rc 2 "--eos outside the vocabulary"
run loom-bpe frobnicate
is_rc 2 "unknown command"
run loom-bpe encode "$T/missing.txt"
is_rc 1 "missing input"
like "$err" "cannot open '.*missing.txt'" "named"
done_testing
