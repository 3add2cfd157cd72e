/* Gradients of the whole GPT (lib/train/loom_gpt.h) against central finite
 * differences on a tiny model; recompute, dropout and loss-weighting
 * variants; and the bookkeeping around backward (accumulation,
 * determinism, ignore id). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom_gpt.h"
#include "loom_kernels.h"
#include "tap.h"
#include "testlib.h"

enum { B = 2, T = 7 };

static struct loom_config tiny_cfg(void)
{
	struct loom_config c = tiny_gpt_cfg(B, T);
	c.ignore_id = 5;
	return c;
}

static int32_t in[B * T], tg[B * T];

/* The training objective (g->wloss: the loss unless weighted). */
static double loss_at(struct loom_gpt *g, int train, uint64_t key)
{
	if (loom_gpt_forward(g, in, tg, B, T, train, key, NULL))
		return NAN;
	return g->wloss;
}

/* Check sampled entries of every tensor, then a random direction over all. */
static void gradcheck(struct loom_gpt *g, int train, const char *what)
{
	loom_gpt_zero_grad(g);
	double l0 = loss_at(g, train, 77);
	is_int(loom_gpt_backward(g, 1.0f), 0, "%s: backward", what);
	float *grad = malloc(sizeof(float) * g->n_params);
	memcpy(grad, g->grads, sizeof(float) * g->n_params);
	ok(isfinite(l0) && l0 > 0, "%s: loss %.4f", what, l0);

	const float h = 1e-2f;
	int bad = 0, checked = 0;
	for (int ti = 0; ti < g->n_tensors; ti++) {
		const struct loom_tensor *t = &g->tensors[ti];
		for (int k = 0; k < 6; k++) {
			size_t j = t->offset + loom_splitmix64(ti * 31 + k) % t->numel;
			float save = g->params[j];
			g->params[j] = save + h;
			double lp = loss_at(g, train, 77);
			g->params[j] = save - h;
			double lm = loss_at(g, train, 77);
			g->params[j] = save;
			double fd = (lp - lm) / (2 * h), an = grad[j];
			checked++;
			if (fabs(fd - an) > 2e-3 + 3e-2 * fabs(an)) {
				if (bad++ < 5)
					diag("%s: %s[%zu]: analytic %.6g, numeric %.6g", what, t->name,
					     j - t->offset, an, fd);
			}
		}
	}
	ok(!bad, "%s: %d sampled gradient entries match finite differences (%d off)", what,
	   checked, bad);

	/* directional derivative along a random unit-ish direction */
	float *d = malloc(sizeof(float) * g->n_params), *p0 = malloc(sizeof(float) * g->n_params);
	memcpy(p0, g->params, sizeof(float) * g->n_params);
	double dot = 0, nn = 0;
	uint64_t s = 99;
	for (size_t i = 0; i < g->n_params; i++) {
		s = loom_splitmix64(s);
		d[i] = (float)((s >> 40) * (1.0 / 16777216.0) - 0.5);
		nn += (double)d[i] * d[i];
	}
	for (size_t i = 0; i < g->n_params; i++) {
		d[i] /= (float)sqrt(nn);
		dot += (double)d[i] * grad[i];
	}
	double eps = 1e-2;
	for (size_t i = 0; i < g->n_params; i++)
		g->params[i] = p0[i] + (float)eps * d[i];
	double lp = loss_at(g, train, 77);
	for (size_t i = 0; i < g->n_params; i++)
		g->params[i] = p0[i] - (float)eps * d[i];
	double lm = loss_at(g, train, 77);
	memcpy(g->params, p0, sizeof(float) * g->n_params);
	double fd = (lp - lm) / (2 * eps);
	ok(fabs(fd - dot) <= 1e-3 + 1e-2 * fabs(dot),
	   "%s: directional derivative %.6g vs finite difference %.6g", what, dot, fd);
	free(d);
	free(p0);
	free(grad);
}

/* The flash-attention kernel alone against finite differences, at a T
 * that spans three key/query tiles (the last partial): loss = sum w * out
 * for fixed random w; sampled entries of q, k and v. */
static double att_loss(const float *qkv, const float *w, float *out, float *lse,
		       const int32_t *len, int Bk, int Tk, int C, int NH, float p)
{
	if (loom_k_attention_fwd(out, lse, qkv, len, NULL, Bk, Tk, C, NH, p, 5))
		return NAN;
	double l = 0;
	for (size_t i = 0; i < (size_t)Bk * Tk * C; i++)
		l += (double)w[i] * out[i];
	return l;
}

/* causal (len NULL) or with a key-padding mask (BERT) */
static void attention_gradcheck(float p, const int32_t *len)
{
	enum { Bk = 2, Tk = 150, C = 16, NH = 2 };
	const char *mode = len ? "masked" : "causal";
	size_t n3 = (size_t)Bk * Tk * 3 * C, n = (size_t)Bk * Tk * C;
	float *qkv = malloc(sizeof(float) * n3), *w = malloc(sizeof(float) * n);
	float *out = malloc(sizeof(float) * n), *lse = malloc(sizeof(float) * Bk * NH * Tk);
	float *dqkv = malloc(sizeof(float) * n3);
	uint64_t s = 3;
	for (size_t i = 0; i < n3; i++) {
		s = loom_splitmix64(s);
		qkv[i] = (float)((s >> 40) * (1.0 / 16777216.0) - 0.5) * 3.0f;
	}
	for (size_t i = 0; i < n; i++) {
		s = loom_splitmix64(s);
		w[i] = (float)((s >> 40) * (1.0 / 16777216.0) - 0.5);
	}
	att_loss(qkv, w, out, lse, len, Bk, Tk, C, NH, p);
	is_int(loom_k_attention_bwd(dqkv, w, qkv, out, lse, len, NULL, Bk, Tk, C, NH, p, 5), 0,
	       "attention %s T=%d dropout %.1f: backward runs", mode, Tk, p);
	const float h = 1e-2f;
	int bad = 0, checked = 0;
	for (int k = 0; k < 300; k++) {
		size_t j = loom_splitmix64(k + 1000) % n3;
		float save = qkv[j];
		qkv[j] = save + h;
		double lp = att_loss(qkv, w, out, lse, len, Bk, Tk, C, NH, p);
		qkv[j] = save - h;
		double lm = att_loss(qkv, w, out, lse, len, Bk, Tk, C, NH, p);
		qkv[j] = save;
		double fd = (lp - lm) / (2 * h), an = dqkv[j];
		checked++;
		if (fabs(fd - an) > 2e-3 + 3e-2 * fabs(an) && bad++ < 5)
			diag("qkv[%zu]: analytic %.6g, numeric %.6g", j, an, fd);
	}
	ok(!bad, "attention %s T=%d dropout %.1f: %d sampled q/k/v gradients match finite "
	   "differences (%d off)", mode, Tk, p, checked, bad);
	free(qkv); free(w); free(out); free(lse); free(dqkv);
}

/* What the cases share: the tiny model (big_init), its one-chunk
 * gradients (ref), the recompute model (gr) and loss (l1). */
static struct loom_config c;
static struct loom_gpt *g, *gr;
static float *ref, l1;

/* The model: its tensor table, then a gradient check. */
static void case_model(void)
{
	is_int(loom_config_validate(&c), 0, "tiny config valid");
	for (int i = 0; i < B * T; i++) {
		in[i] = (int32_t)(loom_splitmix64(i) % 23);
		tg[i] = (int32_t)(loom_splitmix64(i + 1000) % 23);
	}
	tg[3] = 5; /* ignored */
	tg[9] = 5;

	g = loom_gpt_new(&c);
	ok(g != NULL, "model allocated");
	is_int((long long)g->n_params, (long long)loom_config_n_params(&c),
	       "n_params matches the config arithmetic");
	is_str(g->tensors[4].name, "transformer.h.0.attn.c_attn.weight", "HF tensor names");
	ok(g->tensors[4].shape[0] == 16 && g->tensors[4].shape[1] == 48,
	   "c_attn.weight is Conv1D [C, 3C]");
	ok(g->tensors[4].decay && !g->tensors[5].decay && !g->tensors[2].decay,
	   "weight decay on weights only, not on norm/bias");
	is_str(g->tensors[g->n_tensors - 1].name, "transformer.ln_f.bias", "last tensor ln_f.bias");

	big_init(g);
	gradcheck(g, 0, "plain");
}

/* An ignored target contributes nothing. */
static void case_ignored_targets(void)
{
	float l2;
	loom_gpt_forward(g, in, tg, B, T, 0, 0, &l1);
	int32_t save = in[4];
	int32_t tsave = tg[2];
	tg[2] = 5;
	loom_gpt_forward(g, in, tg, B, T, 0, 0, &l2);
	is_int(g->ntok, B * T - 3, "ignored targets are not counted");
	tg[2] = tsave;
	in[4] = save;
}

/* Recompute gives bit-identical gradients. */
static void case_recompute(void)
{
	float l2;
	loom_gpt_zero_grad(g);
	loom_gpt_forward(g, in, tg, B, T, 0, 0, &l1);
	loom_gpt_backward(g, 1.0f);
	ref = malloc(sizeof(float) * g->n_params);
	memcpy(ref, g->grads, sizeof(float) * g->n_params);
	struct loom_config cr = c;
	cr.recompute = 1;
	gr = loom_gpt_new(&cr);
	memcpy(gr->params, g->params, sizeof(float) * g->n_params);
	loom_gpt_forward(gr, in, tg, B, T, 0, 0, &l2);
	loom_gpt_backward(gr, 1.0f);
	ok(l1 == l2, "recompute: same loss");
	ok(!memcmp(ref, gr->grads, sizeof(float) * g->n_params), "recompute: bit-identical gradients");
	struct loom_model_mem m0, m1;
	loom_gpt_memory_plan(&c, B, T, 0, &m0);
	loom_gpt_memory_plan(&cr, B, T, 1, &m1);
	ok(m1.acts < m0.acts, "recompute plan needs less activation memory (%llu < %llu)",
	   (unsigned long long)m1.acts, (unsigned long long)m0.acts);
	ok(m0.acts == (uint64_t)g->n_acts * 4 + B * T * 8, "memory plan matches the allocation");
}

/* The LM head in chunks of 3 rows (4 of 3, the last of 2) against one chunk:
 * same losses and eval counts, gradients within rounding, bit-identical
 * between runs, and a gradient check of its own. */
static void case_chunked_head(void)
{
	float l2;
	double nll1, nll2;
	int64_t nt1, nt2, nc1, nc2;
	loom_gpt_forward(g, in, tg, B, T, 0, 0, &l1);
	loom_gpt_eval_counts(g, &nll1, &nt1, &nc1);
	struct loom_gpt *gc = loom_gpt_new(&c);
	memcpy(gc->params, g->params, sizeof(float) * g->n_params);
	gc->head_rows = 3;
	float *gref = malloc(sizeof(float) * g->n_params);
	for (int k = 0; k < 2; k++) {
		loom_gpt_zero_grad(gc);
		loom_gpt_forward(gc, in, tg, B, T, 0, 0, &l2);
		if (!k) {
			loom_gpt_eval_counts(gc, &nll2, &nt2, &nc2);
			is_int((int)gc->hr, 3, "chunked head: 3 rows per chunk");
			/* the chunk lives in the shared [N,4C] buffer, as the whole
			 * [N,V] does here (4C > V) */
			ok(gc->n_acts == g->n_acts, "chunked head: same activations (%zu, %zu)",
			   gc->n_acts, g->n_acts);
			ok(fabsf(l1 - l2) <= 1e-6f * l1, "chunked head: loss %.7f vs %.7f", l2, l1);
			ok(nt1 == nt2 && nc1 == nc2 && fabs(nll1 - nll2) <= 1e-5 * nll1,
			   "chunked head: eval counts (%lld %lld %.6f) vs (%lld %lld %.6f)",
			   (long long)nt2, (long long)nc2, nll2, (long long)nt1, (long long)nc1, nll1);
		}
		is_int(loom_gpt_backward(gc, 1.0f), 0, "chunked head: backward %d", k);
		if (!k)
			memcpy(gref, gc->grads, sizeof(float) * g->n_params);
	}
	ok(!memcmp(gref, gc->grads, sizeof(float) * g->n_params),
	   "chunked head: bit-identical gradients between runs");
	int ch_ok = 1;
	for (size_t i = 0; i < g->n_params; i++)
		if (fabsf(gref[i] - ref[i]) > 1e-6f + 1e-5f * fabsf(ref[i])) {
			if (ch_ok)
				diag("gradient %zu: chunked %.8g, one chunk %.8g", i, gref[i], ref[i]);
			ch_ok = 0;
		}
	ok(ch_ok, "chunked head: gradients match one chunk's");
	gradcheck(gc, 0, "LM head in chunks of 3 rows");
	gc->head_rows = 1;
	gradcheck(gc, 0, "LM head in chunks of 1 row");
	free(gref);
	loom_gpt_free(gc);
}

/* res2 rebuilt in backward instead of kept: fewer activations, bit-identical
 * loss and gradients (the rebuild repeats forward's arithmetic), with
 * dropout too (its mask is part of the rebuild). */
static void case_res2_rebuilt(void)
{
	float l2;
	struct loom_gpt *g2 = loom_gpt_new(&c);
	memcpy(g2->params, g->params, sizeof(float) * g->n_params);
	g2->keep_res2 = -1;
	loom_gpt_forward(g2, in, tg, B, T, 0, 0, &l2);
	loom_gpt_backward(g2, 1.0f);
	ok(g->res2 == 1, "the tiny model keeps res2 by default");
	ok(!g2->res2 && g2->n_acts < g->n_acts && g2->layer[0].res2 == NULL,
	   "res2 rebuilt: fewer activations (%zu < %zu)", g2->n_acts, g->n_acts);
	ok(l1 == l2 && !memcmp(ref, g2->grads, sizeof(float) * g->n_params),
	   "res2 rebuilt: same loss, bit-identical gradients");
	loom_gpt_free(g2);
	struct loom_config cd2 = c;
	cd2.dropout = 0.2;
	cd2.attn_dropout = 0.1;
	g2 = loom_gpt_new(&cd2);
	memcpy(g2->params, g->params, sizeof(float) * g->n_params);
	g2->keep_res2 = -1;
	gradcheck(g2, 1, "res2 rebuilt, dropout");
	float *dref = malloc(sizeof(float) * g->n_params);
	memcpy(dref, g2->grads, sizeof(float) * g->n_params);
	g2->keep_res2 = 1;
	loom_gpt_zero_grad(g2);
	loom_gpt_forward(g2, in, tg, B, T, 1, 77, NULL);
	loom_gpt_backward(g2, 1.0f);
	ok(g2->res2 == 1 && !memcmp(dref, g2->grads, sizeof(float) * g->n_params),
	   "res2 rebuilt or kept, dropout: bit-identical gradients");
	free(dref);
	loom_gpt_free(g2);
}

/* A training micro-batch with the LM head's gradient taken in forward
 * (loom_gpt_train_micro) = forward then backward, bit for bit: one chunk or
 * chunks of 3 rows, dropout on, plain or weighted loss. */
static void case_train_micro(void)
{
	for (int v = 0; v < 4; v++) {
		struct loom_config cv = c;
		cv.dropout = 0.2;
		cv.attn_dropout = 0.1;
		cv.loss_weighting = v & 1 ? LOOM_LOSSW_INVCOUNT : LOOM_LOSSW_NONE;
		struct loom_gpt *ga = loom_gpt_new(&cv), *gb = loom_gpt_new(&cv);
		memcpy(ga->params, g->params, sizeof(float) * g->n_params);
		memcpy(gb->params, g->params, sizeof(float) * g->n_params);
		ga->head_rows = gb->head_rows = v & 2 ? 3 : 0;
		float la, lb;
		int rc = loom_gpt_forward(ga, in, tg, B, T, 1, 91, &la) || loom_gpt_backward(ga, 0.5f);
		rc |= loom_gpt_train_micro(gb, in, tg, B, T, 91, 0.5f, &lb);
		ok(!rc && la == lb && ga->wloss == gb->wloss &&
		   !memcmp(ga->grads, gb->grads, sizeof(float) * g->n_params),
		   "train_micro = forward + backward (%s head, %s loss): loss %.6f, bit-identical gradients",
		   v & 2 ? "chunked" : "one-chunk", v & 1 ? "weighted" : "plain", lb);
		loom_gpt_free(ga);
		loom_gpt_free(gb);
	}
	{
		int32_t all_ignored[B * T];
		for (int i = 0; i < B * T; i++)
			all_ignored[i] = 5;
		struct loom_gpt *gz = loom_gpt_new(&c);
		float lz = -1;
		ok(loom_gpt_train_micro(gz, in, all_ignored, B, T, 1, 1.0f, &lz) == 0 && lz == 0 &&
		   loom_k_sumsq(gz->grads, gz->n_params) == 0,
		   "train_micro with every target ignored: loss 0, no gradient");
		is_int(loom_gpt_train_micro(gz, in, NULL, B, T, 1, 1.0f, NULL), LOOM_EINVAL,
		       "train_micro without targets is refused");
		loom_gpt_free(gz);
	}
}

/* Accumulation: two half-scaled backwards = one full. */
static void case_accumulation(void)
{
	loom_gpt_zero_grad(gr);
	for (int k = 0; k < 2; k++) {
		loom_gpt_forward(gr, in, tg, B, T, 0, 0, NULL);
		loom_gpt_backward(gr, 0.5f);
	}
	int acc_ok = 1;
	for (size_t i = 0; i < g->n_params; i++)
		if (fabsf(gr->grads[i] - ref[i]) > 1e-6f + 1e-5f * fabsf(ref[i]))
			acc_ok = 0;
	ok(acc_ok, "gradient accumulation over micro-batches");
	loom_gpt_free(gr);
	free(ref);
}

/* Dropout: gradients of the dropped network, recompute too. */
static void case_dropout(void)
{
	struct loom_config cd = c;
	cd.dropout = 0.2;
	cd.recompute = 1;
	struct loom_gpt *gd = loom_gpt_new(&cd);
	memcpy(gd->params, g->params, sizeof(float) * g->n_params);
	float ld0, ld1;
	loom_gpt_forward(gd, in, tg, B, T, 1, 77, &ld0);
	loom_gpt_forward(gd, in, tg, B, T, 0, 77, &ld1);
	ok(ld0 != ld1, "dropout changes the training loss (%.4f vs %.4f)", ld0, ld1);
	gradcheck(gd, 1, "dropout+recompute");
	loom_gpt_free(gd);
}

/* Attention-probability dropout alone, then with everything. */
static void case_attention_dropout(void)
{
	struct loom_config ca = c;
	ca.attn_dropout = 0.3;
	struct loom_gpt *ga = loom_gpt_new(&ca);
	memcpy(ga->params, g->params, sizeof(float) * g->n_params);
	float ld0, ld1;
	loom_gpt_forward(ga, in, tg, B, T, 1, 77, &ld0);
	loom_gpt_forward(ga, in, tg, B, T, 0, 77, &ld1);
	ok(ld0 != ld1, "attention dropout changes the training loss (%.4f vs %.4f)", ld0, ld1);
	gradcheck(ga, 1, "attention dropout");
	loom_gpt_free(ga);
	ca.dropout = 0.1;
	ca.recompute = 1;
	ga = loom_gpt_new(&ca);
	memcpy(ga->params, g->params, sizeof(float) * g->n_params);
	gradcheck(ga, 1, "attention+residual dropout, recompute");
	loom_gpt_free(ga);
}

/* loss_weighting=inverse_count: targets with repeats in each row (and the
 * two ignored ones); the reported loss stays the plain mean, the objective
 * is sum(w * loss) / ntok with w = 1/count in the row, and backward is its
 * gradient. */
static void case_loss_weighting(void)
{
	int32_t tsave[B * T];
	memcpy(tsave, tg, sizeof tg);
	const int32_t rep[B * T] = { 4, 4, 11, 5, 4, 11, 0, 7, 7, 5, 7, 7, 2, 3 };
	const float wref[B * T] = { 1 / 3.f, 1 / 3.f, 1 / 2.f, 0, 1 / 3.f, 1 / 2.f, 1,
				    1 / 4.f, 1 / 4.f, 0, 1 / 4.f, 1 / 4.f, 1, 1 };
	memcpy(tg, rep, sizeof tg);
	struct loom_config cw = c;
	is_int(loom_config_set(&cw, "loss_weighting", "inverse_count"), 0,
	       "loss_weighting=inverse_count");
	struct loom_gpt *gw = loom_gpt_new(&cw);
	memcpy(gw->params, g->params, sizeof(float) * g->n_params);
	float lu, lw;
	loom_gpt_forward(g, in, tg, B, T, 0, 0, &lu);
	loom_gpt_forward(gw, in, tg, B, T, 0, 0, &lw);
	ok(lu == lw && gw->loss == lu, "weighted model reports the unweighted loss (%.6f)", lw);
	ok(g->wloss == g->loss && g->lweights == NULL, "loss_weighting none: objective = loss");
	ok(!memcmp(gw->lweights, wref, sizeof wref), "weights 1/k per row, 0 where ignored");
	double ws = 0;
	for (int i = 0; i < B * T; i++)
		ws += (double)wref[i] * gw->losses[i];
	ok(fabs(gw->wloss - ws / 12) <= 1e-6 * ws / 12,
	   "objective %.6f = sum(w * loss) / 12 counted targets (%.6f)", gw->wloss, ws / 12);
	ok(gw->wloss < lw, "repeats lower the objective (%.4f < %.4f)", gw->wloss, lw);
	struct loom_model_mem mw;
	loom_gpt_memory_plan(&cw, B, T, 0, &mw);
	ok(mw.acts == (uint64_t)gw->n_acts * 4 + B * T * 8,
	   "weighted memory plan matches the allocation");
	gradcheck(gw, 0, "inverse_count weighting");
	gw->head_rows = 3;
	gradcheck(gw, 0, "inverse_count weighting, LM head in chunks of 3 rows");
	loom_gpt_free(gw);

	/* a batch whose rows have distinct targets weighs 1 everywhere:
	 * bit-identical loss and gradients to loss_weighting none */
	const int32_t dis[B * T] = { 4, 1, 11, 5, 0, 2, 3, 7, 8, 5, 9, 10, 2, 3 };
	memcpy(tg, dis, sizeof tg);
	gw = loom_gpt_new(&cw);
	memcpy(gw->params, g->params, sizeof(float) * g->n_params);
	loom_gpt_zero_grad(g);
	loom_gpt_forward(g, in, tg, B, T, 0, 0, &lu);
	loom_gpt_backward(g, 0.5f);
	loom_gpt_forward(gw, in, tg, B, T, 0, 0, &lw);
	loom_gpt_backward(gw, 0.5f);
	ok(lu == lw && gw->wloss == lw, "distinct targets: same loss and objective");
	ok(!memcmp(g->grads, gw->grads, sizeof(float) * g->n_params),
	   "distinct targets: bit-identical gradients to loss_weighting none");
	loom_gpt_zero_grad(g);
	loom_gpt_free(gw);
	memcpy(tg, tsave, sizeof tg);
}

/* Bad tokens are refused. */
static void case_bad_tokens(void)
{
	in[0] = 23;
	ok(loom_gpt_forward(g, in, tg, B, T, 0, 0, NULL) == LOOM_EINVAL &&
	   strstr(loom_gpt_error(g), "outside the vocabulary"), "input id >= vocab refused: %s",
	   loom_gpt_error(g));
	in[0] = 1;
	ok(loom_gpt_forward(g, in, tg, B, 9, 0, 0, NULL) == LOOM_EINVAL, "T > n_positions refused");
}

/* AdamW step reduces the loss; init is deterministic. */
static void case_adamw(void)
{
	loom_gpt_init_weights(g, 1);
	float a0 = 0, a1 = 0, norm = 0;
	for (int s = 1; s <= 20; s++) {
		loom_gpt_zero_grad(g);
		loom_gpt_forward(g, in, tg, B, T, 0, 0, s == 1 ? &a0 : &a1);
		loom_gpt_backward(g, 1.0f);
		loom_gpt_step(g, 1e-2f, s, &norm);
	}
	ok(a1 < a0 - 0.5, "20 AdamW steps: loss %.3f -> %.3f", a0, a1);
	ok(norm > 0 && isfinite(norm), "grad norm %.4g", norm);
}

/* Generation helpers. */
static void case_generation(void)
{
	float lg[23], lg2[23], l0, l1;
	loom_gpt_forward(g, in, tg, B, T, 0, 0, &l0);
	const float *acts = g->acts;
	size_t cap = g->acts_cap;
	is_int(loom_gpt_logits_last(g, in, 5, lg), 0, "logits_last runs");
	ok(g->acts == acts && g->acts_cap == cap && g->n_acts < cap,
	   "it lays out in the batch's activations (%zu of %zu floats)", g->n_acts, cap);
	loom_gpt_forward(g, in, tg, B, T, 0, 0, &l1);
	ok(g->acts == acts && l1 == l0, "the batch's forward after it: same buffer, same loss");
	/* its cross-entropy against each token equals the full forward's
	 * loss at the last position */
	int32_t t5[5];
	memcpy(t5, tg, sizeof t5);
	double mx = lg[0], se = 0;
	for (int v = 1; v < 23; v++)
		mx = lg[v] > mx ? lg[v] : mx;
	for (int v = 0; v < 23; v++)
		se += exp(lg[v] - mx);
	int same = 1;
	for (int t = 0; t < 23; t++) {
		if (t == c.ignore_id)
			continue;
		t5[4] = t;
		loom_gpt_forward(g, in, t5, 1, 5, 0, 0, NULL);
		double want = log(se) + mx - lg[t];
		if (fabs(g->losses[4] - want) > 1e-4 * (1 + fabs(want)))
			same = 0;
	}
	ok(same, "logits_last equals the full forward's last row");
	memcpy(lg2, lg, sizeof lg);
	uint64_t rng = 1;
	float scratch[23];
	int best = loom_gpt_sample(lg, 23, 0, 0, scratch, &rng), ok_top = 1;
	for (int v = 0; v < 23; v++)
		if (lg[v] > lg[best])
			ok_top = 0;
	ok(ok_top, "temperature 0 samples the argmax");
	for (int k = 0; k < 50; k++)
		if (loom_gpt_sample(lg, 23, 1.0f, 1, scratch, &rng) != best)
			ok_top = 0;
	ok(ok_top, "top-k 1 always samples the argmax");
	/* top-k keeps the ids whose logit is at least the k-th largest (ties
	 * at it included); masked -infinity ids never come */
	static const float tk[12] = { 1, 3, -INFINITY, 3, 0.5f, 2, 3, -INFINITY, 2, -1, 0, 2 };
	static const int want[4][12] = {
		{ 0, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0 }, /* k 1..3: the three 3s */
		{ 0, 1, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1 }, /* k 4..6: and the 2s */
		{ 1, 1, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1 }, /* k 7 */
		{ 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1 }, /* k 10: all finite */
	};
	static const int ks[4] = { 2, 5, 7, 10 };
	for (int i = 0; i < 4; i++) {
		int seen[12] = { 0 };
		for (int d = 0; d < 2000; d++)
			seen[loom_gpt_sample(tk, 12, 5.0f, ks[i], scratch, &rng)] = 1;
		ok(!memcmp(seen, want[i], sizeof seen), "top-k %d samples exactly the %d largest "
		   "(with ties)", ks[i], ks[i]);
	}
}

int main(void)
{
	c = tiny_cfg();
	case_model();
	case_ignored_targets();
	case_recompute();
	case_chunked_head();
	case_res2_rebuilt();
	case_train_micro();
	case_accumulation();
	case_dropout();
	case_attention_dropout();
	case_loss_weighting();
	attention_gradcheck(0, NULL);
	attention_gradcheck(0.3f, NULL);
	static const int32_t len[2] = { 150, 77 }; /* one row padded */
	attention_gradcheck(0, len);
	attention_gradcheck(0.3f, len);
	case_bad_tokens();
	case_adamw();
	case_generation();
	loom_gpt_free(g);
	return done_testing();
}
