/* Tensor parallelism of BERT (loom_bert_new_tp) checked in one process,
 * without MPI: T threads, each one rank's slices, summing, gathering and
 * reduce-scattering through calls built on a barrier (tests/tp_team.h).
 * For the QA head (its softmax over every position: padded rows; over the
 * real tokens: rows packed at their length) and the masked-LM head (the
 * vocabulary-parallel loss, packed rows), with dropout, a pad token whose
 * embedding row lies on a rank other than the first, and a clipped AdamW
 * step, on T=2 and T=4 ranks against the whole model, without and with
 * sequence parallelism (the tokens split: B S a multiple of T; rows
 * padded): each rank initialises its slices as the whole model draws
 * them; the loss, every gradient and every weight after the step (slices
 * put back with loom_tp_copy) within 1e-5; the whole tensors' gradients
 * the same bytes on every rank; an evaluation's loss and hits those of
 * the whole model; the bytes the calls moved in the micro-batch and step
 * against loom_bert_tp_bytes; then 19 more steps, the 20 losses and the
 * last weights within 1e-5 of the whole model's.  A batch whose tokens
 * the ranks cannot split evenly is refused with one line. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_bert.h"
#include "loom_dist.h"
#include "loom_tp.h"
#include "tap.h"
#include "testlib.h"
#include "tp_team.h"

enum { B = 2, S = 10, STEPS = 20 };

static int32_t ids[B * S], seg[B * S], mask[B * S], lab[B * S];
static int32_t spos[B] = { 4, 2 }, epos[B] = { 7, -1 }; /* row 1's end ignored */

struct rank {
	struct tp_rank tr;      /* first: the team's member and the results */
	struct loom_bert *b;
	struct loom_bert_batch x;
	float curve[STEPS];     /* the losses of the 20 steps */
};

/* a micro-batch with dropout and a step: o's loss, gradients (before the
 * step), norm and weights (after it) */
static int train(struct loom_bert *b, const struct loom_bert_batch *x, struct tp_result *o)
{
	int rc = loom_bert_forward(b, x, B, S, 1, 77, &o->loss);
	if (rc || (rc = loom_bert_backward(b, 1.0f)))
		return rc;
	memcpy(o->grads, b->grads, b->n_params * sizeof(float));
	loom_bert_step(b, 1e-3f, 1, &o->norm);
	memcpy(o->params, b->params, b->n_params * sizeof(float));
	return b->err.code;
}

static int eval(struct loom_bert *b, const struct loom_bert_batch *x, struct tp_result *o)
{
	int rc = loom_bert_forward(b, x, B, S, 0, 0, NULL);
	if (!rc)
		loom_bert_eval_counts(b, &o->nll, &o->ntok, &o->correct);
	return rc;
}

/* steps 2..STEPS after the first, losses into curve[1..) */
static int more_steps(struct loom_bert *b, const struct loom_bert_batch *x, float *curve)
{
	for (int t = 2; t <= STEPS; t++) {
		int rc = loom_bert_forward(b, x, B, S, 1, 77 + (uint64_t)t, &curve[t - 1]);
		if (rc || (rc = loom_bert_backward(b, 1.0f)))
			return rc;
		loom_bert_step(b, 1e-3f, t, NULL);
		if (b->err.code)
			return b->err.code;
	}
	return 0;
}

static void *run_rank(void *arg)
{
	struct rank *r = arg;
	struct tp_result *o = &r->tr.out;
	tp_connect(&r->tr);
	o->rc = train(r->b, &r->x, o);
	r->tr.step = r->tr.mem;
	r->tr.want = loom_bert_tp_bytes(r->b, 1);
	o->rc = o->rc ? o->rc : eval(r->b, &r->x, o);
	r->curve[0] = o->loss;
	o->rc = o->rc ? o->rc : more_steps(r->b, &r->x, r->curve);
	return NULL;
}

/* max |a - b| / |b| over the curve */
static double curve_rel(const float *a, const float *b)
{
	double d = 0;
	for (int t = 0; t < STEPS; t++)
		d = fmax(d, fabs((double)a[t] - b[t]) / fabs((double)b[t]));
	return d;
}

static void check(int T, int task, int qa_loss, int sp, const char *task_name)
{
	char what[96];
	snprintf(what, sizeof what, "%s%s T=%d", task_name, sp ? ", SP" : "", T);
	struct loom_bert_config c = tiny_bert_cfg(task);
	c.n_head = 4;           /* split by 2 and 4 */
	c.vocab_size = 24;
	c.pad_token_id = 14;    /* on rank 1 of 2, rank 2 of 4 */
	c.dropout = 0.1;        /* the same masks on every rank */
	c.qa_loss = qa_loss;
	c.adamw.grad_clip = 0.05; /* the step clips by the whole norm */
	c.sequence_parallel = sp;
	int qa = task == LOOM_BERT_QA;
	struct loom_bert_batch x = { ids, seg, mask, qa ? spos : NULL, qa ? epos : NULL,
				     qa ? NULL : lab };
	struct loom_bert *w = loom_bert_new(&c);
	loom_bert_init_weights(w, 3);
	struct rank r[TP_MAXT];
	for (int k = 0; k < T; k++) {
		r[k] = (struct rank){ .b = loom_bert_new_tp(&c, k, T), .x = x };
		loom_bert_init_weights(r[k].b, 3);
		loom_bert_tp(r[k].b, &r[k].tr.tp);
		loom_bert_dist_model(r[k].b, &r[k].tr.dm);
	}
	tp_team_run(what, T, r, sizeof r[0], w->params, run_rank);

	struct tp_result o;
	float curve[STEPS];
	tp_result_init(&o, w->n_params);
	o.rc = train(w, &x, &o);
	o.rc = o.rc ? o.rc : eval(w, &x, &o);
	tp_team_check(what, T, r, sizeof r[0], &o, "loom_bert_tp_bytes");
	/* 19 more steps (the ranks' already ran): the curve and the weights */
	curve[0] = o.loss;
	int rc = more_steps(w, &x, curve);
	float *pt = calloc(w->n_params, sizeof(float));
	for (int k = 0; k < T; k++)
		loom_tp_copy(&r[k].tr.tp, k, r[k].b->params, pt, 1);
	double dc = curve_rel(r[0].curve, curve), dp = tp_rel(pt, w->params, w->n_params);
	ok(!rc && dc <= 1e-5 && dp <= 1e-5,
	   "%s: %d steps with dropout: losses (max rel %.2g) and last weights (%.2g) within "
	   "1e-5 of the whole model's", what, STEPS, dc, dp);
	for (int k = 0; k < T; k++) {
		tp_result_release(&r[k].tr.out);
		loom_bert_free(r[k].b);
	}
	tp_result_release(&o);
	free(pt);
	loom_bert_free(w);
}

/* A new head (--init-from a checkpoint without it): each rank's slices
 * of it as the whole model draws them, nothing else touched. */
static void new_head(int T, int task)
{
	struct loom_bert_config c = tiny_bert_cfg(task);
	c.n_head = 4;
	c.vocab_size = 24;	/* the MLM bias split by vocabulary rows */
	struct loom_bert *w = loom_bert_new(&c);
	loom_bert_init_weights(w, 5);
	int same = 1, untouched = 1;
	for (int k = 0; k < T; k++) {
		struct loom_bert *b = loom_bert_new_tp(&c, k, T);
		float *want = malloc(b->n_params * sizeof(float));
		struct loom_tp t;
		loom_bert_tp(b, &t);
		loom_tp_copy(&t, k, want, w->params, 0);
		loom_bert_init_head(b, 5);
		size_t h = b->tensors[b->n_tensors - (task == LOOM_BERT_QA ? 2 : 5)].offset;
		same &= !memcmp(b->params + h, want + h, (b->n_params - h) * sizeof(float));
		for (size_t i = 0; i < h; i++)
			untouched &= b->params[i] == 0.0f;
		free(want);
		loom_bert_free(b);
	}
	const char *what = task == LOOM_BERT_QA ? "QA" : "MLM";
	ok(same, "%s T=%d: loom_bert_init_head gives each rank its slices of the whole head", what,
	   T);
	ok(untouched, "%s T=%d: and leaves the encoder as it was", what, T);
	loom_bert_free(w);
}

int main(void)
{
	for (int i = 0; i < B * S; i++) {
		int t = i % S;
		ids[i] = 1 + (int32_t)(loom_splitmix64(i) % 23);
		seg[i] = t >= 3;
		mask[i] = i < S || t < 5; /* row 1: 5 real tokens, 4 padding */
		lab[i] = (i % 3 == 1 && mask[i]) ? (int32_t)(loom_splitmix64(i + 99) % 24) : -100;
	}
	ids[3] = 14; /* the pad token among the inputs: its row takes no gradient */
	for (int sp = 0; sp <= 1; sp++)
		for (int T = 2; T <= 4; T += 2) {
			check(T, LOOM_BERT_QA, LOOM_BERT_QA_LOSS_ALL, sp, "QA, padded rows");
			/* (sequence parallelism runs them padded) */
			check(T, LOOM_BERT_QA, LOOM_BERT_QA_LOSS_REAL, sp, "QA, packed rows");
			check(T, LOOM_BERT_MLM, LOOM_BERT_QA_LOSS_ALL, sp, "MLM, packed rows");
		}
	for (int T = 2; T <= 4; T += 2) {
		new_head(T, LOOM_BERT_QA);
		new_head(T, LOOM_BERT_MLM);
	}

	/* 1 x 9 tokens do not split over 2 ranks: refused before any call */
	struct loom_bert_config c = tiny_bert_cfg(LOOM_BERT_QA);
	c.sequence_parallel = 1;
	c.vocab_size = 24;
	struct loom_bert *b = loom_bert_new_tp(&c, 0, 2);
	struct loom_bert_batch x = { ids, seg, NULL, spos, epos, NULL };
	is_int(loom_bert_forward(b, &x, 1, 9, 1, 1, NULL), LOOM_EINVAL,
	       "SP: a batch of 1 x 9 tokens on 2 ranks is refused");
	is_str(loom_bert_error(b), "batch 1x9: sequence_parallel splits its 9 tokens across 2 ranks: "
	       "not a multiple of it", "  with one line saying why");
	loom_bert_free(b);
	return done_testing();
}
