/*
 * loom_wordpiece.c - BERT's WordPiece tokenizer; see loom_wordpiece.h.
 *
 * The encoder runs the normalizer, the pre-tokenizer and WordPiece in one
 * pass over the input: each input character is cleaned, stripped and
 * lower-cased into zero or more normalized characters, which either end
 * the current word (white space), form a word of their own (punctuation,
 * CJK) or are appended to it.  A finished word is looked up greedily in
 * a word buffer that keeps two bytes of room before it, so that "##" can
 * be written in front of any later part without a copy.  ASCII text goes
 * through a 128-entry table.
 */
#include "loom_wordpiece.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom_buf.h"
#include "loom_file.h"
#include "loom_utf8.h"
#include "loom_vocab.h"
#include "loom_wordpiece_tab.h"

#define PREFIX "##"
#define PREFIX_LEN 2
#define MAX_IDS (1u << 24)

/* The vocabulary, shared by loom_wordpiece_dup copies (refcounted). */
struct wp_vocab {
	int refs;
	uint32_t n;              /* lines = ids */
	uint64_t *off;           /* n + 1: token i = bytes[off[i]..off[i+1]) */
	char *bytes;
	uint64_t *slot;          /* hash tag << 32 | (id + 1); 0 = empty */
	uint32_t mask;
	uint32_t max_len;        /* longest token in bytes */
	uint32_t unk;
	uint32_t special[5];     /* [PAD] [UNK] [CLS] [SEP] [MASK] or NONE */
	struct loom_wordpiece_opts opts;
	int strip;
	char *path;              /* loom_wordpiece_open: the file loaded */
	const char *casing_rule; /* and what decided its casing */
	/* ASCII: normalized byte (0 = dropped) and class of each byte */
	uint8_t amap[128], aclass[128];
};

enum { C_WORD, C_SPACE, C_PUNCT, C_DROP };

struct loom_wordpiece {
	struct wp_vocab *v;
	/* the word being built: normalized bytes after PREFIX_LEN bytes of
	 * room; per normalized character its byte offset in the word and the
	 * input span it came from */
	uint8_t *word;
	size_t wlen, wcap;
	uint32_t *cstart;
	uint64_t *ostart, *oend;
	size_t nch, chcap;
	int spans;               /* encode: offsets requested, so keep ostart/oend */
	int emitted;             /* decode: a token was written already */
	struct loom_err err;
};

void loom_wordpiece_opts_default(struct loom_wordpiece_opts *o)
{
	o->lowercase = 1;
	o->strip_accents = -1;
	o->clean_text = 1;
	o->chinese_chars = 1;
	o->max_chars = 100;
}

void loom_offsets_release(struct loom_offsets *o)
{
	free(o->start);
	free(o->end);
	memset(o, 0, sizeof *o);
}

static int offsets_push(struct loom_offsets *o, uint64_t s, uint64_t e)
{
	if (o->n == o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 256;
		uint64_t *a = realloc(o->start, cap * sizeof *a);
		if (!a)
			return LOOM_ENOMEM;
		o->start = a;
		uint64_t *b = realloc(o->end, cap * sizeof *b);
		if (!b)
			return LOOM_ENOMEM;
		o->end = b;
		o->cap = cap;
	}
	o->start[o->n] = s;
	o->end[o->n++] = e;
	return 0;
}

static void vocab_unref(struct wp_vocab *v)
{
	if (!v || --v->refs > 0)
		return;
	free(v->off);
	free(v->bytes);
	free(v->slot);
	free(v->path);
	free(v);
}

struct loom_wordpiece *loom_wordpiece_new(void)
{
	return calloc(1, sizeof(struct loom_wordpiece));
}

void loom_wordpiece_free(struct loom_wordpiece *w)
{
	if (!w)
		return;
	vocab_unref(w->v);
	free(w->word);
	free(w->cstart);
	free(w->ostart);
	free(w->oend);
	free(w);
}

const char *loom_wordpiece_error(const struct loom_wordpiece *w)
{
	return w->err.msg;
}

struct loom_wordpiece *loom_wordpiece_dup(const struct loom_wordpiece *w)
{
	struct loom_wordpiece *d = loom_wordpiece_new();
	if (d && w->v) {
		d->v = w->v;
		d->v->refs++;
	}
	return d;
}

static inline uint64_t hash_bytes(const uint8_t *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

static uint32_t vocab_lookup(const struct wp_vocab *v, const uint8_t *s, size_t n)
{
	uint64_t h = hash_bytes(s, n);
	uint32_t tag = (uint32_t)(h >> 32), i = (uint32_t)h & v->mask;
	for (;; i = (i + 1) & v->mask) {
		uint64_t e = v->slot[i];
		if (!e)
			return LOOM_VOCAB_NONE;
		if ((uint32_t)(e >> 32) != tag)
			continue;
		uint32_t id = (uint32_t)e - 1;
		if (v->off[id + 1] - v->off[id] == n && !memcmp(v->bytes + v->off[id], s, n))
			return id;
	}
}

/* Insert token id; a token already present takes the new id (the later
 * line wins, as in HuggingFace's HashMap). */
static void vocab_insert(struct wp_vocab *v, uint32_t id)
{
	const uint8_t *s = (const uint8_t *)v->bytes + v->off[id];
	size_t n = v->off[id + 1] - v->off[id];
	uint64_t h = hash_bytes(s, n);
	uint32_t tag = (uint32_t)(h >> 32), i = (uint32_t)h & v->mask;
	for (;; i = (i + 1) & v->mask) {
		uint64_t e = v->slot[i];
		if (e && (uint32_t)(e >> 32) == tag) {
			uint32_t old = (uint32_t)e - 1;
			if (v->off[old + 1] - v->off[old] == n &&
			    !memcmp(v->bytes + v->off[old], s, n)) {
				v->slot[i] = (uint64_t)tag << 32 | (id + 1);
				return;
			}
			continue;
		}
		if (!e) {
			v->slot[i] = (uint64_t)tag << 32 | (id + 1);
			return;
		}
	}
}

/* Byte length of s[0..n) without its trailing White_Space characters. */
static size_t trim_end(const uint8_t *s, size_t n)
{
	size_t keep = 0;
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		int valid;
		size_t k = loom_utf8_decode(s + i, n - i, &cp, &valid);
		i += k;
		if (!(loom_wp_flags(cp) & LOOM_WP_WS))
			keep = i;
	}
	return keep;
}

static void set_ascii(struct wp_vocab *v)
{
	const struct loom_wordpiece_opts *o = &v->opts;
	for (int c = 0; c < 128; c++) {
		unsigned f = loom_wp_flags((uint32_t)c);
		uint8_t cls = C_WORD, out = (uint8_t)c;
		if (o->clean_text && (c == 0 || (f & LOOM_WP_CTRL)))
			cls = C_DROP;
		else if (f & LOOM_WP_WS)
			cls = C_SPACE;
		else if (f & LOOM_WP_PUNCT)
			cls = C_PUNCT;
		if (o->lowercase && c >= 'A' && c <= 'Z')
			out = (uint8_t)(c + 32);
		v->amap[c] = out;
		v->aclass[c] = cls;
	}
}

int loom_wordpiece_load_mem(struct loom_wordpiece *w, const char *buf, size_t len,
			    const char *name, const struct loom_wordpiece_opts *o)
{
	const uint8_t *s = (const uint8_t *)buf;
	struct wp_vocab *v = calloc(1, sizeof *v);
	if (!v)
		return loom_err_set(&w->err, LOOM_ENOMEM, "%s: out of memory", name);
	v->refs = 1;
	if (o)
		v->opts = *o;
	else
		loom_wordpiece_opts_default(&v->opts);
	v->strip = v->opts.strip_accents < 0 ? v->opts.lowercase : v->opts.strip_accents;
	set_ascii(v);
	int rc = 0;
	if (!len) {
		rc = loom_err_set(&w->err, LOOM_EFORMAT, "%s: empty vocabulary", name);
		goto fail;
	}
	uint64_t lines = 0;
	for (size_t i = 0; i < len; i++)
		lines += s[i] == '\n';
	lines += s[len - 1] != '\n';
	if (lines > MAX_IDS) {
		rc = loom_err_set(&w->err, LOOM_EFORMAT,
				  "%s: %llu lines; at most %u tokens are supported", name,
				  (unsigned long long)lines, MAX_IDS);
		goto fail;
	}
	v->n = (uint32_t)lines;
	v->off = malloc((v->n + 1) * sizeof *v->off);
	v->bytes = malloc(len + 1);
	uint32_t cap = 16;
	while (cap < 2 * v->n)
		cap *= 2;
	v->slot = calloc(cap, sizeof *v->slot);
	if (!v->off || !v->bytes || !v->slot) {
		rc = loom_err_set(&w->err, LOOM_ENOMEM, "%s: out of memory", name);
		goto fail;
	}
	v->mask = cap - 1;
	uint64_t used = 0;
	size_t p = 0;
	for (uint32_t id = 0; id < v->n; id++) {
		const uint8_t *nl = memchr(s + p, '\n', len - p);
		size_t end = nl ? (size_t)(nl - s) : len;
		int stop;
		size_t bad = loom_utf8_span(s + p, end - p, &stop);
		if (bad < end - p) {
			rc = loom_err_set(&w->err, LOOM_EFORMAT,
					  "%s:%u: invalid UTF-8 at byte %zu of the line", name,
					  id + 1, bad + 1);
			goto fail;
		}
		size_t k = trim_end(s + p, end - p);
		v->off[id] = used;
		memcpy(v->bytes + used, s + p, k);
		used += k;
		if (k > v->max_len)
			v->max_len = (uint32_t)k;
		p = end + 1;
	}
	v->off[v->n] = used;
	for (uint32_t id = 0; id < v->n; id++)
		vocab_insert(v, id);
	static const char *const names[5] = { "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]" };
	for (int i = 0; i < 5; i++)
		v->special[i] = vocab_lookup(v, (const uint8_t *)names[i], strlen(names[i]));
	v->unk = v->special[1];
	if (v->unk == LOOM_VOCAB_NONE) {
		rc = loom_err_set(&w->err, LOOM_EFORMAT, "%s: no [UNK] token in the vocabulary",
				  name);
		goto fail;
	}
	vocab_unref(w->v);
	w->v = v;
	return 0;
fail:
	vocab_unref(v);
	return rc;
}

int loom_wordpiece_load(struct loom_wordpiece *w, const char *path,
			const struct loom_wordpiece_opts *o)
{
	char *buf;
	size_t len;
	int rc = loom_file_read_input(path, LOOM_FILE_MAX_LIST, &buf, &len, &w->err);
	if (rc)
		return rc;
	rc = loom_wordpiece_load_mem(w, buf, len, path, o);
	free(buf);
	return rc;
}

int loom_wordpiece_check_bert(struct loom_wordpiece *w, const char *name)
{
	static const char *const need[3] = { "[CLS]", "[SEP]", "[PAD]" };
	for (int i = 0; i < 3; i++)
		if (loom_wordpiece_id(w, need[i], 5) == LOOM_VOCAB_NONE)
			return loom_err_set(&w->err, LOOM_EFORMAT,
					    "'%s' lacks %s, which a BERT's input needs "
					    "([CLS] question [SEP] context [SEP] [PAD]...)", name,
					    need[i]);
	return 0;
}

int loom_wordpiece_vocab_path(const char *spec, char *out, size_t n)
{
	if (!strcmp(spec, "bert-base-uncased"))
		return loom_share_path("vocab/bert-base-uncased/vocab.txt", out, n);
	return (size_t)snprintf(out, n, "%s", spec) < n ? 0 : LOOM_EINVAL;
}

/* --- opening with a casing rule ------------------------------------------ */

int loom_wordpiece_read_config(const char *path, struct loom_wordpiece_opts *o,
			       struct loom_err *err)
{
	char *buf;
	size_t len;
	json_error_t je;
	struct stat st;
	if (stat(path, &st) < 0 && errno == ENOENT)
		return 0;
	int rc = loom_file_read_bounded(path, LOOM_FILE_MAX_CONFIG, &buf, &len, err);
	if (rc < 0)
		return rc;
	json_t *j = json_loadb(buf, len, 0, &je);
	free(buf);
	if (!json_is_object(j)) {
		json_decref(j);
		return loom_err_set(err, LOOM_EFORMAT, "%s: line %d: %s", path, je.line,
				    j ? "not a JSON object" : loom_json_reason(je.text));
	}
	static const char *const keys[3] = { "do_lower_case", "strip_accents",
					     "tokenize_chinese_chars" };
	int *dst[3] = { &o->lowercase, &o->strip_accents, &o->chinese_chars };
	rc = 0;
	for (int i = 0; i < 3; i++) {
		json_t *v = json_object_get(j, keys[i]);
		if (!v || (i == 1 && json_is_null(v)))
			continue;
		if (!json_is_boolean(v)) {
			rc = loom_err_set(err, LOOM_EFORMAT, "%s: %s is not true or false%s", path,
					  keys[i], i == 1 ? " or null" : "");
			break;
		}
		*dst[i] = json_is_true(v);
		rc |= i == 0;
	}
	json_decref(j);
	return rc;
}

/* Rule 4: the first token (special tokens "[...]" apart) with a letter
 * A-Z, or NULL. */
static const char *upper_token(const struct wp_vocab *v, size_t *n)
{
	for (uint32_t id = 0; id < v->n; id++) {
		const char *t = v->bytes + v->off[id];
		size_t len = v->off[id + 1] - v->off[id];
		if (len > 2 && t[0] == '[' && t[len - 1] == ']')
			continue;
		for (size_t i = 0; i < len; i++)
			if (t[i] >= 'A' && t[i] <= 'Z') {
				*n = len;
				return t;
			}
	}
	return NULL;
}

/* The two refusals loom_wordpiece_casing_hint answers. */
#define SAY_CASING "say whether it lower-cases"
#define NO_CASING "no casing can be given with it"

const char *loom_wordpiece_casing_hint(const struct loom_err *err)
{
	if (err->code != LOOM_EINVAL)
		return "";
	return strstr(err->msg, SAY_CASING) ? " (--lowercase or --cased)" :
	       strstr(err->msg, NO_CASING) ? " (drop --lowercase/--cased)" : "";
}

/* The casing of a vocab.txt at path (rules 2-4) into v. */
static int decide_casing(struct wp_vocab *v, const char *path, enum loom_casing casing,
			 struct loom_err *err)
{
	static char rule_cfg[] = "tokenizer_config.json's do_lower_case";
	struct loom_wordpiece_opts *o = &v->opts;
	if (casing == LOOM_CASING_LOWER || casing == LOOM_CASING_CASED) {
		o->lowercase = casing == LOOM_CASING_LOWER;
		v->casing_rule = "given";
	} else if (casing == LOOM_CASING_NONE) {
		v->casing_rule = "not used";
	} else {
		char cfg[4096];
		const char *slash = strrchr(path, '/');
		int dl = slash ? (int)(slash - path) + 1 : 0;
		if (snprintf(cfg, sizeof cfg, "%.*stokenizer_config.json", dl, path) >=
		    (int)sizeof cfg)
			return loom_err_set(err, LOOM_ERANGE, "%s: path too long", path);
		int rc = loom_wordpiece_read_config(cfg, o, err);
		if (rc < 0)
			return rc;
		if (rc) {
			v->casing_rule = rule_cfg;
		} else {
			const char *name = slash ? slash + 1 : path, *base = name;
			size_t n = 0;
			const char *up = upper_token(v, &n);
			/* the name of the file or of its directory */
			if (!strcmp(name, "vocab.txt") && dl > 1) {
				for (base = path + dl - 1; base > path && base[-1] != '/'; base--)
					;
			}
			int says_unc = strstr(base, "uncased") != NULL;
			int says_cased = !says_unc && strstr(base, "cased") != NULL;
			if (up && says_unc)
				return loom_err_set(err, LOOM_EINVAL,
						    "%s: its name says uncased, but it has upper-case "
						    "tokens ('%.*s'): " SAY_CASING,
						    path, (int)(n > 40 ? 40 : n), up);
			if (!up && says_cased)
				return loom_err_set(err, LOOM_EINVAL,
						    "%s: its name says cased, but none of its tokens "
						    "has an upper-case letter: " SAY_CASING,
						    path);
			o->lowercase = !up;
			v->casing_rule = up ? "its tokens (upper-case ones)" :
				"its tokens (no upper-case ones)";
		}
	}
	v->strip = o->strip_accents < 0 ? o->lowercase : o->strip_accents;
	set_ascii(v);
	return 0;
}

struct loom_wordpiece *loom_wordpiece_open(const char *spec, enum loom_casing casing,
					   struct loom_err *err)
{
	char path[4096];
	struct stat st;
	size_t sl = strlen(spec);
	int json = sl > 5 && !strcmp(spec + sl - 5, ".json") && stat(spec, &st) == 0 &&
		   S_ISREG(st.st_mode);
	if (json && (casing == LOOM_CASING_LOWER || casing == LOOM_CASING_CASED)) {
		loom_err_set(err, LOOM_EINVAL, "%s: the normalizer of a tokenizer.json says "
			     "whether it lower-cases; " NO_CASING, spec);
		return NULL;
	}
	int rc = loom_wordpiece_vocab_path(spec, path, sizeof path);
	if (rc == 0 && !json && stat(spec, &st) == 0 && S_ISDIR(st.st_mode))
		rc = (size_t)snprintf(path, sizeof path, "%s/vocab.txt", spec) < sizeof path ?
			0 : LOOM_EINVAL;
	if (rc < 0) {
		if (strcmp(spec, "bert-base-uncased"))
			loom_err_set(err, LOOM_ERANGE, "%.60s...: path too long", spec);
		else
			loom_err_set(err, LOOM_EIO, "%s: share/vocab/bert-base-uncased/vocab.txt "
				     "is not installed (set LOOM_SHARE)", spec);
		return NULL;
	}
	struct loom_wordpiece *w = loom_wordpiece_new();
	if (!w) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	struct loom_wordpiece_opts o;
	loom_wordpiece_opts_default(&o);
	rc = json ? loom_wordpiece_load_hf(w, path) : loom_wordpiece_load(w, path, &o);
	if (rc == 0 && json)
		w->v->casing_rule = "tokenizer.json's normalizer";
	if (rc == 0 && !json && decide_casing(w->v, path, casing, &w->err) < 0)
		rc = w->err.code;
	if (rc == 0 && !(w->v->path = strdup(path)))
		rc = loom_err_set(&w->err, LOOM_ENOMEM, "out of memory");
	if (rc < 0) {
		*err = w->err;
		loom_wordpiece_free(w);
		return NULL;
	}
	return w;
}

const char *loom_wordpiece_path(const struct loom_wordpiece *w)
{
	return w->v && w->v->path ? w->v->path : "";
}

int loom_wordpiece_lowercases(const struct loom_wordpiece *w)
{
	return w->v && w->v->opts.lowercase;
}

const char *loom_wordpiece_casing_rule(const struct loom_wordpiece *w)
{
	return w->v && w->v->casing_rule ? w->v->casing_rule : "";
}

/* --- tokenizer.json ----------------------------------------------------- */

/* A string member that must be `want` when present. */
static int hf_want_str(struct loom_wordpiece *w, json_t *o, const char *where, const char *key,
		       const char *want, const char *name)
{
	json_t *m = json_object_get(o, key);
	if (!m || json_is_null(m) || (json_is_string(m) && !strcmp(json_string_value(m), want)))
		return 0;
	return loom_err_set(&w->err, LOOM_EFORMAT, "'%s': %s.%s %s%s%s is not supported (loom's is \"%s\")",
			    name, where, key, json_is_string(m) ? "\"" : "",
			    json_is_string(m) ? json_string_value(m) : "(not a string)",
			    json_is_string(m) ? "\"" : "", want);
}

static int hf_settings(struct loom_wordpiece *w, json_t *root, const char *name,
		       struct loom_wordpiece_opts *o)
{
	json_t *model = json_object_get(root, "model");
	if (!json_is_object(root) || !json_is_object(model))
		return loom_err_set(&w->err, LOOM_EFORMAT, "'%s': not a tokenizer.json with a model",
				    name);
	if (strcmp(loom_hf_type(root, "model"), "WordPiece"))
		return loom_err_set(&w->err, LOOM_EFORMAT, "'%s': model type %s, not WordPiece", name,
				    loom_hf_type(root, "model"));
	if (!json_is_object(json_object_get(model, "vocab")))
		return loom_err_set(&w->err, LOOM_EFORMAT, "'%s': model.vocab is not an object", name);
	int rc = loom_hf_no_cut(root, name, &w->err);
	if (rc)
		return rc;
	if ((rc = hf_want_str(w, model, "model", "unk_token", "[UNK]", name)) ||
	    (rc = hf_want_str(w, model, "model", "continuing_subword_prefix", PREFIX, name)))
		return rc;
	loom_wordpiece_opts_default(o);
	json_t *mx = json_object_get(model, "max_input_chars_per_word");
	if (mx && !json_is_null(mx)) {
		if (!json_is_integer(mx) || json_integer_value(mx) < 0 ||
		    json_integer_value(mx) > UINT32_MAX)
			return loom_err_set(&w->err, LOOM_EFORMAT,
					    "'%s': model.max_input_chars_per_word is not a count", name);
		o->max_chars = (uint32_t)json_integer_value(mx);
	}
	const char *nt = loom_hf_type(root, "normalizer");
	if (!strcmp(nt, "null")) {
		o->lowercase = o->strip_accents = o->clean_text = o->chinese_chars = 0;
	} else if (!strcmp(nt, "BertNormalizer")) {
		json_t *n = json_object_get(root, "normalizer");
		static const char *const keys[4] = { "clean_text", "handle_chinese_chars",
						     "strip_accents", "lowercase" };
		int *dst[4] = { &o->clean_text, &o->chinese_chars, &o->strip_accents, &o->lowercase };
		int dflt[4] = { 1, 1, -1, 1 };
		for (int k = 0; k < 4; k++)
			if ((*dst[k] = loom_hf_bool(n, keys[k], dflt[k])) == -2)
				return loom_err_set(&w->err, LOOM_EFORMAT,
						    "'%s': normalizer.%s is not true, false or null",
						    name, keys[k]);
	} else {
		return loom_err_set(&w->err, LOOM_EFORMAT,
				    "'%s': normalizer %s, not BertNormalizer (or none)", name, nt);
	}
	if (strcmp(loom_hf_type(root, "pre_tokenizer"), "BertPreTokenizer"))
		return loom_err_set(&w->err, LOOM_EFORMAT, "'%s': pre_tokenizer %s, not BertPreTokenizer",
				    name, loom_hf_type(root, "pre_tokenizer"));
	const char *dt = loom_hf_type(root, "decoder");
	if (strcmp(dt, "null")) {
		json_t *d = json_object_get(root, "decoder");
		if (strcmp(dt, "WordPiece"))
			return loom_err_set(&w->err, LOOM_EFORMAT, "'%s': decoder %s, not WordPiece",
					    name, dt);
		if ((rc = hf_want_str(w, d, "decoder", "prefix", PREFIX, name)))
			return rc;
		int cleanup = loom_hf_bool(d, "cleanup", 1);
		if (cleanup != 1)
			return loom_err_set(&w->err, LOOM_EFORMAT, cleanup == -2
					    ? "'%s': decoder.cleanup is not true, false or null"
					    : "'%s': decoder.cleanup false is not supported (loom's decoder cleans up)",
					    name);
	}
	return 0;
}

/* model.vocab as vocab.txt lines in id order (ids 0..n-1, each once). */
static int hf_lines(struct loom_wordpiece *w, json_t *vocab, const char *name, char **out,
		    size_t *len)
{
	size_t n = json_object_size(vocab), total = 0;
	if (!n)
		return loom_err_set(&w->err, LOOM_EFORMAT, "'%s': model.vocab is empty", name);
	if (n > MAX_IDS)
		return loom_err_set(&w->err, LOOM_EFORMAT, "'%s': %zu tokens; at most %u are supported",
				    name, n, MAX_IDS);
	const char **tok = calloc(n, sizeof *tok);
	size_t *tl = calloc(n, sizeof *tl);
	int rc = 0;
	if (!tok || !tl) {
		rc = loom_err_set(&w->err, LOOM_ENOMEM, "'%s': out of memory", name);
		goto done;
	}
	const char *key;
	json_t *val;
	json_object_foreach(vocab, key, val) {
		json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
		size_t kl = strlen(key);
		if (id < 0 || (size_t)id >= n) {
			rc = loom_err_set(&w->err, LOOM_EFORMAT,
					  "'%s': model.vocab \"%.60s\": id is not an integer in 0..%zu", name,
					  key, n - 1);
			goto done;
		}
		if (tok[id]) {
			rc = loom_err_set(&w->err, LOOM_EFORMAT,
					  "'%s': model.vocab: id %lld is both \"%.60s\" and \"%.60s\"", name,
					  (long long)id, tok[id], key);
			goto done;
		}
		if (memchr(key, '\n', kl) || trim_end((const uint8_t *)key, kl) != kl) {
			rc = loom_err_set(&w->err, LOOM_EFORMAT,
					  "'%s': model.vocab \"%.60s\" (id %lld) ends with or holds white space: not supported",
					  name, key, (long long)id);
			goto done;
		}
		tok[id] = key;
		tl[id] = kl;
		total += kl + 1;
	}
	char *b = malloc(total);
	if (!b) {
		rc = loom_err_set(&w->err, LOOM_ENOMEM, "'%s': out of memory", name);
		goto done;
	}
	size_t p = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(b + p, tok[i], tl[i]);
		p += tl[i];
		b[p++] = '\n';
	}
	*out = b;
	*len = p;
done:
	free(tok);
	free(tl);
	return rc;
}

int loom_wordpiece_load_hf_mem(struct loom_wordpiece *w, const char *buf, size_t len,
			       const char *name)
{
	json_error_t je;
	json_t *root = json_loadb(buf, len, 0, &je);
	if (!root)
		return loom_err_set(&w->err, LOOM_EFORMAT, "'%s':%d:%d: %s", name, je.line, je.column,
				    loom_json_reason(je.text));
	struct loom_wordpiece_opts o;
	char *lines = NULL;
	size_t n = 0;
	int rc = hf_settings(w, root, name, &o);
	json_t *vocab = json_object_get(json_object_get(root, "model"), "vocab");
	/* each added token must be its id's vocabulary entry */
	json_t *added = json_object_get(root, "added_tokens"), *a;
	size_t i;
	json_array_foreach(added, i, a) {
		if (rc)
			break;
		json_t *c = json_object_get(a, "content"), *id = json_object_get(a, "id");
		json_t *v = json_is_string(c) ? json_object_get(vocab, json_string_value(c)) : NULL;
		if (!v || !json_is_integer(id) || !json_is_integer(v) ||
		    json_integer_value(v) != json_integer_value(id))
			rc = loom_err_set(&w->err, LOOM_EFORMAT,
					  "'%s': added_tokens[%zu] \"%.60s\" is not model.vocab's entry of its id: not supported",
					  name, i, json_is_string(c) ? json_string_value(c) : "?");
	}
	if (!rc)
		rc = hf_lines(w, vocab, name, &lines, &n);
	if (!rc)
		rc = loom_wordpiece_load_mem(w, lines, n, name, &o);
	free(lines);
	json_decref(root);
	return rc;
}

int loom_wordpiece_load_hf(struct loom_wordpiece *w, const char *path)
{
	char *buf;
	size_t len;
	int rc = loom_file_read_input(path, LOOM_FILE_MAX_LIST, &buf, &len, &w->err);
	if (rc)
		return rc;
	rc = loom_wordpiece_load_hf_mem(w, buf, len, path);
	free(buf);
	return rc;
}

uint32_t loom_wordpiece_size(const struct loom_wordpiece *w)
{
	return w->v ? w->v->n : 0;
}

uint32_t loom_wordpiece_id(const struct loom_wordpiece *w, const char *tok, size_t n)
{
	return w->v ? vocab_lookup(w->v, (const uint8_t *)tok, n) : LOOM_VOCAB_NONE;
}

const char *loom_wordpiece_token(const struct loom_wordpiece *w, uint32_t id, size_t *n)
{
	const struct wp_vocab *v = w->v;
	if (!v || id >= v->n)
		return NULL;
	*n = v->off[id + 1] - v->off[id];
	return v->bytes + v->off[id];
}

/* --- encoding ----------------------------------------------------------- */

static int word_room(struct loom_wordpiece *w, size_t bytes)
{
	if (w->wlen + bytes + PREFIX_LEN > w->wcap) {
		size_t cap = w->wcap ? w->wcap : 256;
		while (cap < w->wlen + bytes + PREFIX_LEN)
			cap *= 2;
		uint8_t *p = realloc(w->word, cap);
		if (!p)
			return LOOM_ENOMEM;
		w->word = p;
		w->wcap = cap;
	}
	if (w->nch + 2 > w->chcap) { /* one spare slot for word_flush */
		size_t cap = w->chcap ? 2 * w->chcap : 64;
		uint32_t *a = realloc(w->cstart, cap * sizeof *a);
		if (!a)
			return LOOM_ENOMEM;
		w->cstart = a;
		uint64_t *b = realloc(w->ostart, cap * sizeof *b);
		if (!b)
			return LOOM_ENOMEM;
		w->ostart = b;
		uint64_t *c = realloc(w->oend, cap * sizeof *c);
		if (!c)
			return LOOM_ENOMEM;
		w->oend = c;
		w->chcap = cap;
	}
	return 0;
}

/* Append one normalized character (as UTF-8 bytes) to the word. */
static inline int word_add(struct loom_wordpiece *w, const uint8_t *b, size_t k,
			   uint64_t os, uint64_t oe)
{
	if (w->wlen + k + PREFIX_LEN > w->wcap || w->nch + 2 > w->chcap) {
		int rc = word_room(w, k);
		if (rc)
			return rc;
	}
	if (w->spans) {
		w->ostart[w->nch] = os;
		w->oend[w->nch] = oe;
	}
	w->cstart[w->nch++] = (uint32_t)w->wlen;
	memcpy(w->word + PREFIX_LEN + w->wlen, b, k);
	w->wlen += k;
	return 0;
}

/* The word's tokens: greedy longest match first, [UNK] for a word too long
 * or with a part not in the vocabulary. */
static int word_flush(struct loom_wordpiece *w, struct loom_ids *out, struct loom_offsets *offs)
{
	if (!w->nch)
		return 0;
	const struct wp_vocab *v = w->v;
	size_t n0 = out->n, nch = w->nch, len = w->wlen;
	uint8_t *word = w->word + PREFIX_LEN;
	int rc = 0;
	w->cstart[nch] = (uint32_t)len; /* word_room keeps one spare slot */
	if (nch > v->opts.max_chars)
		goto unk;
	size_t c = 0; /* first character of the part */
	while (c < nch) {
		size_t start = w->cstart[c], pre = c ? PREFIX_LEN : 0;
		size_t room = v->max_len > pre ? v->max_len - pre : 0;
		/* the last character whose end is within room */
		size_t e = nch;
		while (e > c && w->cstart[e] - start > room)
			e--;
		uint32_t id = LOOM_VOCAB_NONE;
		for (; e > c; e--) {
			size_t end = w->cstart[e];
			if (c) {
				word[start - 2] = '#';
				word[start - 1] = '#';
				id = vocab_lookup(v, word + start - 2, end - start + 2);
			} else {
				id = vocab_lookup(v, word, end);
			}
			if (id != LOOM_VOCAB_NONE)
				break;
		}
		if (id == LOOM_VOCAB_NONE)
			goto unk;
		if ((rc = loom_ids_reserve(out, 1)))
			return rc;
		out->v[out->n++] = id;
		if (offs && (rc = offsets_push(offs, w->ostart[c], w->oend[e - 1])))
			return rc;
		c = e;
	}
	w->nch = w->wlen = 0;
	return 0;
unk:
	if (offs)
		offs->n -= out->n - n0;
	out->n = n0;
	if ((rc = loom_ids_reserve(out, 1)))
		return rc;
	out->v[out->n++] = v->unk;
	if (offs && (rc = offsets_push(offs, w->ostart[0], w->oend[nch - 1])))
		return rc;
	w->nch = w->wlen = 0;
	return 0;
}

/* Pre-tokenize one normalized character (f: its flags). */
static int emit(struct loom_wordpiece *w, uint32_t cp, unsigned f, uint64_t os, uint64_t oe,
		struct loom_ids *out, struct loom_offsets *offs)
{
	uint8_t b[4];
	size_t k = loom_utf8_encode(b, cp);
	int rc;
	if (f & LOOM_WP_WS)
		return word_flush(w, out, offs);
	if (f & LOOM_WP_PUNCT) {
		if ((rc = word_flush(w, out, offs)) || (rc = word_add(w, b, k, os, oe)))
			return rc;
		return word_flush(w, out, offs);
	}
	return word_add(w, b, k, os, oe);
}

/* Lower-case one character (f: its flags) if enabled, then pre-tokenize.
 * The ASCII characters with a lower-case mapping are A-Z; every other one
 * flagged LOWER has its entry in loom_wp_lower (the generator's
 * guarantee). */
static int lower_emit(struct loom_wordpiece *w, uint32_t cp, unsigned f, uint64_t os,
		      uint64_t oe, struct loom_ids *out, struct loom_offsets *offs)
{
	if (!w->v->opts.lowercase || !(f & LOOM_WP_LOWER))
		return emit(w, cp, f, os, oe, out, offs);
	if (cp < 0x80) /* A-Z: a-z has the same (word) class */
		return emit(w, cp + 32, f, os, oe, out, offs);
	const struct loom_wp_map *m = loom_wp_map_find(loom_wp_lower, loom_wp_lower_n, cp);
	for (int i = 0; i < m->n; i++) {
		uint32_t l = loom_wp_lower_pool[m->off + i];
		int rc = emit(w, l, loom_wp_flags(l), os, oe, out, offs);
		if (rc)
			return rc;
	}
	return 0;
}

/* Normalize one input character at s[os..oe): clean-up, CJK, accents. */
static int normalize(struct loom_wordpiece *w, uint32_t cp, uint64_t os, uint64_t oe,
		     struct loom_ids *out, struct loom_offsets *offs)
{
	const struct wp_vocab *v = w->v;
	unsigned f = loom_wp_flags(cp);
	int rc;
	if (v->opts.clean_text) {
		if (cp == 0 || cp == 0xFFFD || (f & LOOM_WP_CTRL))
			return 0;
		if (f & LOOM_WP_WS)
			return word_flush(w, out, offs);
	}
	int cjk = v->opts.chinese_chars && (f & LOOM_WP_CJK);
	if (cjk && (rc = word_flush(w, out, offs)))
		return rc;
	if (v->strip && (f & LOOM_WP_STRIP)) {
		if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllable: L V (T) */
			uint32_t si = cp - 0xAC00, t = si % 28;
			uint32_t jamo[3] = { 0x1100 + si / 588, 0x1161 + si % 588 / 28, 0x11A7 + t };
			for (int j = 0; j < (t ? 3 : 2); j++)
				if ((rc = lower_emit(w, jamo[j], loom_wp_flags(jamo[j]), os, oe, out,
						     offs)))
					return rc;
		} else {
			const struct loom_wp_map *m = loom_wp_map_find(loom_wp_strip, loom_wp_strip_n, cp);
			for (int i = 0; i < m->n; i++) {
				uint32_t x = loom_wp_strip_pool[m->off + i];
				if ((rc = lower_emit(w, x, loom_wp_flags(x), os, oe, out, offs)))
					return rc;
			}
		}
	} else if ((rc = lower_emit(w, cp, f, os, oe, out, offs))) {
		return rc;
	}
	return cjk ? word_flush(w, out, offs) : 0;
}

int loom_wordpiece_encode(struct loom_wordpiece *w, const uint8_t *s, size_t n,
			  struct loom_ids *out, struct loom_offsets *offs, uint64_t base)
{
	const struct wp_vocab *v = w->v;
	if (!v)
		return loom_err_set(&w->err, LOOM_EINVAL, "no vocabulary loaded");
	w->nch = w->wlen = 0;
	w->spans = offs != NULL;
	int rc = 0;
	for (size_t i = 0; i < n && !rc;) {
		uint8_t c = s[i];
		if (c < 0x80) {
			switch (v->aclass[c]) {
			case C_WORD:
				rc = word_add(w, &v->amap[c], 1, base + i, base + i + 1);
				break;
			case C_SPACE:
				rc = word_flush(w, out, offs);
				break;
			case C_PUNCT:
				if (!(rc = word_flush(w, out, offs)) &&
				    !(rc = word_add(w, &v->amap[c], 1, base + i, base + i + 1)))
					rc = word_flush(w, out, offs);
				break;
			}
			i++;
			continue;
		}
		uint32_t cp;
		int valid;
		size_t k = loom_utf8_decode(s + i, n - i, &cp, &valid);
		rc = normalize(w, valid ? cp : 0xFFFD, base + i, base + i + k, out, offs);
		i += k;
	}
	if (!rc)
		rc = word_flush(w, out, offs);
	if (rc)
		return loom_err_set(&w->err, rc, "out of memory");
	return 0;
}

size_t loom_wordpiece_safe_cut(const uint8_t *s, size_t n, size_t window)
{
	size_t lo = n > window ? n - window : 0;
	for (size_t i = n; i > lo; i--)
		if (s[i - 1] == ' ' || s[i - 1] == '\t' || s[i - 1] == '\r' || s[i - 1] == '\n')
			return i;
	return 0;
}

/* --- decoding ----------------------------------------------------------- */

/* HuggingFace's cleanup of one decoded token (" ." -> "." ...), in its
 * order; `t` has room for the result (it only shrinks). */
static size_t cleanup_token(char *t, size_t n)
{
	static const char *const from[] = { " .", " ?", " !", " ,", " ' ", " n't", " 'm",
					    " do not", " 's", " 've", " 're" };
	static const char *const to[] = { ".", "?", "!", ",", "'", "n't", "'m",
					  " don't", "'s", "'ve", "'re" };
	for (size_t r = 0; r < sizeof from / sizeof from[0]; r++) {
		size_t fl = strlen(from[r]), tl = strlen(to[r]), o = 0;
		if (n < fl)
			continue;
		for (size_t i = 0; i < n;) {
			if (i + fl <= n && !memcmp(t + i, from[r], fl)) {
				memmove(t + o, to[r], tl);
				o += tl;
				i += fl;
			} else {
				t[o++] = t[i++];
			}
		}
		n = o;
	}
	return n;
}

void loom_wordpiece_decode_reset(struct loom_wordpiece *w)
{
	w->emitted = 0;
}

int loom_wordpiece_decode(struct loom_wordpiece *w, const uint32_t *ids, size_t n,
			  uint64_t first, int skip_special, int cleanup,
			  uint8_t **buf, size_t *len, size_t *cap)
{
	const struct wp_vocab *v = w->v;
	if (!v)
		return loom_err_set(&w->err, LOOM_EINVAL, "no vocabulary loaded");
	for (size_t i = 0; i < n; i++) {
		uint32_t id = ids[i];
		if (id >= v->n)
			return loom_err_set(&w->err, LOOM_ERANGE,
					    "token %llu: id %u is not in the vocabulary (%u tokens)",
					    (unsigned long long)(first + i), id, v->n);
		if (skip_special) {
			int sp = 0;
			for (int k = 0; k < 5; k++)
				sp |= v->special[k] == id;
			if (sp)
				continue;
		}
		const char *t = v->bytes + v->off[id];
		size_t tl = v->off[id + 1] - v->off[id];
		if (loom_buf_reserve(buf, *len, cap, tl + 1))
			return loom_err_set(&w->err, LOOM_ENOMEM, "out of memory");
		char *p = (char *)*buf + *len;
		size_t pl = 0;
		if (w->emitted && tl >= PREFIX_LEN && !memcmp(t, PREFIX, PREFIX_LEN)) {
			memcpy(p, t + PREFIX_LEN, tl - PREFIX_LEN);
			pl = tl - PREFIX_LEN;
		} else {
			if (w->emitted)
				p[pl++] = ' ';
			memcpy(p + pl, t, tl);
			pl += tl;
		}
		*len += cleanup ? cleanup_token(p, pl) : pl;
		w->emitted = 1;
	}
	return 0;
}

int loom_wordpiece_spec(const char *spec, struct loom_err *err)
{
	struct stat st;
	size_t sl = strlen(spec);
	if (!strcmp(spec, "bert-base-uncased"))
		return 1;
	if (strchr(spec, ','))
		return 0;
	if (sl > 4 && !strcmp(spec + sl - 4, ".txt"))
		return 1;
	if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) {
		char enc[4096], txt[4096];
		if (snprintf(enc, sizeof enc, "%s/encoder.json", spec) >= (int)sizeof enc ||
		    snprintf(txt, sizeof txt, "%s/vocab.txt", spec) >= (int)sizeof txt)
			return loom_err_set(err, LOOM_ERANGE, "'%.60s...': path too long", spec);
		return access(enc, F_OK) != 0 && access(txt, F_OK) == 0;
	}
	if (sl > 5 && !strcmp(spec + sl - 5, ".json") && stat(spec, &st) == 0 &&
	    S_ISREG(st.st_mode)) {
		char *buf;
		size_t len;
		int rc = loom_file_read_bounded(spec, LOOM_FILE_MAX_LIST, &buf, &len, err);
		if (rc)
			return rc;
		int wp = memmem(buf, len, "\"WordPiece\"", 11) != NULL;
		free(buf);
		return wp;
	}
	return 0;
}
