/*
 * loom_mm.h - the matmul backend: fp32 on OpenBLAS, bf16 on oneDNN.
 *
 * Purpose: every matrix product of the GPT (lib/kernels/loom_kernels.h matmul
 * kernels, the LM head in lib/train/loom_gpt.c) goes through loom_mm_gemm(), so
 * the precision is one switch here, not two code paths through the model.
 *  - fp32 (mm == NULL or LOOM_PREC_FP32): OpenBLAS sgemm (sgemv for one row)
 *    on the caller's OpenMP team, one block of the output per thread (see
 *    loom_mm_team_grid() below; OpenBLAS's own threads are not used).
 *  - bf16: oneDNN matmul primitives with bf16 inputs and fp32 accumulation
 *    and output.  A primitive is created once per (shape, transposes,
 *    accumulate) and cached.  Operands lying inside the weight range
 *    registered with loom_mm_weights() are read from its bf16 copy (made
 *    once per optimizer step); any other operand (activations, gradients)
 *    is converted to bf16 into scratch as it is used, once for two
 *    products when pinned (loom_mm_pin()).
 * oneDNN is used nowhere else in loom.
 *
 * bf16 needs bf16 matrix instructions (avx512_bf16 or amx_bf16 in
 * /proc/cpuinfo); without them loom_mm_new() refuses rather than let oneDNN
 * emulate slowly.  LOOM_NO_BF16=1 in the environment simulates such a CPU.
 *
 * Determinism: bf16 products are bit-identical for the same inputs and
 * thread count on one machine (oneDNN's reductions are fixed per shape).
 *
 * Ownership: loom_mm_new/_free; the object owns its primitives, the bf16
 * weight copy and the scratch.  Errors: loom_mm_new() fills *err and
 * returns NULL.  loom_mm_gemm() cannot return a code through the kernels
 * that call it: a failure (out of memory, a primitive oneDNN refuses)
 * leaves C unspecified and is kept sticky in the object until
 * loom_mm_check() reports and clears it.  Nothing prints.  Thread-safety:
 * the default (loom_common.h): one thread at a time calls an mm (its
 * products run on the OpenMP team: fp32 by blocks, bf16 inside oneDNN).
 */
#ifndef LOOM_MM_H
#define LOOM_MM_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

enum loom_precision {
	LOOM_PREC_FP32 = 0,
	LOOM_PREC_BF16,
};

struct loom_mm;

/* 0 if this CPU multiplies bf16 natively; else 1 (a yes/no answer, not an
 * error code) and a sentence naming what is missing in why[n]. */
int loom_mm_bf16_missing(char *why, size_t n);

/* A backend for `precision` (NULL and *err filled on failure: no bf16 on
 * this CPU, oneDNN cannot start, out of memory). */
struct loom_mm *loom_mm_new(int precision, struct loom_err *err);
void loom_mm_free(struct loom_mm *mm);
/* LOOM_PREC_* of mm (NULL: fp32). */
int loom_mm_precision(const struct loom_mm *mm);
/* "OpenBLAS sgemm" or "oneDNN bf16 matmul (ISA)" */
const char *loom_mm_name(const struct loom_mm *mm);

/* Register the weights w[0..n) (bf16: convert them now into the bf16
 * copy; call again whenever they change).  No-op in fp32.  0 or
 * LOOM_ENOMEM (kept as the sticky error too). */
int loom_mm_weights(struct loom_mm *mm, const float *w, size_t n);
/* The same for the part w[lo..hi) only (a unit of weights sharded across
 * ranks, present from now on), and dropping that part's copy (its memory
 * given back) once the weights there are gone.  The copy is lazily
 * backed: only the parts converted cost memory. */
int loom_mm_weights_range(struct loom_mm *mm, const float *w, size_t n, size_t lo, size_t hi);
void loom_mm_weights_drop(struct loom_mm *mm, size_t lo, size_t hi);

/* C[M,N] = op(A) @ op(B) (+ C when accumulate), all row-major and dense:
 * op(A) is A[M,K] or, with ta, A[K,M] transposed; op(B) is B[K,N] or,
 * with tb, B[N,K] transposed. */
void loom_mm_gemm(struct loom_mm *mm, int ta, int tb, int M, int N, int K, const float *A,
		  const float *B, int accumulate, float *C);

/* fp32 products run on the OpenMP team of the caller (omp_get_max_threads()
 * threads; inside a parallel region, on the calling thread alone): C is
 * cut into a pm x pn grid of blocks (pm * pn <= threads, each block at
 * least LOOM_MM_PART_MIN multiply-adds: below that OpenBLAS may take its
 * "direct" path, whose sums differ), each thread one block by OpenBLAS
 * sgemm on that thread alone; a product too small to cut runs whole on
 * the calling thread.  A row times an untransposed B stays whole too
 * (sgemv's sums there depend on the block).  Every element of C comes out
 * of the same sgemm arithmetic whatever the grid, so fp32 products are
 * bit-identical at any thread count.  loom_mm_team_grid() gives the grid
 * (for tests and benchmarks). */
#define LOOM_MM_PART_MIN (28.0 * 512 * 512)
void loom_mm_team_grid(int M, int N, int K, int threads, int *pm, int *pn);

/* bf16: convert x[0..n) now, and let the following products read that
 * copy for every operand that is exactly x[0..n), until loom_mm_unpin():
 * for a gradient that two products read (weight and input gradient), so
 * it is converted once.  x must not change meanwhile, and while pinned a
 * product may have at most one operand that is neither pinned nor in the
 * weights.  No-op in fp32. */
void loom_mm_pin(struct loom_mm *mm, const float *x, size_t n);
void loom_mm_unpin(struct loom_mm *mm);

/* 0, or the sticky error's code (message in *err), clearing it. */
int loom_mm_check(struct loom_mm *mm, struct loom_err *err);

/* fp32 -> bf16 with round-to-nearest-even (NaN stays NaN). */
void loom_mm_to_bf16(uint16_t *dst, const float *src, size_t n);

#endif
