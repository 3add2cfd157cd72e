/* loom_tp.c - tensor parallelism's model-neutral parts; see loom_tp.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom_ckpt.h"
#include "loom_dist.h"
#include "loom_kernels.h"
#include "loom_profile.h"
#include "loom_tp.h"

/* The runs of rank `rank`'s slice of tensor i: run(ctx, element offset in
 * the slice, in the whole tensor, floats) for each (see loom_tp.h). */
static void runs(const struct loom_tp *t, int i, int rank,
		 void (*run)(void *ctx, size_t lo, size_t wo, size_t n), void *ctx)
{
	const struct loom_tensor *x = &t->tab[i];
	int G = 1, kind = t->split(t->model, i, &G);
	size_t rows = x->ndim == 2 ? (size_t)x->shape[0] : 1, w = x->numel / rows, n = w / G;
	size_t fw = kind == LOOM_TP_COLS ? w * t->tp : w;
	size_t r0 = kind == LOOM_TP_ROWS ? rows * rank : 0;
	for (size_t r = 0; r < rows; r++)
		for (int k = 0; k < G; k++)
			run(ctx, r * w + (size_t)k * n,
			    (r0 + r) * fw +
				    (kind == LOOM_TP_COLS ? (size_t)k * (fw / G) + (size_t)rank * n : 0),
			    n);
}

struct move {
	float *loc, *whole;
	int to_full;
	float std;              /* init: the whole tensor's N(0, std^2) */
	uint64_t key;
};

static void move_run(void *ctx, size_t lo, size_t wo, size_t n)
{
	struct move *m = ctx;
	float *l = m->loc + lo, *f = m->whole + wo;
	memcpy(m->to_full ? f : l, m->to_full ? l : f, n * sizeof(float));
}

void loom_tp_copy(const struct loom_tp *t, int rank, float *slices, float *full, int to_full)
{
	size_t base = 0; /* tensor i in the whole layout: the same table order */
	for (int i = 0; i < t->nt; i++) {
		int G, whole = t->split(t->model, i, &G) == LOOM_TP_WHOLE;
		struct move m = { slices + t->tab[i].offset, full + base, to_full, 0, 0 };
		runs(t, i, rank, move_run, &m);
		base += t->tab[i].numel * (whole ? 1 : (size_t)t->tp);
	}
}

void loom_tp_ckpt_whole(const struct loom_tp *t, struct loom_ckpt_tensor *tab)
{
	for (int i = 0; i < t->nt; i++) {
		int G, kind = t->split(t->model, i, &G);
		if (kind != LOOM_TP_WHOLE) /* rows: the first dimension; columns: the last */
			tab[i].shape[kind == LOOM_TP_ROWS ? 0 : tab[i].ndim - 1] *= t->tp;
	}
}

/* loom_tp_ckpt_runs' state: a run continuing the last one (in the slice
 * and in the whole tensor) extends it */
struct ckpt_runs {
	struct loom_ckpt_run *r;
	size_t n, i, off;       /* runs so far; tensor i, at off of the arrays */
	float *p, *m, *v;
	size_t end, wend;       /* where the last run ends in the slice, in the whole */
};

static void ckpt_run(void *ctx, size_t lo, size_t wo, size_t n)
{
	struct ckpt_runs *x = ctx;
	size_t o = x->off + lo;
	if (x->n && x->end == lo && x->wend == wo) {
		if (x->r)
			x->r[x->n - 1].n += n;
	} else {
		if (x->r)
			x->r[x->n] = (struct loom_ckpt_run){
				.tensor = x->i, .lo = wo, .n = n, .w = x->p + o,
				.m = x->m ? x->m + o : NULL, .v = x->v ? x->v + o : NULL };
		x->n++;
	}
	x->end = lo + n;
	x->wend = wo + n;
}

size_t loom_tp_ckpt_runs(const struct loom_tp *t, float *params, float *m, float *v, int save,
			 struct loom_ckpt_run *r)
{
	struct ckpt_runs x = { r, 0, 0, 0, params, m, v, 0, 0 };
	for (int i = 0; i < t->nt; i++) {
		int G;
		if (save && t->rank && t->split(t->model, i, &G) == LOOM_TP_WHOLE)
			continue; /* written once, by the team's rank 0 */
		x.i = (size_t)i;
		x.off = t->tab[i].offset;
		x.end = x.wend = SIZE_MAX; /* a new tensor starts a new run */
		runs(t, i, t->rank, ckpt_run, &x);
	}
	return x.n;
}

static void init_run(void *ctx, size_t lo, size_t wo, size_t n)
{
	struct move *m = ctx;
	loom_model_normal_at(m->loc + lo, n, m->std, m->key, wo);
}

void loom_tp_init(const struct loom_tp *t, int first, float *params, uint64_t seed,
		  float (*init)(const struct loom_tensor *x, const void *ctx), const void *ctx)
{
	for (int i = first; t->tp > 1 && i < t->nt; i++) {
		const struct loom_tensor *x = &t->tab[i];
		int G;
		if (x->ndim == 1 || t->split(t->model, i, &G) == LOOM_TP_WHOLE)
			continue;
		struct move m = { params + x->offset, NULL, 0, init(x, ctx),
				  loom_model_init_key(seed, i) };
		runs(t, i, t->rank, init_run, &m);
	}
}

int loom_tp_ready(const struct loom_tp *t)
{
	if (t->tp > 1 && !t->dist->reduce)
		return loom_err_set(t->err, LOOM_EINVAL, "rank %d of %d tensor-parallel ranks: "
				    "not connected (the dist_model's connect hook)", t->rank, t->tp);
	return 0;
}

int loom_tp_sum(const struct loom_tp *t, float *x, size_t n)
{
	if (t->tp == 1)
		return 0;
	return t->dist->reduce(t->dist->ctx, x, n, LOOM_DIST_SUM_F32, t->err);
}

int loom_tp_seq_rows(const struct loom_tp *t, int B, int T, int N, int *nr, int *r0,
		     int32_t **at)
{
	if (!t->seq) {
		*nr = N;
		*r0 = 0;
		return 0;
	}
	if (N % t->tp)
		return loom_err_set(t->err, LOOM_EINVAL, "batch %dx%d: sequence_parallel splits its "
				    "%d tokens across %d ranks: not a multiple of it", B, T, N, t->tp);
	int32_t *a = realloc(*at, sizeof(int32_t) * (size_t)(N / t->tp));
	if (!a)
		return loom_err_set(t->err, LOOM_ENOMEM, "out of memory");
	*at = a;
	*nr = N / t->tp;
	*r0 = t->rank * *nr;
	for (int n = 0; n < *nr; n++)
		a[n] = *r0 + n;
	return 0;
}

int loom_tp_rows_gather(const struct loom_tp *t, float *buf, size_t n)
{
	int rc = 0;
	if (t->seq)
		LOOM_PROF(LOOM_PROF_COMM, rc = t->dist->gather(t->dist->ctx, buf, n, t->err););
	return rc;
}

int loom_tp_rows_sum(const struct loom_tp *t, float *in, float *out, size_t n, float **y)
{
	int rc = 0;
	*y = t->seq ? out : in;
	if (t->seq)
		LOOM_PROF(LOOM_PROF_COMM, rc = t->dist->scatter(t->dist->ctx, in, out, n, t->err););
	else if (t->tp > 1)
		LOOM_PROF(LOOM_PROF_COMM, rc = loom_tp_sum(t, in, n););
	return rc;
}

int loom_tp_sum_add(const struct loom_tp *t, float *d, size_t n, int k, float *const *dst)
{
	int rc = 0;
	LOOM_PROF(LOOM_PROF_COMM, rc = loom_tp_sum(t, d, (size_t)k * n););
	for (int j = 0; !rc && j < k; j++)
		for (size_t i = 0; i < n; i++)
			dst[j][i] += d[(size_t)j * n + i];
	return rc;
}

uint64_t loom_tp_hash(uint64_t h, const int32_t *x, size_t n)
{
	h = loom_splitmix64(h ^ (uint64_t)n);
	for (size_t i = 0; i < n; i++)
		h = loom_splitmix64(h ^ (uint32_t)x[i]);
	return h;
}

/* the hash's largest and smallest over the team compared */
int loom_tp_same_batch(const struct loom_tp *t, uint64_t h)
{
	double x[2] = { (double)(h >> 12), -(double)(h >> 12) }; /* exact in a double */
	int rc = t->dist->reduce(t->dist->ctx, x, 2, LOOM_DIST_MAX_F64, t->err);
	if (rc)
		return rc;
	if (x[0] != -x[1])
		return loom_err_set(t->err, LOOM_EINVAL, "the %d tensor-parallel ranks of a replica "
				    "got different batches: each must read its replica's frames "
				    "(loom-feed --rank R --world D, R the replica)", t->tp);
	return 0;
}

/* ncorrect: the first id holding a row's maximum mx[i], the least over
 * the ranks (the max of -id), against its target */
static int xent_correct(const struct loom_tp *t, const float *logits, int n, int Vl, int V,
			const float *mx, const int32_t *tg, int ign, int64_t *ncorrect)
{
	int v0 = t->rank * Vl, rc;
	double *first = malloc(sizeof(double) * (n ? n : 1));
	if (!first)
		return loom_err_set(t->err, LOOM_ENOMEM, "out of memory");
	for (int i = 0; i < n; i++) {
		const float *r = logits + (size_t)i * Vl;
		int v = 0;
		while (v < Vl && r[v] != mx[i])
			v++;
		first[i] = v < Vl ? -(double)(v0 + v) : -(double)V;
	}
	rc = t->dist->reduce(t->dist->ctx, first, (size_t)n, LOOM_DIST_MAX_F64, t->err);
	for (int i = 0; !rc && i < n; i++)
		*ncorrect += tg[i] != ign && -first[i] == (double)tg[i];
	free(first);
	return rc;
}

int loom_tp_xent(const struct loom_tp *t, float *logits, int n, int Vl, int V,
		 const int32_t *tg, int ign, float *losses, float *scratch, int64_t *ncorrect)
{
	int v0 = t->rank * Vl, rc;
	float *mx = scratch, *sum = mx + n, *lt = sum + n;
	#pragma omp parallel for schedule(static)
	for (int i = 0; i < n; i++)
		mx[i] = loom_k_row_max(logits + (size_t)i * Vl, Vl);
	if ((rc = t->dist->reduce(t->dist->ctx, mx, (size_t)n, LOOM_DIST_MAX_F32, t->err)))
		return rc;
	if (ncorrect && (rc = xent_correct(t, logits, n, Vl, V, mx, tg, ign, ncorrect)))
		return rc;
	#pragma omp parallel for schedule(static)
	for (int i = 0; i < n; i++) {
		float *r = logits + (size_t)i * Vl;
		int k = tg[i] - v0;
		lt[i] = k >= 0 && k < Vl ? r[k] : 0.0f;
		sum[i] = loom_k_row_exp(r, Vl, mx[i]);
	}
	if ((rc = t->dist->reduce(t->dist->ctx, sum, 2 * (size_t)n, LOOM_DIST_SUM_F32, t->err)))
		return rc;
	#pragma omp parallel for schedule(static)
	for (int i = 0; i < n; i++) {
		loom_k_row_scale(logits + (size_t)i * Vl, Vl, 1.0f / sum[i]);
		losses[i] = tg[i] == ign ? 0.0f : logf(sum[i]) + mx[i] - lt[i];
	}
	return 0;
}

int loom_tp_step(const struct loom_tp *t, float *params, float *grads, float *m, float *v,
		 const struct loom_adamw *h, float lr, int64_t step, float *norm)
{
	double whole = 0, split = 0;
	int rc = loom_tp_ready(t);
	if (rc)
		return rc;
	for (int i = 0; i < t->nt; i++) {
		double s2 = loom_k_sumsq(grads + t->tab[i].offset, t->tab[i].numel);
		int G;
		*(t->split(t->model, i, &G) == LOOM_TP_WHOLE ? &whole : &split) += s2;
	}
	if ((rc = t->dist->reduce(t->dist->ctx, &split, 1, LOOM_DIST_SUM_F64, t->err)))
		return rc;
	loom_model_adamw_apply(t->tab, t->nt, params, grads, m, v, h, lr, step,
			       loom_model_clip_scale(h, split + whole, norm));
	return 0;
}
