/* Tensor parallelism of the GPT (loom_gpt_new_tp) checked in one process,
 * without MPI: T threads, each one rank's slices, summing through reduce,
 * gather and scatter calls built on a barrier (what lib/train/loom_dist.c
 * does over MPI).  A training micro-batch with dropout and a clipped AdamW
 * step on T=2 and T=4 ranks, without and with sequence parallelism,
 * against the whole model (each rank initialised on its own): the loss,
 * every gradient and every weight after the step (the ranks' slices put
 * back with loom_gpt_tp_copy) within 1e-5, the whole tensors' gradients
 * the same bytes on every rank, an evaluation's loss and argmax hits, and
 * the bytes the calls moved in the micro-batch and step against
 * loom_gpt_tp_bytes (the LM head in one chunk and in chunks of 3 rows). */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_dist.h"
#include "loom_gpt.h"
#include "tap.h"
#include "testlib.h"
#include "tp_team.h"

struct rank {
	struct tp_member mem;   /* first: the team calls' ctx */
	struct loom_gpt *g;
	const int32_t *in, *tg;
	int B, T, rc;
	float loss, norm;
	float *grads;           /* a copy before the step */
	int head_rows;          /* the LM head's chunks (0: the default) */
	uint64_t step_bytes, step_half; /* mem's counts after the micro-batch and step */
	double nll;
	int64_t ntok, correct;
};

static void *run_rank(void *arg)
{
	struct rank *r = arg;
	struct loom_gpt *g = r->g;
	struct loom_dist_model m;
	loom_gpt_dist_model(g, &m);
	m.connect(m.model, &(struct loom_dist_calls){ .ctx = r, .reduce = tp_reduce,
						      .gather = tp_gather, .scatter = tp_scatter });
	g->head_rows = r->head_rows;
	r->rc = loom_gpt_train_micro(g, r->in, r->tg, r->B, r->T, 77, 1.0f, &r->loss);
	memcpy(r->grads, g->grads, g->n_params * sizeof(float));
	if (!r->rc)
		loom_gpt_step(g, 1e-3f, 1, &r->norm);
	r->step_bytes = r->mem.bytes;
	r->step_half = r->mem.half;
	if (!r->rc && !(r->rc = loom_gpt_forward(g, r->in, r->tg, r->B, r->T, 0, 0, NULL)))
		loom_gpt_eval_counts(g, &r->nll, &r->ntok, &r->correct);
	return NULL;
}

/* T ranks, the LM head in chunks of head_rows (0: the default), with
 * sequence parallelism when sp (its tokens split: B S a multiple of T) */
static void check(int T, int head_rows, int sp)
{
	int B = 2, S = sp ? 8 : 7;
	struct loom_config c = tiny_gpt_cfg(B, S);
	c.sequence_parallel = sp;
	const char *sq = sp ? " SP" : "";
	c.vocab_size = 24;      /* split by 2 and 4 */
	c.dropout = 0.1;        /* the same masks on every rank */
	c.grad_clip = 0.5;      /* the step clips by the whole norm */
	int32_t in[16], tg[16];
	for (int i = 0; i < B * S; i++) {
		in[i] = (i * 7 + 3) % 24;
		tg[i] = (i * 5 + 1) % 24;
	}
	tg[4] = c.ignore_id = 23; /* an ignored target */
	struct loom_gpt *w = loom_gpt_new(&c);
	loom_gpt_init_weights(w, 1);
	struct tp_team grp = { .T = T };
	struct rank r[TP_MAXT];
	pthread_t th[TP_MAXT];
	int same_init = 1;
	pthread_barrier_init(&grp.bar, NULL, (unsigned)T);
	for (int k = 0; k < T; k++) {
		r[k] = (struct rank){ .mem = { .rank = k, .team = &grp }, .g = loom_gpt_new_tp(&c, k, T),
				      .in = in, .tg = tg, .B = B, .T = S, .head_rows = head_rows };
		r[k].grads = malloc(r[k].g->n_params * sizeof(float));
		r[k].g->keep_res2 = sp ? -1 : 0; /* SP: backward rebuilds res2 (a scatter) */
		/* a rank's own initialisation is its slice of the whole model's */
		loom_gpt_init_weights(r[k].g, 1);
		loom_gpt_tp_copy(r[k].g, k, r[k].grads, w->params, 0);
		same_init &= !memcmp(r[k].grads, r[k].g->params, r[k].g->n_params * sizeof(float));
	}
	ok(same_init, "T=%d%s: each rank initialises its slices as the whole model draws them", T, sq);
	for (int k = 0; k < T; k++)
		pthread_create(&th[k], NULL, run_rank, &r[k]);
	for (int k = 0; k < T; k++)
		pthread_join(th[k], NULL);

	float loss, norm;
	double nll;
	int64_t ntok, correct;
	int rc = loom_gpt_train_micro(w, in, tg, B, S, 77, 1.0f, &loss);
	float *gw = malloc(w->n_params * sizeof(float));
	memcpy(gw, w->grads, w->n_params * sizeof(float));
	loom_gpt_step(w, 1e-3f, 1, &norm);
	rc = rc ? rc : loom_gpt_forward(w, in, tg, B, S, 0, 0, NULL);
	loom_gpt_eval_counts(w, &nll, &ntok, &correct);

	float *gt = calloc(w->n_params, sizeof(float)), *pt = calloc(w->n_params, sizeof(float));
	int rcs = rc, same_loss = 1, same_whole = 1;
	for (int k = 0; k < T; k++) {
		rcs |= r[k].rc;
		loom_gpt_tp_copy(r[k].g, k, r[k].grads, gt, 1);
		loom_gpt_tp_copy(r[k].g, k, r[k].g->params, pt, 1);
		same_loss &= r[k].loss == r[0].loss && r[k].norm == r[0].norm;
		/* wpe (tensor 1) and ln_f's (the last two): whole on every rank */
		const struct loom_tensor *t = r[k].g->tensors;
		int n = r[k].g->n_tensors;
		same_whole &= !memcmp(r[k].grads + t[1].offset, r[0].grads + t[1].offset,
				      t[1].numel * sizeof(float)) &&
			      !memcmp(r[k].grads + t[n - 2].offset, r[0].grads + t[n - 2].offset,
				      2 * t[n - 1].numel * sizeof(float));
	}
	ok(!rcs, "T=%d%s: %d ranks train a micro-batch, step and evaluate", T, sq, T);
	/* a ring all-reduce sends 2 (T-1)/T of the buffer, an all-gather or
	 * a reduce-scatter (T-1)/T */
	uint64_t sent = r[0].step_bytes * 2 * (uint64_t)(T - 1) / (uint64_t)T + r[0].step_half;
	is_int((long long)sent, (long long)loom_gpt_tp_bytes(r[0].g, 1),
	       "T=%d%s head_rows %d: the bytes sent in a micro-batch and step are loom_gpt_tp_bytes's",
	       T, sq, head_rows);
	ok(same_loss && fabsf(r[0].loss - loss) <= 1e-5f * loss,
	   "T=%d%s: every rank's loss %.7f is the whole model's %.7f", T, sq, r[0].loss, loss);
	double dg = tp_rel(gt, gw, w->n_params), dp = tp_rel(pt, w->params, w->n_params);
	ok(dg <= 1e-5, "T=%d%s: the slices' gradients are the whole model's (max rel %.2g)", T, sq, dg);
	ok(same_whole, "T=%d%s: wpe's and ln_f's gradients the same bytes on every rank", T, sq);
	ok(fabsf(r[0].norm - norm) <= 1e-5f * norm && norm > c.grad_clip,
	   "T=%d%s: the clipped norm %.6f is the whole gradient's %.6f", T, sq, r[0].norm, norm);
	ok(dp <= 1e-5, "T=%d%s: the weights after the step too (max rel %.2g)", T, sq, dp);
	ok(fabs(r[0].nll - nll) <= 1e-5 * nll && r[0].ntok == ntok && r[0].correct == correct,
	   "T=%d%s: evaluation: nll %.5f, %lld tokens, %lld argmax hits as the whole model's", T, sq,
	   r[0].nll, (long long)r[0].ntok, (long long)r[0].correct);
	for (int k = 0; k < T; k++) {
		free(r[k].grads);
		loom_gpt_free(r[k].g);
	}
	pthread_barrier_destroy(&grp.bar);
	free(gw);
	free(gt);
	free(pt);
	loom_gpt_free(w);
}

int main(void)
{
	check(2, 0, 0);
	check(4, 0, 0);
	check(2, 3, 0); /* the LM head in chunks (backward recomputes none: train_micro) */
	check(2, 0, 1);
	check(4, 0, 1);
	check(2, 3, 1);
	return done_testing();
}
