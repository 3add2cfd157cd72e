/* The models' tables for data parallelism (loom_gpt_dist_model,
 * loom_bert_dist_model; lib/train/loom_dist.h), checked without MPI: the
 * parameter store they name, layer tags that cover every tensor with each
 * tag's tensors contiguous (what loom_dist cuts its buckets by), connect
 * installing and clearing the calls, and the RigL mask hooks: a mask
 * update driven through them on two halves of the weights (as two ranks
 * would, norms combined in rank order) picks the same blocks and zeroes
 * the same weights as the GPT's own update.  Tensor parallelism: a rank's
 * slices (loom_gpt_new_tp) have the split shapes, loom_gpt_tp_copy takes
 * them out of a whole model and puts every rank's back into the same
 * bytes, and the hooks say which tensors are whole on every rank.  A
 * BERT under sharding=weights reads its weights only between the need
 * and done of their unit (the rest NaN): the loss and gradients of the
 * whole model, QA and MLM, with recompute, and a backward whose targets
 * are all ignored still gathering; a GPT likewise.  Both call tick after
 * each of a layer's products, forward and backward, while its unit is
 * there (what lets loom_dist's gathers move). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_dist.h"
#include "loom_rigl.h"
#include "tap.h"
#include "testlib.h"

/* tags in -1 .. n_layer-1, each tag's tensors one contiguous range, the
 * ranges together exactly the parameters */
static void check_tags(const struct loom_dist_model *m, const char *what)
{
	int bad = 0;
	size_t covered = 0;
	for (int tag = -1; tag < m->n_layer; tag++) {
		size_t lo = SIZE_MAX, hi = 0, sum = 0;
		for (int i = 0; i < m->n_tensors; i++) {
			const struct loom_tensor *t = &m->tensors[i];
			if (m->tag(t->name, m->n_layer) != tag)
				continue;
			lo = t->offset < lo ? t->offset : lo;
			hi = t->offset + t->numel > hi ? t->offset + t->numel : hi;
			sum += t->numel;
		}
		if (sum && sum != hi - lo) {
			diag("%s: layer %d's tensors are not contiguous", what, tag);
			bad = 1;
		}
		covered += sum;
	}
	for (int i = 0; i < m->n_tensors; i++) {
		int tag = m->tag(m->tensors[i].name, m->n_layer);
		if (tag < -1 || tag >= m->n_layer) {
			diag("%s: %s has tag %d", what, m->tensors[i].name, tag);
			bad = 1;
		}
	}
	ok(!bad && covered == m->n_params, "%s: tags cover the %zu parameters, a range each",
	   what, m->n_params);
}

static void on_ready(void *ctx, int l)
{
	(void)ctx;
	(void)l;
}

static int on_need(void *ctx, int u, int next, struct loom_err *err)
{
	(void)ctx;
	(void)u;
	(void)next;
	(void)err;
	return 0;
}

static void on_done(void *ctx, int u)
{
	(void)ctx;
	(void)u;
}

static void on_tick(void *ctx)
{
	(void)ctx;
}

static void test_gpt(void)
{
	struct loom_config c = tiny_gpt_cfg(2, 7);
	struct loom_gpt *g = loom_gpt_new(&c);
	loom_gpt_init_weights(g, 1);
	struct loom_dist_model m;
	loom_gpt_dist_model(g, &m);
	ok(m.params == g->params && m.grads == g->grads && *m.m == g->m && *m.v == g->v &&
	   m.n_params == g->n_params && m.tensors == g->tensors && m.n_layer == g->L &&
	   m.model == g, "gpt: the model's parameter store");
	ok(m.units && !m.masks.take_due, "gpt: units, no masks (dense)");
	check_tags(&m, "gpt");
	is_int(m.tag("transformer.ln_f.weight", m.n_layer), g->L - 1, "gpt: ln_f with the last layer");
	is_int(m.tag("transformer.wte.weight", m.n_layer), -1, "gpt: the embeddings last");
	int x;
	struct loom_dist_calls calls = { &x, on_ready, on_need, on_done, on_tick, NULL, NULL, NULL };
	m.connect(m.model, &calls);
	ok(g->dist.ctx == &x && g->dist.grad_ready == on_ready && g->dist.need == on_need &&
	   g->dist.done == on_done && g->dist.tick == on_tick,
	   "gpt: connect installs the calls");
	m.connect(m.model, &(struct loom_dist_calls){ .ctx = &x, .grad_ready = on_ready });
	ok(g->dist.grad_ready == on_ready && !g->dist.need && !g->dist.done && !g->dist.tick,
	   "gpt: connect without units clears need, done and tick");
	loom_gpt_free(g);
}

static void test_bert(void)
{
	struct loom_bert_config c = tiny_bert_cfg(LOOM_BERT_QA);
	struct loom_bert *b = loom_bert_new(&c);
	struct loom_dist_model m;
	loom_bert_dist_model(b, &m);
	ok(m.params == b->params && m.n_params == b->n_params && m.n_layer == b->L && m.model == b,
	   "bert: the model's parameter store");
	ok(m.units && !m.masks.take_due, "bert: units, no masks");
	check_tags(&m, "bert");
	is_int(m.tag("qa_outputs.weight", m.n_layer), b->L - 1, "bert: the head with the last layer");
	int x;
	struct loom_dist_calls calls = { &x, on_ready, on_need, on_done, on_tick, NULL, NULL, NULL };
	m.connect(m.model, &calls);
	ok(b->dist.ctx == &x && b->dist.grad_ready == on_ready && b->dist.need == on_need &&
	   b->dist.done == on_done && b->dist.tick == on_tick,
	   "bert: connect installs the calls");
	m.connect(m.model, &(struct loom_dist_calls){ .ctx = &x, .grad_ready = on_ready });
	ok(b->dist.grad_ready == on_ready && !b->dist.need && !b->dist.done && !b->dist.tick,
	   "bert: connect without units clears need, done and tick");
	loom_bert_free(b);
}

/* sharding=weights without MPI: the weights outside the units a BERT has
 * asked for (need .. done) are NaN, so a read outside them shows in its
 * loss and gradients; need brings a unit's weights (by the tags, as
 * loom_dist cuts them) from a whole copy. */
struct sharder {
	struct loom_dist_model m;
	const float *whole;
	int here[8];            /* unit u present: here[u + 1] */
	int bad, needs;         /* a need of a present unit or a done of an absent one */
	int ticks, idle;        /* ticks, those while no layer's unit was present */
};

static void unit_span(const struct loom_dist_model *m, int u, size_t *lo, size_t *hi)
{
	*lo = SIZE_MAX;
	*hi = 0;
	for (int i = 0; i < m->n_tensors; i++) {
		const struct loom_tensor *t = &m->tensors[i];
		if (m->tag(t->name, m->n_layer) != u)
			continue;
		*lo = t->offset < *lo ? t->offset : *lo;
		*hi = t->offset + t->numel > *hi ? t->offset + t->numel : *hi;
	}
}

static int sh_need(void *ctx, int u, int next, struct loom_err *err)
{
	struct sharder *s = ctx;
	size_t lo, hi;
	(void)next;
	(void)err;
	s->bad += s->here[u + 1];
	s->here[u + 1] = 1;
	s->needs++;
	unit_span(&s->m, u, &lo, &hi);
	memcpy(s->m.params + lo, s->whole + lo, (hi - lo) * sizeof(float));
	return 0;
}

static void sh_done(void *ctx, int u)
{
	struct sharder *s = ctx;
	size_t lo, hi;
	s->bad += !s->here[u + 1];
	s->here[u + 1] = 0;
	unit_span(&s->m, u, &lo, &hi);
	for (size_t i = lo; i < hi; i++)
		s->m.params[i] = NAN;
}

static void sh_tick(void *ctx)
{
	struct sharder *s = ctx;
	int layer = 0;
	for (int u = 0; u < s->m.n_layer; u++)
		layer |= s->here[u + 1];
	s->ticks++;
	s->idle += !layer;
}

/* s, with s->m the view of a model, hands out whole's weights to it, its
 * own NaN until needed */
static void sh_connect(struct sharder *s, const float *whole)
{
	s->whole = whole;
	for (size_t i = 0; i < s->m.n_params; i++)
		s->m.params[i] = NAN;
	s->m.connect(s->m.model, &(struct loom_dist_calls){ .ctx = s, .grad_ready = on_ready,
							    .need = sh_need, .done = sh_done,
							    .tick = sh_tick });
}

/* units still present */
static int sh_left(const struct sharder *s)
{
	int left = 0;
	for (int u = 0; u <= s->m.n_layer; u++)
		left += s->here[u];
	return left;
}

static void test_bert_units(int task, int recompute, int ignored)
{
	enum { B = 2, S = 9 };
	int32_t ids[B * S], seg[B * S], lab[B * S], sp[B] = { 3, 1 }, ep[B] = { 6, 8 };
	for (int i = 0; i < B * S; i++) {
		ids[i] = 1 + (int32_t)(loom_splitmix64(i) % 22);
		seg[i] = i % S >= 4;
		lab[i] = i % 3 == 1 && !ignored ? (int32_t)(loom_splitmix64(i + 5) % 23) : -100;
	}
	if (ignored)
		sp[0] = sp[1] = ep[0] = ep[1] = -1;
	int qa = task == LOOM_BERT_QA;
	struct loom_bert_batch x = { ids, seg, NULL, qa ? sp : NULL, qa ? ep : NULL,
				     qa ? NULL : lab };
	struct loom_bert_config c = tiny_bert_cfg(task);
	c.recompute = recompute;
	struct loom_bert *ref = loom_bert_new(&c), *b = loom_bert_new(&c);
	loom_bert_init_weights(ref, 3);
	loom_bert_init_weights(b, 3);
	float l0 = 0, l1 = 0;
	int rc = loom_bert_forward(ref, &x, B, S, 1, 7, &l0) || loom_bert_backward(ref, 1.0f);
	struct sharder s = { 0 };
	loom_bert_dist_model(b, &s.m);
	sh_connect(&s, ref->params);
	rc = rc || loom_bert_forward(b, &x, B, S, 1, 7, &l1) || loom_bert_backward(b, 1.0f);
	int left = sh_left(&s);
	const char *what = qa ? "QA" : "MLM";
	ok(!rc && l1 == l0 && !memcmp(b->grads, ref->grads, b->n_params * sizeof(float)),
	   "bert %s%s%s: reading its weights only between need and done, the loss %g and every "
	   "gradient of the whole model", what, recompute ? ", recompute" : "",
	   ignored ? ", every target ignored" : "", l1);
	ok(!s.bad && !left && s.needs >= 2 * (c.n_layer + 1),
	   "bert %s%s%s: each unit needed when absent and done when present, none left (%d needs)",
	   what, recompute ? ", recompute" : "", ignored ? ", every target ignored" : "", s.needs);
	/* four products a layer forward, four backward, four more for each
	 * layer recomputed (all but the last) */
	int ticks = 8 * c.n_layer + (recompute ? 4 * (c.n_layer - 1) : 0);
	ok(s.ticks == ticks && !s.idle,
	   "bert %s%s%s: a tick after each of a layer's products, its unit present (%d ticks)",
	   what, recompute ? ", recompute" : "", ignored ? ", every target ignored" : "", s.ticks);
	loom_bert_free(ref);
	loom_bert_free(b);
}

/* The GPT likewise (its config sharding the weights, so the embeddings'
 * output keeps a slot of its own): the whole model's loss and gradients,
 * and a tick after each of a layer's products. */
static void test_gpt_units(void)
{
	enum { B = 2, T = 7 };
	int32_t in[B * T], tgt[B * T];
	for (int i = 0; i < B * T; i++) {
		in[i] = (int32_t)(loom_splitmix64(i) % 23);
		tgt[i] = (int32_t)(loom_splitmix64(i + 9) % 23);
	}
	struct loom_config c = tiny_gpt_cfg(B, T);
	c.sharding = LOOM_SHARD_WEIGHTS;
	c.data_parallel = 2;
	struct loom_gpt *ref = loom_gpt_new(&c), *g = loom_gpt_new(&c);
	loom_gpt_init_weights(ref, 3);
	loom_gpt_init_weights(g, 3);
	float l0 = 0, l1 = 0;
	int rc = loom_gpt_forward(ref, in, tgt, B, T, 1, 7, &l0) || loom_gpt_backward(ref, 1.0f);
	struct sharder s = { 0 };
	loom_gpt_dist_model(g, &s.m);
	sh_connect(&s, ref->params);
	rc = rc || loom_gpt_forward(g, in, tgt, B, T, 1, 7, &l1) || loom_gpt_backward(g, 1.0f);
	int left = sh_left(&s);
	/* (no check of s.bad: the LM head asks again for the embeddings'
	 * unit that forward kept for it, which loom_dist allows) */
	ok(!rc && l1 == l0 && !memcmp(g->grads, ref->grads, g->n_params * sizeof(float)) && !left,
	   "gpt: reading its weights only between need and done, the loss %g and every gradient "
	   "of the whole model", l1);
	ok(s.ticks == 8 * c.n_layer && !s.idle,
	   "gpt: a tick after each of a layer's products, its unit present (%d ticks)", s.ticks);
	loom_gpt_free(ref);
	loom_gpt_free(g);
}

/* A sparse GPT with random gradients, made twice from the same seed. */
static struct loom_gpt *sparse_gpt(void)
{
	struct loom_config c = tiny_gpt_cfg(2, 7);
	c.sparsity = 0.5;
	c.block_size = 8;
	c.prune_every = 2;
	c.prune_ratio = 0.5;
	c.steps = 100;
	struct loom_gpt *g = loom_gpt_new(&c);
	loom_gpt_init_weights(g, 3);
	rs = 7;
	for (size_t i = 0; i < g->n_params; i++)
		g->grads[i] = frand();
	return g;
}

static void test_masks(void)
{
	struct loom_gpt *a = sparse_gpt(), *g = sparse_gpt();
	struct loom_dist_model m;
	loom_gpt_dist_model(g, &m);
	const struct loom_dist_masks *x = &m.masks;
	ok(x->take_due && x->score_reset && x->score_range && x->scores && x->score_combine &&
	   x->mask_range && x->update && x->norm_reset && x->norm_range && x->norms &&
	   x->update_norms && x->zero_changed && x->changed, "sparse gpt: every mask hook");
	loom_gpt_begin_step(g, 2);
	ok(x->take_due(g) && !x->take_due(g), "take_due: step 2 updates the masks, told once");

	/* the one-process update: scores of the whole gradient, then the masks */
	loom_rigl_score_reset(a->rigl);
	loom_rigl_score_range(a->rigl, 0, a->n_params, a->grads);
	loom_gpt_rigl_update(a, 2);

	/* the same through the hooks, as two ranks with half the array each */
	size_t n = g->n_params, half = n / 2, ns = 0, nn = 0;
	size_t lo[2] = { 0, half }, hi[2] = { half, n };
	const float *sc = x->scores(g, &ns);
	const double *nr = x->norms(g, &nn);
	float *sall = calloc(2 * ns, sizeof *sall);
	double *nall = calloc(2 * nn, sizeof *nall);
	for (int r = 0; r < 2; r++) {
		x->score_reset(g);
		x->score_range(g, lo[r], hi[r], g->grads + lo[r]);
		memcpy(sall + r * ns, sc, ns * sizeof *sc);
		x->norm_reset(g);
		x->norm_range(g, lo[r], hi[r], g->params + lo[r]);
		memcpy(nall + r * nn, nr, nn * sizeof *nr);
	}
	x->score_combine(g, sall, 2);
	x->update_norms(g, nall, 2, 2);
	for (int r = 0; r < 2; r++)
		x->zero_changed(g, lo[r], hi[r], g->params + lo[r]);
	x->changed(g);
	ok(ns == g->rigl->n_scores && nn == ns, "scores and norms: one per block (%zu)", ns);
	struct loom_rigl_stats st;
	loom_rigl_stats(a->rigl, &st);
	int same = g->rigl->updates == 1 && a->rigl->updates == 1 && st.pruned > 0;
	for (int l = 0; same && l < g->rigl->n; l++)
		same = !memcmp(g->rigl->layer[l].mask, a->rigl->layer[l].mask,
			       (size_t)g->rigl->layer[l].nb);
	ok(same, "two halves through the hooks: the masks of the one-process update (%lld "
	   "blocks pruned)", (long long)st.pruned);
	ok(!memcmp(g->params, a->params, n * sizeof(float)), "  and the same weights zeroed");
	free(sall);
	free(nall);
	loom_gpt_free(a);
	loom_gpt_free(g);
}

static int on_reduce(void *ctx, void *buf, size_t n, int op, struct loom_err *err)
{
	(void)ctx;
	(void)buf;
	(void)n;
	(void)op;
	(void)err;
	return 0;
}

static void test_tp(void)
{
	struct loom_config c = tiny_gpt_cfg(2, 7);
	c.vocab_size = 24; /* split in two */
	struct loom_gpt *w = loom_gpt_new(&c), *r[2];
	loom_gpt_init_weights(w, 1);
	int C = w->C, ok_shape = 1, same = 1;
	float *back = calloc(w->n_params, sizeof(float));
	for (int k = 0; k < 2; k++) {
		r[k] = loom_gpt_new_tp(&c, k, 2);
		loom_gpt_tp_copy(r[k], k, r[k]->params, w->params, 0);
		loom_gpt_tp_copy(r[k], k, r[k]->params, back, 1);
	}
	const struct loom_tensor *t = r[1]->tensors;
	for (int i = 0; i < r[1]->n_tensors; i++) {
		const char *n = t[i].name;
		int64_t d0 = w->tensors[i].shape[0], d1 = w->tensors[i].shape[1];
		if (strstr(n, "c_attn.weight") || strstr(n, "c_fc.weight"))
			d1 /= 2;
		else if (strstr(n, "wte") || strstr(n, "c_proj.weight") || strstr(n, "c_attn.bias") ||
			 strstr(n, "c_fc.bias"))
			d0 /= 2;
		ok_shape &= t[i].shape[0] == d0 && t[i].shape[1] == d1 && !strcmp(n, w->tensors[i].name);
	}
	ok(ok_shape, "tp: rank slices [C, 3C/2], [C/2, C], [C, 4C/2], [4C/2, C], wte [V/2, C]");
	/* rank 1's first K column is column C + C/2 of the whole c_attn */
	const struct loom_tensor *wa = &w->tensors[4], *ra = &t[4];
	for (int row = 0; row < C; row++)
		same &= r[1]->params[ra->offset + (size_t)row * 3 * (C / 2) + C / 2] ==
			w->params[wa->offset + (size_t)row * 3 * C + C + C / 2];
	ok(!strcmp(ra->name, "transformer.h.0.attn.c_attn.weight") && same,
	   "tp: rank 1 holds the second half of each of Q, K, V's columns");
	ok(!memcmp(back, w->params, w->n_params * sizeof(float)),
	   "tp: both ranks' slices put back give the whole model's bytes");
	struct loom_dist_model m;
	loom_gpt_dist_model(r[0], &m);
	ok(m.replicated && m.replicated(r[0], 1) && !m.replicated(r[0], 0) &&
	   !m.replicated(r[0], 4) && m.replicated(r[0], 7),
	   "tp: wpe and c_proj.bias whole on every rank, wte and c_attn.weight split");
	int x;
	m.connect(m.model, &(struct loom_dist_calls){ .ctx = &x, .reduce = on_reduce });
	ok(r[0]->dist.reduce == on_reduce && r[0]->dist.ctx == &x, "tp: connect installs reduce");
	loom_gpt_dist_model(w, &m);
	ok(!m.replicated, "tp: a whole model has no replicated hook");
	int32_t in[8] = { 0 };
	r[1]->dist.reduce = NULL;
	ok(loom_gpt_forward(r[1], in, in, 1, 8, 0, 0, NULL) == LOOM_EINVAL &&
	   strstr(loom_gpt_error(r[1]), "not connected"), "tp: an unconnected rank refuses to compute");
	free(back);
	loom_gpt_free(w);
	loom_gpt_free(r[0]);
	loom_gpt_free(r[1]);
}

int main(void)
{
	test_gpt();
	test_gpt_units();
	test_tp();
	test_bert();
	for (int task = 0; task < 2; task++) {
		test_bert_units(task, 0, 0);
		test_bert_units(task, 1, 0);
		test_bert_units(task, 0, 1);
	}
	test_masks();
	return done_testing();
}
