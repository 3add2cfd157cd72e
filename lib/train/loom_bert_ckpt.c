/* loom_bert_ckpt.c - BERT's tensor table, config.json and tokenizer for
 * lib/train/loom_ckpt.h; see loom_bert.h. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loom_bert.h"
#include "loom_ckpt.h"
#include "loom_config.h"
#include "loom_file.h"
#include "loom_wordpiece.h"

#define PREFIX "bert."

static const char *const arch_name[2] = { "BertForQuestionAnswering", "BertForMaskedLM" };

void loom_bert_ckpt_tensors(const struct loom_bert *b, float *base, struct loom_ckpt_tensor *out)
{
	loom_model_ckpt_tensors(b->tensors, b->n_tensors, base, out);
}

/* --- the BERT family for loom_ckpt ------------------------------------------- */

static int bert_hf_check(const void *p, struct loom_err *err)
{
	return loom_bert_config_check(p, err);
}

/* The keys HuggingFace's BertConfig writes, in its (sorted) order. */
static int bert_hf_write(const void *p, json_t *c)
{
	const struct loom_bert_config *h = p;
	json_t *k = json_pack("{s:[s], s:f, s:n, s:s, s:f, s:I, s:f, s:I, s:f, s:I, s:s, s:I, "
			      "s:I, s:I, s:s, s:s, s:I, s:b, s:I}",
			      "architectures", arch_name[h->task == LOOM_BERT_MLM],
			      "attention_probs_dropout_prob", h->attn_dropout,
			      "classifier_dropout",
			      "hidden_act", "gelu",
			      "hidden_dropout_prob", h->dropout,
			      "hidden_size", (json_int_t)h->hidden,
			      "initializer_range", h->init_std,
			      "intermediate_size", (json_int_t)h->intermediate,
			      "layer_norm_eps", h->layer_norm_eps,
			      "max_position_embeddings", (json_int_t)h->max_positions,
			      "model_type", "bert",
			      "num_attention_heads", (json_int_t)h->n_head,
			      "num_hidden_layers", (json_int_t)h->n_layer,
			      "pad_token_id", (json_int_t)h->pad_token_id,
			      "position_embedding_type", "absolute",
			      "torch_dtype", "float32",
			      "type_vocab_size", (json_int_t)h->type_vocab_size,
			      "use_cache", 1,
			      "vocab_size", (json_int_t)h->vocab_size);
	int rc = k ? json_object_update(c, k) : -1;
	json_decref(k);
	if (rc == 0 && h->pad_token_id < 0)	/* none: null, as HF's None */
		rc = json_object_set_new(c, "pad_token_id", json_null());
	return rc < 0 ? LOOM_ENOMEM : 0;
}

/* config.json's integer `key` (def when absent and def >= 0) in [lo, 2^30]. */
static int get_int(json_t *cfg, const char *key, int def, int lo, const char *path, int *out,
		   struct loom_err *err)
{
	json_t *v = json_object_get(cfg, key);
	if (!v && def >= 0) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > 1 << 30)
		return loom_err_set(err, LOOM_EFORMAT, "%s: '%s' missing or not an integer >= %d",
				    path, key, lo);
	*out = (int)json_integer_value(v);
	return 0;
}

/* config.json's number `key` (def when absent) in [lo, hi) (lo_open: (lo, hi)). */
static int get_num(json_t *cfg, const char *key, double def, double lo, int lo_open, double hi,
		   const char *path, double *out, struct loom_err *err)
{
	json_t *v = json_object_get(cfg, key);
	*out = def;
	if (!v)
		return 0;
	double x = json_is_number(v) ? json_number_value(v) : -1;
	if (!json_is_number(v) || x < lo || (lo_open && x == lo) || !(x < hi))
		return loom_err_set(err, LOOM_EFORMAT, "%s: %s must be a number in %c%g, %g)",
				    path, key, lo_open ? '(' : '[', lo, hi);
	*out = x;
	return 0;
}

static int want_string(json_t *cfg, const char *key, const char *want, const char *why,
		       const char *path, struct loom_err *err)
{
	json_t *v = json_object_get(cfg, key);
	if (v && (!json_is_string(v) || strcmp(json_string_value(v), want)))
		return loom_err_set(err, LOOM_EFORMAT, "%s: %s must be \"%s\"%s", path, key, want, why);
	return 0;
}

static int bert_hf_parse(json_t *cfg, const char *path, void *p, struct loom_err *err)
{
	struct loom_bert_config *h = p;
	json_t *v;
	if (get_int(cfg, "num_hidden_layers", -1, 1, path, &h->n_layer, err) ||
	    get_int(cfg, "hidden_size", -1, 1, path, &h->hidden, err) ||
	    get_int(cfg, "num_attention_heads", -1, 1, path, &h->n_head, err) ||
	    get_int(cfg, "intermediate_size", -1, 1, path, &h->intermediate, err) ||
	    get_int(cfg, "vocab_size", -1, 1, path, &h->vocab_size, err) ||
	    get_int(cfg, "max_position_embeddings", 512, 1, path, &h->max_positions, err) ||
	    get_int(cfg, "type_vocab_size", 2, 1, path, &h->type_vocab_size, err))
		return err->code;
	if (h->hidden % h->n_head)
		return loom_err_set(err, LOOM_EFORMAT,
				    "%s: hidden_size %d is not divisible by num_attention_heads %d",
				    path, h->hidden, h->n_head);
	if (want_string(cfg, "hidden_act", "gelu", " (erf GELU)", path, err) ||
	    want_string(cfg, "position_embedding_type", "absolute", "", path, err))
		return err->code;
	if (get_num(cfg, "layer_norm_eps", 1e-12, 0, 1, 1, path, &h->layer_norm_eps, err) ||
	    get_num(cfg, "hidden_dropout_prob", 0.1, 0, 0, 1, path, &h->dropout, err) ||
	    get_num(cfg, "attention_probs_dropout_prob", 0.1, 0, 0, 1, path, &h->attn_dropout,
		    err) ||
	    get_num(cfg, "initializer_range", 0.02, 0, 0, 1e9, path, &h->init_std, err))
		return err->code;
	h->pad_token_id = 0;
	v = json_object_get(cfg, "pad_token_id");
	if (json_is_null(v))
		h->pad_token_id = -1;
	else if (v && (!json_is_integer(v) || json_integer_value(v) < 0 ||
		       json_integer_value(v) >= h->vocab_size))
		return loom_err_set(err, LOOM_EFORMAT,
				    "%s: pad_token_id must be null or an id below vocab_size %d",
				    path, h->vocab_size);
	else if (v)
		h->pad_token_id = (int)json_integer_value(v);
	/* the head: the first of the architectures loom has */
	h->task = -1;
	v = json_object_get(cfg, "architectures");
	if (v && !json_is_array(v) && !json_is_null(v))
		return loom_err_set(err, LOOM_EFORMAT, "%s: architectures is not an array", path);
	for (size_t i = 0; h->task < 0 && i < json_array_size(v); i++) {
		const char *a = json_string_value(json_array_get(v, i));
		if (a && !strcmp(a, arch_name[0]))
			h->task = LOOM_BERT_QA;
		else if (a && (!strcmp(a, arch_name[1]) || !strcmp(a, "BertForPreTraining")))
			h->task = LOOM_BERT_MLM;
	}
	h->precision = LOOM_PREC_FP32;
	return 0;
}

static int64_t bert_n_layers(const void *p)
{
	return ((const struct loom_bert_config *)p)->n_layer;
}

/* The config keys of a tensor's shape, for messages. */
static const char *shape_keys(const struct loom_bert_config *h, const char *name, char *buf,
			      size_t n)
{
	if (strstr(name, "word_embeddings") || !strcmp(name, "cls.predictions.bias"))
		snprintf(buf, n, "vocab_size %d, hidden_size %d", h->vocab_size, h->hidden);
	else if (strstr(name, "position_embeddings"))
		snprintf(buf, n, "max_position_embeddings %d, hidden_size %d", h->max_positions,
			 h->hidden);
	else if (strstr(name, "token_type_embeddings"))
		snprintf(buf, n, "type_vocab_size %d, hidden_size %d", h->type_vocab_size,
			 h->hidden);
	else if (strstr(name, "intermediate.") || strstr(name, ".output.dense.weight"))
		snprintf(buf, n, "hidden_size %d, intermediate_size %d", h->hidden,
			 h->intermediate);
	else
		snprintf(buf, n, "hidden_size %d", h->hidden);
	return buf;
}

/* Layer l's tensors (l < 0: the embeddings and both heads, the heads
 * optional) as loom_bert_table names them. */
static size_t bert_expect(const void *p, int64_t l, struct loom_ckpt_expect *out, size_t max,
			  char *keys, size_t nk)
{
	struct loom_bert_config h = *(const struct loom_bert_config *)p;
	char pre[48];
	size_t k = 0, used = 0;
	snprintf(pre, sizeof pre, "bert.encoder.layer.%d.", (int)l);
	h.n_layer = l < 0 ? 0 : (int)l + 1;
	for (int task = 0; task < 2 && (task == 0 || l < 0); task++) {
		h.task = task;
		int nt = loom_bert_n_tensors(&h);
		struct loom_tensor *t = calloc((size_t)nt, sizeof *t);
		if (!t)
			return k;	/* out of memory: nothing more checked here */
		loom_bert_table(&h, t);
		for (int i = 0; i < nt && k < max; i++) {
			int layer = strncmp(t[i].name, "bert.encoder.layer.", 19) == 0;
			int head = strncmp(t[i].name, "bert.", 5) != 0;
			if (l < 0 ? layer || (task && !head) : strncmp(t[i].name, pre, strlen(pre)))
				continue;
			memset(&out[k], 0, sizeof out[k]);
			snprintf(out[k].name, sizeof out[k].name, "%s", t[i].name);
			out[k].ndim = t[i].ndim;
			out[k].shape[0] = t[i].shape[0];
			out[k].shape[1] = t[i].shape[1];
			out[k].optional = head;
			/* a key string of its own when it fits, else the last one */
			char kb[128];
			shape_keys(&h, t[i].name, kb, sizeof kb);
			if (used + strlen(kb) + 1 <= nk) {
				memcpy(keys + used, kb, strlen(kb) + 1);
				out[k].keys = keys + used;
				used += strlen(kb) + 1;
			} else {
				out[k].keys = k ? out[k - 1].keys : "";
			}
			k++;
		}
		free(t);
	}
	return k;
}

static const char *strip_prefix(const char *name)
{
	return strncmp(name, PREFIX, strlen(PREFIX)) ? name : name + strlen(PREFIX);
}

static int bert_ignored(const char *name)
{
	static const char *const pre[] = { "pooler.", "cls.seq_relationship.",
					   "cls.predictions.decoder." };
	name = strip_prefix(name);
	for (size_t i = 0; i < sizeof pre / sizeof *pre; i++)
		if (!strncmp(name, pre[i], strlen(pre[i])))
			return 1;
	return !strcmp(name, "embeddings.position_ids");
}

/* LayerNorm.weight / .bias were LayerNorm.gamma / .beta in older files. */
static const char *bert_alias(const char *name, char *buf, size_t n)
{
	size_t len = strlen(name);
	static const char *const from[2] = { "LayerNorm.weight", "LayerNorm.bias" };
	static const char *const to[2] = { "LayerNorm.gamma", "LayerNorm.beta" };
	for (int i = 0; i < 2; i++) {
		size_t fl = strlen(from[i]);
		if (len >= fl && !strcmp(name + len - fl, from[i]) &&
		    len - fl + strlen(to[i]) < n) {
			snprintf(buf, n, "%.*s%s", (int)(len - fl), name, to[i]);
			return buf;
		}
	}
	return NULL;
}

const struct loom_ckpt_arch loom_bert_ckpt_arch = {
	.model_type = "bert",
	.prefix = PREFIX,
	.layers_key = "num_hidden_layers",
	.hf_size = sizeof(struct loom_bert_config),
	.hf_check = bert_hf_check,
	.hf_write = bert_hf_write,
	.hf_parse = bert_hf_parse,
	.n_layers = bert_n_layers,
	.expect = bert_expect,
	.ignored = bert_ignored,
	.alias = bert_alias,
};

/* --- loading ----------------------------------------------------------------- */

int loom_bert_ckpt_config(const struct loom_ckpt *ck, int task, struct loom_bert_config *cfg,
			  struct loom_err *err)
{
	*cfg = *(const struct loom_bert_config *)loom_ckpt_hf(ck);
	if (task >= 0)
		cfg->task = task;
	else if (cfg->task < 0)
		return loom_err_set(err, LOOM_EFORMAT,
				    "%s/config.json: architectures names no head loom has (%s or "
				    "%s)", loom_ckpt_dir(ck), arch_name[0], arch_name[1]);
	cfg->precision = LOOM_PREC_FP32;
	cfg->recompute = 0;
	cfg->adamw = (struct loom_adamw){ 0.9, 0.999, 1e-6, 0.01, 1.0 };
	struct loom_err e = { 0 };
	int rc = loom_bert_config_check(cfg, &e);
	if (rc < 0)
		return loom_err_set(err, rc, "%s/config.json: %s", loom_ckpt_dir(ck), e.msg);
	return 0;
}

int loom_bert_ckpt_shape(const struct loom_ckpt *ck, struct loom_config *c, struct loom_err *err)
{
	const struct loom_bert_config *h = loom_ckpt_hf(ck);
	const struct {
		const char *key, *hf;
		int *dst;
		int v;
	} ik[] = {
		{ "n_layer", "num_hidden_layers", &c->n_layer, h->n_layer },
		{ "n_embd", "hidden_size", &c->n_embd, h->hidden },
		{ "n_head", "num_attention_heads", &c->n_head, h->n_head },
		{ "intermediate", "intermediate_size", &c->intermediate, h->intermediate },
		{ "vocab_size", "vocab_size", &c->vocab_size, h->vocab_size },
		{ "n_positions", "max_position_embeddings", &c->n_positions, h->max_positions },
		{ "type_vocab_size", "type_vocab_size", &c->type_vocab_size, h->type_vocab_size },
	};
	for (size_t i = 0; i < sizeof ik / sizeof ik[0]; i++) {
		/* intermediate 0 means 4 n_embd */
		int have = *ik[i].dst ? *ik[i].dst : 4 * c->n_embd;
		if (loom_config_cli_set(c, ik[i].key) && have != ik[i].v)
			return loom_err_set(err, LOOM_EINVAL, "%s: --set %d, but %s/config.json has "
					    "%s %d (--init-from takes the shape from there)",
					    ik[i].key, have, loom_ckpt_dir(ck), ik[i].hf, ik[i].v);
	}
	if (loom_config_cli_set(c, "layer_norm_epsilon") &&
	    c->layer_norm_epsilon != h->layer_norm_eps)
		return loom_err_set(err, LOOM_EINVAL, "layer_norm_epsilon: --set %g, but %s/config.json "
				    "has layer_norm_eps %g (--init-from takes the shape from there)",
				    c->layer_norm_epsilon, loom_ckpt_dir(ck), h->layer_norm_eps);
	for (size_t i = 0; i < sizeof ik / sizeof ik[0]; i++)
		*ik[i].dst = ik[i].v;
	c->layer_norm_epsilon = h->layer_norm_eps;
	return 0;
}

int loom_bert_ckpt_head(struct loom_bert *b, struct loom_ckpt *ck, unsigned flags, uint64_t seed)
{
	static const char *const skip_qa[] = { "cls.", NULL }, *const skip_mlm[] = { "qa_outputs.",
										    NULL };
	const int qa = b->cfg.task == LOOM_BERT_QA;
	const int nh = qa ? 2 : 5, nt = b->n_tensors;	/* the head: the table's last */
	int have = 0;
	for (int i = nt - nh; i < nt; i++)
		have += loom_ckpt_has_tensor(ck, b->tensors[i].name);
	if (have)
		return nt;
	if (!(flags & LOOM_BERT_CKPT_NEW_HEAD)) {
		const struct loom_bert_config *h = loom_ckpt_hf(ck);
		return loom_err_set(&b->err, LOOM_EFORMAT, "%s/model.safetensors: no %s head (%s): "
				    "a %s checkpoint", loom_ckpt_dir(ck),
				    qa ? "question-answering" : "masked-LM", b->tensors[nt - nh].name,
				    h->task < 0 ? "BertModel" : arch_name[h->task == LOOM_BERT_MLM]);
	}
	loom_bert_init_head(b, seed);
	loom_ckpt_skip(ck, qa ? skip_qa : skip_mlm);
	return nt - nh;
}

int loom_bert_ckpt_load(struct loom_bert *b, struct loom_ckpt *ck, unsigned flags, uint64_t seed)
{
	int n = loom_bert_ckpt_head(b, ck, flags, seed), rc = n < 0 ? n : 0;
	struct loom_ckpt_tensor *tp = rc ? NULL : calloc((size_t)b->n_tensors, sizeof *tp);
	if (!rc && !tp)
		rc = loom_err_set(&b->err, LOOM_ENOMEM, "out of memory");
	if (!rc) {
		loom_bert_ckpt_tensors(b, b->params, tp);
		if ((rc = loom_ckpt_load_model(ck, tp, (size_t)n)) < 0)
			loom_err_set(&b->err, rc, "%s", loom_ckpt_error(ck));
	}
	loom_ckpt_skip(ck, NULL);
	free(tp);
	if (rc)
		return rc;
	loom_bert_weights_changed(b);
	return n < b->n_tensors;
}

int loom_bert_ckpt_tokenizer(const struct loom_ckpt *ck, char *path, size_t n,
			     struct loom_wordpiece_opts *o, struct loom_err *err)
{
	char p[PATH_MAX + 32];
	struct stat sb;
	loom_wordpiece_opts_default(o);
	if (snprintf(path, n, "%s/vocab.txt", loom_ckpt_dir(ck)) >= (int)n)
		return loom_err_set(err, LOOM_EINVAL, "%s: path too long", loom_ckpt_dir(ck));
	if (stat(path, &sb) < 0)
		return 0;
	snprintf(p, sizeof p, "%s/tokenizer_config.json", loom_ckpt_dir(ck));
	int rc = loom_wordpiece_read_config(p, o, err);
	return rc < 0 ? rc : 1 + rc;
}

int loom_bert_ckpt_loom_config(const struct loom_ckpt *ck, struct loom_config *c)
{
	const char *txt = loom_ckpt_loom_config(ck);
	loom_config_defaults(c);
	if (!txt)
		return 0;
	json_error_t je;
	json_t *o = json_loads(txt, 0, &je);
	int rc = o ? loom_config_apply_json(c, o)
		   : loom_err_set(&c->err, LOOM_EFORMAT, "%s/config.json: loom: %s",
				  loom_ckpt_dir(ck), loom_json_reason(je.text));
	json_decref(o);
	return rc < 0 ? rc : 1;
}

int loom_bert_ckpt_vocab(struct loom_ckpt_vocab *v, const char *name, const char *vocab_path,
			 int lowercase, struct loom_err *err)
{
	char *txt = NULL, *cfg = NULL;
	size_t len;
	memset(v, 0, sizeof *v);
	if (loom_file_read_bounded(vocab_path, LOOM_FILE_MAX_LIST, &txt, &len, err) < 0)
		return err->code;
	json_t *j = json_pack("{s:b, s:b, s:n, s:s, s:s, s:s, s:s, s:s, s:I, s:s}",
			      "do_lower_case", lowercase, "tokenize_chinese_chars", 1,
			      "strip_accents", "unk_token", "[UNK]", "sep_token", "[SEP]",
			      "pad_token", "[PAD]", "cls_token", "[CLS]", "mask_token", "[MASK]",
			      "model_max_length", (json_int_t)512, "tokenizer_class", "BertTokenizer");
	cfg = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(j);
	char *nm = strdup(name ? name : vocab_path);
	if (!cfg || !nm) {
		free(txt);
		free(cfg);
		free(nm);
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	}
	v->name = nm;
	v->files[0].name = "vocab.txt";
	v->files[0].data = txt;
	v->files[0].len = len;
	v->files[1].name = "tokenizer_config.json";
	v->files[1].data = cfg;
	v->files[1].len = strlen(cfg);
	v->eos_token_id = -1;
	return 0;
}

void loom_bert_ckpt_vocab_release(struct loom_ckpt_vocab *v)
{
	free((char *)v->name);
	for (int i = 0; i < LOOM_CKPT_VOCAB_FILES; i++)
		free((char *)v->files[i].data);
	memset(v, 0, sizeof *v);
}
