#!/usr/bin/env bash
# Write errors on stdout (and loom-train's --log) are errors: every tool with
# its stdout on a full disk (/dev/full) exits 1 with one line naming what it
# could not write and why (tools/cli.c checks stdout at exit), never 0 and
# never silently.
. "$(dirname "$0")/lib.sh"

[ -c /dev/full ] && [ -w /dev/full ] || skip_all "no writable /dev/full"
export OMP_NUM_THREADS=2
NOSPACE="No space left on device"

# Inputs for every tool: text, token ids, shards, frames, a log, a checkpoint.
/usr/bin/python3 -c "print(' '.join(str(i % 128) for i in range(2000)))" > "$T/tok.txt"
printf 'The history of loom.\nSecond document.\n' > "$T/a.txt"
loom-bpe encode -q "$T/a.txt" > "$T/a.ids"
loom-shard -q -f text -L 9 --no-shuffle -o "$T/d" "$T/tok.txt"
SHARD=$T/d-00000-of-00001.tfrecord
loom-feed -q -m "$T/d.manifest.json" -b 4 -t 8 -s 1 > "$T/frames"
loom-train -q -c tiny --steps 3 --save "$T/ck" --log "$T/log.jsonl" < "$T/frames"
ok "inputs made" test -s "$T/frames" -a -s "$T/log.jsonl" -a -L "$T/ck/latest"

# full NAME CMD...: CMD > /dev/full exits 1 with one line naming stdout (or
# the file) and the reason.
full() {
	local name=$1; shift
	rc=0; "$@" > /dev/full 2> "$err" < "$T/frames" || rc=$?
	is_rc 1 "$name > /dev/full: exit 1"
	like "$err" ": (cannot write to stdout|cannot write '-'|--log -): $NOSPACE\$" "  says why"
	is "$(wc -l < "$err")" 1 "  in one line"
}
full "loom-cat" loom-cat "$SHARD"
full "loom-cat --ids" loom-cat --ids "$SHARD"
full "loom-index --stats" loom-index -q --stats "$SHARD"
full "loom-feed (frames)" loom-feed -q -m "$T/d.manifest.json" -b 4 -t 8 -s 1
full "loom-feed --text" loom-feed -q -m "$T/d.manifest.json" -b 4 -t 8 -s 1 --text
full "loom-bpe encode" loom-bpe encode -q "$T/a.txt"
full "loom-bpe decode" loom-bpe decode -q "$T/a.ids"
full "loom-extract" loom-extract -q "$SHARE/sample/samplewiki-20260101-pages-articles.xml"
full "loom-plot (sparkline)" loom-plot "$T/log.jsonl"
full "loom-eval" loom-eval --checkpoint "$T/ck"
full "loom-train --print-config" loom-train -q -c tiny --print-config
full "loom-train --dry-run" loom-train -q -c tiny --dry-run
full "loom-train --log -" loom-train -q -c tiny --steps 3 --log -
full "loom-train --help" loom-train --help
full "loom-cat --version" loom-cat --version

# --log FILE on a full disk: one line naming the file, exit 1, no checkpoint
run loom-train -q -c tiny --steps 3 --log /dev/full --save "$T/full-ck" < "$T/frames"
is_rc 1 "loom-train --log /dev/full: exit 1"
is "$(cat "$err")" "loom-train: --log /dev/full: $NOSPACE" "  one line naming the file and the reason"
ok "  no checkpoint of a run whose log failed" test ! -e "$T/full-ck/latest"

# a closed pipe is not a write error (| head), with SIGPIPE ignored too
for ign in "" "trap '' PIPE;"; do
	rc=0
	(eval "$ign"; loom-cat "$SHARD" 2> "$err" | head -n 1 > /dev/null) || rc=$?
	is "$rc:$(cat "$err")" "0:" "${ign:+$ign }loom-cat | head: exit 0, nothing on stderr"
	rc=0
	(eval "$ign"; loom-feed -q -m "$T/d.manifest.json" -b 4 -t 8 -s 1 -e 0 --text 2> "$err" |
		head -n 1 > /dev/null) || rc=$?
	is "$rc:$(cat "$err")" "0:" "${ign:+$ign }loom-feed --epochs 0 --text | head: exit 0, nothing on stderr"
done
done_testing
