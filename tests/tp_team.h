/* A tensor-parallel team in one process, for the unit tests of the split
 * models (gpt_tp.c, bert_tp.c): T threads, each one rank, summing or
 * maxing through the loom_dist_calls reduce call (lib/train/loom_dist.h),
 * gathering and reduce-scattering through its gather and scatter calls,
 * built on a barrier, as lib/train/loom_dist.c does over MPI; each member
 * counts the bytes it reduced and those its gathers and scatters sent. */
#ifndef TP_TEAM_H
#define TP_TEAM_H

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom_dist.h"

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

#endif
