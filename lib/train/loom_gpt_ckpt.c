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
	for (int i = 0; i < g->n_tensors; i++) {
		const struct loom_tensor *t = &g->tensors[i];
		memset(&out[i], 0, sizeof out[i]);
		out[i].name = t->name;
		out[i].ndim = t->ndim;
		out[i].shape[0] = t->shape[0];
		out[i].shape[1] = t->shape[1];
		out[i].data = base + t->offset;
	}
}

void loom_gpt_ckpt_hf(const struct loom_config *cfg, struct loom_ckpt_hf *hf)
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
	const struct loom_ckpt_hf *hf = loom_ckpt_hf(ck);
	int rc;

	loom_config_defaults(cfg);
	if (txt) {
		json_error_t je;
		json_t *o = json_loads(txt, 0, &je);
		if (!o)
			return loom_err_set(&cfg->err, LOOM_EFORMAT, "%s/config.json: loom: %s",
					    loom_ckpt_dir(ck), je.text);
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
