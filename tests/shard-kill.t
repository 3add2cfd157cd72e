#!/usr/bin/env bash
# loom-shard's output set is atomic: killed (SIGKILL, as kill -9) at every
# file-system step of a rerun over an existing output, or of a first run in
# an empty directory, the manifest names exactly the old set or exactly the
# new one, every file it names intact; the next run removes the leftovers.
# The kill points come from loom-shard's test hook LOOM_SHARD_TEST_KILL_AT=N
# (SIGKILL just before its N-th step of removing leftovers and committing);
# a kill -9 from outside while the shards are being written waits for a
# temporary file to hold data (no sleep race).
. "$(dirname "$0")/lib.sh"
cd "$T"

seq 1 3000 > in.txt
OLD="-f text -L 10 -n 2 --seed 1"      # the set in place
NEW2="-f text -L 10 -n 2 --seed 2"     # a new set under the same names
NEW1="-f text -L 10 -n 1 --seed 2"     # ... under other names
NEWR="-f text -L 10 -r 150 --seed 2"   # 2 shards of 150 (named when complete)

# shard DIR ARGS...: loom-shard -o DIR/x, run in DIR (the manifest records
# the command line, so the same arguments give the same manifest).
shard() { local d=$1; shift; (cd "$d" && exec loom-shard -q -o x "$@" ../in.txt); }
# The files the manifest in d names, in order (one "file" key a line, as
# loom-shard writes it; loom-feed below reads it as JSON).
named() { sed -n 's/^ *"file": "\(.*\)",$/\1/p' "$1/x.manifest.json"; }
# view D: the records of the set D's manifest names, shard by shard, or a
# line saying what is wrong with it.
view() {
	local d=$1 f
	[ -e "$d/x.manifest.json" ] || { echo "no manifest"; return; }
	f=$(named "$d") || { echo "bad manifest"; return; }
	(cd "$d" && loom-cat --ids $f 2>&1) || { echo "loom-cat fails"; return; }
	(cd "$d" && loom-index --verify --check -q $f >/dev/null 2>&1) || { echo "index differs"; return; }
	loom-feed -q -m "$d/x.manifest.json" --verify --text -b 1 -t 9 -s 0 >/dev/null 2>feed.err ||
		{ echo "loom-feed: $(cat feed.err)"; return; }
}
# state D: old, new, none (no manifest) or what is wrong
state() {
	view "$1" > v.txt
	if cmp -s v.txt old.view; then echo old
	elif cmp -s v.txt new.view; then echo new
	elif [ "$(cat v.txt)" = "no manifest" ]; then echo none
	else echo "mixed or broken: $(head -c 200 v.txt)"; fi
}

mkdir ref-old && shard ref-old $OLD && view ref-old > old.view
ok "the old set reads" test "$(wc -l < old.view)" -eq 299
is "$(ls -A ref-old | tr '\n' ' ')" "x-00000-of-00002.tfrecord x-00000-of-00002.tfrecord.index x-00001-of-00002.tfrecord x-00001-of-00002.tfrecord.index x.manifest.json " \
	"a run leaves its shards, indexes and manifest, nothing else"

# killed NEWARGS FROM: for N = 0, 1, ...: with d holding FROM ("old" set
# or "empty"), rerun with NEWARGS killed at step N and check the state;
# then run again to completion (with the old arguments, which also makes
# the old set of the next N) and check that nothing is left over.  Stops at
# the first N the run survives.
killed() {
	local new=$1 from=$2 n=0 s bad="" seen=" " again listing
	rm -rf ref-new && mkdir ref-new && shard ref-new $new && view ref-new > new.view
	if [ "$from" = old ]; then again=$OLD; listing=$(ls -A ref-old)
	else again=$new; listing=$(ls -A ref-new); fi
	rm -rf d && mkdir d
	[ "$from" = old ] && shard d $OLD
	while [ $n -lt 200 ]; do
		rc=0
		{ (cd d && LOOM_SHARD_TEST_KILL_AT=$n exec loom-shard -q -o x $new ../in.txt) 2>/dev/null || rc=$?; } 2>/dev/null
		s=$(state d)
		if [ $rc = 0 ]; then
			[ "$s" = new ] || bad="$bad; completed run: $s"
			break
		fi
		[ $rc = 137 ] || { bad="$bad; step $n: exit $rc"; break; }
		case "$from:$s" in
		old:old|old:new|empty:none|empty:new) seen="$seen$s ";;
		*) bad="$bad; killed at step $n: $s";;
		esac
		# The next run removes the leftovers.
		shard d $again
		s=$(state d)
		[ "$s" = "$([ "$from" = old ] && echo old || echo new)" ] || bad="$bad; rerun after step $n: $s"
		[ "$(ls -A d)" = "$listing" ] || bad="$bad; after step $n left: $(ls -A d | tr '\n' ' ')"
		[ "$from" = empty ] && rm -rf d && mkdir d
		n=$((n + 1))
	done
	is "${bad#; }" "" "$from set, rerun $new killed at each of its $n steps: old or new set, leftovers removed"
	case $from in
	old) like <(echo "$seen") ' old .* new ' "  kills landed before and after the commit point";;
	*) like <(echo "$seen") ' none .* new ' "  kills landed before and after the commit point";;
	esac
	ok "  ten steps or more" test $n -ge 10
}
killed "$NEW2" old
killed "$NEW1" old
killed "$NEWR" empty

# A kill -9 (and a SIGTERM) from outside while the shards are being
# written: loom-shard reads a FIFO that stays open, so it cannot finish
# before the signal.
rm -rf d && mkdir d && shard d $OLD
mkfifo fifo
# fd 3 writes the FIFO once loom-shard ($1) has opened it (and so holds
# its lock): fd 4, a reader and writer, lets both opens return at once, so
# a loom-shard that never starts fails the checks instead of hanging the
# test in a blocking open
writer() {
	exec 4<> fifo
	for _ in $(seq 1 6000); do
		ls -l "/proc/$1/fd" 2>/dev/null | grep -q '/fifo$' && break
		kill -0 "$1" 2>/dev/null || break
		sleep 0.01
	done
	exec 3> fifo 4<&-
}
for sig in KILL TERM; do
	(cd d && exec loom-shard -q -o x -f text -L 10 -n 2 --no-shuffle -m 1M ../fifo) &
	pid=$! tok=$(pid_token $!)
	writer "$pid"
	seq 1 200000 >&3
	for i in $(seq 1 6000); do
		[ -n "$(find d -name '.x-*.tmp-*' -size +1k)" ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.01
	done
	ok "SIG$sig: a temporary shard holds data" test -n "$(find d -name '.x-*.tmp-*' -size +1k)"
	signal_ours $sig "$tok" loom-shard
	wait "$pid" 2>/dev/null
	is "$?" "$([ $sig = KILL ] && echo 137 || echo 143)" "  the signal ended loom-shard"
	exec 3>&-
	is "$(state d)" old "  the old set, intact"
	[ $sig = TERM ] && no_tmp_left d "  SIGTERM: loom-shard removed its temporaries"
	shard d $OLD
	no_tmp_left d "  the next run removes the temporaries"
	is "$(ls -A d | tr '\n' ' ')" "$(ls -A ref-old | tr '\n' ' ')" "  and leaves its set only"
done

# Two runs on one prefix: the second is refused while the first holds the lock.
(cd d && exec loom-shard -q -o x -f text -L 10 -n 2 --no-shuffle ../fifo) &
pid=$!
writer "$pid"
run shard d $OLD
is_rc 1 "a second run on the prefix: exit 1"
is "$(cat "$err")" "loom-shard: another loom-shard is writing 'x' (it holds './.x.lock')" "  says why"
seq 1 3000 >&3
exec 3>&-
wait "$pid"
is "$?" 0 "the first run completes"
ok "  and removes its lock" test ! -e d/.x.lock
done_testing
