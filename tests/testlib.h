/* Helpers shared by the C unit tests of the kernels and the model: a
 * reproducible pseudo-random stream (rs, its state, may be reseeded), random
 * arrays, a tolerance comparison that reports its worst element, the
 * relative error of two models' gradients, the tiny
 * GPT and BERT configs and large GPT weights for gradient checks.  Header-only; include after tap.h. */
#ifndef LOOM_TESTLIB_H
#define LOOM_TESTLIB_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom_bert.h"
#include "loom_gpt.h"
#include "loom_kernels.h"

static uint64_t rs = 42;

/* uniform in [-1, 1) */
static __attribute__((unused)) float frand(void)
{
	rs = loom_splitmix64(rs);
	return (float)((rs >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* n values uniform in [-scale, scale) (malloc'd, at least one element) */
static __attribute__((unused)) float *rnd(size_t n, float scale)
{
	float *p = malloc(sizeof(float) * (n ? n : 1));
	for (size_t i = 0; i < n; i++)
		p[i] = frand() * scale;
	return p;
}

/* max |a-b| / (atol + rtol*|b|) <= 1; else a diag line names the worst */
static __attribute__((unused)) int close_arr(const float *a, const float *b, size_t n,
					     double atol, double rtol, const char *what)
{
	double worst = 0;
	size_t wi = 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)a[i] - b[i]) / (atol + rtol * fabs(b[i]));
		if (!(e <= worst)) {
			worst = e;
			wi = i;
		}
	}
	if (!(worst <= 1.0))
		diag("%s: worst at %zu: %g vs %g", what, wi, a[wi], b[wi]);
	return worst <= 1.0;
}

/* The relative error |a - b| / |b| (2-norms) of all n tensors' values
 * (a and b: two models' flat gradients) as one vector, into *all, and
 * the largest of each tensor's, returned (its name in *worst).  A
 * tensor whose true gradient is 0 holds rounding noise only (BERT's key
 * bias: q.bk is added to every score of a query, which the softmax
 * cancels; under the QA loss the last LayerNorm's bias and the head's
 * bias: each row's softmax - onehot sums to 0), so tensors whose norm is
 * under 1e-6 of the whole's count in *all only. */
static __attribute__((unused)) double tensors_rel(const struct loom_tensor *t, int n,
						  const float *a, const float *b,
						  const char **worst, double *all)
{
	double w = 0, dd = 0, mm = 0, *d = calloc(n, sizeof *d), *m = calloc(n, sizeof *m);
	for (int i = 0; i < n; i++) {
		for (size_t j = 0; j < t[i].numel; j++) {
			double x = a[t[i].offset + j], y = b[t[i].offset + j];
			d[i] += (x - y) * (x - y);
			m[i] += y * y;
		}
		dd += d[i];
		mm += m[i];
	}
	*all = sqrt(dd / mm);
	for (int i = 0; i < n; i++)
		if (m[i] >= 1e-12 * mm && sqrt(d[i] / m[i]) > w) {
			w = sqrt(d[i] / m[i]);
			*worst = t[i].name;
		}
	free(d);
	free(m);
	return w;
}

/* The tiny GPT of the model tests: 2 layers, 16 hidden, 4 heads, vocab 23,
 * 8 positions, micro-batches of B x T. */
static __attribute__((unused)) struct loom_config tiny_gpt_cfg(int B, int T)
{
	struct loom_config c;
	loom_config_defaults(&c);
	c.n_layer = 2;
	c.n_embd = 16;
	c.n_head = 4;
	c.vocab_size = 23;
	c.n_positions = 8;
	c.seq_len = T;
	c.micro_batch = B;
	return c;
}

/* The tiny BERT of the model tests: 2 layers, 16 hidden, 2 heads,
 * intermediate 40 (not 4C: the shapes are the config's), vocab 23, 12
 * positions, no dropout, no pad token. */
static __attribute__((unused)) struct loom_bert_config tiny_bert_cfg(int task)
{
	struct loom_bert_config c;
	loom_bert_preset("bert-tiny", task, &c);
	c.n_layer = 2;
	c.hidden = 16;
	c.n_head = 2;
	c.intermediate = 40;
	c.vocab_size = 23;
	c.max_positions = 12;
	c.dropout = 0;
	c.attn_dropout = 0;
	c.pad_token_id = -1;
	return c;
}

/* Larger weights than GPT-2's init (uniform +-0.3, LayerNorm gains around
 * 1), so every path of a gradient check has sizeable gradients. */
static __attribute__((unused)) void big_init(struct loom_gpt *g)
{
	uint64_t s = 7;
	for (size_t i = 0; i < g->n_params; i++) {
		s = loom_splitmix64(s);
		g->params[i] = (float)((s >> 40) * (1.0 / 16777216.0) - 0.5) * 0.6f;
	}
	for (int i = 0; i < g->n_tensors; i++)
		if (strstr(g->tensors[i].name, "ln_") && strstr(g->tensors[i].name, "weight"))
			for (size_t j = 0; j < g->tensors[i].numel; j++)
				g->params[g->tensors[i].offset + j] += 1.0f;
}

#endif
