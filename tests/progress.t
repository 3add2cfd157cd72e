#!/usr/bin/env bash
# One progress line per terminal: in `loom-feed | loom-train` loom-feed stays
# quiet when its stdout is a pipe (unless --progress); on a terminal (a pty
# from script(1)) it shows progress when its stdout is a file.
. "$(dirname "$0")/lib.sh"
command -v script >/dev/null || skip_all "script(1) (util-linux) not installed"

seq 0 2000 | tr '\n' ' ' > "$T/tok.txt"
run loom-shard -q -f text -L 9 --no-shuffle -n 2 -o "$T/d" "$T/tok.txt"
is_rc 0 "test shards"
FEED="loom-feed -m '$T/d.manifest.json' --batch 4 --seq 8 --seed 1"

# stderr (and stdin) on a pty; the typescript holds what the terminal saw
on_tty() { rc=0; script -qec "$1" "$2" >/dev/null 2>&1 </dev/null || rc=$?; }

on_tty "$FEED > '$T/frames.bin'" "$T/tty-file"
is_rc 0 "stdout to a file, stderr a terminal"
like "$T/tty-file" $'\rloom-feed: batch [0-9]+, epoch 0' "progress shown"
like "$T/tty-file" 'loom-feed: 55 batches of 4x9' "and the summary"

on_tty "$FEED | cat > '$T/piped.bin'" "$T/tty-pipe"
is_rc 0 "stdout a pipe, stderr a terminal"
unlike "$T/tty-pipe" 'loom-feed: batch' "no progress: the next stage's line wins"
like "$T/tty-pipe" 'loom-feed: 55 batches of 4x9' "the summary still ends the run"
same_file "$T/piped.bin" "$T/frames.bin" "same frames either way"

on_tty "$FEED --progress | cat > /dev/null" "$T/tty-forced"
like "$T/tty-forced" $'\rloom-feed: batch [0-9]+, epoch 0' "--progress shows it on a pipe too"

on_tty "$FEED -q | cat > /dev/null" "$T/tty-quiet"
unlike "$T/tty-quiet" "loom-feed:" "-q on a pipe: the terminal sees nothing from loom-feed"

# the whole pipeline on one terminal: loom-train's line (with its ETA) only
on_tty "$FEED --epochs 2 | loom-train -c tiny --steps 20 --set vocab_size=2048 --log-every 0" "$T/tty-train"
like "$T/tty-train" $'\rloom-train: step [0-9]+/20 loss [0-9.]+ [0-9]+ tok/s ETA [0-9]+:[0-9][0-9]' \
	"loom-train's progress line, with the ETA"
unlike "$T/tty-train" 'loom-feed: batch' "and not loom-feed's"
like "$T/tty-train" 'loom-train: done: 20 steps' "training ran"

# An update is one write(2), as a line is: the stages of a pipe share the
# terminal, and a line of loom-feed's written between the pieces of loom-
# train's update broke it (loom-feed's summary after "\rloom-train: ": the
# "ETA" check above failed once under load; strace's delays forced it).
# stderr is a SOCK_SEQPACKET socket here, which keeps writes apart: each is
# printed as one line, \r and \x1b escaped.
writes() { /usr/bin/python3 -c '
import socket, subprocess, sys
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
p = subprocess.Popen(sys.argv[1], shell=True, stderr=b, stdin=subprocess.DEVNULL)
b.close()
while True:
    m = a.recv(1 << 20)
    if not m:
        break
    print(m.decode("utf-8", "replace").encode("unicode_escape").decode("ascii"))
sys.exit(p.wait())' "$1"; }
run writes "$FEED --epochs 2 -q | loom-train -c tiny --steps 20 --set vocab_size=2048 --log-every 0 --progress"
is_rc 0 "loom-train --progress, stderr a socket"
like "$out" '^\\rloom-train: step 1/20 loss [0-9.]+ [0-9]+ tok/s ETA [0-9]+(:[0-9]{2})+\\x1b\[K$' \
	"  an update is one write"
run writes "$FEED --epochs 2 --progress -v > /dev/null"
like "$out" '^\\r\\x1b\[Kloom-feed: epoch 1 starts.*\\n$' "a -v line clears the update before it in the same write"

run loom-feed -m "$T/d.manifest.json" --batch 4 --seq 8 --seed 1 --progress
like "$err" $'\rloom-feed: batch 0, epoch 0' "--progress to a file: the first update is shown at once"
# a -v line clears the progress line first, as warnings do (epoch 1's note
# comes after batch 0's progress line, shown at once)
run loom-feed -m "$T/d.manifest.json" --batch 4 --seq 8 --seed 1 --epochs 2 --progress -v
is_rc 0 "--progress -v into a file"
like "$err" $'records/s\033\\[K\r\033\\[Kloom-feed: epoch 1 starts' \
	"the -v line clears the progress line before it"
unlike "$err" $'records/s\033\\[Kloom-feed:' "and never glues onto it"
done_testing
