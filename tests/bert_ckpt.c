/* BERT checkpoints (lib/train/loom_bert_ckpt.c on lib/train/loom_ckpt.h):
 * a saved checkpoint loads back bit-exact with its config and tokenizer;
 * a plain HuggingFace directory (bert. prefix, LayerNorm gamma/beta,
 * pooler, NSP head, tied decoder, position_ids) and a BertModel file (no
 * prefix, no head) load; a head the file lacks only on request (fresh
 * from the seed); wrong shapes, missing tensors, a wrong model_type and
 * bad keys are refused with one line naming the tensor or key. */
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loom_bert.h"
#include "loom_ckpt.h"
#include "loom_file.h"
#include "loom_safetensors.h"
#include "loom_wordpiece.h"
#include "tap.h"
#include "testlib.h"

/* tests/testlib.h's tiny BERT, with its own vocabulary, dropout, init and
 * pad token (each written to config.json and read back). */
static struct loom_bert_config tiny(int task)
{
	struct loom_bert_config c = tiny_bert_cfg(task);
	c.vocab_size = 12;
	c.max_positions = 10;
	c.dropout = 0.125;
	c.attn_dropout = 0.25;
	c.init_std = 0.5;
	c.pad_token_id = 0;
	return c;
}

/* msg contains want and is one line */
static void like_msg(const char *msg, const char *want, const char *what, ...)
	__attribute__((format(printf, 3, 4)));
static void like_msg(const char *msg, const char *want, const char *what, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, what);
	vsnprintf(buf, sizeof buf, what, ap);
	va_end(ap);
	ok(strstr(msg, want) && !strchr(msg, '\n'), "%s: '%s'", buf, msg);
}

static const char vocab_txt[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\n##s\non\nmat\n.\n";

static struct loom_bert *model(int task, uint64_t seed)
{
	struct loom_bert_config c = tiny(task);
	struct loom_bert *b = loom_bert_new(&c);
	if (b)
		loom_bert_init_weights(b, seed);
	return b;
}

static struct loom_ckpt *open_bert(const char *dir, struct loom_err *err)
{
	return loom_ckpt_open(dir, &loom_bert_ckpt_arch, 0, err);
}

/* Write `dir` as a checkpoint of b (with moments and tokenizer). */
static int save(struct loom_bert *b, const char *dir, int lowercase, struct loom_err *err)
{
	struct loom_ckpt_tensor *tp = calloc((size_t)b->n_tensors, sizeof *tp);
	float **m = calloc((size_t)b->n_tensors, sizeof *m), **v = calloc((size_t)b->n_tensors, sizeof *v);
	struct loom_ckpt_vocab voc;
	int rc = loom_bert_ckpt_vocab(&voc, "toy", tap_path("vocab.txt"), lowercase, err);
	loom_bert_ckpt_tensors(b, b->params, tp);
	for (int i = 0; i < b->n_tensors; i++) {
		m[i] = b->m + b->tensors[i].offset;
		v[i] = b->v + b->tensors[i].offset;
	}
	struct loom_ckpt_save s = {
		.dir = dir, .tensors = tp, .n_tensors = (size_t)b->n_tensors,
		.adam_m = m, .adam_v = v, .arch = &loom_bert_ckpt_arch, .hf = &b->cfg,
		.loom_config_json = "{\"model\":\"bert\",\"doc_stride\":16,\"max_query\":8}", .state = { .step = 10 },
		.vocab = &voc,
	};
	if (rc == 0)
		rc = loom_ckpt_write(&s, NULL, 0, err);
	loom_bert_ckpt_vocab_release(&voc);
	free(tp);
	free(m);
	free(v);
	return rc;
}

static void case_round_trip(const char *root)
{
	struct loom_err err = { 0 };
	char dir[PATH_MAX + 64];
	snprintf(dir, sizeof dir, "%s/ck", root);
	struct loom_bert *b = model(LOOM_BERT_QA, 7);
	for (size_t i = 0; i < b->n_params; i++) {
		b->m[i] = (float)i * 1e-3f;
		b->v[i] = (float)i * 1e-6f;
	}
	is_int(save(b, dir, 0, &err), 0, "save a BERT checkpoint: %s", err.msg);

	/* config.json as BertConfig writes it, tokenizer_config.json */
	json_error_t je;
	char p[PATH_MAX + 128];
	snprintf(p, sizeof p, "%s/latest/config.json", dir);
	json_t *c = json_load_file(p, 0, &je);
	ok(c && !strcmp(json_string_value(json_object_get(c, "model_type")), "bert") &&
	   !strcmp(json_string_value(json_array_get(json_object_get(c, "architectures"), 0)),
		   "BertForQuestionAnswering") &&
	   json_integer_value(json_object_get(c, "hidden_size")) == 16 &&
	   json_integer_value(json_object_get(c, "num_hidden_layers")) == 2 &&
	   json_integer_value(json_object_get(c, "num_attention_heads")) == 2 &&
	   json_integer_value(json_object_get(c, "intermediate_size")) == 40 &&
	   json_integer_value(json_object_get(c, "max_position_embeddings")) == 10 &&
	   json_integer_value(json_object_get(c, "type_vocab_size")) == 2 &&
	   json_integer_value(json_object_get(c, "vocab_size")) == 12 &&
	   json_integer_value(json_object_get(c, "pad_token_id")) == 0 &&
	   json_real_value(json_object_get(c, "layer_norm_eps")) == 1e-12 &&
	   json_real_value(json_object_get(c, "hidden_dropout_prob")) == 0.125 &&
	   json_real_value(json_object_get(c, "attention_probs_dropout_prob")) == 0.25 &&
	   json_real_value(json_object_get(c, "initializer_range")) == 0.5 &&
	   !strcmp(json_string_value(json_object_get(c, "hidden_act")), "gelu") &&
	   !strcmp(json_string_value(json_object_get(c, "loom_vocab")), "toy") &&
	   json_is_object(json_object_get(c, "loom")),
	   "config.json: BertConfig's keys, loom_vocab and loom");
	json_decref(c);
	snprintf(p, sizeof p, "%s/latest/tokenizer_config.json", dir);
	c = json_load_file(p, 0, &je);
	ok(c && json_is_false(json_object_get(c, "do_lower_case")) &&
	   !strcmp(json_string_value(json_object_get(c, "tokenizer_class")), "BertTokenizer"),
	   "tokenizer_config.json: do_lower_case false, BertTokenizer");
	json_decref(c);
	size_t len;
	char *txt = tap_slurp(&len, "%s/latest/vocab.txt", dir);
	ok(txt && len == strlen(vocab_txt) && !memcmp(txt, vocab_txt, len), "vocab.txt copied");
	free(txt);

	struct loom_ckpt *ck = open_bert(dir, &err);
	ok(ck != NULL, "open it: %s", ck ? "" : err.msg);
	if (!ck)
		return;
	struct loom_bert_config cfg;
	is_int(loom_bert_ckpt_config(ck, -1, &cfg, &err), 0, "its config");
	struct loom_bert_config want = tiny(LOOM_BERT_QA);
	ok(cfg.task == LOOM_BERT_QA && cfg.n_layer == 2 && cfg.hidden == 16 && cfg.n_head == 2 &&
	   cfg.intermediate == 40 && cfg.vocab_size == 12 && cfg.max_positions == 10 &&
	   cfg.dropout == 0.125 && cfg.attn_dropout == 0.25 && cfg.init_std == 0.5 &&
	   cfg.layer_norm_eps == want.layer_norm_eps && cfg.pad_token_id == 0,
	   "config round-trips (task from architectures)");
	struct loom_bert *r = loom_bert_new(&cfg);
	is_int(loom_bert_ckpt_load(r, ck, 0, 0), 0, "load: %s", loom_bert_error(r));
	ok(!memcmp(r->params, b->params, b->n_params * sizeof(float)), "weights bit-exact");
	struct loom_ckpt_tensor *tp = calloc((size_t)r->n_tensors, sizeof *tp);
	float **m = calloc((size_t)r->n_tensors, sizeof *m), **v = calloc((size_t)r->n_tensors, sizeof *v);
	loom_bert_ckpt_tensors(r, r->params, tp);
	for (int i = 0; i < r->n_tensors; i++) {
		m[i] = r->m + r->tensors[i].offset;
		v[i] = r->v + r->tensors[i].offset;
	}
	is_int(loom_ckpt_load_optimizer(ck, tp, (size_t)r->n_tensors, m, v), 0, "moments load");
	ok(!memcmp(r->m, b->m, b->n_params * 4) && !memcmp(r->v, b->v, b->n_params * 4),
	   "moments bit-exact");
	free(tp);
	free(m);
	free(v);

	char vp[PATH_MAX + 128];
	struct loom_wordpiece_opts o;
	is_int(loom_bert_ckpt_tokenizer(ck, vp, sizeof vp, &o, &err), 2,
	       "has a tokenizer whose tokenizer_config.json says do_lower_case");
	ok(strstr(vp, "/step-00000010/vocab.txt") && o.lowercase == 0,
	   "tokenizer: its vocab.txt, do_lower_case false (%s)", vp);
	{	/* vocab.txt alone: the casing is not said */
		char tc[PATH_MAX + 160], aside[PATH_MAX + 170];
		snprintf(tc, sizeof tc, "%s/tokenizer_config.json", loom_ckpt_dir(ck));
		snprintf(aside, sizeof aside, "%s.aside", tc);
		ok(rename(tc, aside) == 0, "tokenizer_config.json moved aside");
		is_int(loom_bert_ckpt_tokenizer(ck, vp, sizeof vp, &o, &err), 1,
		       "  vocab.txt alone: a tokenizer, its casing not said");
		ok(rename(aside, tc) == 0, "  and back");
	}
	struct loom_config lc;
	is_int(loom_bert_ckpt_loom_config(ck, &lc), 1, "loom's configuration of the checkpoint");
	ok(lc.model == LOOM_MODEL_BERT && lc.doc_stride == 16 && lc.max_query == 8,
	   "  model=bert, its windows (doc_stride %d, max_query %d)", lc.doc_stride, lc.max_query);

	/* loaded for the other task: refused, unless asked for a new head */
	struct loom_bert_config mc = cfg;
	mc.task = LOOM_BERT_MLM;
	struct loom_bert *mlm = loom_bert_new(&mc);
	is_int(loom_bert_ckpt_load(mlm, ck, 0, 0), LOOM_EFORMAT, "QA checkpoint for MLM refused");
	like_msg(loom_bert_error(mlm), "model.safetensors: no masked-LM head (cls.predictions",
		 "... naming the head");
	loom_bert_free(mlm);
	loom_ckpt_free(ck);
	loom_bert_free(r);
	loom_bert_free(b);

	/* a GPT checkpoint (model_type gpt2) is not BERT */
	snprintf(p, sizeof p, "%s/latest/config.json", dir);
	char *cj = tap_slurp(&len, "%s", p);
	char *at = cj ? strstr(cj, "\"bert\"") : NULL;
	if (at)
		memcpy(at, "\"gpt2\"", 6);
	ok(at && loom_write_file_atomic(p, cj, len, &err) == 0, "config.json says gpt2");
	free(cj);
	ck = loom_ckpt_open(dir, &loom_bert_ckpt_arch, LOOM_CKPT_NO_VERIFY, &err);
	ok(!ck && strstr(err.msg, "config.json: model_type is \"gpt2\", not \"bert\"") &&
	   !strchr(err.msg, '\n'), "model_type gpt2 refused: %s", err.msg);
	loom_ckpt_free(ck);
}

/* A HuggingFace directory: config.json + model.safetensors under HF's
 * names, as `bert` (bert-base-uncased: "bert." prefix, gamma/beta, pooler,
 * NSP, decoder, position_ids) or as a BertModel file (no prefix). */
enum { HF_PRETRAINED, HF_BARE, HF_BOTH_HEADS };

static char *hf_name(const char *name, int kind, char *buf, size_t n)
{
	const char *s = name;
	if (kind == HF_BARE && !strncmp(s, "bert.", 5))
		s += 5;
	snprintf(buf, n, "%s", s);
	size_t l = strlen(buf);
	if (kind == HF_PRETRAINED && l > 16 && !strcmp(buf + l - 16, "LayerNorm.weight"))
		snprintf(buf + l - 6, n - (l - 6), "gamma");
	else if (kind == HF_PRETRAINED && l > 14 && !strcmp(buf + l - 14, "LayerNorm.bias"))
		snprintf(buf + l - 4, n - (l - 4), "beta");
	return buf;
}

/* extra: ["name", dtype, d0, d1] entries to add; drop: a tensor left out;
 * cfg_edit: a Python expression applied to the config dict d. */
static int write_hf(const char *dir, struct loom_bert *b, int kind, const char *drop,
		    int64_t grow_word, const char *cfg_py)
{
	struct loom_err err = { 0 };
	char path[PATH_MAX + 64], cmd[PATH_MAX + 2048];
	static char names[256][96];
	struct loom_st_tensor t[256];
	float *pool = calloc(4096, sizeof *pool);
	int64_t *pos = calloc(10, sizeof *pos);
	size_t n = 0;
	mkdir(dir, 0777);
	for (int i = 0; i < b->n_tensors; i++) {
		const struct loom_tensor *x = &b->tensors[i];
		if (kind == HF_BARE && strncmp(x->name, "bert.", 5))
			continue;	/* BertModel: no head */
		if (drop && !strcmp(x->name, drop))
			continue;
		memset(&t[n], 0, sizeof t[n]);
		t[n].name = hf_name(x->name, kind, names[n], sizeof names[n]);
		t[n].dtype = LOOM_ST_F32;
		t[n].ndim = x->ndim;
		t[n].shape[0] = (uint64_t)x->shape[0];
		t[n].shape[1] = (uint64_t)x->shape[1];
		t[n].data = b->params + x->offset;
		if (grow_word && strstr(x->name, "word_embeddings"))
			t[n].shape[0] = (uint64_t)grow_word;	/* data: the pool, large enough */
		if (grow_word && strstr(x->name, "word_embeddings"))
			t[n].data = pool;
		n++;
	}
	if (kind == HF_BOTH_HEADS) {
		kind = HF_PRETRAINED;
		static const char *const qa[2] = { "qa_outputs.weight", "qa_outputs.bias" };
		for (int k = 0; k < 2; k++) {
			memset(&t[n], 0, sizeof t[n]);
			t[n].name = qa[k];
			t[n].dtype = LOOM_ST_F32;
			t[n].ndim = 2 - k;
			t[n].shape[0] = 2;
			t[n].shape[1] = 16;
			t[n++].data = pool;
		}
	}
	if (kind == HF_PRETRAINED) {
		static const struct { const char *name; int d0, d1; } more[] = {
			{ "bert.pooler.dense.weight", 16, 16 }, { "bert.pooler.dense.bias", 16, 0 },
			{ "cls.seq_relationship.weight", 2, 16 }, { "cls.seq_relationship.bias", 2, 0 },
			{ "cls.predictions.decoder.weight", 12, 16 },
		};
		for (size_t k = 0; k < sizeof more / sizeof *more; k++) {
			memset(&t[n], 0, sizeof t[n]);
			t[n].name = more[k].name;
			t[n].dtype = LOOM_ST_F32;
			t[n].ndim = more[k].d1 ? 2 : 1;
			t[n].shape[0] = (uint64_t)more[k].d0;
			t[n].shape[1] = (uint64_t)more[k].d1;
			t[n++].data = pool;
		}
		memset(&t[n], 0, sizeof t[n]);
		t[n].name = "bert.embeddings.position_ids";
		t[n].dtype = LOOM_ST_I64;
		t[n].ndim = 2;
		t[n].shape[0] = 1;
		t[n].shape[1] = 10;
		t[n++].data = pos;
	}
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
	const char *meta[] = { "format", "pt", NULL };
	int rc = loom_st_write(path, t, n, meta, NULL, &err);
	free(pool);
	free(pos);
	if (rc)
		return rc;
	snprintf(cmd, sizeof cmd,
		 "/usr/bin/python3 -c 'import json,sys; d={\"architectures\": [\"%s\"], "
		 "\"attention_probs_dropout_prob\": 0.1, \"hidden_act\": \"gelu\", "
		 "\"hidden_dropout_prob\": 0.1, \"hidden_size\": 16, \"initializer_range\": 0.02, "
		 "\"intermediate_size\": 40, \"layer_norm_eps\": 1e-12, "
		 "\"max_position_embeddings\": 10, \"model_type\": \"bert\", "
		 "\"num_attention_heads\": 2, \"num_hidden_layers\": 2, \"pad_token_id\": 0, "
		 "\"position_embedding_type\": \"absolute\", \"transformers_version\": \"4.6.0.dev0\", "
		 "\"type_vocab_size\": 2, \"use_cache\": True, \"vocab_size\": 12}; %s; "
		 "json.dump(d, open(sys.argv[1] + \"/config.json\", \"w\"), indent=2)' '%s'",
		 kind == HF_BARE ? "BertModel" : "BertForMaskedLM", cfg_py ? cfg_py : "0", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void case_hf_dirs(const char *root)
{
	struct loom_err err = { 0 };
	char dir[PATH_MAX + 64];
	struct loom_bert *src = model(LOOM_BERT_MLM, 3);
	snprintf(dir, sizeof dir, "%s/hf", root);
	is_int(write_hf(dir, src, HF_PRETRAINED, NULL, 0, NULL), 0, "a HF BertForMaskedLM dir");
	struct loom_ckpt *ck = open_bert(dir, &err);
	ok(ck && !loom_ckpt_has_state(ck), "opens (no state.json): %s", ck ? "" : err.msg);
	if (!ck)
		return;
	struct loom_bert_config cfg;
	is_int(loom_bert_ckpt_config(ck, -1, &cfg, &err), 0, "config from HF keys");
	ok(cfg.task == LOOM_BERT_MLM && cfg.dropout == 0.1 && cfg.init_std == 0.02,
	   "BertForMaskedLM: the masked-LM task, HF's dropout and init");
	struct loom_bert *b = loom_bert_new(&cfg);
	is_int(loom_bert_ckpt_load(b, ck, 0, 0), 0,
	       "loads: bert. prefix, gamma/beta, pooler/NSP/decoder/position_ids ignored (%s)",
	       loom_bert_error(b));
	ok(!memcmp(b->params, src->params, src->n_params * 4), "weights bit-exact");
	char vp[PATH_MAX + 128];
	struct loom_wordpiece_opts o;
	is_int(loom_bert_ckpt_tokenizer(ck, vp, sizeof vp, &o, &err), 0, "no vocab.txt: none");
	struct loom_config lc;
	is_int(loom_bert_ckpt_loom_config(ck, &lc), 0, "no loom configuration: 0");
	is_int(lc.doc_stride, 128, "  the defaults (doc_stride 128)");
	loom_bert_free(b);

	/* for QA: the head only on request, then fresh from the seed */
	is_int(loom_bert_ckpt_config(ck, LOOM_BERT_QA, &cfg, &err), 0, "config for QA");
	b = loom_bert_new(&cfg);
	is_int(loom_bert_ckpt_load(b, ck, 0, 5), LOOM_EFORMAT, "no QA head: refused");
	like_msg(loom_bert_error(b),
		 "/hf/model.safetensors: no question-answering head (qa_outputs.weight): a "
		 "BertForMaskedLM checkpoint", "... one line naming the head and the checkpoint");
	is_int(loom_bert_ckpt_load(b, ck, LOOM_BERT_CKPT_NEW_HEAD, 5), 1,
	       "NEW_HEAD: loads, reports the head new (%s)", loom_bert_error(b));
	struct loom_bert *fresh = loom_bert_new(&cfg);
	loom_bert_init_weights(fresh, 5);
	const struct loom_tensor *h = &b->tensors[b->n_tensors - 2];
	size_t head_at = h->offset;
	ok(!memcmp(b->params, src->params, head_at * 4) &&
	   !memcmp(b->params + head_at, fresh->params + head_at, (b->n_params - head_at) * 4),
	   "the encoder from the file, the head as a model initialised from the seed");
	loom_bert_free(fresh);
	loom_bert_free(b);
	loom_ckpt_free(ck);

	/* a BertModel file: no prefix, no head */
	snprintf(dir, sizeof dir, "%s/bare", root);
	is_int(write_hf(dir, src, HF_BARE, NULL, 0, NULL), 0, "a HF BertModel dir");
	ck = open_bert(dir, &err);
	ok(ck != NULL, "opens: %s", ck ? "" : err.msg);
	if (!ck)
		return;
	is_int(loom_bert_ckpt_config(ck, -1, &cfg, &err), LOOM_EFORMAT, "BertModel: no task");
	like_msg(err.msg, "/bare/config.json: architectures names no head loom has",
		 "... says so");
	is_int(loom_bert_ckpt_config(ck, LOOM_BERT_QA, &cfg, &err), 0, "config for QA");
	b = loom_bert_new(&cfg);
	is_int(loom_bert_ckpt_load(b, ck, LOOM_BERT_CKPT_NEW_HEAD, 5), 1,
	       "unprefixed names load, head new (%s)", loom_bert_error(b));
	ok(!memcmp(b->params, src->params, b->tensors[b->n_tensors - 2].offset * 4),
	   "encoder bit-exact");
	loom_bert_free(b);
	loom_ckpt_free(ck);

	/* refusals: one line naming the tensor and the config key */
	static const struct {
		const char *what, *drop, *py, *want;
		int64_t grow;
	} bad[] = {
		{ "word embeddings of another vocabulary", NULL, NULL,
		  "tensor 'bert.embeddings.word_embeddings.weight' is [14, 16] but config.json "
		  "(vocab_size 12, hidden_size 16) needs [12, 16]", 14 },
		{ "a missing tensor", "bert.encoder.layer.1.output.dense.bias", NULL,
		  "tensor 'bert.encoder.layer.1.output.dense.bias' is missing (config.json: "
		  "num_hidden_layers 2)", 0 },
		{ "one layer fewer in config.json", NULL, "d[\"num_hidden_layers\"] = 1",
		  "has tensor 'bert.encoder.layer.1.attention.self.query.weight' but config.json "
		  "says num_hidden_layers 1", 0 },
		{ "intermediate_size not the tensors'", NULL, "d[\"intermediate_size\"] = 32",
		  "tensor 'bert.encoder.layer.0.intermediate.dense.weight' is [40, 16] but "
		  "config.json (hidden_size 16, intermediate_size 32) needs [32, 16]", 0 },
		{ "model_type", NULL, "d[\"model_type\"] = \"gpt2\"",
		  "config.json: model_type is \"gpt2\", not \"bert\"", 0 },
		{ "hidden_act", NULL, "d[\"hidden_act\"] = \"relu\"",
		  "config.json: hidden_act must be \"gelu\" (erf GELU)", 0 },
		{ "no hidden_size", NULL, "del d[\"hidden_size\"]",
		  "config.json: 'hidden_size' missing or not an integer >= 1", 0 },
		{ "heads not dividing", NULL, "d[\"num_attention_heads\"] = 3",
		  "config.json: hidden_size 16 is not divisible by num_attention_heads 3", 0 },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(dir, sizeof dir, "%s/bad%zu", root, i);
		write_hf(dir, src, HF_PRETRAINED, bad[i].drop, bad[i].grow, bad[i].py);
		ck = open_bert(dir, &err);
		ok(!ck, "%s: refused", bad[i].what);
		like_msg(err.msg, bad[i].want, "... %s", bad[i].what);
		loom_ckpt_free(ck);
	}
	loom_bert_free(src);
}

/* A file with a head the model does not have (both heads). */
static void case_extra_tensor(const char *root)
{
	struct loom_err err = { 0 };
	char dir[PATH_MAX + 64];
	struct loom_bert *src = model(LOOM_BERT_MLM, 3);
	snprintf(dir, sizeof dir, "%s/extra", root);
	write_hf(dir, src, HF_BOTH_HEADS, NULL, 0, NULL);
	struct loom_ckpt *ck = open_bert(dir, &err);
	struct loom_bert_config cfg;
	ok(ck && loom_bert_ckpt_config(ck, LOOM_BERT_QA, &cfg, &err) == 0,
	   "a dir with both heads opens: %s", ck ? "" : err.msg);
	if (!ck)
		return;
	struct loom_bert *b = loom_bert_new(&cfg);
	is_int(loom_bert_ckpt_load(b, ck, 0, 0), LOOM_EFORMAT, "for QA: the MLM head refused");
	like_msg(loom_bert_error(b), "/extra/model.safetensors: tensor 'cls.predictions.",
		 "... naming the tensor");
	ok(strstr(loom_bert_error(b), "is not part of the model") != NULL, "... not part of the model");
	loom_bert_free(b);
	loom_ckpt_free(ck);
	loom_bert_free(src);
}

int main(void)
{
	const char *root = tap_tmpdir();
	struct loom_err err = { 0 };
	ok(loom_write_file_atomic(tap_path("vocab.txt"), vocab_txt, strlen(vocab_txt), &err) == 0,
	   "a vocab.txt");
	case_round_trip(root);
	case_hf_dirs(root);
	case_extra_tensor(root);
	return done_testing();
}
