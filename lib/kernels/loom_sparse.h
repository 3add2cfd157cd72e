/*
 * loom_sparse.h - block-sparse weights and their matmul kernels (RigL).
 *
 * Purpose: a projection y = x @ w + b of the GPT (w[IC,OC] in the Conv1D
 * layout of loom_kernels.h) whose weight is zero outside a set of live
 * bs x bs blocks.  Block (i, j) covers w[i*bs .. i*bs+bs-1, j*bs .. j*bs+bs-1];
 * a mask is uint8_t[(IC/bs) * (OC/bs)], row-major over (i, j), 1 = live.
 * The kernels cost what the live blocks cost: forward, the input
 * gradient and the weight gradient each touch only live blocks.
 *
 * Storage: the master weight stays dense (the optimizer, the checkpoint
 * and the dense gradient of RigL's update steps use it; pruned blocks are
 * exactly zero there).  loom_sparse_pack() gathers the live blocks into
 * block-compressed columns (BSC over the output blocks j):
 *   col_ptr[OC/bs + 1]  live blocks of output block column j are
 *                       col_ptr[j] .. col_ptr[j+1]-1,
 *   row_idx[nnz]        their input block rows i, ascending,
 *   val[nnz][bs][bs]    their values, w[i*bs+a][j*bs+b] at [a][b],
 * and the same blocks transposed by input block row i for the input
 * gradient (row_ptr, col_idx, valt[nnz][bs][bs] holding [b][a]).  Packing
 * is once per optimizer step, like the bf16 weight copy.
 *
 * Kernels: the fast ones are threaded with OpenMP and deterministic (no
 * two threads add into one value, and each value is summed in the same
 * order whatever the thread count), register-tiled for bs 8, 16 and 32
 * and built per instruction set (LOOM_SIMD; other block sizes take a
 * plain loop).  Besides the live blocks they only read the activations
 * once: the backward gathers inp and dout into block-column panels
 * (N*(IC+OC) floats, malloc'ed per call), the forward and the input
 * gradient copy tiles of up to 16 rows (16*IC or 16*OC floats a thread);
 * without that memory they read in place, with the same results.  The _naive ones work on
 * the dense weight and the mask directly and are the specification the
 * fast ones are tested against (tests/sparse.c).
 *
 * Ownership: loom_sparse_new/_free (free accepts NULL); the object owns
 * its index and packed values.  Errors: functions that allocate return 0
 * or LOOM_ENOMEM/LOOM_EINVAL with the message in loom_sparse_error();
 * nothing prints.  Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_SPARSE_H
#define LOOM_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

struct loom_sparse;

/* A block-sparse weight of shape [IC,OC] with blocks of bs (IC and OC
 * multiples of bs); no block is live until loom_sparse_set_mask().
 * NULL and *err filled on bad shapes or out of memory. */
struct loom_sparse *loom_sparse_new(int IC, int OC, int bs, struct loom_err *err);
void loom_sparse_free(struct loom_sparse *s);
const char *loom_sparse_error(const struct loom_sparse *s);

/* Make the live blocks those of mask[(IC/bs)*(OC/bs)] and rebuild the
 * index (the values are stale until the next loom_sparse_pack()). */
int loom_sparse_set_mask(struct loom_sparse *s, const uint8_t *mask);
/* Gather the live blocks of the dense w[IC,OC] (call whenever w changed). */
void loom_sparse_pack(struct loom_sparse *s, const float *w);
/* Live blocks. */
int loom_sparse_live(const struct loom_sparse *s);

/* out[N,OC] = inp[N,IC] @ w + bias[OC] (bias may be NULL), w the packed
 * live blocks. */
void loom_sparse_matmul_fwd(const struct loom_sparse *s, float *out, const float *inp,
			    const float *bias, int N);
/* dinp[N,IC] = dout @ w^T (overwritten; may be NULL); dw[IC,OC] (dense
 * layout) += inp^T @ dout in the live blocks only, the others untouched;
 * dbias[OC] += sum_n dout (may be NULL).  The input gradient is written
 * last, after every read of inp, so dinp may be inp (as in
 * loom_k_matmul_bwd; the naive version too). */
void loom_sparse_matmul_bwd(const struct loom_sparse *s, float *dinp, float *dw, float *dbias,
			    const float *dout, const float *inp, int N);

/* The same on the dense w[IC,OC] and the mask, by definition. */
void loom_sparse_matmul_fwd_naive(float *out, const float *inp, const float *w,
				  const uint8_t *mask, int bs, const float *bias, int N, int IC,
				  int OC);
void loom_sparse_matmul_bwd_naive(float *dinp, float *dw, float *dbias, const float *dout,
				  const float *inp, const float *w, const uint8_t *mask, int bs,
				  int N, int IC, int OC);

#endif
