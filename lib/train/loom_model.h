/*
 * loom_model.h - what the models (lib/train/loom_gpt.h, lib/train/loom_bert.h)
 * share: the parameter table, allocation, initialisation, dropout keys,
 * the matmul backend and the AdamW step.
 *
 * Parameters, gradients and the AdamW moments are each one float
 * allocation; a table of struct loom_tensor names every tensor (HuggingFace
 * names and shapes), its offset in those allocations and whether weight
 * decay applies, so checkpoints dump and load tensors directly and the
 * optimizer steps tensor by tensor.  Nothing prints.
 */
#ifndef LOOM_MODEL_H
#define LOOM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"
#include "loom_mm.h"

struct loom_tensor {
	char name[64];
	int ndim;
	int64_t shape[2];
	size_t offset;          /* in floats, into params/grads/m/v */
	size_t numel;
	int decay;              /* 1: weight decay applies (not norm/bias) */
};

/* Append tensor `name` [d0] (ndim 1) or [d0, d1] at *off to t[*n]; *off
 * and *n advance. */
void loom_model_add(struct loom_tensor *t, int *n, size_t *off, const char *name, int ndim,
		    int64_t d0, int64_t d1, int decay);

/* The checkpoint table (lib/train/loom_ckpt.h) of tab[0..nt): names and
 * shapes, data = base + offset (base: the params, m or v). */
struct loom_ckpt_tensor;
void loom_model_ckpt_tensors(const struct loom_tensor *tab, int nt, float *base,
			     struct loom_ckpt_tensor *out);

/* Refuse the first id of x[0..n) outside 0..lim-1 (other than *skip when
 * skip != NULL): LOOM_EINVAL with "WHAT ID at position I is outside RANGE
 * (0..LIM-1)" in err; else 0. */
/* The index of the largest of x[0..n) (the first of ties), n >= 1. */
int loom_model_argmax(const float *x, int n);

int loom_model_check_ids(const int32_t *x, size_t n, int lim, const int *skip, const char *what,
			 const char *range, struct loom_err *err);

/* n zeroed floats, 64-byte aligned (at least one), lazily backed
 * (loom_lazy_alloc: pages cost memory once written); free with
 * loom_lazy_free; NULL on ENOMEM. */
float *loom_model_falloc(size_t n);

/* A model's parameter store of n floats: the parameters, their gradients
 * and the AdamW moments m and v, one loom_model_falloc each; 0, or
 * LOOM_ENOMEM with none left allocated. */
int loom_model_store_alloc(size_t n, float **params, float **grads, float **m, float **v);
/* Free what loom_model_store_alloc made (NULLs are fine). */
void loom_model_store_free(float *params, float *grads, float *m, float *v);

/* p[0..n) = std * N(0, 1), drawn counter-based from `key` (independent of
 * the thread count): Box-Muller on pairs. */
void loom_model_normal(float *p, size_t n, float std, uint64_t key);
/* Elements first .. first+n-1 of what loom_model_normal draws from `key`
 * into p[0..n) (a slice of a tensor drawn whole elsewhere). */
void loom_model_normal_at(float *p, size_t n, float std, uint64_t key, size_t first);
/* The key of tensor i of a model initialised from `seed`. */
uint64_t loom_model_init_key(uint64_t seed, int i);

/* Initialise the n_params floats of a model's table tab[0..nt) from
 * `seed`: a 1-D tensor is filled with init(t, ctx) (1 for a LayerNorm
 * weight, 0 for a bias), another drawn N(0, init(t, ctx)^2) with
 * loom_model_init_key(seed, i); m, v and grads zeroed. */
void loom_model_init_weights(const struct loom_tensor *tab, int nt, float *params, float *grads,
			     float *m, float *v, size_t n_params, uint64_t seed,
			     float (*init)(const struct loom_tensor *t, const void *ctx),
			     const void *ctx);
/* Only the parameters of tensors first..nt-1, as loom_model_init_weights
 * draws them (e.g. a new head); nothing else touched. */
void loom_model_init_tensors(const struct loom_tensor *tab, int first, int nt, float *params,
			     uint64_t seed, float (*init)(const struct loom_tensor *t, const void *ctx),
			     const void *ctx);

/* The dropout mask key of site `site` of layer l (-1: embeddings) for a
 * forward with key `key`. */
uint64_t loom_model_site_key(uint64_t key, int l, int site);

/* The matmul backend of `precision` in *mm (made on first use; fp32
 * leaves it NULL) with a current bf16 copy of params[0..n) (*w16_ok set
 * once made).  0 or the error (in err). */
int loom_model_ready_mm(struct loom_mm **mm, int *w16_ok, int precision, const float *params,
			size_t n, struct loom_err *err);

/* A model's memory plan per rank in bytes (the GPT's: loom_gpt_memory_plan;
 * either model's: loom_trainer_plan, lib/train/loom_trainer.h). */
struct loom_model_mem {
	uint64_t params, grads, adam, acts, total;
	uint64_t bf16;          /* precision=bf16: weight copy + operand scratch */
	uint64_t gshard;        /* sharding=optimizer, N > 1: the gradient shard */
	uint64_t gathered;      /* sharding=weights, N > 1: gathered layer buffers */
	int gathered_head;      /* 1: their largest set is the LM head's (embeddings'
				   params and grads, a layer's params), else 2 layers' */
	uint64_t tp_bytes;      /* tensor_parallel > 1: bytes sent per step per rank
				   in its all-reduces (loom_gpt_tp_bytes) */
};

/* --- the model interface (loom_gpt_ops, loom_bert_ops) -------------------- */

struct loom_config;
struct loom_batch_hdr;
struct loom_batch_reader;

/* A batch frame as read: header, ids, the reader (its features) and where
 * it came from, for messages. */
struct loom_frame {
	const struct loom_batch_hdr *h;
	const uint32_t *tok;
	struct loom_batch_reader *r;
	const char *src;        /* "stdin", --eval-data's path */
	uint64_t n;             /* frame number in src */
};

/* An evaluation's sums: loss x count, count (tokens, rows or masked
 * tokens) and the count predicted right. */
struct loom_eval_sums {
	double nll;
	int64_t n, correct;
};

/* int32 buffers the caller owns for a model's batches, grown as needed
 * (the GPT: a frame's inputs then its targets; the BERT: its rows). */
struct loom_model_scratch {
	int32_t *buf;
	size_t cap;
};
/* At least n int32s at s->buf (kept when large enough), or NULL on ENOMEM. */
int32_t *loom_model_scratch_get(struct loom_model_scratch *s, size_t n);
void loom_model_scratch_release(struct loom_model_scratch *s);

/* What a trainer (lib/train/loom_trainer.h) asks of a model m (a struct
 * loom_gpt or a struct loom_bert); c is the model's configuration.
 * Errors: a negative LOOM_E* code, the message in error(m). */
struct loom_model_ops {
	size_t (*n_params)(const void *m);
	/* memory plan (bytes) per rank at c's micro_batch x seq_len */
	void (*plan)(const struct loom_config *c, int recompute, struct loom_model_mem *mem);
	void (*begin_step)(void *m, int64_t step);      /* before optimizer step `step` */
	/* the AdamW step `step` at lr (one process), the gradient norm in *norm */
	void (*step)(void *m, float lr, int64_t step, float *norm);
	/* forward + backward of scale x the frame's loss (*loss), dropout keyed by key */
	int (*micro)(void *m, const struct loom_config *c, const struct loom_frame *f,
		     struct loom_model_scratch *s, uint64_t key, float scale, float *loss);
	/* forward of an evaluation frame, its sums added to *sums */
	int (*eval)(void *m, const struct loom_config *c, const struct loom_frame *f,
		    struct loom_model_scratch *s, struct loom_eval_sums *sums);
	const char *(*error)(const void *m);
};

/* AdamW hyperparameters. */
struct loom_adamw {
	double beta1, beta2, eps, weight_decay;
	double grad_clip;       /* global-norm clip (<= 0: none) */
};
/* The global gradient norm of grads[0..n) (before clipping) into *norm (may
 * be NULL); clip to h->grad_clip; AdamW step t (1-based) at lr on every
 * tensor of t[nt], weight decay only where decay is set; the gradients
 * are left zeroed. */
void loom_model_adamw(const struct loom_tensor *tab, int nt, float *params, float *grads,
		      float *m, float *v, size_t n, const struct loom_adamw *h, float lr,
		      int64_t t, float *norm);
/* Its two parts.  The norm: sqrt(sumsq) into *norm (may be NULL), and
 * the scale that clips it to h->grad_clip (1: none). */
float loom_model_clip_scale(const struct loom_adamw *h, double sumsq, float *norm);
/* The step: AdamW step t at lr on every tensor of tab[nt] with the
 * gradients scaled by gscale, weight decay where decay is set; the
 * gradients left zeroed. */
void loom_model_adamw_apply(const struct loom_tensor *tab, int nt, float *params, float *grads,
			    float *m, float *v, const struct loom_adamw *h, float lr, int64_t t,
			    float gscale);

#endif
