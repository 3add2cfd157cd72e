#!/usr/bin/env bash
# More shards than the soft limit on open files (1024 by default; 256 here
# to stay small, 8 records a shard): every tool raises it to the hard limit
# (cli_init), so the set is written and read, not "Too many open files";
# and more than the hard limit: shard files past half the limit are opened
# for each read or write (lib/data/loom_tfrecord.c).
. "$(dirname "$0")/lib.sh"

N=300
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt $((N + 100)) ]; then
	skip_all "hard limit on open files is $hard, below $((N + 100))"
fi
python3 -c "print(' '.join(str(i % 128) for i in range(9 * 8 * $N)))" > "$T/tok.txt"
loom-shard -q -f text -L 9 --shards $N -o "$T/ref" "$T/tok.txt" &&
	loom-feed -m "$T/ref.manifest.json" -b 2 -t 8 -s 1 -e 1 --text -q > "$T/ref.txt"
is "$?" 0 "the reference set, under the default limit"
ulimit -Sn 256
is "$(ulimit -Sn)" 256 "soft limit lowered to 256"
run loom-shard -q -f text -L 9 --shards $N -o "$T/d" "$T/tok.txt"
is_rc 0 "loom-shard --shards $N under ulimit -Sn 256"
is "$(ls "$T"/d-*-of-00$N.tfrecord | wc -l)" $N "  $N shards written"
run loom-feed -m "$T/d.manifest.json" -b 2 -t 8 -s 1 -e 1 --text
is_rc 0 "loom-feed reads all $N of them"
is "$(wc -l < "$out")" "$(wc -l < "$T/ref.txt")" "  every batch ($(wc -l < "$T/ref.txt") records)"
same_file "$out" "$T/ref.txt" "  the same batches as under the default limit"

# The hard limit below the shard count too (ulimit -n sets both, as
# `ulimit -n 1024` with 1,100 shards): nothing can be raised, so neither
# tool may hold a descriptor per shard at once.
rm -f "$T"/d[.-]*
(
	ulimit -n 256
	echo "limits $(ulimit -Sn) $(ulimit -Hn)"
	loom-shard -q -f text -L 9 --shards $N -o "$T/d" "$T/tok.txt" && echo "shard ok" &&
		loom-feed -m "$T/d.manifest.json" -b 2 -t 8 -s 1 -e 1 --text -q > "$T/hard.txt" &&
		echo "feed ok"
) > "$T/hard.out" 2>&1
is "$(cat "$T/hard.out")" "limits 256 256
shard ok
feed ok" "loom-shard and loom-feed with $N shards under ulimit -n 256 (soft and hard)"
same_file "$T/hard.txt" "$T/ref.txt" "  the same batches as under the default limit"
for i in 00000 00$((N - 1)); do
	same_file "$T/d-$i-of-00$N.tfrecord" "$T/ref-$i-of-00$N.tfrecord" "  shard $i as written under the default limit"
done
done_testing
