/* loom_gpt.c - GPT forward/backward/AdamW over flat arrays; see loom_gpt.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_dist.h"
#include "loom_batch.h"
#include "loom_gpt.h"
#include "loom_kernels.h"
#include "loom_profile.h"
#include "loom_rigl.h"
#include "loom_sparse.h"
#include "loom_tp.h"

/* Per-layer tensors, in HuggingFace order. */
enum { LN1W, LN1B, ATTW, ATTB, PROJW, PROJB, LN2W, LN2B, FCW, FCB, FCPW, FCPB, NLT };

static const char *const lt_names[NLT] = {
	"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
	"attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
	"mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias",
};

/* the four projections RigL may make sparse: tensor, sparse_layers bit */
static const int proj_k[4] = { ATTW, PROJW, FCW, FCPW };
static const int proj_bit[4] = { LOOM_SL_QKV, LOOM_SL_PROJ, LOOM_SL_FC, LOOM_SL_FCPROJ };

#define T_WTE 0
#define T_WPE 1
#define T_LAYER(l, k) (2 + (l) * NLT + (k))
#define T_LNFW(L) (2 + (L) * NLT)
#define T_LNFB(L) (3 + (L) * NLT)

/* parameter (or gradient, or moment) tensor i inside base */
#define TP(g, base, i) ((base) + (g)->tensors[i].offset)
#define LP(g, base, l, k) TP(g, base, T_LAYER(l, k))

const char *loom_gpt_error(const struct loom_gpt *g)
{
	return g->err.msg;
}

/* weight decay on all but biases and LayerNorms */
static void add_tensor(struct loom_gpt *g, size_t *off, const char *name, int ndim,
		       int64_t d0, int64_t d1)
{
	loom_model_add(g->tensors, &g->n_tensors, off, name, ndim, d0, d1,
		       !strstr(name, "bias") && !strstr(name, "ln_"));
}

/* The RigL masks and the sparse weights of cfg.sparse_layers, masks
 * drawn from cfg.seed (weights are zero here). */
static int new_sparse(struct loom_gpt *g)
{
	struct loom_err err = { 0 };
	int bs = g->cfg.block_size;
	g->rigl = loom_rigl_new(bs, g->cfg.pooling, &err);
	g->sp = calloc((size_t)g->L * 4, sizeof *g->sp);
	g->rl = calloc((size_t)g->L * 4, sizeof *g->rl);
	if (!g->rigl || !g->sp || !g->rl)
		return LOOM_ENOMEM;
	for (int l = 0; l < g->L; l++)
		for (int j = 0; j < 4; j++) {
			g->rl[4 * l + j] = -1;
			if (!(g->cfg.sparse_layers & proj_bit[j]))
				continue;
			const struct loom_tensor *t = &g->tensors[T_LAYER(l, proj_k[j])];
			g->rl[4 * l + j] = g->rigl->n;
			if (loom_rigl_add(g->rigl, t->name, t->offset, (int)t->shape[0],
					  (int)t->shape[1]) ||
			    !(g->sp[4 * l + j] = loom_sparse_new((int)t->shape[0], (int)t->shape[1], bs,
								 &err)))
				return LOOM_ENOMEM;
		}
	loom_rigl_init_masks(g->rigl, g->cfg.sparsity, g->cfg.seed);
	loom_gpt_rigl_sync(g);
	return 0;
}

struct loom_gpt *loom_gpt_new(const struct loom_config *cfg)
{
	return loom_gpt_new_tp(cfg, 0, 1);
}

/* tensor parallelism: how tensor i is split (see loom_gpt.h, loom_tp.h) */
static int tp_split(const void *model, int i, int *groups)
{
	const struct loom_gpt *g = model;
	*groups = 1;
	if (i == T_WTE)
		return LOOM_TP_ROWS;
	if (i == T_WPE || i >= T_LNFW(g->L))
		return LOOM_TP_WHOLE;
	switch ((i - 2) % NLT) {
	case ATTW: case ATTB:
		*groups = 3; /* Q, K and V each by heads */
		return LOOM_TP_COLS;
	case FCW: case FCB:
		return LOOM_TP_COLS;
	case PROJW: case FCPW:
		return LOOM_TP_ROWS;
	default:
		return LOOM_TP_WHOLE;
	}
}

/* g's tensor-parallel team (lib/train/loom_tp.h); errors into g->err */
static struct loom_tp team(const struct loom_gpt *g)
{
	return (struct loom_tp){ .tp = g->tp, .rank = g->tp_rank, .tab = g->tensors,
				 .nt = g->n_tensors, .split = tp_split, .model = g,
				 .dist = &g->dist, .seq = g->seq,
				 .err = (struct loom_err *)&g->err };
}

void loom_gpt_tp(const struct loom_gpt *g, struct loom_tp *t)
{
	*t = team(g);
}

void loom_gpt_tp_copy(const struct loom_gpt *g, int rank, float *slices, float *full,
		      int to_full)
{
	struct loom_tp t = team(g);
	loom_tp_copy(&t, rank, slices, full, to_full);
}

struct loom_gpt *loom_gpt_new_tp(const struct loom_config *cfg, int rank, int tp)
{
	struct loom_gpt *g = calloc(1, sizeof *g);
	if (!g)
		return NULL;
	g->cfg = *cfg;
	g->cfg.tensor_parallel = tp;
	g->seq = g->cfg.sequence_parallel = tp > 1 && cfg->sequence_parallel;
	g->tp = tp;
	g->tp_rank = rank;
	g->L = cfg->n_layer;
	g->C = cfg->n_embd;
	g->NH = cfg->n_head;
	g->V = cfg->vocab_size;
	g->P = cfg->n_positions;
	g->NHl = g->NH / tp;
	g->Cl = g->C / tp;
	g->Fl = 4 * g->C / tp;
	g->Vl = g->V / tp;
	int64_t C = g->C;
	g->tensors = calloc(4 + (size_t)g->L * NLT, sizeof *g->tensors);
	g->layer = calloc((size_t)g->L, sizeof *g->layer);
	if (!g->tensors || !g->layer)
		goto fail;
	size_t off = 0;
	char name[64];
	add_tensor(g, &off, "transformer.wte.weight", 2, g->Vl, C);
	add_tensor(g, &off, "transformer.wpe.weight", 2, g->P, C);
	for (int l = 0; l < g->L; l++) {
		static const int64_t shp[NLT][2] = {
			{ 1, 0 }, { 1, 0 }, { 1, 3 }, { 3, 0 }, { 1, 1 }, { 1, 0 },
			{ 1, 0 }, { 1, 0 }, { 1, 4 }, { 4, 0 }, { 4, 1 }, { 1, 0 },
		};
		for (int k = 0; k < NLT; k++) {
			/* this rank's slice: the columns of c_attn and c_fc, the
			 * rows of the c_proj weights (tp 1: all) */
			int cols = k == ATTW || k == FCW, rows = k == ATTB || k == PROJW ||
								  k == FCB || k == FCPW;
			snprintf(name, sizeof name, "transformer.h.%d.%s", l, lt_names[k]);
			add_tensor(g, &off, name, shp[k][1] ? 2 : 1, shp[k][0] * C / (rows ? tp : 1),
				   shp[k][1] * C / (cols ? tp : 1));
		}
	}
	add_tensor(g, &off, "transformer.ln_f.weight", 1, C, 0);
	add_tensor(g, &off, "transformer.ln_f.bias", 1, C, 0);
	g->n_params = off;
	if (loom_model_store_alloc(off, &g->params, &g->grads, &g->m, &g->v) ||
	    (g->seq && !(g->lnd = malloc(sizeof(float) * 4 * (size_t)C))))
		goto fail;
	if (cfg->sparsity > 0 && new_sparse(g))
		goto fail;
	return g;
fail:
	loom_gpt_free(g);
	return NULL;
}

void loom_gpt_free(struct loom_gpt *g)
{
	if (!g)
		return;
	loom_model_store_free(g->params, g->grads, g->m, g->v);
	loom_lazy_free(g->acts);
	free(g->inputs);
	free(g->xent);
	free(g->at);
	free(g->lnd);
	free(g->tensors);
	free(g->layer);
	loom_mm_free(g->mm);
	for (int i = 0; g->sp && i < 4 * g->L; i++)
		loom_sparse_free(g->sp[i]);
	free(g->sp);
	free(g->rl);
	loom_rigl_free(g->rigl);
	free(g);
}

/* 1-D: 1 for an ln_*.weight, else 0; the others' std: 0.02, the
 * residual projections' (c_proj) scaled by 1/sqrt(2L) as GPT-2's */
static float gpt_init(const struct loom_tensor *t, const void *ctx)
{
	const struct loom_gpt *g = ctx;
	if (t->ndim == 1)
		return strstr(t->name, "ln_") && strstr(t->name, "weight") ? 1.0f : 0.0f;
	return strstr(t->name, "c_proj.weight") ? 0.02f / sqrtf(2.0f * g->L) : 0.02f;
}

void loom_gpt_init_weights(struct loom_gpt *g, uint64_t seed)
{
	loom_model_init_weights(g->tensors, g->n_tensors, g->params, g->grads, g->m, g->v,
				g->n_params, seed, gpt_init, g);
	/* tensor parallelism: a split matrix is this rank's slice of the
	 * whole one's draws */
	struct loom_tp t = team(g);
	loom_tp_init(&t, 0, g->params, seed, gpt_init, g);
	g->w16_ok = 0;
	g->sp_ok = 0;
	if (g->rigl) { /* masks from this seed; dead blocks zero */
		loom_rigl_init_masks(g->rigl, g->cfg.sparsity, seed);
		loom_gpt_rigl_sync(g);
	}
}

void loom_gpt_weights_changed(struct loom_gpt *g)
{
	g->w16_ok = 0;
	g->sp_ok = 0;
}

void loom_gpt_masks_changed(struct loom_gpt *g)
{
	loom_gpt_weights_changed(g);
	g->sp_mask_ok = 0;
}

void loom_gpt_rigl_sync(struct loom_gpt *g)
{
	if (!g->rigl)
		return;
	loom_rigl_mask_range(g->rigl, 0, g->n_params, g->params);
	if (g->m)
		loom_rigl_mask_range(g->rigl, 0, g->n_params, g->m);
	if (g->v)
		loom_rigl_mask_range(g->rigl, 0, g->n_params, g->v);
	loom_gpt_masks_changed(g);
}

void loom_gpt_begin_step(struct loom_gpt *g, int64_t t)
{
	g->rigl_dense = g->rigl && loom_config_prune_due(&g->cfg, t);
}

void loom_gpt_rigl_update(struct loom_gpt *g, int64_t t)
{
	struct loom_rigl *r = g->rigl;
	loom_rigl_update(r, g->params, loom_config_prune_ratio(&g->cfg, t), t);
	loom_rigl_zero_changed(r, 0, g->n_params, g->params);
	if (g->m)
		loom_rigl_zero_changed(r, 0, g->n_params, g->m);
	if (g->v)
		loom_rigl_zero_changed(r, 0, g->n_params, g->v);
	loom_gpt_masks_changed(g);
}

/* ---- the hooks of data parallelism (lib/train/loom_dist.h) */

/* Layer index of a tensor: transformer.h.{l}. -> l; ln_f -> L-1 (its
 * gradient is final before layer L-1's backward ends); embeddings -> -1. */
static int dist_tag(const char *name, int L)
{
	int l;
	if (sscanf(name, "transformer.h.%d.", &l) == 1)
		return l;
	if (strstr(name, "ln_f"))
		return L - 1;
	return -1;
}

static void dist_step(void *g, float lr, int64_t t, float *norm)
{
	loom_gpt_step(g, lr, t, norm);
}

static void dist_weights_changed(void *g)
{
	loom_gpt_weights_changed(g);
}

static void dist_connect(void *model, const struct loom_dist_calls *c)
{
	struct loom_gpt *g = model;
	_Static_assert(LOOM_GPT_UNIT_NONE == LOOM_DIST_UNIT_NONE, "one 'no next unit'");
	g->dist = *c;
}

static int dist_replicated(void *model, int i)
{
	int G;
	return tp_split(model, i, &G) == LOOM_TP_WHOLE;
}

static int dist_take_due(void *model)
{
	struct loom_gpt *g = model;
	int due = g->rigl_dense;
	g->rigl_dense = 0;
	return due;
}

static void dist_score_reset(void *g)
{
	loom_rigl_score_reset(((struct loom_gpt *)g)->rigl);
}

static void dist_score_range(void *g, size_t lo, size_t hi, const float *x)
{
	loom_rigl_score_range(((struct loom_gpt *)g)->rigl, lo, hi, x);
}

static const float *dist_scores(void *g, size_t *n)
{
	const struct loom_rigl *r = ((struct loom_gpt *)g)->rigl;
	*n = r->n_scores;
	return r->scores;
}

static void dist_score_combine(void *g, const float *all, int world)
{
	loom_rigl_score_combine(((struct loom_gpt *)g)->rigl, all, world);
}

static void dist_mask_range(void *g, size_t lo, size_t hi, float *x)
{
	loom_rigl_mask_range(((struct loom_gpt *)g)->rigl, lo, hi, x);
}

static void dist_update(void *g, int64_t t)
{
	loom_gpt_rigl_update(g, t);
}

static void dist_norm_reset(void *g)
{
	loom_rigl_mag_reset(((struct loom_gpt *)g)->rigl);
}

static void dist_norm_range(void *g, size_t lo, size_t hi, const float *w)
{
	loom_rigl_mag_range(((struct loom_gpt *)g)->rigl, lo, hi, w);
}

static const double *dist_norms(void *g, size_t *n)
{
	const struct loom_rigl *r = ((struct loom_gpt *)g)->rigl;
	*n = r->n_scores;
	return r->mag;
}

static void dist_update_norms(void *model, const double *all, int world, int64_t t)
{
	struct loom_gpt *g = model;
	loom_rigl_mag_combine(g->rigl, all, world);
	loom_rigl_update_mag(g->rigl, loom_config_prune_ratio(&g->cfg, t), t);
}

static void dist_zero_changed(void *g, size_t lo, size_t hi, float *x)
{
	loom_rigl_zero_changed(((struct loom_gpt *)g)->rigl, lo, hi, x);
}

static void dist_masks_changed(void *g)
{
	loom_gpt_masks_changed(g);
}

void loom_gpt_dist_model(struct loom_gpt *g, struct loom_dist_model *m)
{
	const struct loom_config *c = &g->cfg;
	*m = (struct loom_dist_model){
		.params = g->params, .grads = g->grads, .m = &g->m, .v = &g->v,
		.n_params = g->n_params, .tensors = g->tensors, .n_tensors = g->n_tensors,
		.n_layer = g->L,
		.adamw = { c->beta1, c->beta2, c->eps, c->weight_decay, c->grad_clip },
		.sharding = c->sharding, .model = g, .tag = dist_tag, .step = dist_step,
		.weights_changed = dist_weights_changed, .connect = dist_connect, .units = 1,
		.replicated = g->tp > 1 ? dist_replicated : NULL,
	};
	if (g->rigl)
		m->masks = (struct loom_dist_masks){
			.take_due = dist_take_due, .score_reset = dist_score_reset,
			.score_range = dist_score_range, .scores = dist_scores,
			.score_combine = dist_score_combine, .mask_range = dist_mask_range,
			.update = dist_update, .norm_reset = dist_norm_reset,
			.norm_range = dist_norm_range, .norms = dist_norms,
			.update_norms = dist_update_norms, .zero_changed = dist_zero_changed,
			.changed = dist_masks_changed,
		};
}

/* Hand changed masks to the sparse weights, and pack them once after the
 * weights changed (the next forward's job: it can report a failure). */
static int ready_sparse(struct loom_gpt *g)
{
	if (!g->sp || g->sp_ok)
		return 0;
	for (int i = 0; !g->sp_mask_ok && i < 4 * g->L; i++)
		if (g->sp[i] && loom_sparse_set_mask(g->sp[i], g->rigl->layer[g->rl[i]].mask))
			return loom_err_set(&g->err, LOOM_ENOMEM, "%s", loom_sparse_error(g->sp[i]));
	g->sp_mask_ok = 1;
	for (int l = 0; !g->dist.need && l < g->L; l++)
		for (int j = 0; j < 4; j++)
			if (g->sp[4 * l + j])
				loom_sparse_pack(g->sp[4 * l + j], LP(g, g->params, l, proj_k[j]));
	g->sp_ok = 1;
	return 0;
}

/* The matmul backend of cfg.precision with current weights (sharded:
 * each unit's bf16 copy is made when it arrives, unit_need). */
static int ready_mm(struct loom_gpt *g)
{
	int whole = 1;
	return loom_model_ready_mm(&g->mm, g->dist.need ? &whole : &g->w16_ok, g->cfg.precision,
				   g->params, g->n_params, &g->err);
}

void loom_gpt_unit_range(const struct loom_gpt *g, int u, size_t *lo, size_t *hi)
{
	int a = u < 0 ? T_WTE : T_LAYER(u, 0);
	int b = u < 0 ? T_WPE : u == g->L - 1 ? T_LNFB(g->L) : T_LAYER(u, NLT - 1);
	*lo = g->tensors[a].offset;
	*hi = g->tensors[b].offset + g->tensors[b].numel;
}

/* Unit u's parameters are about to be read (`next` after them): with
 * weight sharding, have them gathered, then pack its sparse weights and
 * make its bf16 copy. */
static int unit_need(struct loom_gpt *g, int u, int next)
{
	if (!g->dist.need)
		return 0;
	int rc;
	LOOM_PROF(LOOM_PROF_COMM, rc = g->dist.need(g->dist.ctx, u, next, &g->err););
	if (rc)
		return rc;
	for (int j = 0; u >= 0 && g->sp && j < 4; j++)
		if (g->sp[4 * u + j])
			loom_sparse_pack(g->sp[4 * u + j], LP(g, g->params, u, proj_k[j]));
	size_t lo, hi;
	loom_gpt_unit_range(g, u, &lo, &hi);
	if (g->mm && loom_mm_weights_range(g->mm, g->params, g->n_params, lo, hi))
		return loom_mm_check(g->mm, &g->err);
	return 0;
}

static void unit_done(struct loom_gpt *g, int u)
{
	if (!g->dist.need)
		return;
	size_t lo, hi;
	loom_gpt_unit_range(g, u, &lo, &hi);
	loom_mm_weights_drop(g->mm, lo, hi);
	LOOM_PROF(LOOM_PROF_COMM, g->dist.done(g->dist.ctx, u););
}

/* ---- activation layout --------------------------------------------------- */

/* Rows of logits per LM-head chunk for N rows: `rows` if > 0; else all N
 * in one chunk when their logits take at most HEAD_ONE_BYTES (backward
 * then reuses the forward's, no recomputation), else chunks of equal size
 * that fit the shared work buffer [N,4C] (at least HEAD_BYTES of logits
 * each, so small batches do not run many thin chunks). */
#define HEAD_BYTES ((size_t)64 << 20)
#define HEAD_ONE_BYTES ((size_t)512 << 20)
static size_t head_rows(size_t N, size_t V, size_t C, int rows)
{
	if (rows > 0)
		return (size_t)rows < N ? (size_t)rows : N;
	if (N * V * sizeof(float) <= HEAD_ONE_BYTES)
		return N;
	size_t fl = N * 4 * C > HEAD_BYTES / sizeof(float) ? N * 4 * C : HEAD_BYTES / sizeof(float);
	size_t per = fl / V, nch;
	per = per ? per : 1;
	nch = (N + per - 1) / per;
	return (N + nch - 1) / nch;
}

/* Whether each layer keeps its mid-block residual res2 = x + attention
 * branch: `want` if != 0 (1 keep, -1 rebuild); else kept while all
 * layers' res2 take at most RES2_BYTES, or under recompute (one shared
 * copy).  When not kept, forward builds it in the layer output's slot
 * and backward rebuilds it there (x + the attention projection again: one
 * [N,C] x [C,C] product per layer, ~2% of a step), the output then being
 * no longer needed. */
#define RES2_BYTES ((size_t)256 << 20)
static int keep_res2(const struct loom_config *cfg, size_t N, int want)
{
	if (want)
		return want > 0;
	return cfg->recompute ||
	       (size_t)cfg->n_layer * N * (size_t)cfg->n_embd * sizeof(float) <= RES2_BYTES;
}

/* Lay out the activations for N tokens (B*T, or packed rows: see
 * loom_gpt.h) from base (NULL: only count), with
 * LM-head chunks of hr rows and res2 kept or not.  Every pointer is set
 * (relative to base) and the total float count returned.  glob: encoded
 * (layer 1's output slot when there is one: see embed()),
 * lnf_mean, lnf_rstd, losses, tmp, dres, work, lweights (only with a loss
 * weighting). */
static size_t layout(const struct loom_config *cfg, size_t N, int recompute, size_t hr,
		     int res2, float *base, struct loom_gpt_lacts *layer, float **glob)
{
	/* tensor parallelism: a rank's heads, attention width, MLP width
	 * and vocabulary rows (cfg->tensor_parallel 1: the whole model) */
	size_t tp = cfg->tensor_parallel, C = cfg->n_embd;
	size_t Cl = C / tp, NH = cfg->n_head / tp, V = cfg->vocab_size / tp, F = 4 * C / tp;
	size_t Nr = cfg->sequence_parallel ? N / tp : N; /* the tokens of the LayerNorm,
							  * dropout and residual regions */
	int L = cfg->n_layer;
	size_t off = 0;
#define TAKE(ptr, n) do { if (base) (ptr) = base + off; off += (n); } while (0)
	struct loom_gpt_lacts shared = { 0 };
	float *out1 = NULL;
	for (int l = 0; l < L; l++) {
		struct loom_gpt_lacts a = { 0 };
		if (!recompute || l == 0) {
			TAKE(a.ln1_mean, Nr);
			TAKE(a.ln1_rstd, Nr);
			TAKE(a.qkv, N * 3 * Cl);
			TAKE(a.atty, N * Cl);
			TAKE(a.lse, N * NH);
			if (res2)
				TAKE(a.res2, Nr * C);
			TAKE(a.ln2_mean, Nr);
			TAKE(a.ln2_rstd, Nr);
			TAKE(a.fch, N * F);
			if (l == 0)
				shared = a;
		} else {
			a = shared;
		}
		TAKE(a.res3, Nr * C);
		if (l == 1)
			out1 = a.res3;
		if (layer)
			layer[l] = a;
	}
	/* the embeddings, layer 0's input, in layer 1's output slot (free
	 * until layer 1 runs, and again once its backward is done) */
	if (L > 1 && !loom_config_shards_weights(cfg) && tp == 1)
		glob[0] = out1;
	else /* sharded weights: backward cannot embed again; tensor
	      * parallelism: would all-reduce the lookup again */
		TAKE(glob[0], Nr * C);
	TAKE(glob[1], Nr);
	TAKE(glob[2], Nr);
	TAKE(glob[3], N);
	TAKE(glob[4], N * C);
	TAKE(glob[5], Nr * C);
	TAKE(glob[6], hr * V > N * F ? hr * V : N * F);
	TAKE(glob[7], cfg->loss_weighting != LOOM_LOSSW_NONE ? N : 0);
#undef TAKE
	return off;
}

/* Tensor parallelism: the bytes a rank sends per step (see
 * loom_gpt_tp_bytes) for micro-batches of N rows of a config, res2 kept
 * or not. */
static uint64_t tp_bytes(const struct loom_config *cfg, uint64_t N, int res2, int micro)
{
	uint64_t L = (uint64_t)cfg->n_layer, T = (uint64_t)cfg->tensor_parallel;
	uint64_t C = (uint64_t)cfg->n_embd;
	if (T == 1)
		return 0;
	if (cfg->sequence_parallel) {
		/* [N,C] all-gathers and reduce-scatters ((T-1) N/T C floats
		 * each) per micro-batch: forward's lookup (a reduce-scatter), 4
		 * per layer, ln_f's output; backward's LM head, 6 per layer
		 * (the dropped gradients and LayerNorm outputs gathered, the
		 * LayerNorm input gradients scattered), 1 more per layer
		 * rebuilding res2 and 4 more recomputing the layer, the
		 * embeddings' gradient.  All-reduced: the loss's 3N floats and
		 * the LayerNorm gradients (4C a layer, ln_f's 2C). */
		uint64_t half = 4 + 10 * L + (res2 ? 0 : L) + (cfg->recompute ? 4 * L : 0);
		uint64_t ar = ((3 * N + 4 * C * L + 2 * C) * 4 + 16) * (uint64_t)micro + 8;
		return half * (T - 1) * (N / T) * C * 4 * (uint64_t)micro + ar * 2 * (T - 1) / T;
	}
	/* floats per micro-batch: forward's lookup, 2 per layer; backward's
	 * LM head, 2 per layer, 1 more per layer rebuilding res2 and 2 more
	 * recomputing the layer; the loss's maxima, sums and target logits */
	uint64_t nc = 1 + 2 * L + 1 + 2 * L + (res2 ? 0 : L) + (cfg->recompute ? 2 * L : 0);
	uint64_t fl = nc * N * C + 3 * N;
	uint64_t bytes = (fl * 4 + 16) * (uint64_t)micro + 8; /* + the batch check; the norm */
	return bytes * 2 * (T - 1) / T;
}

uint64_t loom_gpt_tp_bytes(const struct loom_gpt *g, int micro)
{
	return tp_bytes(&g->cfg, (uint64_t)g->B * g->T, g->res2, micro);
}

uint64_t loom_gpt_tp_params(const struct loom_config *cfg)
{
	uint64_t C = (uint64_t)cfg->n_embd, T = (uint64_t)cfg->tensor_parallel;
	/* split: wte; per layer c_attn (3C^2 + 3C), c_proj.weight, c_fc
	 * (4C^2 + 4C), the MLP's c_proj.weight */
	uint64_t split = (uint64_t)cfg->vocab_size * C + (uint64_t)cfg->n_layer * (12 * C * C + 7 * C);
	return loom_config_n_params(cfg) - split + split / T;
}

void loom_gpt_memory_plan(const struct loom_config *cfg, int B, int T, int recompute,
			  struct loom_model_mem *m)
{
	float *glob[8];
	struct loom_config c = *cfg;
	c.recompute = recompute;
	/* tensor parallelism: this rank's slices */
	uint64_t np = loom_gpt_tp_params(cfg), R = cfg->data_parallel > 1 ? cfg->data_parallel : 1;
	uint64_t shard = (np + R - 1) / R; /* a rank's slice (world 1: all) */
	uint64_t N = (uint64_t)B * T, C = cfg->n_embd;
	uint64_t hr = head_rows(N, (size_t)(cfg->vocab_size / cfg->tensor_parallel), (size_t)C, 0);
	int weights = R > 1 && cfg->sharding == LOOM_SHARD_WEIGHTS;
	memset(m, 0, sizeof *m);
	m->params = (weights ? shard : np) * 4;
	m->grads = (weights ? shard : np) * 4;
	m->adam = shard * 8;
	if (R > 1 && !weights)
		m->gshard = shard * 4; /* the reduce-scattered gradient slice */
	/* sharding=weights: full copies of the units in use: the
	 * embeddings' params (kept from the embedding to the LM head) or,
	 * from the LM head to the end of backward, their gradients; beside
	 * them the params of two layers (one computing, the next prefetched)
	 * and in backward the gradients of two (one computing, one being
	 * reduce-scattered); at the LM head the embeddings' params and
	 * gradients.  The last layer's unit holds ln_f. */
	uint64_t emb = ((uint64_t)cfg->vocab_size + (uint64_t)cfg->n_positions) * C;
	/* a layer's parameters, the last one's with ln_f's 2C */
	uint64_t lay = cfg->n_layer ? (np - emb - 2 * C) / (uint64_t)cfg->n_layer + 2 * C : 0;
	uint64_t gp = emb + 2 * lay; /* gathered params */
	if (weights) { /* the LM head, or forward then backward */
		m->gathered_head = 2 * emb > emb + 4 * lay;
		m->gathered = (m->gathered_head ? 2 * emb : emb + 4 * lay) * 4;
	}
	/* (a sharded run's layout keeps the embedding output in a slot of
	 * its own) */
	m->acts = (uint64_t)layout(cfg, N, recompute, hr, keep_res2(&c, N, 0), NULL, NULL,
				   glob) * 4 + N * 8;
	m->tp_bytes = tp_bytes(&c, N, keep_res2(&c, N, 0), cfg->grad_accum);
	/* bf16: the weight copy (sharding=weights: of the gathered params),
	 * and the backend's two operand scratch buffers (largest: a chunk
	 * of dlogits [hr,V] or the MLP's [N,4C], and the MLP's [N,4C]) */
	uint64_t hv = hr * (uint64_t)cfg->vocab_size, fc = N * 4 * C;
	m->bf16 = cfg->precision == LOOM_PREC_BF16
			  ? (weights ? gp : np) * 2 + (hv > fc ? hv : fc) * 2 + fc * 2 : 0;
	m->total = m->params + m->grads + m->adam + m->gshard + m->gathered + m->acts + m->bf16;
}

/* The activations of the batch that take_rows took (g->B, g->T, g->N). */
static int ensure_acts(struct loom_gpt *g)
{
	int B = g->B, T = g->T;
	size_t N = (size_t)g->N, hr = head_rows(N, (size_t)g->Vl, (size_t)g->C, g->head_rows);
	int res2 = keep_res2(&g->cfg, N, g->keep_res2);
	if (g->acts && g->acts_N == N && g->hr == hr && g->res2 == res2)
		return 0;
	struct loom_tp t = team(g);
	int rc = loom_tp_seq_rows(&t, B, T, (int)N, &g->Nr, &g->r0, &g->at);
	if (rc)
		return rc;
	g->acts_N = 0;
	float *glob[8];
	size_t n = layout(&g->cfg, N, g->cfg.recompute, hr, res2, NULL, NULL, glob);
	/* grow only: a generated token's short forward between training
	 * steps lays out in the training batch's allocation */
	if (n > g->acts_cap) {
		loom_lazy_free(g->acts);
		g->acts = loom_model_falloc(n);
		g->acts_cap = g->acts ? n : 0;
	}
	if (g->tp > 1) { /* the vocabulary-parallel loss's per-row values */
		free(g->xent);
		if (!(g->xent = malloc(sizeof(float) * 3 * hr)))
			return loom_err_set(&g->err, LOOM_ENOMEM, "out of memory");
	}
	if (!g->acts_cap)
		return loom_err_set(&g->err, LOOM_ENOMEM,
				    "out of memory for activations (%zu MB at B=%d T=%d)",
				    n * 4 >> 20, B, T);
	layout(&g->cfg, N, g->cfg.recompute, hr, res2, g->acts, g->layer, glob);
	g->encoded = glob[0];
	g->lnf_mean = glob[1];
	g->lnf_rstd = glob[2];
	g->losses = glob[3];
	g->tmp = g->lnf = glob[4];
	g->dres = glob[5];
	g->work = g->logits = glob[6];
	g->lweights = g->cfg.loss_weighting != LOOM_LOSSW_NONE ? glob[7] : NULL;
	g->hr = hr;
	g->res2 = res2;
	g->n_acts = n;
	g->acts_N = N;
	return 0;
}

/* The batch inputs[B,T] (targets[B,T] or NULL) into g->inputs and
 * g->targets: padded (N = B*T), or, with targets whose rows end early
 * (a tail of ignore_id targets) unless g->padded or tensor parallelism,
 * each row up to its last counted target, packed (off, at, pos; N their
 * count; see loom_gpt.h).  A batch of only ignored targets runs padded. */
static int take_rows(struct loom_gpt *g, const int32_t *inputs, const int32_t *targets, int B,
		     int T)
{
	size_t BT = (size_t)B * T;
	if (BT > g->io_cap) { /* inputs, targets, pat, pos [BT]; off [B+1] */
		free(g->inputs);
		g->inputs = malloc(sizeof(int32_t) * (5 * BT + 1));
		g->io_cap = g->inputs ? BT : 0;
		if (!g->inputs)
			return loom_err_set(&g->err, LOOM_ENOMEM,
					    "out of memory for a batch of %dx%d", B, T);
		g->targets = g->inputs + BT;
		g->pat = g->targets + BT;
		g->pos = g->pat + BT;
		g->off = g->pos + BT;
	}
	g->B = B;
	g->T = T;
	int ign = g->cfg.ignore_id, n = 0;
	for (int b = 0; targets && !g->padded && g->tp == 1 && b < B; b++) {
		int len = T;
		while (len > 0 && targets[(size_t)b * T + len - 1] == ign)
			len--;
		g->off[b] = n;
		n += len;
	}
	g->packed = n > 0 && (size_t)n < BT;
	if (!g->packed) {
		g->N = (int)BT;
		memcpy(g->inputs, inputs, BT * sizeof(int32_t));
		if (targets)
			memcpy(g->targets, targets, BT * sizeof(int32_t));
		return 0;
	}
	g->off[B] = n;
	g->N = n;
	for (int b = 0; b < B; b++)
		for (int t = 0, i = g->off[b]; i < g->off[b + 1]; t++, i++) {
			size_t at = (size_t)b * T + t;
			g->pat[i] = (int32_t)at;
			g->pos[i] = t;
			g->inputs[i] = inputs[at];
			g->targets[i] = targets[at];
		}
	return 0;
}

/* ---- forward ------------------------------------------------------------ */

/* Projection j of layer l: out[N,OC] = inp[N,IC] @ w + b, on the live
 * blocks when it is sparse.  Tensor parallelism: a row-split product
 * (j 1, 3) makes a partial sum, the bias added by rank 0 only. */
static void proj_fwd(struct loom_gpt *g, int l, int j, float *out, const float *inp, int N,
		     int IC, int OC)
{
	float *p = g->params;
	int k = proj_k[j];
	struct loom_sparse *s = g->sp ? g->sp[4 * l + j] : NULL;
	const float *bias = (j & 1) && g->tp_rank ? NULL : LP(g, p, l, k + 1);
	double t0 = LOOM_PROF_BEGIN();
	if (s)
		loom_sparse_matmul_fwd(s, out, inp, LP(g, p, l, k + 1), N);
	else
		loom_k_matmul_fwd(g->mm, out, inp, LP(g, p, l, k), bias, N, IC, OC);
	LOOM_PROF_END(LOOM_PROF_PHASE(LOOM_PROF_MATMUL_FWD), t0);
	if (g->dist.tick)
		LOOM_PROF(LOOM_PROF_COMM, g->dist.tick(g->dist.ctx););
}

/* Its backward: dinp overwritten, weight and bias gradients added; a
 * sparse projection's weight gradient covers the live blocks only,
 * except on a mask-update step (dense, for the regrowth scores). */
static void proj_bwd(struct loom_gpt *g, int l, int j, float *dinp, const float *dout,
		     const float *inp, int N, int IC, int OC)
{
	float *p = g->params, *dp = g->grads;
	int k = proj_k[j];
	struct loom_sparse *s = g->sp ? g->sp[4 * l + j] : NULL;
	double t0 = LOOM_PROF_BEGIN();
	if (s && !g->rigl_dense)
		loom_sparse_matmul_bwd(s, dinp, LP(g, dp, l, k), LP(g, dp, l, k + 1), dout, inp, N);
	else
		loom_k_matmul_bwd(g->mm, dinp, LP(g, dp, l, k), LP(g, dp, l, k + 1), dout, inp,
				  LP(g, p, l, k), N, IC, OC);
	LOOM_PROF_END(LOOM_PROF_MATMUL_BWD, t0);
	if (g->dist.tick)
		LOOM_PROF(LOOM_PROF_COMM, g->dist.tick(g->dist.ctx););
}

/* Tensor parallelism: x[0..n) summed over the tp ranks (tp 1: nothing). */
static int tp_sum(struct loom_gpt *g, float *x, size_t n)
{
	struct loom_tp t = team(g);
	int rc = 0;
	if (g->tp > 1)
		LOOM_PROF(LOOM_PROF_COMM, rc = loom_tp_sum(&t, x, n););
	return rc;
}

/* Sequence parallelism: buf[N,C] with this rank's rows r0.. set gets
 * every rank's (an all-gather; without it the rows are all there). */
static int sp_gather(struct loom_gpt *g, float *buf)
{
	struct loom_tp t = team(g);
	return loom_tp_rows_gather(&t, buf, (size_t)g->Nr * g->C);
}

/* The partial sums in[N,C] of a row-parallel product (or of the
 * LayerNorm input gradient of a column-parallel one) summed over the
 * ranks: in place, *y = in (an all-reduce; tp 1: nothing); sequence
 * parallelism: this rank's rows of the sum into out[Nr,C] (a
 * reduce-scatter; out may be in), *y = out. */
static int tp_out(struct loom_gpt *g, float *in, float *out, float **y)
{
	struct loom_tp t = team(g);
	return loom_tp_rows_sum(&t, in, out, (size_t)g->Nr * g->C, y);
}

/* Dropout of this rank's rows x[Nr,C] into out (may be x) by the whole
 * [N,C]'s mask under key: sequence parallelism draws rows r0.. of it. */
static void drop_rows(const struct loom_gpt *g, float *out, const float *x, float p, uint64_t key)
{
	if (g->seq || g->packed)
		loom_k_dropout_at(out, x, g->Nr, g->C, p, key, g->seq ? g->at : g->pat);
	else if (out == x)
		loom_k_dropout(out, (size_t)g->Nr * g->C, p, key);
	else
		loom_k_dropout_copy(out, x, (size_t)g->Nr * g->C, p, key);
}

/* The output gradient of a dropped row-parallel product (backward): *d
 * the dropped dres (in tmp; dres itself when nothing drops); sequence
 * parallelism: this rank's rows dropped into its rows of tmp, then every
 * rank's gathered. */
static int drop_grad(struct loom_gpt *g, float p, uint64_t key, const float **d)
{
	*d = g->dres;
	if (p <= 0 && !g->seq)
		return 0;
	LOOM_PROF(LOOM_PROF_ELEM_BWD,
		  drop_rows(g, g->tmp + (size_t)g->r0 * g->C, g->dres, p, key););
	*d = g->tmp;
	return sp_gather(g, g->tmp);
}

/* Sequence parallelism: LayerNorm gradients of this rank's tokens d[2C
 * pairs] (weight and bias, C each) summed over the ranks and added to
 * the pairs' gradients at dst[k] (a weight's, its bias's after it). */
static int sp_ln_grads(struct loom_gpt *g, float *d, int pairs, float *const *dst)
{
	struct loom_tp t = team(g);
	return loom_tp_sum_add(&t, d, 2 * (size_t)g->C, pairs, dst);
}

static int layer_fwd(struct loom_gpt *g, int l, const float *x, struct loom_gpt_lacts *a)
{
	int B = g->B, T = g->T, C = g->C, N = g->N, Cl = g->Cl, F = g->Fl, Nr = g->Nr, rc;
	float *p = g->params, eps = (float)g->cfg.layer_norm_epsilon, *y;
	float *ln = g->tmp + (size_t)g->r0 * C; /* this rank's rows of tmp */
	float drop = g->train ? (float)g->cfg.dropout : 0.0f;
	float adrop = g->train ? (float)g->cfg.attn_dropout : 0.0f;

	/* the LayerNorm outputs live in tmp until their matmul has read them;
	 * backward recomputes them from the saved mean and rstd (sequence
	 * parallelism: of this rank's rows x[Nr,C], then gathered) */
	LOOM_PROF(LOOM_PROF_PHASE(LOOM_PROF_LN_FWD),
		  loom_k_layernorm_fwd(ln, a->ln1_mean, a->ln1_rstd, x, LP(g, p, l, LN1W),
				       LP(g, p, l, LN1B), Nr, C, eps););
	if ((rc = sp_gather(g, g->tmp)))
		return rc;
	proj_fwd(g, l, 0, a->qkv, g->tmp, N, C, 3 * Cl);
	LOOM_PROF(LOOM_PROF_PHASE(LOOM_PROF_ATTN_FWD),
		  rc = loom_k_attention_fwd_heads(a->atty, a->lse, a->qkv, NULL,
						  g->packed ? g->off : NULL, B, T, Cl,
						  g->NHl, g->tp_rank * g->NHl, g->NH, adrop,
						  loom_model_site_key(g->key, l, 3)););
	if (rc)
		return loom_err_set(&g->err, LOOM_ENOMEM, "out of memory in attention");
	proj_fwd(g, l, 1, g->tmp, a->atty, N, Cl, C);
	/* res2 in its own slot, or (not kept) in the output's */
	float *res2 = a->res2 ? a->res2 : a->res3;
	if ((rc = tp_out(g, g->tmp, res2, &y)))
		return rc;
	LOOM_PROF(LOOM_PROF_PHASE(LOOM_PROF_ELEM_FWD),
		  drop_rows(g, y, y, drop, loom_model_site_key(g->key, l, 1));
		  loom_k_residual_fwd(res2, x, y, (size_t)Nr * C););
	LOOM_PROF(LOOM_PROF_PHASE(LOOM_PROF_LN_FWD),
		  loom_k_layernorm_fwd(ln, a->ln2_mean, a->ln2_rstd, res2, LP(g, p, l, LN2W),
				       LP(g, p, l, LN2B), Nr, C, eps););
	if ((rc = sp_gather(g, g->tmp)))
		return rc;
	proj_fwd(g, l, 2, a->fch, g->tmp, N, C, F);
	LOOM_PROF(LOOM_PROF_PHASE(LOOM_PROF_GELU_FWD),
		  loom_k_gelu_fwd(g->work, a->fch, (size_t)N * F););
	proj_fwd(g, l, 3, g->tmp, g->work, N, F, C);
	if ((rc = tp_out(g, g->tmp, g->tmp, &y))) /* (res3 may be res2's slot) */
		return rc;
	LOOM_PROF(LOOM_PROF_PHASE(LOOM_PROF_ELEM_FWD),
		  drop_rows(g, y, y, drop, loom_model_site_key(g->key, l, 2));
		  loom_k_residual_fwd(a->res3, res2, y, (size_t)Nr * C););
	return 0;
}

/* encoded = drop(wte[inputs] + wpe): by forward, and again by backward
 * before layer 0 when encoded shares layer 1's output slot.  Tensor
 * parallelism: each rank looks up the rows of its ids (wpe added by rank
 * 0), the sum over the ranks is the lookup (sequence parallelism: this
 * rank's rows of the sum, reduce-scattered from tmp). */
static int embed(struct loom_gpt *g)
{
	int B = g->B, T = g->T, C = g->C, rc;
	float *p = g->params, *y;
	double t0 = LOOM_PROF_BEGIN();
	float *e = g->seq ? g->tmp : g->encoded;
	loom_k_encoder_fwd(e, g->inputs, TP(g, p, T_WTE), g->tp_rank * g->Vl, g->Vl,
			   g->tp_rank ? NULL : TP(g, p, T_WPE), NULL, NULL,
			   g->packed ? g->pos : NULL, g->packed ? 1 : B, g->packed ? g->N : T, C);
	LOOM_PROF_END(LOOM_PROF_PHASE(LOOM_PROF_EMBED_FWD), t0);
	if ((rc = tp_out(g, e, g->encoded, &y)))
		return rc;
	t0 = LOOM_PROF_BEGIN();
	drop_rows(g, g->encoded, g->encoded, g->train ? (float)g->cfg.dropout : 0.0f,
		  loom_model_site_key(g->key, -1, 0));
	LOOM_PROF_END(LOOM_PROF_PHASE(LOOM_PROF_EMBED_FWD), t0);
	return 0;
}

/* Embeddings and all blocks; returns the final hidden states [N,C], or
 * NULL (error in g->err).  head_next: the unit read after ln_f (-1: the
 * LM head, which keeps the embeddings' unit from the start). */
static const float *trunk_fwd(struct loom_gpt *g, int head_next)
{
	if (unit_need(g, -1, 0) || embed(g))
		return NULL;
	if (head_next != -1) /* else kept for the head (tied to wte) */
		unit_done(g, -1);
	const float *x = g->encoded;
	for (int l = 0; l < g->L; l++) {
		if (unit_need(g, l, l + 1 < g->L ? l + 1 : head_next) ||
		    layer_fwd(g, l, x, &g->layer[l]))
			return NULL;
		if (l + 1 < g->L)
			unit_done(g, l);
		x = g->layer[l].res3;
	}
	return x; /* unit L-1 still present, for ln_f */
}

/* Rows of probs[n,V] whose argmax (the first largest) is their target. */
static int64_t count_correct(const float *probs, const int32_t *targets, int n, int V,
			     int ignore_id)
{
	int64_t correct = 0;
	#pragma omp parallel for schedule(static) reduction(+:correct)
	for (int i = 0; i < n; i++)
		if (targets[i] != ignore_id)
			correct += loom_model_argmax(probs + (size_t)i * V, V) == targets[i];
	return correct;
}

/* The loss of the head's chunk r0..r0+n from its logits (made by the
 * caller): logits become probabilities; with ncorrect the argmax hits
 * counted.  Tensor parallelism: the vocabulary-parallel cross-entropy. */
static int head_loss(struct loom_gpt *g, size_t r0, int n, int64_t *ncorrect)
{
	int ign = g->cfg.ignore_id, rc = 0;
	double t0 = LOOM_PROF_BEGIN();
	if (g->tp > 1) {
		struct loom_tp t = team(g);
		rc = loom_tp_xent(&t, g->logits, n, g->Vl, g->V, g->targets + r0, ign,
				  g->losses + r0, g->xent, ncorrect);
	} else {
		loom_k_crossentropy_fwd(g->logits, g->losses + r0, g->targets + r0, n, g->V, ign);
		if (ncorrect)
			*ncorrect += count_correct(g->logits, g->targets + r0, n, g->V, ign);
	}
	LOOM_PROF_END(LOOM_PROF_XENT_FWD, t0);
	return rc;
}

/* The chunk's backward: dlogits from the probabilities (objective scale
 * dloss), dwte += dlogits^T @ lnf, dlnf = dlogits @ wte into the chunk's
 * rows of tmp (tensor parallelism: summed over the ranks). */
static int head_grad(struct loom_gpt *g, size_t r0, int n, float dloss)
{
	int C = g->C, Vl = g->Vl, v0 = g->tp_rank * Vl, ign = g->cfg.ignore_id;
	const float *lnf = g->lnf + r0 * C, *w = g->lweights ? g->lweights + r0 : NULL;
	float *p = g->params, *dp = g->grads;
	LOOM_PROF(LOOM_PROF_XENT_BWD,
		  loom_k_crossentropy_bwd(g->logits, g->targets + r0, n, Vl, v0, ign, dloss, w););
	double t0 = LOOM_PROF_BEGIN();
	loom_mm_pin(g->mm, g->logits, (size_t)n * Vl); /* bf16: converted once for both */
	loom_mm_gemm(g->mm, 1, 0, Vl, C, n, g->logits, lnf, 1, TP(g, dp, T_WTE));
	loom_mm_gemm(g->mm, 0, 0, n, C, Vl, g->logits, TP(g, p, T_WTE), 0, g->tmp + r0 * C);
	loom_mm_unpin(g->mm);
	LOOM_PROF_END(LOOM_PROF_MATMUL_BWD, t0);
	/* (sequence parallelism: reduce-scattered whole by backward) */
	return g->seq ? 0 : tp_sum(g, g->tmp + r0 * C, (size_t)n * C);
}

/* The loss weights of the batch's targets, row by row: packed rows over
 * their computed tokens (the tail cut off held no counted target). */
static void token_weights(struct loom_gpt *g)
{
	int ign = g->cfg.ignore_id;
	if (!g->packed) {
		loom_k_token_weights(g->lweights, g->targets, g->B, g->T, ign);
		return;
	}
	for (int b = 0; b < g->B; b++) {
		int o = g->off[b];
		loom_k_token_weights(g->lweights + o, g->targets + o, 1, g->off[b + 1] - o, ign);
	}
}

/* The LM head and loss over lnf, chunk by chunk: logits[n,V] = lnf[n,C] @
 * wte[V,C]^T, then their probabilities; only the per-row losses are kept,
 * and (not training: evaluation) the count of argmax hits.  With
 * bscale >= 0 (a training step whose backward follows) each chunk's
 * gradient is taken at once, while its logits are at hand, instead of
 * being recomputed by backward: dlogits for the objective bscale * wloss,
 * dwte += dlogits^T @ lnf and dlnf = dlogits @ wte into the chunk's rows
 * of lnf (tmp), which no later chunk reads. */
static int head(struct loom_gpt *g, int train, float bscale)
{
	size_t N = (size_t)g->N;
	int C = g->C, Vl = g->Vl, ign = g->cfg.ignore_id, rc;
	float *p = g->params;
	if (g->lweights)
		LOOM_PROF(LOOM_PROF_XENT_FWD, token_weights(g););
	int64_t counted = 0; /* the loss's tokens, known up front */
	for (size_t i = 0; i < N; i++)
		counted += g->targets[i] != ign;
	g->ntok = (int)counted;
	float dloss = counted ? bscale / (float)counted : 0.0f;
	for (size_t r0 = 0; r0 < N; r0 += g->hr) {
		int n = (int)(N - r0 < g->hr ? N - r0 : g->hr);
		const float *lnf = g->lnf + r0 * C;
		LOOM_PROF(LOOM_PROF_MATMUL_FWD,
			  loom_mm_gemm(g->mm, 0, 1, n, Vl, C, lnf, TP(g, p, T_WTE), 0, g->logits););
		if ((rc = head_loss(g, r0, n, train ? NULL : &g->ncorrect)) ||
		    (bscale >= 0 && counted && (rc = head_grad(g, r0, n, dloss))))
			return rc;
	}
	if ((rc = loom_mm_check(g->mm, &g->err)))
		return rc;
	double s = 0;
	for (size_t i = 0; i < N; i++)
		s += g->losses[i];
	g->loss = g->ntok ? (float)(s / g->ntok) : 0.0f;
	g->wloss = g->loss;
	if (g->lweights) {
		/* the training objective: sum(w * loss) / ntok (see loom_gpt.h);
		 * backward uses the same weights */
		double ws = 0;
		for (size_t i = 0; i < N; i++)
			ws += (double)g->lweights[i] * g->losses[i];
		g->wloss = g->ntok ? (float)(ws / g->ntok) : 0.0f;
	}
	g->head_done = bscale >= 0;
	return 0;
}

/* Tensor parallelism: every rank of the group must compute on the same
 * batch (its replica's frames): its inputs and targets hashed and the
 * hashes compared over the ranks. */
static int tp_same_batch(struct loom_gpt *g, size_t N, int targets)
{
	struct loom_tp t = team(g);
	uint64_t h = loom_tp_hash(0, g->inputs, N);
	int rc = loom_tp_ready(&t);
	return rc ? rc : loom_tp_same_batch(&t, targets ? loom_tp_hash(h, g->targets, N) : h);
}

/* loom_gpt_forward, and with bscale >= 0 the LM head's backward too */
static int forward(struct loom_gpt *g, const int32_t *inputs, const int32_t *targets, int B,
		   int T, int train, uint64_t key, float bscale, float *loss)
{
	int rc;
	if (B < 1 || T < 1 || T > g->P)
		return loom_err_set(&g->err, LOOM_EINVAL,
				    "batch %dx%d: T must be in 1..n_positions (%d)", B, T, g->P);
	size_t N = (size_t)B * T;
	if ((rc = loom_model_check_ids(inputs, N, g->V, NULL, "input token", "the vocabulary",
				       &g->err)))
		return rc;
	if (targets && (rc = loom_model_check_ids(targets, N, g->V, &g->cfg.ignore_id,
						  "target token", "the vocabulary", &g->err)))
		return rc;
	g->have_targets = 0;
	if ((rc = take_rows(g, inputs, targets, B, T)) || (rc = ensure_acts(g)) ||
	    (rc = ready_mm(g)) || (rc = ready_sparse(g)))
		return rc;
	g->have_targets = targets != NULL;
	g->head_done = 0;
	if (g->tp > 1 && (rc = tp_same_batch(g, N, targets != NULL)))
		return rc;
	g->train = train;
	g->key = key;
	float *p = g->params;
	const float *x = trunk_fwd(g, targets ? -1 : LOOM_GPT_UNIT_NONE);
	if (!x)
		return g->err.code;
	/* (sequence parallelism: this rank's rows, then every rank's: the
	 * vocabulary-parallel head reads all tokens) */
	LOOM_PROF(LOOM_PROF_LN_FWD,
		  loom_k_layernorm_fwd(g->lnf + (size_t)g->r0 * g->C, g->lnf_mean, g->lnf_rstd, x,
				       TP(g, p, T_LNFW(g->L)), TP(g, p, T_LNFB(g->L)), g->Nr, g->C,
				       (float)g->cfg.layer_norm_epsilon););
	if ((rc = sp_gather(g, g->lnf)))
		return rc;
	unit_done(g, g->L - 1);
	g->loss = 0;
	g->wloss = 0;
	g->ntok = 0;
	g->ncorrect = 0;
	if (targets && ((rc = unit_need(g, -1, bscale >= 0 ? g->L - 1 : LOOM_GPT_UNIT_NONE)) ||
			(rc = head(g, train, bscale))))
		return rc;
	if (targets)
		unit_done(g, -1);
	if (loss)
		*loss = g->loss;
	return 0;
}

int loom_gpt_forward(struct loom_gpt *g, const int32_t *inputs, const int32_t *targets,
		     int B, int T, int train, uint64_t key, float *loss)
{
	return forward(g, inputs, targets, B, T, train, key, -1.0f, loss);
}

int loom_gpt_train_micro(struct loom_gpt *g, const int32_t *inputs, const int32_t *targets,
			 int B, int T, uint64_t key, float scale, float *loss)
{
	if (!targets || scale < 0)
		return loom_err_set(&g->err, LOOM_EINVAL,
				    "a training micro-batch needs targets and a scale >= 0");
	int rc = forward(g, inputs, targets, B, T, 1, key, scale, loss);
	return rc ? rc : loom_gpt_backward(g, scale);
}

/* ---- backward ----------------------------------------------------------- */

/* dres holds d(layer output); on return d(layer input).  The shared
 * buffers: tmp [N,C] holds a LayerNorm output (recomputed from the saved
 * mean and rstd) or a dropped gradient, and then the input gradient of the
 * product that read it (matmul_bwd writes dinp after using inp); work
 * [N,4C] holds gelu(fch) (recomputed), then its gradient, then the
 * attention's [N,3C] dqkv and [N,C] dout.  A res2 not kept is rebuilt
 * in the output's slot, whose value layer l+1 has used. */
static int layer_bwd(struct loom_gpt *g, int l, const float *x, struct loom_gpt_lacts *a)
{
	int B = g->B, T = g->T, C = g->C, N = g->N, Cl = g->Cl, F = g->Fl, Nr = g->Nr, rc;
	float *p = g->params, *dp = g->grads, eps = (float)g->cfg.layer_norm_epsilon;
	float drop = g->train ? (float)g->cfg.dropout : 0.0f;
	float adrop = g->train ? (float)g->cfg.attn_dropout : 0.0f;
	float *work = g->work, *res2 = a->res2, *ln = g->tmp + (size_t)g->r0 * C, *y;
	const float *dproj;
	/* the LayerNorm gradients: sequence parallelism sums its tokens'
	 * share in lnd [ln_1 weight, bias, ln_2 weight, bias] over the ranks */
	float *dln = g->seq ? g->lnd : NULL;
	float *dw1 = dln ? dln : LP(g, dp, l, LN1W), *db1 = dln ? dln + C : LP(g, dp, l, LN1B);
	float *dw2 = dln ? dln + 2 * C : LP(g, dp, l, LN2W);
	float *db2 = dln ? dln + 3 * C : LP(g, dp, l, LN2B);

	if (dln)
		memset(dln, 0, sizeof(float) * 4 * (size_t)C);
	if (!res2) {
		res2 = a->res3;
		proj_fwd(g, l, 1, g->tmp, a->atty, N, Cl, C);
		if ((rc = tp_out(g, g->tmp, res2, &y)))
			return rc;
		LOOM_PROF(LOOM_PROF_ELEM_BWD,
			  drop_rows(g, y, y, drop, loom_model_site_key(g->key, l, 1));
			  loom_k_residual_fwd(res2, x, y, (size_t)Nr * C););
	}
	/* MLP: res3 = res2 + drop(gelu(fch) @ Wfcp + b) */
	if ((rc = drop_grad(g, drop, loom_model_site_key(g->key, l, 2), &dproj)))
		return rc;
	LOOM_PROF(LOOM_PROF_GELU_BWD, loom_k_gelu_fwd(work, a->fch, (size_t)N * F););
	proj_bwd(g, l, 3, work, dproj, work, N, F, C);
	LOOM_PROF(LOOM_PROF_GELU_BWD, loom_k_gelu_bwd(work, a->fch, work, (size_t)N * F););
	LOOM_PROF(LOOM_PROF_LN_BWD,
		  loom_k_layernorm_fwd(ln, a->ln2_mean, a->ln2_rstd, res2, LP(g, p, l, LN2W),
				       LP(g, p, l, LN2B), Nr, C, eps););
	if ((rc = sp_gather(g, g->tmp)))
		return rc;
	proj_bwd(g, l, 2, g->tmp, work, g->tmp, N, C, F);
	if ((rc = tp_out(g, g->tmp, g->tmp, &y)))
		return rc;
	LOOM_PROF(LOOM_PROF_LN_BWD,
		  loom_k_layernorm_bwd(g->dres, dw2, db2, y, res2, LP(g, p, l, LN2W), a->ln2_mean,
				       a->ln2_rstd, Nr, C););
	/* attention: res2 = x + drop(atty @ Wproj + b) */
	float *dqkv = work, *datty = work + (size_t)N * 3 * Cl;
	if ((rc = drop_grad(g, drop, loom_model_site_key(g->key, l, 1), &dproj)))
		return rc;
	proj_bwd(g, l, 1, datty, dproj, a->atty, N, Cl, C);
	LOOM_PROF(LOOM_PROF_ATTN_BWD,
		  rc = loom_k_attention_bwd_heads(dqkv, datty, a->qkv, a->atty, a->lse, NULL,
						  g->packed ? g->off : NULL, B, T, Cl, g->NHl,
						  g->tp_rank * g->NHl, g->NH, adrop,
						  loom_model_site_key(g->key, l, 3)););
	if (rc)
		return loom_err_set(&g->err, LOOM_ENOMEM, "out of memory in attention backward");
	LOOM_PROF(LOOM_PROF_LN_BWD,
		  loom_k_layernorm_fwd(ln, a->ln1_mean, a->ln1_rstd, x, LP(g, p, l, LN1W),
				       LP(g, p, l, LN1B), Nr, C, eps););
	if ((rc = sp_gather(g, g->tmp)))
		return rc;
	proj_bwd(g, l, 0, g->tmp, dqkv, g->tmp, N, C, 3 * Cl);
	if ((rc = tp_out(g, g->tmp, g->tmp, &y)))
		return rc;
	LOOM_PROF(LOOM_PROF_LN_BWD,
		  loom_k_layernorm_bwd(g->dres, dw1, db1, y, x, LP(g, p, l, LN1W), a->ln1_mean,
				       a->ln1_rstd, Nr, C););
	return dln ? sp_ln_grads(g, dln, 2, (float *const[]){ LP(g, dp, l, LN1W), LP(g, dp, l, LN2W) })
		   : 0;
}

static int backward(struct loom_gpt *g, float scale)
{
	if (!g->acts || !g->have_targets)
		return loom_err_set(&g->err, LOOM_EINVAL, "backward without a forward with targets");
	int B = g->B, T = g->T, C = g->C, Vl = g->Vl, N = g->N, L = g->L, rc;
	float *p = g->params, *dp = g->grads;
	if (!g->ntok && !g->dist.need)
		return 0; /* every target ignored: no gradient */
	/* (sharded weights: backward's gathers are collective, so it runs,
	 * with a zero gradient) */
	float dloss = g->ntok ? scale / (float)g->ntok : 0.0f;
	if (!g->ntok) { /* dlnf = 0 (the head took no gradient) */
		memset(g->tmp, 0, sizeof(float) * N * C);
		g->head_done = 1;
	}
	if (!g->head_done && (rc = unit_need(g, -1, L - 1)))
		return rc;
	/* the LM head, unless loom_gpt_train_micro's forward took it (head()):
	 * chunk by chunk as in forward, recompute the logits and their
	 * probabilities (the losses come out as before; one chunk is still
	 * there from forward), turn them into dlogits, then
	 * dwte += dlogits^T @ lnf and dlnf = dlogits @ wte over the chunk's
	 * rows of lnf (tmp), which no later chunk reads */
	for (size_t r0 = 0; !g->head_done && r0 < (size_t)N; r0 += g->hr) {
		int n = (int)((size_t)N - r0 < g->hr ? (size_t)N - r0 : g->hr);
		if (g->hr < (size_t)N) {
			LOOM_PROF(LOOM_PROF_MATMUL_BWD,
				  loom_mm_gemm(g->mm, 0, 1, n, Vl, C, g->lnf + r0 * C, TP(g, p, T_WTE),
					       0, g->logits););
			if ((rc = head_loss(g, r0, n, NULL)))
				return rc;
		}
		if ((rc = head_grad(g, r0, n, dloss)))
			return rc;
	}
	if (!g->head_done)
		unit_done(g, -1);
	float *y, *dlnf = g->seq ? g->lnd : TP(g, dp, T_LNFW(L)); /* (then ln_f.bias's) */
	if ((rc = unit_need(g, L - 1, L > 1 ? L - 2 : LOOM_GPT_UNIT_NONE)))
		return rc;
	if (g->seq) { /* dlnf: the head's partial sums reduce-scattered, this rank's rows */
		memset(dlnf, 0, sizeof(float) * 2 * C);
		if ((rc = tp_out(g, g->tmp, g->tmp, &y)))
			return rc;
	}
	memset(g->dres, 0, sizeof(float) * g->Nr * C);
	LOOM_PROF(LOOM_PROF_LN_BWD,
		  loom_k_layernorm_bwd(g->dres, dlnf, dlnf + C, g->tmp, g->layer[L - 1].res3,
				       TP(g, p, T_LNFW(L)), g->lnf_mean, g->lnf_rstd, g->Nr, C););
	if (g->seq && (rc = sp_ln_grads(g, dlnf, 1, (float *const[]){ TP(g, dp, T_LNFW(L)) })))
		return rc;
	for (int l = L - 1; l >= 0; l--) {
		const float *x = l ? g->layer[l - 1].res3 : g->encoded;
		if (!l && x == g->layer[L > 1].res3 && (rc = embed(g)))
			return rc; /* encoded shares layer 1's output slot */
		if (l < L - 1 && (rc = unit_need(g, l, l ? l - 1 : LOOM_GPT_UNIT_NONE)))
			return rc;
		if (g->cfg.recompute && (rc = layer_fwd(g, l, x, &g->layer[l])))
			return rc;
		if ((rc = layer_bwd(g, l, x, &g->layer[l])))
			return rc;
		if (g->dist.grad_ready)
			LOOM_PROF(LOOM_PROF_COMM, g->dist.grad_ready(g->dist.ctx, l););
		unit_done(g, l);
	}
	const float *demb = g->dres;
	float drop = g->train ? (float)g->cfg.dropout : 0.0f;
	if (g->seq && (rc = drop_grad(g, drop, loom_model_site_key(g->key, -1, 0), &demb)))
		return rc; /* every rank's tokens, for its vocabulary rows */
	double t0 = LOOM_PROF_BEGIN();
	if (!g->seq)
		drop_rows(g, g->dres, g->dres, drop, loom_model_site_key(g->key, -1, 0));
	/* (tensor parallelism: dwte of this rank's ids; dwpe on every rank,
	 * the gradient being the same on each) */
	loom_k_encoder_bwd(TP(g, dp, T_WTE), g->tp_rank * Vl, Vl, TP(g, dp, T_WPE), NULL, demb,
			   g->inputs, NULL, g->packed ? g->pos : NULL, g->packed ? 1 : B,
			   g->packed ? N : T, C);
	LOOM_PROF_END(LOOM_PROF_EMBED_BWD, t0);
	g->have_targets = 0;
	g->head_done = 0;
	if ((rc = loom_mm_check(g->mm, &g->err)))
		return rc;
	if (g->dist.grad_ready)
		LOOM_PROF(LOOM_PROF_COMM, g->dist.grad_ready(g->dist.ctx, -1););
	return 0;
}

int loom_gpt_backward(struct loom_gpt *g, float scale)
{
	loom_prof_backward(1);
	int rc = backward(g, scale);
	loom_prof_backward(0);
	return rc;
}

void loom_gpt_zero_grad(struct loom_gpt *g)
{
	memset(g->grads, 0, g->n_params * sizeof(float));
}

void loom_gpt_step(struct loom_gpt *g, float lr, int64_t t, float *norm)
{
	const struct loom_config *c = &g->cfg;
	struct loom_adamw h = { c->beta1, c->beta2, c->eps, c->weight_decay, c->grad_clip };
	if (g->tp > 1) { /* on this rank's slices, clipped by the whole model's
			  * norm; a failed all-reduce leaves the weights as they
			  * were, the error in g->err (loom_dist_step reports it) */
		struct loom_tp tt = team(g);
		int rc;
		LOOM_PROF(LOOM_PROF_OPTIM,
			  rc = loom_tp_step(&tt, g->params, g->grads, g->m, g->v, &h, lr, t, norm););
		if (!rc)
			g->w16_ok = 0;
		return;
	}
	int update = g->rigl_dense;
	double t0 = LOOM_PROF_BEGIN();
	if (update) { /* score the blocks by the dense gradient, then mask it */
		loom_rigl_score_reset(g->rigl);
		loom_rigl_score_range(g->rigl, 0, g->n_params, g->grads);
		loom_rigl_mask_range(g->rigl, 0, g->n_params, g->grads);
	}
	LOOM_PROF_END(LOOM_PROF_RIGL, t0);
	LOOM_PROF(LOOM_PROF_OPTIM,
		  loom_model_adamw(g->tensors, g->n_tensors, g->params, g->grads, g->m, g->v,
				   g->n_params, &h, lr, t, norm););
	g->w16_ok = 0;
	g->sp_ok = 0;
	if (update)
		LOOM_PROF(LOOM_PROF_RIGL, loom_gpt_rigl_update(g, t););
	g->rigl_dense = 0;
}

void loom_gpt_eval_counts(const struct loom_gpt *g, double *nll, int64_t *ntok,
			  int64_t *ncorrect)
{
	int N = g->N;
	double s = 0;
	if (!g->have_targets) {
		*nll = 0;
		*ntok = 0;
		*ncorrect = 0;
		return;
	}
	for (int n = 0; n < N; n++)
		s += g->losses[n];
	*nll = s;
	*ntok = g->ntok;
	*ncorrect = g->ncorrect;
}

/* ---- generation ----------------------------------------------------------- */

int loom_gpt_logits_last(struct loom_gpt *g, const int32_t *tok, int n, float *out)
{
	struct loom_tp t = team(g);
	int rc;
	if (n < 1 || n > g->P)
		return loom_err_set(&g->err, LOOM_EINVAL,
				    "sequence of %d tokens: must be 1..n_positions (%d)", n, g->P);
	if ((rc = loom_tp_ready(&t)) ||
	    (rc = loom_model_check_ids(tok, (size_t)n, g->V, NULL, "input token",
				       "the vocabulary", &g->err)))
		return rc;
	if ((rc = take_rows(g, tok, NULL, 1, n)) || (rc = ensure_acts(g)) || (rc = ready_mm(g)) ||
	    (rc = ready_sparse(g)))
		return rc;
	g->have_targets = 0;
	g->train = 0;
	g->key = 0;
	int C = g->C;
	float *p = g->params;
	const float *x = trunk_fwd(g, -1);
	if (!x)
		return g->err.code;
	x += (size_t)(n - 1) * C;
	loom_k_layernorm_fwd(g->lnf, g->lnf_mean, g->lnf_rstd, x, TP(g, p, T_LNFW(g->L)),
			     TP(g, p, T_LNFB(g->L)), 1, C, (float)g->cfg.layer_norm_epsilon);
	unit_done(g, g->L - 1);
	if ((rc = unit_need(g, -1, LOOM_GPT_UNIT_NONE)))
		return rc;
	/* tensor parallelism: this rank's vocabulary rows, the others' zero,
	 * summed over the ranks (exact: one term each) */
	size_t v0 = (size_t)g->tp_rank * (size_t)g->Vl;
	memset(out, 0, sizeof(float) * (size_t)g->V);
	loom_mm_gemm(g->mm, 0, 1, 1, g->Vl, C, g->lnf, TP(g, p, T_WTE), 0, out + v0);
	unit_done(g, -1);
	if ((rc = loom_mm_check(g->mm, &g->err)))
		return rc;
	return tp_sum(g, out, (size_t)g->V);
}

/* The (k+1)-th largest of a[0..n) (k < n), the value a sort in descending
 * order would leave at a[k]: a quickselect with a three-way partition (so
 * runs of equal values, such as masked -infinity logits, take one pass);
 * a is reordered. */
static float kth_largest(float *a, int n, int k)
{
	int lo = 0, hi = n - 1;
	while (lo < hi) {
		float x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi], p;
		p = x < y ? (y < z ? y : x < z ? z : x) : (x < z ? x : y < z ? z : y); /* median */
		int lt = lo, i = lo, gt = hi;
		while (i <= gt) { /* [lo,lt) > p, [lt,i) == p, (gt,hi] < p */
			float t = a[i];
			if (t > p) {
				a[i++] = a[lt];
				a[lt++] = t;
			} else if (t < p) {
				a[i] = a[gt];
				a[gt--] = t;
			} else {
				i++;
			}
		}
		if (k < lt)
			hi = lt - 1;
		else if (k > gt)
			lo = gt + 1;
		else
			return p;
	}
	return a[k];
}

int loom_gpt_sample(const float *logits, int V, float temperature, int top_k, float *scratch,
		    uint64_t *rng)
{
	int best = 0;
	for (int v = 1; v < V; v++)
		if (logits[v] > logits[best])
			best = v;
	if (temperature <= 0)
		return best;
	float thresh = -INFINITY;
	if (top_k > 0 && top_k < V) {
		memcpy(scratch, logits, sizeof(float) * V);
		thresh = kth_largest(scratch, V, top_k - 1);
	}
	double sum = 0, mx = logits[best];
	for (int v = 0; v < V; v++)
		if (logits[v] >= thresh)
			sum += exp((logits[v] - mx) / temperature);
	*rng += 0x9e3779b97f4a7c15ull;
	double u = (loom_splitmix64(*rng) >> 11) * (1.0 / 9007199254740992.0) * sum, c = 0;
	for (int v = 0; v < V; v++)
		if (logits[v] >= thresh) {
			c += exp((logits[v] - mx) / temperature);
			if (u < c)
				return v;
		}
	return best;
}

void loom_gpt_split_records(const uint32_t *rec, int B, int rec_len, int T, int32_t *in,
			    int32_t *tg)
{
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			uint32_t x = rec[(size_t)b * rec_len + t], y = rec[(size_t)b * rec_len + t + 1];
			in[(size_t)b * T + t] = x > INT32_MAX ? INT32_MIN : (int32_t)x;
			tg[(size_t)b * T + t] = y > INT32_MAX ? INT32_MIN : (int32_t)y;
		}
}

void loom_gpt_mask_pad(const struct loom_gpt *g, uint32_t pad_id, int32_t *in, int32_t *tg,
		       size_t n)
{
	/* split_records made ids above INT32_MAX INT32_MIN: such a pad_id is
	 * INT32_MIN there (the caller refused other ids outside the vocabulary) */
	int32_t p = pad_id > INT32_MAX ? INT32_MIN : (int32_t)pad_id;
	for (size_t i = 0; i < n; i++) {
		if (in[i] == p)
			in[i] = 0;
		if (tg[i] == p)
			tg[i] = g->cfg.ignore_id;
	}
}

int loom_gpt_eval_frame(struct loom_gpt *g, const struct loom_batch_hdr *h, const uint32_t *tok,
			int T, int32_t *in, int32_t *tg, struct loom_eval_sums *s)
{
	int B = (int)h->batch;
	loom_gpt_split_records(tok, B, (int)h->seq_len, T, in, tg);
	if (h->flags & LOOM_BATCH_F_PAD)
		loom_gpt_mask_pad(g, h->pad_id, in, tg, (size_t)B * T);
	int rc = loom_gpt_forward(g, in, tg, B, T, 0, 0, NULL);
	if (rc < 0)
		return rc;
	double a;
	int64_t b, c;
	loom_gpt_eval_counts(g, &a, &b, &c);
	s->nll += a;
	s->n += b;
	s->correct += c;
	return 0;
}

/* ---- the model interface (loom_model.h) ---------------------------------- */

static size_t ops_n_params(const void *m)
{
	const struct loom_gpt *g = m; /* tensor parallelism: the whole model's */
	return g->tp > 1 ? loom_config_n_params(&g->cfg) : g->n_params;
}

static void ops_plan(const struct loom_config *c, int recompute, struct loom_model_mem *mem)
{
	loom_gpt_memory_plan(c, c->micro_batch, c->seq_len, recompute, mem);
}

static void ops_begin_step(void *m, int64_t step)
{
	loom_gpt_begin_step(m, step);
}

static void ops_step(void *m, float lr, int64_t step, float *norm)
{
	loom_gpt_step(m, lr, step, norm);
}

/* records of T+1 tokens -> T inputs and their next-token targets (at
 * s->buf: the inputs, then the targets) */
static int ops_split(struct loom_gpt *g, const struct loom_config *c, const struct loom_frame *f,
		     struct loom_model_scratch *s, int32_t **in, int32_t **tg)
{
	int B = (int)f->h->batch, T = c->seq_len;
	if (!loom_model_scratch_get(s, 2 * (size_t)B * T))
		return loom_err_set(&g->err, LOOM_ENOMEM, "out of memory");
	*in = s->buf;
	*tg = s->buf + (size_t)B * T;
	return 0;
}

static int ops_micro(void *m, const struct loom_config *c, const struct loom_frame *f,
		     struct loom_model_scratch *s, uint64_t key, float scale, float *loss)
{
	struct loom_gpt *g = m;
	int B = (int)f->h->batch, T = c->seq_len, rc;
	int32_t *in = NULL, *tg = NULL;
	if ((rc = ops_split(g, c, f, s, &in, &tg)))
		return rc;
	loom_gpt_split_records(f->tok, B, (int)f->h->seq_len, T, in, tg);
	if (f->h->flags & LOOM_BATCH_F_PAD)
		loom_gpt_mask_pad(g, f->h->pad_id, in, tg, (size_t)B * T);
	return loom_gpt_train_micro(g, in, tg, B, T, key, scale, loss);
}

static int ops_eval(void *m, const struct loom_config *c, const struct loom_frame *f,
		    struct loom_model_scratch *s, struct loom_eval_sums *sums)
{
	int32_t *in = NULL, *tg = NULL;
	int rc = ops_split(m, c, f, s, &in, &tg);
	return rc ? rc : loom_gpt_eval_frame(m, f->h, f->tok, c->seq_len, in, tg, sums);
}

static const char *ops_error(const void *m)
{
	return loom_gpt_error(m);
}

const struct loom_model_ops loom_gpt_ops = {
	.n_params = ops_n_params, .plan = ops_plan, .begin_step = ops_begin_step,
	.step = ops_step, .micro = ops_micro, .eval = ops_eval, .error = ops_error,
};
