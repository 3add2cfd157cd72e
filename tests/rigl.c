/* RigL masks (lib/train/loom_rigl.h): initial density, and after every
 * update the library's choice against a naive reference that sorts every
 * block, exact density, pruned blocks zero in weights and both moments,
 * regrown blocks zero-initialised, scores split over "ranks" equal to the
 * whole, churn as defined; scores, block norms and masking of a large
 * layer on 1 and 3 threads equal to a plain loop. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "loom_config.h"
#include "loom_kernels.h"
#include "loom_rigl.h"
#include "tap.h"

static uint64_t rs = 11;

static uint64_t rnd64(void)
{
	rs = loom_splitmix64(rs + 0x9e3779b97f4a7c15ull);
	return rs;
}

/* multiples of 1/64 in [-levels/64, levels/64]: sums stay exact in float,
 * and ties are frequent */
static float qrand(int levels)
{
	return (float)((int)(rnd64() % (uint64_t)(2 * levels + 1)) - levels) / 64.0f;
}

struct ref {
	double key;
	int idx;
};

static int cmp_ref(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->idx - y->idx;
}

/* The specification: sort every live block by (L1 norm, index), prune the
 * first k; sort every block not live after that by (-score, index),
 * regrow the first k.  score = sum (avg) or max of |g| over the block. */
static void naive_update(const struct loom_rigl_layer *L, int bs, const float *w,
			 const float *g, int pooling, double ratio, uint8_t *mask)
{
	struct ref *v = malloc(sizeof *v * (size_t)L->nb);
	int k = (int)llround(ratio * L->live), n = 0;
	for (int b = 0; b < L->nb; b++) {
		if (!mask[b])
			continue;
		double m = 0;
		for (int i = 0; i < bs; i++)
			for (int j = 0; j < bs; j++)
				m += fabsf(w[(size_t)((b / L->nbc) * bs + i) * L->OC + (b % L->nbc) * bs + j]);
		v[n++] = (struct ref){ m, b };
	}
	qsort(v, (size_t)n, sizeof *v, cmp_ref);
	for (int i = 0; i < k; i++)
		mask[v[i].idx] = 0;
	n = 0;
	for (int b = 0; b < L->nb; b++) {
		if (mask[b])
			continue;
		double s = 0;
		for (int i = 0; i < bs; i++)
			for (int j = 0; j < bs; j++) {
				double a = fabsf(g[(size_t)((b / L->nbc) * bs + i) * L->OC + (b % L->nbc) * bs + j]);
				s = pooling == LOOM_POOL_MAX ? (a > s ? a : s) : s + a;
			}
		v[n++] = (struct ref){ -s, b };
	}
	qsort(v, (size_t)n, sizeof *v, cmp_ref);
	for (int i = 0; i < k; i++)
		mask[v[i].idx] = 1;
	free(v);
}

static int count(const uint8_t *m, int n)
{
	int c = 0;
	for (int i = 0; i < n; i++)
		c += m[i];
	return c;
}

/* every value of layer L's blocks with sel(b) in x is 0 */
static int blocks_zero(const struct loom_rigl_layer *L, int bs, const float *x, const uint8_t *sel,
		       int want)
{
	for (int b = 0; b < L->nb; b++) {
		if (sel[b] != want)
			continue;
		for (int i = 0; i < bs; i++)
			for (int j = 0; j < bs; j++)
				if (x[(size_t)((b / L->nbc) * bs + i) * L->OC + (b % L->nbc) * bs + j] != 0)
					return 0;
	}
	return 1;
}

static void run(int bs, int pooling, double sparsity, int updates)
{
	/* two layers inside a flat array with dense tensors around them */
	const size_t off0 = 37, IC0 = 4 * (size_t)bs, OC0 = 12 * (size_t)bs;
	const size_t off1 = off0 + IC0 * OC0 + 5, IC1 = 8 * (size_t)bs, OC1 = 2 * (size_t)bs;
	const size_t n = off1 + IC1 * OC1 + 9;
	float *p = malloc(sizeof(float) * n), *m = malloc(sizeof(float) * n);
	float *v = malloc(sizeof(float) * n), *g = malloc(sizeof(float) * n);
	float *part = malloc(sizeof(float) * 2 * 256);
	struct loom_err err = { 0 };
	struct loom_rigl *r = loom_rigl_new(bs, pooling, &err);
	const char *pn = pooling == LOOM_POOL_MAX ? "max" : "avg";

	ok(r && !loom_rigl_add(r, "a.weight", off0, (int)IC0, (int)OC0) &&
	   !loom_rigl_add(r, "b.weight", off1, (int)IC1, (int)OC1),
	   "bs %d %s: two layers added", bs, pn);
	ok(loom_rigl_add(r, "bad", n, bs + 1, bs) == LOOM_EINVAL &&
	   strstr(loom_rigl_error(r), "not a multiple of the block size"),
	   "a shape that is not a multiple of the block size is refused");
	for (size_t i = 0; i < n; i++) {
		p[i] = qrand(8);
		m[i] = qrand(8);
		v[i] = fabsf(qrand(8));
	}
	loom_rigl_init_masks(r, sparsity, 42);
	int ok_live = 1;
	for (int l = 0; l < r->n; l++) {
		const struct loom_rigl_layer *L = &r->layer[l];
		int want = (int)llround((1 - sparsity) * L->nb);
		want = want < 1 ? 1 : want;
		ok_live &= count(L->mask, L->nb) == want && L->live == want;
	}
	ok(ok_live, "initial live blocks: exactly round((1 - %g) x blocks), at least 1", sparsity);
	/* a different seed draws a different mask (block count permitting) */
	struct loom_rigl *r2 = loom_rigl_new(bs, pooling, &err);
	loom_rigl_add(r2, "a.weight", off0, (int)IC0, (int)OC0);
	loom_rigl_add(r2, "b.weight", off1, (int)IC1, (int)OC1);
	loom_rigl_init_masks(r2, sparsity, 43);
	ok(memcmp(r2->layer[0].mask, r->layer[0].mask, (size_t)r->layer[0].nb),
	   "another seed, another initial mask");
	loom_rigl_init_masks(r2, sparsity, 42);
	ok(!memcmp(r2->layer[0].mask, r->layer[0].mask, (size_t)r->layer[0].nb) &&
	   !memcmp(r2->layer[1].mask, r->layer[1].mask, (size_t)r->layer[1].nb),
	   "the same seed, the same initial masks");
	loom_rigl_free(r2);

	float p37 = p[36], pend = p[n - 1];
	loom_rigl_mask_range(r, 0, n, p);
	loom_rigl_mask_range(r, 0, n, m);
	loom_rigl_mask_range(r, 0, n, v);
	int zero_ok = 1;
	for (int l = 0; l < r->n; l++)
		zero_ok &= blocks_zero(&r->layer[l], bs, p + r->layer[l].offset, r->layer[l].mask, 0) &&
			   blocks_zero(&r->layer[l], bs, m + r->layer[l].offset, r->layer[l].mask, 0);
	ok(zero_ok && p[36] == p37 && p[n - 1] == pend,
	   "mask_range zeroes the dead blocks, nothing outside the layers");

	int all_match = 1, all_density = 1, all_zero = 1, all_regrow0 = 1, all_split = 1;
	int mag_split = 1;
	int all_churn = 1, any_change = 0;
	for (int u = 1; u <= updates; u++) {
		double ratio = u == updates ? 1.0 : 0.1 + 0.2 * (u % 4);
		for (size_t i = 0; i < n; i++)
			g[i] = qrand(u % 3 ? 3 : 40); /* few levels: many ties */
		/* scores over two "ranks" combined == scores over the whole */
		size_t mid = off0 + 3 * OC0 + (size_t)bs / 2;
		loom_rigl_score_reset(r);
		loom_rigl_score_range(r, 0, n, g);
		float *whole = malloc(sizeof(float) * r->n_scores);
		memcpy(whole, r->scores, sizeof(float) * r->n_scores);
		free(part);
		part = malloc(sizeof(float) * 2 * r->n_scores);
		loom_rigl_score_reset(r);
		loom_rigl_score_range(r, 0, mid, g);
		memcpy(part, r->scores, sizeof(float) * r->n_scores);
		loom_rigl_score_reset(r);
		loom_rigl_score_range(r, mid, n, g + mid);
		memcpy(part + r->n_scores, r->scores, sizeof(float) * r->n_scores);
		loom_rigl_score_combine(r, part, 2);
		all_split &= !memcmp(whole, r->scores, sizeof(float) * r->n_scores);
		free(whole);
		/* block norms (sharded weights): two ranks' parts combined
		 * equal the whole, to the rounding of one more addition */
		double *mw = malloc(sizeof(double) * r->n_scores);
		double *mp = malloc(sizeof(double) * 2 * r->n_scores);
		loom_rigl_mag_reset(r);
		loom_rigl_mag_range(r, 0, n, p);
		memcpy(mw, r->mag, sizeof(double) * r->n_scores);
		loom_rigl_mag_reset(r);
		loom_rigl_mag_range(r, 0, mid, p);
		memcpy(mp, r->mag, sizeof(double) * r->n_scores);
		loom_rigl_mag_reset(r);
		loom_rigl_mag_range(r, mid, n, p + mid);
		memcpy(mp + r->n_scores, r->mag, sizeof(double) * r->n_scores);
		loom_rigl_mag_combine(r, mp, 2);
		for (size_t i = 0; i < r->n_scores; i++)
			mag_split &= fabs(r->mag[i] - mw[i]) <= 1e-12 * (mw[i] + 1) && mw[i] >= 0;
		free(mw);
		free(mp);

		uint8_t *want[2];
		for (int l = 0; l < r->n; l++) {
			const struct loom_rigl_layer *L = &r->layer[l];
			want[l] = malloc(L->nb > 0 ? (size_t)L->nb : 1);
			memcpy(want[l], L->mask, (size_t)L->nb);
			naive_update(L, bs, p + L->offset, g + L->offset, pooling, ratio, want[l]);
		}
		loom_rigl_update(r, p, ratio, u * 10);
		loom_rigl_zero_changed(r, 0, n, p);
		loom_rigl_zero_changed(r, 0, n, m);
		loom_rigl_zero_changed(r, 0, n, v);
		int64_t fresh = 0, live = 0;
		for (int l = 0; l < r->n; l++) {
			const struct loom_rigl_layer *L = &r->layer[l];
			int match = !memcmp(want[l], L->mask, (size_t)L->nb);
			if (!match)
				diag("update %d layer %d: the library's mask differs from the reference", u, l);
			all_match &= match;
			all_density &= count(L->mask, L->nb) == L->live;
			size_t nb = L->nb > 0 ? (size_t)L->nb : 1;
			uint8_t *pruned = malloc(nb), *regrown = malloc(nb);
			for (int b = 0; b < L->nb; b++) {
				pruned[b] = L->prev[b] && !L->mask[b];
				regrown[b] = L->mask[b] && L->changed[b];
				fresh += L->mask[b] && !L->prev[b];
				any_change |= pruned[b];
			}
			live += L->live;
			all_zero &= blocks_zero(L, bs, p + L->offset, pruned, 1) &&
				    blocks_zero(L, bs, m + L->offset, pruned, 1) &&
				    blocks_zero(L, bs, v + L->offset, pruned, 1) &&
				    blocks_zero(L, bs, p + L->offset, L->mask, 0) &&
				    blocks_zero(L, bs, m + L->offset, L->mask, 0) &&
				    blocks_zero(L, bs, v + L->offset, L->mask, 0);
			all_regrow0 &= blocks_zero(L, bs, p + L->offset, regrown, 1) &&
				       blocks_zero(L, bs, m + L->offset, regrown, 1) &&
				       blocks_zero(L, bs, v + L->offset, regrown, 1);
			all_regrow0 &= L->pruned == (int)llround(ratio * L->live) &&
				       L->regrown == L->pruned;
			free(pruned);
			free(regrown);
			free(want[l]);
		}
		struct loom_rigl_stats st;
		loom_rigl_stats(r, &st);
		all_churn &= st.live == live && st.churn_last == (double)fresh / (double)live &&
			     r->last_update == u * 10 && r->updates == u;
		/* "training": live weights and moments move, dead stay 0 */
		for (int l = 0; l < r->n; l++) {
			const struct loom_rigl_layer *L = &r->layer[l];
			for (int b = 0; b < L->nb; b++) {
				if (!L->mask[b])
					continue;
				for (int i = 0; i < bs; i++)
					for (int j = 0; j < bs; j++) {
						size_t o = L->offset + (size_t)((b / L->nbc) * bs + i) * L->OC +
							   (size_t)(b % L->nbc) * bs + j;
						p[o] += qrand(4);
						m[o] = qrand(4);
						v[o] = fabsf(qrand(4));
					}
			}
		}
	}
	ok(all_split, "bs %d %s: partial scores of two ranges combined equal the whole", bs, pn);
	ok(mag_split, "bs %d %s: partial block norms of two ranges combined equal the whole", bs,
	   pn);
	ok(all_match, "bs %d %s: after each of %d updates the masks are the naive reference's", bs,
	   pn, updates);
	ok(all_density, "bs %d %s: density exactly constant", bs, pn);
	ok(all_zero, "bs %d %s: pruned and dead blocks exactly 0 in weights, m and v", bs, pn);
	ok(all_regrow0, "bs %d %s: k = round(ratio x live) pruned and regrown; regrown blocks start at 0 (weights, m, v)",
	   bs, pn);
	ok(all_churn, "bs %d %s: stats: live, churn since the last update, step and count", bs, pn);
	ok(any_change, "bs %d %s: the updates changed some blocks", bs, pn);

	/* masks from a "checkpoint" */
	uint8_t *mk = malloc(r->layer[1].nb > 0 ? (size_t)r->layer[1].nb : 1);
	memcpy(mk, r->layer[1].mask, (size_t)r->layer[1].nb);
	ok(!loom_rigl_set_masks(r, 1, mk, r->layer[1].mask0), "set_masks takes a valid mask");
	mk[0] = 2;
	ok(loom_rigl_set_masks(r, 1, mk, NULL) == LOOM_EINVAL &&
	   strstr(loom_rigl_error(r), "b.weight: mask value of block 0 is not 0 or 1"),
	   "set_masks refuses a value other than 0/1");
	mk[0] = !r->layer[1].mask[0];
	ok(loom_rigl_set_masks(r, 1, mk, r->layer[1].mask0) == LOOM_EINVAL,
	   "set_masks refuses a live count that differs from the initial mask's");
	free(mk);
	loom_rigl_free(r);
	free(p);
	free(m);
	free(v);
	free(g);
	free(part);
}

/* A layer large enough for the team (bands of bs rows in parallel): the
 * scores, block norms and masking on 1 and 3 threads equal a plain loop
 * over each block's rows in order, bit for bit. */
static void team(int bs, int pooling)
{
	const size_t off = 5, IC = 32 * (size_t)bs, OC = 16 * (size_t)bs, n = off + IC * OC + 3;
	float *g = malloc(sizeof(float) * n), *x1 = malloc(sizeof(float) * n);
	float *x3 = malloc(sizeof(float) * n);
	struct loom_err err = { 0 };
	struct loom_rigl *r = loom_rigl_new(bs, pooling, &err);
	loom_rigl_add(r, "w", off, (int)IC, (int)OC);
	loom_rigl_init_masks(r, 0.5, 3);
	for (size_t i = 0; i < n; i++)
		g[i] = qrand(1000);
	const struct loom_rigl_layer *L = &r->layer[0];
	int nbc = L->nbc, ok_ref = 1;
	float *ref = calloc((size_t)L->nb, sizeof(float)), *s1 = malloc(sizeof(float) * L->nb);
	double *mref = calloc((size_t)L->nb, sizeof(double)), *m1 = malloc(sizeof(double) * L->nb);
	for (size_t i = 0; i < IC; i++)
		for (size_t j = 0; j < OC; j += bs) {
			int blk = (int)(i / bs) * nbc + (int)(j / bs);
			float s = 0;
			for (int k = 0; k < bs; k++) {
				float a = fabsf(g[off + i * OC + j + k]);
				s = pooling == LOOM_POOL_MAX ? (a > s ? a : s) : s + a;
				mref[blk] += a;
			}
			ref[blk] = pooling == LOOM_POOL_MAX ? (s > ref[blk] ? s : ref[blk]) : ref[blk] + s;
		}
	for (int th = 1; th <= 3; th += 2) {
		omp_set_num_threads(th);
		loom_rigl_score_reset(r);
		loom_rigl_score_range(r, 0, n, g);
		loom_rigl_mag_reset(r);
		loom_rigl_mag_range(r, 0, n, g);
		memcpy(s1, L->score, sizeof(float) * L->nb);
		memcpy(m1, r->mag, sizeof(double) * L->nb);
		ok_ref &= !memcmp(s1, ref, sizeof(float) * L->nb) &&
			  !memcmp(m1, mref, sizeof(double) * L->nb);
		float *x = th == 1 ? x1 : x3;
		memcpy(x, g, sizeof(float) * n);
		loom_rigl_mask_range(r, 0, n, x);
	}
	int masked = !memcmp(x1, x3, sizeof(float) * n);
	for (size_t i = 0; i < IC; i++)
		for (size_t j = 0; j < OC; j++) {
			int blk = (int)(i / bs) * nbc + (int)(j / bs);
			float want = L->mask[blk] ? g[off + i * OC + j] : 0.0f;
			masked &= x1[off + i * OC + j] == want;
		}
	ok(ok_ref, "bs %d %s: scores and block norms on 1 and 3 threads = the plain loop", bs,
	   pooling == LOOM_POOL_MAX ? "max" : "avg");
	ok(masked, "bs %d: masking on 1 and 3 threads = the plain loop", bs);
	omp_set_num_threads(1);
	loom_rigl_free(r);
	free(g); free(x1); free(x3); free(ref); free(s1); free(mref); free(m1);
}

int main(void)
{
	team(16, LOOM_POOL_AVG);
	team(32, LOOM_POOL_MAX);
	run(8, LOOM_POOL_AVG, 0.9, 12);
	run(16, LOOM_POOL_MAX, 0.5, 8);
	run(32, LOOM_POOL_AVG, 0.75, 6);
	/* cosine schedule of the prune ratio */
	struct loom_config c;
	loom_config_defaults(&c);
	c.steps = 1000;
	c.sparsity = 0.9;
	c.prune_ratio = 0.4;
	ok(loom_config_prune_end(&c) == 750, "prune_end 0 -> 0.75 x steps");
	ok(fabs(loom_config_prune_ratio(&c, 0) - 0.4) < 1e-12 &&
	   fabs(loom_config_prune_ratio(&c, 375) - 0.2) < 1e-12 &&
	   loom_config_prune_ratio(&c, 750) == 0, "cosine: prune_ratio at 0, half at prune_end/2, 0 at the end");
	ok(loom_config_prune_due(&c, 100) && !loom_config_prune_due(&c, 150) &&
	   loom_config_prune_due(&c, 700) && !loom_config_prune_due(&c, 800),
	   "updates every prune_every steps before prune_end");
	c.prune_schedule = LOOM_PRUNE_CONSTANT;
	ok(loom_config_prune_ratio(&c, 600) == 0.4, "constant schedule");
	c.sparsity = 0;
	ok(!loom_config_prune_due(&c, 100), "no update when dense");
	return done_testing();
}
