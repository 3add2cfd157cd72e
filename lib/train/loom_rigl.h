/*
 * loom_rigl.h - RigL dynamic block sparsity (Evci et al. 2020, "Rigging
 * the Lottery"): which bs x bs blocks of each sparse weight are live, and
 * how they change.
 *
 * Purpose: the masks of the sparse layers of a model whose parameters
 * (and gradients, AdamW moments) are one flat float array.  A layer is a
 * weight w[IC,OC] at `offset` in that array; its mask is
 * uint8_t[(IC/bs) * (OC/bs)], row-major over block (i, j) covering
 * w[i*bs .. i*bs+bs-1, j*bs .. j*bs+bs-1], 1 = live (the layout of
 * loom_sparse.h).  Invariant kept by the caller with the helpers here:
 * every value of a dead block is exactly 0 in the weights and in both
 * AdamW moments.
 *
 * Initial masks: exactly round((1 - sparsity) * blocks) live blocks per
 * layer (at least 1), a uniformly random subset drawn from the seed
 * (counter-based hash: independent of threads and ranks).
 *
 * Mask update (loom_rigl_update), per layer, with k = round(ratio * live):
 *  - prune the k live blocks of smallest magnitude, the magnitude of a
 *    block being the L1 norm (sum of |w|) of its weights;
 *  - regrow the k blocks, among those not live after pruning (a block
 *    just pruned may come back), with the largest score: the pooled
 *    |dense gradient| of the block, its mean (LOOM_POOL_AVG) or maximum
 *    (LOOM_POOL_MAX), accumulated beforehand with loom_rigl_score_range();
 *  - ties go to the lower block index (pruned first, regrown first).
 * The number of live blocks never changes.  The blocks pruned or regrown
 * are recorded, so loom_rigl_zero_changed() can zero them in the weights
 * and moments (regrown blocks start at weight 0 with zero moments).
 *
 * Churn: the fraction of the live blocks that were not live before the
 * last update (churn_last) or in the initial mask (churn_init).
 *
 * Ranges: the _range functions work on the part [lo, hi) of the flat
 * array whose values sit at x[0 .. hi-lo-1], so a data-parallel rank can
 * apply them to its shard of the gradients or moments; partial scores of
 * several ranks are then combined with loom_rigl_score_combine().
 *
 * Ownership: loom_rigl_new/_free (free accepts NULL); the object owns its
 * masks and scores.  Errors: functions that allocate or check return 0 or
 * LOOM_ENOMEM/LOOM_EINVAL with the message in loom_rigl_error(); nothing
 * prints.  Thread-safety: the default (loom_common.h); the scoring,
 * block-norm and masking passes over a layer of at least 65536 values run
 * an OpenMP team of their own (bands of bs rows: each block's values are
 * taken in the same order at any thread count).
 */
#ifndef LOOM_RIGL_H
#define LOOM_RIGL_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

struct loom_rigl_layer {
	char name[64];          /* the weight's tensor name */
	size_t offset;          /* into the flat parameter array */
	int IC, OC, nbr, nbc, nb;  /* shape, block rows and columns, blocks */
	int live;               /* live blocks (constant) */
	uint8_t *mask;          /* [nb] current */
	uint8_t *mask0;         /* [nb] the initial mask */
	uint8_t *prev;          /* [nb] before the last update */
	uint8_t *changed;       /* [nb] pruned or regrown by the last update */
	float *score;           /* [nb] pooled |gradient| (into r->scores) */
	int pruned, regrown;    /* by the last update */
};

struct loom_rigl {
	int bs, pooling;        /* block size, enum loom_pooling */
	int n;                  /* layers */
	struct loom_rigl_layer *layer;
	size_t n_scores;        /* sum of the layers' nb */
	float *scores;          /* [n_scores] every layer's score */
	double *mag;            /* [n_scores] every block's L1 norm (loom_rigl_mag_*) */
	void *scratch;          /* room for the largest layer's selection */
	int max_nb;             /* blocks of the largest layer */
	int64_t last_update;    /* step of the last mask update, 0 = none */
	int64_t updates;        /* mask updates done */
	struct loom_err err;
};

struct loom_rigl *loom_rigl_new(int bs, int pooling, struct loom_err *err);
void loom_rigl_free(struct loom_rigl *r);
const char *loom_rigl_error(const struct loom_rigl *r);

/* Add a sparse layer w[IC,OC] at `offset` (IC, OC multiples of bs),
 * no block live yet; layers must not overlap. */
int loom_rigl_add(struct loom_rigl *r, const char *name, size_t offset, int IC, int OC);

/* The live blocks layer l holds at `sparsity`: round((1 - sparsity) * nb),
 * at least 1 (constant over training: RigL regrows what it prunes). */
int loom_rigl_live_for(const struct loom_rigl *r, int l, double sparsity);
/* Random initial masks: loom_rigl_live_for() live blocks per
 * layer; mask0 = prev = mask.  0 <= sparsity < 1.  Allocates nothing. */
void loom_rigl_init_masks(struct loom_rigl *r, double sparsity, uint64_t seed);
/* Set layer l's masks (e.g. from a checkpoint): every value 0 or 1, the
 * same count of live blocks in both (mask0 may be NULL: = mask). */
int loom_rigl_set_masks(struct loom_rigl *r, int l, const uint8_t *mask, const uint8_t *mask0);

/* x[i - lo] = 0 for every i in [lo, hi) in a dead block. */
void loom_rigl_mask_range(const struct loom_rigl *r, size_t lo, size_t hi, float *x);
/* x[i - lo] = 0 for every i in [lo, hi) in a block the last update
 * pruned or regrew. */
void loom_rigl_zero_changed(const struct loom_rigl *r, size_t lo, size_t hi, float *x);

/* Scores: reset, then accumulate the pooled |g| of the gradient values
 * g[i - lo], i in [lo, hi) (avg: the sum, bs*bs times the mean, so
 * the same order; max: the maximum).  Disjoint ranges of one gradient may be added in any
 * order for max, in a fixed order for a reproducible sum. */
void loom_rigl_score_reset(struct loom_rigl *r);
void loom_rigl_score_range(struct loom_rigl *r, size_t lo, size_t hi, const float *g);
/* Partial scores of `world` ranks, all[world * n_scores] in rank order,
 * combined into r->scores (summed in rank order, or the maximum). */
void loom_rigl_score_combine(struct loom_rigl *r, const float *all, int world);

/* Update every layer's mask (rules above) at `step`, with the weights
 * params (the whole flat array) and the scores accumulated since the
 * last reset; ratio in [0, 1].  Does not touch the weights: follow with
 * loom_rigl_zero_changed() on the weights and moments.  Allocates
 * nothing (cannot fail). */
void loom_rigl_update(struct loom_rigl *r, const float *params, double ratio, int64_t step);
/* The same in parts, for weights sharded across ranks: reset, add each
 * block's |w| of the values x[i - lo], i in [lo, hi) (any disjoint
 * ranges; a rank its own), combine the partial norms of `world` ranks
 * (all[world * n_scores] in rank order, summed in rank order), then update
 * with those norms.  loom_rigl_update is mag_reset + mag_range over every
 * layer + update_mag. */
void loom_rigl_mag_reset(struct loom_rigl *r);
void loom_rigl_mag_range(struct loom_rigl *r, size_t lo, size_t hi, const float *x);
void loom_rigl_mag_combine(struct loom_rigl *r, const double *all, int world);
void loom_rigl_update_mag(struct loom_rigl *r, double ratio, int64_t step);

/* Totals over the layers: live blocks, blocks, pruned and regrown by the
 * last update, and the churns (defined above; 0 before any update). */
struct loom_rigl_stats {
	int64_t live, blocks, pruned, regrown;
	double density, churn_last, churn_init;
};
void loom_rigl_stats(const struct loom_rigl *r, struct loom_rigl_stats *s);

#endif
