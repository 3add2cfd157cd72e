/* A tensor-parallel team in one process, for the unit tests of the split
 * models (gpt_tp.c, bert_tp.c): T threads, each one rank, summing or
 * maxing through the loom_dist_calls reduce call (lib/train/loom_dist.h),
 * gathering and reduce-scattering through its gather and scatter calls,
 * built on a barrier, as lib/train/loom_dist.c does over MPI; each member
 * counts the bytes it reduced and those its gathers and scatters sent.
 *
 * A check (each test's own check()): the whole model and T ranks, each
 * from the same seed, train a micro-batch and step, then evaluate, their
 * results in a struct tp_result; tp_team_run checks the ranks' first
 * weights and runs them, tp_team_check compares them with the whole
 * model's.  A test's per-rank struct opens with a struct tp_rank.
 * Include after tap.h.  Test code: a failed malloc is not checked. */
#ifndef TP_TEAM_H
#define TP_TEAM_H

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom_dist.h"
#include "loom_tp.h"

#define TP_MAXT 4

struct tp_team {
	int T;
	pthread_barrier_t bar;
	void *buf[TP_MAXT];
};

struct tp_member {
	int rank;
	struct tp_team *team;
	uint64_t bytes;         /* reduced so far */
	uint64_t half;          /* sent by gathers and scatters: (T-1) n x 4 each */
};

/* every member's buf[0..n) summed or maxed into each (ctx: its member) */
static __attribute__((unused)) int tp_reduce(void *ctx, void *buf, size_t n, int op,
					     struct loom_err *err)
{
	struct tp_member *r = ctx;
	struct tp_team *g = r->team;
	int f64 = op == LOOM_DIST_SUM_F64 || op == LOOM_DIST_MAX_F64;
	int sum = op == LOOM_DIST_SUM_F32 || op == LOOM_DIST_SUM_F64;
	double *acc = malloc(sizeof(double) * (n ? n : 1));
	if (!acc)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	r->bytes += n * (f64 ? 8 : 4);
	g->buf[r->rank] = buf;
	pthread_barrier_wait(&g->bar);
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < g->T; k++) {
			double x = f64 ? ((double *)g->buf[k])[i] : ((float *)g->buf[k])[i];
			acc[i] = !k ? x : sum ? acc[i] + x : fmax(acc[i], x);
		}
	pthread_barrier_wait(&g->bar); /* everyone has read every buffer */
	for (size_t i = 0; i < n; i++) {
		if (f64)
			((double *)buf)[i] = acc[i];
		else
			((float *)buf)[i] = (float)acc[i];
	}
	free(acc);
	return 0;
}

/* every member's n floats at buf[k n] into each buf (the gather call) */
static __attribute__((unused)) int tp_gather(void *ctx, float *buf, size_t n,
					     struct loom_err *err)
{
	struct tp_member *r = ctx;
	struct tp_team *g = r->team;
	(void)err;
	r->half += (uint64_t)(g->T - 1) * n * 4;
	g->buf[r->rank] = buf;
	pthread_barrier_wait(&g->bar);
	for (int k = 0; k < g->T; k++)
		if (k != r->rank)
			memcpy(buf + k * n, (float *)g->buf[k] + k * n, n * sizeof(float));
	pthread_barrier_wait(&g->bar);
	return 0;
}

/* in[T n] summed over the members, this member's n of the sum into out
 * (the scatter call; out may be in) */
static __attribute__((unused)) int tp_scatter(void *ctx, float *in, float *out, size_t n,
					      struct loom_err *err)
{
	struct tp_member *r = ctx;
	struct tp_team *g = r->team;
	double *acc = calloc(n ? n : 1, sizeof(double));
	if (!acc)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	r->half += (uint64_t)(g->T - 1) * n * 4;
	g->buf[r->rank] = in;
	pthread_barrier_wait(&g->bar);
	for (int k = 0; k < g->T; k++)
		for (size_t i = 0; i < n; i++)
			acc[i] += ((float *)g->buf[k])[r->rank * n + i];
	pthread_barrier_wait(&g->bar); /* everyone has read every buffer */
	for (size_t i = 0; i < n; i++)
		out[i] = (float)acc[i];
	free(acc);
	return 0;
}

/* max |a - b| over max |b| */
static __attribute__((unused)) double tp_rel(const float *a, const float *b, size_t n)
{
	double d = 0, m = 0;
	for (size_t i = 0; i < n; i++) {
		d = fmax(d, fabs((double)a[i] - b[i]));
		m = fmax(m, fabs((double)b[i]));
	}
	return m > 0 ? d / m : d;
}

/* What a model did in a check (the whole model, or a rank on its slices):
 * grads and params n floats each (tp_result_init), the test's copies of
 * the gradients before the step and of the weights after it. */
struct tp_result {
	int rc;
	float loss, norm;
	size_t n;
	float *grads, *params;
	double nll;             /* the evaluation's (loom_*_eval_counts) */
	int64_t ntok, correct;
};

static __attribute__((unused)) void tp_result_init(struct tp_result *o, size_t n)
{
	*o = (struct tp_result){ .n = n, .grads = calloc(n ? n : 1, sizeof(float)),
				 .params = calloc(n ? n : 1, sizeof(float)) };
}

static __attribute__((unused)) void tp_result_release(struct tp_result *o)
{
	free(o->grads);
	free(o->params);
}

/* One rank of a check: the first member of a test's per-rank struct. */
struct tp_rank {
	struct tp_member mem;   /* the team calls' ctx (tp_connect) */
	struct tp_member step;  /* mem as it was after the micro-batch and step */
	uint64_t want;          /* the model's count of the bytes then (loom_*_tp_bytes) */
	struct loom_tp tp;      /* the rank's slices' layout (loom_*_tp) */
	struct loom_dist_model dm; /* its model's hooks (loom_*_dist_model) */
	struct tp_result out;
};

/* rank k of ranks[] (structs of `size` bytes, each opening with a tp_rank) */
static inline struct tp_rank *tp_at(void *ranks, size_t size, int k)
{
	return (struct tp_rank *)((char *)ranks + (size_t)k * size);
}

/* the rank's model calls the team (from the rank's thread, in tp_team_run) */
static __attribute__((unused)) void tp_connect(struct tp_rank *r)
{
	r->dm.connect(r->dm.model, &(struct loom_dist_calls){ .ctx = &r->mem, .reduce = tp_reduce,
							     .gather = tp_gather,
							     .scatter = tp_scatter });
}

/* T ranks (ranks[k]: structs of `size` bytes, each opening with its
 * tp_rank, whose tp and dm are its model's: loom_*_tp, loom_*_dist_model)
 * whose models have drawn their weights from the whole model's seed (its
 * weights full[]): their result buffers (the test releases them:
 * tp_result_release); "what: each rank initialises its slices as the
 * whole model draws them"; then fn(&ranks[k]) on T threads, one a rank of
 * a team of T (its mem set here), until all return. */
static __attribute__((unused)) void tp_team_run(const char *what, int T, void *ranks, size_t size,
						float *full, void *(*fn)(void *))
{
	struct tp_team g = { .T = T };
	pthread_t th[TP_MAXT];
	int same_init = 1;
	pthread_barrier_init(&g.bar, NULL, (unsigned)T);
	for (int k = 0; k < T; k++) {
		struct tp_rank *r = tp_at(ranks, size, k);
		r->mem = (struct tp_member){ .rank = k, .team = &g };
		tp_result_init(&r->out, r->dm.n_params);
		loom_tp_copy(&r->tp, k, r->out.grads, full, 0);
		same_init &= !memcmp(r->out.grads, r->dm.params, r->dm.n_params * sizeof(float));
	}
	ok(same_init, "%s: each rank initialises its slices as the whole model draws them", what);
	for (int k = 0; k < T; k++)
		pthread_create(&th[k], NULL, fn, tp_at(ranks, size, k));
	for (int k = 0; k < T; k++) {
		pthread_join(th[k], NULL);
		tp_at(ranks, size, k)->mem.team = NULL; /* gone on return */
	}
	pthread_barrier_destroy(&g.bar);
}

/* The ranks' results against the whole model's w: all ran; the bytes
 * the calls moved in the micro-batch and step as the model counts them
 * (bytes_fn names its function); the loss; under sequence parallelism,
 * that the ranks gathered and reduce-scattered; every gradient (the
 * slices put back) within 1e-5; the whole tensors' gradients the same
 * bytes on every rank; the clipped norm; the weights after the step
 * within 1e-5; the evaluation. */
static __attribute__((unused)) void tp_team_check(const char *what, int T, void *ranks,
						  size_t size, const struct tp_result *w,
						  const char *bytes_fn)
{
	const struct tp_rank *r0 = tp_at(ranks, size, 0);
	float *gt = calloc(w->n, sizeof(float)), *pt = calloc(w->n, sizeof(float));
	int rcs = w->rc, same_loss = 1, same_whole = 1;
	for (int k = 0; k < T; k++) {
		const struct tp_rank *r = tp_at(ranks, size, k);
		rcs |= r->out.rc;
		loom_tp_copy(&r->tp, k, r->out.grads, gt, 1);
		loom_tp_copy(&r->tp, k, r->out.params, pt, 1);
		same_loss &= r->out.loss == r0->out.loss && r->out.norm == r0->out.norm;
		for (int i = 0; i < r->tp.nt; i++) {
			const struct loom_tensor *x = &r->tp.tab[i];
			if (r->dm.replicated(r->dm.model, i))
				same_whole &= !memcmp(r->out.grads + x->offset,
						      r0->out.grads + x->offset,
						      x->numel * sizeof(float));
		}
	}
	ok(!rcs, "%s: %d ranks train a micro-batch, step and evaluate", what, T);
	/* a ring all-reduce sends 2 (T-1)/T of the buffer, an all-gather or
	 * a reduce-scatter (T-1)/T */
	uint64_t sent = r0->step.bytes * 2 * (uint64_t)(T - 1) / (uint64_t)T + r0->step.half;
	is_int((long long)sent, (long long)r0->want,
	       "%s: the bytes sent in the micro-batch and step are %s's", what, bytes_fn);
	ok(same_loss && fabsf(r0->out.loss - w->loss) <= 1e-5f * w->loss,
	   "%s: every rank's loss %.7f is the whole model's %.7f", what, r0->out.loss, w->loss);
	if (r0->tp.seq)
		ok(r0->step.half, "%s: tokens split: the ranks gathered and reduce-scattered", what);
	double dg = tp_rel(gt, w->grads, w->n), dp = tp_rel(pt, w->params, w->n);
	ok(dg <= 1e-5, "%s: the slices' gradients are the whole model's (max rel %.2g)", what, dg);
	ok(same_whole, "%s: the whole tensors' gradients the same bytes on every rank", what);
	ok(fabsf(r0->out.norm - w->norm) <= 1e-5f * w->norm && w->norm > r0->dm.adamw.grad_clip,
	   "%s: the clipped norm %.6f is the whole gradient's %.6f", what, r0->out.norm, w->norm);
	ok(dp <= 1e-5, "%s: the weights after the step too (max rel %.2g)", what, dp);
	ok(fabs(r0->out.nll - w->nll) <= 1e-5 * w->nll && r0->out.ntok == w->ntok &&
		   r0->out.correct == w->correct,
	   "%s: evaluation: nll %.5f over %lld, %lld right, as the whole model's", what,
	   r0->out.nll, (long long)r0->out.ntok, (long long)r0->out.correct);
	free(gt);
	free(pt);
}

#endif
