#!/usr/bin/env bash
# loom-shard output pinned byte for byte: the sha256 of every shard, index
# and manifest for a fixed generated input and seed, recorded before the
# speed work on the encoder, writer and shuffle.  Any change to these bytes
# is a format change (tokens -> TFRecord), not an optimisation.
. "$(dirname "$0")/lib.sh"
cd "$T"

# A fixed pseudo-random stream (64-bit LCG): u16 ids mixing 1-, 2- and
# 3-byte varints; u32 ids up to 2^32-1 (4- and 5-byte varints).
gen() {
	python3 - "$1" "$2" <<'PY'
import sys, struct
n = int(sys.argv[1]); w = sys.argv[2]; x = 12345
out = bytearray()
for i in range(n):
    x = (x * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
    r = x >> 33
    if w == 'H':
        v = [r & 0x7f, r & 0x3fff, r & 0xffff][i % 3]
    else:
        v = [r & 0x7f, r & 0x1fffff, r & 0xffffffff, (r & 0xfffffff) | 0x10000000][i % 4]
    out += struct.pack('<' + w, v)
sys.stdout.buffer.write(out)
PY
}
gen 300000 H > p.u16
gen 50000 I > p.u32
is "$(sha256sum < p.u16 | cut -c1-16)" "15314d9add6e7d5f" "generated u16 input is the pinned one"
is "$(sha256sum < p.u32 | cut -c1-16)" "4920942da744e89c" "generated u32 input is the pinned one"

# digest FILES...: one sha256 over the sha256 of each file
digest() { sha256sum "$@" | sha256sum | cut -c1-16; }
pin() { # name prefix want-shards+indexes want-manifest args...
	local name=$1 p=$2 want=$3 wantm=$4
	shift 4
	rm -f "$p"-* "$p".manifest.json
	run loom-shard -o "$p" "$@"
	is_rc 0 "$name: exit 0"
	is "$(digest "$p"-*)" "$want" "$name: shards and indexes pinned"
	is "$(digest "$p".manifest.json)" "$wantm" "$name: manifest pinned"
}
pin "--no-shuffle -n 4" a "c13cc09ddaa177e4" "102a408cbed9245f" --no-shuffle -n 4 p.u16
pin "--no-shuffle -L 100 -s 37 --keep-tail -r 500" b "1c6251054ae8ac8b" "9eb900fda3d60780" --no-shuffle -L 100 -s 37 --keep-tail -r 500 p.u16
pin "--no-shuffle --no-sha256 -n 2" c "ab95f2b2edaebbb7" "8230b7576ca808c4" --no-shuffle --no-sha256 -n 2 -L 300 p.u16
pin "shuffled -L 512 -n 3, in memory" d "e2429106b9afd86e" "23358246997395c2" --seed 7 -L 512 -n 3 p.u16
pin "shuffled -L 512 -n 3 --memory 1M" d "e2429106b9afd86e" "68ea734ec9868589" --seed 7 -L 512 -n 3 --memory 1M p.u16
pin "shuffled -L 64 -s 50 --keep-tail -r 300 --memory 1M -j 1" e "cc5a5789d893e875" "f8217e460844b1d6" --seed 99 -L 64 -s 50 --keep-tail -r 300 --memory 1M -j 1 p.u16
like "$err" 'spilled' "  the 1M run spilled"
pin "same with -j 2 in memory" e "cc5a5789d893e875" "2042112a2e28a980" --seed 99 -L 64 -s 50 --keep-tail -r 300 -j 2 p.u16
pin "u32 ids up to 2^32-1, shuffled -n 2" f "5a1a8bf1dfebb59f" "189ee85ab7e0deba" -f u32 --seed 3 -L 257 -n 2 p.u32
pin "u32 ids, --no-shuffle -n 1" g "4c766061c2236e2a" "292d16929b17d881" -f u32 --no-shuffle -L 1000 p.u32
done_testing
