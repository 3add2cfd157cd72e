/* BERT (lib/train/loom_bert.h): the forward against a naive composition of
 * the naive kernels layer by layer, the QA loss by hand, every tensor's
 * gradient against central finite differences (QA and MLM heads, with and
 * without dropout), padding invariance, recompute, determinism, bf16,
 * the masked-LM recipe and bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom_bert.h"
#include "loom_kernels.h"
#include "tap.h"
#include "testlib.h"

enum { B = 2, T = 9, V = 23 };

static int32_t ids[B * T], seg[B * T], mask[B * T], lab[B * T];
static int32_t spos[B] = { 4, 2 }, epos[B] = { 7, -1 }; /* row 1's end ignored */

static void make_batch(void)
{
	for (int i = 0; i < B * T; i++) {
		int r = i / T, t = i % T;
		ids[i] = 1 + (int32_t)(loom_splitmix64(i) % (V - 1));
		seg[i] = t >= 3;
		mask[i] = r == 0 || t < 5; /* row 1: 5 real tokens, 4 padding */
		lab[i] = (i % 3 == 1 && mask[i]) ? (int32_t)(loom_splitmix64(i + 99) % V) : -100;
	}
}

static struct loom_bert_batch batch(int task)
{
	struct loom_bert_batch x = { ids, seg, mask, NULL, NULL, NULL };
	if (task == LOOM_BERT_QA) {
		x.start_positions = spos;
		x.end_positions = epos;
	} else {
		x.mlm_labels = lab;
	}
	return x;
}

/* Larger weights than the init (uniform +-0.3, LayerNorm gains around 1)
 * so every path has sizeable gradients. */
static void big_init_bert(struct loom_bert *b)
{
	uint64_t s = 11;
	for (size_t i = 0; i < b->n_params; i++) {
		s = loom_splitmix64(s);
		b->params[i] = (float)((s >> 40) * (1.0 / 16777216.0) - 0.5) * 0.6f;
	}
	for (int i = 0; i < b->n_tensors; i++)
		if (strstr(b->tensors[i].name, "LayerNorm.weight"))
			for (size_t j = 0; j < b->tensors[i].numel; j++)
				b->params[b->tensors[i].offset + j] += 1.0f;
	loom_bert_weights_changed(b);
}

static const float *P(struct loom_bert *b, const char *name)
{
	for (int i = 0; i < b->n_tensors; i++)
		if (!strcmp(b->tensors[i].name, name))
			return b->params + b->tensors[i].offset;
	return NULL;
}

/* nn.Linear naively: out[N,OC] = inp @ w[OC,IC]^T + bias, in double */
static void lin(float *out, const float *inp, const float *w, const float *bias, int N, int IC,
		int OC)
{
	for (int n = 0; n < N; n++)
		for (int o = 0; o < OC; o++) {
			double s = bias[o];
			for (int i = 0; i < IC; i++)
				s += (double)inp[(size_t)n * IC + i] * w[(size_t)o * IC + i];
			out[(size_t)n * OC + o] = (float)s;
		}
}

/* The naive composition: each layer's output against the padded model's,
 * then the QA logits and loss (by hand, masked softmax). */
static void test_naive(void)
{
	struct loom_bert_config c = tiny_bert_cfg(LOOM_BERT_QA);
	c.padded = 1; /* every position computed, as the composition is */
	struct loom_bert *b = loom_bert_new(&c);
	big_init_bert(b);
	struct loom_bert_batch x = batch(LOOM_BERT_QA);
	float loss;
	is_int(loom_bert_forward(b, &x, B, T, 0, 0, &loss), 0, "QA forward");
	int C = c.hidden, I = c.intermediate, N = B * T;
	float *h = malloc(sizeof(float) * N * C), *e = malloc(sizeof(float) * N * C);
	float *qkv = malloc(sizeof(float) * N * 3 * C), *att = malloc(sizeof(float) * B * 2 * T * T);
	float *lse = malloc(sizeof(float) * B * 2 * T), *y = malloc(sizeof(float) * N * C);
	float *t1 = malloc(sizeof(float) * N * C), *f = malloc(sizeof(float) * N * I);
	float mean[B * T], rstd[B * T], lg[B * T * 2];
	int32_t len[B] = { T, 5 };
	loom_k_encoder_fwd_naive(e, ids, P(b, "bert.embeddings.word_embeddings.weight"), 0,
				 b->V, P(b, "bert.embeddings.position_embeddings.weight"), seg,
				 P(b, "bert.embeddings.token_type_embeddings.weight"), NULL, B, T,
				 C);
	loom_k_layernorm_fwd_naive(h, mean, rstd, e, P(b, "bert.embeddings.LayerNorm.weight"),
				   P(b, "bert.embeddings.LayerNorm.bias"), N, C, 1e-12f);
	char nm[3][128];
	for (int l = 0; l < c.n_layer; l++) {
#define LW(s) (snprintf(nm[0], sizeof nm[0], "bert.encoder.layer.%d.%s", l, s), P(b, nm[0]))
		/* separate q, k, v products into the q|k|v rows */
		float *q1 = malloc(sizeof(float) * N * C);
		static const char *const qn[3][2] = {
			{ "attention.self.query.weight", "attention.self.query.bias" },
			{ "attention.self.key.weight", "attention.self.key.bias" },
			{ "attention.self.value.weight", "attention.self.value.bias" } };
		for (int j = 0; j < 3; j++) {
			const float *w = LW(qn[j][0]), *bb = LW(qn[j][1]);
			lin(q1, h, w, bb, N, C, C);
			for (int n = 0; n < N; n++)
				memcpy(qkv + (size_t)n * 3 * C + j * C, q1 + (size_t)n * C, sizeof(float) * C);
		}
		free(q1);
		loom_k_attention_fwd_naive(y, att, lse, qkv, len, NULL, B, T, C, 2, 0, 0);
		lin(t1, y, LW("attention.output.dense.weight"), LW("attention.output.dense.bias"), N, C, C);
		for (int i = 0; i < N * C; i++)
			t1[i] += h[i];
		loom_k_layernorm_fwd_naive(h, mean, rstd, t1, LW("attention.output.LayerNorm.weight"),
					   LW("attention.output.LayerNorm.bias"), N, C, 1e-12f);
		lin(f, h, LW("intermediate.dense.weight"), LW("intermediate.dense.bias"), N, C, I);
		loom_k_gelu_erf_fwd_naive(f, f, (size_t)N * I);
		lin(t1, f, LW("output.dense.weight"), LW("output.dense.bias"), N, I, C);
		for (int i = 0; i < N * C; i++)
			t1[i] += h[i];
		loom_k_layernorm_fwd_naive(h, mean, rstd, t1, LW("output.LayerNorm.weight"),
					   LW("output.LayerNorm.bias"), N, C, 1e-12f);
		ok(close_arr(b->layer[l].out, h, (size_t)N * C, 1e-5, 1e-4, "layer out"),
		   "layer %d output equals the naive composition", l);
#undef LW
	}
	lin(lg, h, P(b, "qa_outputs.weight"), P(b, "qa_outputs.bias"), N, C, 2);
	float st[B * T], en[B * T];
	for (int i = 0; i < N; i++) {
		st[i] = lg[2 * i];
		en[i] = lg[2 * i + 1];
	}
	ok(close_arr(loom_bert_start_logits(b), st, N, 1e-5, 1e-4, "start") &&
	   close_arr(loom_bert_end_logits(b), en, N, 1e-5, 1e-4, "end"),
	   "start/end logits equal the naive composition");
	/* loss: (mean CE(start) over 2 rows + CE(end) of row 0) / 2, the
	 * softmax over all T positions (HF's BertForQuestionAnswering,
	 * run_squad.py), or with qa_loss=real over each row's real tokens */
	for (int real = 0; real < 2; real++) {
		double ce[2] = { 0, 0 };
		for (int r = 0; r < B; r++)
			for (int k = 0; k < 2; k++) {
				const float *z = (k ? en : st) + r * T;
				int tgt = k ? epos[r] : spos[r];
				if (tgt < 0)
					continue;
				double s = 0;
				for (int t = 0; t < (real ? len[r] : T); t++)
					s += exp(z[t]);
				ce[k] += log(s) - z[tgt];
			}
		double want = (ce[0] / 2 + ce[1] / 1) / 2;
		if (real) {
			b->cfg.qa_loss = LOOM_BERT_QA_LOSS_REAL;
			loom_bert_forward(b, &x, B, T, 0, 0, &loss);
		}
		ok(fabs(loss - want) < 1e-4, "QA loss %.6f = (mean CE start + mean CE end) / 2 over "
		   "%s (%.6f)", loss, real ? "real positions (qa_loss=real)" : "all positions", want);
	}
	free(h); free(e); free(qkv); free(att); free(lse); free(y); free(t1); free(f);
	loom_bert_free(b);
}

static double loss_at(struct loom_bert *b, const struct loom_bert_batch *x, int train)
{
	float l;
	if (loom_bert_forward(b, x, B, T, train, 77, &l))
		return NAN;
	return l;
}

/* Sampled entries of every tensor (the largest gradient and 4 more)
 * against central differences. */
/* mode: 0, 1 recompute, 2 qa_loss=real */
static void gradcheck(int task, int train, int mode, const char *what)
{
	struct loom_bert_config c = tiny_bert_cfg(task);
	c.qa_loss = mode == 2 ? LOOM_BERT_QA_LOSS_REAL : LOOM_BERT_QA_LOSS_ALL;
	if (train) {
		c.dropout = 0.1;
		c.attn_dropout = 0.1;
	}
	c.recompute = mode == 1;
	struct loom_bert *b = loom_bert_new(&c);
	big_init_bert(b);
	struct loom_bert_batch x = batch(task);
	double l0 = loss_at(b, &x, train);
	is_int(loom_bert_backward(b, 1.0f), 0, "%s: backward", what);
	float *g = malloc(sizeof(float) * b->n_params);
	memcpy(g, b->grads, sizeof(float) * b->n_params);
	ok(isfinite(l0) && l0 > 0, "%s: loss %.4f", what, l0);
	const float h = 1e-2f;
	int bad = 0, checked = 0, tensors = 0;
	for (int ti = 0; ti < b->n_tensors; ti++) {
		const struct loom_tensor *t = &b->tensors[ti];
		size_t best = 0;
		for (size_t j = 1; j < t->numel; j++)
			if (fabs(g[t->offset + j]) > fabs(g[t->offset + best]))
				best = j;
		tensors += g[t->offset + best] != 0;
		for (int k = 0; k < 5; k++) {
			size_t j = t->offset + (k ? loom_splitmix64(ti * 31 + k) % t->numel : best);
			float save = b->params[j];
			b->params[j] = save + h;
			double lp = loss_at(b, &x, train);
			b->params[j] = save - h;
			double lm = loss_at(b, &x, train);
			b->params[j] = save;
			double fd = (lp - lm) / (2 * h), an = g[j];
			checked++;
			if (fabs(fd - an) > 2e-3 + 3e-2 * fabs(an) && bad++ < 5)
				diag("%s: %s[%zu]: analytic %.6g, numeric %.6g", what, t->name,
				     j - t->offset, an, fd);
		}
	}
	ok(!bad, "%s: %d sampled gradient entries of %d tensors match finite differences "
	   "(%d off)", what, checked, b->n_tensors, bad);
	is_int(tensors, b->n_tensors, "%s: every tensor has a non-zero gradient", what);
	free(g);
	loom_bert_free(b);
}

/* Outputs at real positions do not depend on what the padding holds, nor
 * does the loss over the real tokens (qa_loss=real; HF's over all
 * positions reads the padding's logits). */
static void test_padding(void)
{
	struct loom_bert_config c = tiny_bert_cfg(LOOM_BERT_QA);
	c.qa_loss = LOOM_BERT_QA_LOSS_REAL;
	struct loom_bert *b = loom_bert_new(&c);
	big_init_bert(b);
	struct loom_bert_batch x = batch(LOOM_BERT_QA);
	float l1, l2, s1[B * T], e1[B * T];
	loom_bert_forward(b, &x, B, T, 0, 0, &l1);
	memcpy(s1, loom_bert_start_logits(b), sizeof s1);
	memcpy(e1, loom_bert_end_logits(b), sizeof e1);
	int32_t save[B * T], saveg[B * T];
	memcpy(save, ids, sizeof ids);
	memcpy(saveg, seg, sizeof seg);
	for (int i = 0; i < B * T; i++)
		if (!mask[i]) {
			ids[i] = (ids[i] + 7) % V;
			seg[i] = 1 - seg[i];
		}
	loom_bert_forward(b, &x, B, T, 0, 0, &l2);
	int same = 1;
	for (int i = 0; i < B * T; i++)
		if (mask[i])
			same &= fabsf(s1[i] - loom_bert_start_logits(b)[i]) <= 1e-6f &&
				fabsf(e1[i] - loom_bert_end_logits(b)[i]) <= 1e-6f;
	ok(same && fabsf(l1 - l2) <= 1e-6f,
	   "padding tokens change no logit at a real position, nor the loss (qa_loss=real)");
	memcpy(ids, save, sizeof ids);
	memcpy(seg, saveg, sizeof seg);
	loom_bert_free(b);
}

/* loom_bert_eval_counts against the logits: QA rows right when both
 * argmaxes over the real tokens hit (the targets set from the argmaxes of
 * a first forward, then one moved off); MLM the masked tokens. */
static void test_eval_counts(void)
{
	struct loom_bert_config c = tiny_bert_cfg(LOOM_BERT_QA);
	struct loom_bert *b = loom_bert_new(&c);
	big_init_bert(b);
	struct loom_bert_batch x = { ids, seg, mask, NULL, NULL, NULL };
	double nll;
	int64_t n, right;
	loom_bert_forward(b, &x, B, T, 0, 0, NULL);
	loom_bert_eval_counts(b, &nll, &n, &right);
	ok(nll == 0 && n == 0 && right == 0, "eval counts without targets: 0");
	int32_t s[B], e[B];
	for (int r = 0; r < B; r++) {
		int len = r == 0 ? T : 5, bs = 0, be = 0;
		for (int i = 1; i < len; i++) {
			bs = loom_bert_start_logits(b)[r * T + i] > loom_bert_start_logits(b)[r * T + bs] ? i : bs;
			be = loom_bert_end_logits(b)[r * T + i] > loom_bert_end_logits(b)[r * T + be] ? i : be;
		}
		s[r] = bs;
		e[r] = be;
	}
	e[1] = (e[1] + 1) % 5;
	x.start_positions = s;
	x.end_positions = e;
	float loss;
	loom_bert_forward(b, &x, B, T, 0, 0, &loss);
	loom_bert_eval_counts(b, &nll, &n, &right);
	ok(n == B && right == 1 && nll == (double)loss * B,
	   "QA eval counts: %d rows, 1 right (row 1's end moved), nll = loss x rows (%lld, %lld)",
	   B, (long long)n, (long long)right);
	loom_bert_free(b);

	c = tiny_bert_cfg(LOOM_BERT_MLM);
	b = loom_bert_new(&c);
	big_init_bert(b);
	x = batch(LOOM_BERT_MLM);
	loom_bert_forward(b, &x, B, T, 0, 0, &loss);
	loom_bert_eval_counts(b, &nll, &n, &right);
	int64_t m = 0, want = 0;
	for (int k = 0; k < b->M; k++) {
		const float *lg = b->mlogits + (size_t)k * V;
		int best = 0;
		for (int v = 1; v < V; v++)
			best = lg[v] > lg[best] ? v : best;
		want += best == b->mlm_tgt[k];
	}
	for (int i = 0; i < B * T; i++)
		m += lab[i] >= 0;
	ok(n == m && m > 0 && right == want && nll == (double)loss * m,
	   "MLM eval counts: %lld masked tokens, %lld right", (long long)n, (long long)right);
	loom_bert_free(b);
}

/* Recompute gives bit-identical gradients; two runs are bit-identical;
 * gradients accumulate over backward calls (scale). */
static void test_recompute_determinism(int task)
{
	struct loom_bert_config c = tiny_bert_cfg(task);
	c.dropout = 0.1;
	c.attn_dropout = 0.1;
	struct loom_bert *b1 = loom_bert_new(&c);
	c.recompute = 1;
	struct loom_bert *b2 = loom_bert_new(&c), *b3 = loom_bert_new(&c);
	struct loom_bert *bs[3] = { b1, b2, b3 };
	struct loom_bert_batch x = batch(task);
	float loss[3];
	for (int i = 0; i < 3; i++) {
		loom_bert_init_weights(bs[i], 3);
		loom_bert_forward(bs[i], &x, B, T, 1, 5, &loss[i]);
		loom_bert_backward(bs[i], 1.0f);
	}
	const char *tn = task == LOOM_BERT_QA ? "QA" : "MLM";
	ok(loss[0] == loss[1] && !memcmp(b1->grads, b2->grads, sizeof(float) * b1->n_params),
	   "%s: recompute gives bit-identical loss and gradients", tn);
	ok(!memcmp(b2->grads, b3->grads, sizeof(float) * b2->n_params),
	   "%s: two runs give bit-identical gradients", tn);
	float n1, n2;
	loom_bert_step(b1, 1e-3f, 1, &n1);
	loom_bert_step(b2, 1e-3f, 1, &n2);
	ok(n1 == n2 && n1 > 0 && !memcmp(b1->params, b2->params, sizeof(float) * b1->n_params),
	   "%s: AdamW steps agree (norm %.4g)", tn, n1);
	for (int i = 0; i < 3; i++)
		loom_bert_free(bs[i]);
}

/* Rows at their real length, packed (the default), against the padded
 * reference (cfg.padded): the logits of every real token, the loss and
 * the gradient of a training step (with dropout too) within 1e-6
 * relative, each tensor's within 1e-5 (the products round over other row
 * counts, nothing else differs; a small tensor such as a query bias sums
 * terms that nearly cancel).
 * Rows of lengths 1 .. PT, row 0 full. */
/* A padded model (*bp, cfg.padded) and a packed one (*bv) of c, from the
 * same weights (seed). */
static void packed_pair(struct loom_bert_config c, uint64_t seed, struct loom_bert **bp,
			struct loom_bert **bv)
{
	c.padded = 1;
	*bp = loom_bert_new(&c);
	c.padded = 0;
	*bv = loom_bert_new(&c);
	loom_bert_init_weights(*bp, seed);
	loom_bert_init_weights(*bv, seed);
}

/* 20 training steps (dropout, AdamW) of a packed and a padded model from
 * the same weights on the same batches: the loss curves within 1e-6
 * relative (QA with qa_loss=real, and MLM). */
static void test_packed_curve(int task)
{
	enum { PB = 6, PT = 24, STEPS = 20 };
	struct loom_bert_config c = tiny_bert_cfg(task);
	c.max_positions = PT;
	c.dropout = c.attn_dropout = 0.1;
	c.qa_loss = LOOM_BERT_QA_LOSS_REAL;
	struct loom_bert *bp, *bv;
	packed_pair(c, 3, &bp, &bv);
	int32_t in[PB * PT], sg[PB * PT], mk[PB * PT], lb[PB * PT], sp[PB], ep[PB];
	double worst = 0;
	int ok_all = 1, packed = 1;
	for (int s = 0; s < STEPS; s++) {
		for (int r = 0; r < PB; r++) {
			int len = 2 + (int)(loom_splitmix64((uint64_t)(s * PB + r)) % (PT - 1));
			sp[r] = (int)(loom_splitmix64((uint64_t)r + 7 * s) % len);
			ep[r] = (sp[r] + 2) % len;
			for (int t = 0; t < PT; t++) {
				int i = r * PT + t;
				in[i] = 1 + (int32_t)(loom_splitmix64((uint64_t)(i + 1000 * s)) % (V - 1));
				sg[i] = t > len / 2;
				mk[i] = t < len;
				lb[i] = t < len && (i + s) % 4 == 1 ? (in[i] + 1) % V : -100;
			}
		}
		struct loom_bert_batch x = task == LOOM_BERT_QA
			? (struct loom_bert_batch){ in, sg, mk, sp, ep, NULL }
			: (struct loom_bert_batch){ in, sg, mk, NULL, NULL, lb };
		float lp, lv, np, nv;
		ok_all &= !loom_bert_forward(bp, &x, PB, PT, 1, 100 + s, &lp) &&
			  !loom_bert_forward(bv, &x, PB, PT, 1, 100 + s, &lv) &&
			  !loom_bert_backward(bp, 1.0f) && !loom_bert_backward(bv, 1.0f);
		packed &= bv->packed && !bp->packed;
		loom_bert_step(bp, 1e-3f, s + 1, &np);
		loom_bert_step(bv, 1e-3f, s + 1, &nv);
		worst = fmax(worst, fabs((double)lv - lp) / fabs(lp));
	}
	ok(ok_all && packed && worst <= 1e-6,
	   "%s: 20 training steps packed and padded, loss curves within 1e-6 (max %.3g)",
	   task == LOOM_BERT_QA ? "QA" : "MLM", worst);
	loom_bert_free(bp);
	loom_bert_free(bv);
}

static void test_packed(int task, int hidden, int heads, int inter, int PB, int PT, int train)
{
	struct loom_bert_config c = tiny_bert_cfg(task);
	c.hidden = hidden;
	c.n_head = heads;
	c.intermediate = inter;
	c.max_positions = PT;
	c.dropout = c.attn_dropout = train ? 0.1 : 0;
	c.qa_loss = LOOM_BERT_QA_LOSS_REAL; /* under qa_loss=all QA targets run padded */
	struct loom_bert *bp, *bv;
	packed_pair(c, 5, &bp, &bv);
	size_t n = (size_t)PB * PT;
	int32_t *in = malloc(sizeof(int32_t) * 4 * n), *sg = in + n, *mk = sg + n, *lb = mk + n;
	int32_t sp[16], ep[16];
	int real = 0;
	for (int r = 0; r < PB; r++) {
		int len = r ? 1 + (int)(loom_splitmix64(r * 7 + PT) % PT) : PT;
		sp[r] = (int)(loom_splitmix64(r + 1) % len);
		ep[r] = r == 2 ? -1 : (int)(loom_splitmix64(r + 2) % len);
		for (int t = 0; t < PT; t++) {
			size_t i = (size_t)r * PT + t;
			in[i] = 1 + (int32_t)(loom_splitmix64(i + 5) % (V - 1));
			sg[i] = t > len / 2;
			mk[i] = t < len;
			lb[i] = t < len && i % 5 == 2 ? (int32_t)(loom_splitmix64(i) % V) : -100;
		}
		real += len;
	}
	struct loom_bert_batch x = { in, sg, mk, sp, ep, NULL };
	if (task == LOOM_BERT_MLM)
		x = (struct loom_bert_batch){ in, sg, mk, NULL, NULL, lb };
	float lp, lv;
	const char *what = task == LOOM_BERT_QA ? "QA" : "MLM";
	is_int(loom_bert_forward(bp, &x, PB, PT, train, 77, &lp) ||
	       loom_bert_forward(bv, &x, PB, PT, train, 77, &lv), 0, "%s %dx%d: both forwards", what,
	       PB, PT);
	ok(bv->packed && bv->N == real && !bp->packed && bp->N == PB * PT,
	   "  packed: %d tokens computed of %d", bv->N, PB * PT);
	double dl = 0, ml = 0;
	if (task == LOOM_BERT_QA)
		for (size_t i = 0; i < n; i++)
			if (mk[i]) {
				const float *a[2] = { loom_bert_start_logits(bv), loom_bert_end_logits(bv) };
				const float *b[2] = { loom_bert_start_logits(bp), loom_bert_end_logits(bp) };
				for (int k = 0; k < 2; k++) {
					dl = fmax(dl, fabs((double)a[k][i] - b[k][i]));
					ml = fmax(ml, fabs((double)b[k][i]));
				}
			}
	if (task == LOOM_BERT_MLM && bv->M == bp->M)
		for (size_t i = 0; i < (size_t)bv->M * c.vocab_size; i++) {
			dl = fmax(dl, fabs((double)bv->mlogits[i] - bp->mlogits[i]));
			ml = fmax(ml, fabs((double)bp->mlogits[i]));
		}
	ok(bv->M == bp->M && dl <= 1e-6 * ml && fabs((double)lv - lp) <= 1e-6 * fabs(lp),
	   "  logits of real tokens (max diff %.3g of %.3g) and loss (%.7f vs %.7f) within 1e-6",
	   dl, ml, lv, lp);
	is_int(loom_bert_backward(bp, 1.0f) || loom_bert_backward(bv, 1.0f), 0, "  both backwards");
	const char *worst = "-";
	double all, g = tensors_rel(bp->tensors, bp->n_tensors, bv->grads, bp->grads, &worst,
				    &all);
	ok(all <= 1e-6 && g <= 1e-5,
	   "  gradients within 1e-6 relative (%.3g), each tensor within 1e-5 (max %.3g, %s)", all,
	   g, worst);
	if (task == LOOM_BERT_QA && !train) { /* qa_loss=all reads the padding's logits */
		bv->cfg.qa_loss = LOOM_BERT_QA_LOSS_ALL;
		loom_bert_forward(bv, &x, PB, PT, 0, 0, &lv);
		int padded_t = !bv->packed;
		x.start_positions = x.end_positions = NULL;
		loom_bert_forward(bv, &x, PB, PT, 0, 0, NULL);
		ok(padded_t && bv->packed && isfinite(lv),
		   "  qa_loss=all: a batch with targets runs padded, one without packed");
	}
	free(in);
	loom_bert_free(bp);
	loom_bert_free(bv);
}

/* bf16 forward close to fp32 (skipped without bf16 instructions). */
static void test_bf16(void)
{
	char why[256];
	struct loom_bert_config c = tiny_bert_cfg(LOOM_BERT_QA);
	if (loom_mm_bf16_missing(why, sizeof why)) {
		/* refused at the first forward, with the reason */
		c.precision = LOOM_PREC_BF16;
		struct loom_bert *b = loom_bert_new(&c);
		struct loom_bert_batch x = batch(LOOM_BERT_QA);
		is_int(loom_bert_forward(b, &x, B, T, 0, 0, NULL), LOOM_EINVAL,
		       "bf16 without bf16 instructions: forward refused");
		ok(strstr(loom_bert_error(b), "precision=bf16") != NULL, "message: %s",
		   loom_bert_error(b));
		loom_bert_free(b);
		ok(1, "# SKIP bf16 numerics: %s", why);
		return;
	}
	struct loom_bert *b1 = loom_bert_new(&c);
	c.precision = LOOM_PREC_BF16;
	struct loom_bert *b2 = loom_bert_new(&c);
	loom_bert_init_weights(b1, 9);
	loom_bert_init_weights(b2, 9);
	struct loom_bert_batch x = batch(LOOM_BERT_QA);
	float l1, l2;
	is_int(loom_bert_forward(b1, &x, B, T, 0, 0, &l1), 0, "fp32 forward");
	is_int(loom_bert_forward(b2, &x, B, T, 0, 0, &l2), 0, "bf16 forward");
	int near = 1;	/* the real tokens' (padding's are -inf in both) */
	for (int i = 0; i < B * T; i++)
		near &= !mask[i] || close_arr(loom_bert_start_logits(b2) + i,
					      loom_bert_start_logits(b1) + i, 1, 2e-2, 5e-2,
					      "bf16 start");
	ok(near && fabsf(l1 - l2) < 2e-2f,
	   "bf16 logits and loss close to fp32 (loss %.5f vs %.5f)", l2, l1);
	is_int(loom_bert_backward(b2, 1.0f), 0, "bf16 backward");
	loom_bert_free(b1);
	loom_bert_free(b2);
}

static void test_layout_and_errors(void)
{
	struct loom_bert_config c;
	is_int(loom_bert_preset("bert-base", LOOM_BERT_QA, &c), 0, "bert-base preset");
	struct loom_err err = { 0 };
	is_int(loom_bert_config_check(&c, &err), 0, "bert-base config valid");
	ok(c.n_layer == 12 && c.hidden == 768 && c.n_head == 12 && c.intermediate == 3072,
	   "bert-base: 12 layers, 768 wide, 12 heads, 3072 intermediate");
	is_int(loom_bert_preset("bert-huge", 0, &c), LOOM_EINVAL, "unknown preset refused");
	is_int(loom_bert_preset("tiny", 0, &c), LOOM_EINVAL, "a GPT's preset refused");
	loom_bert_preset("bert-tiny", LOOM_BERT_QA, &c);
	ok(c.n_layer == 2 && c.hidden == 128 && c.n_head == 2, "bert-tiny: 2 layers, 128, 2 heads");
	struct loom_bert *b = loom_bert_new(&c);
	/* HF BertForQuestionAnswering: 4,385,920 parameters at bert-tiny */
	is_int((long long)b->n_params, 4369666LL, "bert-tiny QA parameter count (HF's)");
	const struct loom_tensor *t = &b->tensors[5 + 10]; /* layer 0 intermediate.dense.weight */
	ok(!strcmp(t->name, "bert.encoder.layer.0.intermediate.dense.weight") &&
	   t->shape[0] == 512 && t->shape[1] == 128 && t->decay,
	   "nn.Linear layout: %s [%lld, %lld], decayed", t->name, (long long)t->shape[0],
	   (long long)t->shape[1]);
	t = &b->tensors[b->n_tensors - 1];
	ok(!strcmp(t->name, "qa_outputs.bias") && t->shape[0] == 2 && !t->decay,
	   "last tensor %s [2], no decay", t->name);
	int ln_decay = 0;
	for (int i = 0; i < b->n_tensors; i++)
		ln_decay += strstr(b->tensors[i].name, "LayerNorm") && b->tensors[i].decay;
	is_int(ln_decay, 0, "no weight decay on LayerNorms");
	loom_bert_init_weights(b, 1);
	const float *wrd = b->params + b->tensors[0].offset;
	double s2 = 0;
	int pad0 = 1;
	for (int i = 0; i < 128; i++)
		pad0 &= wrd[i] == 0;
	for (size_t i = 128; i < 30522 * 128; i++)
		s2 += (double)wrd[i] * wrd[i];
	ok(pad0 && fabs(sqrt(s2 / (30521.0 * 128)) - 0.02) < 5e-4,
	   "init: word embeddings N(0, 0.02), the pad token's row 0");
	loom_bert_free(b);

	c = tiny_bert_cfg(LOOM_BERT_QA);
	b = loom_bert_new(&c);
	struct loom_bert_batch x = batch(LOOM_BERT_QA);
	is_int(loom_bert_backward(b, 1), LOOM_EINVAL, "backward without forward refused");
	int32_t bad[B * T];
	memcpy(bad, mask, sizeof bad);
	bad[T + 7] = 1; /* a 1 after padding began */
	x.input_mask = bad;
	is_int(loom_bert_forward(b, &x, B, T, 0, 0, NULL), LOOM_EINVAL, "bad input_mask refused");
	ok(strstr(loom_bert_error(b), "row 1") != NULL, "message names the row: %s",
	   loom_bert_error(b));
	x.input_mask = mask;
	ids[3] = V;
	is_int(loom_bert_forward(b, &x, B, T, 0, 0, NULL), LOOM_EINVAL, "out-of-vocab id refused");
	is_str(loom_bert_error(b), "input id 23 at position 3 is outside the vocabulary (0..22)",
	       "message names the id, its position and the range");
	ids[3] = 1;
	int32_t s5 = seg[5];
	seg[5] = 2;
	is_int(loom_bert_forward(b, &x, B, T, 0, 0, NULL), LOOM_EINVAL, "segment id 2 refused");
	is_str(loom_bert_error(b), "segment id 2 at position 5 is outside the token types (0..1)",
	       "message names the segment id, its position and the range");
	seg[5] = s5;
	is_int(loom_bert_forward(b, &x, B, 13, 0, 0, NULL), LOOM_EINVAL,
	       "T above max_positions refused");
	loom_bert_free(b);
	c.pad_token_id = 0;
	c.task = LOOM_BERT_MLM;
	b = loom_bert_new(&c);
	big_init_bert(b);
	x = batch(LOOM_BERT_MLM);
	ids[0] = 0;
	loom_bert_forward(b, &x, B, T, 0, 0, NULL);
	loom_bert_backward(b, 1);
	int zero = 1;
	for (int i = 0; i < c.hidden; i++)
		zero &= b->grads[i] == 0;
	ok(zero, "the pad token's word embedding gets no gradient (HF padding_idx)");
	ids[0] = 1;
	loom_bert_free(b);
}

static void test_mlm_mask(void)
{
	enum { MB = 256, MT = 128 };
	static int32_t in[MB * MT], orig[MB * MT], lb[MB * MT], mk[MB * MT];
	for (int i = 0; i < MB * MT; i++) {
		int t = i % MT;
		orig[i] = in[i] = t == 0 ? 101 : t == 100 ? 102 : 1000 + (int32_t)(i % 500);
		mk[i] = t <= 100;
	}
	int n = loom_bert_mlm_mask(in, lb, mk, MB, MT, 30522, 101, 102, 103, 7);
	int real = 0, masked = 0, random = 0, kept = 0, badl = 0;
	for (int i = 0; i < MB * MT; i++) {
		int t = i % MT;
		real += mk[i] && t != 0 && t != 100;
		if (lb[i] == -100) {
			badl += in[i] != orig[i];
			continue;
		}
		badl += lb[i] != orig[i] || !mk[i] || t == 0 || t == 100;
		masked += in[i] == 103;
		kept += in[i] == orig[i];
		random += in[i] != 103 && in[i] != orig[i];
	}
	ok(!badl, "MLM: labels are the original ids of chosen real tokens only, never [CLS]/[SEP] "
	   "or padding");
	ok(fabs((double)n / real - 0.15) < 0.01, "MLM: %d of %d tokens chosen (15%%)", n, real);
	ok(fabs((double)masked / n - 0.8) < 0.03 && fabs((double)random / n - 0.1) < 0.03 &&
	   fabs((double)kept / n - 0.1) < 0.03, "MLM: %d [MASK], %d random, %d kept (80/10/10)",
	   masked, random, kept);
}

int main(void)
{
	make_batch();
	test_layout_and_errors();
	test_naive();
	gradcheck(LOOM_BERT_QA, 0, 0, "QA");
	gradcheck(LOOM_BERT_QA, 1, 0, "QA, dropout");
	gradcheck(LOOM_BERT_QA, 0, 2, "QA, qa_loss=real");
	gradcheck(LOOM_BERT_MLM, 0, 0, "MLM");
	gradcheck(LOOM_BERT_MLM, 1, 1, "MLM, dropout, recompute");
	test_padding();
	test_eval_counts();
	test_recompute_determinism(LOOM_BERT_QA);
	test_recompute_determinism(LOOM_BERT_MLM);
	test_bf16();
	test_mlm_mask();
	/* bert-tiny's shape, and bert-base's width (2 layers) */
	for (int train = 0; train < 2; train++) {
		test_packed(LOOM_BERT_QA, 128, 2, 512, 4, 40, train);
		test_packed(LOOM_BERT_MLM, 128, 2, 512, 4, 40, train);
	}
	test_packed(LOOM_BERT_QA, 768, 12, 3072, 3, 70, 1);
	test_packed_curve(LOOM_BERT_QA);
	test_packed_curve(LOOM_BERT_MLM);
	return done_testing();
}
