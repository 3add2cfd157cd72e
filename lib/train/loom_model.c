/* loom_model.c - what the GPT and BERT share; see loom_model.h. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_ckpt.h"
#include "loom_kernels.h"
#include "loom_model.h"

void loom_model_add(struct loom_tensor *tab, int *n, size_t *off, const char *name, int ndim,
		    int64_t d0, int64_t d1, int decay)
{
	struct loom_tensor *t = &tab[(*n)++];
	snprintf(t->name, sizeof t->name, "%s", name);
	t->ndim = ndim;
	t->shape[0] = d0;
	t->shape[1] = ndim > 1 ? d1 : 0;
	t->numel = (size_t)d0 * (ndim > 1 ? (size_t)d1 : 1);
	t->offset = *off;
	t->decay = decay;
	*off += t->numel;
}

int loom_model_check_ids(const int32_t *x, size_t n, int lim, const int *skip, const char *what,
			 const char *range, struct loom_err *err)
{
	for (size_t i = 0; i < n; i++)
		if ((x[i] < 0 || x[i] >= lim) && !(skip && x[i] == *skip))
			return loom_err_set(err, LOOM_EINVAL, "%s %d at position %zu is outside %s (0..%d)",
					    what, x[i], i, range, lim - 1);
	return 0;
}

float *loom_model_falloc(size_t n)
{
	return n > SIZE_MAX / sizeof(float) ? NULL : loom_lazy_alloc((n ? n : 1) * sizeof(float));
}

/* Box-Muller: normals 2i and 2i+1 from the counter hash of pair i. */
void loom_model_store_free(float *params, float *grads, float *m, float *v)
{
	loom_lazy_free(params);
	loom_lazy_free(grads);
	loom_lazy_free(m);
	loom_lazy_free(v);
}

int loom_model_store_alloc(size_t n, float **params, float **grads, float **m, float **v)
{
	*params = loom_model_falloc(n);
	*grads = loom_model_falloc(n);
	*m = loom_model_falloc(n);
	*v = loom_model_falloc(n);
	if (*params && *grads && *m && *v)
		return 0;
	loom_model_store_free(*params, *grads, *m, *v);
	*params = *grads = *m = *v = NULL;
	return LOOM_ENOMEM;
}

int32_t *loom_model_scratch_get(struct loom_model_scratch *s, size_t n)
{
	if (n > s->cap) {
		free(s->buf);
		if (!(s->buf = malloc(sizeof(int32_t) * n))) {
			s->cap = 0;
			return NULL;
		}
		s->cap = n;
	}
	return s->buf;
}

void loom_model_scratch_release(struct loom_model_scratch *s)
{
	free(s->buf);
	s->buf = NULL;
	s->cap = 0;
}

static void normal_pair(uint64_t key, size_t i, float *z0, float *z1)
{
	uint64_t a = loom_splitmix64(key ^ loom_splitmix64((uint64_t)i));
	uint64_t b = loom_splitmix64(a);
	float u1 = ((a >> 40) + 1.0f) * (1.0f / 16777217.0f);
	float u2 = (b >> 40) * (1.0f / 16777216.0f);
	float r = sqrtf(-2.0f * logf(u1)), s, c;
	sincosf(2.0f * (float)M_PI * u2, &s, &c);
	*z0 = r * c;
	*z1 = r * s;
}

void loom_model_normal(float *p, size_t n, float std, uint64_t key)
{
	size_t half = n / 2;
	#pragma omp parallel for schedule(static)
	for (size_t j = 0; j < half; j++) {
		float z0, z1;
		normal_pair(key, j, &z0, &z1);
		p[2 * j] = std * z0;
		p[2 * j + 1] = std * z1;
	}
	if (n & 1) {
		float z0, z1;
		normal_pair(key, half, &z0, &z1);
		p[n - 1] = std * z0;
	}
}

void loom_model_normal_at(float *p, size_t n, float std, uint64_t key, size_t first)
{
	#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++) {
		size_t e = first + i;
		float z0, z1;
		normal_pair(key, e / 2, &z0, &z1);
		p[i] = std * (e & 1 ? z1 : z0);
	}
}

uint64_t loom_model_init_key(uint64_t seed, int i)
{
	return loom_splitmix64(seed ^ loom_splitmix64(0x5eed0000ull + (uint64_t)i));
}

void loom_model_init_tensors(const struct loom_tensor *tab, int first, int nt, float *params,
			     uint64_t seed, float (*init)(const struct loom_tensor *t, const void *ctx),
			     const void *ctx)
{
	for (int i = first; i < nt; i++) {
		const struct loom_tensor *t = &tab[i];
		float *p = params + t->offset, x = init(t, ctx);
		if (t->ndim == 1)
			for (size_t j = 0; j < t->numel; j++)
				p[j] = x;
		else
			loom_model_normal(p, t->numel, x, loom_model_init_key(seed, i));
	}
}

void loom_model_init_weights(const struct loom_tensor *tab, int nt, float *params, float *grads,
			     float *m, float *v, size_t n_params, uint64_t seed,
			     float (*init)(const struct loom_tensor *t, const void *ctx),
			     const void *ctx)
{
	loom_model_init_tensors(tab, 0, nt, params, seed, init, ctx);
	loom_lazy_release(m, n_params * sizeof(float));
	loom_lazy_release(v, n_params * sizeof(float));
	loom_lazy_release(grads, n_params * sizeof(float));
}

uint64_t loom_model_site_key(uint64_t key, int l, int site)
{
	return loom_splitmix64(key ^ loom_splitmix64(((uint64_t)(l + 1) << 8) | (uint64_t)site));
}

int loom_model_ready_mm(struct loom_mm **mm, int *w16_ok, int precision, const float *params,
			size_t n, struct loom_err *err)
{
	if (precision == LOOM_PREC_FP32)
		return 0;
	if (!*mm && !(*mm = loom_mm_new(precision, err)))
		return err->code;
	if (!*w16_ok && loom_mm_weights(*mm, params, n))
		return loom_mm_check(*mm, err);
	*w16_ok = 1;
	return 0;
}

float loom_model_clip_scale(const struct loom_adamw *h, double sumsq, float *norm)
{
	float nrm = (float)sqrt(sumsq);
	if (norm)
		*norm = nrm;
	return h->grad_clip > 0 && nrm > h->grad_clip ? (float)(h->grad_clip / nrm) : 1.0f;
}

void loom_model_adamw_apply(const struct loom_tensor *tab, int nt, float *params, float *grads,
			    float *m, float *v, const struct loom_adamw *h, float lr, int64_t t,
			    float gscale)
{
	/* one team for every tensor, no barrier between them */
	#pragma omp parallel
	for (int i = 0; i < nt; i++) {
		size_t o = tab[i].offset;
		loom_k_adamw_team(params + o, grads + o, m + o, v + o, tab[i].numel, lr,
				  (float)h->beta1, (float)h->beta2, (float)h->eps,
				  tab[i].decay ? (float)h->weight_decay : 0.0f, t, gscale);
	}
}

void loom_model_adamw(const struct loom_tensor *tab, int nt, float *params, float *grads,
		      float *m, float *v, size_t n, const struct loom_adamw *h, float lr,
		      int64_t t, float *norm)
{
	loom_model_adamw_apply(tab, nt, params, grads, m, v, h, lr, t,
			       loom_model_clip_scale(h, loom_k_sumsq(grads, n), norm));
}

void loom_model_ckpt_tensors(const struct loom_tensor *tab, int nt, float *base,
			     struct loom_ckpt_tensor *out)
{
	for (int i = 0; i < nt; i++) {
		memset(&out[i], 0, sizeof out[i]);
		out[i].name = tab[i].name;
		out[i].ndim = tab[i].ndim;
		out[i].shape[0] = tab[i].shape[0];
		out[i].shape[1] = tab[i].shape[1];
		out[i].data = base + tab[i].offset;
	}
}

int loom_model_argmax(const float *x, int n)
{
	int k = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[k])
			k = i;
	return k;
}
