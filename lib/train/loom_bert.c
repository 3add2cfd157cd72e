/* loom_bert.c - BERT forward/backward/AdamW over flat arrays; see loom_bert.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_bert.h"
#include "loom_batch.h"
#include "loom_config.h"
#include "loom_dist.h"
#include "loom_kernels.h"
#include "loom_profile.h"
#include "loom_tp.h"

/* Embedding tensors, then per layer, then the head. */
enum { E_WORD, E_POS, E_TYPE, E_LNW, E_LNB, NE };
enum { QW, KW, VW, QB, KB, VB, AOW, AOB, ALNW, ALNB, IW, IB, OW, OB, OLNW, OLNB, NLT };
enum { QAW, QAB, N_QA };                /* QA head */
enum { TDW, TDB, TLNW, TLNB, MBIAS, N_MLM };    /* MLM head */

static const char *const lt_names[NLT] = {
	"attention.self.query.weight", "attention.self.key.weight",
	"attention.self.value.weight", "attention.self.query.bias",
	"attention.self.key.bias", "attention.self.value.bias",
	"attention.output.dense.weight", "attention.output.dense.bias",
	"attention.output.LayerNorm.weight", "attention.output.LayerNorm.bias",
	"intermediate.dense.weight", "intermediate.dense.bias",
	"output.dense.weight", "output.dense.bias",
	"output.LayerNorm.weight", "output.LayerNorm.bias",
};

#define T_LAYER(l, k) (NE + (l) * NLT + (k))
#define T_HEAD(b, k) (NE + (b)->L * NLT + (k))
#define TP(b, base, i) ((base) + (b)->tensors[i].offset)
#define LP(b, base, l, k) TP(b, base, T_LAYER(l, k))
#define HP(b, base, k) TP(b, base, T_HEAD(b, k))

const char *loom_bert_error(const struct loom_bert *b)
{
	return b->err.msg;
}

int loom_bert_preset(const char *name, int task, struct loom_bert_config *c)
{
	struct loom_config lc;
	loom_config_defaults(&lc);
	if (loom_config_apply_preset(&lc, name) || lc.model != LOOM_MODEL_BERT)
		return LOOM_EINVAL;
	lc.task = task == LOOM_BERT_MLM ? LOOM_TASK_MLM : LOOM_TASK_SQUAD;
	loom_bert_config_from(&lc, c);
	return 0;
}

int loom_bert_config_check(const struct loom_bert_config *c, struct loom_err *err)
{
	if (c->n_layer < 1 || c->hidden < 1 || c->n_head < 1 || c->intermediate < 1 ||
	    c->vocab_size < 1 || c->max_positions < 1 || c->type_vocab_size < 1)
		return loom_err_set(err, LOOM_EINVAL,
				    "BERT config: layers, hidden, heads, intermediate, vocab, "
				    "positions and types must all be >= 1");
	if (c->hidden % c->n_head)
		return loom_err_set(err, LOOM_EINVAL, "BERT config: hidden %d is not a multiple of "
				    "the %d heads", c->hidden, c->n_head);
	if (!(c->dropout >= 0 && c->dropout < 1) || !(c->attn_dropout >= 0 && c->attn_dropout < 1))
		return loom_err_set(err, LOOM_EINVAL, "BERT config: dropout must be in [0, 1)");
	if (!(c->layer_norm_eps > 0) || !(c->init_std >= 0))
		return loom_err_set(err, LOOM_EINVAL,
				    "BERT config: layer_norm_eps must be > 0 and init_std >= 0");
	if (c->task != LOOM_BERT_QA && c->task != LOOM_BERT_MLM)
		return loom_err_set(err, LOOM_EINVAL, "BERT config: unknown task %d", c->task);
	if (c->precision != LOOM_PREC_FP32 && c->precision != LOOM_PREC_BF16)
		return loom_err_set(err, LOOM_EINVAL, "BERT config: unknown precision %d",
				    c->precision);
	if (c->pad_token_id < -1 || c->pad_token_id >= c->vocab_size)
		return loom_err_set(err, LOOM_EINVAL, "BERT config: pad_token_id %d is outside the "
				    "vocabulary (-1: none)", c->pad_token_id);
	return 0;
}

/* weight decay on all but biases and LayerNorms */
static void add(struct loom_tensor *t, int *n, size_t *off, const char *name, int ndim, int64_t d0,
		int64_t d1)
{
	loom_model_add(t, n, off, name, ndim, d0, d1,
		       !strstr(name, "bias") && !strstr(name, "LayerNorm"));
}

int loom_bert_n_tensors(const struct loom_bert_config *cfg)
{
	return NE + cfg->n_layer * NLT + (cfg->task == LOOM_BERT_QA ? N_QA : N_MLM);
}

/* The table of rank slices of a model split over tp ranks (tp 1: whole;
 * see loom_bert.h's Tensor parallelism). */
static size_t table_tp(const struct loom_bert_config *cfg, int tp, struct loom_tensor *t)
{
	const int64_t C = cfg->hidden, I = cfg->intermediate, V = cfg->vocab_size;
	const int64_t Cl = C / tp, Il = I / tp, Vl = V / tp;
	size_t off = 0;
	int n = 0;
	char name[64];
	add(t, &n, &off, "bert.embeddings.word_embeddings.weight", 2, Vl, C);
	add(t, &n, &off, "bert.embeddings.position_embeddings.weight", 2, cfg->max_positions, C);
	add(t, &n, &off, "bert.embeddings.token_type_embeddings.weight", 2, cfg->type_vocab_size, C);
	add(t, &n, &off, "bert.embeddings.LayerNorm.weight", 1, C, 0);
	add(t, &n, &off, "bert.embeddings.LayerNorm.bias", 1, C, 0);
	for (int l = 0; l < cfg->n_layer; l++) {
		/* [out, in] or [out] */
		const int64_t shp[NLT][2] = {
			{ Cl, C }, { Cl, C }, { Cl, C }, { Cl, 0 }, { Cl, 0 }, { Cl, 0 },
			{ C, Cl }, { C, 0 }, { C, 0 }, { C, 0 },
			{ Il, C }, { Il, 0 }, { C, Il }, { C, 0 }, { C, 0 }, { C, 0 },
		};
		for (int k = 0; k < NLT; k++) {
			snprintf(name, sizeof name, "bert.encoder.layer.%d.%s", l, lt_names[k]);
			add(t, &n, &off, name, shp[k][1] ? 2 : 1, shp[k][0], shp[k][1]);
		}
	}
	if (cfg->task == LOOM_BERT_QA) {
		add(t, &n, &off, "qa_outputs.weight", 2, 2, C);
		add(t, &n, &off, "qa_outputs.bias", 1, 2, 0);
	} else {
		add(t, &n, &off, "cls.predictions.transform.dense.weight", 2, C, C);
		add(t, &n, &off, "cls.predictions.transform.dense.bias", 1, C, 0);
		add(t, &n, &off, "cls.predictions.transform.LayerNorm.weight", 1, C, 0);
		add(t, &n, &off, "cls.predictions.transform.LayerNorm.bias", 1, C, 0);
		add(t, &n, &off, "cls.predictions.bias", 1, Vl, 0);
	}
	return off;
}

size_t loom_bert_table(const struct loom_bert_config *cfg, struct loom_tensor *t)
{
	return table_tp(cfg, 1, t);
}

/* tensor parallelism: how tensor i is split (see loom_bert.h, loom_tp.h) */
static int tp_split(const void *model, int i, int *groups)
{
	const struct loom_bert *b = model;
	*groups = 1;
	if (i == E_WORD)
		return LOOM_TP_ROWS;
	if (i < NE)
		return LOOM_TP_WHOLE;
	if (i >= T_HEAD(b, 0)) /* the MLM decoder's bias, by vocabulary */
		return b->cfg.task == LOOM_BERT_MLM && i == T_HEAD(b, MBIAS) ? LOOM_TP_ROWS
									 : LOOM_TP_WHOLE;
	switch ((i - NE) % NLT) {
	case QW: case KW: case VW: case QB: case KB: case VB: case IW: case IB:
		return LOOM_TP_ROWS;   /* output features: the column-split products */
	case AOW: case OW:
		return LOOM_TP_COLS;   /* input features: the row-split products */
	default:
		return LOOM_TP_WHOLE;
	}
}

void loom_bert_tp(const struct loom_bert *b, struct loom_tp *t)
{
	*t = (struct loom_tp){ .tp = b->tp, .rank = b->tp_rank, .tab = b->tensors,
			       .nt = b->n_tensors, .split = tp_split, .model = b,
			       .dist = &b->dist, .seq = b->seq,
			       .err = (struct loom_err *)&b->err };
}

/* x[0..n) summed over the tp ranks (tp 1: nothing) */
static int tp_sum(struct loom_bert *b, float *x, size_t n)
{
	struct loom_tp t;
	loom_bert_tp(b, &t);
	return loom_tp_sum(&t, x, n);
}

/* The partial sums in[N,C] of a row-split product (or the lookup, or a
 * column-split product's input gradient) summed over the ranks: into
 * out[Nr,C] under sequence parallelism (a reduce-scatter; out may be in),
 * else in place; *y where they are (loom_tp_rows_sum). */
static int rows_sum(struct loom_bert *b, float *in, float *out, float **y)
{
	struct loom_tp t;
	loom_bert_tp(b, &t);
	return loom_tp_rows_sum(&t, in, out, (size_t)b->Nr * b->C, y);
}

/* Sequence parallelism: rows x[Nr,C] of this rank put in buf[N,C] at its
 * rows r0.. (unless x is there already) and every rank's gathered: *y =
 * buf.  Without: *y = x, nothing moved. */
static int rows_gather(struct loom_bert *b, float *buf, const float *x, const float **y)
{
	struct loom_tp t;
	float *mine = buf + (size_t)b->r0 * b->C;
	*y = b->seq ? buf : x;
	if (!b->seq)
		return 0;
	if (x != mine)
		memcpy(mine, x, sizeof(float) * b->Nr * b->C);
	loom_bert_tp(b, &t);
	return loom_tp_rows_gather(&t, buf, (size_t)b->Nr * b->C);
}

/* Sequence parallelism: the replicated tensors' gradients of this
 * rank's tokens, k runs d[k n] (zeroed before the micro-batch's
 * backward wrote them), summed over the ranks and added to dst[k]. */
static int sp_grads(struct loom_bert *b, size_t n, int k, float *const *dst)
{
	struct loom_tp t;
	loom_bert_tp(b, &t);
	return loom_tp_sum_add(&t, b->lnd, n, k, dst);
}

/* sharding=weights: unit u's parameters (-1: the embeddings; l: layer l,
 * the last with the head) are params[*lo, *hi) */
static void unit_range(const struct loom_bert *b, int u, size_t *lo, size_t *hi)
{
	int a = u < 0 ? 0 : NE + u * NLT;
	int z = u < 0 ? NE : u == b->L - 1 ? b->n_tensors : NE + (u + 1) * NLT;
	*lo = b->tensors[a].offset;
	*hi = b->tensors[z - 1].offset + b->tensors[z - 1].numel;
}

/* Unit u's parameters are about to be read (`next` after them): with
 * weight sharding, have them gathered, then make its bf16 copy. */
static int unit_need(struct loom_bert *b, int u, int next)
{
	size_t lo, hi;
	int rc;
	if (!b->dist.need)
		return 0;
	LOOM_PROF(LOOM_PROF_COMM, rc = b->dist.need(b->dist.ctx, u, next, &b->err););
	if (rc)
		return rc;
	unit_range(b, u, &lo, &hi);
	if (b->mm && loom_mm_weights_range(b->mm, b->params, b->n_params, lo, hi))
		return loom_mm_check(b->mm, &b->err);
	return 0;
}

static void unit_done(struct loom_bert *b, int u)
{
	size_t lo, hi;
	if (!b->dist.need)
		return;
	unit_range(b, u, &lo, &hi);
	loom_mm_weights_drop(b->mm, lo, hi);
	LOOM_PROF(LOOM_PROF_COMM, b->dist.done(b->dist.ctx, u););
}

/* sharding=weights: after a layer's product, let the gathers in flight
 * move (MPI moves large messages only inside its calls) */
static void tick(struct loom_bert *b)
{
	if (b->dist.tick)
		LOOM_PROF(LOOM_PROF_COMM, b->dist.tick(b->dist.ctx););
}

struct loom_bert *loom_bert_new(const struct loom_bert_config *cfg)
{
	return loom_bert_new_tp(cfg, 0, 1);
}

struct loom_bert *loom_bert_new_tp(const struct loom_bert_config *cfg, int rank, int tp)
{
	struct loom_err e = { 0 };
	if (loom_bert_config_check(cfg, &e) || tp < 1 || rank < 0 || rank >= tp ||
	    cfg->n_head % tp || cfg->intermediate % tp || cfg->vocab_size % tp)
		return NULL;
	struct loom_bert *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	b->cfg = *cfg;
	b->L = cfg->n_layer;
	b->C = cfg->hidden;
	b->NH = cfg->n_head;
	b->I = cfg->intermediate;
	b->V = cfg->vocab_size;
	b->P = cfg->max_positions;
	b->tp = tp;
	b->tp_rank = rank;
	b->seq = b->cfg.sequence_parallel = tp > 1 && cfg->sequence_parallel;
	b->NHl = b->NH / tp;
	b->Cl = b->C / tp;
	b->Il = b->I / tp;
	b->Vl = b->V / tp;
	b->tensors = calloc((size_t)loom_bert_n_tensors(cfg), sizeof *b->tensors);
	b->layer = calloc((size_t)b->L, sizeof *b->layer);
	if (!b->tensors || !b->layer)
		goto fail;
	size_t off = table_tp(cfg, tp, b->tensors);
	b->n_tensors = loom_bert_n_tensors(cfg);
	b->n_params = off;
	if (loom_model_store_alloc(off, &b->params, &b->grads, &b->m, &b->v) ||
	    (b->seq && !(b->lnd = malloc(sizeof(float) * (4 * (size_t)b->C + 2)))))
		goto fail;
	return b;
fail:
	loom_bert_free(b);
	return NULL;
}

void loom_bert_free(struct loom_bert *b)
{
	if (!b)
		return;
	loom_model_store_free(b->params, b->grads, b->m, b->v);
	loom_lazy_free(b->acts);
	free(b->ids);
	loom_lazy_free(b->mlm);
	free(b->mlm_row);
	free(b->sat);
	free(b->lnd);
	free(b->tensors);
	free(b->layer);
	loom_mm_free(b->mm);
	free(b);
}

/* The pad token's word embedding row in base (params or grads), NULL
 * when there is none or another tensor-parallel rank holds it. */
static float *pad_row(const struct loom_bert *b, float *base)
{
	int id = b->cfg.pad_token_id - b->tp_rank * b->Vl;
	if (b->cfg.pad_token_id < 0 || id < 0 || id >= b->Vl)
		return NULL;
	return TP(b, base, E_WORD) + (size_t)id * b->C;
}

/* 1-D: 1 for a LayerNorm weight, else 0; the others' std: init_std */
static float bert_init(const struct loom_tensor *t, const void *ctx)
{
	const struct loom_bert *b = ctx;
	if (t->ndim == 1)
		return strstr(t->name, "LayerNorm.weight") ? 1.0f : 0.0f;
	return (float)b->cfg.init_std;
}

void loom_bert_init_weights(struct loom_bert *b, uint64_t seed)
{
	loom_model_init_weights(b->tensors, b->n_tensors, b->params, b->grads, b->m, b->v,
				b->n_params, seed, bert_init, b);
	/* tensor parallelism: a split matrix is this rank's slice of the
	 * whole one's draws */
	struct loom_tp t;
	loom_bert_tp(b, &t);
	loom_tp_init(&t, 0, b->params, seed, bert_init, b);
	float *pad = pad_row(b, b->params);
	if (pad)
		memset(pad, 0, sizeof(float) * b->C);
	b->w16_ok = 0;
}

void loom_bert_init_head(struct loom_bert *b, uint64_t seed)
{
	struct loom_tp t;
	loom_bert_tp(b, &t);
	loom_model_init_tensors(b->tensors, T_HEAD(b, 0), b->n_tensors, b->params, seed, bert_init,
				b);
	loom_tp_init(&t, T_HEAD(b, 0), b->params, seed, bert_init, b);
	b->w16_ok = 0;
}

void loom_bert_weights_changed(struct loom_bert *b)
{
	b->w16_ok = 0;
}

void loom_bert_eval_counts(const struct loom_bert *b, double *nll, int64_t *n,
			   int64_t *correct)
{
	*nll = 0;
	*n = *correct = 0;
	if (!b->have_targets)
		return;
	if (b->cfg.task == LOOM_BERT_MLM) {
		*nll = (double)b->loss * b->M;
		*n = b->M;
		*correct = b->mlm_hits; /* tensor parallelism: counted by the loss */
		for (int k = 0; b->tp == 1 && k < b->M; k++)
			*correct += loom_model_argmax(b->mlogits + (size_t)k * b->V, b->V) ==
				    b->mlm_tgt[k];
		return;
	}
	*nll = (double)b->loss * b->B;
	*n = b->B;
	for (int r = 0; r < b->B; r++) {
		const size_t o = (size_t)r * b->T;
		*correct += loom_model_argmax(b->start_logits + o, b->len[r]) == b->start_pos[r] &&
			    loom_model_argmax(b->end_logits + o, b->len[r]) == b->end_pos[r];
	}
}

const float *loom_bert_start_logits(const struct loom_bert *b)
{
	return b->start_logits;
}

const float *loom_bert_end_logits(const struct loom_bert *b)
{
	return b->end_logits;
}

/* ---- activations -------------------------------------------------------- */

/* Lay out the activations of N tokens of a (B, T) batch from base (NULL:
 * only count); every pointer of b set relative to base; returns the float
 * count.  Under recompute the layers share layer 0's slots except their
 * outputs.  Sequence parallelism: the token-split regions' Nr = N/tp
 * rows. */
static size_t layout(struct loom_bert *b, int B, int T, size_t N, float *base)
{
	size_t C = b->C, Cl = b->Cl, Il = b->Il, off = 0;
	size_t Nr = b->seq ? N / (size_t)b->tp : N;
#define TAKE(ptr, n) do { if (base) (ptr) = base + off; off += (n); } while (0)
	struct loom_bert_lacts shared = { 0 };
	for (int l = 0; l < b->L; l++) {
		struct loom_bert_lacts a = { 0 };
		if (!b->cfg.recompute || l == 0) {
			TAKE(a.qkv, N * 3 * Cl);
			TAKE(a.atty, N * Cl);
			TAKE(a.lse, N * b->NHl);
			TAKE(a.res1, Nr * C);
			TAKE(a.ln1_mean, Nr);
			TAKE(a.ln1_rstd, Nr);
			TAKE(a.h1, Nr * C);
			TAKE(a.fch, N * Il);
			TAKE(a.res2, Nr * C);
			TAKE(a.ln2_mean, Nr);
			TAKE(a.ln2_rstd, Nr);
			shared = a;
		} else {
			a = shared;
		}
		TAKE(a.out, Nr * C);
		if (base)
			b->layer[l] = a;
	}
	TAKE(b->emb, Nr * C);
	TAKE(b->emb_mean, Nr);
	TAKE(b->emb_rstd, Nr);
	TAKE(b->x0, Nr * C);
	TAKE(b->dres, N * C);
	TAKE(b->buf1, Nr * C);
	TAKE(b->buf2, N * C);
	/* gelu(fch), then its gradient; the attention's dqkv and datty */
	TAKE(b->work, N * (Il > 4 * Cl ? Il : 4 * Cl));
	TAKE(b->logits, N * 2);
	TAKE(b->start_logits, (size_t)B * T);
	TAKE(b->end_logits, (size_t)B * T);
	TAKE(b->dse, (size_t)2 * B * T);
#undef TAKE
	return off;
}

/* the activations' floats of a rank of tp at (B, T) */
static size_t act_floats(const struct loom_bert_config *cfg, int tp, int B, int T)
{
	struct loom_bert b = { .cfg = *cfg, .L = cfg->n_layer, .C = cfg->hidden,
			       .NH = cfg->n_head, .I = cfg->intermediate, .Cl = cfg->hidden / tp,
			       .NHl = cfg->n_head / tp, .Il = cfg->intermediate / tp, .tp = tp,
			       .seq = tp > 1 && cfg->sequence_parallel };
	return layout(&b, B, T, (size_t)B * T, NULL);
}

size_t loom_bert_act_floats(const struct loom_bert_config *cfg, int B, int T)
{
	return act_floats(cfg, 1, B, T);
}

/* Tensor parallelism: the bytes a rank sends per step of `micro`
 * micro-batches of N tokens (M of them masked-LM targets), ring
 * all-reduces: per micro-batch [N,C] after the lookup and 2 a layer in
 * forward, 2 a layer in backward and 2 more a recomputed layer (all but
 * the last); the MLM loss's 3 [M] and its decoder's [M,C] input gradient;
 * the 16-byte batch check; the norm's 8 bytes a step.  Sequence
 * parallelism: see sp_bytes. */
static uint64_t sp_bytes(const struct loom_bert_config *cfg, uint64_t T, uint64_t N, uint64_t M,
			 int micro);
static uint64_t tp_bytes(const struct loom_bert_config *cfg, int tp, uint64_t N, uint64_t M,
			 int micro)
{
	uint64_t L = (uint64_t)cfg->n_layer, C = (uint64_t)cfg->hidden, T = (uint64_t)tp;
	if (T == 1)
		return 0;
	if (cfg->sequence_parallel)
		return sp_bytes(cfg, T, N, M, micro);
	uint64_t nc = 1 + 4 * L + (cfg->recompute ? 2 * (L - 1) : 0);
	uint64_t fl = nc * N * C + (cfg->task == LOOM_BERT_MLM ? M * C + 3 * M : 0);
	uint64_t bytes = (fl * 4 + 16) * (uint64_t)micro + 8;
	return bytes * 2 * (T - 1) / T;
}

/* Sequence parallelism (N a multiple of T): ring all-gathers and
 * reduce-scatters ((T-1) N/T floats a column each) per micro-batch of
 * [N,C]: the lookup's, 4 a layer forward, 6 a layer backward (the dropped
 * gradients and the products' inputs gathered, the input gradients
 * scattered), 4 more a recomputed layer (all but the last), the
 * embeddings' gradient, the MLM head's input (or the QA logits' 2
 * columns); all-reduced: the LayerNorm gradients (4C a layer, the
 * embeddings' 2C), the QA head's 2C+2 or the MLM loss's 3M and decoder
 * input gradient [M,C], the batch check's 16 bytes; the norm's 8 a step. */
static uint64_t sp_bytes(const struct loom_bert_config *cfg, uint64_t T, uint64_t N, uint64_t M,
			 int micro)
{
	uint64_t L = (uint64_t)cfg->n_layer, C = (uint64_t)cfg->hidden;
	int mlm = cfg->task == LOOM_BERT_MLM;
	uint64_t cols = (2 + 10 * L + (cfg->recompute ? 4 * (L - 1) : 0) + mlm) * C +
			(mlm ? 0 : 2);
	uint64_t ar = 4 * C * L + 2 * C + (mlm ? M * C + 3 * M : 2 * C + 2);
	uint64_t bytes = (ar * 4 + 16) * (uint64_t)micro + 8;
	return cols * (T - 1) * (N / T) * 4 * (uint64_t)micro + bytes * 2 * (T - 1) / T;
}

uint64_t loom_bert_tp_bytes(const struct loom_bert *b, int micro)
{
	return tp_bytes(&b->cfg, b->tp, (uint64_t)b->N, (uint64_t)b->M, micro);
}

void loom_bert_config_from(const struct loom_config *c, struct loom_bert_config *b)
{
	*b = (struct loom_bert_config){
		.n_layer = c->n_layer, .hidden = c->n_embd, .n_head = c->n_head,
		.intermediate = c->intermediate ? c->intermediate : 4 * c->n_embd,
		.vocab_size = c->vocab_size, .max_positions = c->n_positions,
		.type_vocab_size = c->type_vocab_size, .layer_norm_eps = c->layer_norm_epsilon,
		.dropout = c->dropout, .attn_dropout = c->attn_dropout, .init_std = c->init_std,
		.pad_token_id = c->pad_token_id,
		.task = c->task == LOOM_TASK_MLM ? LOOM_BERT_MLM : LOOM_BERT_QA,
		.qa_loss = c->qa_loss,
		.precision = c->precision, .recompute = c->recompute,
		.sequence_parallel = c->sequence_parallel, .padded = 0,
		.sharding = c->sharding,
		.adamw = { c->beta1, c->beta2, c->eps, c->weight_decay, c->grad_clip },
	};
}

/* Room for a (B, T) batch, padded (its largest): grown when B or T
 * exceeds what was made, never shrunk; the activations are lazily backed,
 * so a packed batch touches the pages of its real tokens only.  Each
 * forward lays them out for its own B, T and token count. */
static int ensure_acts(struct loom_bert *b, int B, int T)
{
	if (b->acts && B <= b->cap_B && T <= b->cap_T)
		return 0;
	B = B > b->cap_B ? B : b->cap_B;
	T = T > b->cap_T ? T : b->cap_T;
	loom_lazy_free(b->acts);
	free(b->ids);
	b->acts = NULL;
	b->ids = NULL;
	b->cap_B = b->cap_T = 0;
	size_t N = (size_t)B * T, n = layout(b, B, T, N, NULL);
	b->acts = loom_model_falloc(n);
	/* ids, seg, at, pos [N]; len, start, end [B]; off [B+1] */
	b->ids = malloc(sizeof(int32_t) * (4 * N + 4 * (size_t)B + 1));
	if (!b->acts || !b->ids)
		return loom_err_set(&b->err, LOOM_ENOMEM,
				    "out of memory for activations (%zu MB at B=%d T=%d)", n * 4 >> 20,
				    B, T);
	b->seg = b->ids + N;
	b->at = b->seg + N;
	b->pos = b->at + N;
	b->len = b->pos + N;
	b->start_pos = b->len + B;
	b->end_pos = b->start_pos + B;
	b->off = b->end_pos + B;
	b->cap_B = B;
	b->cap_T = T;
	return 0;
}

/* The batch's tokens into ids/seg: padded (N = B*T), or each row's real
 * ones packed (off, at, pos; N their count). */
static void take_tokens(struct loom_bert *b, const struct loom_bert_batch *x, int packed)
{
	int B = b->B, T = b->T;
	if (!packed) {
		b->N = B * T;
		memcpy(b->ids, x->input_ids, sizeof(int32_t) * b->N);
		if (x->segment_ids)
			memcpy(b->seg, x->segment_ids, sizeof(int32_t) * b->N);
		else
			memset(b->seg, 0, sizeof(int32_t) * b->N);
		return;
	}
	int n = 0;
	for (int r = 0; r < B; r++) {
		b->off[r] = n;
		for (int t = 0; t < b->len[r]; t++, n++) {
			int i = r * T + t;
			b->at[n] = i;
			b->pos[n] = t;
			b->ids[n] = x->input_ids[i];
			b->seg[n] = x->segment_ids ? x->segment_ids[i] : 0;
		}
	}
	b->off[B] = n;
	b->N = n;
}

/* MLM head buffers for m rows. */
static int ensure_mlm(struct loom_bert *b, size_t m)
{
	if (m <= b->mlm_cap && b->mlm)
		return 0;
	loom_lazy_free(b->mlm);
	free(b->mlm_row);
	b->mlm_cap = 0;
	size_t C = b->C, V = b->Vl;
	b->mlm = loom_model_falloc(m * (5 * C + 3 + V + 3));
	b->mlm_row = malloc(sizeof(int32_t) * 2 * (m ? m : 1));
	if (!b->mlm || !b->mlm_row)
		return loom_err_set(&b->err, LOOM_ENOMEM,
				    "out of memory for the masked-LM head (%zu rows)", m);
	b->mlm_tgt = b->mlm_row + m;
	b->mx = b->mlm;
	b->mt = b->mx + m * C;
	b->mg = b->mt + m * C;
	b->mln = b->mg + m * C;
	b->md = b->mln + m * C;
	b->mmean = b->md + m * C;
	b->mrstd = b->mmean + m;
	b->mloss = b->mrstd + m;
	b->mlogits = b->mloss + m;
	b->mxent = b->mlogits + m * V;
	b->mlm_cap = m;
	return 0;
}

/* ---- forward ------------------------------------------------------------ */

/* out[Nr,C] = drop(x) at site `site` of layer l (out may be x), the
 * padded layout's mask elements either way (sequence parallelism: rows
 * r0.. of it), in one pass. */
static void drop(const struct loom_bert *b, float *out, const float *x, float p, int l, int site)
{
	uint64_t key = loom_model_site_key(b->key, l, site);
	if (b->packed || b->seq)
		loom_k_dropout_at(out, x, b->Nr, b->C, p, key, b->seq ? b->sat : b->at);
	else
		loom_k_dropout_copy(out, x, (size_t)b->N * b->C, p, key);
}

/* Tensor parallelism: each rank looks up the rows of its ids, rank 0
 * adds the positions and token types, the sum over the ranks is the
 * embedding sum (sequence parallelism: this rank's rows of it,
 * reduce-scattered from buf2). */
static int embed_fwd(struct loom_bert *b)
{
	int N = b->N, r = b->tp_rank, rc;
	float *p = b->params, *e = b->seq ? b->buf2 : b->emb, *y;
	double t0 = LOOM_PROF_BEGIN();
	/* packed: one row of N tokens, each at its own position */
	loom_k_encoder_fwd(e, b->ids, TP(b, p, E_WORD), r * b->Vl, b->Vl,
			   r ? NULL : TP(b, p, E_POS), r ? NULL : b->seg, TP(b, p, E_TYPE),
			   b->packed ? b->pos : NULL, b->packed ? 1 : b->B, b->packed ? N : b->T,
			   b->C);
	LOOM_PROF_END(LOOM_PROF_EMBED_FWD, t0);
	if ((rc = rows_sum(b, e, b->emb, &y)))
		return rc;
	t0 = LOOM_PROF_BEGIN();
	loom_k_layernorm_fwd(b->x0, b->emb_mean, b->emb_rstd, b->emb, TP(b, p, E_LNW),
			     TP(b, p, E_LNB), b->Nr, b->C, (float)b->cfg.layer_norm_eps);
	drop(b, b->x0, b->x0, b->train ? (float)b->cfg.dropout : 0.0f, -1, 0);
	LOOM_PROF_END(LOOM_PROF_EMBED_FWD, t0);
	return 0;
}

/* Sequence parallelism: x, res1, h1, res2 and out are this rank's Nr
 * rows; x and h1 are gathered into buf2 for the column-split products,
 * whose row-split partners' partial sums buf2 then holds until they are
 * reduce-scattered. */
static int layer_fwd(struct loom_bert *b, int l, const float *x, struct loom_bert_lacts *a)
{
	int B = b->B, T = b->T, C = b->C, Cl = b->Cl, I = b->Il, N = b->N;
	float *p = b->params, eps = (float)b->cfg.layer_norm_eps, *y;
	float pd = b->train ? (float)b->cfg.dropout : 0.0f;
	float adrop = b->train ? (float)b->cfg.attn_dropout : 0.0f;
	size_t NC = (size_t)b->Nr * C; /* the token-split regions' floats */
	const float *in;

	/* q|k|v in one product: the three weights [C,C] are adjacent */
	enum loom_prof_op mm = LOOM_PROF_PHASE(LOOM_PROF_MATMUL_FWD);
	enum loom_prof_op ln = LOOM_PROF_PHASE(LOOM_PROF_LN_FWD);
	enum loom_prof_op el = LOOM_PROF_PHASE(LOOM_PROF_ELEM_FWD);
	int rc;
	if ((rc = rows_gather(b, b->buf2, x, &in)))
		return rc;
	LOOM_PROF(mm, loom_k_linear_fwd(b->mm, a->qkv, in, LP(b, p, l, QW), LP(b, p, l, QB), N, C,
					3 * Cl););
	tick(b);
	LOOM_PROF(LOOM_PROF_PHASE(LOOM_PROF_ATTN_FWD),
		  rc = loom_k_attention_fwd_heads(a->atty, a->lse, a->qkv, b->len,
						  b->packed ? b->off : NULL, B, T, Cl, b->NHl,
						  b->tp_rank * b->NHl, b->cfg.n_head, adrop,
						  loom_model_site_key(b->key, l, 3)););
	if (rc)
		return loom_err_set(&b->err, LOOM_ENOMEM, "out of memory in attention");
	/* res1 = drop(atty Wo^T + bo) + x; h1 = LayerNorm(res1) (tensor
	 * parallelism: the ranks' partial products summed, bo added by rank 0) */
	float *part = b->seq ? b->buf2 : a->res1; /* the partial sums */
	LOOM_PROF(mm, loom_k_linear_fwd(b->mm, part, a->atty, LP(b, p, l, AOW),
					b->tp_rank ? NULL : LP(b, p, l, AOB), N, Cl, C););
	tick(b);
	if ((rc = rows_sum(b, part, a->res1, &y)))
		return rc;
	LOOM_PROF(el, drop(b, a->res1, a->res1, pd, l, 1);
		  loom_k_residual_fwd(a->res1, a->res1, x, NC););
	LOOM_PROF(ln, loom_k_layernorm_fwd(a->h1, a->ln1_mean, a->ln1_rstd, a->res1,
					   LP(b, p, l, ALNW), LP(b, p, l, ALNB), b->Nr, C, eps););
	/* res2 = drop(gelu(h1 W1^T + b1) W2^T + b2) + h1; out = LayerNorm(res2) */
	if ((rc = rows_gather(b, b->buf2, a->h1, &in)))
		return rc;
	LOOM_PROF(mm, loom_k_linear_fwd(b->mm, a->fch, in, LP(b, p, l, IW), LP(b, p, l, IB), N,
					C, I););
	tick(b);
	LOOM_PROF(LOOM_PROF_PHASE(LOOM_PROF_GELU_FWD),
		  loom_k_gelu_erf_fwd(b->work, a->fch, (size_t)N * I););
	part = b->seq ? b->buf2 : a->res2;
	LOOM_PROF(mm, loom_k_linear_fwd(b->mm, part, b->work, LP(b, p, l, OW),
					b->tp_rank ? NULL : LP(b, p, l, OB), N, I, C););
	tick(b);
	if ((rc = rows_sum(b, part, a->res2, &y)))
		return rc;
	LOOM_PROF(el, drop(b, a->res2, a->res2, pd, l, 2);
		  loom_k_residual_fwd(a->res2, a->res2, a->h1, NC););
	LOOM_PROF(ln, loom_k_layernorm_fwd(a->out, a->ln2_mean, a->ln2_rstd, a->res2,
					   LP(b, p, l, OLNW), LP(b, p, l, OLNB), b->Nr, C, eps););
	return 0;
}

/* Row lengths from input_mask (1s then 0s, at least one 1). */
static int lengths(struct loom_bert *b, const int32_t *mask, int B, int T)
{
	for (int r = 0; r < B; r++) {
		int n = T;
		if (mask) {
			const int32_t *m = mask + (size_t)r * T;
			for (n = 0; n < T && m[n] == 1; n++)
				;
			for (int t = n; t < T; t++)
				if (m[t] != 0)
					return loom_err_set(&b->err, LOOM_EINVAL,
							    "input_mask row %d: position %d is %d after "
							    "padding began at %d (want 1s then 0s)",
							    r, t, m[t], n);
			if (!n)
				return loom_err_set(&b->err, LOOM_EINVAL,
						    "input_mask row %d has no real token", r);
		}
		b->len[r] = n;
	}
	return 0;
}

/* The positions row r's QA softmax runs over: all T, or its real tokens
 * (qa_loss); a target outside them is ignored. */
static int qa_span(const struct loom_bert *b, int r)
{
	return b->cfg.qa_loss == LOOM_BERT_QA_LOSS_REAL ? b->len[r] : b->T;
}

/* Cross-entropy of a row of logits lg[T] over its first n positions at
 * target t < n: the loss and, with d != NULL, d[T] = (softmax - onehot) * w
 * (0 from n on). */
static double qa_ce(const float *lg, int n, int T, int t, float *d, float w)
{
	double mx = -INFINITY, s = 0;
	for (int j = 0; j < n; j++)
		mx = lg[j] > mx ? lg[j] : mx;
	for (int j = 0; j < n; j++)
		s += exp(lg[j] - mx);
	if (d) {
		for (int j = 0; j < T; j++)
			d[j] = j < n ? (float)(exp(lg[j] - mx) / s * w) : 0.0f;
		d[t] -= w;
	}
	return log(s) + mx - lg[t];
}

/* loss = (mean over rows of CE(start) + mean over rows of CE(end)) / 2,
 * each mean over the rows whose target counts (HF's CrossEntropyLoss with
 * ignore_index, run_squad.py's one-hot mean).  Sequence parallelism: seq
 * holds this rank's rows, their logits all-gathered. */
static int qa_head(struct loom_bert *b, const float *seq, int have)
{
	int B = b->B, T = b->T, N = b->N, rc;
	float *p = b->params;
	LOOM_PROF(LOOM_PROF_MATMUL_FWD,
		  loom_k_linear_fwd(b->mm, b->logits + 2 * (size_t)b->r0, seq, HP(b, p, QAW),
				    HP(b, p, QAB), b->Nr, b->C, 2););
	if (b->seq) {
		struct loom_tp t;
		loom_bert_tp(b, &t);
		if ((rc = loom_tp_rows_gather(&t, b->logits, 2 * (size_t)b->Nr)))
			return rc;
	}
	for (int r = 0; b->packed && r < B; r++) /* the padding of each row */
		for (size_t i = (size_t)r * T + b->len[r]; i < (size_t)(r + 1) * T; i++)
			b->start_logits[i] = b->end_logits[i] = -INFINITY;
	for (int i = 0; i < N; i++) {
		size_t at = b->packed ? (size_t)b->at[i] : (size_t)i;
		b->start_logits[at] = b->logits[2 * i];
		b->end_logits[at] = b->logits[2 * i + 1];
	}
	if (!have)
		return 0;
	double ls = 0, le = 0;
	b->nstart = b->nend = 0;
	for (int r = 0; r < B; r++) {
		int n = qa_span(b, r), s = b->start_pos[r], e = b->end_pos[r];
		if (s >= 0 && s < n) {
			ls += qa_ce(b->start_logits + (size_t)r * T, n, T, s, NULL, 0);
			b->nstart++;
		}
		if (e >= 0 && e < n) {
			le += qa_ce(b->end_logits + (size_t)r * T, n, T, e, NULL, 0);
			b->nend++;
		}
	}
	b->loss = (float)(((b->nstart ? ls / b->nstart : 0) + (b->nend ? le / b->nend : 0)) / 2);
	return 0;
}

/* Labels [B,T]: rows of seq (N tokens) are read through at[] when packed
 * (forward made sure no label sits on padding then). */
static int mlm_head(struct loom_bert *b, const float *seq, const int32_t *labels)
{
	int N = b->N, C = b->C, V = b->V, Vl = b->Vl, M = 0, rc;
	float *p = b->params, eps = (float)b->cfg.layer_norm_eps;
	for (size_t i = 0; i < (size_t)b->B * b->T; i++) {
		if (labels[i] >= V)
			return loom_err_set(&b->err, LOOM_EINVAL,
					    "MLM label %d at position %zu is outside 0..%d", labels[i],
					    i, V - 1);
		M += labels[i] >= 0;
	}
	b->M = M;
	b->loss = 0;
	b->mlm_hits = 0;
	if (!M)
		return 0;
	if ((rc = ensure_mlm(b, (size_t)M)))
		return rc;
	for (int i = 0, k = 0; i < N; i++) {
		int32_t y = labels[b->packed ? b->at[i] : i];
		if (y >= 0) {
			b->mlm_row[k] = i;
			b->mlm_tgt[k] = y;
			memcpy(b->mx + (size_t)k * C, seq + (size_t)i * C, sizeof(float) * C);
			k++;
		}
	}
	LOOM_PROF(LOOM_PROF_MATMUL_FWD, loom_k_linear_fwd(b->mm, b->mt, b->mx, HP(b, p, TDW),
							  HP(b, p, TDB), M, C, C););
	LOOM_PROF(LOOM_PROF_GELU_FWD, loom_k_gelu_erf_fwd(b->mg, b->mt, (size_t)M * C););
	LOOM_PROF(LOOM_PROF_LN_FWD,
		  loom_k_layernorm_fwd(b->mln, b->mmean, b->mrstd, b->mg, HP(b, p, TLNW),
				       HP(b, p, TLNB), M, C, eps););
	/* the decoder: the word embeddings [V,C] as an nn.Linear weight
	 * (tensor parallelism: this rank's vocabulary rows, the
	 * vocabulary-parallel loss; an evaluation counts the hits there) */
	LOOM_PROF(LOOM_PROF_MATMUL_FWD, loom_k_linear_fwd(b->mm, b->mlogits, b->mln,
							  TP(b, p, E_WORD), HP(b, p, MBIAS), M,
							  C, Vl););
	if (b->tp > 1) {
		struct loom_tp t;
		loom_bert_tp(b, &t);
		LOOM_PROF(LOOM_PROF_XENT_FWD,
			  rc = loom_tp_xent(&t, b->mlogits, M, Vl, V, b->mlm_tgt, -1, b->mloss,
					    b->mxent, b->train ? NULL : &b->mlm_hits););
		if (rc)
			return rc;
	} else {
		LOOM_PROF(LOOM_PROF_XENT_FWD,
			  loom_k_crossentropy_fwd(b->mlogits, b->mloss, b->mlm_tgt, M, V, -1););
	}
	double s = 0;
	for (int k = 0; k < M; k++)
		s += b->mloss[k];
	b->loss = (float)(s / M);
	return 0;
}

/* Tensor parallelism: every rank of the group must compute on the same
 * batch (its replica's frames): its tokens, rows and targets hashed and
 * the hashes compared over the ranks. */
static int same_batch(struct loom_bert *b, const struct loom_bert_batch *x, int have)
{
	struct loom_tp t;
	loom_bert_tp(b, &t);
	int rc = loom_tp_ready(&t), B = b->B;
	uint64_t h = loom_tp_hash(loom_tp_hash(loom_tp_hash(0, b->ids, (size_t)b->N), b->seg,
					       (size_t)b->N), b->len, (size_t)B);
	if (have && b->cfg.task == LOOM_BERT_QA)
		h = loom_tp_hash(loom_tp_hash(h, b->start_pos, (size_t)B), b->end_pos, (size_t)B);
	else if (have)
		h = loom_tp_hash(h, x->mlm_labels, (size_t)B * b->T);
	return rc ? rc : loom_tp_same_batch(&t, h);
}

int loom_bert_forward(struct loom_bert *b, const struct loom_bert_batch *x, int B, int T,
		      int train, uint64_t key, float *loss)
{
	int rc;
	b->have_targets = 0;
	if (B < 1 || T < 1 || T > b->P)
		return loom_err_set(&b->err, LOOM_EINVAL,
				    "batch %dx%d: T must be in 1..max_positions (%d)", B, T, b->P);
	size_t N = (size_t)B * T;
	if ((rc = loom_model_check_ids(x->input_ids, N, b->V, NULL, "input id", "the vocabulary",
				       &b->err)) ||
	    (x->segment_ids &&
	     (rc = loom_model_check_ids(x->segment_ids, N, b->cfg.type_vocab_size, NULL,
					"segment id", "the token types", &b->err))))
		return rc;
	int whole = 1; /* sharding=weights: each unit's bf16 copy made as it comes (unit_need) */
	if ((rc = ensure_acts(b, B, T)) ||
	    (rc = loom_model_ready_mm(&b->mm, b->dist.need ? &whole : &b->w16_ok,
				      b->cfg.precision, b->params, b->n_params, &b->err)) ||
	    (rc = lengths(b, x->input_mask, B, T)))
		return rc;
	int qa = b->cfg.task == LOOM_BERT_QA;
	int have = qa ? x->start_positions && x->end_positions : x->mlm_labels != NULL;
	/* qa_loss=all: the softmax reads the padding positions' logits;
	 * sequence parallelism splits the padded layout */
	int packed = !b->cfg.padded && !b->seq &&
		     !(qa && have && b->cfg.qa_loss == LOOM_BERT_QA_LOSS_ALL);
	for (int r = 0; packed && !qa && have && r < B; r++) /* a label on padding? */
		for (int t = b->len[r]; packed && t < T; t++)
			packed = x->mlm_labels[(size_t)r * T + t] < 0;
	b->B = B;
	b->T = T;
	b->packed = packed;
	take_tokens(b, x, packed);
	struct loom_tp t;
	loom_bert_tp(b, &t);
	if ((rc = loom_tp_seq_rows(&t, B, T, b->N, &b->Nr, &b->r0, &b->sat)))
		return rc;
	layout(b, B, T, (size_t)b->N, b->acts);
	if (qa && have) {
		memcpy(b->start_pos, x->start_positions, sizeof(int32_t) * B);
		memcpy(b->end_pos, x->end_positions, sizeof(int32_t) * B);
	}
	b->train = train;
	b->key = key;
	b->loss = 0;
	if (b->tp > 1 && (rc = same_batch(b, x, have)))
		return rc;
	/* sharding=weights: the embeddings, each layer, the head with the
	 * last (the MLM decoder: the embeddings again) */
	int dec = !qa && have;
	if ((rc = unit_need(b, -1, 0)) || (rc = embed_fwd(b)))
		return rc;
	unit_done(b, -1);
	const float *h = b->x0;
	for (int l = 0; l < b->L; l++) {
		int next = l + 1 < b->L ? l + 1 : dec ? -1 : LOOM_BERT_UNIT_NONE;
		if ((rc = unit_need(b, l, next)) || (rc = layer_fwd(b, l, h, &b->layer[l])))
			return rc;
		if (l + 1 < b->L)
			unit_done(b, l);
		h = b->layer[l].out;
	}
	if (qa)
		rc = qa_head(b, h, have);
	else if (have && !(rc = rows_gather(b, b->buf2, h, &h)) && /* (every rank's rows) */
		 !(rc = unit_need(b, -1, LOOM_BERT_UNIT_NONE))) {
		rc = mlm_head(b, h, x->mlm_labels);
		unit_done(b, -1);
	}
	unit_done(b, b->L - 1);
	if (rc || (rc = loom_mm_check(b->mm, &b->err)))
		return rc;
	b->have_targets = have;
	if (loss)
		*loss = b->loss;
	return 0;
}

/* ---- backward ----------------------------------------------------------- */

/* The output gradient of a dropped row-split product at site `site` of
 * layer l from buf1 (d of the residual sum): buf1 itself when nothing
 * drops, else dropped into buf2; sequence parallelism: this rank's rows
 * dropped into its rows of buf2, then every rank's gathered. */
static int drop_grad(struct loom_bert *b, float pd, int l, int site, const float **d)
{
	*d = b->buf1;
	if (pd <= 0 && !b->seq)
		return 0;
	float *mine = b->buf2 + (size_t)b->r0 * b->C;
	LOOM_PROF(LOOM_PROF_ELEM_BWD, drop(b, mine, b->buf1, pd, l, site););
	return rows_gather(b, b->buf2, mine, d);
}

/* dres holds d(layer output); on return d(layer input).  Buffers: buf1
 * the gradient at a residual sum (a LayerNorm's input), buf2 its dropped
 * copy, work gelu(fch) (recomputed), then its gradient, then the
 * attention's dqkv [N,3C] and dout [N,C].  Sequence parallelism: dres
 * and buf1 hold this rank's rows (dres [N,C] the input gradients' partial
 * sums until reduce-scattered); buf2 the gathered dropped gradients, then
 * h1 and x gathered again for their products' weight gradients; the
 * LayerNorms' weight gradients of these tokens in lnd, summed over the
 * ranks at the end. */
static int layer_bwd(struct loom_bert *b, int l, const float *x, struct loom_bert_lacts *a)
{
	int B = b->B, T = b->T, C = b->C, Cl = b->Cl, I = b->Il, N = b->N, Nr = b->Nr;
	float *p = b->params, *dp = b->grads, *work = b->work, *y;
	float pd = b->train ? (float)b->cfg.dropout : 0.0f;
	float adrop = b->train ? (float)b->cfg.attn_dropout : 0.0f;
	size_t NC = (size_t)Nr * C; /* the token-split regions' floats */
	const float *dproj, *in;
	/* the LayerNorm gradients [attention weight, bias, output weight, bias] */
	float *dln = b->seq ? b->lnd : NULL;
	float *dwa = dln ? dln : LP(b, dp, l, ALNW), *dba = dln ? dln + C : LP(b, dp, l, ALNB);
	float *dwo = dln ? dln + 2 * C : LP(b, dp, l, OLNW);
	float *dbo = dln ? dln + 3 * C : LP(b, dp, l, OLNB);

	int rc;
	if (dln)
		memset(dln, 0, sizeof(float) * 4 * (size_t)C);
	/* out = LayerNorm(res2): buf1 = d res2 */
	LOOM_PROF(LOOM_PROF_LN_BWD, loom_k_zero(b->buf1, NC);
		  loom_k_layernorm_bwd(b->buf1, dwo, dbo, b->dres, a->res2, LP(b, p, l, OLNW),
				       a->ln2_mean, a->ln2_rstd, Nr, C););
	if ((rc = drop_grad(b, pd, l, 2, &dproj)))
		return rc;
	LOOM_PROF(LOOM_PROF_GELU_BWD, loom_k_gelu_erf_fwd(work, a->fch, (size_t)N * I););
	LOOM_PROF(LOOM_PROF_MATMUL_BWD,
		  loom_k_linear_bwd(b->mm, work, LP(b, dp, l, OW), LP(b, dp, l, OB), dproj, work,
				    LP(b, p, l, OW), N, I, C););
	tick(b);
	LOOM_PROF(LOOM_PROF_GELU_BWD, loom_k_gelu_erf_bwd(work, a->fch, work, (size_t)N * I););
	if ((rc = rows_gather(b, b->buf2, a->h1, &in)))
		return rc;
	LOOM_PROF(LOOM_PROF_MATMUL_BWD,
		  loom_k_linear_bwd(b->mm, b->dres, LP(b, dp, l, IW), LP(b, dp, l, IB), work, in,
				    LP(b, p, l, IW), N, C, I););
	tick(b);
	if ((rc = rows_sum(b, b->dres, b->dres, &y))) /* tensor parallelism: the ranks' parts */
		return rc;
	LOOM_PROF(LOOM_PROF_ELEM_BWD,
		  loom_k_residual_fwd(b->dres, b->dres, b->buf1, NC);); /* d h1 */
	/* h1 = LayerNorm(res1): buf1 = d res1 */
	LOOM_PROF(LOOM_PROF_LN_BWD, loom_k_zero(b->buf1, NC);
		  loom_k_layernorm_bwd(b->buf1, dwa, dba, b->dres, a->res1, LP(b, p, l, ALNW),
				       a->ln1_mean, a->ln1_rstd, Nr, C););
	if ((rc = drop_grad(b, pd, l, 1, &dproj)))
		return rc;
	float *dqkv = work, *datty = work + (size_t)N * 3 * Cl;
	LOOM_PROF(LOOM_PROF_MATMUL_BWD,
		  loom_k_linear_bwd(b->mm, datty, LP(b, dp, l, AOW), LP(b, dp, l, AOB), dproj,
				    a->atty, LP(b, p, l, AOW), N, Cl, C););
	tick(b);
	LOOM_PROF(LOOM_PROF_ATTN_BWD,
		  rc = loom_k_attention_bwd_heads(dqkv, datty, a->qkv, a->atty, a->lse, b->len,
						  b->packed ? b->off : NULL, B, T, Cl, b->NHl,
						  b->tp_rank * b->NHl, b->cfg.n_head, adrop,
						  loom_model_site_key(b->key, l, 3)););
	if (rc)
		return loom_err_set(&b->err, LOOM_ENOMEM, "out of memory in attention backward");
	if ((rc = rows_gather(b, b->buf2, x, &in)))
		return rc;
	LOOM_PROF(LOOM_PROF_MATMUL_BWD,
		  loom_k_linear_bwd(b->mm, b->dres, LP(b, dp, l, QW), LP(b, dp, l, QB), dqkv, in,
				    LP(b, p, l, QW), N, C, 3 * Cl););
	tick(b);
	if ((rc = rows_sum(b, b->dres, b->dres, &y)))
		return rc;
	LOOM_PROF(LOOM_PROF_ELEM_BWD,
		  loom_k_residual_fwd(b->dres, b->dres, b->buf1, NC);); /* d x */
	return dln ? sp_grads(b, 2 * (size_t)C, 2,
			      (float *const[]){ LP(b, dp, l, ALNW), LP(b, dp, l, OLNW) })
		   : 0;
}

/* dres = d(sequence output) from the QA loss * scale (sequence
 * parallelism: of this rank's rows, the head's gradients summed over the
 * ranks). */
static int qa_bwd(struct loom_bert *b, const float *seq, float scale)
{
	int B = b->B, T = b->T, N = b->N, C = b->C;
	float *p = b->params, *dp = b->grads;
	float *ds = b->dse, *de = b->dse + (size_t)B * T; /* d start/end logits [B,T] */
	float ws = b->nstart ? scale * 0.5f / b->nstart : 0, we = b->nend ? scale * 0.5f / b->nend : 0;
	memset(ds, 0, sizeof(float) * 2 * B * T);
	for (int r = 0; r < B; r++) {
		int n = qa_span(b, r), s = b->start_pos[r], e = b->end_pos[r];
		size_t o = (size_t)r * T;
		if (s >= 0 && s < n)
			qa_ce(b->start_logits + o, n, T, s, ds + o, ws);
		if (e >= 0 && e < n)
			qa_ce(b->end_logits + o, n, T, e, de + o, we);
	}
	for (int i = 0; i < N; i++) {
		size_t at = b->packed ? (size_t)b->at[i] : (size_t)i;
		b->logits[2 * i] = ds[at];
		b->logits[2 * i + 1] = de[at];
	}
	/* (qa_outputs.weight [2,C] then its bias [2]) */
	float *dw = b->seq ? b->lnd : HP(b, dp, QAW), *db = b->seq ? b->lnd + 2 * C : HP(b, dp, QAB);
	if (b->seq)
		memset(b->lnd, 0, sizeof(float) * (2 * (size_t)C + 2));
	LOOM_PROF(LOOM_PROF_MATMUL_BWD,
		  loom_k_linear_bwd(b->mm, b->dres, dw, db, b->logits + 2 * (size_t)b->r0, seq,
				    HP(b, p, QAW), b->Nr, C, 2););
	return b->seq ? sp_grads(b, 2 * (size_t)C + 2, 1, (float *const[]){ HP(b, dp, QAW) }) : 0;
}

/* dres = d(sequence output) from the MLM loss * scale (tensor
 * parallelism: the decoder's input gradient summed over the ranks;
 * sequence parallelism: dres of this rank's rows). */
static int mlm_bwd(struct loom_bert *b, float scale)
{
	int M = b->M, C = b->C, V = b->Vl, rc;
	float *p = b->params, *dp = b->grads;
	LOOM_PROF(LOOM_PROF_XENT_BWD,
		  loom_k_crossentropy_bwd(b->mlogits, b->mlm_tgt, M, V, b->tp_rank * V, -1, scale / M,
					  NULL););
	LOOM_PROF(LOOM_PROF_MATMUL_BWD,
		  loom_k_linear_bwd(b->mm, b->md, TP(b, dp, E_WORD), HP(b, dp, MBIAS), b->mlogits,
				    b->mln, TP(b, p, E_WORD), M, C, V););
	if ((rc = tp_sum(b, b->md, (size_t)M * C)))
		return rc;
	LOOM_PROF(LOOM_PROF_LN_BWD, loom_k_zero(b->mln, (size_t)M * C);
		  loom_k_layernorm_bwd(b->mln, HP(b, dp, TLNW), HP(b, dp, TLNB), b->md, b->mg,
				       HP(b, p, TLNW), b->mmean, b->mrstd, M, C););
	LOOM_PROF(LOOM_PROF_GELU_BWD, loom_k_gelu_erf_bwd(b->mln, b->mt, b->mln, (size_t)M * C););
	LOOM_PROF(LOOM_PROF_MATMUL_BWD,
		  loom_k_linear_bwd(b->mm, b->md, HP(b, dp, TDW), HP(b, dp, TDB), b->mln, b->mx,
				    HP(b, p, TDW), M, C, C););
	LOOM_PROF(LOOM_PROF_ELEM_BWD, loom_k_zero(b->dres, (size_t)b->Nr * C););
	for (int k = 0; k < M; k++) { /* (sequence parallelism: this rank's rows) */
		int i = b->mlm_row[k] - b->r0;
		if (i >= 0 && i < b->Nr)
			memcpy(b->dres + (size_t)i * C, b->md + (size_t)k * C, sizeof(float) * C);
	}
	return 0;
}

static int backward(struct loom_bert *b, float scale)
{
	if (!b->acts || !b->have_targets)
		return loom_err_set(&b->err, LOOM_EINVAL, "backward without a forward with targets");
	int N = b->N, C = b->C, L = b->L, rc;
	float *p = b->params, *dp = b->grads;
	b->have_targets = 0;
	int qa = b->cfg.task == LOOM_BERT_QA;
	if ((qa ? !b->nstart && !b->nend : !b->M) && !b->dist.need)
		return 0; /* every target ignored: no gradient */
	/* (sharded weights: backward's gathers are collective, so it runs,
	 * with a zero gradient) */
	const float *seq = b->layer[L - 1].out;
	if ((rc = unit_need(b, L - 1, qa ? L - 2 : -1)))
		return rc;
	if (qa) {
		if ((rc = qa_bwd(b, seq, scale)))
			return rc;
	} else {
		if ((rc = unit_need(b, -1, L > 1 ? L - 2 : LOOM_BERT_UNIT_NONE)))
			return rc;
		if (b->M && (rc = mlm_bwd(b, scale)))
			return rc;
		if (!b->M)
			loom_k_zero(b->dres, (size_t)b->Nr * C);
		unit_done(b, -1);
	}
	/* under recompute the shared slots still hold the last layer's
	 * activations from the forward (the heads use buffers of their own):
	 * the layers below it are recomputed */
	for (int l = L - 1; l >= 0; l--) {
		const float *x = l ? b->layer[l - 1].out : b->x0;
		if (l < L - 1 && (rc = unit_need(b, l, l ? l - 1 : -1)))
			return rc;
		if (b->cfg.recompute && l < L - 1 && (rc = layer_fwd(b, l, x, &b->layer[l])))
			return rc;
		if ((rc = layer_bwd(b, l, x, &b->layer[l])))
			return rc;
		if (b->dist.grad_ready)
			LOOM_PROF(LOOM_PROF_COMM, b->dist.grad_ready(b->dist.ctx, l););
		unit_done(b, l);
	}
	/* x0 = drop(LayerNorm(emb)); sequence parallelism: of this rank's
	 * rows, their gradient into its rows of buf2, then gathered */
	if ((rc = unit_need(b, -1, LOOM_BERT_UNIT_NONE)))
		return rc;
	double t0 = LOOM_PROF_BEGIN();
	float *demb = b->seq ? b->buf2 + (size_t)b->r0 * C : b->buf1;
	float *dw = b->seq ? b->lnd : TP(b, dp, E_LNW), *db = b->seq ? b->lnd + C : TP(b, dp, E_LNB);
	const float *d;
	if (b->seq)
		memset(b->lnd, 0, sizeof(float) * 2 * (size_t)C);
	drop(b, b->dres, b->dres, b->train ? (float)b->cfg.dropout : 0.0f, -1, 0);
	loom_k_zero(demb, (size_t)b->Nr * C);
	loom_k_layernorm_bwd(demb, dw, db, b->dres, b->emb, TP(b, p, E_LNW), b->emb_mean,
			     b->emb_rstd, b->Nr, C);
	LOOM_PROF_END(LOOM_PROF_EMBED_BWD, t0);
	if ((rc = rows_gather(b, b->buf2, demb, &d)) ||
	    (b->seq && (rc = sp_grads(b, 2 * (size_t)C, 1, (float *const[]){ TP(b, dp, E_LNW) }))))
		return rc;
	t0 = LOOM_PROF_BEGIN();
	/* (tensor parallelism: the word rows of this rank's ids; positions
	 * and types on every rank, d being the same on each) */
	loom_k_encoder_bwd(TP(b, dp, E_WORD), b->tp_rank * b->Vl, b->Vl, TP(b, dp, E_POS),
			   TP(b, dp, E_TYPE), d, b->ids, b->seg, b->packed ? b->pos : NULL,
			   b->packed ? 1 : b->B, b->packed ? N : b->T, C);
	LOOM_PROF_END(LOOM_PROF_EMBED_BWD, t0);
	float *pad = pad_row(b, dp); /* HF's padding_idx: that row is never trained */
	if (pad)
		memset(pad, 0, sizeof(float) * C);
	unit_done(b, -1);
	if ((rc = loom_mm_check(b->mm, &b->err)))
		return rc;
	if (b->dist.grad_ready)
		LOOM_PROF(LOOM_PROF_COMM, b->dist.grad_ready(b->dist.ctx, -1););
	return 0;
}

int loom_bert_backward(struct loom_bert *b, float scale)
{
	loom_prof_backward(1);
	int rc = backward(b, scale);
	loom_prof_backward(0);
	return rc;
}

void loom_bert_step(struct loom_bert *b, float lr, int64_t t, float *norm)
{
	if (b->tp > 1) { /* on this rank's slices, clipped by the whole model's
			  * norm; a failed all-reduce leaves the weights as they
			  * were, the error in b->err (loom_dist_step reports it) */
		struct loom_tp tt;
		loom_bert_tp(b, &tt);
		if (!loom_tp_step(&tt, b->params, b->grads, b->m, b->v, &b->cfg.adamw, lr, t, norm))
			b->w16_ok = 0;
		return;
	}
	LOOM_PROF(LOOM_PROF_OPTIM,
		  loom_model_adamw(b->tensors, b->n_tensors, b->params, b->grads, b->m, b->v,
				   b->n_params, &b->cfg.adamw, lr, t, norm););
	b->w16_ok = 0;
}

/* ---- masked-LM inputs ----------------------------------------------------- */

int loom_bert_mlm_mask(int32_t *ids, int32_t *labels, const int32_t *input_mask, int B, int T,
		       int V, int32_t cls_id, int32_t sep_id, int32_t mask_id, uint64_t key)
{
	int chosen = 0;
	for (int r = 0; r < B; r++)
		for (int t = 0; t < T; t++) {
			size_t i = (size_t)r * T + t;
			labels[i] = -100;
			if ((input_mask && !input_mask[i]) || ids[i] == cls_id || ids[i] == sep_id)
				continue;
			uint64_t h = loom_splitmix64(key ^ loom_splitmix64((uint64_t)i));
			if ((h >> 40) * (1.0 / 16777216.0) >= 0.15)
				continue;
			labels[i] = ids[i];
			chosen++;
			uint64_t h2 = loom_splitmix64(h);
			double u = (h2 >> 40) * (1.0 / 16777216.0);
			if (u < 0.8)
				ids[i] = mask_id;
			else if (u < 0.9)
				ids[i] = (int32_t)(loom_splitmix64(h2) % (uint64_t)V);
		}
	return chosen;
}

/* ---- the hooks of data parallelism (lib/train/loom_dist.h) */

/* Layer index of a tensor: bert.encoder.layer.{l}. -> l; the head
 * (qa_outputs, cls.*) -> L-1 (its backward runs before layer L-1's ends);
 * embeddings -> -1 (the MLM decoder's tied weight among them: final only
 * after them). */
static int dist_tag(const char *name, int L)
{
	int l;
	if (sscanf(name, "bert.encoder.layer.%d.", &l) == 1)
		return l;
	if (!strncmp(name, "qa_outputs.", 11) || !strncmp(name, "cls.", 4))
		return L - 1;
	return -1;
}

static void dist_step(void *b, float lr, int64_t t, float *norm)
{
	loom_bert_step(b, lr, t, norm);
}

static void dist_weights_changed(void *b)
{
	loom_bert_weights_changed(b);
}

/* No masks: loom_dist's calls (grad_ready, sharding=weights' need, done
 * and tick, tensor parallelism's reduce, gather and scatter) into b->dist. */
static void dist_connect(void *model, const struct loom_dist_calls *c)
{
	struct loom_bert *b = model;
	_Static_assert(LOOM_BERT_UNIT_NONE == LOOM_DIST_UNIT_NONE, "one 'no next unit'");
	b->dist = *c;
}

static int dist_replicated(void *model, int i)
{
	int G;
	return tp_split(model, i, &G) == LOOM_TP_WHOLE;
}

void loom_bert_dist_model(struct loom_bert *b, struct loom_dist_model *m)
{
	*m = (struct loom_dist_model){
		.params = b->params, .grads = b->grads, .m = &b->m, .v = &b->v,
		.n_params = b->n_params, .tensors = b->tensors, .n_tensors = b->n_tensors,
		.n_layer = b->L, .adamw = b->cfg.adamw, .model = b,
		.tag = dist_tag, .step = dist_step, .weights_changed = dist_weights_changed,
		.connect = dist_connect, .replicated = b->tp > 1 ? dist_replicated : NULL,
		.sharding = b->cfg.sharding, .units = 1,
		/* forward's lookup, backward's LayerNorm; the MLM decoder's
		 * forward and backward */
		.emb_gathers = b->cfg.task == LOOM_BERT_QA ? 2 : 4,
	};
}
int loom_bert_rows(const struct loom_config *c, const struct loom_batch_hdr *h,
		   const uint32_t *tok, struct loom_batch_reader *r, struct loom_model_scratch *s,
		   struct loom_bert_batch *bb, struct loom_err *err)
{
	int B = (int)h->batch, T = c->seq_len, rec = (int)h->seq_len;
	size_t N = (size_t)B * T;
	struct {
		int32_t *ids, *seg, *mask, *start, *end, *labels;
	} xs, *x = &xs;
	if (!(x->ids = loom_model_scratch_get(s, 4 * N + 2 * (size_t)B)))
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	x->seg = x->ids + N;
	x->mask = x->seg + N;
	x->labels = x->mask + N;
	x->start = x->labels + N;
	x->end = x->start + B;
	*bb = (struct loom_bert_batch){ .input_ids = x->ids, .input_mask = x->mask };
	if (c->task == LOOM_TASK_MLM) {
		int n_in = T - 2, pad = (h->flags & LOOM_BATCH_F_PAD) != 0;
		for (int r = 0; r < B; r++) {
			const uint32_t *in = tok + (size_t)r * rec;
			int32_t *row = x->ids + (size_t)r * T, *m = x->mask + (size_t)r * T;
			int n = 0;
			while (n < n_in && !(pad && in[n] == h->pad_id))
				n++;
			row[0] = c->cls_id;
			for (int i = 0; i < n; i++)
				row[1 + i] = (int32_t)in[i];
			row[n + 1] = c->sep_id;
			for (int i = 0; i < T; i++) {
				m[i] = i < n + 2;
				if (i >= n + 2)
					row[i] = c->pad_token_id;
			}
		}
		for (int r = 0; r < B; r++) {
			uint64_t row = h->seq * ((uint64_t)B * h->world) + (uint64_t)h->rank * B +
				       (uint64_t)r;
			loom_bert_mlm_mask(x->ids + (size_t)r * T, x->labels + (size_t)r * T,
					   x->mask + (size_t)r * T, 1, T, c->vocab_size, c->cls_id,
					   c->sep_id, c->mask_id,
					   loom_splitmix64(c->seed ^ 0x6d6c6d6d61736bull ^
							   loom_splitmix64(row)));
		}
		bb->mlm_labels = x->labels;
		return 0;
	}
	static const char *const names[4] = { "segment_ids", "input_mask", "start_positions",
					      "end_positions" };
	int32_t *dst[4] = { x->seg, x->mask, x->start, x->end };
	const struct loom_batch_feature *ft;
	size_t nf;
	loom_batch_reader_features(r, &ft, &nf);
	if (!nf)
		return loom_err_set(err, LOOM_EFORMAT, "token frames (version 1), but task=squad "
				    "reads the features of loom-squad prepare (loom-feed --manifest "
				    "PREFIX.manifest.json)");
	for (int k = 0; k < 4; k++) {
		size_t j = 0;
		while (j < nf && strcmp(ft[j].name, names[k]))
			j++;
		if (j == nf)
			return loom_err_set(err, LOOM_EFORMAT, "no feature \"%s\": task=squad reads "
					    "the features of loom-squad prepare", names[k]);
		int per_token = k < 2;
		if (ft[j].shape != (per_token ? LOOM_BATCH_PER_TOKEN : LOOM_BATCH_PER_RECORD) ||
		    (int)ft[j].length != (per_token ? rec : 1))
			return loom_err_set(err, LOOM_EFORMAT, "feature \"%s\" is not %s", names[k],
					    per_token ? "per-token" : "one value per record");
		const int64_t *v = loom_batch_reader_values(r, j);
		size_t n = per_token ? N : (size_t)B;
		for (size_t i = 0; i < n; i++) {
			if (v[i] < INT32_MIN || v[i] > INT32_MAX)
				return loom_err_set(err, LOOM_ERANGE, "feature \"%s\": value %lld "
						    "(record %zu) is outside int32", names[k],
						    (long long)v[i], per_token ? i / T : i);
			dst[k][i] = (int32_t)v[i];
		}
	}
	for (size_t i = 0; i < N; i++)
		x->ids[i] = (int32_t)tok[i];
	bb->segment_ids = x->seg;
	bb->start_positions = x->start;
	bb->end_positions = x->end;
	return 0;
}

/* ---- the model interface (loom_model.h) ---------------------------------- */

static size_t ops_n_params(const void *m)
{
	const struct loom_bert *b = m; /* tensor parallelism: the whole model's */
	size_t n = 0;
	for (int i = 0; i < b->n_tensors; i++) {
		int G;
		n += b->tensors[i].numel * (tp_split(b, i, &G) == LOOM_TP_WHOLE ? 1 : (size_t)b->tp);
	}
	return n;
}

/* tensor parallelism: a rank's parameter count (tp 1: all) */
static uint64_t tp_params(const struct loom_bert_config *bc, int tp)
{
	struct loom_tensor *t = calloc((size_t)loom_bert_n_tensors(bc), sizeof *t);
	uint64_t n = t ? table_tp(bc, tp, t) : 0;
	free(t);
	return n;
}

/* A rank's plan (tensor parallelism: of its slices; sharding=weights: a
 * shard of them and the gathered units; the bytes it sends at every
 * position real and 15% of them masked-LM targets, the recipe's) */
static void ops_plan(const struct loom_config *c, int recompute, struct loom_model_mem *m)
{
	struct loom_bert_config bc;
	loom_bert_config_from(c, &bc);
	bc.recompute = recompute;
	int tp = c->tensor_parallel;
	uint64_t n = tp > 1 ? tp_params(&bc, tp) : loom_config_n_params(c);
	uint64_t R = c->data_parallel > 1 ? c->data_parallel : 1, N = (uint64_t)c->micro_batch * c->seq_len;
	uint64_t shard = (n + R - 1) / R; /* a rank's slice of the moments */
	int weights = R > 1 && c->sharding == LOOM_SHARD_WEIGHTS;
	/* sharding=weights: that slice of the weights and gradients too, and
	 * full copies of the units in use: the embeddings' weights and
	 * gradients together (the MLM decoder's backward, with 2 layers'
	 * weights; QA's embeddings' backward, with a layer's gradients), or
	 * (MLM: beside the embeddings' gradients) 2 layers' weights and 2
	 * layers' gradients, one computing and one in flight */
	uint64_t C = (uint64_t)c->n_embd, L = (uint64_t)c->n_layer;
	uint64_t emb = ((uint64_t)c->vocab_size / tp + c->n_positions + c->type_vocab_size + 2) * C;
	uint64_t lay = (n - emb) / L, mlm = bc.task == LOOM_BERT_MLM;
	uint64_t head = 2 * emb + (mlm ? 2 : 1) * lay, layers = (mlm ? emb : 0) + 4 * lay;
	*m = (struct loom_model_mem){
		.params = 4 * (weights ? shard : n), .grads = 4 * (weights ? shard : n),
		.adam = 8 * shard, .gshard = R > 1 && !weights ? 4 * shard : 0,
		.gathered = weights ? 4 * (head > layers ? head : layers) : 0,
		.gathered_head = weights && head > layers,
		.acts = 4 * (uint64_t)act_floats(&bc, tp, c->micro_batch, c->seq_len),
		.bf16 = c->precision == LOOM_PREC_BF16 ? 2 * (weights ? emb + 2 * lay : n) : 0,
		.tp_bytes = tp_bytes(&bc, tp, N, N * 15 / 100, c->grad_accum),
	};
	m->total = m->params + m->grads + m->adam + m->gshard + m->gathered + m->acts + m->bf16;
}

static void ops_begin_step(void *m, int64_t step)
{
	(void)m; /* the gradients are zero: loom_bert_step leaves them so */
	(void)step;
}

static void ops_step(void *m, float lr, int64_t step, float *norm)
{
	loom_bert_step(m, lr, step, norm);
}

static int ops_forward(struct loom_bert *b, const struct loom_config *c, const struct loom_frame *f,
		       struct loom_model_scratch *s, int train, uint64_t key, float *loss)
{
	struct loom_bert_batch bb;
	int rc = loom_bert_rows(c, f->h, f->tok, f->r, s, &bb, &b->err);
	return rc ? rc : loom_bert_forward(b, &bb, (int)f->h->batch, c->seq_len, train, key, loss);
}

static int ops_micro(void *m, const struct loom_config *c, const struct loom_frame *f,
		     struct loom_model_scratch *s, uint64_t key, float scale, float *loss)
{
	int rc = ops_forward(m, c, f, s, 1, key, loss);
	return rc ? rc : loom_bert_backward(m, scale);
}

/* squad: per feature; mlm: per masked token (the same masks at every
 * evaluation): loom_bert_eval_counts */
static int ops_eval(void *m, const struct loom_config *c, const struct loom_frame *f,
		    struct loom_model_scratch *s, struct loom_eval_sums *sums)
{
	double a;
	int64_t n, k;
	int rc = ops_forward(m, c, f, s, 0, 0, NULL);
	if (rc)
		return rc;
	loom_bert_eval_counts(m, &a, &n, &k);
	sums->nll += a;
	sums->n += n;
	sums->correct += k;
	return 0;
}

static const char *ops_error(const void *m)
{
	return loom_bert_error(m);
}

const struct loom_model_ops loom_bert_ops = {
	.n_params = ops_n_params, .plan = ops_plan, .begin_step = ops_begin_step,
	.step = ops_step, .micro = ops_micro, .eval = ops_eval, .error = ops_error,
};
