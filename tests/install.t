#!/usr/bin/env bash
# make install-only PREFIX= DESTDIR= (make install without the build): tools, man pages, share/ data, bash completion,
# pipelines/ and the docs; an installed tool finds its data (presets,
# vocabulary) from its own location, and the installed pipelines/retrain runs
# from another directory with a PATH that has no loom tool on it.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$TESTS/.." && pwd)
B=${LOOM_BUILD:-$ROOT/build}

# install-only: the build under test as it is (make install would rebuild it
# for PREFIX=/opt/loom, under the other tests running from it)
run make -s -C "$ROOT" B="$B" install-only PREFIX=/opt/loom DESTDIR="$T/inst"
is_rc 0 "make install-only"
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
man -l "$I/share/man/man1/loom-retrain.1" >/dev/null 2>"$T/man.err" || echo loom-retrain >> "$T/badman"
grep -q . "$T/man.err" && { echo "loom-retrain:"; cat "$T/man.err"; } >> "$T/badman"
is "$(cat "$T/badman" 2>/dev/null)" "" "every man page renders without warnings (loom-retrain.1 too)"

# bash completion: options come from the tool's --help
comp() { # words... -> completions
	PATH="$I/bin:$PATH" bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_loom_complete; printf "%s\n" "${COMPREPLY[@]}"' _ \
		"$I/share/bash-completion/completions/loom-shard" "$@"
}
like <(comp loom-shard --see) '^--seed$' "completes loom-shard --see to --seed"
is "$(comp loom-bpe en)" "encode" "completes the loom-bpe subcommand"
like <(comp loom-train --config ti) '^tiny$' "completes loom-train presets"

# pipelines/ in share/loom/pipelines (scripts executable), docs in share/doc/loom
L=$I/share/loom/pipelines
bad=
for f in "$ROOT"/pipelines/*; do
	n=${f##*/}
	[ -f "$L/$n" ] || bad="$bad missing:$n"
	if [ -x "$f" ]; then [ -x "$L/$n" ] || bad="$bad not-executable:$n"
	else [ ! -x "$L/$n" ] || bad="$bad executable:$n"; fi
done
is "$bad" "" "pipelines/ installed, scripts executable"
bad=
for f in README.md formats/*.md docs/*.md; do
	(cd "$ROOT" && ls $f) | while read -r g; do
		cmp -s "$ROOT/$g" "$I/share/doc/loom/$g" || echo "$g"; done
done > "$T/docs.bad"
is "$(cat "$T/docs.bad")" "" "README, formats/*.md and docs/*.md in share/doc/loom"
like "$ROOT/README.md" '^17 3 \* \* \* .*/usr/local/share/loom/pipelines/retrain --config' \
	"the README's cron line names the installed retrain"

# the installed retrain, run as cron would: from another directory, PATH without
# the tools, a file:// mirror laid out by the installed make-mirror.sh from the
# installed sample
mkdir -p "$T/cron/etc"
cd "$T/cron"
P0=/usr/bin:/bin
run env -i PATH=$P0 HOME="$T" "$L/make-mirror.sh" "$I/share/loom/sample" samplewiki 20260101 "$T/mirror"
is_rc 0 "installed make-mirror.sh"
cat > etc/retrain.conf <<CONF
WIKI=samplewiki
MIRROR=file://$T/mirror
STATE=../state
VOCAB=train
VOCAB_SIZE=300
SEQ=9
SHARDS=2
PRESET=tiny
STEPS=4
BATCH=4
THREADS=1
CONF
run env -i PATH=$P0 HOME="$T" "$L/retrain" --config etc/retrain.conf --dry-run
is_rc 0 "installed retrain --dry-run"
like "$out" "would build samplewiki-20260101 .*-f $L/wikipedia.mk .*LOOM_BIN=$I/bin/" \
	"uses the installed wikipedia.mk and tools"
run env -i PATH=$P0 HOME="$T" "$L/retrain" --config etc/retrain.conf -q
is_rc 0 "installed retrain: a real run"
like "$out" '^[0-9T:-]+Z retrain: samplewiki-20260101: data rebuilt, train from scratch: .* promoted ' \
	"builds, trains and promotes"
ok "the installed tools built the data" test -f "$T/cron/state/data/samplewiki-20260101/verified"
ok "best checkpoint" test -f "$T/cron/state/best/model.safetensors"
done_testing
