/*
 * loom_config.h - the typed, validated model + training configuration.
 *
 * Purpose: one struct holding every knob of a loom GPT model and of its
 * training run, filled in layers like Graphcore's config classes:
 *   defaults -> a preset (share/presets/NAME.json, found via loom_share_path)
 *   -> a config file (JSON object) -> `--set key=value,...` overrides.
 * Every key is typed (int, float, bool, string, enum) and range-checked as
 * it is applied; unknown keys and wrong types are refused at once.
 * loom_config_validate() then checks coherence (n_embd % n_head,
 * global_batch == micro_batch * grad_accum * data_parallel, seq_len <=
 * n_positions, min_lr <= lr, ...).  Every refusal is one line naming the
 * key and the rule, e.g. "n_embd: 100 is not divisible by n_head (3)".
 *
 * The resolved config serialises to a JSON object (jansson) for
 * --print-config and for checkpoints; loom_config_apply_json() reads it
 * back (the same typed checks apply).
 *
 * Dry-run arithmetic (parameter count, FLOPs per token) lives here;
 * the activation memory plan is in loom_gpt.h (it follows the model's
 * buffer layout exactly).
 *
 * Ownership: plain struct, no allocations.  Errors: functions return 0 or a
 * negative LOOM_E* code and leave the message in c->err.  Thread-safety:
 * the default (loom_common.h).
 */
#ifndef LOOM_CONFIG_H
#define LOOM_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

struct json_t;

enum loom_decay {
	LOOM_DECAY_LINEAR = 0,
	LOOM_DECAY_COSINE,
	LOOM_DECAY_INVSQRT,
	LOOM_DECAY_CONSTANT,
	LOOM_DECAY_POLY,
};

/* Per-token loss weights (loom_k_token_weights() in lib/kernels/loom_kernels.h). */
enum loom_loss_weighting {
	LOOM_LOSSW_NONE = 0,
	LOOM_LOSSW_INVCOUNT,    /* 1/k for a target occurring k times in its row */
};

/* RigL (lib/train/loom_rigl.h): the projections sparse_layers may name,
 * as bits, and the schedules and poolings. */
enum loom_sparse_layer {
	LOOM_SL_QKV = 1, LOOM_SL_PROJ = 2, LOOM_SL_FC = 4, LOOM_SL_FCPROJ = 8,
	LOOM_SL_ALL = 15,
};
enum loom_prune_schedule { LOOM_PRUNE_COSINE = 0, LOOM_PRUNE_CONSTANT };
enum loom_pooling { LOOM_POOL_AVG = 0, LOOM_POOL_MAX };
/* Under MPI: the AdamW state only (ZeRO-1), or the weights, their
 * gradients and the AdamW state (ZeRO-3, gathered a layer at a time). */
enum loom_sharding { LOOM_SHARD_OPTIMIZER = 0, LOOM_SHARD_WEIGHTS };
/* The model (lib/train/loom_gpt.h or loom_bert.h) and what it trains. */
enum loom_model_kind { LOOM_MODEL_GPT = 0, LOOM_MODEL_BERT };
enum loom_task {
	LOOM_TASK_LM = 0,       /* gpt: next-token prediction */
	LOOM_TASK_SQUAD,        /* bert: the QA head on squad-features frames */
	LOOM_TASK_MLM,          /* bert: masked-LM on token frames */
};

/* The largest vocab_size (token ids 0..2^24-1): larger than any tokenizer
 * (gpt2 50257, o200k 200019), small enough for every int32 index. */
#define LOOM_CONFIG_MAX_VOCAB (1 << 24)

struct loom_config {
	char preset[64];        /* name of the preset or file it came from */
	int model;              /* enum loom_model_kind */
	int task;               /* enum loom_task */
	/* model */
	int n_layer;
	int n_embd;
	int n_head;
	int vocab_size;
	int n_positions;        /* size of the position table */
	int seq_len;            /* training sequence length T (<= n_positions) */
	double dropout;         /* embedding + residual dropout probability */
	double attn_dropout;    /* attention-probability dropout probability */
	double layer_norm_epsilon;
	/* bert only (not in a GPT's JSON) */
	int intermediate;       /* feed-forward width; 0 = 4 n_embd */
	int type_vocab_size;
	double init_std;
	int pad_token_id;
	int cls_id, sep_id, mask_id;    /* mlm: the rows' and the mask's ids */
	int qa_loss;            /* squad: enum loom_bert_qa_loss (0 all positions, 1 real tokens) */
	int doc_stride, max_query; /* squad: the features' windows (with seq_len),
				    * recorded for loom-eval squad -c */
	/* training */
	int micro_batch;        /* B: records per frame / forward pass */
	int grad_accum;         /* micro-batches per optimizer step */
	int global_batch;       /* 0 = derived: micro_batch*grad_accum*dp */
	int data_parallel;      /* data-parallel ranks (replicas) */
	int tensor_parallel;    /* ranks that split each layer of a replica; absent = 1 */
	int sequence_parallel;  /* 1: the token-wise regions split too (gpt); absent = 0 */
	int sharding;           /* enum loom_sharding: what the ranks shard (lib/train/loom_dist.h) */
	double dist_timeout;    /* seconds before a rank names one that does not answer (0 = never) */
	int64_t steps;          /* optimizer steps in total */
	double lr, min_lr;
	int64_t warmup_steps;   /* linear warm-up steps ... */
	double warmup_proportion; /* ... or a proportion of steps (not both) */
	int decay;              /* enum loom_decay */
	double decay_power;     /* inverse_sqrt: lr*(w/step)^p; polynomial: (1-x)^p */
	int64_t cooldown_steps; /* polynomial: decay length after warm-up (0 = to steps) */
	int loss_weighting;     /* enum loom_loss_weighting (training loss only) */
	double beta1, beta2, eps, weight_decay;
	double grad_clip;       /* global-norm clip; 0 = off */
	int ignore_id;          /* target id ignored by the loss; -1 = none */
	uint64_t seed;
	int recompute;          /* activation checkpointing per layer */
	int precision;          /* matmuls: enum loom_precision (lib/kernels/loom_mm.h), fp32|bf16 */
	int record_len;         /* tokens per record in the data; 0 = unknown */
	/* RigL dynamic block sparsity (sparsity 0: dense, the rest unused) */
	double sparsity;        /* fraction of dead blocks per sparse layer, [0,1) */
	int sparse_layers;      /* enum loom_sparse_layer bits */
	int block_size;         /* 8, 16 or 32 */
	double prune_ratio;     /* fraction of live blocks replaced per update */
	int prune_schedule;     /* enum loom_prune_schedule */
	int64_t prune_end;      /* no update at or after this step; 0 = 0.75 steps */
	int64_t prune_every;    /* steps between mask updates (>= 1) */
	int pooling;            /* enum loom_pooling: a block's gradient score */
	uint64_t cli_set;       /* a bit per key (its index in the table) that
				 * loom_config_apply_sets set; not a key */
	struct loom_err err;
};

/* 1 when the ranks shard the weights: sharding=weights over more than
 * one rank (one rank holds everything whatever the key says). */
static inline int loom_config_shards_weights(const struct loom_config *c)
{
	return c->sharding == LOOM_SHARD_WEIGHTS && c->data_parallel > 1;
}

/* Built-in defaults (a small model; training knobs like nanoGPT's). */
void loom_config_defaults(struct loom_config *c);

/* Apply a JSON object: every member must be a known key of the right type. */
int loom_config_apply_json(struct loom_config *c, const struct json_t *obj);
/* Apply a JSON file. */
int loom_config_apply_file(struct loom_config *c, const char *path);
/* Apply share/presets/NAME.json. */
int loom_config_apply_preset(struct loom_config *c, const char *name);
/* 1 if NAME is a file (it has a '/' or ends in ".json"), 0 for a preset. */
int loom_config_names_file(const char *name_or_path);
/* Apply "key=value,key=value" (values parsed by the key's type): the
 * command line's --set.  warmup_steps set here zeroes an earlier
 * warmup_proportion (a preset's) and the other way round, unless both are
 * set by calls of this function (then loom_config_validate refuses them).
 * Records the keys it sets in cli_set. */
int loom_config_apply_sets(struct loom_config *c, const char *kvs);
/* 1 when loom_config_apply_sets set `key` (the command line's --set). */
int loom_config_cli_set(const struct loom_config *c, const char *key);
/* Apply one key from a string value. */
int loom_config_set(struct loom_config *c, const char *key, const char *value);
/* 1 if `name` is a configuration key (lr, steps, ...), else 0. */
int loom_config_is_key(const char *name);

/* Coherence checks (after all layers are applied).  Fills global_batch
 * when it is 0. */
int loom_config_validate(struct loom_config *c);
/* Tokens a record has beyond the seq_len T a row trains on: 1 for the
 * GPT (T inputs and a last target), 0 for task=squad (a feature is a row;
 * exactly T), -2 for task=mlm (a row is [CLS], T-2 tokens of the record,
 * [SEP]). */
int loom_config_record_extra(const struct loom_config *c);
/* Data checks: frames carry records of `rec_tokens` tokens (T +
 * loom_config_record_extra) in batches of `batch` records. */
int loom_config_check_data(struct loom_config *c, int batch, int rec_tokens);

/* The resolved config as a new JSON object (caller json_decref()s). */
struct json_t *loom_config_to_json(const struct loom_config *c);
/* Same, as a malloc'd pretty-printed string with a final newline. */
char *loom_config_dump(const struct loom_config *c);

/* Arithmetic. */
uint64_t loom_config_n_params(const struct loom_config *c);
/* Weights of the projections sparse_layers names (all of them, live or
 * not; 0 when dense). */
uint64_t loom_config_sparse_weights(const struct loom_config *c);
/* Training FLOPs per token: 6 * params + 12 * n_layer * seq_len * n_embd,
 * where a sparse model's dead weights cost nothing except in the dense
 * weight gradient of its mask-update steps (2 per weight, averaged over
 * the run's steps). */
double loom_config_flops_per_token(const struct loom_config *c);
/* Forward-only FLOPs per token (2 * live params + 4 * n_layer * T * C). */
double loom_config_fwd_flops_per_token(const struct loom_config *c);

/* Learning rate at optimizer step `step` (1-based): a linear warm-up
 * lr*step/w over the w warm-up steps, then by `decay`:
 *   linear, cosine: from lr to min_lr at `steps`;
 *   inverse_sqrt: lr * (w/step)^decay_power, floored at min_lr (w = 1
 *     without warm-up; decay_power 0.5, the default, is 1/sqrt);
 *   polynomial: min_lr + (lr - min_lr) * (1 - s/D)^decay_power with
 *     s = min(step - w, D), D = cooldown_steps (0: steps - w), then min_lr.
 *     This is the schedule of Graphcore's sparse language model (examples,
 *     applications/tensorflow/dynamic_sparsity/language_modelling,
 *     tf_utils.py BertSchedule: tf.train.polynomial_decay over
 *     --cooldown-steps with --decay-power, default 0.5);
 *   constant: lr. */
double loom_config_lr(const struct loom_config *c, int64_t step);

const char *loom_decay_name(int decay);
const char *loom_model_name(int model);
const char *loom_task_name(int task);
/* RigL: prune_end resolved (0 -> round(0.75 * steps)); the prune ratio at
 * step t (cosine: prune_ratio/2 * (1 + cos(pi t / prune_end)), constant:
 * prune_ratio); 1 if step t (1-based) updates the masks
 * (sparsity > 0, t % prune_every == 0, t < prune_end). */
int64_t loom_config_prune_end(const struct loom_config *c);
double loom_config_prune_ratio(const struct loom_config *c, int64_t t);
int loom_config_prune_due(const struct loom_config *c, int64_t t);
/* The bits of sparse_layers as "qkv,proj,fc,fcproj" (into buf[n]). */
const char *loom_sparse_layers_str(int bits, char *buf, size_t n);
const char *loom_config_error(const struct loom_config *c);

#endif
