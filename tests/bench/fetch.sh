#!/usr/bin/env bash
# Bench: loom-fetch over loopback (lighttpd via pipelines/mirror.sh) against
# curl and wget on the same file, alone and followed by `sha1sum` (what a
# user of wget must run to verify a dump).  loom-fetch hashes while it
# streams and fsyncs before the rename, so the fair reference is
# "curl + sha1sum".  Figures are noisy on a shared 2-core machine: each is
# the best of 3 runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
MB=${FETCH_BENCH_MB:-128}
T=$(mktemp -d "${TMPDIR:-/tmp}/loom-bench-fetch.XXXXXX")
trap 'pipelines/mirror.sh stop "$T/state" >/dev/null 2>&1 || true; rm -rf "$T"' EXIT
mkdir -p "$T/www" "$T/dl"
head -c $((MB << 20)) /dev/urandom >"$T/www/big.bin"
SHA=$(sha1sum <"$T/www/big.bin" | cut -c1-40)
M=$(pipelines/mirror.sh start "$T/www" "$T/state")
best() { # command... ; prints best-of-3 wall seconds
	local b= t0 t1 s
	for _ in 1 2 3; do
		rm -f "$T/dl/"*
		t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N)
		s=$(echo "$t1 - $t0" | bc -l)
		if [ -z "$b" ] || [ "$(echo "$s < $b" | bc -l)" = 1 ]; then b=$s; fi
	done
	printf '%.3f' "$b"
}
curl_sha() { curl -sf -o "$T/dl/c.bin" "$M/big.bin" && sha1sum "$T/dl/c.bin" >/dev/null; }
wget_sha() { wget -q -O "$T/dl/w.bin" "$M/big.bin" && sha1sum "$T/dl/w.bin" >/dev/null; }
t_loom=$(best loom-fetch -q "$M/big.bin" -o "$T/dl/l.bin" --sha1 "$SHA")
t_curl=$(best curl -sf -o "$T/dl/c.bin" "$M/big.bin")
t_curl_sha=$(best curl_sha)
t_wget_sha=$(best wget_sha)
echo "loom-fetch --sha1 ${t_loom}s, curl ${t_curl}s, curl+sha1sum ${t_curl_sha}s, wget+sha1sum ${t_wget_sha}s ($MB MB over loopback)"
fig() { # name got ref target
	local r; r=$(echo "$2 / $3" | bc -l)
	local okk=ok; [ "$(echo "$r <= $4" | bc -l)" = 1 ] || okk=MISS
	printf 'FIGURE %s: %.2fx (target <= %s) %s\n' "$1" "$r" "$4" "$okk"
}
fig "loom-fetch (verified) vs curl+sha1sum" "$t_loom" "$t_curl_sha" 1.0
fig "loom-fetch (verified) vs wget+sha1sum" "$t_loom" "$t_wget_sha" 1.0
# not a target: on loopback the sha1 (not the network) is the floor
printf 'info: loom-fetch (verified) vs curl (unverified): %.2fx\n' "$(echo "$t_loom / $t_curl" | bc -l)"
