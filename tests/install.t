#!/usr/bin/env bash
# make install PREFIX= DESTDIR=: tools, man pages, share/ data, bash completion;
# an installed tool finds its data (presets, vocabulary) from its own location.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$TESTS/.." && pwd)
B=${LOOM_BUILD:-$ROOT/build}

run make -s -C "$ROOT" B="$B" install PREFIX=/opt/loom DESTDIR="$T/inst"
is_rc 0 "make install"
I=$T/inst/opt/loom
tools=$(cd "$ROOT/tools" && ls loom-*.c | sed 's/\.c$//')
missing=
for t in $tools; do
	[ -x "$I/bin/$t" ] || missing="$missing $t"
	[ -f "$I/share/man/man1/$t.1" ] || missing="$missing $t.1"
	[ -f "$I/share/bash-completion/completions/$t" ] || missing="$missing completion:$t"
done
is "$missing" "" "every tool, man page and completion installed"
ok "presets installed" test -f "$I/share/loom/presets/tiny.json"
ok "GPT-2 vocabulary installed" test -f "$I/share/loom/vocab/gpt2/vocab.bpe"
ok "man pages are not duplicated under share/loom" test ! -e "$I/share/loom/man"

# the installed loom-train finds its presets relative to itself, not the source tree
run env -u LOOM_SHARE "$I/bin/loom-train" --config tiny --print-config
is_rc 0 "installed loom-train resolves a preset"
like "$out" '"n_layer": *2' "from the installed tiny.json"
echo 'hello world' > "$T/in.txt"
run env -u LOOM_SHARE "$I/bin/loom-bpe" encode --vocab gpt2 --format text "$T/in.txt"
is_rc 0 "installed loom-bpe finds the GPT-2 vocabulary"
like "$out" '^31373 995 50256' "and encodes with it"

for t in $tools; do
	man -l "$I/share/man/man1/$t.1" >/dev/null 2>"$T/man.err" || echo "$t" >> "$T/badman"
	grep -q . "$T/man.err" && { echo "$t:"; cat "$T/man.err"; } >> "$T/badman"
done
is "$(cat "$T/badman" 2>/dev/null)" "" "every man page renders without warnings"

# bash completion: options come from the tool's --help
comp() { # words... -> completions
	PATH="$I/bin:$PATH" bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_loom_complete; printf "%s\n" "${COMPREPLY[@]}"' _ \
		"$I/share/bash-completion/completions/loom-shard" "$@"
}
like <(comp loom-shard --see) '^--seed$' "completes loom-shard --see to --seed"
is "$(comp loom-bpe en)" "encode" "completes the loom-bpe subcommand"
like <(comp loom-train --config ti) '^tiny$' "completes loom-train presets"
done_testing
