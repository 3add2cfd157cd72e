/* loom-eval - a checkpoint + batch frames -> loss, perplexity, accuracy as
 * one JSON line; `loom-eval generate` -> sampled text; `loom-eval squad` ->
 * a BERT checkpoint's SQuAD predictions and their official scores.
 *
 *   loom-feed --manifest val.manifest.json --batch 8 --seq 64 --seed 0 \
 *     | loom-eval --checkpoint ckpt
 *   loom-eval generate --checkpoint ckpt --vocab gpt2 --prompt 'The history of'
 *   loom-eval squad -c bert-ckpt --data dev-v1.1.json --predictions pred.json
 *
 * The checkpoint is validated completely before use (lib/train/loom_ckpt.h:
 * safetensors structure, config.json against the tensors, the model's own
 * tensor table); each refusal is one line on stderr and exit status 1.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "loom_batch.h"
#include "loom_bert.h"
#include "loom_blas.h"
#include "loom_bpe.h"
#include "loom_ckpt.h"
#include "loom_eval.h"
#include "loom_file.h"
#include "loom_generate.h"
#include "loom_squad.h"
#include "loom_config.h"
#include "loom_gpt.h"
#include "loom_vocab.h"
#include "loom_wordpiece.h"

/* --precision: NULL keeps the checkpoint's precision key */
static const char *precision;
/* the threads, which follow the load unless set (loom_blas.h); -v */
static struct loom_threads pool;

/* The GPT checkpoint at path, checked (lib/train/loom_eval.h). */
static void load_model(struct loom_eval_model *m, const char *path, int verify)
{
	struct loom_err err = {0};
	if (loom_eval_model_open(m, path, verify, &err)) {
		/* a BERT's: say which command takes it */
		struct loom_err be = { 0 };
		struct loom_ckpt *b = loom_ckpt_open(path, &loom_bert_ckpt_arch, LOOM_CKPT_NO_VERIFY, &be);
		loom_ckpt_free(b);
		if (b)
			cli_die("%s is a BERT checkpoint (model_type \"bert\"), and this command takes a "
				"GPT's: for its SQuAD predictions run 'loom-eval squad -c %s --data "
				"DEV.json --predictions OUT.json'", path, path);
		cli_die("%s", err.msg);
	}
	if (verify && loom_ckpt_has_state(m->ck) && !loom_ckpt_has_checksums(m->ck))
		cli_warn("%s: state.json records no checksums (written by an older loom): not verified",
			 loom_ckpt_dir(m->ck));
	int rc = loom_eval_model_load(m, precision, &err);
	if (rc == LOOM_EINVAL)
		cli_usage_error("%s", err.msg);
	if (rc)
		cli_die("%s", err.msg);
}

static int do_eval(const char *ckpt, uint64_t max_frames, int verify)
{
	struct loom_eval_model m = {0};
	if (isatty(STDIN_FILENO))
		cli_usage_error("stdin is a terminal: pipe batch frames in (loom-feed ... | loom-eval)");
	load_model(&m, ckpt, verify);
	struct loom_batch_reader *r = loom_batch_reader_new(STDIN_FILENO, "stdin");
	if (!r)
		cli_die("out of memory");
	struct loom_batch_hdr h;
	const uint32_t *tok;
	int32_t *in = NULL, *tg = NULL;
	double t0 = loom_now();
	struct loom_eval_sums sum = { 0 };
	uint64_t frames = 0;
	int rc;
	while (frames < max_frames && (rc = loom_batch_read(r, &h, &tok)) == 1) {
		int T = (int)h.seq_len - 1, B = (int)h.batch;
		if (T > m.cfg.n_positions)
			cli_die("stdin: frame %llu: records of %u tokens need T = %d positions, the "
				"model has n_positions %d (use loom-feed --seq %d)",
				(unsigned long long)frames, h.seq_len, T, m.cfg.n_positions,
				m.cfg.n_positions);
		size_t bad = loom_batch_first_bad_id(&h, tok, (uint64_t)m.cfg.vocab_size);
		if (bad < (size_t)B * h.seq_len)
			cli_die("stdin: frame %llu: token %u (record %zu, position %zu) is outside the "
				"model's vocabulary of %d ids", (unsigned long long)frames, tok[bad],
				bad / h.seq_len, bad % h.seq_len, m.cfg.vocab_size);
		if (!in) {
			in = malloc(sizeof *in * (size_t)B * T);
			tg = malloc(sizeof *tg * (size_t)B * T);
			if (!in || !tg)
				cli_die("out of memory");
		}
		char msg[160];
		if (loom_threads_adapt(&pool, "frame", frames, msg, sizeof msg) && cli_verbose)
			cli_warn("%s", msg); /* -v: the thread count changed */
		if (loom_gpt_eval_frame(m.g, &h, tok, T, in, tg, &sum) < 0)
			cli_die("stdin: frame %llu: %s", (unsigned long long)frames,
				loom_gpt_error(m.g));
		frames++;
	}
	if (frames < max_frames && rc < 0)
		cli_die("%s", loom_batch_reader_error(r));
	if (frames == 0)
		cli_die("stdin: no batch frames to evaluate");
	int64_t ntok = sum.n;
	if (ntok == 0)
		cli_die("stdin: every target is padding: nothing to evaluate");
	double loss = sum.nll / (double)ntok;
	if (!isfinite(loss))
		cli_die("%s: the loss is not finite (%g): the checkpoint's weights overflow on "
			"these frames", loom_ckpt_dir(m.ck), loss);
	json_t *j = json_pack("{s:s, s:I, s:f, s:f, s:f, s:I, s:I, s:f}",
			      "checkpoint", loom_ckpt_dir(m.ck),
			      "step", (json_int_t)loom_ckpt_state(m.ck)->step,
			      "loss", loss, "perplexity", exp(loss),
			      "accuracy", (double)sum.correct / (double)ntok,
			      "tokens", (json_int_t)ntok, "frames", (json_int_t)frames,
			      "seconds", round((loom_now() - t0) * 1000) / 1000);
	json_t *sp = j ? loom_eval_sparsity_json(&m) : NULL;
	if (sp)
		json_object_set_new(j, "sparsity", sp);
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9))
		    : NULL;
	if (!s)
		cli_die("out of memory");
	printf("%s\n", s);
	free(s);
	json_decref(j);
	loom_batch_reader_free(r);
	free(in);
	free(tg);
	loom_eval_model_close(&m);
	if (fflush(stdout) != 0 || ferror(stdout))
		cli_die("cannot write to stdout: %s", strerror(errno));
	return 0;
}

struct gen_opts {
	const char *ckpt, *vocab, *prompt;
	uint64_t n, seed;
	double temperature;
	uint64_t top_k;
	int no_prompt, no_stop, have_prompt, no_verify;
};

static void out_bytes(const uint8_t *p, size_t n)
{
	if (n && fwrite(p, 1, n, stdout) != n) {
		if (errno == EPIPE)
			exit(0);
		cli_die("cannot write to stdout: %s", strerror(errno));
	}
}

static int do_generate(const struct gen_opts *o)
{
	struct loom_eval_model m = {0};
	struct loom_vocab *v = loom_vocab_new();
	if (!v)
		cli_die("out of memory");
	load_model(&m, o->ckpt, !o->no_verify);
	const char *spec = o->vocab ? o->vocab : loom_ckpt_vocab_spec(m.ck);
	if (!spec)
		cli_usage_error("generate: the checkpoint %s holds no vocabulary (trained without "
				"loom-train --vocab): give --vocab V", loom_ckpt_dir(m.ck));
	if (loom_vocab_load_spec(v, spec) < 0)
		cli_die("%s", loom_vocab_error(v));
	struct loom_bpe *e = loom_bpe_new(v);
	if (!e)
		cli_die("out of memory");
	const int V = m.cfg.vocab_size;
	struct loom_ids ids = {0};
	const char *prompt = o->prompt ? o->prompt : "";
	if (loom_bpe_encode(e, (const uint8_t *)prompt, strlen(prompt), 1, &ids) < 0)
		cli_die("--prompt: %s", loom_bpe_error(e));
	if (ids.n == 0) {
		if (v->eot == LOOM_VOCAB_NONE)
			cli_usage_error("--prompt is empty and the vocabulary has no <|endoftext|> to start from");
		if (loom_ids_reserve(&ids, 1) < 0)
			cli_die("out of memory");
		ids.v[ids.n++] = v->eot;
	}
	for (size_t i = 0; i < ids.n; i++)
		if (ids.v[i] >= (uint32_t)V)
			cli_die("--prompt: token %u (position %zu) is outside the model's vocabulary "
				"of %d ids: is the vocabulary the one the model was trained with?",
				ids.v[i], i, V);
	/* never an id the tokenizer lacks (loom_sample.h) */
	struct loom_generate x;
	if (loom_generate_init(&x, m.g, v, ids.v, ids.n, o->n, (float)o->temperature,
			       (int)o->top_k, o->seed))
		cli_die("%s", x.err.msg);
	if (!o->no_prompt && o->prompt) {
		out_bytes((const uint8_t *)prompt, strlen(prompt));
		fflush(stdout);
	}
	for (uint64_t k = 0; k < o->n; k++) {
		char msg[160];
		if (loom_threads_adapt(&pool, "token", k, msg, sizeof msg) && cli_verbose)
			cli_warn("%s", msg);
		int t = loom_generate_next(&x);
		if (t < 0)
			cli_die("%s", x.err.msg);
		if (!o->no_stop && (uint32_t)t == v->eot)
			break;
		if (loom_generate_decode(&x, x.ids.n - 1) < 0)
			cli_die("token %d is not in the vocabulary '%s': %s", t, spec, x.err.msg);
		out_bytes(x.buf, x.len);
		fflush(stdout);
	}
	out_bytes((const uint8_t *)"\n", 1);
	if (fflush(stdout) != 0) {
		if (errno == EPIPE)
			exit(0);
		cli_die("cannot write to stdout: %s", strerror(errno));
	}
	loom_generate_release(&x);
	loom_ids_release(&ids);
	loom_bpe_free(e);
	loom_vocab_free(v);
	loom_eval_model_close(&m);
	return 0;
}

static struct gen_opts o = { .n = 200, .seed = 1, .temperature = 0.8, .top_k = 200 };
static uint64_t max_frames = UINT64_MAX, threads;

static void on_prompt(const char *opt, const char *arg)
{
	(void)opt;
	o.prompt = arg;
	o.have_prompt = 1;
}

static const struct cli_opt opts[] = {
	OPT_STRING('c', "checkpoint", &o.ckpt, "DIR",
		   "a checkpoint: DIR (its latest), DIR/latest or a step dir"),
	OPT_U64(0, "batches", &max_frames, "N", 1, UINT64_MAX,
		"evaluate at most N frames (default: the whole stream)"),
	OPT_U64('j', "threads", &threads, "N", 1, 1024,
		"threads (default: the cores other processes leave free)"),
	OPT_BOOL(0, "no-verify", &o.no_verify,
		 "do not check the checkpoint's files against the\n"
		 "checksums in its state.json"),
	OPT_ENUM(0, "precision", &precision, "P", "fp32 bf16",
		 "fp32 or bf16 matmuls (default: the checkpoint's precision)"),
	OPT_VERBOSE("say which OpenBLAS kernels run (and fix a slow choice)"),
	OPT_TEXT("generate:"),
	OPT_STRING(0, "vocab", &o.vocab, "V",
		   "tokenizer: gpt2, a directory with encoder.json +\n"
		   "vocab.bpe, ENC.json,VOCAB.bpe, a tokenizer.json\n"
		   "or a .tiktoken file (default: the checkpoint's\n"
		   "vocab.json + merges.txt)"),
	OPT_CALLBACK('p', "prompt", on_prompt, "TEXT", "the text to continue (empty: start of a document)"),
	OPT_U64('n', "tokens", &o.n, "N", 0, 1u << 20, "tokens to generate (default: 200)"),
	OPT_DOUBLE(0, "temperature", &o.temperature, "T", 0, 100,
		   "sampling temperature, 0 = greedy (default: 0.8)"),
	OPT_U64(0, "top-k", &o.top_k, "K", 0, 1u << 24,
		"sample among the K most likely tokens, 0 = all (default: 200)"),
	OPT_U64(0, "seed", &o.seed, "S", 0, UINT64_MAX, "sampling seed (default: 1)"),
	OPT_BOOL(0, "no-prompt", &o.no_prompt, "print only the continuation"),
	OPT_BOOL(0, "no-stop", &o.no_stop, "do not stop at <|endoftext|>"),
	OPT_END()
};

static const char *versions(void)
{
	static char v[256];
	snprintf(v, sizeof v, "jansson %s, OpenBLAS core %s", JANSSON_VERSION, loom_blas_core());
	return v;
}

static const struct cli_cmd cmd = {
	.prog = "loom-eval",
	.usage = "usage: loom-eval --checkpoint DIR [options] < frames\n"
		 "       loom-eval generate --checkpoint DIR [--vocab V] --prompt TEXT [options]\n"
		 "       loom-eval squad --data FILE.json --predictions P.json\n"
		 "Evaluate a checkpoint on batch frames (formats/batch.md) from stdin and print\n"
		 "one JSON line: checkpoint, step, loss, perplexity, accuracy, tokens, frames,\n"
		 "seconds.  `generate` prints the prompt and a sampled continuation; `squad`\n"
		 "scores SQuAD predictions (loom-eval squad --help).\n",
	.opts = opts,
	.version = versions,
};

/* ---- loom-eval squad: official SQuAD v1.1 scores of a predictions file,
 * or of a BERT checkpoint's predictions -------------------------------- */

static const char *sq_data, *sq_pred, *sq_ckpt, *sq_logits, *sq_vocab;
static uint64_t sq_n_best = 20, sq_max_answer = 30, sq_seq, sq_stride, sq_max_query,
		sq_batch = 64, sq_tokens = 4096; /* windows 0: the checkpoint's */
static int sq_no_verify;

static const struct cli_opt squad_opts[] = {
	OPT_STRING(0, "data", &sq_data, "FILE.json", "the SQuAD v1.1 data set (dev-v1.1.json)"),
	OPT_STRING(0, "predictions", &sq_pred, "P.json",
		   "the predictions: {\"question id\": \"answer text\", ...}\n"
		   "(with -c: written)"),
	OPT_STRING('c', "checkpoint", &sq_ckpt, "DIR",
		   "predict with this BERT checkpoint (a loom checkpoint\n"
		   "or a HuggingFace BertForQuestionAnswering directory)"),
	OPT_STRING(0, "logits", &sq_logits, "OUT.jsonl",
		   "with -c: one JSON line per feature: id, feature,\n"
		   "window, input_ids, token_type_ids, attention_mask,\n"
		   "start_logits, end_logits"),
	OPT_U64(0, "n-best", &sq_n_best, "N", 1, 4096,
		"start and end candidates per feature (default: 20)"),
	OPT_U64(0, "max-answer", &sq_max_answer, "N", 1, 1u << 20,
		"longest answer in tokens (default: 30)"),
	OPT_STRING(0, "vocab", &sq_vocab, "V",
		   "tokenizer: bert-base-uncased, a vocab.txt or a\n"
		   "tokenizer.json (default: the checkpoint's vocab.txt)"),
	OPT_CASING(),
	OPT_U64(0, "seq", &sq_seq, "T", 4, 1u << 16,
		"tokens per feature (default: the checkpoint's\ntraining seq_len, else 384)"),
	OPT_U64(0, "stride", &sq_stride, "N", 1, 1u << 16,
		"context tokens between windows (default: the\ncheckpoint's doc_stride, else 128)"),
	OPT_U64(0, "max-query", &sq_max_query, "N", 1, 1u << 16,
		"question tokens kept (default: the checkpoint's\nmax_query, else 64)"),
	OPT_U64(0, "tokens", &sq_tokens, "N", 1, 1u << 24,
		"real tokens per forward (default: 4096): features are\n"
		"computed at their real lengths, packed, up to N tokens"),
	OPT_U64(0, "batch", &sq_batch, "N", 1, 4096,
		"features per forward at most (default: 64; with --logits\n"
		"exactly, padded to --seq as the file shows them)"),
	OPT_U64('j', "threads", &threads, "N", 1, 1024,
		"threads (default: the cores other processes leave free)"),
	OPT_BOOL(0, "no-verify", &sq_no_verify,
		 "do not check the checkpoint's files against the\n"
		 "checksums in its state.json"),
	OPT_PROGRESS(NULL, "progress on stderr even when it is not a terminal"),
	OPT_VERBOSE("say which OpenBLAS kernels run"),
	OPT_QUIET(NULL, "only errors on stderr"),
	OPT_END()
};

static const struct cli_cmd squad_cmd = {
	.prog = "loom-eval",
	.usage = "usage: loom-eval squad --data FILE.json --predictions P.json\n"
		 "       loom-eval squad -c DIR --data FILE.json --predictions OUT.json [options]\n"
		 "Score SQuAD v1.1 predictions as the official evaluate-v1.1.py does and print\n"
		 "its JSON line {\"exact_match\": X, \"f1\": Y} (the same digits).  With -c,\n"
		 "first predict every question with the BERT checkpoint (Google's run_squad.py\n"
		 "windows and post-processing) and write the predictions to OUT.json.\n",
	.opts = squad_opts,
	.footer = "A question without a prediction scores 0; their count goes to stderr.\n",
	.version = versions,
};

/* The tokenizer: --vocab or the checkpoint's, opened with --lowercase/
 * --cased or else the casing the checkpoint records (its
 * tokenizer_config.json's do_lower_case), or else by loom_wordpiece_open's
 * rules. */
static struct loom_wordpiece *squad_tokenizer(struct loom_ckpt *ck)
{
	char own[4096];
	struct loom_wordpiece_opts wo;
	struct loom_err err = { 0 };
	int casing = cli_casing;
	const char *rule = NULL;
	/* 2: its tokenizer_config.json says do_lower_case; 0: no vocab.txt */
	int has = loom_bert_ckpt_tokenizer(ck, own, sizeof own, &wo, &err);
	if (has < 0)
		cli_die("%s", err.msg);
	size_t vl = sq_vocab ? strlen(sq_vocab) : 0;
	if (sq_vocab && casing == LOOM_CASING_AUTO && has == 2 &&
	    !(vl > 5 && !strcmp(sq_vocab + vl - 5, ".json"))) {
		casing = wo.lowercase ? LOOM_CASING_LOWER : LOOM_CASING_CASED;
		rule = "the checkpoint's tokenizer_config.json";
	}
	if (!sq_vocab && !has)
		cli_usage_error("squad: the checkpoint %s holds no vocab.txt: give --vocab V",
				loom_ckpt_dir(ck));
	struct loom_wordpiece *w = cli_wordpiece_open(sq_vocab ? sq_vocab : loom_ckpt_dir(ck), casing,
						      rule);
	if (loom_wordpiece_check_bert(w, loom_wordpiece_path(w)) < 0)
		cli_die("%s%s", sq_vocab ? "--vocab: " : "", loom_wordpiece_error(w));
	return w;
}

/* One JSON array of n ints or floats (%.9g: float32 exactly). */
static void json_array_out(struct loom_outfile *o, const char *key, const uint32_t *u,
			   const uint8_t *b, const float *f, size_t n, char **buf, size_t *cap)
{
	size_t len = 0;
	for (size_t i = 0; i <= n; i++) {
		if (*cap - len < 64) {
			*cap = *cap ? 2 * *cap : 4096;
			if (!(*buf = realloc(*buf, *cap)))
				cli_die("out of memory");
		}
		if (i == 0)
			len += (size_t)snprintf(*buf + len, *cap - len, ", \"%s\": [", key);
		if (i == n)
			len += (size_t)snprintf(*buf + len, *cap - len, "]");
		else if (f)
			len += (size_t)snprintf(*buf + len, *cap - len, "%s%.9g", i ? ", " : "",
						(double)f[i]);
		else
			len += (size_t)snprintf(*buf + len, *cap - len, "%s%u", i ? ", " : "",
						u ? u[i] : b[i]);
	}
	if (loom_outfile_write(o, *buf, len))
		cli_die("%s", loom_outfile_error(o));
}

/* --logits: the feature's inputs and logits as one JSON line. */
static void logits_line(struct loom_outfile *o, const struct loom_squad *s,
			const struct loom_squad_features *fs, size_t i, const float *sl,
			const float *el, char **buf, size_t *cap)
{
	const struct loom_squad_feature *f = &fs->f[i];
	const size_t T = fs->seq;
	json_t *id = json_string(s->qas[f->qa].id);
	char *ids = id ? json_dumps(id, JSON_ENCODE_ANY) : NULL;
	json_decref(id);
	if (!ids)
		cli_die("out of memory");
	uint8_t *mask = malloc(T);
	if (!mask)
		cli_die("out of memory");
	for (size_t k = 0; k < T; k++)
		mask[k] = k < f->n_tokens;
	char head[128];
	int n = snprintf(head, sizeof head, ", \"feature\": %zu, \"window\": %u", i, f->window);
	if (loom_outfile_write(o, "{\"id\": ", 7) || loom_outfile_write(o, ids, strlen(ids)) ||
	    loom_outfile_write(o, head, (size_t)n))
		cli_die("%s", loom_outfile_error(o));
	json_array_out(o, "input_ids", fs->input_ids + i * T, NULL, NULL, T, buf, cap);
	json_array_out(o, "token_type_ids", NULL, fs->segment_ids + i * T, NULL, T, buf, cap);
	json_array_out(o, "attention_mask", NULL, mask, NULL, T, buf, cap);
	json_array_out(o, "start_logits", NULL, NULL, sl, T, buf, cap);
	json_array_out(o, "end_logits", NULL, NULL, el, T, buf, cap);
	if (loom_outfile_write(o, "}\n", 2))
		cli_die("%s", loom_outfile_error(o));
	free(ids);
	free(mask);
}

/* The windows: --seq, --stride, --max-query, else those the checkpoint
 * trained on (loom's configuration in its config.json: seq_len,
 * doc_stride, max_query), else run_squad.py's 384, 128, 64 (a HuggingFace
 * directory). */
static struct loom_squad_feature_opts squad_windows(const struct loom_ckpt *ck)
{
	struct loom_config c;
	int rc = loom_bert_ckpt_loom_config(ck, &c);
	if (rc < 0)
		cli_die("%s/config.json: loom: %s", loom_ckpt_dir(ck), loom_config_error(&c));
	if (rc == 0)
		c.seq_len = 384; /* run_squad.py's (the defaults' doc_stride, max_query too) */
	return (struct loom_squad_feature_opts){
		(uint32_t)(sq_seq ? sq_seq : (uint64_t)c.seq_len),
		(uint32_t)(sq_stride ? sq_stride : (uint64_t)c.doc_stride),
		(uint32_t)(sq_max_query ? sq_max_query : (uint64_t)c.max_query) };
}

/* -c: predict every question with a BERT checkpoint, write sq_pred. */
static void squad_predict(struct loom_squad *s)
{
	struct loom_err err = { 0 };
	struct loom_ckpt *ck = loom_ckpt_open(sq_ckpt, &loom_bert_ckpt_arch,
					      sq_no_verify ? LOOM_CKPT_NO_VERIFY : 0, &err);
	if (!ck)
		cli_die("%s", err.msg);
	struct loom_bert_config cfg;
	if (loom_bert_ckpt_config(ck, LOOM_BERT_QA, &cfg, &err))
		cli_die("%s", err.msg);
	/* --logits writes every position of a feature, padding too: the padded
	 * forward (the predictions are the same up to rounding) */
	cfg.padded = sq_logits != NULL;
	struct loom_squad_feature_opts fo = squad_windows(ck);
	if (fo.seq > (uint32_t)cfg.max_positions)
		cli_usage_error("squad: --seq %u is longer than the model's %d positions "
				"(max_position_embeddings)", fo.seq, cfg.max_positions);
	struct loom_wordpiece *w = squad_tokenizer(ck);
	if (loom_wordpiece_size(w) != (uint32_t)cfg.vocab_size)
		cli_die("%s: %u tokens, but the model %s has vocab_size %d: not its tokenizer",
			sq_vocab ? sq_vocab : loom_wordpiece_path(w),
			loom_wordpiece_size(w), loom_ckpt_dir(ck), cfg.vocab_size);
	struct loom_bert *b = loom_bert_new(&cfg);
	if (!b)
		cli_die("out of memory for the model of %s", loom_ckpt_dir(ck));
	if (loom_bert_ckpt_load(b, ck, 0, 0) < 0)
		cli_die("%s", loom_bert_error(b));

	struct loom_squad_features fs;
	if (loom_squad_features(s, w, &fo, &fs))
		cli_die("%s: %s", sq_data, loom_squad_error(s));
	const size_t T = fs.seq, B = sq_batch;
	float *sl = malloc(fs.n * T * sizeof *sl), *el = malloc(fs.n * T * sizeof *el);
	int32_t *in = malloc(B * T * sizeof *in), *seg = malloc(B * T * sizeof *seg),
		*mask = malloc(B * T * sizeof *mask);
	if ((fs.n && (!sl || !el)) || !in || !seg || !mask)
		cli_die("out of memory for %zu features", fs.n);
	struct loom_outfile lo = { .fd = -1 };
	if (sq_logits && loom_outfile_open(&lo, sq_logits))
		cli_die("%s", loom_outfile_error(&lo));
	char *lbuf = NULL;
	size_t lcap = 0;
	struct cli_progress prog;
	cli_progress_init(&prog, cli_force_progress);
	double t0 = loom_now();
	for (size_t i = 0, nb; i < fs.n; i += nb) {
		/* up to B features, and (packed) up to sq_tokens real tokens */
		size_t tok = fs.f[i].n_tokens;
		for (nb = 1; i + nb < fs.n && nb < B; nb++) {
			if (!cfg.padded && tok + fs.f[i + nb].n_tokens > sq_tokens)
				break;
			tok += fs.f[i + nb].n_tokens;
		}
		for (size_t r = 0; r < nb; r++)
			for (size_t k = 0; k < T; k++) {
				in[r * T + k] = (int32_t)fs.input_ids[(i + r) * T + k];
				seg[r * T + k] = fs.segment_ids[(i + r) * T + k];
				mask[r * T + k] = k < fs.f[i + r].n_tokens;
			}
		char msg[160];
		if (loom_threads_adapt(&pool, "feature", i, msg, sizeof msg) && cli_verbose)
			cli_warn("%s", msg);
		struct loom_bert_batch x = { in, seg, mask, NULL, NULL, NULL };
		if (loom_bert_forward(b, &x, (int)nb, (int)T, 0, 0, NULL) < 0)
			cli_die("%s: feature %zu: %s", sq_data, i, loom_bert_error(b));
		memcpy(sl + i * T, loom_bert_start_logits(b), nb * T * sizeof *sl);
		memcpy(el + i * T, loom_bert_end_logits(b), nb * T * sizeof *el);
		for (size_t r = 0; sq_logits && r < nb; r++)
			logits_line(&lo, s, &fs, i + r, sl + (i + r) * T, el + (i + r) * T, &lbuf, &lcap);
		if (!cli_quiet && cli_progress_due(&prog)) {
			double dt = loom_now() - t0, rate = dt > 0 ? (double)(i + nb) / dt : 0;
			char eta[32];
			cli_progress_show(&prog, "squad: %zu of %zu features, %.1f features/s, ETA %s",
					  i + nb, fs.n, rate,
					  rate > 0 ? cli_duration((double)(fs.n - i - nb) / rate, eta,
								  sizeof eta) : "?");
		}
	}
	cli_progress_done(&prog);
	struct loom_squad_prediction *pred = calloc(s->n_qas + 1, sizeof *pred);
	struct loom_squad_post_opts po = { (uint32_t)sq_n_best, (uint32_t)sq_max_answer };
	if (!pred)
		cli_die("out of memory");
	if (loom_squad_predict(s, &fs, sl, el, &po, pred))
		cli_die("%s", loom_squad_error(s));
	if (sq_logits && loom_outfile_commit(&lo))
		cli_die("%s", loom_outfile_error(&lo));
	if (loom_squad_write_predictions(s, pred, sq_pred))	/* last: no file on a failure */
		cli_die("%s", loom_squad_error(s));
	size_t empty = 0;
	for (size_t q = 0; q < s->n_qas; q++)
		empty += pred[q].feature < 0;
	if (!cli_quiet)
		cli_warn("squad: %zu questions, %zu features, %.1f s; %zu with no valid span "
			 "(empty answer)", s->n_qas, fs.n, loom_now() - t0, empty);
	free(pred);
	free(lbuf);
	free(sl);
	free(el);
	free(in);
	free(seg);
	free(mask);
	loom_squad_features_release(&fs);
	loom_bert_free(b);
	loom_wordpiece_free(w);
	loom_ckpt_free(ck);
}

static void blas_setup(char **argv);

static int do_squad(int argc, char **argv)
{
	cli_parse(&squad_cmd, argc, argv);
	if (optind < argc)
		cli_usage_error("squad: unexpected argument '%s'", argv[optind]);
	if (!sq_data || !sq_pred)
		cli_usage_error("squad: --data FILE.json and --predictions P.json are required");
	if (!sq_ckpt && (sq_logits || sq_vocab || cli_casing != LOOM_CASING_AUTO))
		cli_usage_error("squad: --logits, --vocab, --lowercase and --cased need -c DIR "
				"(a checkpoint to predict with)");
	if (sq_ckpt) {	/* matrices: OpenBLAS's kernels, the threads */
		blas_setup(cli_argv);
		loom_threads_init(&pool, (int)threads);
	}
	struct loom_squad *s = loom_squad_new();
	struct loom_squad_score sc;
	if (!s)
		cli_die("out of memory");
	if (loom_squad_load(s, sq_data))
		cli_die("%s", loom_squad_error(s));
	if (sq_ckpt)
		squad_predict(s);
	if (loom_squad_score_file(s, sq_pred, &sc))
		cli_die("%s", loom_squad_error(s));
	if (!cli_quiet && (!s->version || strcmp(s->version, "1.1")))
		cli_warn("%s: version \"%s\", not 1.1: scored as SQuAD v1.1", sq_data,
			 s->version ? s->version : "(none)");
	char em[40], f1[40];
	printf("{\"exact_match\": %s, \"f1\": %s}\n", loom_double_repr(sc.exact_match, em, sizeof em),
	       loom_double_repr(sc.f1, f1, sizeof f1));
	if (!cli_quiet && !sq_ckpt)
		cli_warn("squad: %zu of %zu questions unanswered (scored 0)", sc.unanswered,
			 sc.questions);
	loom_squad_free(s);
	return 0;
}

/* -v: which OpenBLAS kernels run, and the threads */
static void tell_blas(void)
{
	const char *was = getenv(LOOM_BLAS_DETECTED_ENV);
	char d[96];
	if (was)
		cli_warn("OpenBLAS chose '%s' for this CPU; re-executed with OPENBLAS_CORETYPE=%s",
			 was, loom_blas_core());
	cli_warn("OpenBLAS core '%s', %s", loom_blas_core(),
		 loom_threads_describe(&pool, d, sizeof d));
}

/* Before any thread: OpenBLAS picks its kernels and OpenMP its wait policy
 * when they load (re-executes with argv, the command line as given). */
static void blas_setup(char **argv)
{
	const char *core = loom_blas_better_core();
	int brc = loom_blas_reexec(argv, core);
	if (brc < 0 && core)
		cli_warn("OpenBLAS runs its slow '%s' kernels; could not re-execute with "
			 "OPENBLAS_CORETYPE=%s: %s", loom_blas_core(), core, strerror(-brc));
}

/* loom-eval and loom-eval generate: the checkpoint, the threads */
static void eval_setup(int argc, char **argv)
{
	blas_setup(cli_argv);
	cli_parse(&cmd, argc, argv);
	if (optind < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
	if (!o.ckpt)
		cli_usage_error("--checkpoint DIR is required");
	loom_threads_init(&pool, (int)threads);
	if (cli_verbose)
		tell_blas();
}

static int run_eval(int argc, char **argv)
{
	eval_setup(argc, argv);
	if (o.vocab || o.have_prompt)
		cli_usage_error("--vocab and --prompt belong to `loom-eval generate`");
	return do_eval(o.ckpt, max_frames, !o.no_verify);
}

static int run_generate(int argc, char **argv)
{
	eval_setup(argc, argv);
	return do_generate(&o);
}

int main(int argc, char **argv)
{
	static const struct cli_subcmd eval = { "", &cmd, run_eval };
	static const struct cli_subcmd cmds[] = {
		{ "generate", &cmd, run_generate },
		{ "squad", &squad_cmd, do_squad },
		{ NULL, NULL, NULL },
	};
	static const struct cli_cmds t = { "loom-eval", "", cmds, &eval, versions };
	signal(SIGPIPE, SIG_IGN);
	return cli_dispatch(&t, argc, argv);
}
