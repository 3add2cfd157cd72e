/* The GPT's rows that end early (lib/train/loom_gpt.h): records shorter
 * than the sequence, padded as loom-feed --pad pads them and masked by
 * loom_gpt_mask_pad, run packed (each row up to its last counted target)
 * against the padded reference (g->padded): the logits of every computed
 * token, the per-token losses, the loss, the evaluation counts and the
 * gradients within 1e-6 relative, with dropout, recompute, a chunked LM
 * head, a rebuilt res2, loss weighting, sparse projections, bf16 and
 * gradient accumulation; a
 * 20-step training curve within 1e-6; which batches run packed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom_gpt.h"
#include "loom_mm.h"
#include "tap.h"
#include "testlib.h"

enum { MAXB = 8, MAXT = 80 };

struct shape {
	int L, C, NH, V, B, T;
};

static struct loom_config shape_cfg(const struct shape *s)
{
	struct loom_config c = tiny_gpt_cfg(s->B, s->T);
	c.n_layer = s->L;
	c.n_embd = s->C;
	c.n_head = s->NH;
	c.vocab_size = s->V;
	c.n_positions = s->T;
	return c;
}

/* A padded model (*gp, g->padded) and a packed one (*gv) of c, from the
 * same weights. */
static void pair(const struct loom_config *c, struct loom_gpt **gp, struct loom_gpt **gv)
{
	*gp = loom_gpt_new(c);
	*gv = loom_gpt_new(c);
	loom_gpt_init_weights(*gp, 11);
	loom_gpt_init_weights(*gv, 11);
	(*gp)->padded = 1;
}

/* Records of T+1 ids, row r real for len[r] ids then padded with an id
 * outside the vocabulary (loom-feed --pad), split and masked for g as
 * loom-train does: in, tg [B,T].  Returns the targets counted. */
static int records(const struct loom_gpt *g, const struct shape *s, const int *len,
		   uint32_t salt, int32_t *in, int32_t *tg)
{
	uint32_t rec[MAXB * (MAXT + 1)], pad = (uint32_t)s->V + 977;
	int counted = 0;
	for (int r = 0; r < s->B; r++) {
		for (int t = 0; t <= s->T; t++)
			rec[r * (s->T + 1) + t] =
				t < len[r] ? (uint32_t)(loom_splitmix64(salt * 1000u + r * 97u + t) %
							 (uint64_t)s->V)
					   : pad;
		counted += len[r] > 1 ? len[r] - 1 : 0;
	}
	loom_gpt_split_records(rec, s->B, s->T + 1, s->T, in, tg);
	loom_gpt_mask_pad(g, pad, in, tg, (size_t)s->B * s->T);
	return counted;
}

/* max |logit difference| / max |logit| over the tokens gv computed, the
 * logits lnf @ wte^T of each model's final hidden states (g->lnf, kept
 * by a forward that took no gradient) */
static double logits_rel(const struct loom_gpt *gp, const struct loom_gpt *gv)
{
	int C = gv->C;
	double d = 0, m = 0;
	const float *wte = gv->params + gv->tensors[0].offset;
	for (int i = 0; i < gv->N; i++) {
		int at = gv->packed ? gv->pat[i] : i;
		for (int v = 0; v < gv->V; v++) {
			double a = 0, b = 0;
			for (int c = 0; c < C; c++) {
				a += (double)gv->lnf[(size_t)i * C + c] * wte[(size_t)v * C + c];
				b += (double)gp->lnf[(size_t)at * C + c] * wte[(size_t)v * C + c];
			}
			d = fmax(d, fabs(a - b));
			m = fmax(m, fabs(b));
		}
	}
	return d / m;
}

/* max |loss difference| over gv's tokens, relative to the largest loss */
static double losses_rel(const struct loom_gpt *gp, const struct loom_gpt *gv)
{
	double d = 0, m = 0;
	for (int i = 0; i < gv->N; i++) {
		int at = gv->packed ? gv->pat[i] : i;
		d = fmax(d, fabs((double)gv->losses[i] - gp->losses[at]));
		m = fmax(m, fabs((double)gp->losses[at]));
	}
	return d / m;
}

static double rel(double a, double b)
{
	return fabs(a - b) / fabs(b);
}

/* Rows of lengths len (records of len[r] real ids), packed against
 * padded: forward without dropout (evaluation), then a training
 * forward + backward with dropout. */
static void test_packed(const struct shape *s, const int *len, const char *what)
{
	struct loom_config c = shape_cfg(s);
	c.dropout = c.attn_dropout = 0.1;
	struct loom_gpt *gp, *gv;
	pair(&c, &gp, &gv);
	int32_t in[MAXB * MAXT], tg[MAXB * MAXT];
	int counted = records(gp, s, len, 1, in, tg), real = 0;
	for (int r = 0; r < s->B; r++) /* each row up to its last target */
		real += len[r] > 1 ? len[r] - 1 : 0;
	float lp, lv;
	is_int(loom_gpt_forward(gp, in, tg, s->B, s->T, 0, 0, &lp) ||
	       loom_gpt_forward(gv, in, tg, s->B, s->T, 0, 0, &lv), 0,
	       "%s: evaluation forwards (L=%d C=%d NH=%d V=%d, %dx%d)", what, s->L, s->C, s->NH,
	       s->V, s->B, s->T);
	ok(gv->packed && gv->N == real && !gp->packed && gp->N == s->B * s->T,
	   "  packed: %d tokens computed of %d", gv->N, s->B * s->T);
	double dl = logits_rel(gp, gv), dt = losses_rel(gp, gv);
	ok(dl <= 1e-6 && dt <= 1e-6 && rel(lv, lp) <= 1e-6,
	   "  logits (%.3g), per-token losses (%.3g) and loss (%.7f vs %.7f) within 1e-6", dl, dt,
	   lv, lp);
	double np, nv;
	int64_t tp, tv, cp, cv;
	loom_gpt_eval_counts(gp, &np, &tp, &cp);
	loom_gpt_eval_counts(gv, &nv, &tv, &cv);
	ok(tp == counted && tv == tp && cv == cp && rel(nv, np) <= 1e-6,
	   "  evaluation counts: %lld targets, %lld argmax hits, NLL %.6f vs %.6f",
	   (long long)tv, (long long)cv, nv, np);

	is_int(loom_gpt_forward(gp, in, tg, s->B, s->T, 1, 9, &lp) ||
	       loom_gpt_forward(gv, in, tg, s->B, s->T, 1, 9, &lv), 0, "  training forwards (dropout)");
	dl = logits_rel(gp, gv);
	ok(dl <= 1e-6 && rel(lv, lp) <= 1e-6,
	   "  with dropout: logits (%.3g) and loss (%.7f vs %.7f) within 1e-6", dl, lv, lp);
	is_int(loom_gpt_backward(gp, 1.0f) || loom_gpt_backward(gv, 1.0f), 0, "  both backwards");
	const char *worst = "-";
	double all, g = tensors_rel(gp->tensors, gp->n_tensors, gv->grads, gp->grads, &worst, &all);
	ok(all <= 1e-6, "  gradients within 1e-6 relative (%.3g; worst tensor %.3g, %s)", all, g,
	   worst);
	loom_gpt_free(gp);
	loom_gpt_free(gv);
}

/* The other ways through forward and backward, each against the padded
 * reference: loom_gpt_train_micro (the LM head's gradient in forward)
 * with a chunked head, res2 rebuilt, recompute; loss weighting;
 * gradient accumulation over a packed and a full micro-batch; RigL's
 * block-sparse projections; bf16 products. */
static void test_paths(void)
{
	static const struct shape s = { 2, 16, 4, 23, 4, 12 };
	static const int len[][4] = { { 13, 5, 9, 2 }, { 13, 13, 13, 13 } };
	static const char *const names[] = { "train_micro, head chunks of 5 rows, res2 rebuilt",
					     "recompute", "loss weighting inverse_count",
					     "accumulation of a packed and a full micro-batch",
					     "sparse (RigL) projections", "bf16" };
	int32_t in[2][MAXB * MAXT], tg[2][MAXB * MAXT];
	for (int k = 0; k < 6; k++) {
		struct loom_config c = shape_cfg(&s);
		c.dropout = c.attn_dropout = 0.1;
		c.recompute = k == 1;
		c.loss_weighting = k == 2 ? LOOM_LOSSW_INVCOUNT : LOOM_LOSSW_NONE;
		c.sparsity = k == 4 ? 0.5 : 0;
		c.block_size = 8;
		char why[200];
		if (k == 5 && loom_mm_bf16_missing(why, sizeof why)) {
			ok(1, "# SKIP bf16: %s", why);
			continue;
		}
		c.precision = k == 5 ? LOOM_PREC_BF16 : LOOM_PREC_FP32;
		struct loom_gpt *gp, *gv;
		pair(&c, &gp, &gv);
		gp->head_rows = gv->head_rows = k == 0 ? 5 : 0;
		gp->keep_res2 = gv->keep_res2 = k == 0 ? -1 : 0;
		records(gp, &s, len[0], 3, in[0], tg[0]);
		records(gp, &s, len[1], 4, in[1], tg[1]);
		float lp = 0, lv = 0, x;
		int rc = 0, packed = 1;
		for (int m = 0; m < (k == 3 ? 2 : 1); m++) {
			float sc = k == 3 ? 0.5f : 1.0f;
			if (k == 0) {
				rc |= loom_gpt_train_micro(gp, in[m], tg[m], s.B, s.T, 5 + m, sc, &x);
				lp += x;
				rc |= loom_gpt_train_micro(gv, in[m], tg[m], s.B, s.T, 5 + m, sc, &x);
				lv += x;
			} else {
				rc |= loom_gpt_forward(gp, in[m], tg[m], s.B, s.T, 1, 5 + m, NULL) ||
				      loom_gpt_backward(gp, sc);
				rc |= loom_gpt_forward(gv, in[m], tg[m], s.B, s.T, 1, 5 + m, NULL) ||
				      loom_gpt_backward(gv, sc);
				lp += gp->wloss;
				lv += gv->wloss;
			}
			packed &= gv->packed == (m == 0) && !gp->packed;
		}
		const char *worst = "-";
		double all, g = tensors_rel(gp->tensors, gp->n_tensors, gv->grads, gp->grads, &worst,
					    &all);
		double tol = k == 5 ? 1e-5 : 1e-6; /* bf16: the backend may block rows otherwise */
		ok(!rc && packed && rel(lv, lp) <= tol && all <= tol,
		   "%s: objective (%.7f vs %.7f) and gradients (%.3g; worst tensor %.3g, %s) "
		   "within %g", names[k], lv, lp, all, g, worst, tol);
		loom_gpt_free(gp);
		loom_gpt_free(gv);
	}
}

/* 20 training steps (dropout, attention dropout, AdamW) of a packed and a
 * padded model from the same weights on the same batches of records of
 * random lengths (some batches full): loss curves within 1e-6. */
static void test_curve(void)
{
	static const struct shape s = { 2, 16, 4, 23, 6, 16 };
	enum { STEPS = 20 };
	struct loom_config c = shape_cfg(&s);
	c.dropout = c.attn_dropout = 0.1;
	struct loom_gpt *gp, *gv;
	pair(&c, &gp, &gv);
	int32_t in[MAXB * MAXT], tg[MAXB * MAXT];
	double worst = 0;
	int rc = 0, npacked = 0;
	for (int st = 0; st < STEPS; st++) {
		int len[MAXB];
		for (int r = 0; r < s.B; r++)
			len[r] = st % 5 == 4 ? s.T + 1
					     : 2 + (int)(loom_splitmix64((uint64_t)(st * s.B + r)) % s.T);
		records(gp, &s, len, 100 + st, in, tg);
		float lp, lv, n1, n2;
		rc |= loom_gpt_train_micro(gp, in, tg, s.B, s.T, 200 + st, 1.0f, &lp) ||
		      loom_gpt_train_micro(gv, in, tg, s.B, s.T, 200 + st, 1.0f, &lv);
		npacked += gv->packed;
		loom_gpt_step(gp, 1e-2f, st + 1, &n1);
		loom_gpt_step(gv, 1e-2f, st + 1, &n2);
		worst = fmax(worst, rel(lv, lp));
	}
	ok(!rc && npacked == 16 && worst <= 1e-6,
	   "20 training steps packed (%d of them) and padded: loss curves within 1e-6 (max %.3g)",
	   npacked, worst);
	/* generation after packed batches: full rows, the same logits */
	int32_t tok[5] = { 1, 2, 3, 4, 5 };
	float a[23], b[23];
	ok(!loom_gpt_logits_last(gp, tok, 5, a) && !loom_gpt_logits_last(gv, tok, 5, b) &&
	   !gv->packed && close_arr(b, a, 23, 1e-6, 1e-5, "logits_last"),
	   "generation after packed training: full rows, the padded model's logits");
	loom_gpt_free(gp);
	loom_gpt_free(gv);
}

/* Which batches run packed: rows that end early with targets; not a
 * batch of full rows, one without targets, one whose every target is
 * ignored (its backward adds nothing), nor a model with g->padded. */
static void test_which(void)
{
	static const struct shape s = { 1, 8, 2, 11, 2, 6 };
	struct loom_config c = shape_cfg(&s);
	struct loom_gpt *g = loom_gpt_new(&c);
	loom_gpt_init_weights(g, 3);
	int32_t in[12], tg[12];
	static const int full[2] = { 7, 7 }, early[2] = { 7, 3 }, none[2] = { 1, 1 };
	records(g, &s, full, 1, in, tg);
	ok(!loom_gpt_forward(g, in, tg, 2, 6, 0, 0, NULL) && !g->packed && g->N == 12,
	   "full rows: padded (12 tokens)");
	records(g, &s, early, 1, in, tg);
	ok(!loom_gpt_forward(g, in, tg, 2, 6, 0, 0, NULL) && g->packed && g->N == 8 &&
	   g->off[1] == 6 && g->pos[7] == 1 && g->pat[7] == 7,
	   "a row ending early: packed (8 tokens, the second row's at 6..7)");
	ok(!loom_gpt_forward(g, in, NULL, 2, 6, 0, 0, NULL) && !g->packed,
	   "without targets: padded");
	records(g, &s, none, 1, in, tg);
	float loss = -1;
	ok(!loom_gpt_forward(g, in, tg, 2, 6, 1, 0, &loss) && !g->packed && loss == 0 &&
	   !loom_gpt_backward(g, 1.0f) && loom_k_sumsq(g->grads, g->n_params) == 0,
	   "every target ignored: padded, loss 0, no gradient");
	records(g, &s, early, 1, in, tg);
	g->padded = 1;
	ok(!loom_gpt_forward(g, in, tg, 2, 6, 0, 0, NULL) && !g->packed && g->N == 12,
	   "g->padded: padded");
	loom_gpt_free(g);
}

int main(void)
{
	/* the tiny model; a wider one whose rows cross the attention's tiles
	 * of 64 queries and keys, one row of a single id (no target) */
	static const struct shape tiny = { 2, 16, 4, 23, 4, 8 }, wide = { 2, 48, 4, 97, 4, 72 };
	static const int len_tiny[4] = { 9, 3, 6, 2 }, len_wide[4] = { 40, 73, 1, 67 };
	test_packed(&tiny, len_tiny, "tiny");
	test_packed(&wide, len_wide, "wide");
	test_paths();
	test_curve();
	test_which();
	return done_testing();
}
