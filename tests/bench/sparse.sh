#!/usr/bin/env bash
# Block-sparse figures (issue 13), measured in this one run: the gpt2 MLP
# layer (768 -> 3072 -> GELU -> 768, B*T = 2048 rows) forward + backward
# (both matmuls' input and weight gradients, biases, GELU; the sparse side
# also packs both weights, as every optimizer step does) on THREADS
# threads, block-sparse (lib/kernels/loom_sparse.c) against the same layer
# dense on sgemm:
#  - sparsity 0.9, blocks of 16: target <= 0.25x the dense time;
#  - sparsity 0.5, blocks of 16: target <= 1.0x;
#  - sparsity 0.9 with blocks of 8 and 32, for information.
# Variants alternate within each of ROUNDS rounds and each keeps its best
# step: this machine is shared and its speed drifts.
# Env: ROUNDS (default 7), THREADS (2).
set -u
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-7}
THREADS=${THREADS:-2}
BIN=${LOOM_BUILD:-build}/bench/sparse_mlp
[ -x "$BIN" ] || { echo "$BIN not built (make bench)"; exit 1; }
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
out=$("$BIN" "$THREADS" "$ROUNDS") || exit 1
echo "$out" | grep -v '^best'
echo "$out" | awk '
/^best dense/ { dense = $3 }
/^best sparse/ { t[$3 " " $4] = $5 }
function figure(name, v, target) {
	printf "FIGURE %s: %.2fx (target <= %.2fx) %s\n", name, v, target, v <= target ? "ok" : "MISSED"
}
END {
	printf "best of rounds: dense %.1f ms", dense * 1e3
	for (k in t) { split(k, p, " "); printf ", bs %d density %s %.1f ms", p[1], p[2], t[k] * 1e3 }
	printf "\n"
	figure("sparse MLP 0.9 vs dense fwd+bwd (block 16)", t["16 0.10"] / dense, 0.25)
	figure("sparse MLP 0.5 vs dense fwd+bwd (block 16)", t["16 0.50"] / dense, 1.0)
	printf "FIGURE sparse MLP 0.9 vs dense fwd+bwd (block 8): %.2fx (for information)\n", t["8 0.10"] / dense
	printf "FIGURE sparse MLP 0.9 vs dense fwd+bwd (block 32): %.2fx (for information)\n", t["32 0.10"] / dense
}'
