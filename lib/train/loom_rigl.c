/* loom_rigl.c - RigL block masks and their updates; see loom_rigl.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_config.h"
#include "loom_kernels.h"
#include "loom_rigl.h"

const char *loom_rigl_error(const struct loom_rigl *r)
{
	return r->err.msg;
}

struct loom_rigl *loom_rigl_new(int bs, int pooling, struct loom_err *err)
{
	if (bs < 1) {
		loom_err_set(err, LOOM_EINVAL, "rigl: block size %d", bs);
		return NULL;
	}
	struct loom_rigl *r = calloc(1, sizeof *r);
	if (!r) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	r->bs = bs;
	r->pooling = pooling;
	return r;
}

void loom_rigl_free(struct loom_rigl *r)
{
	if (!r)
		return;
	for (int l = 0; l < r->n; l++) {
		free(r->layer[l].mask);
		free(r->layer[l].mask0);
		free(r->layer[l].prev);
		free(r->layer[l].changed);
	}
	free(r->layer);
	free(r->scores);
	free(r->mag);
	free(r->scratch);
	free(r);
}

/* a candidate block of a selection (r->scratch holds max_nb of them;
 * loom_rigl_init_masks uses it as int[max_nb]) */
struct cand {
	double key;
	int idx;
};

int loom_rigl_add(struct loom_rigl *r, const char *name, size_t offset, int IC, int OC)
{
	if (IC < r->bs || OC < r->bs || IC % r->bs || OC % r->bs)
		return loom_err_set(&r->err, LOOM_EINVAL,
				    "%s: [%d, %d] is not a multiple of the block size %d", name, IC,
				    OC, r->bs);
	struct loom_rigl_layer *nl = realloc(r->layer, sizeof *nl * (size_t)(r->n + 1));
	if (!nl)
		return loom_err_set(&r->err, LOOM_ENOMEM, "out of memory");
	r->layer = nl;
	struct loom_rigl_layer *L = &r->layer[r->n];
	memset(L, 0, sizeof *L);
	snprintf(L->name, sizeof L->name, "%s", name);
	L->offset = offset;
	L->IC = IC;
	L->OC = OC;
	L->nbr = IC / r->bs;
	L->nbc = OC / r->bs;
	L->nb = L->nbr * L->nbc;
	L->mask = calloc((size_t)L->nb, 1);
	L->mask0 = calloc((size_t)L->nb, 1);
	L->prev = calloc((size_t)L->nb, 1);
	L->changed = calloc((size_t)L->nb, 1);
	float *sc = realloc(r->scores, sizeof(float) * (r->n_scores + (size_t)L->nb));
	if (sc)
		r->scores = sc;
	double *mg = realloc(r->mag, sizeof(double) * (r->n_scores + (size_t)L->nb));
	if (mg)
		r->mag = mg;
	void *scr = realloc(r->scratch, sizeof(struct cand) * (size_t)(L->nb > r->max_nb ? L->nb : r->max_nb));
	if (scr) {
		r->scratch = scr;
		r->max_nb = L->nb > r->max_nb ? L->nb : r->max_nb;
	}
	r->n++; /* freed with the others even when incomplete */
	if (!L->mask || !L->mask0 || !L->prev || !L->changed || !sc || !mg || !scr)
		return loom_err_set(&r->err, LOOM_ENOMEM, "out of memory");
	r->n_scores += (size_t)L->nb;
	size_t o = 0;
	for (int l = 0; l < r->n; l++) { /* scores may have moved */
		r->layer[l].score = r->scores + o;
		o += (size_t)r->layer[l].nb;
	}
	return 0;
}

int loom_rigl_live_for(const struct loom_rigl *r, int l, double sparsity)
{
	int nb = r->layer[l].nb, live = (int)llround((1.0 - sparsity) * nb);
	return live < 1 ? 1 : live > nb ? nb : live;
}

void loom_rigl_init_masks(struct loom_rigl *r, double sparsity, uint64_t seed)
{
	for (int l = 0; l < r->n; l++) {
		struct loom_rigl_layer *L = &r->layer[l];
		int live = loom_rigl_live_for(r, l, sparsity);
		/* partial Fisher-Yates: the first `live` of a uniformly random
		 * permutation of the block indices */
		int *perm = r->scratch;
		uint64_t key = loom_splitmix64(seed ^ loom_splitmix64(0x7191000ull + (uint64_t)l));
		memset(L->mask, 0, (size_t)L->nb);
		for (int i = 0; i < L->nb; i++)
			perm[i] = i;
		for (int i = 0; i < live; i++) {
			uint64_t h = loom_splitmix64(key ^ loom_splitmix64((uint64_t)i));
			int j = i + (int)(h % (uint64_t)(L->nb - i));
			int t = perm[i];
			perm[i] = perm[j];
			perm[j] = t;
			L->mask[perm[i]] = 1;
		}
		L->live = live;
		memcpy(L->mask0, L->mask, (size_t)L->nb);
		memcpy(L->prev, L->mask, (size_t)L->nb);
		memset(L->changed, 0, (size_t)L->nb);
		L->pruned = L->regrown = 0;
	}
	r->last_update = 0;
	r->updates = 0;
}

int loom_rigl_set_masks(struct loom_rigl *r, int l, const uint8_t *mask, const uint8_t *mask0)
{
	if (l < 0 || l >= r->n)
		return loom_err_set(&r->err, LOOM_EINVAL, "rigl: no layer %d", l);
	struct loom_rigl_layer *L = &r->layer[l];
	int n = 0, n0 = 0;
	if (!mask0)
		mask0 = mask;
	for (int b = 0; b < L->nb; b++) {
		if (mask[b] > 1 || mask0[b] > 1)
			return loom_err_set(&r->err, LOOM_EINVAL,
					    "%s: mask value of block %d is not 0 or 1", L->name, b);
		n += mask[b];
		n0 += mask0[b];
	}
	if (n != n0 || n < 1)
		return loom_err_set(&r->err, LOOM_EINVAL,
				    "%s: %d live blocks, the initial mask has %d (both must be equal and >= 1)",
				    L->name, n, n0);
	memcpy(L->mask, mask, (size_t)L->nb);
	memcpy(L->mask0, mask0, (size_t)L->nb);
	memcpy(L->prev, mask, (size_t)L->nb);
	memset(L->changed, 0, (size_t)L->nb);
	L->live = n;
	L->pruned = L->regrown = 0;
	return 0;
}

enum { V_MASK, V_CHANGED, V_SCORE_SUM, V_SCORE_MAX, V_MAG };

/* Visit [a, b) of layer L (values at x[i - lo]) in runs that stay inside
 * one block row segment, in order. */
static void visit_span(const struct loom_rigl *r, const struct loom_rigl_layer *L, size_t a,
		       size_t b, size_t lo, float *x, int mode)
{
	int bs = r->bs;
	while (a < b) {
		size_t e = a - L->offset;
		int row = (int)(e / (size_t)L->OC), col = (int)(e % (size_t)L->OC);
		size_t run = (size_t)(bs - col % bs);
		if (run > b - a)
			run = b - a;
		int blk = (row / bs) * L->nbc + col / bs;
		float *p = x + (a - lo);
		switch (mode) {
		case V_MASK:
			if (!L->mask[blk])
				memset(p, 0, run * sizeof(float));
			break;
		case V_CHANGED:
			if (L->changed[blk])
				memset(p, 0, run * sizeof(float));
			break;
		case V_SCORE_SUM: {
			float s = 0;
			for (size_t k = 0; k < run; k++)
				s += fabsf(p[k]);
			L->score[blk] += s;
			break;
		}
		case V_MAG: /* in double, element by element, in a block's row-major order */
			for (size_t k = 0; k < run; k++)
				r->mag[L->score - r->scores + blk] += fabsf(p[k]);
			break;
		case V_SCORE_MAX:
			for (size_t k = 0; k < run; k++)
				if (fabsf(p[k]) > L->score[blk])
					L->score[blk] = fabsf(p[k]);
			break;
		}
		a += run;
	}
}

/* Visit [lo, hi) of the flat array, values at x[i - lo].  A band of bs
 * rows of a layer holds whole blocks that no other band touches, so the
 * bands run on the team, each in order: every block sees its values in
 * the same order at any thread count. */
static void visit(const struct loom_rigl *r, size_t lo, size_t hi, float *x, int mode)
{
	for (int l = 0; l < r->n; l++) {
		const struct loom_rigl_layer *L = &r->layer[l];
		size_t a = L->offset > lo ? L->offset : lo;
		size_t end = L->offset + (size_t)L->IC * L->OC;
		size_t b = end < hi ? end : hi;
		if (a >= b)
			continue;
		size_t band = (size_t)r->bs * L->OC;
		size_t f = (a - L->offset) / band, t = (b - L->offset + band - 1) / band;
		#pragma omp parallel for schedule(static) if (b - a >= 65536)
		for (size_t k = f; k < t; k++) {
			size_t s0 = L->offset + k * band, s1 = s0 + band;
			visit_span(r, L, s0 > a ? s0 : a, s1 < b ? s1 : b, lo, x, mode);
		}
	}
}

void loom_rigl_mask_range(const struct loom_rigl *r, size_t lo, size_t hi, float *x)
{
	visit(r, lo, hi, x, V_MASK);
}

void loom_rigl_zero_changed(const struct loom_rigl *r, size_t lo, size_t hi, float *x)
{
	visit(r, lo, hi, x, V_CHANGED);
}

void loom_rigl_score_reset(struct loom_rigl *r)
{
	memset(r->scores, 0, sizeof(float) * r->n_scores);
}

void loom_rigl_score_range(struct loom_rigl *r, size_t lo, size_t hi, const float *g)
{
	visit(r, lo, hi, (float *)g, r->pooling == LOOM_POOL_MAX ? V_SCORE_MAX : V_SCORE_SUM);
}

void loom_rigl_score_combine(struct loom_rigl *r, const float *all, int world)
{
	for (size_t i = 0; i < r->n_scores; i++) {
		float s = all[i];
		for (int w = 1; w < world; w++) {
			float v = all[(size_t)w * r->n_scores + i];
			if (r->pooling == LOOM_POOL_MAX)
				s = v > s ? v : s;
			else
				s += v;
		}
		r->scores[i] = s;
	}
}

/* Top-k selection with a binary heap (loom_rigl_update): keeps the k most
 * preferred of the candidates (smaller key first, then the lower index);
 * the heap's root is the least preferred of those kept. */
static int worse(const struct cand *a, const struct cand *b)
{
	return a->key > b->key || (a->key == b->key && a->idx > b->idx);
}

static void sift_down(struct cand *h, int n, int i)
{
	for (;;) {
		int c = 2 * i + 1;
		if (c >= n)
			return;
		if (c + 1 < n && worse(&h[c + 1], &h[c]))
			c++;
		if (!worse(&h[c], &h[i]))
			return;
		struct cand t = h[i];
		h[i] = h[c];
		h[c] = t;
		i = c;
	}
}

static void heap_offer(struct cand *h, int *n, int k, struct cand c)
{
	if (*n < k) { /* sift up */
		int i = (*n)++;
		h[i] = c;
		while (i > 0 && worse(&h[i], &h[(i - 1) / 2])) {
			struct cand t = h[i];
			h[i] = h[(i - 1) / 2];
			h[(i - 1) / 2] = t;
			i = (i - 1) / 2;
		}
	} else if (k > 0 && worse(&h[0], &c)) {
		h[0] = c;
		sift_down(h, *n, 0);
	}
}

void loom_rigl_mag_reset(struct loom_rigl *r)
{
	memset(r->mag, 0, sizeof(double) * r->n_scores);
}

void loom_rigl_mag_range(struct loom_rigl *r, size_t lo, size_t hi, const float *x)
{
	visit(r, lo, hi, (float *)x, V_MAG);
}

void loom_rigl_mag_combine(struct loom_rigl *r, const double *all, int world)
{
	for (size_t i = 0; i < r->n_scores; i++) {
		double s = all[i];
		for (int w = 1; w < world; w++)
			s += all[(size_t)w * r->n_scores + i];
		r->mag[i] = s;
	}
}

void loom_rigl_update(struct loom_rigl *r, const float *params, double ratio, int64_t step)
{
	loom_rigl_mag_reset(r);
	for (int l = 0; l < r->n; l++) {
		const struct loom_rigl_layer *L = &r->layer[l];
		size_t n = (size_t)L->IC * L->OC;
		loom_rigl_mag_range(r, L->offset, L->offset + n, params + L->offset);
	}
	loom_rigl_update_mag(r, ratio, step);
}

void loom_rigl_update_mag(struct loom_rigl *r, double ratio, int64_t step)
{
	struct cand *h = r->scratch;
	if (ratio < 0)
		ratio = 0;
	if (ratio > 1)
		ratio = 1;
	for (int l = 0; l < r->n; l++) {
		struct loom_rigl_layer *L = &r->layer[l];
		const double *mag = r->mag + (L->score - r->scores);
		int k = (int)llround(ratio * L->live), n = 0;
		memcpy(L->prev, L->mask, (size_t)L->nb);
		memset(L->changed, 0, (size_t)L->nb);
		/* prune: the k live blocks of smallest L1 norm */
		for (int b = 0; b < L->nb; b++)
			if (L->mask[b])
				heap_offer(h, &n, k, (struct cand){ mag[b], b });
		for (int i = 0; i < n; i++) {
			L->mask[h[i].idx] = 0;
			L->changed[h[i].idx] = 1;
		}
		L->pruned = n;
		/* regrow: the k blocks not live now of largest score */
		n = 0;
		for (int b = 0; b < L->nb; b++)
			if (!L->mask[b])
				heap_offer(h, &n, k, (struct cand){ -(double)L->score[b], b });
		for (int i = 0; i < n; i++) {
			L->mask[h[i].idx] = 1;
			L->changed[h[i].idx] = 1;
		}
		L->regrown = n;
	}
	r->last_update = step;
	r->updates++;
}

void loom_rigl_stats(const struct loom_rigl *r, struct loom_rigl_stats *s)
{
	int64_t fresh = 0, fresh0 = 0;
	memset(s, 0, sizeof *s);
	for (int l = 0; l < r->n; l++) {
		const struct loom_rigl_layer *L = &r->layer[l];
		s->live += L->live;
		s->blocks += L->nb;
		s->pruned += L->pruned;
		s->regrown += L->regrown;
		for (int b = 0; b < L->nb; b++) {
			fresh += L->mask[b] && !L->prev[b];
			fresh0 += L->mask[b] && !L->mask0[b];
		}
	}
	s->density = s->blocks ? (double)s->live / (double)s->blocks : 0;
	s->churn_last = s->live ? (double)fresh / (double)s->live : 0;
	s->churn_init = s->live ? (double)fresh0 / (double)s->live : 0;
}
