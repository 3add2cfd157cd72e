/* A GPT with RigL block sparsity (lib/train/loom_gpt.h, loom_rigl.h): the
 * sparse forward equals the dense model's forward on the masked weights;
 * gradients against finite differences and against the dense model (live
 * blocks only on ordinary steps, dense on mask-update steps); an update
 * step keeps density and zeroes what it must. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "loom_ckpt.h"
#include "loom_gpt.h"
#include "loom_kernels.h"
#include "loom_rigl.h"
#include "loom_safetensors.h"
#include "tap.h"
#include "testlib.h"

enum { B = 2, T = 7 };

static int32_t in[B * T], tg[B * T];

static struct loom_config cfg_of(double sparsity, int layers)
{
	struct loom_config c = tiny_gpt_cfg(B, T);
	c.sparsity = sparsity;
	c.sparse_layers = layers;
	c.block_size = 8;
	c.prune_every = 2;
	c.prune_ratio = 0.5;
	c.steps = 100;
	c.grad_clip = 0;
	return c;
}

static double loss_at(struct loom_gpt *g)
{
	float l;
	if (loom_gpt_forward(g, in, tg, B, T, 0, 0, &l))
		return NAN;
	return l;
}

static double max_rel(const float *a, const float *b, size_t n)
{
	double w = 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)a[i] - b[i]) / (1e-5 + 1e-4 * fabs(b[i]));
		if (!(e <= w))
			w = e;
	}
	return w;
}

/* is parameter j in a dead block of a sparse layer? */
static int dead(const struct loom_gpt *g, size_t j)
{
	float one = 1.0f;
	loom_rigl_mask_range(g->rigl, j, j + 1, &one);
	return one == 0.0f;
}

static void check_layers(int layers, const char *what)
{
	struct loom_config cs = cfg_of(0.5, layers), cd = cfg_of(0, layers);
	ok(!loom_config_validate(&cs) && !loom_config_validate(&cd), "%s: configs", what);
	struct loom_gpt *s = loom_gpt_new(&cs), *d = loom_gpt_new(&cd);
	ok(s && d && s->rigl && !d->rigl, "%s: a sparse and a dense model", what);
	big_init(s);
	loom_gpt_rigl_sync(s); /* dead blocks zero */
	loom_gpt_weights_changed(s);
	memcpy(d->params, s->params, sizeof(float) * s->n_params);
	loom_gpt_weights_changed(d);

	/* forward */
	double ls = loss_at(s), ld = loss_at(d);
	ok(isfinite(ls) && fabs(ls - ld) <= 1e-5 * fabs(ld),
	   "%s: sparse forward loss %.7f = dense forward on the masked weights %.7f", what, ls, ld);
	float *os = malloc(sizeof(float) * s->V), *od = malloc(sizeof(float) * s->V);
	ok(!loom_gpt_logits_last(s, in, T, os) && !loom_gpt_logits_last(d, in, T, od) &&
	   max_rel(os, od, (size_t)s->V) <= 1, "%s: generation logits equal", what);
	free(os);
	free(od);

	/* ordinary step: gradients of the live blocks only */
	loom_gpt_begin_step(s, 1);
	loom_gpt_begin_step(d, 1);
	loss_at(s);
	loom_gpt_backward(s, 1.0f);
	loss_at(d);
	loom_gpt_backward(d, 1.0f);
	float *gd = malloc(sizeof(float) * s->n_params);
	memcpy(gd, d->grads, sizeof(float) * s->n_params);
	loom_rigl_mask_range(s->rigl, 0, s->n_params, gd);
	ok(max_rel(s->grads, gd, s->n_params) <= 1,
	   "%s: ordinary step: sparse gradients = dense gradients masked to the live blocks", what);
	int zero = 1, ndead = 0;
	for (size_t j = 0; j < s->n_params; j++)
		if (dead(s, j)) {
			ndead++;
			zero &= s->grads[j] == 0;
		}
	ok(zero && ndead > 0, "%s: %d dead weights have gradient exactly 0", what, ndead);

	/* finite differences on the sparse model, sampled live entries */
	float *grad = malloc(sizeof(float) * s->n_params);
	memcpy(grad, s->grads, sizeof(float) * s->n_params);
	const float h = 1e-2f;
	int bad = 0, checked = 0;
	for (int ti = 0; ti < s->n_tensors; ti++) {
		const struct loom_tensor *t = &s->tensors[ti];
		for (int k = 0, tries = 0; k < 6 && tries < 100; tries++) {
			size_t j = t->offset + loom_splitmix64((uint64_t)ti * 31 + tries) % t->numel;
			if (dead(s, j))
				continue;
			k++;
			float save = s->params[j];
			s->params[j] = save + h;
			loom_gpt_weights_changed(s);
			double lp = loss_at(s);
			s->params[j] = save - h;
			loom_gpt_weights_changed(s);
			double lm = loss_at(s);
			s->params[j] = save;
			loom_gpt_weights_changed(s);
			double fd = (lp - lm) / (2 * h), an = grad[j];
			checked++;
			if (fabs(fd - an) > 2e-3 + 3e-2 * fabs(an) && bad++ < 5)
				diag("%s: %s[%zu]: analytic %.6g, numeric %.6g", what, t->name,
				     j - t->offset, an, fd);
		}
	}
	ok(!bad, "%s: %d sampled live gradient entries match finite differences (%d off)", what,
	   checked, bad);
	free(grad);

	/* update step (t = 2): dense gradients of the sparse layers */
	loom_gpt_zero_grad(s);
	loom_gpt_zero_grad(d);
	loom_gpt_begin_step(s, 2);
	ok(s->rigl_dense, "%s: step 2 updates the masks (prune_every 2)", what);
	loss_at(s);
	loom_gpt_backward(s, 1.0f);
	loss_at(d);
	loom_gpt_backward(d, 1.0f);
	ok(max_rel(s->grads, d->grads, s->n_params) <= 1,
	   "%s: update step: the sparse model's gradients are the dense ones everywhere", what);

	/* the update step itself */
	struct loom_rigl *r = s->rigl;
	float *gdense = malloc(sizeof(float) * s->n_params);
	memcpy(gdense, s->grads, sizeof(float) * s->n_params);
	uint8_t *before = malloc(r->n_scores);
	size_t o = 0;
	for (int l = 0; l < r->n; l++) {
		memcpy(before + o, r->layer[l].mask, (size_t)r->layer[l].nb);
		o += (size_t)r->layer[l].nb;
	}
	float norm;
	loom_gpt_step(s, 1e-2f, 2, &norm);
	ok(r->updates == 1 && r->last_update == 2 && !s->rigl_dense,
	   "%s: loom_gpt_step updated the masks once, at step 2", what);
	int density = 1, zeros = 1, changed = 0, kept_moved = 1;
	o = 0;
	for (int l = 0; l < r->n; l++) {
		const struct loom_rigl_layer *L = &r->layer[l];
		int live = 0;
		for (int b = 0; b < L->nb; b++) {
			live += L->mask[b];
			changed += L->mask[b] != before[o + b];
		}
		density &= live == L->live && live == (int)llround(0.5 * L->nb);
		o += (size_t)L->nb;
	}
	for (size_t j = 0; j < s->n_params; j++) {
		if (dead(s, j))
			zeros &= s->params[j] == 0 && s->m[j] == 0 && s->v[j] == 0;
	}
	/* surviving blocks took the AdamW step of the gradient (m = (1 - beta1) g
	 * after a first step); blocks that could not reach the loss (e.g. a
	 * head whose output projection rows are all dead) have g = 0 */
	int nmoved = 0;
	for (int l = 0; l < r->n; l++) {
		const struct loom_rigl_layer *L = &r->layer[l];
		for (int b = 0; b < L->nb; b++) {
			if (!L->mask[b] || L->changed[b])
				continue;
			for (int i = 0; i < 8; i++)
				for (int k = 0; k < 8; k++) {
					size_t j = L->offset + (size_t)((b / L->nbc) * 8 + i) * L->OC +
						   (size_t)(b % L->nbc) * 8 + k;
					double want = (1 - cs.beta1) * gdense[j];
					kept_moved &= fabs(s->m[j] - want) <= 1e-6 * fabs(want) + 1e-12;
					nmoved += s->m[j] != 0;
				}
		}
	}
	ok(density, "%s: density exactly 0.5 per layer after the update", what);
	ok(zeros, "%s: every dead block exactly 0 in weights, m and v", what);
	ok(changed > 0, "%s: the update changed %d blocks", what, changed);
	ok(kept_moved && nmoved > 0,
	   "%s: the update step applied AdamW to the surviving blocks (%d moments set)", what, nmoved);
	free(gdense);
	free(before);

	/* sparse forward with the new masks = dense forward on the new weights */
	memcpy(d->params, s->params, sizeof(float) * s->n_params);
	loom_gpt_weights_changed(d);
	ls = loss_at(s);
	ld = loss_at(d);
	ok(isfinite(ls) && fabs(ls - ld) <= 1e-5 * fabs(ld),
	   "%s: after the update: sparse forward %.7f = dense forward %.7f", what, ls, ld);
	free(gd);
	loom_gpt_free(s);
	loom_gpt_free(d);
}

/* Write a checkpoint of g with the side file (t, n, meta) to dir, open
 * it and load its masks into h; the result and h's message. */
static int ckpt_round(struct loom_gpt *g, struct loom_gpt *h, const char *dir,
		      const struct loom_st_tensor *t, size_t n, const char *const *meta)
{
	struct loom_err err = { 0 };
	struct loom_ckpt_tensor *tp = calloc((size_t)g->n_tensors, sizeof *tp);
	loom_gpt_ckpt_tensors(g, g->params, tp);
	struct loom_gpt_hf hf;
	loom_gpt_ckpt_hf(&g->cfg, &hf);
	struct loom_ckpt_save sv = {
		.dir = dir, .tensors = tp, .n_tensors = (size_t)g->n_tensors,
		.arch = &loom_gpt_ckpt_arch, .hf = &hf,
		.state = { .step = 7 }, .sidecar_name = LOOM_GPT_SPARSITY_FILE,
		.sidecar = t, .n_sidecar = n, .sidecar_meta = meta,
	};
	int rc = loom_ckpt_write(&sv, NULL, 0, &err);
	free(tp);
	if (rc) {
		diag("write: %s", err.msg);
		return rc;
	}
	struct loom_ckpt *ck = loom_ckpt_open(dir, &loom_gpt_ckpt_arch, 0, &err);
	if (!ck) {
		diag("open: %s", err.msg);
		return -1;
	}
	rc = loom_gpt_ckpt_load_sparsity(h, ck);
	loom_ckpt_free(ck);
	return rc;
}

/* sparsity.safetensors: a round trip, and every refusal of the loader */
static void check_side_file(void)
{
	const char *root;
	char dir[PATH_MAX + 32];
	ok((root = tap_tmpdir()) != NULL, "scratch dir");
	snprintf(dir, sizeof dir, "%s/ck", root);
	struct loom_config c = cfg_of(0.5, LOOM_SL_ALL), c2 = c;
	c2.seed = 99;
	loom_config_validate(&c);
	loom_config_validate(&c2);
	struct loom_gpt *g = loom_gpt_new(&c), *h = loom_gpt_new(&c2);
	loom_gpt_init_weights(g, 1);
	loom_gpt_init_weights(h, 2);
	g->rigl->last_update = 6;
	g->rigl->updates = 3;
	struct loom_gpt_sidecar sc;
	ok(!loom_gpt_ckpt_sparsity(g, &sc) && sc.n == 16, "side file: 2 tensors per sparse weight");
	ok(memcmp(h->rigl->layer[0].mask, g->rigl->layer[0].mask, (size_t)g->rigl->layer[0].nb),
	   "another seed: other masks before loading");
	int rc = ckpt_round(g, h, dir, sc.t, sc.n, sc.meta);
	int same = 1, zero = 1;
	for (int l = 0; l < g->rigl->n; l++)
		same &= !memcmp(h->rigl->layer[l].mask, g->rigl->layer[l].mask, (size_t)g->rigl->layer[l].nb) &&
			!memcmp(h->rigl->layer[l].mask0, g->rigl->layer[l].mask0, (size_t)g->rigl->layer[l].nb);
	for (size_t j = 0; j < h->n_params; j++)
		if (dead(h, j))
			zero &= h->params[j] == 0;
	ok(rc == 0 && same && h->rigl->last_update == 6 && h->rigl->updates == 3,
	   "round trip: masks, initial masks, last update and count restored");
	ok(zero, "loading zeroes the dead blocks of the weights it meets");

	struct {
		const char *what, *want;
	} bad[] = {
		{ "a mask value of 2", "transformer.h.0.attn.c_attn.weight: mask value of block 0 is not 0 or 1" },
		{ "a wrong shape", "tensor 'transformer.h.0.attn.c_attn.weight.mask' has the wrong dtype or shape (the model needs U8 [2, 6])" },
		{ "a missing tensor", "sparsity.safetensors: 15 tensors, the model's sparse_layers need 16" },
		{ "another block size", "sparsity.safetensors: block_size 16, the model has 8" },
		{ "no format", "sparsity.safetensors: __metadata__ format is not loom-rigl" },
		{ "a bad count", "sparsity.safetensors: __metadata__ updates is 'x', not a count" },
		{ "live counts that differ", "transformer.h.0.attn.c_attn.weight: 7 live blocks, the initial mask has 6" },
	};
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		struct loom_st_tensor t[16];
		const char *meta[9];
		uint8_t m0[12];
		memcpy(t, sc.t, sizeof t);
		memcpy(meta, sc.meta, sizeof meta);
		memcpy(m0, g->rigl->layer[0].mask, sizeof m0);
		size_t n = 16;
		switch (k) {
		case 0: m0[0] = 2; t[0].data = m0; break;
		case 1: t[0].shape[0] = 6; t[0].shape[1] = 2; break;
		case 2: n = 15; break;
		case 3: meta[3] = "16"; break;
		case 4: meta[1] = "other"; break;
		case 5: meta[7] = "x"; break;
		case 6:
			for (int b = 0; b < 12; b++)
				if (!m0[b]) {
					m0[b] = 1;
					break;
				}
			t[0].data = m0;
			break;
		}
		snprintf(dir, sizeof dir, "%s/bad%zu", root, k);
		rc = ckpt_round(g, h, dir, t, n, meta);
		ok(rc < 0 && strstr(loom_gpt_error(h), bad[k].want), "side file with %s: refused (%s)",
		   bad[k].what, loom_gpt_error(h));
	}
	loom_gpt_sidecar_release(&sc);
	loom_gpt_free(g);
	loom_gpt_free(h);
	ok(tap_rm_rf(root) == 0, "scratch dir removed");
}

int main(void)
{
	uint64_t r = 3;
	for (int i = 0; i < B * T; i++) {
		r = loom_splitmix64(r);
		in[i] = (int32_t)(r % 23);
		tg[i] = (int32_t)((r >> 20) % 23);
	}
	check_layers(LOOM_SL_ALL, "all four projections");
	check_layers(LOOM_SL_FC | LOOM_SL_FCPROJ, "the MLP only");
	check_side_file();

	/* init_weights: masks from the seed, dead blocks zero */
	struct loom_config c = cfg_of(0.75, LOOM_SL_ALL);
	loom_config_validate(&c);
	struct loom_gpt *g = loom_gpt_new(&c);
	loom_gpt_init_weights(g, 5);
	int zero = 1, nz = 0;
	for (size_t j = 0; j < g->n_params; j++)
		if (dead(g, j))
			zero &= g->params[j] == 0;
		else
			nz += g->params[j] != 0;
	ok(zero && nz > 0, "init_weights: dead blocks exactly zero, live ones initialised");
	loom_gpt_free(g);
	return done_testing();
}
