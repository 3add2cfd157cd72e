#!/usr/bin/env bash
# loom-train --dry-run's memory plan per rank (data_parallel, sharding) and
# --memory-per-rank: the ranks a model needs, the smallest data x tensor-
# parallel grid, the largest preset that fits.
. "$(dirname "$0")/lib.sh"

M24="-c gpt2 --set n_layer=24,n_embd=1024,n_head=16"
plan() { sed -n '/^memory plan/,/^  total/p' "$out"; }

# --- one rank: the plan of one process, whatever the sharding ---------------
run loom-train $M24 --set sharding=weights --dry-run
is_rc 0 "gpt2-medium shape, 1 rank, sharding=weights"
is "$(plan)" "memory plan at micro_batch 8 x seq_len 1024 (fp32):
  parameters      1.4 GB
  gradients       1.4 GB
  AdamW m + v     2.8 GB
  activations     7.5 GB (1.3 GB with recompute)
  total           13.1 GB (7.0 GB with recompute)" "  the whole model on the one rank"

# --- sharding=weights on 4 ranks ----------------------------------------------
run loom-train $M24 --set sharding=weights,data_parallel=4 --dry-run
is_rc 0 "4 ranks, sharding=weights"
is "$(plan)" "memory plan per rank of 4 (sharding=weights) at micro_batch 8 x seq_len 1024 (fp32):
  parameters      354.8 MB (1/4 of 1.4 GB)
  gradients       354.8 MB (1/4 of 1.4 GB)
  AdamW m + v     709.6 MB (1/4 of 2.8 GB)
  gathered layers 420.1 MB (full copies: at the LM head, the embeddings' weights and gradients)
  activations     7.5 GB (1.3 GB with recompute)
  total           9.3 GB (3.2 GB with recompute)" \
	"  a quarter of weights, gradients and moments, the gathered units, the embedding output's slot"
# with a vocabulary of 1024, the embeddings and two layers' weights and
# gradients are the larger set
run loom-train $M24 --set sharding=weights,data_parallel=4,vocab_size=1024 --dry-run
like "$out" "^  gathered layers 210\.0 MB \(full copies: the embeddings, 2 layers' weights and 2 layers' gradients\)$" \
	"  vocab 1024: the embeddings, 2 layers' weights and gradients (2.1M + 4 x 12.6M floats)"

# --- sharding=optimizer on 4 ranks (ZeRO-1) ---------------------------------
run loom-train $M24 --set data_parallel=4 --dry-run
is "$(plan)" "memory plan per rank of 4 (sharding=optimizer) at micro_batch 8 x seq_len 1024 (fp32):
  parameters      1.4 GB
  gradients       1.4 GB
  AdamW m + v     709.6 MB (1/4 of 2.8 GB)
  gradient shard  354.8 MB (the reduce-scattered 1/4 of the gradients)
  activations     7.5 GB (1.3 GB with recompute)
  total           11.4 GB (5.2 GB with recompute)" "4 ranks, sharding=optimizer: whole weights and gradients"
like "$out" "^time per step: .* \\(4 ranks at this machine's rate, communication not counted; at MFU " \
	"  the time per step shared by the 4 ranks"
run loom-train -c bert-base --set data_parallel=2 --dry-run
like "$out" '^  gradient shard  217\.8 MB \(the reduce-scattered 1/2 of the gradients\)$' \
	"a BERT on 2 ranks: its moments and gradient shard halved"

# --- --memory-per-rank ---------------------------------------------------------
run loom-train -c gpt3-2.7B --set sharding=weights --dry-run --memory-per-rank 8GiB
is_rc 0 "gpt3-2.7B --memory-per-rank 8GiB"
like "$out" '^gpt3-2\.7B needs 8 ranks of 8 GiB \(sharding=weights, recompute\): 8\.4 GB per rank$' \
	"  8 ranks of 8 GiB"
like "$out" '^largest GPT preset that fits 1 rank of 8 GiB: gpt3-125M \([0-9.]+ GB per rank; sharding=weights\)$' \
	"  the largest preset on 1 rank: gpt3-125M"
run loom-train -c gpt3-2.7B --set sharding=weights --dry-run --memory-per-rank 8GB
like "$out" '^gpt3-2\.7B needs 9 ranks of 8 GB \(sharding=weights, recompute\)' "8GB is 10^9 bytes: 9 ranks"
run loom-train -c gpt3-2.7B --set sharding=weights,data_parallel=8 --dry-run --memory-per-rank 8GiB
like "$out" '^largest GPT preset that fits 8 ranks of 8 GiB: gpt3-2\.7B ' "  on 8 ranks: gpt3-2.7B"
run loom-train -c gpt3-2.7B --set sharding=weights,data_parallel=7 --dry-run
like "$out" '^  total +14\.4 GB \(9\.2 GB with recompute\)$' "  on 7 ranks 9.2 GB (the preset recomputes): more than 8 GiB"
run loom-train -c gpt2 --dry-run --memory-per-rank 16G
like "$out" '^gpt2 needs 1 rank of 16 GiB \(sharding=optimizer\): 4\.9 GB per rank$' "gpt2 fits one rank of 16G"
run loom-train -c gpt2 --dry-run --memory-per-rank 16gib
like "$out" '^gpt2 needs 1 rank of 16 GiB ' "  16gib: the unit spelt 16 GiB"
run loom-train -c gpt2 --dry-run --memory-per-rank 16g
like "$out" '^gpt2 needs 1 rank of 16 GiB ' "  16g: 16 GiB too"
run loom-train -c gpt2 --dry-run --memory-per-rank 4096000kb
like "$out" '^gpt2 needs 7 ranks of 4096000 kB ' "  4096000kb: 4096000 kB"

# tensor parallelism: the activations with and without sequence
# parallelism (the other setting's plan on a line of its own)
run loom-train -c gpt2 --set vocab_size=50304,tensor_parallel=2 --dry-run
like "$out" '^  activations +1\.7 GB \(595\.5 MB with recompute\)$' "gpt2, T=2: the activations"
like "$out" '^ +\(with sequence parallelism: 1\.5 GB, 406\.6 MB with recompute\)$' \
	"  and with sequence parallelism"
run loom-train -c gpt2 --set vocab_size=50304,tensor_parallel=2,sequence_parallel=1 --dry-run
like "$out" '^  activations +1\.5 GB \(406\.6 MB with recompute\)$' "  sequence_parallel=1 plans those"
like "$out" '^ +\(without sequence parallelism: 1\.7 GB, 595\.5 MB with recompute\)$' \
	"  and says the other"
run loom-train -c gpt3-175B --set vocab_size=50304,data_parallel=8,tensor_parallel=8 --dry-run
like "$out" '^  activations +19\.7 GB \(10\.2 GB with recompute\)$' "gpt3-175B, 8 x 8: the activations"
like "$out" '^ +\(with sequence parallelism: 11\.1 GB, 1\.5 GB with recompute\)$' \
	"  and with sequence parallelism"
run loom-train -c gpt2 --set vocab_size=50304,tensor_parallel=3,seq_len=1000 --dry-run
like "$out" '^ +\(sequence parallelism: not at seq_len 1000, which T=3 does not divide\)$' \
	"  T not dividing seq_len: said so"

# the smallest data x tensor-parallel grid (fewest ranks), the vocabulary
# padded to a multiple of T; its plan is the --dry-run of that grid
run loom-train -c gpt3-175B --set sharding=weights --dry-run --memory-per-rank 64GiB
like "$out" '^gpt3-175B: 7 x 8 ranks of 64 GiB \(data x tensor parallel, sharding=weights, recompute, vocab_size=50264\): 66\.3 GB per rank$' \
	"gpt3-175B, 64 GiB, sharding=weights: 7 x 8 ranks"
run loom-train -c gpt3-175B --set sharding=weights,vocab_size=50264,data_parallel=7,tensor_parallel=8 --dry-run
like "$out" '^  total +[0-9.]+ GB \(66\.3 GB with recompute\)$' "  the plan of 7 x 8: 66.3 GB"
run loom-train -c gpt3-175B --set sharding=weights,vocab_size=50264,data_parallel=6,tensor_parallel=8 --dry-run
like "$out" '^  total +[0-9.]+ GB \(74\.6 GB with recompute\)$' "  6 x 8 would need 74.6 GB: more than 64 GiB"
run loom-train -c gpt3-175B --dry-run --memory-per-rank 64GiB
like "$out" '^gpt3-175B: 2 x 48 ranks of 64 GiB \(data x tensor parallel, sharding=optimizer, recompute, vocab_size=50304\): 61\.5 GB per rank$' \
	"  sharding=optimizer: the weights split 48 ways (T divides n_head 96)"
run loom-train -c gpt2 --dry-run --memory-per-rank 2GB
like "$out" '^gpt2: 1 x 3 ranks of 2 GB \(data x tensor parallel, sharding=optimizer, vocab_size=50259\): 2\.0 GB per rank$' \
	"gpt2 in 2 GB without recompute: 3 tensor-parallel ranks"
run loom-train -c gpt3-175B --dry-run --memory-per-rank 8GB
like "$out" '^gpt3-175B: no grid of data x tensor-parallel ranks fits ranks of 8 GB \(sharding=optimizer, recompute, up to 65536 ranks\)$' \
	"  none fits: said so"

# nothing fits, and why
run loom-train -c gpt3-175B --dry-run --memory-per-rank 8GB
like "$out" '^gpt3-175B does not fit ranks of 8 GB \(sharding=optimizer, recompute\): on 65536 ranks a rank still needs 1\.4 TB, the weights \(698\.4 GB\), gradients and activations \(11\.2 GB\) whole; sharding=weights shards the weights and gradients$' \
	"gpt3-175B, sharding=optimizer: the whole weights do not fit"
run loom-train -c gpt3-175B --set sharding=weights --dry-run --memory-per-rank 8GB
like "$out" '^gpt3-175B does not fit ranks of 8 GB \(sharding=weights, recompute\): on 65536 ranks a rank still needs 42\.9 GB, the gathered layer buffers \(31\.6 GB\) and activations \(11\.3 GB\) whole$' \
	"gpt3-175B, sharding=weights: the gathered layers and activations alone do not fit"
run loom-train -c gpt2 --dry-run --memory-per-rank 2GB
like "$out" '^gpt2 does not fit ranks of 2 GB \(sharding=optimizer\): .*; with recompute: 5 ranks, 2\.0 GB per rank$' \
	"gpt2 in 2 GB: only with recompute, on 5 ranks"
run loom-train -c tiny --dry-run --memory-per-rank 1M
like "$out" '^no GPT preset fits 1 rank of 1 MiB: the smallest, test, needs [0-9.]+ MB per rank \(sharding=optimizer\)$' \
	"1M: no preset fits, the smallest named"
run loom-train -c bert-base --dry-run --memory-per-rank 1G
like "$out" '^bert-base does not fit ranks of 1 GiB \(sharding=optimizer\): .* whole; sharding=weights shards the weights and gradients$' \
	"a BERT: sharding=weights suggested (it shards its weights too)"
# a BERT's grid: T divides its heads and intermediate width
run loom-train -c bert-large --dry-run --memory-per-rank 3GiB
like "$out" '^bert-large: 2 x 4 ranks of 3 GiB \(data x tensor parallel, sharding=optimizer, vocab_size=30524\): 3\.1 GB per rank$' \
	"bert-large in 3 GiB: 2 x 4 ranks"
run loom-train -c bert-large --set vocab_size=30524,data_parallel=2,tensor_parallel=4 --dry-run
like "$out" '^  total +3\.1 GB ' "  the --dry-run of 2 x 4: 3.1 GB"
run loom-train -c bert-large --set vocab_size=30524,data_parallel=1,tensor_parallel=4 --dry-run
like "$out" '^  total +3\.2 GB ' "  1 x 4 would need 3.2 GB: more than 3 GiB"

# the presets are read from share/presets (LOOM_SHARE), not built in
mkdir -p "$T/share/presets"
cp "$SHARE/presets/gpt2.json" "$SHARE/presets/bert-base.json" "$T/share/presets/"
sed 's/"n_layer": 12/"n_layer": 14/' "$SHARE/presets/gpt2.json" > "$T/share/presets/deeper.json"
LOOM_SHARE="$T/share" run loom-train -c gpt2 --dry-run --memory-per-rank 8G
like "$out" '^largest GPT preset that fits 1 rank of 8 GiB: deeper ' "a preset of share/presets counts (a BERT does not)"

# --- bad usage -------------------------------------------------------------------
fails_with 2 "^loom-train: --memory-per-rank: '8XB' is not a size \\(e\\.g\\. 512M, 2G\\)\$" \
	"a bad size" loom-train -c gpt2 --dry-run --memory-per-rank 8XB
fails_with 2 "^loom-train: --memory-per-rank: '99999999999TB' is not a size" \
	"a size past 64 bits" loom-train -c gpt2 --dry-run --memory-per-rank 99999999999TB
fails_with 2 "^loom-train: --memory-per-rank: '0': a rank needs some memory\$" \
	"a size of 0" loom-train -c gpt2 --dry-run --memory-per-rank 0
fails_with 2 "^loom-train: --memory-per-rank needs --dry-run\$" \
	"without --dry-run" loom-train -c gpt2 --memory-per-rank 8G
done_testing
