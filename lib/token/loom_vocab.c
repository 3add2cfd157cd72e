/* loom_vocab.c - vocabulary loading and validation; see loom_vocab.h. */
#include "loom_vocab.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loom_file.h"
#include "loom_pretok.h"
#include "loom_utf8.h"

/* bytes_to_unicode(): printable bytes map to themselves, the other 68 to
 * U+0100.. in increasing byte order. */
const uint16_t loom_gpt2_byte_to_unicode[256] = {
	256, 257, 258, 259, 260, 261, 262, 263, 264, 265, 266, 267, 268, 269, 270, 271,
	272, 273, 274, 275, 276, 277, 278, 279, 280, 281, 282, 283, 284, 285, 286, 287,
	288, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,
	48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63,
	64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79,
	80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95,
	96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111,
	112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 289,
	290, 291, 292, 293, 294, 295, 296, 297, 298, 299, 300, 301, 302, 303, 304, 305,
	306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 320, 321,
	322, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 323, 174, 175,
	176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191,
	192, 193, 194, 195, 196, 197, 198, 199, 200, 201, 202, 203, 204, 205, 206, 207,
	208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223,
	224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239,
	240, 241, 242, 243, 244, 245, 246, 247, 248, 249, 250, 251, 252, 253, 254, 255,
};

int loom_gpt2_unicode_to_byte(uint32_t cp)
{
	if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255))
		return (int)cp;
	if (cp < 256 || cp > 323)
		return -1;
	/* U+0100 + k is the k-th non-printable byte */
	static int16_t inv[68];
	static int ready;
	if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
		for (int b = 0; b < 256; b++)
			if (loom_gpt2_byte_to_unicode[b] >= 256)
				inv[loom_gpt2_byte_to_unicode[b] - 256] = (int16_t)b;
		__atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
	}
	return inv[cp - 256];
}

size_t loom_gpt2_bytes_to_str(const uint8_t *b, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t cp = loom_gpt2_byte_to_unicode[b[i]];
		o += loom_utf8_encode((uint8_t *)out + o, cp);
	}
	return o;
}

long loom_gpt2_str_to_bytes(const char *s, size_t n, uint8_t *out, size_t *bad)
{
	size_t i = 0, o = 0;
	while (i < n) {
		uint32_t cp;
		int valid, b;
		size_t l = loom_utf8_decode((const uint8_t *)s + i, n - i, &cp, &valid);
		if (!valid || (b = loom_gpt2_unicode_to_byte(cp)) < 0) {
			if (bad)
				*bad = i;
			return LOOM_EFORMAT;
		}
		out[o++] = (uint8_t)b;
		i += l;
	}
	return (long)o;
}

/* ---- hashing ---------------------------------------------------------- */

static uint64_t hash_bytes(const uint8_t *s, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, s, 8);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 29;
		s += 8;
		n -= 8;
	}
	if (n) {
		uint64_t w = 0;
		memcpy(&w, s, n);
		h = (h ^ w) * 0x94d049bb133111ebull;
	}
	h ^= h >> 31;
	h *= 0xd6e8feb86659fd93ull;
	return h ^ (h >> 32);
}

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t p = 1024;
	while (p < n)
		p <<= 1;
	return p;
}

uint32_t loom_vocab_lookup(const struct loom_vocab *v, const uint8_t *s, size_t n)
{
	if (!v->tok_slot)
		return LOOM_VOCAB_NONE;
	uint64_t hv = hash_bytes(s, n);
	uint32_t h = (uint32_t)hv & v->tok_mask, tag = (uint32_t)(hv >> 32);
	for (;;) {
		uint64_t e = v->tok_slot[h];
		if (!e)
			return LOOM_VOCAB_NONE;
		if ((uint32_t)(e >> 32) == tag) {
			uint32_t id = (uint32_t)e - 1;
			if (v->off[id + 1] - v->off[id] == n && !memcmp(v->bytes + v->off[id], s, n))
				return id;
		}
		h = (h + 1) & v->tok_mask;
	}
}

const uint8_t *loom_vocab_token(const struct loom_vocab *v, uint32_t id, size_t *len)
{
	if (id >= v->n_ids || !v->present[id])
		return NULL;
	*len = v->off[id + 1] - v->off[id];
	return v->bytes + v->off[id];
}

/* Insert id (its bytes already in place); returns the id already holding
 * those bytes, or LOOM_VOCAB_NONE after inserting. */
static uint32_t tok_insert(struct loom_vocab *v, uint32_t id)
{
	const uint8_t *s = v->bytes + v->off[id];
	size_t n = v->off[id + 1] - v->off[id];
	uint64_t hv = hash_bytes(s, n);
	uint32_t h = (uint32_t)hv & v->tok_mask, tag = (uint32_t)(hv >> 32);
	for (;;) {
		uint64_t e = v->tok_slot[h];
		if (!e) {
			v->tok_slot[h] = (uint64_t)tag << 32 | (id + 1);
			return LOOM_VOCAB_NONE;
		}
		uint32_t o = (uint32_t)e - 1;
		if ((uint32_t)(e >> 32) == tag && v->off[o + 1] - v->off[o] == n &&
		    !memcmp(v->bytes + v->off[o], s, n))
			return o;
		h = (h + 1) & v->tok_mask;
	}
}

/* 0 inserted, 1 the pair exists already. */
static int pair_insert(struct loom_vocab *v, uint32_t a, uint32_t b, uint32_t rank,
		       uint32_t id)
{
	uint64_t key = ((uint64_t)a << 32 | b) + 1;
	uint32_t h = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & v->pair_mask;
	for (;;) {
		struct loom_vocab_pair *p = &v->pair[h];
		if (p->key == key)
			return 1;
		if (!p->key) {
			p->key = key;
			p->rank = rank;
			p->id = id;
			return 0;
		}
		h = (h + 1) & v->pair_mask;
	}
}

/* ---- lifecycle --------------------------------------------------------- */

static void vocab_clear(struct loom_vocab *v)
{
	free(v->off);
	free(v->bytes);
	free(v->present);
	free(v->tok_slot);
	free(v->pair);
	free(v->specials);
	free(v->name);
	struct loom_err e = v->err;
	memset(v, 0, sizeof *v);
	v->err = e;
	v->eot = LOOM_VOCAB_NONE;
}

struct loom_vocab *loom_vocab_new(void)
{
	struct loom_vocab *v = calloc(1, sizeof *v);
	if (v)
		v->eot = LOOM_VOCAB_NONE;
	return v;
}

void loom_vocab_free(struct loom_vocab *v)
{
	if (!v)
		return;
	vocab_clear(v);
	free(v);
}

const char *loom_vocab_error(const struct loom_vocab *v)
{
	return v->err.msg;
}

/* Allocate the id tables for ids [0, n_ids) and `nbytes` token bytes. */
static int alloc_ids(struct loom_vocab *v, uint32_t n_ids, uint64_t nbytes, uint64_t n_pairs)
{
	v->n_ids = n_ids;
	v->off = calloc((size_t)n_ids + 1, sizeof *v->off);
	v->bytes = malloc(nbytes ? nbytes : 1);
	v->present = calloc(n_ids ? n_ids : 1, 1);
	v->tok_mask = pow2_at_least((uint64_t)n_ids * 2) - 1;
	v->tok_slot = calloc((size_t)v->tok_mask + 1, sizeof *v->tok_slot);
	v->pair_mask = pow2_at_least(n_pairs * 2 + 16) - 1;
	v->pair = calloc((size_t)v->pair_mask + 1, sizeof *v->pair);
	if (!v->off || !v->bytes || !v->present || !v->tok_slot || !v->pair)
		return loom_err_set(&v->err, LOOM_ENOMEM, "out of memory loading a vocabulary");
	return 0;
}

/* After tokens and merges: byte ids, specials, eot. */
static int finish(struct loom_vocab *v, const char *file, uint8_t *made, int allow_missing)
{
	for (int b = 0; b < 256; b++) {
		uint8_t c = (uint8_t)b;
		uint32_t id = loom_vocab_lookup(v, &c, 1);
		if (id == LOOM_VOCAB_NONE && !allow_missing)
			return loom_err_set(&v->err, LOOM_EFORMAT,
					    "'%s': no token for byte 0x%02x", file, b);
		v->byte_id[b] = id;
		v->n_missing_bytes += id == LOOM_VOCAB_NONE;
	}
	uint32_t ns = 0;
	for (uint32_t i = 0; i < v->n_ids; i++)
		if (v->present[i] && !made[i] && v->off[i + 1] - v->off[i] > 1)
			ns++;
	v->specials = malloc((ns ? ns : 1) * sizeof *v->specials);
	if (!v->specials)
		return loom_err_set(&v->err, LOOM_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < v->n_ids; i++)
		if (v->present[i] && !made[i] && v->off[i + 1] - v->off[i] > 1) {
			v->present[i] = 2;
			v->specials[v->n_specials++] = i;
		}
	v->eot = loom_vocab_lookup(v, (const uint8_t *)"<|endoftext|>", 13);
	return 0;
}

/* ---- GPT-2 encoder.json + vocab.bpe ----------------------------------- */

/* encoder.json entries: key (decoded UTF-8, in `keys`) and id. */
struct entries {
	char *keys;
	size_t klen, kcap;
	uint64_t *koff;   /* n + 1 */
	uint32_t *id;
	uint8_t *raw;     /* NULL, or per entry 1: the key is the token's raw
	                     UTF-8 text (a HuggingFace added token) */
	size_t n, cap;
};

static int ent_add(struct entries *E, const char *k, size_t kl, uint32_t id)
{
	if (E->n + 1 >= E->cap) {
		size_t c = E->cap ? E->cap * 2 : 65536;
		uint64_t *o = realloc(E->koff, (c + 1) * sizeof *o);
		if (o)
			E->koff = o;
		uint32_t *i = realloc(E->id, c * sizeof *i);
		if (i)
			E->id = i;
		uint8_t *r = E->raw ? realloc(E->raw, c) : NULL;
		if (r)
			E->raw = r;
		if (!o || !i || (E->raw && !r))
			return LOOM_ENOMEM;
		E->cap = c;
	}
	if (E->kcap - E->klen < kl + 1) {
		size_t c = E->kcap ? E->kcap : 1 << 20;
		while (c - E->klen < kl + 1)
			c *= 2;
		char *p = realloc(E->keys, c);
		if (!p)
			return LOOM_ENOMEM;
		E->keys = p;
		E->kcap = c;
	}
	if (E->n == 0)
		E->koff[0] = 0;
	memcpy(E->keys + E->klen, k, kl);
	E->klen += kl;
	E->keys[E->klen++] = 0;
	if (E->raw)
		E->raw[E->n] = 0;
	E->id[E->n++] = id;
	E->koff[E->n] = E->klen;
	return 0;
}

static int hexv(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	     : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* ---- JSON scanning: the fast paths -------------------------------------
 * encoder.json and a tokenizer.json's model.vocab and model.merges are
 * read in one pass straight into the loader's own arrays (jansson takes
 * ~90 ms for GPT-2's 50k entries, most of it building its own hash table,
 * and a DOM of a 100 MB tokenizer.json takes 7x the file in memory).
 * Anything unusual (\u0000, a value that is not a plain id, malformed
 * JSON) returns -1: the caller then parses with jansson, which words the
 * errors. */

struct sbuf {
	char *p;
	size_t n, cap;
};

static int sb_room(struct sbuf *b, size_t extra)
{
	if (b->cap - b->n >= extra)
		return 0;
	size_t c = b->cap ? b->cap : 1 << 16;
	while (c - b->n < extra)
		c *= 2;
	char *p = realloc(b->p, c);
	if (!p)
		return LOOM_ENOMEM;
	b->p = p;
	b->cap = c;
	return 0;
}

static void js_ws(const char *s, size_t n, size_t *i)
{
	while (*i < n && (s[*i] == ' ' || s[*i] == '\n' || s[*i] == '\t' || s[*i] == '\r'))
		++*i;
}

/* The JSON string at s[*i], its text (UTF-8) appended to out; LOOM_EFORMAT
 * if it is malformed or holds \u0000, LOOM_ENOMEM. */
static int js_str(const char *s, size_t n, size_t *pi, struct sbuf *out)
{
	size_t i = *pi;
	if (i >= n || s[i++] != '"')
		return LOOM_EFORMAT;
	for (;;) {
		size_t st = i;
		while (i < n && s[i] != '"' && s[i] != '\\' && (unsigned char)s[i] >= 0x20)
			i++;
		if (sb_room(out, i - st + 4))
			return LOOM_ENOMEM;
		memcpy(out->p + out->n, s + st, i - st);
		out->n += i - st;
		if (i >= n || (unsigned char)s[i] < 0x20)
			return LOOM_EFORMAT;
		if (s[i++] == '"') {
			*pi = i;
			return 0;
		}
		if (i >= n)
			return LOOM_EFORMAT;
		char *o = out->p + out->n;
		switch (s[i++]) {
		case '"': *o = '"'; break;
		case '\\': *o = '\\'; break;
		case '/': *o = '/'; break;
		case 'b': *o = '\b'; break;
		case 'f': *o = '\f'; break;
		case 'n': *o = '\n'; break;
		case 'r': *o = '\r'; break;
		case 't': *o = '\t'; break;
		case 'u': {
			uint32_t cp = 0;
			for (int k = 0; k < 4; k++) {
				int h = i < n ? hexv((unsigned char)s[i++]) : -1;
				if (h < 0)
					return LOOM_EFORMAT;
				cp = cp << 4 | (uint32_t)h;
			}
			if (cp >= 0xd800 && cp < 0xdc00) {
				uint32_t lo = 0;
				if (i + 6 > n || s[i] != '\\' || s[i + 1] != 'u')
					return LOOM_EFORMAT;
				i += 2;
				for (int k = 0; k < 4; k++) {
					int h = hexv((unsigned char)s[i++]);
					if (h < 0)
						return LOOM_EFORMAT;
					lo = lo << 4 | (uint32_t)h;
				}
				if (lo < 0xdc00 || lo > 0xdfff)
					return LOOM_EFORMAT;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if ((cp >= 0xdc00 && cp < 0xe000) || cp == 0) {
				return LOOM_EFORMAT;
			}
			out->n += loom_utf8_encode((uint8_t *)o, cp);
			continue;
		}
		default:
			return LOOM_EFORMAT;
		}
		out->n++;
	}
}

/* The object at s[*i]: each member's key (its text, NUL-terminated) and
 * the position of its value go to member(), which reads the value and
 * moves *i past it. */
typedef int (*js_member_fn)(const char *key, size_t klen, const char *s, size_t n,
			    size_t *pi, void *ctx);

static int js_object(const char *s, size_t n, size_t *pi, js_member_fn member, void *ctx)
{
	struct sbuf key = { 0 };
	size_t i = *pi;
	int rc;
	if (i >= n || s[i++] != '{')
		return LOOM_EFORMAT;
	js_ws(s, n, &i);
	if (i < n && s[i] == '}') {
		*pi = i + 1;
		return 0;
	}
	for (;;) {
		key.n = 0;
		js_ws(s, n, &i);
		if ((rc = js_str(s, n, &i, &key)) || (rc = sb_room(&key, 1)))
			goto out;
		key.p[key.n] = 0;
		js_ws(s, n, &i);
		rc = LOOM_EFORMAT;
		if (i >= n || s[i++] != ':')
			goto out;
		js_ws(s, n, &i);
		if ((rc = member(key.p, key.n, s, n, &i, ctx)))
			goto out;
		js_ws(s, n, &i);
		rc = LOOM_EFORMAT;
		if (i >= n)
			goto out;
		if (s[i] == ',') {
			i++;
			continue;
		}
		if (s[i++] != '}')
			goto out;
		*pi = i;
		rc = 0;
		goto out;
	}
out:
	free(key.p);
	return rc;
}

/* A member "token": id of {"token": id, ...} into the entries ctx (ids:
 * plain integers in [0, LOOM_VOCAB_MAX_ID]). */
static int vocab_member(const char *key, size_t klen, const char *s, size_t n, size_t *pi,
			void *ctx)
{
	uint64_t v = 0;
	size_t i = *pi, st = i;
	while (i < n && s[i] >= '0' && s[i] <= '9' && i - st < 9)
		v = v * 10 + (uint64_t)(s[i++] - '0');
	if (i == st || (s[st] == '0' && i - st > 1) || v > LOOM_VOCAB_MAX_ID)
		return LOOM_EFORMAT;
	*pi = i;
	return ent_add(ctx, key, klen, (uint32_t)v);
}

/* encoder.json: the whole text is one {"token": id} object. */
static int fast_entries(const char *s, size_t n, struct entries *E)
{
	size_t i = 0;
	js_ws(s, n, &i);
	int rc = js_object(s, n, &i, vocab_member, E);
	if (rc)
		return rc;
	js_ws(s, n, &i);
	return i == n ? 0 : LOOM_EFORMAT;
}

/* jansson's error about text[0..len) as one line: truncated (the text
 * ends: "premature end of input", "... near end of file", an error at the
 * last byte) or not valid (also "end of file expected": text after it). */
static int json_fail(struct loom_vocab *v, const char *name, size_t len, const json_error_t *je)
{
	int trunc = strstr(je->text, "premature") || strstr(je->text, "near end of file") ||
		    ((size_t)je->position >= len && !strstr(je->text, "end of file expected"));
	return loom_err_set(&v->err, trunc ? LOOM_ETRUNC : LOOM_EFORMAT,
			    "'%s': %s JSON at line %d column %d: %s", name,
			    trunc ? "truncated" : "not valid", je->line, je->column, loom_json_reason(je->text));
}

static int json_entries(struct loom_vocab *v, const char *enc, size_t enc_len,
			const char *enc_name, struct entries *E)
{
	json_error_t je;
	const char *key;
	json_t *val, *root;
	int rc = 0;
	root = json_loadb(enc, enc_len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
	if (!root) {
		return json_fail(v, enc_name, enc_len, &je);
	}
	if (!json_is_object(root)) {
		rc = loom_err_set(&v->err, LOOM_EFORMAT,
				  "'%s': not a JSON object of token -> id", enc_name);
		goto out;
	}
	json_object_foreach(root, key, val) {
		if (!json_is_integer(val) || json_integer_value(val) < 0 ||
		    json_integer_value(val) > LOOM_VOCAB_MAX_ID) {
			rc = loom_err_set(&v->err, LOOM_EFORMAT,
					  "'%s': entry \"%.60s\": value is not an id in [0, %u]",
					  enc_name, key, LOOM_VOCAB_MAX_ID);
			goto out;
		}
		if (ent_add(E, key, strlen(key), (uint32_t)json_integer_value(val))) {
			rc = loom_err_set(&v->err, LOOM_ENOMEM, "out of memory");
			goto out;
		}
	}
out:
	json_decref(root);
	return rc;
}

/* Build the vocabulary from entries E (token -> id) and merge lines
 * ("A B\n" each, an optional "#..." first line).  Single-byte tokens may
 * be missing (HuggingFace's trainer keeps only the bytes it saw, in its
 * tokenizer.json and vocab.json alike).  With `hf`, merges are numbered as
 * entries of model.merges, not lines. */
static int build(struct loom_vocab *v, const struct entries *ents, const char *enc_name,
		 const char *merges, size_t merges_len, const char *merges_name, int hf)
{
	const struct entries E = *ents;
	uint64_t nbytes = 0;
	uint32_t max_id = 0;
	uint8_t *made = NULL;
	int rc = 0;
	if (E.n == 0) {
		rc = loom_err_set(&v->err, LOOM_EFORMAT, "'%s': empty vocabulary", enc_name);
		goto out;
	}
	for (size_t k = 0; k < E.n; k++) {
		if (E.id[k] > max_id)
			max_id = E.id[k];
		nbytes += E.koff[k + 1] - E.koff[k];
	}
	/* count merge lines for the pair table size */
	uint64_t nlines = 0;
	for (const char *p = merges; (p = memchr(p, '\n', (size_t)(merges + merges_len - p))); p++)
		nlines++;
	if ((rc = alloc_ids(v, max_id + 1, nbytes, nlines + 1)))
		goto out;
	made = calloc(v->n_ids, 1);
	if (!made) {
		rc = loom_err_set(&v->err, LOOM_ENOMEM, "out of memory");
		goto out;
	}
	/* token bytes: first pass sizes (ids may come in any order) */
	{
		uint64_t *len = calloc(v->n_ids, sizeof *len);
		if (!len) {
			rc = loom_err_set(&v->err, LOOM_ENOMEM, "out of memory");
			goto out;
		}
		for (size_t k = 0; k < E.n; k++) {
			uint32_t id = E.id[k];
			const char *key = E.keys + E.koff[k];
			if (v->present[id]) {
				free(len);
				rc = loom_err_set(&v->err, LOOM_EFORMAT,
						  "'%s': entry \"%.60s\": duplicate id %u", enc_name,
						  key, id);
				goto out;
			}
			v->present[id] = 1;
			len[id] = E.koff[k + 1] - E.koff[k] - 1; /* upper bound; fixed below */
		}
		uint64_t o = 0;
		for (uint32_t i = 0; i < v->n_ids; i++) {
			v->off[i] = o;
			o += len[i];
		}
		v->off[v->n_ids] = o;
		/* second pass: decode into place, then compact */
		for (size_t k = 0; k < E.n; k++) {
			uint32_t id = E.id[k];
			const char *key = E.keys + E.koff[k];
			size_t klen = E.koff[k + 1] - E.koff[k] - 1, bad = 0;
			long bl = E.raw && E.raw[k] ? -1
				  : loom_gpt2_str_to_bytes(key, klen, v->bytes + v->off[id], &bad);
			if (E.raw && E.raw[k] && klen) {
				memcpy(v->bytes + v->off[id], key, klen);
				bl = (long)klen;
				made[id] = 2; /* verbatim */
			} else if (bl < 0) {
				/* special tokens (<...>, [...]) may be printed verbatim */
				if (klen > 2 && ((key[0] == '<' && key[klen - 1] == '>') ||
						 (key[0] == '[' && key[klen - 1] == ']'))) {
					memcpy(v->bytes + v->off[id], key, klen);
					bl = (long)klen;
					made[id] = 2; /* verbatim */
				} else {
					free(len);
					rc = loom_err_set(&v->err, LOOM_EFORMAT,
							  "'%s': entry \"%.60s\": character at offset %zu is not in GPT-2's byte alphabet",
							  enc_name, key, bad);
					goto out;
				}
			} else if (bl == 0) {
				free(len);
				rc = loom_err_set(&v->err, LOOM_EFORMAT,
						  "'%s': entry \"\" (id %u): empty token", enc_name, id);
				goto out;
			}
			len[id] = (uint64_t)bl;
		}
		uint64_t w = 0;
		for (uint32_t i = 0; i < v->n_ids; i++) {
			uint64_t s = v->off[i];
			v->off[i] = w;
			memmove(v->bytes + w, v->bytes + s, len[i]);
			w += len[i];
		}
		v->off[v->n_ids] = w;
		free(len);
	}
	for (uint32_t i = 0; i < v->n_ids; i++) {
		if (!v->present[i])
			continue;
		v->n_tokens++;
		uint32_t o = tok_insert(v, i);
		if (o != LOOM_VOCAB_NONE) {
			char a[130];
			size_t la = v->off[i + 1] - v->off[i];
			la = la > 60 ? 60 : la;
			a[loom_gpt2_bytes_to_str(v->bytes + v->off[i], la, a)] = 0;
			rc = loom_err_set(&v->err, LOOM_EFORMAT,
					  "'%s': ids %u and %u are the same token \"%s\"", enc_name,
					  o, i, a);
			goto out;
		}
		made[i] = made[i] == 2 ? 0 : (v->off[i + 1] - v->off[i] == 1);
	}

	/* vocab.bpe */
	{
		size_t pos = 0;
		uint64_t line = 0;
		uint8_t *buf = malloc(merges_len + 1);
		if (!buf) {
			rc = loom_err_set(&v->err, LOOM_ENOMEM, "out of memory");
			goto out;
		}
		if (merges_len && merges[merges_len - 1] != '\n') {
			uint64_t nl = 1;
			for (size_t i = 0; i < merges_len; i++)
				nl += merges[i] == '\n';
			free(buf);
			rc = loom_err_set(&v->err, LOOM_ETRUNC,
					  "'%s': truncated: line %llu has no newline", merges_name,
					  (unsigned long long)nl);
			goto out;
		}
		while (pos < merges_len) {
			const char *ls = merges + pos;
			const char *le = memchr(ls, '\n', merges_len - pos);
			size_t ll = (size_t)(le - ls);
			pos += ll + 1;
			line++;
			if (ll && ls[ll - 1] == '\r')
				ll--;
			if (!hf && line == 1 && ll && ls[0] == '#')
				continue;
			if (ll == 0)
				continue;
			const char *sp = memchr(ls, ' ', ll);
			if (!sp || sp == ls || sp == ls + ll - 1 ||
			    memchr(sp + 1, ' ', (size_t)(ls + ll - sp - 1))) {
				free(buf);
				rc = loom_err_set(&v->err, LOOM_EFORMAT,
						  "'%s' %s%llu%s: \"%.*s\": not a merge \"A B\"",
						  merges_name, hf ? "model.merges[" : "line ",
						  (unsigned long long)line - hf, hf ? "]" : "",
						  (int)(ll > 80 ? 80 : ll), ls);
				goto out;
			}
			size_t l1 = (size_t)(sp - ls), l2 = ll - l1 - 1, bad;
			long b1 = loom_gpt2_str_to_bytes(ls, l1, buf, &bad);
			long b2 = b1 < 0 ? -1 : loom_gpt2_str_to_bytes(sp + 1, l2, buf + b1, &bad);
			uint32_t ia = b1 < 0 ? LOOM_VOCAB_NONE : loom_vocab_lookup(v, buf, (size_t)b1);
			uint32_t ib = b2 < 0 ? LOOM_VOCAB_NONE
					     : loom_vocab_lookup(v, buf + b1, (size_t)b2);
			const char *what = NULL;
			if (ia == LOOM_VOCAB_NONE)
				what = "first part is not in the vocabulary";
			else if (ib == LOOM_VOCAB_NONE)
				what = "second part is not in the vocabulary";
			uint32_t im = LOOM_VOCAB_NONE;
			if (!what) {
				im = loom_vocab_lookup(v, buf, (size_t)(b1 + b2));
				if (im == LOOM_VOCAB_NONE)
					what = "the merged token is not in the vocabulary";
			}
			if (!what && pair_insert(v, ia, ib, v->n_merges, im))
				what = "duplicate merge";
			if (what) {
				free(buf);
				rc = loom_err_set(&v->err, LOOM_EFORMAT,
						  "'%s' %s%llu%s: merge \"%.*s\": %s", merges_name,
						  hf ? "model.merges[" : "line ",
						  (unsigned long long)line - hf, hf ? "]" : "",
						  (int)(ll > 80 ? 80 : ll), ls, what);
				goto out;
			}
			made[im] = 1;
			v->n_merges++;
		}
		free(buf);
	}
	rc = finish(v, enc_name, made, 1);
out:
	free(made);
	return rc;
}

static void entries_free(struct entries *E)
{
	free(E->keys);
	free(E->koff);
	free(E->id);
	free(E->raw);
}

int loom_vocab_load_gpt2_mem(struct loom_vocab *v, const char *enc, size_t enc_len,
			     const char *enc_name, const char *merges, size_t merges_len,
			     const char *merges_name)
{
	struct entries E = { 0 };
	int rc = 0;

	vocab_clear(v);
	loom_err_clear(&v->err);
	if (fast_entries(enc, enc_len, &E)) {
		E.n = E.klen = 0;
		rc = json_entries(v, enc, enc_len, enc_name, &E);
	}
	if (!rc)
		rc = build(v, &E, enc_name, merges, merges_len, merges_name, 0);
	entries_free(&E);
	if (rc)
		vocab_clear(v);
	return rc;
}

int loom_vocab_load_gpt2(struct loom_vocab *v, const char *encoder_json,
			 const char *vocab_bpe)
{
	char *a = NULL, *b = NULL;
	size_t na, nb;
	int rc;
	if ((rc = loom_file_read_input(encoder_json, LOOM_FILE_MAX_LIST, &a, &na, &v->err)))
		return rc;
	if ((rc = loom_file_read_input(vocab_bpe, LOOM_FILE_MAX_LIST, &b, &nb, &v->err))) {
		free(a);
		return rc;
	}
	rc = loom_vocab_load_gpt2_mem(v, a, na, encoder_json, b, nb, vocab_bpe);
	free(a);
	free(b);
	return rc;
}

/* ---- tiktoken ---------------------------------------------------------- */

static int b64val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Decode base64 s[0..n) into out; returns length or LOOM_EFORMAT. */
static long b64dec(const char *s, size_t n, uint8_t *out)
{
	uint32_t acc = 0;
	int bits = 0;
	long o = 0;
	size_t pad = 0;
	while (n && s[n - 1] == '=' && pad < 2) {
		n--;
		pad++;
	}
	if ((n + pad) % 4 || n == 0)
		return LOOM_EFORMAT;
	for (size_t i = 0; i < n; i++) {
		int x = b64val((unsigned char)s[i]);
		if (x < 0)
			return LOOM_EFORMAT;
		acc = acc << 6 | (uint32_t)x;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	return o;
}

/* One line of a tiktoken file. */
struct tk_line {
	const char *ls;     /* the line */
	size_t ll, lineno;
	size_t b64len;      /* base64 = ls[0..b64len) */
	uint64_t rank;
	int ok;             /* 0: not "BASE64 RANK" (rank = ~0 if unparsable) */
};

/* The next non-empty line from *pos (the buffer ends with '\n'); 0 at the end. */
static int tk_next(const char *buf, size_t len, size_t *pos, size_t *lineno, struct tk_line *t)
{
	while (*pos < len) {
		const char *ls = buf + *pos, *le = memchr(ls, '\n', len - *pos);
		size_t ll = (size_t)(le - ls);
		*pos += ll + 1;
		++*lineno;
		if (ll == 0)
			continue;
		const char *sp = memchr(ls, ' ', ll);
		char num[24];
		size_t nl = sp ? (size_t)(ls + ll - sp - 1) : 0;
		t->ls = ls;
		t->ll = ll;
		t->lineno = *lineno;
		t->ok = 0;
		t->rank = UINT64_MAX;
		if (!sp || sp == ls || nl == 0 || nl >= sizeof num)
			return 1;
		t->b64len = (size_t)(sp - ls);
		memcpy(num, sp + 1, nl);
		num[nl] = 0;
		if (loom_parse_u64(num, 0, LOOM_VOCAB_MAX_ID - 1, &t->rank))
			return 1;
		t->ok = 1;
		return 1;
	}
	return 0;
}

int loom_vocab_load_tiktoken_mem(struct loom_vocab *v, const char *buf, size_t len,
				 const char *name)
{
	uint64_t nlines = 0, nbytes = 0;
	uint32_t max_rank = 0;
	uint8_t *made = NULL;
	uint64_t *tl = NULL;
	struct tk_line t;
	size_t pos, lineno;
	int rc = 0;
	vocab_clear(v);
	loom_err_clear(&v->err);
	if (len && buf[len - 1] != '\n') {
		uint64_t nl = 1;
		for (size_t i = 0; i < len; i++)
			nl += buf[i] == '\n';
		return loom_err_set(&v->err, LOOM_ETRUNC, "'%s': truncated: line %llu has no newline",
				    name, (unsigned long long)nl);
	}
	/* pass 1: syntax, sizes, max rank */
	for (pos = 0, lineno = 0; tk_next(buf, len, &pos, &lineno, &t);) {
		if (!t.ok && t.rank == UINT64_MAX && !memchr(t.ls, ' ', t.ll))
			return loom_err_set(&v->err, LOOM_EFORMAT,
					    "'%s' line %zu: \"%.*s\": not \"BASE64 RANK\"", name,
					    t.lineno, (int)(t.ll > 80 ? 80 : t.ll), t.ls);
		if (!t.ok)
			return loom_err_set(&v->err, LOOM_EFORMAT,
					    "'%s' line %zu: \"%.*s\": rank is not a number in [0, %u]",
					    name, t.lineno, (int)(t.ll > 80 ? 80 : t.ll), t.ls,
					    LOOM_VOCAB_MAX_ID - 1);
		if (t.rank > max_rank)
			max_rank = (uint32_t)t.rank;
		nbytes += t.b64len;
		nlines++;
	}
	if (!nlines)
		return loom_err_set(&v->err, LOOM_EFORMAT, "'%s': empty vocabulary", name);
	uint32_t n_ids = max_rank + 2; /* + <|endoftext|> */
	if ((rc = alloc_ids(v, n_ids, nbytes + 13, nbytes + nlines)))
		goto out;
	made = calloc(n_ids, 1);
	tl = calloc(n_ids, sizeof *tl);
	if (!made || !tl) {
		rc = loom_err_set(&v->err, LOOM_ENOMEM, "out of memory");
		goto out;
	}
	/* pass 2: token lengths per rank (decoded into a scratch area) */
	for (pos = 0, lineno = 0; tk_next(buf, len, &pos, &lineno, &t);) {
		long bl = b64dec(t.ls, t.b64len, v->bytes);
		if (bl <= 0) {
			rc = loom_err_set(&v->err, LOOM_EFORMAT, "'%s' line %zu: \"%.*s\": bad base64",
					  name, t.lineno, (int)(t.b64len > 80 ? 80 : t.b64len), t.ls);
			goto out;
		}
		if (v->present[t.rank]) {
			rc = loom_err_set(&v->err, LOOM_EFORMAT, "'%s' line %zu: duplicate rank %llu",
					  name, t.lineno, (unsigned long long)t.rank);
			goto out;
		}
		v->present[t.rank] = 1;
		tl[t.rank] = (uint64_t)bl;
	}
	tl[n_ids - 1] = 13;
	v->present[n_ids - 1] = 1;
	{
		uint64_t o = 0;
		for (uint32_t i = 0; i < n_ids; i++) {
			v->off[i] = o;
			o += tl[i];
		}
		v->off[n_ids] = o;
	}
	/* pass 3: the bytes in place */
	for (pos = 0, lineno = 0; tk_next(buf, len, &pos, &lineno, &t);)
		b64dec(t.ls, t.b64len, v->bytes + v->off[t.rank]);
	memcpy(v->bytes + v->off[n_ids - 1], "<|endoftext|>", 13);
	for (uint32_t i = 0; i < n_ids; i++) {
		if (!v->present[i])
			continue;
		v->n_tokens++;
		uint32_t o = tok_insert(v, i);
		if (o != LOOM_VOCAB_NONE) {
			if (i == n_ids - 1) /* the file has <|endoftext|> itself */
				continue;
			rc = loom_err_set(&v->err, LOOM_EFORMAT,
					  "'%s': ranks %u and %u are the same token", name, o, i);
			goto out;
		}
		if (v->off[i + 1] - v->off[i] == 1)
			made[i] = 1;
	}
	/* merges: every split of a token into two tokens */
	for (uint32_t i = 0; i + 1 < n_ids; i++) {
		if (!v->present[i])
			continue;
		const uint8_t *t = v->bytes + v->off[i];
		size_t n = v->off[i + 1] - v->off[i];
		for (size_t k = 1; k < n; k++) {
			uint32_t a = loom_vocab_lookup(v, t, k), b;
			if (a == LOOM_VOCAB_NONE || (b = loom_vocab_lookup(v, t + k, n - k)) == LOOM_VOCAB_NONE)
				continue;
			pair_insert(v, a, b, i, i);
			made[i] = 1;
			v->n_merges++;
		}
	}
	rc = finish(v, name, made, 0);
out:
	free(made);
	free(tl);
	if (rc)
		vocab_clear(v);
	return rc;
}

int loom_vocab_load_tiktoken(struct loom_vocab *v, const char *path)
{
	char *a = NULL;
	size_t n;
	int rc = loom_file_read_input(path, LOOM_FILE_MAX_LIST, &a, &n, &v->err);
	if (rc)
		return rc;
	rc = loom_vocab_load_tiktoken_mem(v, a, n, path);
	free(a);
	return rc;
}

/* ---- HuggingFace tokenizer.json ---------------------------------------- */

/* A tokenizer.json read: its small members as a jansson DOM (root; when
 * model.vocab and model.merges were scanned straight into E and m, they
 * stay in the DOM as an empty object and array), the vocabulary as
 * entries and the merges as the lines of a vocab.bpe. */
struct hf_doc {
	json_t *root;
	struct entries E;
	struct sbuf m;
};

static void hf_doc_free(struct hf_doc *d)
{
	json_decref(d->root);
	entries_free(&d->E);
	free(d->m.p);
	memset(d, 0, sizeof *d);
}

/* model.merges at s[*i], each "A B" or ["A", "B"] (no space in A or B),
 * as lines "A B\n" into m. */
static int js_merges(const char *s, size_t n, size_t *pi, struct sbuf *m)
{
	size_t i = *pi;
	int rc;
	if (i >= n || s[i++] != '[')
		return LOOM_EFORMAT;
	js_ws(s, n, &i);
	if (i < n && s[i] == ']') {
		*pi = i + 1;
		return 0;
	}
	for (;;) {
		size_t st = m->n;
		js_ws(s, n, &i);
		if (i < n && s[i] == '[') {
			i++;
			js_ws(s, n, &i);
			if ((rc = js_str(s, n, &i, m)))
				return rc;
			if (memchr(m->p + st, ' ', m->n - st))
				return LOOM_EFORMAT;
			js_ws(s, n, &i);
			if (i >= n || s[i++] != ',')
				return LOOM_EFORMAT;
			if (sb_room(m, 1))
				return LOOM_ENOMEM;
			m->p[m->n++] = ' ';
			size_t st2 = m->n;
			js_ws(s, n, &i);
			if ((rc = js_str(s, n, &i, m)))
				return rc;
			if (memchr(m->p + st2, ' ', m->n - st2))
				return LOOM_EFORMAT;
			js_ws(s, n, &i);
			if (i >= n || s[i++] != ']')
				return LOOM_EFORMAT;
		} else if ((rc = js_str(s, n, &i, m))) {
			return rc;
		}
		if (memchr(m->p + st, '\n', m->n - st))
			return LOOM_EFORMAT;
		if (sb_room(m, 1))
			return LOOM_ENOMEM;
		m->p[m->n++] = '\n';
		js_ws(s, n, &i);
		if (i >= n)
			return LOOM_EFORMAT;
		if (s[i] == ',') {
			i++;
			continue;
		}
		if (s[i++] != ']')
			return LOOM_EFORMAT;
		*pi = i;
		return 0;
	}
}

/* The end of the JSON value at s[i], found by a scan of brackets and
 * strings only (not validated); SIZE_MAX if the text ends inside it. */
static size_t js_end(const char *s, size_t n, size_t i)
{
	int depth = 0;
	while (i < n) {
		char c = s[i];
		if (c == '"') {
			for (i++; i < n && s[i] != '"'; i++)
				if (s[i] == '\\')
					i++;
			if (i >= n)
				return SIZE_MAX;
			i++;
		} else if (c == '{' || c == '[') {
			depth++;
			i++;
		} else if (c == '}' || c == ']') {
			if (!depth)
				return i;
			i++;
			if (!--depth)
				return i;
		} else if (!depth && (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r')) {
			return i;
		} else {
			i++;
		}
	}
	return depth ? SIZE_MAX : i;
}

/* The JSON value at s[*i] as a jansson value (jansson parses and checks
 * what js_end finds). */
static json_t *js_value(const char *s, size_t n, size_t *pi)
{
	size_t e = js_end(s, n, *pi);
	if (e == SIZE_MAX)
		return NULL;
	json_error_t je;
	json_t *j = json_loadb(s + *pi, e - *pi, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
	if (j)
		*pi = e;
	return j;
}

/* One level of a tokenizer.json being scanned: the root or its model. */
struct hf_level {
	json_t *obj;		/* the members read so far */
	struct hf_doc *d;
	int model;
};

/* A member of the root or of the model into the level's DOM object; the
 * model object is scanned the same way, and its "vocab" and "merges" go
 * to the doc's entries and merge lines. */
static int doc_member(const char *key, size_t klen, const char *s, size_t n, size_t *pi,
		      void *ctx)
{
	struct hf_level *L = ctx;
	char c = *pi < n ? s[*pi] : 0;
	json_t *val;
	(void)klen;
	if (json_object_get(L->obj, key)) /* a duplicate: jansson names it */
		return LOOM_EFORMAT;
	if (!L->model && c == '{' && !strcmp(key, "model")) {
		struct hf_level M = { json_object(), L->d, 1 };
		if (!M.obj || json_object_set_new(L->obj, key, M.obj))
			return LOOM_ENOMEM;
		return js_object(s, n, pi, doc_member, &M);
	}
	int rc = 0;
	if (L->model && c == '{' && !strcmp(key, "vocab"))
		return (rc = js_object(s, n, pi, vocab_member, &L->d->E)) ? rc :
		       json_object_set_new(L->obj, key, json_object()) ? LOOM_ENOMEM : 0;
	if (L->model && c == '[' && !strcmp(key, "merges"))
		return (rc = js_merges(s, n, pi, &L->d->m)) ? rc :
		       json_object_set_new(L->obj, key, json_array()) ? LOOM_ENOMEM : 0;
	if (!(val = js_value(s, n, pi)))
		return LOOM_EFORMAT;
	return json_object_set_new(L->obj, key, val) ? LOOM_ENOMEM : 0;
}

int loom_hf_bool(json_t *o, const char *key, int dflt)
{
	json_t *m = json_object_get(o, key);
	if (!m || json_is_null(m))
		return dflt;
	return json_is_boolean(m) ? json_is_true(m) : -2;
}

const char *loom_hf_type(json_t *root, const char *key)
{
	json_t *o = json_object_get(root, key);
	if (!o || json_is_null(o))
		return "null";
	json_t *t = json_object_get(o, "type");
	return json_is_string(t) ? json_string_value(t) : "?";
}

int loom_hf_no_cut(json_t *root, const char *name, struct loom_err *err)
{
	static const char *const cut[] = { "truncation", "padding" };
	for (int k = 0; k < 2; k++) {
		json_t *o = json_object_get(root, cut[k]);
		if (o && !json_is_null(o))
			return loom_err_set(err, LOOM_EFORMAT,
					    "'%s': %s is set: loom does not %s the ids (want \"%s\": null)",
					    name, cut[k], k ? "pad" : "truncate", cut[k]);
	}
	return 0;
}

/* What loom does not implement is refused, naming it, rather than
 * giving other ids than HuggingFace's. */
static int hf_check(struct loom_vocab *v, json_t *root, const char *name)
{
	json_t *model = json_object_get(root, "model");
	json_t *type = json_object_get(model, "type");
	const char *t = json_string_value(type);
	if (!json_is_object(root) || !json_is_object(model) ||
	    !json_is_object(json_object_get(model, "vocab")) ||
	    !json_is_array(json_object_get(model, "merges")))
		return loom_err_set(&v->err, LOOM_EFORMAT,
				    "'%s': not a tokenizer.json with model.vocab and model.merges", name);
	if (type && !t && !json_is_null(type))
		return loom_err_set(&v->err, LOOM_EFORMAT, "'%s': model.type is not a string", name);
	if (t && strcmp(t, "BPE"))
		return loom_err_set(&v->err, LOOM_EFORMAT, "'%s': model type %s, not BPE", name, t);
	/* only byte-level BPE as GPT-2 does it: anything that changes the text
	 * or the pieces first would give other ids */
	if (strcmp(loom_hf_type(root, "pre_tokenizer"), "ByteLevel"))
		return loom_err_set(&v->err, LOOM_EFORMAT,
				    "'%s': pre_tokenizer %s, not ByteLevel (only byte-level BPE is read)",
				    name, loom_hf_type(root, "pre_tokenizer"));
	if (strcmp(loom_hf_type(root, "decoder"), "ByteLevel") && strcmp(loom_hf_type(root, "decoder"), "null"))
		return loom_err_set(&v->err, LOOM_EFORMAT, "'%s': decoder %s, not ByteLevel", name,
				    loom_hf_type(root, "decoder"));
	if (strcmp(loom_hf_type(root, "normalizer"), "null"))
		return loom_err_set(&v->err, LOOM_EFORMAT,
				    "'%s': normalizer %s: loom reads byte-level BPE without a normalizer",
				    name, loom_hf_type(root, "normalizer"));
	json_t *pt = json_object_get(root, "pre_tokenizer");
	int aps = loom_hf_bool(pt, "add_prefix_space", 0), rx = loom_hf_bool(pt, "use_regex", 1);
	if (aps == -2 || rx == -2)
		return loom_err_set(&v->err, LOOM_EFORMAT,
				    "'%s': pre_tokenizer.%s is not true, false or null", name,
				    aps == -2 ? "add_prefix_space" : "use_regex");
	if (aps || !rx)
		return loom_err_set(&v->err, LOOM_EFORMAT,
				    "'%s': pre_tokenizer ByteLevel with %s: loom splits as GPT-2 (add_prefix_space false, use_regex true)",
				    name, !rx ? "use_regex false" : "add_prefix_space true");
	/* a ByteLevel post-processor only trims offsets; the others
	 * (TemplateProcessing, BertProcessing, ...) add tokens */
	if (strcmp(loom_hf_type(root, "post_processor"), "ByteLevel") &&
	    strcmp(loom_hf_type(root, "post_processor"), "null"))
		return loom_err_set(&v->err, LOOM_EFORMAT,
				    "'%s': post_processor %s adds tokens around the text, which loom does not (only a ByteLevel post-processor is read)",
				    name, loom_hf_type(root, "post_processor"));
	int rc = loom_hf_no_cut(root, name, &v->err);
	if (rc)
		return rc;
	static const char *const affix[] = { "continuing_subword_prefix", "end_of_word_suffix" };
	for (int k = 0; k < 2; k++) {
		json_t *af = json_object_get(model, affix[k]);
		const char *a = json_string_value(af);
		if (af && !a && !json_is_null(af))
			return loom_err_set(&v->err, LOOM_EFORMAT, "'%s': model.%s is not a string",
					    name, affix[k]);
		if (a && *a)
			return loom_err_set(&v->err, LOOM_EFORMAT, "'%s': model.%s \"%s\" is not supported",
					    name, affix[k], a);
	}
	json_t *dr = json_object_get(model, "dropout");
	if (dr && !json_is_null(dr) && !(json_is_number(dr) && json_number_value(dr) == 0))
		return loom_err_set(&v->err, LOOM_EFORMAT,
				    "'%s': model.dropout is set: BPE dropout is not supported (loom's merges are deterministic)",
				    name);
	int im = loom_hf_bool(model, "ignore_merges", 0);
	if (im == -2)
		return loom_err_set(&v->err, LOOM_EFORMAT,
				    "'%s': model.ignore_merges is not true, false or null", name);
	if (im)
		return loom_err_set(&v->err, LOOM_EFORMAT,
				    "'%s': model.ignore_merges true is not supported (loom applies the merges to every word)",
				    name);
	return 0;
}

/* The whole file as a jansson DOM: slower and larger, but it words every
 * JSON error; model.vocab and model.merges then go to d->E and d->m. */
static int hf_read_dom(struct loom_vocab *v, const char *buf, size_t len, const char *name,
		       struct hf_doc *d)
{
	json_error_t je;
	const char *key;
	json_t *val;
	int rc;
	d->root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!d->root) {
		return json_fail(v, name, len, &je);
	}
	if ((rc = hf_check(v, d->root, name)))
		return rc;
	json_t *model = json_object_get(d->root, "model");
	json_t *merges = json_object_get(model, "merges");
	json_object_foreach(json_object_get(model, "vocab"), key, val) {
		if (!json_is_integer(val) || json_integer_value(val) < 0 ||
		    json_integer_value(val) > LOOM_VOCAB_MAX_ID)
			return loom_err_set(&v->err, LOOM_EFORMAT,
					    "'%s': model.vocab entry \"%.60s\": value is not an id in [0, %u]",
					    name, key, LOOM_VOCAB_MAX_ID);
		if (ent_add(&d->E, key, strlen(key), (uint32_t)json_integer_value(val)))
			return loom_err_set(&v->err, LOOM_ENOMEM, "out of memory");
	}
	/* merges as the lines of a vocab.bpe */
	for (size_t i = 0; i < json_array_size(merges); i++) {
		json_t *m = json_array_get(merges, i);
		const char *a = NULL, *b = NULL;
		size_t la = 0, lb = 0;
		if (json_is_string(m)) {
			a = json_string_value(m);
			la = json_string_length(m);
		} else if (json_is_array(m) && json_array_size(m) == 2 &&
			   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1)) &&
			   !strchr(json_string_value(json_array_get(m, 0)), ' ') &&
			   !strchr(json_string_value(json_array_get(m, 1)), ' ')) {
			a = json_string_value(json_array_get(m, 0));
			b = json_string_value(json_array_get(m, 1));
			la = json_string_length(json_array_get(m, 0));
			lb = json_string_length(json_array_get(m, 1));
		}
		if (!a || memchr(a, '\n', la) || (b && memchr(b, '\n', lb)))
			return loom_err_set(&v->err, LOOM_EFORMAT,
					    "'%s': model.merges[%zu] is not \"A B\" or [\"A\", \"B\"]", name, i);
		if (sb_room(&d->m, la + lb + 2))
			return loom_err_set(&v->err, LOOM_ENOMEM, "out of memory");
		memcpy(d->m.p + d->m.n, a, la);
		d->m.n += la;
		if (b) {
			d->m.p[d->m.n++] = ' ';
			memcpy(d->m.p + d->m.n, b, lb);
			d->m.n += lb;
		}
		d->m.p[d->m.n++] = '\n';
	}
	return 0;
}

/* Read buf into d: one pass when the file is well-formed (the vocabulary
 * and merges straight into d, the rest a small DOM), else the DOM of the
 * whole file, which words the error. */
static int hf_read(struct loom_vocab *v, const char *buf, size_t len, const char *name,
		   struct hf_doc *d)
{
	size_t i = 0, start;
	js_ws(buf, len, &i);
	start = i;
	struct hf_level root = { d->root = json_object(), d, 0 };
	if (root.obj && !js_object(buf, len, &i, doc_member, &root)) {
		js_ws(buf, len, &i);
		if (i == len)
			return hf_check(v, d->root, name);
	}
	hf_doc_free(d);
	/* a file cut short (an interrupted download) is named without a DOM */
	if (js_end(buf, len, start) == SIZE_MAX) {
		size_t line = 1, col = 1;
		for (size_t k = 0; k < len; k++, col++)
			if (buf[k] == '\n') {
				line++;
				col = 0;
			}
		return loom_err_set(&v->err, LOOM_ETRUNC,
				    "'%s': truncated JSON at line %zu column %zu: the text ends inside an object, array or string",
				    name, line, col);
	}
	return hf_read_dom(v, buf, len, name, d);
}

/* Added tokens (their text itself, not byte-level printed) not already in
 * model.vocab under the same id join the vocabulary as special tokens;
 * then the tables. */
static int hf_build(struct loom_vocab *v, struct hf_doc *d, const char *name)
{
	struct entries *E = &d->E;
	json_t *added = json_object_get(d->root, "added_tokens");
	uint32_t *at = NULL, max_id = 0; /* id -> model.vocab entry + 1 */
	int rc = 0;
	if (added && !json_is_array(added))
		return loom_err_set(&v->err, LOOM_EFORMAT, "'%s': added_tokens is not an array", name);
	if (json_array_size(added)) {
		for (size_t k = 0; k < E->n; k++)
			max_id = E->id[k] > max_id ? E->id[k] : max_id;
		if (!(at = calloc((size_t)max_id + 1, sizeof *at)))
			return loom_err_set(&v->err, LOOM_ENOMEM, "out of memory");
		for (size_t k = E->n; k-- > 0;)
			at[E->id[k]] = (uint32_t)k + 1;
	}
	for (size_t i = 0; i < json_array_size(added); i++) {
		json_t *a = json_array_get(added, i), *id = json_object_get(a, "id");
		const char *c = json_string_value(json_object_get(a, "content"));
		if (!c || !*c || !json_is_integer(id) || json_integer_value(id) < 0 ||
		    json_integer_value(id) > LOOM_VOCAB_MAX_ID) {
			rc = loom_err_set(&v->err, LOOM_EFORMAT,
					  "'%s': added_tokens[%zu]: no \"content\" string and \"id\" in [0, %u]",
					  name, i, LOOM_VOCAB_MAX_ID);
			goto out;
		}
		/* HF matches these around the token, loom the text only */
		static const char *const strip[] = { "lstrip", "rstrip", "single_word" };
		for (int k = 0; k < 3; k++) {
			int b = loom_hf_bool(a, strip[k], 0);
			if (b == -2) {
				rc = loom_err_set(&v->err, LOOM_EFORMAT,
						  "'%s': added_tokens[%zu] \"%.60s\": %s is not true, false or null",
						  name, i, c, strip[k]);
				goto out;
			}
			if (b) {
				rc = loom_err_set(&v->err, LOOM_EFORMAT,
						  "'%s': added_tokens[%zu] \"%.60s\": %s true is not supported (loom matches an added token as its text only)",
						  name, i, c, strip[k]);
				goto out;
			}
		}
		uint32_t aid = (uint32_t)json_integer_value(id);
		if (aid <= max_id && at[aid] && !strcmp(E->keys + E->koff[at[aid] - 1], c))
			continue;
		if ((!E->raw && !(E->raw = calloc(E->cap ? E->cap : 1, 1))) ||
		    ent_add(E, c, strlen(c), aid)) {
			rc = loom_err_set(&v->err, LOOM_ENOMEM, "out of memory");
			goto out;
		}
		E->raw[E->n - 1] = 1;
	}
	rc = build(v, E, name, d->m.p ? d->m.p : "", d->m.n, name, 1);
out:
	free(at);
	return rc;
}

/* Load from buf; `owned` (the file's text, or NULL) is freed once read,
 * before the tables are built. */
static int hf_load(struct loom_vocab *v, const char *buf, size_t len, const char *name,
		   char *owned)
{
	struct hf_doc d = { 0 };
	vocab_clear(v);
	loom_err_clear(&v->err);
	int rc = hf_read(v, buf, len, name, &d);
	free(owned);
	if (!rc)
		rc = hf_build(v, &d, name);
	hf_doc_free(&d);
	if (rc)
		vocab_clear(v);
	return rc;
}

int loom_vocab_load_hf_mem(struct loom_vocab *v, const char *buf, size_t len, const char *name)
{
	return hf_load(v, buf, len, name, NULL);
}

int loom_vocab_load_hf(struct loom_vocab *v, const char *path)
{
	char *a = NULL;
	size_t n;
	int rc = loom_file_read_input(path, LOOM_FILE_MAX_LIST, &a, &n, &v->err);
	if (rc)
		return rc;
	return hf_load(v, a, n, path, a);
}

/* ---- --vocab ----------------------------------------------------------- */

int loom_vocab_load_spec(struct loom_vocab *v, const char *spec)
{
	char enc[4096], mer[4096];
	struct stat st;
	size_t sl = strlen(spec);
	int rc;
	const char *comma = strchr(spec, ',');

	if (!strcmp(spec, "gpt2")) {
		if (loom_share_path("vocab/gpt2/encoder.json", enc, sizeof enc) ||
		    loom_share_path("vocab/gpt2/vocab.bpe", mer, sizeof mer))
			return loom_err_set(&v->err, LOOM_EIO,
					    "vocabulary 'gpt2' not found in share/vocab/gpt2 (set LOOM_SHARE)");
	} else if (comma) {
		if ((size_t)(comma - spec) >= sizeof enc || strlen(comma + 1) >= sizeof mer)
			return loom_err_set(&v->err, LOOM_EINVAL, "vocabulary path too long");
		memcpy(enc, spec, (size_t)(comma - spec));
		enc[comma - spec] = 0;
		snprintf(mer, sizeof mer, "%s", comma + 1);
	} else if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (snprintf(enc, sizeof enc, "%s/encoder.json", spec) >= (int)sizeof enc ||
		    snprintf(mer, sizeof mer, "%s/vocab.bpe", spec) >= (int)sizeof mer)
			return loom_err_set(&v->err, LOOM_EINVAL, "vocabulary path too long");
	} else if (sl > 5 && !strcmp(spec + sl - 5, ".json") && stat(spec, &st) == 0 &&
		   S_ISREG(st.st_mode)) {
		rc = loom_vocab_load_hf(v, spec);
		goto named;
	} else if (sl > 9 && !strcmp(spec + sl - 9, ".tiktoken")) {
		rc = loom_vocab_load_tiktoken(v, spec);
		goto named;
	} else {
		if (stat(spec, &st) != 0)
			return loom_err_errno(&v->err, LOOM_EIO, errno, "cannot open vocabulary '%s'",
					      spec);
		return loom_err_set(&v->err, LOOM_EINVAL,
				    "'%s': not a vocabulary (want gpt2, a directory with encoder.json and vocab.bpe, ENCODER.json,VOCAB.bpe, a tokenizer.json or a .tiktoken file)",
				    spec);
	}
	rc = loom_vocab_load_gpt2(v, enc, mer);
named:
	if (!rc) {
		free(v->name);
		v->name = strdup(spec);
	}
	return rc;
}
