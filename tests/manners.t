#!/usr/bin/env bash
# Manners shared by every tool: -V and --version, -h and --help, -v only
# ever meaning --verbose, -q on every tool that prints a summary.
. "$(dirname "$0")/lib.sh"

TOOLS="loom-fetch loom-extract loom-bpe loom-shard loom-index loom-cat loom-feed loom-train loom-eval loom-plot"
for t in $TOOLS "loom-bpe encode" "loom-bpe decode" "loom-bpe train"; do
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
done

# loom-bpe's --vocab has no -v any more: -v is not a silent alias for it
run loom-bpe encode -v gpt2
is_rc 2 "loom-bpe encode -v: not an option (was --vocab)"
like "$err" "invalid option -- 'v'" "getopt says which"
echo 'hello world' > "$T/in.txt"
run loom-bpe encode --vocab gpt2 -f text "$T/in.txt"
is_rc 0 "--vocab still works"
is "$(cat "$out")" "31373 995 50256" "with GPT-2's ids"

# -q silences the summary of every tool that prints one
run loom-bpe encode -q -f text "$T/in.txt"
is "$(wc -c < "$err")" 0 "loom-bpe encode -q: no summary"
run loom-bpe encode -f text "$T/in.txt"
like "$err" '^loom-bpe: encode: 1 documents' "without -q: the summary"
for t in loom-fetch loom-extract "loom-bpe encode" "loom-bpe decode" "loom-bpe train" loom-shard \
	 loom-index loom-feed loom-train loom-plot; do
	run $t --help
	like "$out" '^ +-q, --quiet' "$t has -q, --quiet"
done
done_testing
