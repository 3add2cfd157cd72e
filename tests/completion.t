#!/usr/bin/env bash
# share/bash-completion/loom: subcommands, options and enumerated values from
# each tool's option table (--list-options; the values checked against each
# tool's --help, so help and table cannot drift),
# presets, loom-train's --set keys and values, and --opt=VALUE split by bash
# at '=' (COMP_WORDBREAKS).
. "$(dirname "$0")/lib.sh"
. "$SHARE/bash-completion/loom"


is "$(complete_words loom-bpe '')" "--help --version decode encode train" "loom-bpe: commands"
is "$(complete_words loom-bpe en)" "encode" "loom-bpe en -> encode"
is "$(complete_words loom-eval gen)" "generate" "loom-eval gen -> generate"
is "$(complete_words loom-eval generate --pro)" "--prompt" "loom-eval generate: its options"
is "$(complete_words loom-eval squad --pre)" "--predictions" "loom-eval squad: its options"
like <(complete_words loom-bpe train --)  '(^| )--vocab-size( |$)' "loom-bpe train --: train's options"
unlike <(complete_words loom-bpe train --) '(^| )--allow-special( |$)' "and not encode's"
is "$(complete_words loom-feed --dt)" "--dtype" "options from the tool's table"
is "$(complete_words loom-train -)" "$(complete_words loom-train -)" "(stable)"
like <(complete_words loom-train -) '(^| )-V( |$)' "short options too"

# enumerated values, and each list equals what the tool's --help documents
is "$(complete_words loom-bpe encode --format '')" "text u16 u32" "loom-bpe encode --format"
is "$(complete_words loom-bpe encode -f u)" "u16 u32" "loom-bpe encode -f u"
is "$(complete_words loom-bpe decode --docs '')" "lines nul whole" "loom-bpe decode --docs"
is "$(complete_words loom-bpe encode --docs j)" "jsonl" "loom-bpe encode --docs j"
is "$(complete_words loom-extract --format '')" "doc jsonl lines text" "loom-extract --format"
is "$(complete_words loom-shard --input-format '')" "text u16 u32" "loom-shard --input-format"
is "$(complete_words loom-feed --dtype '')" "auto u16 u32" "loom-feed --dtype"
for spec in "loom-extract||--format" "loom-bpe|encode|--format" "loom-bpe|decode|--format" \
	    "loom-bpe|encode|--docs" "loom-bpe|decode|--docs" "loom-bpe|train|--docs" \
	    "loom-shard||--input-format" "loom-feed||--dtype"; do
	IFS='|' read -r tool cmd opt <<< "$spec"
	# the option's help text: its line and the indented lines after it
	help=$($tool $cmd --help | awk -v o="$opt" 'index($0, o " ") { on = 1; print; next }
		on && /^                    / { print; next } { on = 0 }')
	for v in $(_loom_values "$tool" "$cmd" "$opt"); do
		ok "$tool $cmd $opt: '$v' is in its --help" grep -qw -- "$v" <<< "$help"
	done
done

# --format=VALUE: bash splits at '=', readline replaces the text after it
is "$(complete_words loom-bpe encode --format = u)" "u16 u32" "--format=u (split at '=')"
is "$(complete_words loom-bpe encode --format =)" "text u16 u32" "--format= (split at '=')"
is "$(complete_words loom-bpe encode --format=t)" "--format=text" "--format=t (not split)"

# presets, from share/presets beside the tools
want=$(cd "$SHARE/presets" && ls *.json | sed 's/\.json$//' | sort | tr '\n' ' ' | sed 's/ $//')
LOOM_SHARE=$SHARE
export LOOM_SHARE
is "$(complete_words loom-train -c '' | tr ' ' '\n' | grep -v / | sort -u | tr '\n' ' ' | sed 's/ $//')" \
	"$(printf '%s\n' $want $(compgen -f -- '') | sort -u | tr '\n' ' ' | sed 's/ $//')" \
	"loom-train -c: the presets (and files)"
is "$(complete_words loom-train --config gpt | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/ $//')" \
	"$(printf '%s\n' $want | grep '^gpt' | sort -u | tr '\n' ' ' | sed 's/ $//')" "--config gpt: the gpt presets"

# loom-train --set: keys from --print-config, values from loom-train
is "$(complete_words loom-train --set dec)" "decay= decay_power=" "--set dec -> decay= decay_power="
is "$(complete_words loom-train --set cool)" "cooldown_steps=" "--set cool -> cooldown_steps="
is "$(complete_words loom-train --set decay = '')" "constant cosine inverse_sqrt linear polynomial" \
	"--set decay=: --decay's values"
is "$(complete_words loom-train --set decay = co)" "constant cosine" "--set decay=co"
is "$(complete_words loom-train --set decay=cos)" "decay=cosine" "--set decay=cos (not split)"
is "$(complete_words loom-train --set lr = 1,decay = li)" "linear" "--set lr=1,decay=li"
is "$(complete_words loom-train --set recompute = t)" "true" "booleans"
is "$(complete_words loom-train --set loss_weighting = '')" "inverse_count none" "--set loss_weighting=: its values"
is "$(complete_words loom-train --set lr = 1,warm)" "1,warmup_proportion= 1,warmup_steps=" "--set lr=1,warm: the next key"
is "$(complete_words loom-train --set n_lay)" "n_layer=" "--set n_lay"

# files otherwise
touch "$T/run-a.jsonl" "$T/run-b.jsonl"
is "$(complete_words loom-plot "$T/run-")" "$T/run-a.jsonl $T/run-b.jsonl" "file arguments"
done_testing
