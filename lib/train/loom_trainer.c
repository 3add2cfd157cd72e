/* loom_trainer.c - the training engine behind loom-train (loom_trainer.h):
 * configuration and its provenance, the build/--resume/--init-from
 * ladder, the model interface of the GPT and the BERT, checkpoints,
 * held-out evaluation (--eval-squad's scores too) and promotion by a
 * metric (--keep-best).  Nothing prints. */
/* before anything that includes cblas.h: its complex.h defines I, a field
 * of struct loom_bert */
#include "loom_bert.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loom_bert_squad.h"
#include "loom_blas.h"
#include "loom_buf.h"
#include "loom_file.h"
#include "loom_generate.h"
#include "loom_dist.h"
#include "loom_rigl.h"
#include "loom_squad.h"
#include "loom_tb.h"
#include "loom_tp.h"
#include "loom_trainer.h"
#include "loom_vocab.h"
#include "loom_wordpiece.h"

/* A line for people (hooks.say). */
#define say(t, ...) loom_note((t)->hk.say, (t)->hk.ctx, __VA_ARGS__)

/* A usage error: the configuration the caller gave cannot work. */
static int usage(struct loom_trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage(struct loom_trainer *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	t->err.code = LOOM_EINVAL;
	vsnprintf(t->err.msg, sizeof t->err.msg, fmt, ap);
	va_end(ap);
	t->usage = 1;
	return LOOM_EINVAL;
}

static int shards_weights(const struct loom_trainer *t)
{
	return t->hk.shards_weights && t->hk.shards_weights(t->hk.ctx);
}

static int nomem(struct loom_trainer *t)
{
	return loom_err_set(&t->err, LOOM_ENOMEM, "out of memory");
}

/* t->err = e, returning its code (or c when it has none) */
static int take_err(struct loom_trainer *t, const struct loom_err *e, int c)
{
	t->err = *e;
	if (!t->err.code)
		t->err.code = c;
	return t->err.code;
}

void loom_trainer_init(struct loom_trainer *t, const struct loom_trainer_opts *o,
		       const struct loom_trainer_hooks *hk)
{
	memset(t, 0, sizeof *t);
	t->o = *o;
	if (hk)
		t->hk = *hk;
}

void loom_trainer_release(struct loom_trainer *t)
{
	loom_gpt_free(t->g);
	loom_bert_free(t->b);
	loom_ckpt_free(t->ck);
	loom_model_scratch_release(&t->scratch);
	loom_model_scratch_release(&t->escratch);
	free((char *)t->vocab.name);
	free((char *)t->vocab.files[0].data);
	free((char *)t->vocab.files[1].data);
	loom_vocab_free(t->tok);
	loom_wordpiece_free(t->wp);
	loom_bert_squad_eval_free(t->squad_ev);
	free(t->held);
	memset(t, 0, sizeof *t);
}

/* ---- tensor_parallel: a rank's slices of the whole model ----------------- */

/* The model's team (lib/train/loom_tp.h): 1 when it is split. */
static int split_team(const struct loom_trainer *t, struct loom_tp *tp)
{
	if (t->g)
		loom_gpt_tp(t->g, tp);
	else
		loom_bert_tp(t->b, tp);
	return tp->tp > 1;
}

/* Model m of t's kind: its params, m and v into x; returns n_params. */
static size_t model_arrays(const struct loom_trainer *t, void *m, float *x[3])
{
	struct loom_dist_model dm;
	if (t->g)
		loom_gpt_dist_model(m, &dm);
	else
		loom_bert_dist_model(m, &dm);
	x[0] = dm.params;
	x[1] = *dm.m;
	x[2] = *dm.v;
	return dm.n_params;
}

/* ---- checkpoints -------------------------------------------------------- */

/* A model's checkpoint tables: tensors named over its parameters, and
 * each tensor's AdamW moments (tensors[i] of params, m and v; free all
 * three). */
struct ckpt_tables {
	struct loom_ckpt_tensor *tp;
	float **mm, **vv;
	size_t n;
};

static void ckpt_tables_free(struct ckpt_tables *x)
{
	free(x->tp);
	free(x->mm);
	free(x->vv);
}

static int ckpt_tables(struct loom_trainer *t, struct ckpt_tables *x)
{
	const struct loom_tensor *tensors = t->g ? t->g->tensors : t->b->tensors;
	int n = t->g ? t->g->n_tensors : t->b->n_tensors;
	float *m = t->g ? t->g->m : t->b->m, *v = t->g ? t->g->v : t->b->v;
	x->n = (size_t)n;
	x->tp = calloc((size_t)n, sizeof *x->tp);
	x->mm = calloc((size_t)n, sizeof *x->mm);
	x->vv = calloc((size_t)n, sizeof *x->vv);
	if (!x->tp || !x->mm || !x->vv) {
		ckpt_tables_free(x);
		return nomem(t);
	}
	for (int i = 0; m && v && i < n; i++) { /* none: the ranks hold them (sharding=weights) */
		x->mm[i] = m + tensors[i].offset;
		x->vv[i] = v + tensors[i].offset;
	}
	struct loom_tp tp;
	if (split_team(t, &tp)) { /* the whole tensors: each rank reads, writes its runs */
		loom_model_ckpt_tensors(tensors, n, t->g ? t->g->params : t->b->params, x->tp);
		loom_tp_ckpt_whole(&tp, x->tp);
	} else if (t->g)
		loom_gpt_ckpt_tensors(t->g, t->g->params, x->tp);
	else
		loom_bert_ckpt_tensors(t->b, t->b->params, x->tp);
	return 0;
}

/* Where training stands, as a checkpoint's state.json says it. */
static struct loom_ckpt_state state_now(const struct loom_trainer *t)
{
	return (struct loom_ckpt_state){
		.step = t->step, .samples = t->samples, .tokens = t->tokens,
		.rng = { t->cfg.seed, 0, 0, 0 },
		.data_seq = t->data_seq, .data_epoch = t->data_epoch,
		.data_seed = t->data_seed, .data_batch = t->data_batch,
		.data_seq_len = t->data_seq_len, .data_world = t->data_world,
		.best = t->best,
	};
}

/* What every checkpoint holds besides the model's own: the tensors and
 * moments of x, the resolved config (*ctxt, to free), where training
 * stands, the tokenizer; saved as a step (as NULL) or as "best". */
static int ckpt_save_of(struct loom_trainer *t, const struct ckpt_tables *x, char **ctxt,
			struct loom_ckpt_save *s, const char *as)
{
	json_t *cj = loom_config_to_json(&t->cfg);
	*ctxt = cj ? json_dumps(cj, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
	json_decref(cj);
	if (!*ctxt)
		return nomem(t);
	*s = (struct loom_ckpt_save){
		.dir = t->o.save_dir,
		.tensors = x->tp,
		.n_tensors = x->n,
		.adam_m = x->mm,
		.adam_v = x->vv,
		.loom_config_json = *ctxt,
		.state = state_now(t),
		.keep = t->o.keep,
		.as = as,
		.vocab = t->vocab.files[0].name ? &t->vocab : NULL,
	};
	return 0;
}

/* tensor parallelism: this rank's runs of its model's first nt whole
 * tensors (for a save: the tensors the team holds whole on its rank 0
 * only), in *n; NULL: out of memory (free) */
static struct loom_ckpt_run *tp_runs(const struct loom_trainer *t, int save, int nt, size_t *n)
{
	struct loom_tp tp;
	float *x[3];
	split_team(t, &tp);
	tp.nt = nt;
	model_arrays(t, t->model, x);
	*n = loom_tp_ckpt_runs(&tp, x[0], x[1], x[2], save, NULL);
	struct loom_ckpt_run *r = malloc(sizeof *r * (*n ? *n : 1));
	if (r)
		loom_tp_ckpt_runs(&tp, x[0], x[1], x[2], save, r);
	return r;
}

/* tensor parallelism: replica 0's ranks write their runs of s into path
 * (a collective: a rank without memory for its list writes none, and the
 * commit finds the gap) */
static int tp_write(struct loom_trainer *t, const struct loom_ckpt_save *s, char *path)
{
	size_t n;
	struct loom_ckpt_run *r = tp_runs(t, 1, (int)s->n_tensors, &n);
	int have = r != NULL;
	t->hk.save_runs(t->hk.ctx, s, r, have ? n : 0, path, sizeof t->saved_path);
	free(r);
	return have ? 0 : nomem(t);
}

/* Write s; its directory in t->saved_path (saved as best: t->best_path). */
static int ckpt_write(struct loom_trainer *t, const struct loom_ckpt_save *s)
{
	struct loom_err err = { 0 };
	char *path = s->as ? t->best_path : t->saved_path;
	int rc;
	struct loom_tp tp;
	if (split_team(t, &tp)) {
		if ((rc = tp_write(t, s, path)))
			return rc;
	} else if (shards_weights(t)) /* every rank writes its part */
		t->hk.save_part(t->hk.ctx, s, path, sizeof t->saved_path);
	else if (loom_ckpt_write(s, path, sizeof t->saved_path, &err))
		return take_err(t, &err, LOOM_EIO);
	if (!s->as)
		t->saved = t->step + 1;
	return 0;
}

/* A GPT's checkpoint: HuggingFace GPT-2's config, RigL's masks. */
static int gpt_ckpt(struct loom_trainer *t, struct loom_ckpt_save *s, struct loom_gpt_hf *hf,
		    struct loom_gpt_sidecar *sc)
{
	loom_gpt_ckpt_hf(&t->cfg, hf);
	s->arch = &loom_gpt_ckpt_arch;
	s->hf = hf;
	if (loom_gpt_ckpt_sparsity(t->g, sc))
		return nomem(t);
	if (sc->n) {
		s->sidecar_name = LOOM_GPT_SPARSITY_FILE;
		s->sidecar = sc->t;
		s->n_sidecar = sc->n;
		s->sidecar_meta = sc->meta;
	}
	return 0;
}

static int bert_ckpt(struct loom_trainer *t, struct loom_ckpt_save *s, struct loom_gpt_hf *hf,
		     struct loom_gpt_sidecar *sc)
{
	(void)hf;
	(void)sc;
	s->arch = &loom_bert_ckpt_arch;
	s->hf = &t->b->cfg;
	return 0;
}

/* The step's checkpoint when this very step was just saved as "best":
 * the same files, linked by rank 0 (the one that holds best_path under
 * every kind of parallelism); every rank counts it saved. */
static int save_step_as_best(struct loom_trainer *t)
{
	struct loom_err err = { 0 };
	struct loom_ckpt_save s = { .dir = t->o.save_dir, .keep = t->o.keep, .state = state_now(t) };
	if (t->hk.rank == 0 &&
	    loom_ckpt_write_copy(t->best_path, &s, t->saved_path, sizeof t->saved_path, &err))
		return take_err(t, &err, LOOM_EIO);
	t->saved = t->step + 1;
	return 0;
}

/* A checkpoint, as a step (as NULL) or as "best". */
static int save_as(struct loom_trainer *t, const char *as)
{
	if (!as && t->best_saved == t->step + 1)
		return save_step_as_best(t);
	int all = shards_weights(t); /* every rank writes its part */
	if (!all && t->hk.save_begin && !t->hk.save_begin(t->hk.ctx))
		return 0; /* ranks > 0: sent their moment shards to rank 0 */
	struct ckpt_tables x;
	struct loom_ckpt_save s;
	struct loom_gpt_hf hf;
	struct loom_gpt_sidecar sc = { 0 };
	char *ctxt = NULL;
	int rc = ckpt_tables(t, &x);
	if (rc)
		goto out;
	if (!(rc = ckpt_save_of(t, &x, &ctxt, &s, as)) &&
	    !(rc = (t->g ? gpt_ckpt : bert_ckpt)(t, &s, &hf, &sc)))
		rc = ckpt_write(t, &s);
	loom_gpt_sidecar_release(&sc);
	free(ctxt);
	ckpt_tables_free(&x);
out:
	if (!all && t->hk.save_end)
		t->hk.save_end(t->hk.ctx);
	return rc;
}

int loom_trainer_save(struct loom_trainer *t)
{
	return save_as(t, NULL);
}

/* The model family of the checkpoint at path: config.json's model_type
 * "bert" is a BERT's, anything else (or no config.json: loom_ckpt_open
 * says what is wrong) the GPT's. */
static const struct loom_ckpt_arch *ckpt_arch(const char *path)
{
	char dir[4096], cfg[4200];
	struct loom_err err = { 0 };
	char *buf = NULL;
	size_t len;
	const struct loom_ckpt_arch *a = &loom_gpt_ckpt_arch;
	if (loom_ckpt_resolve(path, dir, sizeof dir, &err))
		return a;
	snprintf(cfg, sizeof cfg, "%s/config.json", dir);
	if (loom_file_read_bounded(cfg, LOOM_FILE_MAX_CONFIG, &buf, &len, &err))
		return a;
	json_t *j = json_loadb(buf, len, 0, NULL);
	const char *mt = json_string_value(json_object_get(j, "model_type"));
	if (mt && !strcmp(mt, loom_bert_ckpt_arch.model_type))
		a = &loom_bert_ckpt_arch;
	json_decref(j);
	free(buf);
	return a;
}

/* Open a checkpoint and check it (and its checksums). */
static int open_ckpt(struct loom_trainer *t, const char *path, int resume, struct loom_ckpt **out)
{
	struct loom_err err = { 0 };
	/* under mpirun rank 0 reads every file through for its checksum and
	 * stops the job on a mismatch; the others read only what they load */
	unsigned flags = t->hk.rank ? LOOM_CKPT_NO_VERIFY : 0;
	struct loom_ckpt *ck = loom_ckpt_open(path, ckpt_arch(path), flags, &err);
	if (!ck)
		return take_err(t, &err, LOOM_EFORMAT);
	if (resume && !loom_ckpt_has_state(ck)) {
		loom_err_set(&t->err, LOOM_EFORMAT, "%s: state.json is missing: nothing to resume "
			     "(--init-from takes the weights only)", loom_ckpt_dir(ck));
		loom_ckpt_free(ck);
		return LOOM_EFORMAT;
	}
	if (loom_ckpt_has_state(ck) && !loom_ckpt_has_checksums(ck) && !flags)
		say(t, "%s: state.json records no checksums (written by an older loom): not verified",
		    loom_ckpt_dir(ck));
	*out = ck;
	return 0;
}

/* --resume: the AdamW moments of x's tensors */
static int load_optimizer(struct loom_trainer *t, struct loom_ckpt *ck, const struct ckpt_tables *x)
{
	if (!loom_ckpt_has_optimizer(ck))
		return loom_err_set(&t->err, LOOM_EFORMAT, "%s: no optimizer state to resume from "
				    "(use --init-from for weights only)", loom_ckpt_dir(ck));
	if (x && loom_ckpt_load_optimizer(ck, x->tp, x->n, x->mm, x->vv))
		return loom_err_set(&t->err, LOOM_EFORMAT, "%s", loom_ckpt_error(ck));
	return 0;
}

/* tensor parallelism: this rank's runs of the whole tensors x (weights,
 * and with_optimizer the moments), read alone */
static int tp_load(struct loom_trainer *t, struct loom_ckpt *ck, const struct ckpt_tables *x,
		   int with_optimizer)
{
	size_t n;
	struct loom_ckpt_run *r = tp_runs(t, 0, (int)x->n, &n);
	int rc = 0;
	if (!r)
		return nomem(t);
	if (shards_weights(t)) /* attached: the runs' parts in this rank's chunks */
		t->hk.load_runs(t->hk.ctx, ck, x->tp, x->n, r, n, with_optimizer);
	else if ((rc = loom_ckpt_load_runs(ck, x->tp, x->n, r, n, with_optimizer)))
		loom_err_set(&t->err, rc, "%s", loom_ckpt_error(ck));
	free(r);
	return rc;
}

/* The model's first n tensors (and with_optimizer their moments) from
 * ck, any model: a rank of tensor parallelism reads its runs, of
 * sharding=weights its chunks, only them. */
static int load_weights(struct loom_trainer *t, struct loom_ckpt *ck, int n, int with_optimizer)
{
	struct ckpt_tables x;
	struct loom_tp tp;
	int rc = ckpt_tables(t, &x);
	if (rc)
		return rc;
	x.n = (size_t)n;
	if (with_optimizer && (rc = load_optimizer(t, ck, NULL)))
		goto out;
	if (split_team(t, &tp)) { /* only this rank's runs */
		rc = tp_load(t, ck, &x, with_optimizer);
	} else if (shards_weights(t)) { /* attached: only this rank's chunks */
		t->hk.load_part(t->hk.ctx, ck, x.tp, x.n, with_optimizer);
	} else if (loom_ckpt_load_model(ck, x.tp, x.n)) {
		rc = loom_err_set(&t->err, LOOM_EFORMAT, "%s", loom_ckpt_error(ck));
	} else if (with_optimizer) {
		rc = load_optimizer(t, ck, &x);
	}
out:
	ckpt_tables_free(&x);
	return rc;
}

static int gpt_load(struct loom_trainer *t, struct loom_ckpt *ck, int with_optimizer)
{
	struct loom_gpt *g = t->g;
	int rc = load_weights(t, ck, g->n_tensors, with_optimizer);
	if (rc)
		return rc;
	/* RigL: the checkpoint's masks; --init-from a checkpoint without
	 * them keeps the masks drawn from the seed (its weights masked) */
	rc = loom_gpt_ckpt_load_sparsity(g, ck);
	if (rc < 0) {
		rc = loom_err_set(&t->err, rc, "%s", loom_gpt_error(g));
	} else if (rc == 1 && g->rigl && with_optimizer) {
		rc = loom_err_set(&t->err, LOOM_EFORMAT, "%s: sparsity is %g, but the checkpoint "
				  "has no %s to resume from (--init-from starts new masks)",
				  loom_ckpt_dir(ck), g->cfg.sparsity, LOOM_GPT_SPARSITY_FILE);
	} else {
		if (rc == 1)
			loom_gpt_rigl_sync(g);
		rc = 0;
	}
	return rc;
}

/* The BERT's weights (and with_optimizer its moments) from ck; a
 * checkpoint without the task's head (a pretrained BertForMaskedLM or
 * BertModel) for --init-from: the head new from the seed, said in a line. */
static int bert_load(struct loom_trainer *t, struct loom_ckpt *ck, int with_optimizer)
{
	/* a new head: this rank's slices of it drawn from the seed */
	int n = loom_bert_ckpt_head(t->b, ck, with_optimizer ? 0 : LOOM_BERT_CKPT_NEW_HEAD,
				    t->cfg.seed);
	if (n < 0)
		return loom_err_set(&t->err, n, "%s", loom_bert_error(t->b));
	int rc = load_weights(t, ck, n, with_optimizer);
	loom_ckpt_skip(ck, NULL);
	if (rc)
		return rc;
	loom_bert_weights_changed(t->b);
	rc = n < t->b->n_tensors;
	const char *head = t->cfg.task == LOOM_TASK_MLM ? "masked-LM (cls.predictions)"
							: "question-answering (qa_outputs)";
	const struct loom_config *c = &t->cfg;
	if (!with_optimizer && !t->o.quiet) { /* --init-from: what came from where, one line */
		char enc[160];
		snprintf(enc, sizeof enc, "the encoder (%d layers, %d wide, %d heads, vocab %d, %d "
			 "positions)", c->n_layer, c->n_embd, c->n_head, c->vocab_size, c->n_positions);
		if (rc == 1)
			say(t, "--init-from: %s loaded; %s has no %s head: initialised from the seed",
			    enc, loom_ckpt_dir(ck), head);
		else
			say(t, "--init-from: %s and its %s head loaded from %s", enc, head,
			    loom_ckpt_dir(ck));
	}
	return 0;
}

/* ---- the configuration -------------------------------------------------- */

static int *origin_field(struct loom_config *c, int i)
{
	return i == LOOM_O_MB ? &c->micro_batch : i == LOOM_O_SL ? &c->seq_len : &c->vocab_size;
}

/* Before applying a layer the user wrote: remember the values, clear them. */
static void origins_hold(struct loom_config *c, struct loom_origins *o)
{
	for (int i = 0; i < LOOM_N_ORIGIN; i++) {
		o->saved[i] = *origin_field(c, i);
		*origin_field(c, i) = 0;
	}
}

/* After it: a key it set comes from `src`, the others get their values back. */
static void origins_settle(struct loom_config *c, struct loom_origins *o, const char *src)
{
	for (int i = 0; i < LOOM_N_ORIGIN; i++) {
		if (*origin_field(c, i))
			snprintf(o->src[i], sizeof o->src[i], "%s", src);
		else
			*origin_field(c, i) = o->saved[i];
	}
}

static const char *origin_name(const struct loom_origins *o, int i)
{
	return o->src[i][0] ? o->src[i] : o->preset;
}

/* Defaults, then --config (preset or file); `o` says where the three keys
 * came from. */
static int build_config(struct loom_trainer *t, struct loom_config *c, struct loom_origins *o,
			const char *config)
{
	memset(o, 0, sizeof *o);
	loom_config_defaults(c);
	if (loom_config_names_file(config)) {
		snprintf(o->preset, sizeof o->preset, "the defaults");
		origins_hold(c, o);
		if (loom_config_apply_file(c, config))
			return usage(t, "%s", loom_config_error(c));
		char src[96];
		snprintf(src, sizeof src, "--config %s", config);
		origins_settle(c, o, src);
	} else {
		if (loom_config_apply_preset(c, config))
			return usage(t, "%s", loom_config_error(c));
		snprintf(o->preset, sizeof o->preset, "preset '%s'", config);
	}
	return 0;
}

static int apply_sets(struct loom_trainer *t, struct loom_config *c, struct loom_origins *o)
{
	origins_hold(c, o);
	for (int i = 0; i < t->o.nsets; i++)
		if (loom_config_apply_sets(c, t->o.sets[i]))
			return usage(t, "%s", loom_config_error(c));
	origins_settle(c, o, "--set");
	return 0;
}

/* --resume with --config: the configuration --config (with the same --set
 * and flags) gives must be the checkpoint's, key by key (but the preset's
 * name); micro_batch and seq_len only when the user set them (a preset's
 * are the data's). */
static int check_same_config(struct loom_trainer *t, const struct loom_config *ckc,
			     struct loom_config *named, const struct loom_origins *no,
			     const char *config, const char *dir)
{
	if (loom_config_validate(named))
		return usage(t, "%s", loom_config_error(named));
	json_t *a = loom_config_to_json(ckc), *b = loom_config_to_json(named);
	const char *key;
	json_t *va;
	int rc = 0;
	if (!a || !b)
		rc = nomem(t);
	json_object_foreach(a, key, va) {
		json_t *vb = json_object_get(b, key);
		if (rc || !strcmp(key, "preset") ||
		    (!no->src[LOOM_O_MB][0] && (!strcmp(key, "micro_batch") || !strcmp(key, "global_batch"))) ||
		    (!no->src[LOOM_O_SL][0] && !strcmp(key, "seq_len")) || json_equal(va, vb))
			continue;
		char *x = json_dumps(vb, JSON_ENCODE_ANY | JSON_REAL_PRECISION(12));
		char *y = json_dumps(va, JSON_ENCODE_ANY | JSON_REAL_PRECISION(12));
		rc = usage(t, "--resume: --config %s disagrees with the checkpoint %s on "
			   "%s: %s, the checkpoint has %s (drop --config to resume with the "
			   "checkpoint's configuration)", config, dir, key, x ? x : "?", y ? y : "?");
		free(x);
		free(y);
	}
	json_decref(a);
	json_decref(b);
	return rc;
}

/* --resume --set: the RigL masks in the checkpoint's sparsity.safetensors
 * hold its sparsity, block size and sparse layers; another value would
 * train other masks than the ones resumed (--init-from starts new ones). */
static int check_resume_sparsity(struct loom_trainer *t, const struct loom_config *ck,
				 const struct loom_config *c, const char *dir)
{
	char a[64], b[64];
	if (c->sparsity != ck->sparsity)
		return usage(t, "--resume: --set sparsity=%g, but the checkpoint %s has sparsity %g "
			     "(its masks hold that density; --init-from %s starts new masks)",
			     c->sparsity, dir, ck->sparsity, dir);
	if (ck->sparsity > 0 && c->block_size != ck->block_size)
		return usage(t, "--resume: --set block_size=%d, but the checkpoint %s has "
			     "block_size %d (its masks' blocks)", c->block_size, dir, ck->block_size);
	if (ck->sparsity > 0 && c->sparse_layers != ck->sparse_layers)
		return usage(t, "--resume: --set sparse_layers=%s, but the checkpoint %s has "
			     "sparse_layers %s (its masks' layers)",
			     loom_sparse_layers_str(c->sparse_layers, a, sizeof a), dir,
			     loom_sparse_layers_str(ck->sparse_layers, b, sizeof b));
	return 0;
}

/* A loom BERT checkpoint's configuration: loom's, under config.json's
 * "loom" (a HuggingFace directory has none: --init-from takes it). */
static int bert_ckpt_config(const struct loom_ckpt *ck, struct loom_config *c)
{
	int rc = loom_bert_ckpt_loom_config(ck, c);
	if (rc == 0)
		return loom_err_set(&c->err, LOOM_EFORMAT, "%s/config.json: no loom configuration "
				    "to resume (a HuggingFace directory: --init-from it)",
				    loom_ckpt_dir(ck));
	return rc < 0 ? rc : 0;
}

int loom_trainer_configure(struct loom_trainer *t)
{
	const struct loom_trainer_opts *o = &t->o;
	struct loom_config *c = &t->cfg;
	int rc;
	if (o->resume) {
		if ((rc = open_ckpt(t, o->resume, 1, &t->ck)))
			return rc;
		if (ckpt_arch(o->resume) == &loom_bert_ckpt_arch ? bert_ckpt_config(t->ck, c)
								 : loom_gpt_ckpt_config(t->ck, c))
			return loom_err_set(&t->err, LOOM_EFORMAT, "%s", loom_config_error(c));
		c->tensor_parallel = 1; /* the run's grid (--set), not the checkpoint's */
		c->sequence_parallel = 0;
		memset(&t->orig, 0, sizeof t->orig);
		for (int i = 0; i < LOOM_N_ORIGIN; i++)
			snprintf(t->orig.src[i], sizeof t->orig.src[i], "the checkpoint");
		if (o->config && ((rc = build_config(t, &t->named, &t->named_orig, o->config)) ||
				  (rc = apply_sets(t, &t->named, &t->named_orig))))
			return rc;
	} else if ((rc = build_config(t, c, &t->orig, o->config ? o->config : "tiny"))) {
		return rc;
	}
	struct loom_config ckc = *c; /* --resume: the checkpoint's */
	if ((rc = apply_sets(t, c, &t->orig)))
		return rc;
	if (o->init_from && c->model == LOOM_MODEL_BERT &&
	    ckpt_arch(o->init_from) == &loom_bert_ckpt_arch) {
		/* the shape is the directory's (read again to load) */
		struct loom_err err = { 0 };
		struct loom_ckpt *ick = loom_ckpt_open(o->init_from, &loom_bert_ckpt_arch,
						       LOOM_CKPT_NO_VERIFY, &err);
		if (!ick)
			return take_err(t, &err, LOOM_EFORMAT);
		rc = loom_bert_ckpt_shape(ick, c, &err);
		loom_ckpt_free(ick);
		if (rc)
			return usage(t, "%s", err.msg);
		snprintf(t->orig.src[LOOM_O_VS], sizeof t->orig.src[LOOM_O_VS], "--init-from %.80s",
			 o->init_from);
	}
	if (o->resume && (rc = check_resume_sparsity(t, &ckc, c, loom_ckpt_dir(t->ck))))
		return rc;
	for (struct loom_config *x = c; x; x = x == c && o->resume && o->config ? &t->named : NULL) {
		if (o->have_steps)
			x->steps = (int64_t)o->steps;
		if (o->have_seed)
			x->seed = o->seed;
		if (o->recompute)
			x->recompute = 1;
	}
	return 0;
}

/* ---- promotion by a metric (--keep-best) -------------------------------- */

/* The metrics by their TensorBoard tags; `need`: 1 the run must score
 * --eval-squad, -1 it must not be task=squad (no perplexity there). */
static const struct metric {
	int tag, higher, need;
} metrics[] = {
	{ LOOM_TB_EVAL_LOSS, 0, 0 }, { LOOM_TB_EVAL_PPL, 0, -1 }, { LOOM_TB_EVAL_ACC, 1, 0 },
	{ LOOM_TB_EVAL_EM, 1, 1 }, { LOOM_TB_EVAL_F1, 1, 1 },
};

static const struct metric *find_metric(const char *name)
{
	for (size_t i = 0; name && i < sizeof metrics / sizeof *metrics; i++)
		if (!strcmp(name, loom_tb_tags[metrics[i].tag].tag))
			return &metrics[i];
	return NULL;
}

int loom_trainer_metric(const char *name, int *higher)
{
	const struct metric *m = find_metric(name);
	if (!m)
		return LOOM_EINVAL;
	*higher = m->higher;
	return 0;
}

/* --keep-best: a metric this run reports. */
static int check_keep_best(struct loom_trainer *t)
{
	const char *name = t->o.keep_best;
	const struct metric *m = find_metric(name);
	if (!name)
		return 0;
	if (!m)
		return usage(t, "--keep-best %s: not a metric (one of: %s)", name, LOOM_TRAINER_METRICS);
	if (m->need < 0 && t->read_features)
		return usage(t, "--keep-best %s: task=squad reports no perplexity (eval/loss, or "
			     "eval/f1 with --eval-squad)", name);
	if (m->need > 0 && !t->o.eval_squad)
		return usage(t, "--keep-best %s: the run reports it only with --eval-squad DEV.json",
			     name);
	return 0;
}

static int better(const struct loom_trainer *t, double v, const struct loom_ckpt_best *than)
{
	int higher;
	if (!isfinite(v) || loom_trainer_metric(t->o.keep_best, &higher))
		return 0;
	if (strcmp(than->metric, t->o.keep_best)) /* none yet (or of another metric) */
		return 1;
	return higher ? v > than->value : v < than->value;
}

void loom_trainer_offer(struct loom_trainer *t, const char *tag, double v)
{
	if (t->o.keep_best && !strcmp(tag, t->o.keep_best)) {
		t->offer = v;
		t->offered = 1;
	}
}

int loom_trainer_improves(const struct loom_trainer *t)
{
	return t->offered && better(t, t->offer, &t->best);
}

int loom_trainer_save_best(struct loom_trainer *t, struct loom_ckpt_best *was)
{
	*was = t->best;
	if (t->offered) { /* ranks that did not evaluate write no state */
		snprintf(t->best.metric, sizeof t->best.metric, "%s", t->o.keep_best);
		t->best.value = t->offer;
		t->best.step = t->step;
	}
	t->offered = 0;
	int rc = save_as(t, "best");
	if (rc == 0)
		t->best_saved = t->step + 1;
	return rc;
}

/* --resume with --keep-best: the best so far is the checkpoint's record,
 * or SAVE/best's when it is better (a run that died after promoting one
 * past its last checkpoint); of another metric, none. */
static int resume_best(struct loom_trainer *t)
{
	char path[4200];
	struct stat sb;
	struct loom_ckpt_state st;
	struct loom_err err = { 0 };
	if (!t->o.keep_best)
		return 0;
	if (strcmp(t->best.metric, t->o.keep_best))
		memset(&t->best, 0, sizeof t->best);
	snprintf(path, sizeof path, "%s/best", t->o.save_dir ? t->o.save_dir : ".");
	if (t->o.save_dir && stat(path, &sb) == 0) { /* (a dangling link: none) */
		if (loom_ckpt_read_state(path, &st, &err))
			return take_err(t, &err, LOOM_EFORMAT);
		if (!strcmp(st.best.metric, t->o.keep_best) && better(t, st.best.value, &t->best))
			t->best = st.best;
	}
	if (t->best.metric[0] && t->o.verbose)
		say(t, "--keep-best: the best so far is %s %.6g at step %llu", t->best.metric,
		    t->best.value, (unsigned long long)t->best.step);
	return 0;
}

int loom_trainer_settle(struct loom_trainer *t)
{
	struct loom_config *c = &t->cfg;
	int rc;
	if (loom_config_validate(c))
		return usage(t, "%s", loom_config_error(c));
	if (t->o.resume && t->o.config) {
		t->named.data_parallel = c->data_parallel;
		t->named.tensor_parallel = c->tensor_parallel;
		t->named.sequence_parallel = c->sequence_parallel;
		t->named.sharding = c->sharding;
		t->named.dist_timeout = c->dist_timeout;
		if ((rc = check_same_config(t, c, &t->named, &t->named_orig, t->o.config,
					    loom_ckpt_dir(t->ck))))
			return rc;
	}
	/* another model's checkpoint: said once here, not by every rank's load */
	const struct loom_ckpt_arch *a = t->o.init_from ? ckpt_arch(t->o.init_from) : NULL;
	if (a && (a == &loom_bert_ckpt_arch) != (c->model == LOOM_MODEL_BERT))
		return usage(t, "--init-from %s: a %s checkpoint (config.json), but the model is %s",
			     t->o.init_from, a->model_type, loom_model_name(c->model));
	t->ops = c->model == LOOM_MODEL_BERT ? &loom_bert_ops : &loom_gpt_ops;
	t->read_features = c->task == LOOM_TASK_SQUAD;
	if (t->o.eval_squad && (!t->read_features || loom_config_shards_weights(c)))
		return usage(t, "--eval-squad: task=squad%s", t->read_features ?
			     " without sharding=weights (score a checkpoint with loom-eval squad -c)" :
			     " only (the task is not)");
	return check_keep_best(t);
}

/* --vocab (or the resumed checkpoint's): rendered once as vocab.json +
 * merges.txt for every checkpoint; its ids must fit vocab_size. */
static int load_gpt_vocab(struct loom_trainer *t, const char *spec, const char *name)
{
	struct loom_vocab *v = loom_vocab_new();
	char *json, *merges;
	size_t jl, ml;
	int rc = 0;
	if (!v)
		return nomem(t);
	if (loom_vocab_load_spec(v, spec)) {
		rc = loom_err_set(&t->err, LOOM_EFORMAT, "--vocab: %s", loom_vocab_error(v));
	} else if (v->n_ids > (uint32_t)t->cfg.vocab_size) {
		rc = usage(t, "--vocab %s has %u ids, but vocab_size is %d (from %s): "
			   "--set vocab_size=%u", name ? name : spec, v->n_ids, t->cfg.vocab_size,
			   origin_name(&t->orig, LOOM_O_VS), v->n_ids);
	} else if (loom_vocab_render_gpt2(v, &json, &jl, &merges, &ml)) {
		rc = loom_err_set(&t->err, LOOM_EFORMAT, "--vocab: %s", loom_vocab_error(v));
	}
	if (rc) {
		loom_vocab_free(v);
		return rc;
	}
	char *nm = strdup(name ? name : spec);
	if (!nm) {
		free(json);
		free(merges);
		loom_vocab_free(v);
		return nomem(t);
	}
	t->vocab = (struct loom_ckpt_vocab){
		.name = nm,
		.files = { { "vocab.json", json, jl }, { "merges.txt", merges, ml } },
		.eos_token_id = v->eot == LOOM_VOCAB_NONE ? -1 : (int64_t)v->eot,
	};
	t->tok = v; /* --sample-every decodes with it */
	return 0;
}

/* model=bert: --vocab, or the resumed checkpoint's vocab.txt, opened with
 * the casing options by loom_wordpiece_open's rules: saved as vocab.txt +
 * tokenizer_config.json (do_lower_case: the casing used) in every
 * checkpoint; its ids must fit vocab_size. */
static int load_bert_vocab(struct loom_trainer *t, const char *spec)
{
	struct loom_err err = { 0 };
	const char *name = spec;
	struct loom_ckpt *ck = t->ck;
	int casing = t->o.casing;
	if (!spec) {
		char path[4096];
		struct loom_wordpiece_opts wo;
		int rc = ck ? loom_bert_ckpt_tokenizer(ck, path, sizeof path, &wo, &err) : 0;
		if (rc < 0)
			return take_err(t, &err, rc);
		if (rc == 0)
			return casing != LOOM_CASING_AUTO
				       ? usage(t, "--lowercase/--cased: no vocabulary (--vocab V)")
				       : 0; /* no tokenizer */
		name = loom_ckpt_vocab_name(ck);
	}
	struct loom_wordpiece *w = loom_wordpiece_open(spec ? spec : loom_ckpt_dir(ck), casing, &err);
	if (!w && err.code == LOOM_EINVAL)
		return usage(t, "--vocab %s%s", err.msg, loom_wordpiece_casing_hint(&err));
	if (!w)
		return take_err(t, &err, LOOM_EFORMAT);
	const char *path = loom_wordpiece_path(w);
	size_t pl = strlen(path);
	int rc = 0;
	if (loom_wordpiece_check_bert(w, path))
		rc = loom_err_set(&t->err, LOOM_EFORMAT, "%s%s", spec ? "--vocab: " : "",
				  loom_wordpiece_error(w));
	else if (pl > 5 && !strcmp(path + pl - 5, ".json"))
		rc = usage(t, "--vocab %s: checkpoints keep a vocab.txt: give the one beside it", spec);
	else if (loom_wordpiece_size(w) > (uint32_t)t->cfg.vocab_size)
		rc = usage(t, "--vocab %s has %u ids, but vocab_size is %d (from %s): "
			   "--set vocab_size=%u", name ? name : path, loom_wordpiece_size(w),
			   t->cfg.vocab_size, origin_name(&t->orig, LOOM_O_VS), loom_wordpiece_size(w));
	else if (loom_bert_ckpt_vocab(&t->vocab, name, path, loom_wordpiece_lowercases(w), &err))
		rc = loom_err_set(&t->err, err.code ? err.code : LOOM_EFORMAT, "--vocab: %s", err.msg);
	if (rc)
		loom_wordpiece_free(w);
	else
		t->wp = w; /* the run's tokenizer (loom-train --eval-squad) */
	return rc;
}

int loom_trainer_load_vocab(struct loom_trainer *t, const char *spec)
{
	struct loom_ckpt *ck = t->ck;
	if (t->cfg.model == LOOM_MODEL_BERT)
		return load_bert_vocab(t, spec);
	if (spec || (ck && loom_ckpt_vocab_spec(ck)))
		return load_gpt_vocab(t, spec ? spec : loom_ckpt_vocab_spec(ck),
				      spec ? spec : loom_ckpt_vocab_name(ck));
	return 0;
}

/* Resuming at `step`: drop log lines of later steps (written by the run
 * that died after its last checkpoint), so the log reads as one run. */
int loom_trainer_trim_log(const char *path, uint64_t step, struct loom_err *err)
{
	char *buf = NULL;
	size_t len = 0, o = 0;
	struct stat st;
	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return 0; /* nothing yet, or a pipe or device: nothing to trim */
	int rc = loom_read_file(path, &buf, &len, err);
	if (rc)
		return rc;
	char *keep = malloc(len + 1);
	if (!keep) {
		free(buf);
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	}
	for (char *line = buf, *nl; line < buf + len; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(buf + len - line));
		if (!nl)
			break; /* a torn last line is dropped */
		json_t *j = json_loadb(line, (size_t)(nl - line), 0, NULL);
		json_t *st = j ? json_object_get(j, "step") : NULL;
		if (st && json_is_integer(st) && (uint64_t)json_integer_value(st) <= step) {
			memcpy(keep + o, line, (size_t)(nl - line) + 1);
			o += (size_t)(nl - line) + 1;
		}
		json_decref(j);
	}
	if (o != len)
		rc = loom_write_file_atomic(path, keep, o, err);
	free(keep);
	free(buf);
	return rc;
}

/* ---- the build/--resume/--init-from ladder ------------------------------ */

static void attach(struct loom_trainer *t)
{
	if (t->hk.attach)
		t->hk.attach(t->hk.ctx);
}

/* --resume: where training stands, from the checkpoint (freed) */
static void take_state(struct loom_trainer *t)
{
	const struct loom_ckpt_state *st = loom_ckpt_state(t->ck);
	t->step = st->step;
	t->samples = st->samples;
	t->tokens = st->tokens;
	t->data_seq = st->data_seq;
	t->best = st->best;
	if (t->o.verbose)
		say(t, "resumed from %s at step %llu (next frame %llu)", loom_ckpt_dir(t->ck),
		    (unsigned long long)t->step, (unsigned long long)t->data_seq);
	loom_ckpt_free(t->ck);
	t->ck = NULL;
}

/* A new model of t->cfg, its weights from the seed. */
static int new_model(struct loom_trainer *t)
{
	const struct loom_config *c = &t->cfg;
	if (c->model == LOOM_MODEL_BERT) {
		struct loom_bert_config bc;
		loom_bert_config_from(c, &bc);
		struct loom_err err = { 0 };
		if (loom_bert_config_check(&bc, &err))
			return usage(t, "%s", err.msg);
		t->model = t->b = loom_bert_new_tp(&bc, t->hk.tp_rank ? t->hk.tp_rank(t->hk.ctx) : 0,
						   c->tensor_parallel);
	} else {
		t->model = t->g = loom_gpt_new_tp(c, t->hk.tp_rank ? t->hk.tp_rank(t->hk.ctx) : 0,
						  c->tensor_parallel);
	}
	if (!t->g && !t->b)
		return loom_err_set(&t->err, LOOM_ENOMEM, "out of memory for %llu parameters",
				    (unsigned long long)loom_config_n_params(c));
	return 0;
}

/* The model's weights (with_optimizer: and moments) from ck; a rank of
 * tensor_parallel or sharding=weights reads only its own slices. */
static int load(struct loom_trainer *t, struct loom_ckpt *ck, int with_optimizer)
{
	return (t->b ? bert_load : gpt_load)(t, ck, with_optimizer);
}

int loom_trainer_build(struct loom_trainer *t)
{
	const struct loom_trainer_opts *o = &t->o;
	int rc = new_model(t);
	if (rc)
		return rc;
	/* sharding=weights: every rank then reads only its own chunks */
	int first = loom_config_shards_weights(&t->cfg) && (o->resume || o->init_from);
	if (first)
		attach(t);
	if (o->resume) {
		if ((rc = load(t, t->ck, 1)))
			return rc;
		take_state(t);
		if ((rc = resume_best(t)))
			return rc;
	} else if (o->init_from) {
		struct loom_ckpt *ck;
		if ((rc = open_ckpt(t, o->init_from, 0, &ck)))
			return rc;
		rc = load(t, ck, 0);
		if (!rc && o->verbose && t->g)
			say(t, "weights from %s", loom_ckpt_dir(ck));
		loom_ckpt_free(ck);
		if (rc)
			return rc;
	} else if (t->g) {
		loom_gpt_init_weights(t->g, t->cfg.seed);
	} else {
		loom_bert_init_weights(t->b, t->cfg.seed);
	}
	if (!first)
		attach(t);
	return 0;
}

/* ---- frames ------------------------------------------------------------- */

int loom_trainer_fit_frame(struct loom_trainer *t, int batch, int rec, uint64_t frame)
{
	struct loom_config *c = &t->cfg;
	const struct loom_origins *o = &t->orig;
	int extra = loom_config_record_extra(c), T = rec - extra;
	if (!o->src[LOOM_O_MB][0] && batch != c->micro_batch) {
		if (t->o.verbose)
			say(t, "micro_batch %d from the frames (%s says %d)", batch, o->preset,
			    c->micro_batch);
		c->micro_batch = batch;
		c->global_batch = 0; /* derived again */
	}
	if (!o->src[LOOM_O_SL][0] && T != c->seq_len) {
		/* a squad feature is a row: never cut (too long: refused below) */
		int want = T < c->n_positions || !extra ? T : c->n_positions;
		if (want < T && !t->o.quiet)
			say(t, "the frames' records have %d tokens, but n_positions is %d (%s): "
			    "training on the first %d of each record (--set n_positions=%d, or "
			    "loom-feed --seq %d, uses them whole)", rec, c->n_positions,
			    o->preset, want + extra, T, want + extra - 1);
		else if (t->o.verbose)
			say(t, "seq_len %d from the frames' records of %d tokens (%s says %d)",
			    want, rec, o->preset, c->seq_len);
		c->seq_len = want;
	}
	if (loom_config_validate(c))
		return loom_err_set(&t->err, LOOM_EFORMAT, "stdin: frame %llu: %s",
				    (unsigned long long)frame, loom_config_error(c));
	if (loom_config_check_data(c, batch, rec)) {
		int sl = c->seq_len + extra > rec || (!extra && c->seq_len != rec);
		const char *key = sl ? "seq_len" : "micro_batch";
		const char *src = origin_name(o, sl ? LOOM_O_SL : LOOM_O_MB);
		char fix[160];
		if (!strcmp(src, "the checkpoint"))
			snprintf(fix, sizeof fix, "the checkpoint's: --set %s=%d overrides it", key,
				 sl ? T : batch);
		else
			snprintf(fix, sizeof fix, "from %s: change it to %d there", src, sl ? T : batch);
		return loom_err_set(&t->err, LOOM_EFORMAT, "stdin: frame %llu: %s (%s is %s, or feed %s %s %d)",
				    (unsigned long long)frame, loom_config_error(c), key, fix,
				    sl && !extra ? "features of loom-squad prepare" : "loom-feed",
				    sl ? "--seq" : "--batch",
				    sl ? c->seq_len + extra - (extra != 0) : c->micro_batch);
	}
	return 0;
}

int loom_trainer_check_ids(struct loom_trainer *t, const struct loom_batch_hdr *h,
			   const uint32_t *tok, uint64_t frame)
{
	const struct loom_config *c = &t->cfg;
	size_t n = (size_t)h->batch * h->seq_len;
	size_t i = loom_batch_first_bad_id(h, tok, (uint64_t)c->vocab_size);
	if (i == n)
		return 0;
	uint32_t top = tok[i];
	for (size_t k = i; k < n; k++)
		if (tok[k] > top && !((h->flags & LOOM_BATCH_F_PAD) && tok[k] == h->pad_id))
			top = tok[k];
	if (top >= LOOM_CONFIG_MAX_VOCAB)
		return loom_err_set(&t->err, LOOM_ERANGE, "stdin: frame %llu: token %u (record %zu, "
				    "position %zu) is outside the vocabulary: vocab_size is at most "
				    "%d, so ids are 0..%d", (unsigned long long)frame, tok[i],
				    i / h->seq_len, i % h->seq_len, LOOM_CONFIG_MAX_VOCAB,
				    LOOM_CONFIG_MAX_VOCAB - 1);
	return loom_err_set(&t->err, LOOM_ERANGE, "stdin: frame %llu: token %u (record %zu, "
			    "position %zu) is outside the vocabulary: vocab_size is %d (from %s); "
			    "the data needs --set vocab_size=N with N the tokenizer's size, at "
			    "least %u (gpt2: 50257)", (unsigned long long)frame, tok[i],
			    i / h->seq_len, i % h->seq_len, c->vocab_size,
			    origin_name(&t->orig, LOOM_O_VS), top + 1);
}

/* "SRC: frame N: MSG" of a model's error */
static int frame_err(struct loom_trainer *t, const struct loom_frame *f, int rc, const char *msg)
{
	return loom_err_set(&t->err, rc, "%s: frame %llu: %s", f->src, (unsigned long long)f->n,
			    msg);
}

int loom_trainer_micro(struct loom_trainer *t, const struct loom_frame *f, int micro,
		       float *loss)
{
	const struct loom_config *c = &t->cfg;
	const struct loom_batch_hdr *h = f->h;
	/* dropout (and mlm's masks): independent per replica (replica 0 as
	 * a single process), the same on a replica's tensor-parallel ranks */
	int replica = t->hk.replica ? t->hk.replica(t->hk.ctx) : t->hk.rank;
	uint64_t key = loom_splitmix64(c->seed ^ loom_splitmix64((t->step + 1) * 65536 + (uint64_t)micro) ^
				       ((uint64_t)replica << 48));
	int rc = t->ops->micro(t->model, c, f, &t->scratch, key, 1.0f / c->grad_accum, loss);
	if (rc)
		return frame_err(t, f, rc, t->ops->error(t->model));
	t->data_seq = h->seq + 1;
	t->data_epoch = h->epoch;
	t->data_seed = h->seed;
	t->data_batch = h->batch;
	t->data_seq_len = h->seq_len;
	t->data_world = h->world;
	return 0;
}

void loom_trainer_step(struct loom_trainer *t, double *lsum, float *lr, float *norm)
{
	const struct loom_config *c = &t->cfg;
	t->step++;
	*lr = (float)loom_config_lr(c, (int64_t)t->step);
	if (t->hk.step) /* the model attached to the data-parallel layer */
		t->hk.step(t->hk.ctx, *lr, (int64_t)t->step, norm, lsum);
	else
		t->ops->step(t->model, *lr, (int64_t)t->step, norm);
	t->samples += (uint64_t)c->global_batch;
	t->tokens += (uint64_t)c->global_batch * (uint64_t)c->seq_len; /* all ranks */
}

void loom_trainer_plan(const struct loom_config *c, int recompute, struct loom_model_mem *m)
{
	(c->model == LOOM_MODEL_BERT ? &loom_bert_ops : &loom_gpt_ops)->plan(c, recompute, m);
}

void loom_trainer_begin_step(struct loom_trainer *t)
{
	t->ops->begin_step(t->model, (int64_t)t->step + 1);
}

int loom_trainer_sample(struct loom_trainer *t, const uint32_t *prompt, size_t n, size_t max_new,
			float temperature, char **text)
{
	struct loom_generate x;
	uint32_t eot = t->tok ? t->tok->eot : LOOM_VOCAB_NONE;
	int rc = loom_generate_init(&x, t->g, t->tok, prompt, n, max_new, temperature, 200,
				    loom_splitmix64(t->cfg.seed ^ t->step));
	if (rc)
		return take_err(t, &x.err, rc);
	for (size_t k = 0; k < max_new; k++) {
		int next = loom_generate_next(&x);
		if (next < 0) {
			rc = loom_err_set(&t->err, next, "step %llu: %s", (unsigned long long)t->step,
					  x.err.msg);
			break;
		}
		if ((uint32_t)next == eot) {
			x.ids.n--;
			break;
		}
	}
	if (!rc && (rc = loom_generate_decode(&x, 0)))
		take_err(t, &x.err, rc);
	else if (!rc && !(*text = loom_generate_valid_utf8(x.buf, x.len)))
		rc = nomem(t);
	loom_generate_release(&x);
	return rc;
}

/* ---- held-out evaluation ------------------------------------------------ */

/* The frames of e (named path) through the model's eval into *sum. */
static int evaluate_src(struct loom_trainer *t, struct loom_eval_src *e, const char *path,
			struct loom_threads *pool, struct loom_eval_sums *sum)
{
	struct loom_batch_hdr h;
	const uint32_t *tok;
	int T = t->cfg.seq_len, need = T + loom_config_record_extra(&t->cfg), rc;
	while ((rc = loom_eval_next(e, &h, &tok, &t->err)) == 1) {
		if ((int)h.seq_len < need) {
			rc = loom_err_set(&t->err, LOOM_EFORMAT, "%s: seq_len: %d needs records of "
					  "%d tokens, the batches have %u", path, T, need, h.seq_len);
			break;
		}
		size_t bad = loom_batch_first_bad_id(&h, tok, (uint64_t)t->cfg.vocab_size);
		if (bad < (size_t)h.batch * h.seq_len) {
			rc = loom_err_set(&t->err, LOOM_ERANGE, "%s: frame %llu: token %u (record "
					  "%zu, position %zu) is outside the vocabulary of %d ids",
					  path, (unsigned long long)e->frames - 1, tok[bad],
					  bad / h.seq_len, bad % h.seq_len, t->cfg.vocab_size);
			break;
		}
		char msg[160];
		if (pool && loom_threads_adapt(pool, "eval frame", e->frames - 1, msg, sizeof msg) &&
		    t->o.verbose)
			say(t, "%s", msg); /* -v: the thread count changed */
		struct loom_frame f = { .h = &h, .tok = tok, .r = e->r, .src = path, .n = e->frames - 1 };
		if ((rc = t->ops->eval(t->model, &t->cfg, &f, &t->escratch, sum))) {
			frame_err(t, &f, rc, t->ops->error(t->model));
			break;
		}
	}
	return rc < 0 ? rc : 0;
}

int loom_trainer_evaluate(struct loom_trainer *t, const char *path, uint64_t max_frames,
			  struct loom_threads *pool, struct loom_eval_sums *sum)
{
	struct loom_eval_src e;
	t->offered = 0; /* a new evaluation */
	int need = t->cfg.seq_len + loom_config_record_extra(&t->cfg);
	memset(sum, 0, sizeof *sum);
	int rc = loom_eval_open(&e, path, (uint32_t)t->cfg.micro_batch, (uint32_t)need,
				t->read_features, max_frames, &t->err);
	if (!rc)
		rc = evaluate_src(t, &e, path, pool, sum);
	loom_eval_close(&e);
	return rc;
}

int loom_trainer_squad_scores(struct loom_trainer *t, double *em, double *f1)
{
	struct loom_err err = { 0 };
	if (!t->wp)
		return loom_err_set(&t->err, LOOM_EINVAL, "--eval-squad: the checkpoint resumed has "
				    "no vocab.txt to tokenize %s with (--vocab V)", t->o.eval_squad);
	if (!t->squad_ev) {
		struct loom_squad_feature_opts fo = { (uint32_t)t->cfg.seq_len,
						      (uint32_t)t->cfg.doc_stride,
						      (uint32_t)t->cfg.max_query };
		if (!(t->squad_ev = loom_bert_squad_eval_new(t->o.eval_squad, t->wp, &fo, &err)))
			return loom_err_set(&t->err, err.code ? err.code : LOOM_EFORMAT,
					    "--eval-squad %s", err.msg);
	}
	if (loom_bert_squad_eval_run(t->squad_ev, t->b, t->cfg.micro_batch, em, f1, &err))
		return loom_err_set(&t->err, err.code ? err.code : LOOM_EFORMAT, "--eval-squad %s: %s",
				    t->o.eval_squad, err.msg);
	return 0;
}

int loom_trainer_hold(struct loom_trainer *t, const struct loom_batch_reader *r,
		      const struct loom_batch_hdr *h, const uint32_t *tok)
{
	if (t->held_frames >= t->o.held)
		return 0;
	const struct loom_batch_feature *tab;
	struct loom_batch_feature ft[LOOM_BATCH_MAX_FEATURES];
	const int64_t *vals[LOOM_BATCH_MAX_FEATURES];
	size_t nf;
	loom_batch_reader_features(r, &tab, &nf);
	for (size_t k = 0; k < nf; k++) { /* each feature as narrow as this frame allows */
		ft[k] = tab[k];
		vals[k] = loom_batch_reader_values(r, k);
		ft[k].dtype = loom_batch_narrowest(vals[k], (size_t)h->batch * ft[k].length);
	}
	struct loom_batch_hdr x = *h;
	size_t most = loom_batch_frame_size_features(h->batch, h->seq_len, ft, nf);
	if (loom_buf_reserve(&t->held, t->held_len, &t->held_cap, most + LOOM_BATCH_HEADER_SIZE))
		return nomem(t);
	long n = loom_batch_encode_features(&x, tok, ft, nf, vals, t->held + t->held_len);
	if (n < 0)
		return loom_err_set(&t->err, (int)n, "--eval-train: frame %llu cannot be kept",
				    (unsigned long long)h->seq);
	t->held_len += (size_t)n;
	if (++t->held_frames == t->o.held) { /* the END frame: the next seq, no payload */
		x.flags = LOOM_BATCH_F_END | (h->flags & LOOM_BATCH_F_PAD);
		x.seq = h->seq + 1;
		if ((n = loom_batch_encode(&x, NULL, t->held + t->held_len)) < 0)
			return loom_err_set(&t->err, (int)n, "--eval-train: cannot end the held frames");
		t->held_len += (size_t)n;
	}
	return 0;
}

int loom_trainer_evaluate_held(struct loom_trainer *t, struct loom_threads *pool,
			       struct loom_eval_sums *sum)
{
	struct loom_eval_src e;
	memset(sum, 0, sizeof *sum);
	if (!t->o.held || t->held_frames < t->o.held)
		return 0; /* not all kept yet (the END frame comes with the last) */
	int rc = loom_eval_open_mem(&e, t->held, t->held_len, "the held-in training frames",
				    t->read_features, &t->err);
	if (!rc)
		rc = evaluate_src(t, &e, "the held-in training frames", pool, sum);
	loom_eval_close(&e);
	return rc < 0 ? rc : 1;
}
