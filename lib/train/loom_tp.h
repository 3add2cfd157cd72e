/*
 * loom_tp.h - tensor parallelism's model-neutral parts (Megatron-LM's 1D
 * splits), shared by the GPT (lib/train/loom_gpt.h) and BERT
 * (lib/train/loom_bert.h): which tensors of a model's table are split and
 * how, copies between a rank's slices and the whole model's layout, a
 * rank's initialisation as its slice of the whole model's draws, the sum
 * over the team, the check that the team computes on one batch, the AdamW
 * step on slices clipped by the whole model's norm, the
 * vocabulary-parallel cross-entropy, and sequence parallelism's token
 * split (its rows, gathers, reduce-scatters and the sum of the replicated
 * LayerNorms' gradients).
 *
 * A model split over tp ranks has a table (struct loom_tensor, of the
 * model's own layout) whose split tensors hold rank `rank`'s slice: a
 * ROWS tensor [rows, w] is rows rank*rows .. of the whole [rows*tp, w]; a
 * COLS tensor [rows, w] is, in each row, `groups` runs of w/groups
 * (e.g. Q, K and V each by heads), run k at k*(w*tp/groups) + rank*w/groups
 * of the whole [rows, w*tp]; a 1-D tensor is one row.  WHOLE tensors are
 * the same on every rank.  The whole layout lists the same tensors in the
 * same order, whole.
 *
 * The team's reduce call (lib/train/loom_dist.h's loom_dist_calls.reduce:
 * sum or max over the tp ranks of a replica) is set by the model's
 * connect hook; a model under tp > 1 computes only once connected.
 *
 * Sequence parallelism (seq 1, Megatron-LM's): the regions between a
 * model's products (LayerNorms, dropout, residual adds) hold only rank
 * r's nr = N/tp of a batch's N tokens, rows r0 = r nr .. of the flattened
 * [B T]; a column-split product's input is all-gathered (the gather call)
 * and a row-split product's partial sums reduce-scattered (scatter)
 * instead of all-reduced.  The gradients of the replicated tensors read
 * in those regions (LayerNorms) are then partial over the tokens: summed
 * over the team (loom_tp_sum_add).  The loom_tp_rows_* calls and
 * loom_tp_sum_add count their time as LOOM_PROF_COMM (call them outside
 * another profiled op).
 *
 * Ownership: struct loom_tp borrows everything it points at (a model
 * fills one in from its own fields).  Errors: 0 or a negative LOOM_E*
 * code, the message in *err.  Nothing prints.  Thread-safety: one thread
 * drives a team member; the loops run OpenMP teams of their own.
 */
#ifndef LOOM_TP_H
#define LOOM_TP_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"
#include "loom_model.h"

enum { LOOM_TP_WHOLE, LOOM_TP_ROWS, LOOM_TP_COLS };

struct loom_dist_calls;
struct loom_tp {
	int tp, rank;                   /* this rank of tp (1: the whole model) */
	const struct loom_tensor *tab;  /* the rank's table (its slices' shapes) */
	int nt;
	/* how tensor i is split: LOOM_TP_*, *groups the runs per row (COLS) */
	int (*split)(const void *model, int i, int *groups);
	const void *model;
	/* the model's calls into the team (lib/train/loom_dist.h): reduce, the
	 * sum or max (LOOM_DIST_*) of buf[0..n) over it, and under sequence
	 * parallelism (seq 1, with tp > 1) gather and scatter; a NULL call: not
	 * connected */
	const struct loom_dist_calls *dist;
	int seq;
	struct loom_err *err;
};

/* Between the whole model's flat array `full` and rank `rank`'s slices
 * in the layout of t's table (any rank's: the same shapes), tensor by
 * tensor: to_full 0 copies the slices out of full, 1 into it. */
void loom_tp_copy(const struct loom_tp *t, int rank, float *slices, float *full, int to_full);

/* Checkpoints of the whole tensors (lib/train/loom_ckpt.h): tab[t->nt]
 * (loom_model_ckpt_tensors of t's table) given the whole shapes; and r[]
 * this rank's runs of the whole tensors (struct loom_ckpt_run: weights
 * from params, moments from m and v where not NULL, in t's layout; save:
 * the WHOLE tensors only on rank 0, so that the team's runs tile the
 * checkpoint), returning their count (r NULL: only counts).  Adjacent
 * runs merge. */
struct loom_ckpt_tensor;
struct loom_ckpt_run;
void loom_tp_ckpt_whole(const struct loom_tp *t, struct loom_ckpt_tensor *tab);
size_t loom_tp_ckpt_runs(const struct loom_tp *t, float *params, float *m, float *v, int save,
			 struct loom_ckpt_run *r);

/* After loom_model_init_weights (or _init_tensors from `first`) on t's
 * table: each split 2-D tensor from `first` on redrawn as this rank's
 * slice of the whole tensor's N(0, init(t, ctx)^2) draws from `seed`
 * (1-D tensors are constants: already right). */
void loom_tp_init(const struct loom_tp *t, int first, float *params, uint64_t seed,
		  float (*init)(const struct loom_tensor *x, const void *ctx), const void *ctx);

/* 0 when connected (or tp 1), else LOOM_EINVAL naming the rank. */
int loom_tp_ready(const struct loom_tp *t);

/* x[0..n) summed over the team (tp 1: nothing). */
int loom_tp_sum(const struct loom_tp *t, float *x, size_t n);

/* The team's batch check: h hashed with x[0..n) (start from any value,
 * chain calls over a batch's arrays), then loom_tp_same_batch compares
 * the hashes over the team: 0, or LOOM_EINVAL "the T tensor-parallel
 * ranks of a replica got different batches ...". */
uint64_t loom_tp_hash(uint64_t h, const int32_t *x, size_t n);
int loom_tp_same_batch(const struct loom_tp *t, uint64_t h);

/* The vocabulary-parallel cross-entropy of n rows from this rank's
 * logits[n, Vl] (ids v0 = rank*Vl .., of V in all) and their targets
 * tg[n] (ignore_id: not counted): the row maxima all-reduced (max), then
 * the sums of exp and the target logits (sum); logits become this rank's
 * probabilities and losses[n] those of loom_k_crossentropy_fwd over the
 * whole vocabulary (0 where ignored).  scratch: 3n floats.  With ncorrect,
 * the rows whose first largest logit (of all ranks) is their target are
 * added to it.  No rank holds the [n, V] logits. */
int loom_tp_xent(const struct loom_tp *t, float *logits, int n, int Vl, int V,
		 const int32_t *tg, int ignore_id, float *losses, float *scratch,
		 int64_t *ncorrect);

/* The rows of the token-split regions of a batch of N tokens (B rows of
 * T, for the message; sequence parallelism computes them padded, N = B
 * T): seq 1, this rank's *nr = N/tp tokens from *r0 = rank *nr, and
 * (*at)[*nr] their indices r0 .. in the flattened [B T] (reallocated: the
 * rows of the dropout masks, loom_k_dropout_at); seq 0, *nr = N and *r0
 * = 0 (*at untouched).  0, or LOOM_EINVAL "batch BxT: sequence_parallel
 * splits its N tokens across tp ranks: not a multiple of it", or
 * LOOM_ENOMEM. */
int loom_tp_seq_rows(const struct loom_tp *t, int B, int T, int N, int *nr, int *r0,
		     int32_t **at);

/* Sequence parallelism: buf[tp n] holding this rank's n floats at
 * buf[rank n] gets every rank's (an all-gather before a column-split
 * product); seq 0: nothing (the rows are all there). */
int loom_tp_rows_gather(const struct loom_tp *t, float *buf, size_t n);

/* The partial sums in[] of a row-split product summed over the team,
 * *y where the sum is: sequence parallelism, this rank's n floats of it
 * (its nr rows) into out (a reduce-scatter; out may be in), *y = out;
 * seq 0, in[0..n) in place (an all-reduce; tp 1: nothing), *y = in. */
int loom_tp_rows_sum(const struct loom_tp *t, float *in, float *out, size_t n, float **y);

/* Sequence parallelism: the gradients of replicated tensors from this
 * rank's tokens only, d[k n] (k runs of n floats), summed over the team,
 * run i then added to dst[i][0..n) (the tensors' gradients, accumulated
 * over micro-batches: d held this micro-batch's share). */
int loom_tp_sum_add(const struct loom_tp *t, float *d, size_t n, int k, float *const *dst);

/* AdamW step t at lr on this rank's slices (params, grads, m, v in t's
 * table), clipped by the whole model's gradient norm (the split tensors'
 * squares summed over the team, the whole ones' counted once: they are
 * the same on every rank), the norm in *norm (may be NULL); gradients left
 * zeroed.  A failed all-reduce leaves the weights as they were. */
int loom_tp_step(const struct loom_tp *t, float *params, float *grads, float *m, float *v,
		 const struct loom_adamw *h, float lr, int64_t step, float *norm);

#endif
