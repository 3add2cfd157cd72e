#!/usr/bin/env bash
# Manners shared by every tool: -V and --version, -h and --help, -v meaning
# --verbose everywhere (one line per event on stderr, none without -v or
# under -q), -q on every tool that prints a summary.
. "$(dirname "$0")/lib.sh"

TOOLS="loom-fetch loom-extract loom-bpe loom-shard loom-index loom-cat loom-feed loom-train loom-eval loom-plot loom-squad"
for t in $TOOLS "loom-bpe encode" "loom-bpe decode" "loom-bpe train" "loom-squad prepare"; do
	for v in -V --version; do
		run $t $v
		is_rc 0 "$t $v exits 0"
		like "$out" "^${t%% *} \(loom [0-9]+\.[0-9]+\.[0-9]+\)$" "$t $v names loom's version"
		is "$(wc -c < "$err")" 0 "$t $v: nothing on stderr"
	done
	run $t --help
	is_rc 0 "$t --help"
	# an option list line "  -v, --NAME": NAME must be verbose
	is "$(grep -oE '^ +-v, --[a-z-]+' "$out" | sed 's/.*--//' | grep -vx verbose)" "" "$t: -v can only mean --verbose"
	case $t in loom-bpe|loom-squad) ;; *) like "$out" '^ +-v, --verbose ' "$t has -v, --verbose";; esac
done

# every line for people goes through cli (one write, cli_prog's name, -q
# inside cli_summary): no tool writes to stderr itself
src=$(cd "$(dirname "$0")/../tools" && grep -n 'stderr' *.c | grep -v '^cli\.c:' |
	grep -E 'f(printf|puts|write)\(|putc\(' )
is "$src" "" "tools/: no fprintf(stderr) outside cli.c"

# loom-bpe's --vocab has no -v any more: -v is --verbose, so 'gpt2' is an input file
echo 'hello world' > "$T/in.txt"
cd "$T"
run loom-bpe encode -v gpt2
cd - > /dev/null
is_rc 1 "loom-bpe encode -v gpt2: -v is not --vocab"
like "$err" "cannot open 'gpt2'" "gpt2 is taken as an input file"
run loom-bpe encode --vocab gpt2 -f text "$T/in.txt"
is_rc 0 "--vocab still works"
is "$(cat "$out")" "31373 995 50256" "with GPT-2's ids"

# -q silences the summary of every tool that prints one
run loom-bpe encode -q -f text "$T/in.txt"
is "$(wc -c < "$err")" 0 "loom-bpe encode -q: no summary"
run loom-bpe encode -f text "$T/in.txt"
like "$err" '^loom-bpe: encode: 1 document ' "without -q: the summary"
for t in loom-fetch loom-extract "loom-bpe encode" "loom-bpe decode" "loom-bpe train" loom-shard \
	 loom-index loom-feed loom-train loom-plot "loom-squad prepare"; do
	run $t --help
	like "$out" '^ +-q, --quiet' "$t has -q, --quiet"
done
# -v, --verbose: each tool on a small input made here.  verbose RE CMD...
# runs CMD -v (stdin from $vin): exit 0, a stderr line matching RE, nothing
# of it on stdout; then CMD alone and CMD -v -q (unless noq=1): no such line.
verbose() {
	local re=$1 name; shift
	name="${*#"$T"/}"
	run "$@" -v < "${vin:-/dev/null}"
	is_rc 0 "$name -v"
	like "$err" "$re" "$name -v: /$re/"
	unlike "$out" "$re" "$name -v: not on stdout"
	run "$@" < "${vin:-/dev/null}"
	unlike "$err" "$re" "$name: no -v line without -v"
	if [ "${noq:-0}" = 0 ]; then
		run "$@" -v -q < "${vin:-/dev/null}"
		is "$(cat "$err")" "" "$name -v -q: nothing on stderr"
	fi
}
printf 'hello world\nsecond doc here\n' > "$T/two.txt"
verbose '^loom-bpe: vocabulary gpt2 \(.*/vocab/gpt2\): 50257 tokens \(ids 0\.\.50256\), 50000 merges, 1 special$' \
	loom-bpe encode -o "$T/ids.u16" "$T/two.txt"
verbose "^loom-bpe: encode: reading $T/two.txt\$" loom-bpe encode -o "$T/ids.u16" "$T/two.txt"
verbose "^loom-bpe: decode: $T/ids.u16: 7 ids\$" loom-bpe decode --docs lines -o "$T/back.txt" "$T/ids.u16"
same_file "$T/back.txt" "$T/two.txt" "(decode -v gives the text back)"
/usr/bin/python3 -c '
import random
r = random.Random(1)
for i in range(3000):
    print(" ".join("".join(r.choice("abcdefghijklmnop") for _ in range(r.randint(2, 7)))
                   for _ in range(8)))' > "$T/train.txt"
verbose "^loom-bpe: train: read $T/train.txt: $(wc -c < "$T/train.txt") bytes\$" \
	loom-bpe train -n 1400 -o "$T/voc" "$T/train.txt"
verbose '^loom-bpe: train: 1024 merges of at most 1143$' loom-bpe train -n 1400 -o "$T/voc" "$T/train.txt"
verbose "^loom-bpe: train: wrote $T/voc/encoder.json, $T/voc/vocab.bpe and $T/voc/tokenizer.json: 1143 merges, vocabulary 1400\$" \
	loom-bpe train -n 1400 -o "$T/voc" "$T/train.txt"

# 13 ids, 4 records of 3 in stream order, 2 per shard
echo '1 2 3 4 5 6 7 8 9 10 11 12 13' > "$T/ids.txt"
verbose "^loom-shard: $T/ids.txt: $(wc -c < "$T/ids.txt") bytes read, 13 tokens so far\$" \
	loom-shard -f text -L 3 -n 2 --no-shuffle -o "$T/sh/x" "$T/ids.txt"
S0=$T/sh/x-00000-of-00002.tfrecord
verbose "^loom-shard: shard x-00000-of-00002.tfrecord: 2 records, $(stat -c %s "$S0") bytes\$" \
	loom-shard -f text -L 3 -n 2 --no-shuffle -o "$T/sh/x" "$T/ids.txt"
verbose "^loom-index: $S0: 2 records, $(stat -c %s "$S0") bytes, index written to $S0.index\$" \
	loom-index "$S0" "$T/sh/x-00001-of-00002.tfrecord"
verbose "^loom-index: $S0: 2 records, $(stat -c %s "$S0") bytes, verified, index matches\$" \
	loom-index --verify --check "$S0"
noq=1 verbose "^loom-cat: $S0: 2 records\$" loom-cat "$S0"
noq=1 vin=$S0 verbose '^loom-cat: stdin: 2 records$' loom-cat
noq=1 verbose "^loom-cat: $S0: 2 records, read 1 to 2 through its index\$" loom-cat -r 1 "$S0"
verbose "^loom-feed: shard $S0: 2 records, index $S0.index\$" \
	loom-feed --manifest "$T/sh/x.manifest.json" -b 2 -t 2 -s 7 -e 2 --text
verbose '^loom-feed: epoch 1 starts at batch 2 \(its batches 2 to 3\), seed 7$' \
	loom-feed --manifest "$T/sh/x.manifest.json" -b 2 -t 2 -s 7 -e 2 --text
verbose '^loom-feed: epoch 0 resumes at batch 1 \(its batches 0 to 1\), seed 7$' \
	loom-feed --manifest "$T/sh/x.manifest.json" -b 2 -t 2 -s 7 -e 2 --text --skip-batches 1

cat > "$T/d.xml" <<'XML'
<mediawiki>
  <page><title>Alpha</title><ns>0</ns><id>1</id><revision><id>11</id><text xml:space="preserve">Alpha is a letter.</text></revision></page>
  <page><title>Talk:Alpha</title><ns>1</ns><id>2</id><revision><id>12</id><text xml:space="preserve">chat</text></revision></page>
  <page><title>Beta</title><ns>0</ns><id>3</id><redirect title="Alpha" /><revision><id>13</id><text xml:space="preserve">#REDIRECT [[Alpha]]</text></revision></page>
  <page><title>Gamma</title><ns>0</ns><id>4</id><revision><id>14</id><text xml:space="preserve">{{infobox}}</text></revision></page>
  <page><title>Delta (disambiguation)</title><ns>0</ns><id>5</id><revision><id>15</id><text xml:space="preserve">Delta may mean: x. {{disambig}}</text></revision></page>
  <page><title>Epsilon</title><ns>0</ns><id>6</id><revision><id>16</id><text xml:space="preserve">Tiny.</text></revision></page>
</mediawiki>
XML
for re in "page 2 'Talk:Alpha': namespace 1: skipped" "page 3 'Beta': redirect to 'Alpha': skipped" \
	  "page 4 'Gamma': empty after cleaning: skipped" "page 5 'Delta \(disambiguation\)': disambiguation: skipped" \
	  "page 6 'Epsilon': 5 characters, under --min-length: skipped"; do
	verbose "^loom-extract: $re\$" loom-extract --skip-disambiguation --min-length 10 "$T/d.xml"
done
is "$(cat "$out")" "Alpha is a letter." "(loom-extract -v: the article still on stdout)"

head -c 5000 /dev/urandom > "$T/src.bin"
sha1=$(sha1sum < "$T/src.bin" | cut -d' ' -f1)
verbose "^loom-fetch: fetching file://$T/src.bin to $T/dst.bin\$" loom-fetch "file://$T/src.bin" -o "$T/dst.bin"
head -c 2000 "$T/src.bin" > "$T/part.bin.part"
noq=1 verbose "^loom-fetch: file://$T/src.bin: 3000 bytes received in 1 attempt, resumed at byte 2000\$" \
	loom-fetch "file://$T/src.bin" -o "$T/part.bin"
same_file "$T/part.bin" "$T/src.bin" "(loom-fetch -v: resumed file is whole)"
run loom-fetch --sha1 "$sha1" "file://$T/src.bin" -o "$T/ok.bin"
verbose "^loom-fetch: $T/ok.bin: already present and (recorded as )?verified: not fetched\$" \
	loom-fetch --sha1 "$sha1" "file://$T/src.bin" -o "$T/ok.bin"

printf '{"step":1,"loss":3.5}\n{"step":2,"loss":3.1,"lr":0.1}\n{"note":"x"}\n{"step":3,"eval_loss":3.0}\n' > "$T/log.jsonl"
verbose "^loom-plot: $T/log.jsonl: 4 lines, 1 without the keys \(skipped\); points: loss 2, eval_loss 1\$" \
	loom-plot "$T/log.jsonl"
done_testing
