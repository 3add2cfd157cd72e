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
	 loom-index loom-cat loom-feed loom-train loom-eval "loom-eval generate" loom-plot \
	 "loom-squad prepare"; do
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
is "$(cat "$err")" "loom-index: --jobs: '0' is out of range [1, 1024]
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
run loom-bpe encode --list-options
like "$out" '^-f --format : u16 u32 text$' "--list-options: the enumerated values after ' : '"
done_testing
