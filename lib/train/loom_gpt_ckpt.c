/* loom_gpt_ckpt.c - the GPT's tensor table and config for lib/train/loom_ckpt.h. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "loom_ckpt.h"
#include "loom_gpt.h"

void loom_gpt_ckpt_tensors(const struct loom_gpt *g, float *base, struct loom_ckpt_tensor *out)
{
	for (int i = 0; i < g->n_tensors; i++) {
		const struct loom_gpt_tensor *t = &g->tensors[i];
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
