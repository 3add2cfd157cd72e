/* loom_gpt_ckpt.c - the GPT's tensor table and config for lib/train/loom_ckpt.h. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_ckpt.h"
#include "loom_gpt.h"
#include "loom_rigl.h"
#include "loom_safetensors.h"

void loom_gpt_ckpt_tensors(const struct loom_gpt *g, float *base, struct loom_ckpt_tensor *out)
{
	loom_model_ckpt_tensors(g->tensors, g->n_tensors, base, out);
}

void loom_gpt_ckpt_hf(const struct loom_config *cfg, struct loom_gpt_hf *hf)
{
	hf->n_layer = cfg->n_layer;
	hf->n_embd = cfg->n_embd;
	hf->n_head = cfg->n_head;
	hf->n_positions = cfg->n_positions;
	hf->vocab_size = cfg->vocab_size;
	hf->layer_norm_epsilon = cfg->layer_norm_epsilon;
	hf->resid_pdrop = cfg->dropout;
	hf->embd_pdrop = cfg->dropout;
	hf->attn_pdrop = cfg->attn_dropout;
}

int loom_gpt_ckpt_config(const struct loom_ckpt *ck, struct loom_config *cfg)
{
	const char *txt = loom_ckpt_loom_config(ck);
	const struct loom_gpt_hf *hf = loom_ckpt_hf(ck);
	int rc;

	loom_config_defaults(cfg);
	if (txt) {
		json_error_t je;
		json_t *o = json_loads(txt, 0, &je);
		if (!o)
			return loom_err_set(&cfg->err, LOOM_EFORMAT, "%s/config.json: loom: %s",
					    loom_ckpt_dir(ck), loom_json_reason(je.text));
		rc = loom_config_apply_json(cfg, o);
		json_decref(o);
		if (rc)
			return rc;
	} else {
		cfg->n_layer = (int)hf->n_layer;
		cfg->n_embd = (int)hf->n_embd;
		cfg->n_head = (int)hf->n_head;
		cfg->n_positions = (int)hf->n_positions;
		cfg->vocab_size = (int)hf->vocab_size;
		cfg->seq_len = cfg->n_positions;
		cfg->layer_norm_epsilon = hf->layer_norm_epsilon;
		cfg->dropout = hf->resid_pdrop;
		cfg->attn_dropout = hf->attn_pdrop;
		snprintf(cfg->preset, sizeof cfg->preset, "checkpoint");
	}
	if (cfg->n_layer != hf->n_layer || cfg->n_embd != hf->n_embd ||
	    cfg->n_head != hf->n_head || cfg->n_positions != hf->n_positions ||
	    cfg->vocab_size != hf->vocab_size)
		return loom_err_set(&cfg->err, LOOM_EFORMAT,
				    "%s/config.json: loom config does not match the HF keys",
				    loom_ckpt_dir(ck));
	cfg->global_batch = 0;
	return loom_config_validate(cfg);
}

int loom_gpt_ckpt_sparsity(const struct loom_gpt *g, struct loom_gpt_sidecar *sc)
{
	const struct loom_rigl *r = g->rigl;
	memset(sc, 0, sizeof *sc);
	if (!r)
		return 0;
	sc->t = calloc(2 * (size_t)r->n, sizeof *sc->t);
	sc->names = calloc(2 * (size_t)r->n, sizeof *sc->names);
	if (!sc->t || !sc->names) {
		loom_gpt_sidecar_release(sc);
		return LOOM_ENOMEM;
	}
	for (int l = 0; l < r->n; l++) {
		const struct loom_rigl_layer *L = &r->layer[l];
		for (int k = 0; k < 2; k++) {
			struct loom_st_tensor *t = &sc->t[2 * l + k];
			snprintf(sc->names[2 * l + k], sizeof sc->names[0], "%s.%s", L->name,
				 k ? "mask0" : "mask");
			t->name = sc->names[2 * l + k];
			t->dtype = LOOM_ST_U8;
			t->ndim = 2;
			t->shape[0] = (uint64_t)L->nbr;
			t->shape[1] = (uint64_t)L->nbc;
			t->data = k ? L->mask0 : L->mask;
		}
	}
	sc->n = 2 * (size_t)r->n;
	snprintf(sc->vals[0], sizeof sc->vals[0], "%d", r->bs);
	snprintf(sc->vals[1], sizeof sc->vals[1], "%" PRId64, r->last_update);
	snprintf(sc->vals[2], sizeof sc->vals[2], "%" PRId64, r->updates);
	const char *meta[9] = { "format", "loom-rigl", "block_size", sc->vals[0],
				"last_update", sc->vals[1], "updates", sc->vals[2], NULL };
	memcpy(sc->meta, meta, sizeof meta);
	return 0;
}

void loom_gpt_sidecar_release(struct loom_gpt_sidecar *sc)
{
	free(sc->t);
	free(sc->names);
	memset(sc, 0, sizeof *sc);
}

static int meta_i64(struct loom_gpt *g, const struct loom_st *st, const char *key, int64_t *v)
{
	const char *s = loom_st_meta(st, key);
	uint64_t x;
	if (!s || loom_parse_u64(s, 0, INT64_MAX, &x))
		return loom_err_set(&g->err, LOOM_EFORMAT, "%s: __metadata__ %s is %s%s%s",
				    loom_st_name(st), key, s ? "'" : "missing", s ? s : "",
				    s ? "', not a count" : "");
	*v = (int64_t)x;
	return 0;
}

int loom_gpt_sparsity_from_st(struct loom_gpt *g, const struct loom_st *st)
{
	struct loom_rigl *r = g->rigl;
	int64_t bs, last, updates;
	int rc;
	if (!r)
		return loom_err_set(&g->err, LOOM_EINVAL, "%s: the model is dense", loom_st_name(st));
	const char *fmt = loom_st_meta(st, "format");
	if (!fmt || strcmp(fmt, "loom-rigl"))
		return loom_err_set(&g->err, LOOM_EFORMAT, "%s: __metadata__ format is not loom-rigl",
				    loom_st_name(st));
	if ((rc = meta_i64(g, st, "block_size", &bs)) || (rc = meta_i64(g, st, "last_update", &last)) ||
	    (rc = meta_i64(g, st, "updates", &updates)))
		return rc;
	if (bs != r->bs)
		return loom_err_set(&g->err, LOOM_EFORMAT, "%s: block_size %lld, the model has %d",
				    loom_st_name(st), (long long)bs, r->bs);
	if (loom_st_count(st) != 2 * (size_t)r->n)
		return loom_err_set(&g->err, LOOM_EFORMAT,
				    "%s: %zu tensors, the model's sparse_layers need %d (a mask and an initial mask per sparse weight)",
				    loom_st_name(st), loom_st_count(st), 2 * r->n);
	for (int l = 0; l < r->n; l++) {
		const struct loom_rigl_layer *L = &r->layer[l];
		const struct loom_st_tensor *t[2];
		for (int k = 0; k < 2; k++) {
			char name[80];
			snprintf(name, sizeof name, "%s.%s", L->name, k ? "mask0" : "mask");
			t[k] = loom_st_find(st, name);
			if (!t[k] || t[k]->dtype != LOOM_ST_U8 || t[k]->ndim != 2 ||
			    t[k]->shape[0] != (uint64_t)L->nbr || t[k]->shape[1] != (uint64_t)L->nbc)
				return loom_err_set(&g->err, LOOM_EFORMAT,
						    "%s: tensor '%s' %s (the model needs U8 [%d, %d])",
						    loom_st_name(st), name,
						    t[k] ? "has the wrong dtype or shape" : "is missing",
						    L->nbr, L->nbc);
		}
		if (loom_rigl_set_masks(r, l, t[0]->data, t[1]->data))
			return loom_err_set(&g->err, LOOM_EFORMAT, "%s: %s", loom_st_name(st),
					    loom_rigl_error(r));
		int want = loom_rigl_live_for(r, l, g->cfg.sparsity);
		if (L->live != want)
			return loom_err_set(&g->err, LOOM_EFORMAT,
					    "%s: tensor '%s.mask' has %d of %d blocks live (density "
					    "%.4g), but sparsity %g needs %d (density %.4g)",
					    loom_st_name(st), L->name, L->live, L->nb,
					    (double)L->live / L->nb, g->cfg.sparsity, want,
					    (double)want / L->nb);
	}
	r->last_update = last;
	r->updates = updates;
	loom_gpt_rigl_sync(g);
	return 0;
}

int loom_gpt_ckpt_load_sparsity(struct loom_gpt *g, struct loom_ckpt *ck)
{
	struct loom_st *st;
	int rc;
	if ((rc = loom_ckpt_open_sidecar(ck, LOOM_GPT_SPARSITY_FILE, &st)))
		return loom_err_set(&g->err, rc, "%s", loom_ckpt_error(ck));
	if (!st)
		return 1;
	rc = g->rigl ? loom_gpt_sparsity_from_st(g, st) : 1; /* dense: the masks do not apply */
	loom_st_free(st);
	return rc;
}

/* --- the GPT-2 family for loom_ckpt ------------------------------------------ */

static int gpt_hf_check(const void *p, struct loom_err *err)
{
	const struct loom_gpt_hf *h = p;
	if (h->n_layer <= 0 || h->n_embd <= 0 || h->n_head <= 0 || h->n_positions <= 0 ||
	    h->vocab_size <= 0 || h->n_embd % h->n_head)
		return loom_err_set(err, LOOM_EINVAL,
				    "checkpoint: bad model dimensions (n_layer %lld, n_embd %lld, "
				    "n_head %lld, n_positions %lld, vocab_size %lld)",
				    (long long)h->n_layer, (long long)h->n_embd,
				    (long long)h->n_head, (long long)h->n_positions,
				    (long long)h->vocab_size);
	return 0;
}

static int gpt_hf_write(const void *p, json_t *c)
{
	const struct loom_gpt_hf *h = p;
	json_t *k = json_pack("{s:[s], s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:n, s:f, "
			      "s:f, s:f, s:f, s:f, s:b, s:s}",
			      "architectures", "GPT2LMHeadModel",
			      "model_type", "gpt2",
			      "activation_function", "gelu_new",
			      "vocab_size", (json_int_t)h->vocab_size,
			      "n_positions", (json_int_t)h->n_positions,
			      "n_ctx", (json_int_t)h->n_positions,
			      "n_embd", (json_int_t)h->n_embd,
			      "n_layer", (json_int_t)h->n_layer,
			      "n_head", (json_int_t)h->n_head,
			      "n_inner",
			      "layer_norm_epsilon", h->layer_norm_epsilon,
			      "initializer_range", 0.02,
			      "resid_pdrop", h->resid_pdrop, "embd_pdrop", h->embd_pdrop,
			      "attn_pdrop", h->attn_pdrop,
			      "tie_word_embeddings", 1,
			      "torch_dtype", "float32");
	int rc = k ? json_object_update(c, k) : -1;
	json_decref(k);
	return rc < 0 ? LOOM_ENOMEM : 0;
}

static int hf_int(json_t *cfg, const char *key, const char *path, int64_t *out,
		  struct loom_err *err)
{
	json_t *v = json_object_get(cfg, key);
	if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
	    json_integer_value(v) > (json_int_t)1 << 40)
		return loom_err_set(err, LOOM_EFORMAT,
				    "%s: '%s' missing or not a positive integer", path, key);
	*out = json_integer_value(v);
	return 0;
}

static int gpt_hf_parse(json_t *cfg, const char *path, void *p, struct loom_err *err)
{
	struct loom_gpt_hf *h = p;
	if (hf_int(cfg, "n_layer", path, &h->n_layer, err) < 0 ||
	    hf_int(cfg, "n_embd", path, &h->n_embd, err) < 0 ||
	    hf_int(cfg, "n_head", path, &h->n_head, err) < 0 ||
	    hf_int(cfg, "vocab_size", path, &h->vocab_size, err) < 0)
		return err->code;
	if (json_object_get(cfg, "n_positions")) {
		if (hf_int(cfg, "n_positions", path, &h->n_positions, err) < 0)
			return err->code;
	} else if (hf_int(cfg, "n_ctx", path, &h->n_positions, err) < 0) {
		return err->code;
	}
	if (h->n_embd % h->n_head)
		return loom_err_set(err, LOOM_EFORMAT,
				    "%s: n_embd %lld is not divisible by n_head %lld", path,
				    (long long)h->n_embd, (long long)h->n_head);
	json_t *v = json_object_get(cfg, "n_inner");
	if (v && !json_is_null(v) &&
	    (!json_is_integer(v) || json_integer_value(v) != 4 * h->n_embd))
		return loom_err_set(err, LOOM_EFORMAT,
				    "%s: n_inner must be null or 4 x n_embd (%lld)", path,
				    (long long)(4 * h->n_embd));
	v = json_object_get(cfg, "activation_function");
	if (v && (!json_is_string(v) || (strcmp(json_string_value(v), "gelu_new") &&
					 strcmp(json_string_value(v), "gelu_pytorch_tanh"))))
		return loom_err_set(err, LOOM_EFORMAT,
				    "%s: activation_function must be gelu_new (tanh GELU)", path);
	h->layer_norm_epsilon = 1e-5;
	v = json_object_get(cfg, "layer_norm_epsilon");
	if (v) {
		if (!json_is_number(v) || json_number_value(v) <= 0 || json_number_value(v) >= 1)
			return loom_err_set(err, LOOM_EFORMAT,
					    "%s: layer_norm_epsilon must be a number in (0, 1)", path);
		h->layer_norm_epsilon = json_number_value(v);
	}
	static const char *const pdrop[3] = { "resid_pdrop", "embd_pdrop", "attn_pdrop" };
	double *pv[3] = { &h->resid_pdrop, &h->embd_pdrop, &h->attn_pdrop };
	for (int i = 0; i < 3; i++) {
		*pv[i] = 0.1;
		v = json_object_get(cfg, pdrop[i]);
		if (!v)
			continue;
		if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) >= 1)
			return loom_err_set(err, LOOM_EFORMAT, "%s: %s must be a number in [0, 1)",
					    path, pdrop[i]);
		*pv[i] = json_number_value(v);
	}
	return 0;
}

static int64_t gpt_n_layers(const void *p)
{
	return ((const struct loom_gpt_hf *)p)->n_layer;
}

static size_t gpt_expect(const void *p, int64_t l, struct loom_ckpt_expect *out, size_t max,
			 char *keys, size_t nk)
{
	const struct loom_gpt_hf *h = p;
	const int64_t C = h->n_embd;
	static const struct {
		const char *fmt;
		int ndim, s0, s1;	/* multiples of C; -1: vocab_size, -2: n_positions */
	} layer[] = {
		{"ln_1.weight", 1, 1, 0}, {"ln_1.bias", 1, 1, 0},
		{"attn.c_attn.weight", 2, 1, 3}, {"attn.c_attn.bias", 1, 3, 0},
		{"attn.c_proj.weight", 2, 1, 1}, {"attn.c_proj.bias", 1, 1, 0},
		{"ln_2.weight", 1, 1, 0}, {"ln_2.bias", 1, 1, 0},
		{"mlp.c_fc.weight", 2, 1, 4}, {"mlp.c_fc.bias", 1, 4, 0},
		{"mlp.c_proj.weight", 2, 4, 1}, {"mlp.c_proj.bias", 1, 1, 0},
	}, top[] = {
		{"wte.weight", 2, -1, 1}, {"wpe.weight", 2, -2, 1},
		{"ln_f.weight", 1, 1, 0}, {"ln_f.bias", 1, 1, 0},
	};
	const size_t n = l < 0 ? sizeof top / sizeof *top : sizeof layer / sizeof *layer;
	snprintf(keys, nk, "n_embd %lld, vocab_size %lld, n_positions %lld", (long long)C,
		 (long long)h->vocab_size, (long long)h->n_positions);
	for (size_t i = 0; i < n && i < max; i++) {
		const int s[2] = { l < 0 ? top[i].s0 : layer[i].s0, l < 0 ? top[i].s1 : layer[i].s1 };
		memset(&out[i], 0, sizeof out[i]);
		if (l < 0)
			snprintf(out[i].name, sizeof out[i].name, "transformer.%s", top[i].fmt);
		else
			snprintf(out[i].name, sizeof out[i].name, "transformer.h.%d.%s", (int)l,
				 layer[i].fmt);
		out[i].ndim = l < 0 ? top[i].ndim : layer[i].ndim;
		for (int d = 0; d < out[i].ndim; d++)
			out[i].shape[d] = s[d] == -1 ? h->vocab_size : s[d] == -2 ? h->n_positions
										   : s[d] * C;
		out[i].keys = keys;
	}
	return n < max ? n : max;
}

static int gpt_ignored(const char *name)
{
	size_t n = strlen(name);
	return strcmp(name, "lm_head.weight") == 0 ||
	       (n > 10 && strcmp(name + n - 10, ".attn.bias") == 0) ||
	       (n > 17 && strcmp(name + n - 17, ".attn.masked_bias") == 0);
}

const struct loom_ckpt_arch loom_gpt_ckpt_arch = {
	.model_type = "gpt2",
	.prefix = "transformer.",
	.layers_key = "n_layer",
	.hf_size = sizeof(struct loom_gpt_hf),
	.hf_check = gpt_hf_check,
	.hf_write = gpt_hf_write,
	.hf_parse = gpt_hf_parse,
	.n_layers = gpt_n_layers,
	.expect = gpt_expect,
	.ignored = gpt_ignored,
};
