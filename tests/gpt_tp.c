/* Tensor parallelism of the GPT (loom_gpt_new_tp) checked in one process,
 * without MPI: T threads, each one rank's slices, summing, gathering and
 * reduce-scattering through calls built on a barrier (tests/tp_team.h,
 * what lib/train/loom_dist.c does over MPI).  A training micro-batch with
 * dropout and a clipped AdamW step on T=2 and T=4 ranks, without and with
 * sequence parallelism, against the whole model (each rank initialised on
 * its own): the loss, every gradient and every weight after the step (the
 * ranks' slices put back with loom_tp_copy) within 1e-5, the whole
 * tensors' gradients the same bytes on every rank, an evaluation's loss
 * and argmax hits, and the bytes the calls moved in the micro-batch and
 * step against loom_gpt_tp_bytes (the LM head in one chunk and in chunks
 * of 3 rows; under sequence parallelism, gathers and reduce-scatters among
 * them). */
#include <math.h>
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
	struct tp_rank tr;      /* first: the team's member and the results */
	struct loom_gpt *g;
	const int32_t *in, *tg;
	int B, T;
};

/* a micro-batch with dropout and a step: o's loss, gradients (before the
 * step), norm and weights (after it) */
static int train(struct loom_gpt *g, const int32_t *in, const int32_t *tg, int B, int T,
		 struct tp_result *o)
{
	int rc = loom_gpt_train_micro(g, in, tg, B, T, 77, 1.0f, &o->loss);
	memcpy(o->grads, g->grads, g->n_params * sizeof(float));
	if (!rc)
		loom_gpt_step(g, 1e-3f, 1, &o->norm);
	memcpy(o->params, g->params, g->n_params * sizeof(float));
	return rc;
}

static int eval(struct loom_gpt *g, const int32_t *in, const int32_t *tg, int B, int T,
		struct tp_result *o)
{
	int rc = loom_gpt_forward(g, in, tg, B, T, 0, 0, NULL);
	if (!rc)
		loom_gpt_eval_counts(g, &o->nll, &o->ntok, &o->correct);
	return rc;
}

static void *run_rank(void *arg)
{
	struct rank *r = arg;
	struct tp_result *o = &r->tr.out;
	tp_connect(&r->tr);
	o->rc = train(r->g, r->in, r->tg, r->B, r->T, o);
	r->tr.step = r->tr.mem;
	r->tr.want = loom_gpt_tp_bytes(r->g, 1);
	o->rc = o->rc ? o->rc : eval(r->g, r->in, r->tg, r->B, r->T, o);
	return NULL;
}

/* T ranks, the LM head in chunks of head_rows (0: the default), with
 * sequence parallelism when sp (its tokens split: B S a multiple of T) */
static void check(int T, int head_rows, int sp)
{
	int B = 2, S = sp ? 8 : 7;
	struct loom_config c = tiny_gpt_cfg(B, S);
	c.sequence_parallel = sp;
	char what[64];
	snprintf(what, sizeof what, "T=%d%s", T, sp ? " SP" : "");
	if (head_rows)
		snprintf(what + strlen(what), sizeof what - strlen(what), " head_rows %d", head_rows);
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
	struct rank r[TP_MAXT];
	for (int k = 0; k < T; k++) {
		r[k] = (struct rank){ .g = loom_gpt_new_tp(&c, k, T), .in = in, .tg = tg, .B = B,
				      .T = S };
		r[k].g->head_rows = head_rows;
		r[k].g->keep_res2 = sp ? -1 : 0; /* SP: backward rebuilds res2 (a scatter) */
		/* a rank's own initialisation is its slice of the whole model's */
		loom_gpt_init_weights(r[k].g, 1);
		loom_gpt_tp(r[k].g, &r[k].tr.tp);
		loom_gpt_dist_model(r[k].g, &r[k].tr.dm);
	}
	tp_team_run(what, T, r, sizeof r[0], w->params, run_rank);

	struct tp_result o;
	tp_result_init(&o, w->n_params);
	o.rc = train(w, in, tg, B, S, &o);
	o.rc = o.rc ? o.rc : eval(w, in, tg, B, S, &o);
	tp_team_check(what, T, r, sizeof r[0], &o, "loom_gpt_tp_bytes");
	for (int k = 0; k < T; k++) {
		tp_result_release(&r[k].tr.out);
		loom_gpt_free(r[k].g);
	}
	tp_result_release(&o);
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
