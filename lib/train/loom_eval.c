/* loom_eval.c - held-out evaluation sources and a GPT frame's loss sums
 * (loom_eval.h). */
#include "loom_eval.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loom_ckpt.h"
#include "loom_feed.h"
#include "loom_mm.h"
#include "loom_rigl.h"
#include "loom_safetensors.h"
#include "loom_gpt.h"
#include "loom_manifest.h"

/* r (NULL: out of memory) reading what the task reads. */
static int reader_for_task(struct loom_eval_src *e, struct loom_batch_reader *r,
			   struct loom_err *err)
{
	if (!(e->r = r))
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	if (e->features)
		loom_batch_reader_accept_features(r);
	return 0;
}

/* 1 if path holds a JSON object (a manifest), 0 if not, or an error. */
static int is_manifest(const char *path, struct loom_err *err)
{
	FILE *f = fopen(path, "rb");
	int c = ' ';
	if (!f)
		return loom_err_set(err, LOOM_EIO, "cannot open '%s': %s", path, strerror(errno));
	while (c == ' ' || c == '\t' || c == '\n' || c == '\r')
		c = getc(f);
	fclose(f);
	return c == '{';
}

int loom_eval_open(struct loom_eval_src *e, const char *path, uint32_t batch, uint32_t rec,
		   int features, uint64_t max_frames, struct loom_err *err)
{
	memset(e, 0, sizeof *e);
	e->path = path;
	e->fd = -1;
	e->features = features;
	e->max_frames = max_frames;
	int rc = is_manifest(path, err);
	if (rc < 0)
		return rc;
	if (!rc) {
		e->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (e->fd < 0)
			return loom_err_set(err, LOOM_EIO, "cannot open '%s': %s", path,
					    strerror(errno));
		return reader_for_task(e, loom_batch_reader_new(e->fd, path), err);
	}
	/* a squad-features manifest gives the record length itself */
	struct loom_feed_opts fo = { .manifest = path, .batch = batch ? batch : 1,
				     .seq_len = features ? 0 : rec, .epochs = 1,
				     .stream_order = 1, .threads = 1 };
	struct loom_err ferr;
	e->feed = loom_feed_new(&fo, &ferr);
	if (!e->feed)
		return loom_err_set(err, ferr.code ? ferr.code : LOOM_EFORMAT, "--eval-data %s",
				    ferr.msg);
	if (batch && loom_feed_start(e->feed, 0) < 0)
		return loom_err_set(err, LOOM_EFORMAT, "--eval-data %s", loom_feed_error(e->feed));
	return 0;
}

int loom_eval_open_mem(struct loom_eval_src *e, const void *buf, size_t len, const char *name,
		       int features, struct loom_err *err)
{
	memset(e, 0, sizeof *e);
	e->path = name;
	e->fd = -1;
	e->features = features;
	return reader_for_task(e, loom_batch_reader_new_mem(buf, len, name), err);
}

int loom_eval_next(struct loom_eval_src *e, struct loom_batch_hdr *h, const uint32_t **tok,
		   struct loom_err *err)
{
	int rc;
	if (e->max_frames && e->frames == e->max_frames)
		return 0;
	if (e->feed) {
		const void *buf;
		size_t len;
		loom_batch_reader_free(e->r);
		e->r = NULL;
		if ((rc = loom_feed_next(e->feed, &buf, &len)) < 0)
			return loom_err_set(err, rc, "--eval-data %s", loom_feed_error(e->feed));
		if (rc == 0)
			return 0;
		if ((rc = reader_for_task(e, loom_batch_reader_new_mem(buf, len, e->path), err)))
			return rc;
	}
	if ((rc = loom_batch_read(e->r, h, tok)) < 0)
		return loom_err_set(err, rc, "%s", loom_batch_reader_error(e->r));
	e->frames += rc == 1;
	return rc;
}

void loom_eval_close(struct loom_eval_src *e)
{
	loom_batch_reader_free(e->r);
	e->r = NULL;
	loom_feed_free(e->feed);
	e->feed = NULL;
	if (e->fd >= 0)
		close(e->fd);
	e->fd = -1;
}

int loom_eval_check(const char *path, int features, int *rec, struct loom_err *err)
{
	struct loom_eval_src e;
	struct loom_batch_hdr h;
	const uint32_t *tok;
	int rc = is_manifest(path, err);
	*rec = 0;
	if (rc < 0)
		return rc;
	if (rc) {
		struct loom_manifest m;
		struct loom_err merr;
		if ((rc = loom_manifest_read(path, &m, &merr)) < 0)
			return loom_err_set(err, rc, "--eval-data %s", merr.msg);
		*rec = m.has_seq_len && m.seq_len > 0 && m.seq_len <= INT32_MAX ? (int)m.seq_len : 0;
		loom_manifest_release(&m);
		if (!*rec)
			return loom_err_set(err, LOOM_EFORMAT, "--eval-data %s: no seq_len", path);
		rc = loom_eval_open(&e, path, 0, (uint32_t)*rec, features, 0, err);
		loom_eval_close(&e);
		return rc;
	}
	if ((rc = loom_eval_open(&e, path, 0, 0, features, 0, err)) == 0)
		while ((rc = loom_eval_next(&e, &h, &tok, err)) == 1)
			if (!*rec || (int)h.seq_len < *rec)
				*rec = (int)h.seq_len;
	loom_eval_close(&e);
	if (rc < 0)
		return rc;
	if (!*rec)
		return loom_err_set(err, LOOM_EFORMAT, "%s: no batch frames to evaluate", path);
	return 0;
}

int loom_eval_model_open(struct loom_eval_model *m, const char *path, int verify,
			 struct loom_err *err)
{
	memset(m, 0, sizeof *m);
	m->ck = loom_ckpt_open(path, &loom_gpt_ckpt_arch, verify ? 0 : LOOM_CKPT_NO_VERIFY, err);
	return m->ck ? 0 : err->code ? err->code : LOOM_EFORMAT;
}

int loom_eval_model_load(struct loom_eval_model *m, const char *precision, struct loom_err *err)
{
	int rc;
	if ((rc = loom_gpt_ckpt_config(m->ck, &m->cfg)) < 0)
		return loom_err_set(err, rc, "%s", loom_config_error(&m->cfg));
	if (precision && loom_config_set(&m->cfg, "precision", precision))
		return loom_err_set(err, LOOM_EINVAL, "--precision: %s", loom_config_error(&m->cfg));
	char why[256];
	if (m->cfg.precision == LOOM_PREC_BF16 && loom_mm_bf16_missing(why, sizeof why))
		return loom_err_set(err, LOOM_EFORMAT, "precision=bf16: %s", why);
	struct loom_st *side = NULL;
	m->sparsity = m->cfg.sparsity;
	if (m->cfg.sparsity > 0 &&
	    (rc = loom_ckpt_open_sidecar(m->ck, LOOM_GPT_SPARSITY_FILE, &side)) < 0)
		return loom_err_set(err, rc, "%s", loom_ckpt_error(m->ck));
	if (!side)
		m->cfg.sparsity = 0;
	loom_st_free(side);
	if (!(m->g = loom_gpt_new(&m->cfg)))
		return loom_err_set(err, LOOM_ENOMEM, "out of memory for %llu parameters",
				    (unsigned long long)loom_config_n_params(&m->cfg));
	struct loom_ckpt_tensor *tp = calloc((size_t)m->g->n_tensors, sizeof *tp);
	if (!tp)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	loom_gpt_ckpt_tensors(m->g, m->g->params, tp);
	rc = loom_ckpt_load_model(m->ck, tp, (size_t)m->g->n_tensors);
	free(tp);
	if (rc < 0)
		return loom_err_set(err, rc, "%s", loom_ckpt_error(m->ck));
	if (m->g->rigl) {
		if ((rc = loom_gpt_ckpt_load_sparsity(m->g, m->ck)) != 0)
			return loom_err_set(err, rc < 0 ? rc : LOOM_EFORMAT, "%s", loom_gpt_error(m->g));
		m->has_masks = 1;
	}
	return 0;
}

void loom_eval_model_close(struct loom_eval_model *m)
{
	loom_gpt_free(m->g);
	loom_ckpt_free(m->ck);
	m->g = NULL;
	m->ck = NULL;
}

struct json_t *loom_eval_sparsity_json(const struct loom_eval_model *m)
{
	static const char *const proj[4] = { "attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj" };
	if (!(m->sparsity > 0))
		return NULL;
	const struct loom_gpt *g = m->g;
	int bs = m->cfg.block_size;
	json_t *layers = json_object();
	int64_t dead_all = 0, all = 0;
	for (int i = 0; i < g->n_tensors; i++) {
		const struct loom_tensor *t = &g->tensors[i];
		int l, sel = 0;
		char want[96];
		if (sscanf(t->name, "transformer.h.%d.", &l) != 1)
			continue;
		for (int j = 0; j < 4; j++) {
			snprintf(want, sizeof want, "transformer.h.%d.%s.weight", l, proj[j]);
			sel |= (m->cfg.sparse_layers & (1 << j)) && !strcmp(t->name, want);
		}
		if (!sel)
			continue;
		int IC = (int)t->shape[0], OC = (int)t->shape[1], nbc = OC / bs;
		int64_t nb = (int64_t)(IC / bs) * nbc, dead = 0;
		const struct loom_rigl_layer *L = NULL;
		for (int k = 0; g->rigl && k < g->rigl->n; k++)
			if (!strcmp(g->rigl->layer[k].name, t->name))
				L = &g->rigl->layer[k];
		for (int64_t b = 0; b < nb; b++) {
			int zero = 1;
			if (L) {
				zero = !L->mask[b];
			} else {
				const float *w = g->params + t->offset + (size_t)(b / nbc) * bs * OC +
						 (size_t)(b % nbc) * bs;
				for (int a = 0; a < bs && zero; a++)
					for (int c = 0; c < bs && zero; c++)
						zero = w[(size_t)a * OC + c] == 0;
			}
			dead += zero;
		}
		dead_all += dead;
		all += nb;
		json_object_set_new(layers, t->name, json_real((double)dead / (double)nb));
	}
	return json_pack("{s:f, s:s, s:i, s:o}", "overall", all ? (double)dead_all / (double)all : 0.0,
			 "from", m->has_masks ? "masks" : "zero blocks", "block_size", bs,
			 "layers", layers);
}

