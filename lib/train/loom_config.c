/* loom_config.c - typed, validated configuration (see loom_config.h). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_config.h"
#include "loom_file.h"

enum ktype { K_INT, K_I64, K_U64, K_FLOAT, K_BOOL, K_ENUM, K_STR, K_SET };
/* K_SET: a non-empty comma list of enums names, stored as bits 1 << index */

struct key {
	const char *name;
	enum ktype type;
	size_t off;
	double min, max;
	const char *const *enums;
	const char *help;
	int bert;               /* 1: in the JSON only for model=bert */
};

static const char *const decay_names[] = { "linear", "cosine", "inverse_sqrt", "constant",
					    "polynomial", NULL };
static const char *const lossw_names[] = { "none", "inverse_count", NULL }; /* enum loom_loss_weighting */
static const char *const precision_names[] = { "fp32", "bf16", NULL }; /* enum loom_precision */
static const char *const layer_names[] = { "qkv", "proj", "fc", "fcproj", NULL }; /* loom_sparse_layer */
static const char *const schedule_names[] = { "cosine", "constant", NULL };
static const char *const pooling_names[] = { "avg", "max", NULL };
static const char *const sharding_names[] = { "optimizer", "weights", NULL }; /* enum loom_sharding */
static const char *const model_names[] = { "gpt", "bert", NULL };     /* enum loom_model_kind */
static const char *const task_names[] = { "lm", "squad", "mlm", NULL }; /* enum loom_task */
static const char *const qa_loss_names[] = { "all", "real", NULL }; /* enum loom_bert_qa_loss */

#define O(f) offsetof(struct loom_config, f)
/* bert: a key only model=bert reads, in the resolved JSON only then (a
 * GPT configuration, and so a GPT checkpoint, reads as before they came) */
static const struct key keys[] = {
	{ "model", K_ENUM, O(model), 0, 0, model_names, "gpt|bert", 1 },
	{ "task", K_ENUM, O(task), 0, 0, task_names, "lm (gpt) | squad|mlm (bert)", 1 },
	{ "n_layer", K_INT, O(n_layer), 1, 4096, NULL, "transformer blocks", 0 },
	{ "n_embd", K_INT, O(n_embd), 1, 1 << 20, NULL, "hidden size C", 0 },
	{ "n_head", K_INT, O(n_head), 1, 4096, NULL, "attention heads", 0 },
	{ "vocab_size", K_INT, O(vocab_size), 2, LOOM_CONFIG_MAX_VOCAB, NULL, "vocabulary size", 0 },
	{ "n_positions", K_INT, O(n_positions), 1, 1 << 20, NULL, "position table size", 0 },
	{ "seq_len", K_INT, O(seq_len), 1, 1 << 20, NULL, "training sequence length T", 0 },
	{ "dropout", K_FLOAT, O(dropout), 0, 0.95, NULL, "embedding/residual dropout", 0 },
	{ "attn_dropout", K_FLOAT, O(attn_dropout), 0, 0.95, NULL, "attention-probability dropout", 0 },
	{ "layer_norm_epsilon", K_FLOAT, O(layer_norm_epsilon), 1e-12, 1e-1, NULL, "LayerNorm eps", 0 },
	{ "intermediate", K_INT, O(intermediate), 0, 1 << 22, NULL, "bert: feed-forward width (0 = 4 n_embd)", 1 },
	{ "type_vocab_size", K_INT, O(type_vocab_size), 1, 1 << 16, NULL, "bert: token types (segments)", 1 },
	{ "init_std", K_FLOAT, O(init_std), 0, 1, NULL, "bert: std of the initial weights", 1 },
	{ "pad_token_id", K_INT, O(pad_token_id), 0, LOOM_CONFIG_MAX_VOCAB, NULL, "bert: padding id (its embedding stays 0)", 1 },
	{ "cls_id", K_INT, O(cls_id), 0, LOOM_CONFIG_MAX_VOCAB, NULL, "bert mlm: [CLS] id", 1 },
	{ "sep_id", K_INT, O(sep_id), 0, LOOM_CONFIG_MAX_VOCAB, NULL, "bert mlm: [SEP] id", 1 },
	{ "qa_loss", K_ENUM, O(qa_loss), 0, 0, qa_loss_names, "bert squad: the start/end softmax over all positions (HF's) | the real tokens", 1 },
	{ "doc_stride", K_INT, O(doc_stride), 1, 1 << 16, NULL, "bert squad: the features' window stride (loom-squad prepare --stride; loom-eval squad -c's default)", 1 },
	{ "max_query", K_INT, O(max_query), 1, 1 << 16, NULL, "bert squad: question tokens kept (loom-squad prepare --max-query; loom-eval squad -c's default)", 1 },
	{ "mask_id", K_INT, O(mask_id), 0, LOOM_CONFIG_MAX_VOCAB, NULL, "bert mlm: [MASK] id", 1 },
	{ "micro_batch", K_INT, O(micro_batch), 1, 1 << 20, NULL, "records per micro-batch B", 0 },
	{ "grad_accum", K_INT, O(grad_accum), 1, 1 << 20, NULL, "micro-batches per step", 0 },
	{ "global_batch", K_INT, O(global_batch), 0, 1 << 30, NULL, "records per step (0 = derived)", 0 },
	{ "data_parallel", K_INT, O(data_parallel), 1, 1 << 16, NULL, "data-parallel ranks", 0 },
	{ "tensor_parallel", K_INT, O(tensor_parallel), 1, 1 << 16, NULL, "tensor-parallel ranks per data-parallel replica", 0 },
	{ "sequence_parallel", K_BOOL, O(sequence_parallel), 0, 1, NULL, "with tensor_parallel: LayerNorms, dropout and residuals split along the tokens", 0 },
	{ "sharding", K_ENUM, O(sharding), 0, 0, sharding_names, "optimizer|weights: what the MPI ranks shard", 0 },
	{ "dist_timeout", K_FLOAT, O(dist_timeout), 0, 1e7, NULL, "seconds a rank waits for another that does not answer (0 = forever)", 0 },
	{ "steps", K_I64, O(steps), 0, 1e15, NULL, "optimizer steps", 0 },
	{ "lr", K_FLOAT, O(lr), 0, 10, NULL, "peak learning rate", 0 },
	{ "min_lr", K_FLOAT, O(min_lr), 0, 10, NULL, "final learning rate", 0 },
	{ "warmup_steps", K_I64, O(warmup_steps), 0, 1e15, NULL, "linear warm-up steps", 0 },
	{ "warmup_proportion", K_FLOAT, O(warmup_proportion), 0, 1, NULL, "warm-up as a proportion of steps", 0 },
	{ "decay", K_ENUM, O(decay), 0, 0, decay_names, "linear|cosine|inverse_sqrt|constant|polynomial", 0 },
	{ "decay_power", K_FLOAT, O(decay_power), 0, 4, NULL, "inverse_sqrt/polynomial decay exponent (> 0)", 0 },
	{ "cooldown_steps", K_I64, O(cooldown_steps), 0, 1e15, NULL, "polynomial decay steps after warm-up (0 = to steps)", 0 },
	{ "beta1", K_FLOAT, O(beta1), 0, 0.999999, NULL, "AdamW beta1", 0 },
	{ "beta2", K_FLOAT, O(beta2), 0, 0.999999999, NULL, "AdamW beta2", 0 },
	{ "eps", K_FLOAT, O(eps), 1e-30, 1, NULL, "AdamW epsilon", 0 },
	{ "weight_decay", K_FLOAT, O(weight_decay), 0, 10, NULL, "AdamW weight decay", 0 },
	{ "grad_clip", K_FLOAT, O(grad_clip), 0, 1e9, NULL, "global-norm clip (0 = off)", 0 },
	{ "ignore_id", K_INT, O(ignore_id), -1, 1 << 24, NULL, "target id ignored by the loss (-1 = none)", 0 },
	{ "loss_weighting", K_ENUM, O(loss_weighting), 0, 0, lossw_names, "none|inverse_count (training loss)", 0 },
	{ "seed", K_U64, O(seed), 0, 9223372036854775807.0, NULL, "initialisation/dropout seed (< 2^63)", 0 },
	{ "recompute", K_BOOL, O(recompute), 0, 1, NULL, "activation checkpointing per layer", 0 },
	{ "precision", K_ENUM, O(precision), 0, 0, precision_names, "fp32|bf16 matmuls (bf16: oneDNN, fp32 accumulation)", 0 },
	{ "record_len", K_INT, O(record_len), 0, 1 << 20, NULL, "tokens per data record (0 = unknown)", 0 },
	{ "sparsity", K_FLOAT, O(sparsity), 0, 1, NULL, "RigL: fraction of dead blocks (0 = dense)", 0 },
	{ "sparse_layers", K_SET, O(sparse_layers), 0, 0, layer_names, "RigL: sparse projections, a comma list of qkv,proj,fc,fcproj", 0 },
	{ "block_size", K_INT, O(block_size), 8, 32, NULL, "RigL: block size, 8|16|32", 0 },
	{ "prune_ratio", K_FLOAT, O(prune_ratio), 0, 1, NULL, "RigL: fraction of live blocks replaced per update", 0 },
	{ "prune_schedule", K_ENUM, O(prune_schedule), 0, 0, schedule_names, "RigL: cosine|constant decay of prune_ratio", 0 },
	{ "prune_end", K_I64, O(prune_end), 0, 1e15, NULL, "RigL: last update before this step (0 = 0.75 x steps)", 0 },
	{ "prune_every", K_I64, O(prune_every), 0, 1e15, NULL, "RigL: steps between mask updates", 0 },
	{ "pooling", K_ENUM, O(pooling), 0, 0, pooling_names, "RigL: avg|max pooling of a block's gradient", 0 },
	{ "preset", K_STR, O(preset), 0, 0, NULL, "name of the preset", 0 },
};
#undef O
#define NKEYS (sizeof keys / sizeof keys[0])
_Static_assert(NKEYS <= 64, "loom_config.cli_set has a bit per key");

void loom_config_defaults(struct loom_config *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->preset, sizeof c->preset, "default");
	c->n_layer = 2;
	c->n_embd = 64;
	c->n_head = 4;
	c->vocab_size = 128;
	c->n_positions = 64;
	c->seq_len = 8;
	c->dropout = 0;
	c->attn_dropout = 0;
	c->layer_norm_epsilon = 1e-5;
	c->micro_batch = 4;
	c->grad_accum = 1;
	c->global_batch = 0;
	c->data_parallel = 1;
	c->tensor_parallel = 1;
	c->dist_timeout = 1800;
	c->steps = 100;
	c->lr = 6e-4;
	c->min_lr = 6e-5;
	c->warmup_steps = 0;
	c->warmup_proportion = 0;
	c->decay = LOOM_DECAY_COSINE;
	c->decay_power = 0.5;
	c->cooldown_steps = 0;
	c->loss_weighting = LOOM_LOSSW_NONE;
	c->beta1 = 0.9;
	c->beta2 = 0.95;
	c->eps = 1e-8;
	c->weight_decay = 0.1;
	c->grad_clip = 1.0;
	c->ignore_id = -1;
	c->doc_stride = 128;
	c->max_query = 64;
	c->seed = 1234;
	c->recompute = 0;
	c->precision = 0;
	c->record_len = 0;
	c->sparsity = 0;
	c->sparse_layers = LOOM_SL_ALL;
	c->block_size = 16;
	c->prune_ratio = 0.3;
	c->prune_schedule = LOOM_PRUNE_COSINE;
	c->prune_end = 0;
	c->prune_every = 100;
	c->pooling = LOOM_POOL_AVG;
	c->model = LOOM_MODEL_GPT;
	c->task = LOOM_TASK_LM;
	c->intermediate = 0;
	c->type_vocab_size = 2;
	c->init_std = 0.02;
	c->pad_token_id = 0;
	/* bert-base-uncased's vocab.txt */
	c->cls_id = 101;
	c->sep_id = 102;
	c->mask_id = 103;
}

const char *loom_model_name(int m)
{
	return m >= 0 && m <= LOOM_MODEL_BERT ? model_names[m] : "?";
}

const char *loom_task_name(int t)
{
	return t >= 0 && t <= LOOM_TASK_MLM ? task_names[t] : "?";
}

const char *loom_decay_name(int d)
{
	return d >= 0 && d <= LOOM_DECAY_POLY ? decay_names[d] : "?";
}

const char *loom_config_error(const struct loom_config *c)
{
	return c->err.msg;
}

static const struct key *find_key(const char *name)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (!strcmp(keys[i].name, name))
			return &keys[i];
	return NULL;
}

int loom_config_is_key(const char *name)
{
	return find_key(name) != NULL;
}

static const char *type_name(enum ktype t)
{
	switch (t) {
	case K_INT: case K_I64: case K_U64: return "an integer";
	case K_FLOAT: return "a number";
	case K_BOOL: return "a boolean";
	case K_ENUM: return "one of";
	case K_STR: return "a string";
	case K_SET: return "a comma list of";
	}
	return "?";
}

static int bad_type(struct loom_config *c, const struct key *k, const char *got)
{
	if (k->type == K_ENUM || k->type == K_SET) {
		char list[128] = "";
		for (int i = 0; k->enums[i]; i++)
			snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
				 i ? (k->type == K_SET ? "," : "|") : "", k->enums[i]);
		return loom_err_set(&c->err, LOOM_EINVAL, "%s: must be %s %s, not %s", k->name,
				    k->type == K_SET ? "a comma list of" : "one of", list, got);
	}
	return loom_err_set(&c->err, LOOM_EINVAL, "%s: must be %s, not %s", k->name,
			    type_name(k->type), got);
}

static int out_of_range(struct loom_config *c, const struct key *k, const char *v)
{
	if (k->type == K_FLOAT)
		return loom_err_set(&c->err, LOOM_ERANGE, "%s: %s is outside [%g, %g]",
				    k->name, v, k->min, k->max);
	return loom_err_set(&c->err, LOOM_ERANGE, "%s: %s is outside [%.0f, %.0f]", k->name,
			    v, k->min, k->max);
}

/* Store an integer value (already known to be integral). */
static int store_int(struct loom_config *c, const struct key *k, long long v, const char *txt)
{
	char *base = (char *)c + k->off;
	if (k->type == K_U64) {
		if (v < 0)
			return out_of_range(c, k, txt);
		*(uint64_t *)base = (uint64_t)v;
		return 0;
	}
	if ((double)v < k->min || (double)v > k->max)
		return out_of_range(c, k, txt);
	if (k->type == K_INT)
		*(int *)base = (int)v;
	else
		*(int64_t *)base = v;
	return 0;
}

static int store_float(struct loom_config *c, const struct key *k, double v, const char *txt)
{
	if (!isfinite(v) || v < k->min || v > k->max)
		return out_of_range(c, k, txt);
	*(double *)((char *)c + k->off) = v;
	return 0;
}

static int store_enum(struct loom_config *c, const struct key *k, const char *s)
{
	for (int i = 0; k->enums[i]; i++)
		if (!strcmp(k->enums[i], s)) {
			*(int *)((char *)c + k->off) = i;
			return 0;
		}
	char q[80];
	snprintf(q, sizeof q, "'%s'", s);
	return bad_type(c, k, q);
}

/* "fc,fcproj" -> bits; each name once, at least one. */
static int store_set(struct loom_config *c, const struct key *k, const char *s)
{
	int bits = 0;
	const char *p = s;
	char q[96];
	snprintf(q, sizeof q, "'%s'", s);
	for (;;) {
		size_t n = strcspn(p, ",");
		int i, found = 0;
		for (i = 0; k->enums[i]; i++)
			if (strlen(k->enums[i]) == n && !strncmp(k->enums[i], p, n)) {
				found = 1;
				break;
			}
		if (!found || (bits & (1 << i)))
			return bad_type(c, k, q);
		bits |= 1 << i;
		if (!p[n])
			break;
		p += n + 1;
	}
	*(int *)((char *)c + k->off) = bits;
	return 0;
}

const char *loom_sparse_layers_str(int bits, char *buf, size_t n)
{
	size_t o = 0;
	buf[0] = 0;
	for (int i = 0; layer_names[i] && o < n; i++)
		if (bits & (1 << i))
			o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? "," : "", layer_names[i]);
	return buf;
}

static int store_str(struct loom_config *c, const struct key *k, const char *s)
{
	char *dst = (char *)c + k->off;
	if (strlen(s) >= 64)
		return loom_err_set(&c->err, LOOM_ERANGE, "%s: longer than 63 bytes", k->name);
	strcpy(dst, s);
	return 0;
}

static int unknown_key(struct loom_config *c, const char *name)
{
	return loom_err_set(&c->err, LOOM_EINVAL,
			    "%s: unknown configuration key (see --print-config for the keys)", name);
}

int loom_config_apply_json(struct loom_config *c, const json_t *obj)
{
	const char *name;
	json_t *v;
	char txt[64];

	if (!json_is_object(obj))
		return loom_err_set(&c->err, LOOM_EINVAL, "configuration must be a JSON object");
	json_object_foreach((json_t *)obj, name, v) {
		const struct key *k = find_key(name);
		int rc = 0;
		if (!k)
			return unknown_key(c, name);
		switch (k->type) {
		case K_INT: case K_I64: case K_U64:
			if (json_is_integer(v)) {
				snprintf(txt, sizeof txt, "%lld", (long long)json_integer_value(v));
				rc = store_int(c, k, json_integer_value(v), txt);
			} else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
				   fabs(json_real_value(v)) < 9e15) {
				snprintf(txt, sizeof txt, "%g", json_real_value(v));
				rc = store_int(c, k, (long long)json_real_value(v), txt);
			} else {
				rc = bad_type(c, k, json_is_real(v) ? "a fraction" :
					      json_is_string(v) ? "a string" :
					      json_is_boolean(v) ? "a boolean" : "this JSON value");
			}
			break;
		case K_FLOAT:
			if (!json_is_number(v))
				return bad_type(c, k, json_is_string(v) ? "a string" :
						json_is_boolean(v) ? "a boolean" : "this JSON value");
			snprintf(txt, sizeof txt, "%g", json_number_value(v));
			rc = store_float(c, k, json_number_value(v), txt);
			break;
		case K_BOOL:
			if (!json_is_boolean(v))
				return bad_type(c, k, json_is_number(v) ? "a number" :
						json_is_string(v) ? "a string" : "this JSON value");
			*(int *)((char *)c + k->off) = json_is_true(v);
			break;
		case K_ENUM:
			if (!json_is_string(v))
				return bad_type(c, k, "a non-string");
			rc = store_enum(c, k, json_string_value(v));
			break;
		case K_STR:
			if (!json_is_string(v))
				return bad_type(c, k, "a non-string");
			rc = store_str(c, k, json_string_value(v));
			break;
		case K_SET:
			if (!json_is_string(v))
				return bad_type(c, k, "a non-string");
			rc = store_set(c, k, json_string_value(v));
			break;
		}
		if (rc)
			return rc;
	}
	return 0;
}

int loom_config_apply_file(struct loom_config *c, const char *path)
{
	json_error_t je;
	char *buf;
	size_t len;
	int rc = loom_file_read_input(path, LOOM_FILE_MAX_CONFIG, &buf, &len, &c->err);
	if (rc)
		return rc;
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	free(buf);
	if (!root && je.line >= 1)
		return loom_err_set(&c->err, LOOM_EFORMAT, "%s:%d: %s", path, je.line, loom_json_reason(je.text));
	if (!root)
		return loom_err_set(&c->err, LOOM_EFORMAT, "%s: %s", path, loom_json_reason(je.text));
	rc = loom_config_apply_json(c, root);
	json_decref(root);
	if (rc) {
		char msg[LOOM_ERR_MAX];
		snprintf(msg, sizeof msg, "%s", c->err.msg);
		return loom_err_set(&c->err, rc, "%s: %s", path, msg);
	}
	return 0;
}

int loom_config_apply_preset(struct loom_config *c, const char *name)
{
	char rel[256], path[4096];
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
			return loom_err_set(&c->err, LOOM_EINVAL, "preset '%s': bad name", name);
	snprintf(rel, sizeof rel, "presets/%s.json", name);
	if (!*name || loom_share_path(rel, path, sizeof path))
		return loom_err_set(&c->err, LOOM_EINVAL,
				    "preset '%s': no such preset (share/presets/%s.json)", name, name);
	int rc = loom_config_apply_file(c, path);
	if (!rc)
		snprintf(c->preset, sizeof c->preset, "%s", name);
	return rc;
}

int loom_config_names_file(const char *s)
{
	size_t n = strlen(s);
	return strchr(s, '/') || (n > 5 && !strcmp(s + n - 5, ".json"));
}

int loom_config_set(struct loom_config *c, const char *name, const char *v)
{
	const struct key *k = find_key(name);
	char q[96];
	if (!k)
		return unknown_key(c, name);
	snprintf(q, sizeof q, "'%s'", v);
	switch (k->type) {
	case K_INT: case K_I64: {
		char *end;
		errno = 0;
		long long x = strtoll(v, &end, 10);
		if (!*v || *end || errno)
			return bad_type(c, k, q);
		return store_int(c, k, x, v);
	}
	case K_U64: {
		uint64_t x;
		if (loom_parse_u64(v, 0, INT64_MAX, &x))
			return bad_type(c, k, q);
		*(uint64_t *)((char *)c + k->off) = x;
		return 0;
	}
	case K_FLOAT: {
		double x;
		if (loom_parse_double(v, &x))
			return bad_type(c, k, q);
		return store_float(c, k, x, v);
	}
	case K_BOOL:
		if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"))
			*(int *)((char *)c + k->off) = 1;
		else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no"))
			*(int *)((char *)c + k->off) = 0;
		else
			return bad_type(c, k, q);
		return 0;
	case K_ENUM:
		return store_enum(c, k, v);
	case K_STR:
		return store_str(c, k, v);
	case K_SET:
		return store_set(c, k, v);
	}
	return 0;
}

int loom_config_cli_set(const struct loom_config *c, const char *key)
{
	const struct key *k = find_key(key);
	return k && (c->cli_set >> (k - keys) & 1);
}

int loom_config_apply_sets(struct loom_config *c, const char *kvs)
{
	char *dup = strdup(kvs), *p;
	int rc = 0;
	if (!dup)
		return loom_err_set(&c->err, LOOM_ENOMEM, "out of memory");
	for (p = dup; *p;) {
		char *tok = p, *end = p + strcspn(p, ",");
		char *eq = memchr(tok, '=', (size_t)(end - tok));
		if (eq) {
			*eq = 0;
			const struct key *k = find_key(tok);
			/* a list value runs on over the commas up to the next
			 * key=value: "sparse_layers=fc,fcproj,lr=1e-3" */
			while (k && k->type == K_SET && *end == ',' && end[1] &&
			       !memchr(end + 1, '=', strcspn(end + 1, ",")))
				end += 1 + strcspn(end + 1, ",");
		}
		p = *end ? end + 1 : end;
		*end = 0;
		if (tok == end)
			continue;
		if (!eq) {
			rc = loom_err_set(&c->err, LOOM_EINVAL, "--set '%s': expected key=value", tok);
			break;
		}
		if ((rc = loom_config_set(c, tok, eq + 1)))
			break;
		/* one warm-up given here overrides the other one's earlier
		 * value (a preset's); both given here stay an error */
		c->cli_set |= 1ull << (find_key(tok) - keys);
		int ws = loom_config_cli_set(c, "warmup_steps"),
		    wp = loom_config_cli_set(c, "warmup_proportion");
		if (!strcmp(tok, "warmup_steps") && !wp)
			c->warmup_proportion = 0;
		else if (!strcmp(tok, "warmup_proportion") && !ws)
			c->warmup_steps = 0;
	}
	free(dup);
	return rc;
}

/* RigL keys: checked even while sparsity is 0, so a config stays valid
 * when only sparsity changes. */
static int validate_rigl(struct loom_config *c)
{
	struct loom_err *e = &c->err;
	int bs = c->block_size;
	if (c->sparsity >= 1)
		return loom_err_set(e, LOOM_EINVAL, "sparsity: %g is not in [0, 1)", c->sparsity);
	if (bs != 8 && bs != 16 && bs != 32)
		return loom_err_set(e, LOOM_EINVAL, "block_size: %d is not 8, 16 or 32", bs);
	if (c->prune_every < 1)
		return loom_err_set(e, LOOM_EINVAL, "prune_every: must be at least 1 step, not %lld",
				    (long long)c->prune_every);
	if (!c->sparse_layers)
		return loom_err_set(e, LOOM_EINVAL, "sparse_layers: names no projection");
	/* every width of a chosen projection: qkv C x 3C, proj C x C,
	 * fc C x 4C, fcproj 4C x C; all are multiples of C */
	if (c->sparsity > 0 && c->n_embd % bs)
		return loom_err_set(e, LOOM_EINVAL,
				    "block_size: %d does not divide n_embd (%d), a width of the sparse layers",
				    bs, c->n_embd);
	return 0;
}

int loom_config_record_extra(const struct loom_config *c)
{
	if (c->model != LOOM_MODEL_BERT)
		return 1;                       /* T inputs + the last target */
	return c->task == LOOM_TASK_MLM ? -2 : 0; /* [CLS] record [SEP]; the feature */
}

/* model and task agree, and a BERT's keys make sense */
static int validate_model(struct loom_config *c)
{
	struct loom_err *e = &c->err;
	if (c->model == LOOM_MODEL_GPT && c->task != LOOM_TASK_LM)
		return loom_err_set(e, LOOM_EINVAL, "task: %s trains a BERT, but model is gpt "
				    "(--set model=bert, or a bert-* preset)", loom_task_name(c->task));
	if (c->model != LOOM_MODEL_BERT)
		return 0;
	if (c->task == LOOM_TASK_LM)
		return loom_err_set(e, LOOM_EINVAL, "task: lm is the GPT's; model=bert trains "
				    "task=squad or task=mlm");
	if (c->sparsity > 0)
		return loom_err_set(e, LOOM_EINVAL, "sparsity: RigL sparsity is the GPT's (model is bert)");
	if (c->loss_weighting != LOOM_LOSSW_NONE)
		return loom_err_set(e, LOOM_EINVAL, "loss_weighting: only the GPT has it (model is bert)");
	if (c->ignore_id != -1)
		return loom_err_set(e, LOOM_EINVAL, "ignore_id: only the GPT has it (model is bert)");
	if (c->intermediate == 0)
		c->intermediate = 4 * c->n_embd;
	static const char *const names[] = { "pad_token_id", "cls_id", "sep_id", "mask_id" };
	const int ids[] = { c->pad_token_id, c->cls_id, c->sep_id, c->mask_id };
	for (int i = 0; i < (c->task == LOOM_TASK_MLM ? 4 : 1); i++) /* ids mlm's rows use */
		if (ids[i] >= c->vocab_size)
			return loom_err_set(e, LOOM_EINVAL, "%s: %d is not below vocab_size (%d)",
					    names[i], ids[i], c->vocab_size);
	if (c->task == LOOM_TASK_MLM && c->seq_len < 3)
		return loom_err_set(e, LOOM_EINVAL, "seq_len: task=mlm rows are [CLS] tokens [SEP]: "
				    "at least 3, not %d", c->seq_len);
	return 0;
}

/* tensor_parallel=T splits the heads, the MLP width and the vocabulary
 * (lib/train/loom_gpt.h, lib/train/loom_bert.h): T must divide each, and
 * what it does not split yet is refused. */
static int validate_tp(struct loom_config *c)
{
	struct loom_err *e = &c->err;
	int T = c->tensor_parallel;
	if (c->sequence_parallel && T == 1)
		return loom_err_set(e, LOOM_EINVAL, "sequence_parallel: needs tensor_parallel > 1 (it "
				    "splits the tokens across a replica's ranks)");
	if (T == 1)
		return 0;
	int bert_mlp = c->model == LOOM_MODEL_BERT && c->intermediate;
	if (c->sequence_parallel && c->seq_len % T)
		return loom_err_set(e, LOOM_EINVAL, "sequence_parallel: tensor_parallel=%d does not "
				    "divide seq_len (%d): each rank holds seq_len/T of a row's tokens",
				    T, c->seq_len);
	if (c->n_head % T)
		return loom_err_set(e, LOOM_EINVAL, "tensor_parallel: %d does not divide n_head (%d): "
				    "each rank computes n_head/T whole heads", T, c->n_head);
	if ((bert_mlp ? c->intermediate : 4 * c->n_embd) % T)
		return loom_err_set(e, LOOM_EINVAL, "tensor_parallel: %d does not divide the MLP "
				    "width %s (%d)", T, bert_mlp ? "intermediate" : "4 x n_embd",
				    bert_mlp ? c->intermediate : 4 * c->n_embd);
	if (c->vocab_size % T)
		return loom_err_set(e, LOOM_EINVAL, "tensor_parallel: %d does not divide vocab_size "
				    "(%d): pad the vocabulary to a multiple of it", T, c->vocab_size);
	if (c->sparsity > 0)
		return loom_err_set(e, LOOM_EINVAL, "tensor_parallel: not with sparsity (RigL's block "
				    "masks are not split across ranks)");
	return 0;
}

int loom_config_validate(struct loom_config *c)
{
	struct loom_err *e = &c->err;
	int rc;
	if (c->n_embd % c->n_head)
		return loom_err_set(e, LOOM_EINVAL, "n_embd: %d is not divisible by n_head (%d)",
				    c->n_embd, c->n_head);
	if (c->seq_len > c->n_positions)
		return loom_err_set(e, LOOM_EINVAL,
				    "seq_len: %d is larger than n_positions (%d)", c->seq_len,
				    c->n_positions);
	if ((rc = validate_model(c)))
		return rc;
	int need = c->seq_len + loom_config_record_extra(c);
	if (c->record_len && need > c->record_len)
		return loom_err_set(e, LOOM_EINVAL,
				    "seq_len: %d needs records of %d tokens, records have %d",
				    c->seq_len, need, c->record_len);
	int64_t derived = (int64_t)c->micro_batch * c->grad_accum * c->data_parallel;
	if (derived > (1 << 30))
		return loom_err_set(e, LOOM_ERANGE,
				    "global_batch: micro_batch x grad_accum x data_parallel is too large");
	if (c->global_batch == 0)
		c->global_batch = (int)derived;
	else if (c->global_batch != derived)
		return loom_err_set(e, LOOM_EINVAL,
				    "global_batch: %d != micro_batch (%d) x grad_accum (%d) x data_parallel (%d) = %lld",
				    c->global_batch, c->micro_batch, c->grad_accum,
				    c->data_parallel, (long long)derived);
	if (c->min_lr > c->lr)
		return loom_err_set(e, LOOM_EINVAL, "min_lr: %g is larger than lr (%g)",
				    c->min_lr, c->lr);
	if (c->warmup_steps && c->warmup_proportion > 0)
		return loom_err_set(e, LOOM_EINVAL,
				    "warmup_steps: set either warmup_steps or warmup_proportion, not both");
	if (!(c->decay_power > 0))
		return loom_err_set(e, LOOM_EINVAL, "decay_power: must be above 0 (at most 4)");
	if (c->decay_power != 0.5 && c->decay != LOOM_DECAY_INVSQRT && c->decay != LOOM_DECAY_POLY)
		return loom_err_set(e, LOOM_EINVAL,
				    "decay_power: only decay=inverse_sqrt or polynomial uses it (decay is %s)",
				    loom_decay_name(c->decay));
	if (c->cooldown_steps && c->decay != LOOM_DECAY_POLY)
		return loom_err_set(e, LOOM_EINVAL,
				    "cooldown_steps: only decay=polynomial uses it (decay is %s)",
				    loom_decay_name(c->decay));
	if (c->ignore_id >= c->vocab_size)
		return loom_err_set(e, LOOM_EINVAL,
				    "ignore_id: %d is not below vocab_size (%d) and -1 (none)",
				    c->ignore_id, c->vocab_size);
	if (c->n_embd / c->n_head < 1)
		return loom_err_set(e, LOOM_EINVAL, "n_head: larger than n_embd");
	if ((rc = validate_tp(c)))
		return rc;
	return validate_rigl(c);
}

int loom_config_check_data(struct loom_config *c, int batch, int rec_tokens)
{
	int need = c->seq_len + loom_config_record_extra(c);
	if (need > rec_tokens || (c->model == LOOM_MODEL_BERT && c->task == LOOM_TASK_SQUAD &&
				  need != rec_tokens))
		return loom_err_set(&c->err, LOOM_EINVAL,
				    "seq_len: %d needs records of %d tokens, the batches have %d",
				    c->seq_len, need, rec_tokens);
	if (batch != c->micro_batch)
		return loom_err_set(&c->err, LOOM_EINVAL,
				    "micro_batch: %d, but the batches have %d records",
				    c->micro_batch, batch);
	return 0;
}

json_t *loom_config_to_json(const struct loom_config *c)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	for (size_t i = 0; i < NKEYS; i++) {
		const struct key *k = &keys[i];
		const char *base = (const char *)c + k->off;
		json_t *v = NULL;
		if (k->bert && c->model != LOOM_MODEL_BERT)
			continue;
		/* absent means 1: configs and checkpoints of runs without tensor
		 * parallelism read and write as before */
		if ((k->off == offsetof(struct loom_config, tensor_parallel) && c->tensor_parallel == 1) ||
		    (k->off == offsetof(struct loom_config, sequence_parallel) && !c->sequence_parallel))
			continue;
		switch (k->type) {
		case K_INT: v = json_integer(*(const int *)base); break;
		case K_I64: v = json_integer(*(const int64_t *)base); break;
		case K_U64: v = json_integer((json_int_t)*(const uint64_t *)base); break;
		case K_FLOAT: v = json_real(*(const double *)base); break;
		case K_BOOL: v = json_boolean(*(const int *)base); break;
		case K_ENUM: v = json_string(k->enums[*(const int *)base]); break;
		case K_STR: v = json_string(base); break;
		case K_SET: {
			char buf[128];
			v = json_string(loom_sparse_layers_str(*(const int *)base, buf, sizeof buf));
			break;
		}
		}
		if (!v || json_object_set_new(o, k->name, v)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* JSON with 2-space indentation, the keys in table order and every real as
 * the shortest decimal that reads back as the same double (0.003, not
 * jansson's 0.0030000000000000001) */
char *loom_config_dump(const struct loom_config *c)
{
	json_t *o = loom_config_to_json(c);
	if (!o)
		return NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int bad = !f;
	const char *key;
	json_t *v;
	size_t i = 0;
	if (f)
		fputs("{\n", f);
	json_object_foreach(o, key, v) {
		if (bad)
			break;
		char num[32];
		json_t *ks = json_string(key);
		char *kt = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
		char *vt = json_is_real(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY);
		json_decref(ks);
		if (!kt || (!vt && !json_is_real(v)))
			bad = 1;
		else
			fprintf(f, "%s  %s: %s", i++ ? ",\n" : "", kt,
				vt ? vt : loom_double_repr(json_real_value(v), num, sizeof num));
		free(kt);
		free(vt);
	}
	json_decref(o);
	if (f) {
		fputs("\n}\n", f);
		bad |= fclose(f) != 0;
	}
	if (bad) {
		free(buf);
		return NULL;
	}
	return buf;
}

uint64_t loom_config_n_params(const struct loom_config *c)
{
	uint64_t C = c->n_embd, L = c->n_layer;
	if (c->model == LOOM_MODEL_BERT) {
		/* lib/train/loom_bert.h's table: embeddings (word, position,
		 * type, LayerNorm), per layer q/k/v/o + 2 LayerNorms + the
		 * feed-forward pair, then the head */
		uint64_t I = c->intermediate ? (uint64_t)c->intermediate : 4 * C;
		uint64_t head = c->task == LOOM_TASK_MLM ? C * C + 3 * C + (uint64_t)c->vocab_size
							 : 2 * C + 2;
		return ((uint64_t)c->vocab_size + (uint64_t)c->n_positions +
			(uint64_t)c->type_vocab_size) * C + 2 * C +
		       L * (4 * C * C + 4 * C + 4 * C + 2 * C * I + I + C) + head;
	}
	return (uint64_t)c->vocab_size * C + (uint64_t)c->n_positions * C +
	       L * (12 * C * C + 13 * C) + 2 * C;
}

uint64_t loom_config_sparse_weights(const struct loom_config *c)
{
	/* qkv C x 3C, proj C x C, fc C x 4C, fcproj 4C x C */
	static const int per[4] = { 3, 1, 4, 4 };
	static const unsigned bit[4] = { LOOM_SL_QKV, LOOM_SL_PROJ, LOOM_SL_FC, LOOM_SL_FCPROJ };
	uint64_t n = 0;
	if (c->sparsity <= 0)
		return 0;
	for (int j = 0; j < 4; j++)
		if (c->sparse_layers & bit[j])
			n += per[j];
	return (uint64_t)c->n_layer * n * (uint64_t)c->n_embd * (uint64_t)c->n_embd;
}

/* dead weights of the sparse projections */
static double dead_weights(const struct loom_config *c)
{
	return c->sparsity * (double)loom_config_sparse_weights(c);
}

double loom_config_flops_per_token(const struct loom_config *c)
{
	double dead = dead_weights(c), updates = 0;
	if (dead > 0 && c->steps > 0) {
		int64_t last = loom_config_prune_end(c) - 1; /* updates at every prune_every up to */
		last = last < c->steps ? last : c->steps;
		updates = (double)((last > 0 ? last : 0) / c->prune_every) / (double)c->steps;
	}
	return 6.0 * ((double)loom_config_n_params(c) - dead) + 2.0 * dead * updates +
	       12.0 * c->n_layer * (double)c->seq_len * c->n_embd;
}

double loom_config_fwd_flops_per_token(const struct loom_config *c)
{
	return 2.0 * ((double)loom_config_n_params(c) - dead_weights(c)) +
	       4.0 * c->n_layer * (double)c->seq_len * c->n_embd;
}

double loom_config_lr(const struct loom_config *c, int64_t step)
{
	int64_t warm = c->warmup_steps;
	if (c->warmup_proportion > 0)
		warm = (int64_t)ceil(c->warmup_proportion * (double)c->steps);
	if (step <= warm && warm > 0)
		return c->lr * (double)step / (double)warm;
	if (c->decay == LOOM_DECAY_CONSTANT)
		return c->lr;
	if (c->decay == LOOM_DECAY_INVSQRT) {
		/* lr * (w / step)^decay_power after warm-up, floored at min_lr;
		 * sqrt() for the default 0.5 keeps its numbers exactly */
		double w = warm > 0 ? (double)warm : 1.0;
		double x = w / (double)(step > 0 ? step : 1);
		double r = c->lr * (c->decay_power == 0.5 ? sqrt(x) : pow(x, c->decay_power));
		return r < c->min_lr ? c->min_lr : r;
	}
	if (c->decay == LOOM_DECAY_POLY) {
		double d = c->cooldown_steps ? (double)c->cooldown_steps : (double)(c->steps - warm);
		double s = (double)(step - warm);
		if (d <= 0 || s >= d)
			return c->min_lr;
		if (s < 0)
			s = 0;
		return c->min_lr + (c->lr - c->min_lr) * pow(1.0 - s / d, c->decay_power);
	}
	double span = (double)(c->steps - warm);
	double p = span > 0 ? (double)(step - warm) / span : 1.0;
	if (p < 0)
		p = 0;
	if (p > 1)
		p = 1;
	if (c->decay == LOOM_DECAY_LINEAR)
		return c->lr + (c->min_lr - c->lr) * p;
	return c->min_lr + 0.5 * (c->lr - c->min_lr) * (1.0 + cos(M_PI * p));
}

int64_t loom_config_prune_end(const struct loom_config *c)
{
	return c->prune_end ? c->prune_end : (int64_t)llround(0.75 * (double)c->steps);
}

double loom_config_prune_ratio(const struct loom_config *c, int64_t t)
{
	int64_t end = loom_config_prune_end(c);
	if (c->prune_schedule == LOOM_PRUNE_CONSTANT)
		return c->prune_ratio;
	if (end <= 0 || t >= end)
		return 0;
	return c->prune_ratio / 2 * (1 + cos(M_PI * (double)t / (double)end));
}

int loom_config_prune_due(const struct loom_config *c, int64_t t)
{
	return c->sparsity > 0 && t > 0 && t % c->prune_every == 0 &&
	       t < loom_config_prune_end(c);
}
