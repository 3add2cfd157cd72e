#!/usr/bin/env bash
# loom-bpe encode throughput against tiktoken's native core (npm
# tiktoken-node) and HuggingFace tokenizers (npm tokenizers), single thread,
# on ~100 MB of real text, after checking that the ids are equal to
# tiktoken's (npm tiktoken, the Rust core as WASM).  Also -j 2 vs -j 1,
# vocabulary load time and linearity on a run of one character.
# Figures are noisy: the machine is shared.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${LOOM_BUILD:-$ROOT/build}
SHARED=${LOOM_SHARED:-$ROOT/../shared}
W=$BUILD/bench-bpe
NPM=$BUILD/bench-npm
MB=${BPE_BENCH_MB:-100}
mkdir -p "$W"
command -v loom-bpe >/dev/null || { echo "bpe-encode: loom-bpe not on PATH (make first)"; exit 1; }

. tests/bench/lib.bash
CORPUS=$(corpus "$MB")
BYTES=$(wc -c < "$CORPUS")
echo "bpe-encode: corpus $BYTES bytes, $(wc -l < "$CORPUS") lines"

# --- reference encoders from npm
have_npm=1
if [ ! -d "$NPM/node_modules/tiktoken" ] || [ ! -d "$NPM/node_modules/tiktoken-node" ] ||
   [ ! -d "$NPM/node_modules/tokenizers" ]; then
	echo "bpe-encode: installing tiktoken, tiktoken-node, tokenizers from npm into $NPM"
	mkdir -p "$NPM"
	( cd "$NPM" && { [ -f package.json ] || npm init -y >/dev/null; } &&
	  npm install --no-audit --no-fund tiktoken tiktoken-node tokenizers >/dev/null 2>&1 ) ||
		{ echo "bpe-encode: cannot install the npm reference encoders (no network or npm?); reference figures skipped"; have_npm=0; }
fi
export NODE_PATH=$NPM/node_modules

# --- ids equal first
loom-bpe encode -q -j 2 --format u32 "$CORPUS" > "$W/loom.u32"
if [ "$have_npm" = 1 ]; then
	node tests/bench/bpe-ref.js ids "$CORPUS" "$W/ref.u32"
	if cmp -s "$W/loom.u32" "$W/ref.u32"; then
		echo "bpe-encode: ids equal to tiktoken gpt2 on all $(($(wc -c < "$W/ref.u32") / 4)) tokens"
	else
		echo "bpe-encode: IDS DIFFER from tiktoken: $(cmp "$W/loom.u32" "$W/ref.u32" | head -1)"
		exit 1
	fi
fi

# --- throughput, encoding to /dev/null, best of 2.  Single-thread figures
# use process CPU time (user + system) on both sides, which stays fair when
# the machine is shared; -j 2 vs -j 1 must use wall time.
best() { # wall|cpu command... -> best MB/s
	local how=$1 b=0 r t
	shift
	for _ in 1 2; do
		if [ "$how" = cpu ]; then
			/usr/bin/time -f '%U %S' -o "$W/time" "$@" >/dev/null 2>&1
			t=$(tail -n 1 "$W/time")
			r=$(awk -v t="$t" -v n="$BYTES" 'BEGIN { split(t, a, " "); s = a[1] + a[2]; print (s > 0) ? n / 1e6 / s : 0 }')
		else
			r=$("$@" 2>&1 >/dev/null | sed -n 's/.* \([0-9.]*\) MB\/s$/\1/p')
		fi
		b=$(awk -v a="$b" -v r="$r" 'BEGIN { print (r > a) ? r : a }')
	done
	echo "$b"
}
HOW=cpu
[ -x /usr/bin/time ] || { HOW=wall; echo "bpe-encode: /usr/bin/time missing: single-thread figures by wall time"; }
J1C=$(best $HOW loom-bpe encode -j 1 "$CORPUS")
J1=$(best wall loom-bpe encode -j 1 "$CORPUS")
J2=$(best wall loom-bpe encode -j 2 "$CORPUS")
echo "bpe-encode: loom-bpe -j 1: $J1C MB/s by $HOW time; by wall time -j 1: $J1 MB/s, -j 2: $J2 MB/s"
if [ "$have_npm" = 1 ]; then
	col=5; [ "$HOW" = wall ] && col=2
	TK=$(node tests/bench/bpe-ref.js tiktoken "$CORPUS" | awk -v c=$col '/^MBPS/ { print $c }')
	HF=$(RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
		node tests/bench/bpe-ref.js hf "$CORPUS" share/vocab/gpt2 | awk -v c=$col '/^MBPS/ { print $c }')
	echo "bpe-encode: tiktoken-node: $TK MB/s, HuggingFace tokenizers: $HF MB/s ($HOW time, encode only)"
	fig "loom-bpe encode -j 1 vs tiktoken-node" "$(awk -v a="$J1C" -v b="$TK" 'BEGIN { printf "%.2f", a / b }')" ">=" 2 x
	fig "loom-bpe encode -j 1 vs HuggingFace tokenizers" "$(awk -v a="$J1C" -v b="$HF" 'BEGIN { printf "%.2f", a / b }')" ">=" 5 x
fi
fig "loom-bpe encode -j 2 vs -j 1 (wall)" "$(awk -v a="$J2" -v b="$J1" 'BEGIN { printf "%.2f", a / b }')" ">=" 1.8 x

# --- vocabulary load: a whole run on empty input (CPU time when available)
: > "$W/empty"
if [ "$HOW" = cpu ]; then
	/usr/bin/time -f '%U %S' -o "$W/time" sh -c 'for i in 1 2 3 4 5; do loom-bpe encode -q --format text "$1"; done' sh "$W/empty"
	LOAD=$(awk '{ printf "%.0f", ($1 + $2) / 5 * 1000 }' "$W/time")
else
	t0=$(date +%s.%N)
	for _ in 1 2 3 4 5; do loom-bpe encode -q --format text "$W/empty"; done
	t1=$(date +%s.%N)
	LOAD=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b - a) / 5 * 1000 }')
fi
fig "loom-bpe GPT-2 vocabulary load (whole process, $HOW time)" "$LOAD" "<=" 100 " ms"

# --- linear time on a run of one character
head -c 1000000 /dev/zero | tr '\0' a > "$W/run1"
head -c 2000000 /dev/zero | tr '\0' a > "$W/run2"
tm() { local t0 t1; t0=$(date +%s.%N); loom-bpe encode -q --docs whole --format u32 "$1" > /dev/null; t1=$(date +%s.%N); awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'; }
T1=$(tm "$W/run1"); T2=$(tm "$W/run2")
fig "loom-bpe 2 MB vs 1 MB run of one letter" "$(awk -v a="$T2" -v b="$T1" 'BEGIN { printf "%.2f", a / b }')" "<=" 2.5 x
rm -f "$W/loom.u32" "$W/ref.u32"
