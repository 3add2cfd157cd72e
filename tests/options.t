#!/usr/bin/env bash
# The option tables (tools/cli.h): every tool's --help lists each long
# option once, exactly the options it accepts (its --list-options, what bash
# completion offers), each documented in its man page; a bad value is one
# line naming the option and a hint to --help (not the whole usage), exit 2.
. "$(dirname "$0")/lib.sh"
. "$SHARE/bash-completion/loom"

# the long options of --help's option lines ("  -x, --name ARG  help")
help_longs() { grep -oE '^ +(-[a-zA-Z], )?--[a-z0-9-]+' | sed 's/.*--//'; }

for t in loom-fetch loom-extract "loom-bpe encode" "loom-bpe decode" "loom-bpe train" loom-shard \
	 loom-index loom-cat loom-feed loom-train loom-eval "loom-eval generate" "loom-eval squad" \
	 loom-plot "loom-squad prepare"; do
	tool=${t%% *} cmd=${t#"$tool"}
	cmd=${cmd# }
	run $t --help
	help=$(help_longs < "$out")
	is "$(sort <<< "$help" | uniq -d)" "" "$t --help: each long option once"
	run $t --list-options
	is_rc 0 "$t --list-options"
	is "$(sed 's/ : .*//; s/.*--//' "$out" | sort)" "$(sort <<< "$help")" \
		"$t: --list-options lists the options of --help"
	ok "$t --help: no --list-options (hidden)" test -z "$(grep -x list-options <<< "$help")"
	man=$(sed 's/\\-/-/g' "$SHARE/man/man1/$tool.1")
	missing=
	for o in $help; do
		grep -qE -- "--$o([^a-z0-9-]|\$)" <<< "$man" || missing="$missing --$o"
	done
	is "$missing" "" "$t: every option in man/man1/$tool.1"
	is "$(complete_words $tool $cmd -- | tr ' ' '\n' | sed 's/^--//' | grep -v '^-' | sort)" "$(sort <<< "$help")" \
		"$t: completion offers the options of --help"
done

# a bad value: one line naming the option (the long name, even for -j) and
# a hint, exit 2; a bad option: getopt's line and the hint, exit 2
hint() { echo "Try '$1 --help' for more information."; }
run loom-index -j 0 x.tfrecord
is_rc 2 "loom-index -j 0: exit 2"
is "$(cat "$err")" "loom-index: --threads: '0' is out of range [1, 1024]
$(hint loom-index)" "names the option and the range, then the hint: two lines"
run loom-bpe encode --format nope
is_rc 2 "loom-bpe encode --format nope: exit 2"
is "$(sed -n 2p "$err")" "$(hint 'loom-bpe encode')" "a subcommand's hint names the subcommand"
is "$(wc -l < "$err")" 2 "  two lines"
run loom-bpe
is "$(cat "$err")" "loom-bpe: missing command (encode, decode or train)
$(hint loom-bpe)" "loom-bpe without a command: the error and the hint"
run loom-eval generate --prompt hi
is_rc 2 "loom-eval generate without --checkpoint: exit 2"
is "$(cat "$err")" "loom-eval: --checkpoint DIR is required
$(hint loom-eval)" "  one line and the hint, not the usage"
run loom-plot --smooth 1
is "$(head -1 "$err")" "loom-plot: --smooth: '1' is out of range [0, 0.999]" "a number out of its range"
run loom-shard --memory lots -o "$T/x"
is "$(head -1 "$err")" "loom-shard: --memory: 'lots' is not a size (e.g. 512M, 2G)" "a size"
run loom-cat --no-such-option
is_rc 2 "an unknown option: exit 2"
like "$err" "unrecognized option '--no-such-option'" "getopt names it"
is "$(sed -n 2p "$err")" "$(hint loom-cat)" "  then the hint"
is "$(wc -l < "$err")" 2 "  two lines"
run loom-train --threads
is_rc 2 "a missing argument: exit 2"
like "$err" "option '--threads' requires an argument" "getopt names it"

# one vocabulary (issue 27): --seq, -j/--threads, "(default: X)"; the old
# spellings still work but --help and --list-options do not list them
helps=
for t in loom-fetch loom-extract "loom-bpe encode" "loom-bpe decode" "loom-bpe train" loom-shard \
	 loom-index loom-cat loom-feed loom-train loom-eval "loom-eval squad" loom-plot \
	 "loom-squad prepare"; do
	helps="$helps$($t --help)"$'\n'
done
is "$(grep -E -- '--(seq-len|jobs)\b' <<< "$helps")" "" "no --help lists --seq-len or --jobs"
is "$(grep -E '^ +-[tL], --seq' <<< "$helps")" "" "  nor -t or -L"
is "$(grep -E '^ +-c, --check( |$)' <<< "$helps")" "" "  nor loom-index's -c"
is "$(grep -E '^ +-j, --' <<< "$helps" | grep -v -- '-j, --threads')" "" "every -j is --threads"
is "$(grep -E -- '--threads' <<< "$helps" | grep -vc -- '-j, --threads')" 0 "every --threads has -j"
is "$(grep -cE '\(default [^:)]|\[([0-9]+|all)\]$' <<< "$helps")" 0 "one default style: (default: X)"
is "$(loom-shard --list-options | grep -cE -- '--seq-len|^-L')" 0 "--list-options: no alias"
printf '1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n' > "$T/t.txt"
loom-shard -q -f text --seq 5 --no-shuffle -o "$T/new" "$T/t.txt"
loom-shard -q -f text -L 5 --no-shuffle -o "$T/old" "$T/t.txt"
loom-shard -q -f text --seq-len=5 --no-shuffle -o "$T/old2" "$T/t.txt"
same_file "$T/old-00000-of-00001.tfrecord" "$T/new-00000-of-00001.tfrecord" "loom-shard -L = --seq"
same_file "$T/old2-00000-of-00001.tfrecord" "$T/new-00000-of-00001.tfrecord" "  --seq-len= too"
run loom-feed -m "$T/new.manifest.json" -t 4 -b 1 -s 1 --text -q
is "$(cat "$out")" "$(loom-feed -m "$T/new.manifest.json" --seq 4 -b 1 -s 1 --text -q)" "loom-feed -t = --seq"
run loom-shard --seq-len 0 -o "$T/x"
is "$(head -1 "$err")" "loom-shard: --seq: '0' is out of range [1, 16777216]" "  an alias's bad value names the option"
run loom-index --jobs 2 --check "$T/new-00000-of-00001.tfrecord"
is_rc 0 "loom-index --jobs, --check"
run loom-index -j 2 -c "$T/new-00000-of-00001.tfrecord"
is_rc 0 "loom-index -c: still --check"
like "$err" "indexes match" "  and checks"
run loom-extract --jobs 0 "$T/t.txt"
is "$(head -1 "$err")" "loom-extract: --threads: '0' is out of range [1, 256]" "loom-extract --jobs = -j/--threads"
run loom-train -j 0
is "$(head -1 "$err")" "loom-train: --threads: '0' is out of range [1, 1024]" "loom-train -j = --threads"

# one subcommand mechanism: the word after options too, as git finds it
printf '{"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "a b", "qas": [%s]}]}]}\n' \
	'{"id": "q", "question": "x?", "answers": [{"text": "b", "answer_start": 2}]}' > "$T/e.json"
echo '{"q": "b"}' > "$T/p.json"
for order in "squad --data $T/e.json --predictions $T/p.json" \
	     "--data $T/e.json squad --predictions $T/p.json" \
	     "--data=$T/e.json --predictions $T/p.json squad"; do
	run loom-eval $order
	is_rc 0 "loom-eval $(sed "s|$T/||g" <<< "$order")"
	is "$(cat "$out")" '{"exact_match": 100.0, "f1": 100.0}' "  scores"
done
for order in "squad -c $T/nockpt --data $T/e.json --predictions $T/p2.json" \
	     "-c $T/nockpt squad --data $T/e.json --predictions $T/p2.json" \
	     "-c$T/nockpt -q squad --data $T/e.json --predictions $T/p2.json"; do
	run loom-eval $order
	is_rc 1 "loom-eval $(sed "s|$T/||g" <<< "$order"): squad's -c, in either order"
	like "$err" "nockpt" "  names the checkpoint"
done
run loom-eval -c "$T/nockpt" generate --prompt hi
is_rc 1 "loom-eval -c X generate: generate"
like "$err" "nockpt" "  names the checkpoint"
run loom-eval squad --lowercase --cased --data "$T/e.json" --predictions "$T/p.json"
is_rc 2 "loom-eval squad --lowercase --cased: exit 2"
is "$(head -1 "$err")" "loom-eval: --lowercase and --cased contradict each other: give one" "  one line"
run loom-bpe nope
is "$(head -1 "$err")" "loom-bpe: unknown command 'nope' (encode, decode or train)" "loom-bpe: an unknown command"
run loom-squad
is "$(head -1 "$err")" "loom-squad: missing command (prepare)" "loom-squad: the same table"
run loom-squad --help
like "$out" "^usage: loom-squad prepare" "loom-squad --help: the program's"
run loom-eval --help
like "$out" "^usage: loom-eval --checkpoint" "loom-eval --help: the evaluation's"
run loom-bpe encode --list-options
like "$out" '^-f --format : u16 u32 text$' "--list-options: the enumerated values after ' : '"
done_testing
