/* Unit tests for loom_pretok, loom_vocab and loom_bpe: GPT-2's own ids on
 * tests/data/tricky.json and the regression file, round trips, the long-
 * piece path against a naive GPT-2 bpe(), linear time, bad vocabularies. */
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "loom_bpe.h"
#include "loom_file.h"
#include "loom_pretok.h"
#include "loom_vocab.h"
#include "tap.h"

static void like(const char *got, const char *re, const char *name)
{
	regex_t r;
	int m = regcomp(&r, re, REG_EXTENDED | REG_NOSUB) == 0 && regexec(&r, got, 0, NULL, 0) == 0;
	regfree(&r);
	ok(m, "%s", name);
	if (!m)
		diag("'%s' does not match /%s/", got, re);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static struct loom_bpe *E;
static struct loom_vocab *V;

/* ids of s as a freshly allocated array */
static struct loom_ids enc(const void *s, size_t n, int special)
{
	struct loom_ids ids = { 0 };
	int rc = loom_bpe_encode(E, s, n, special, &ids);
	if (rc)
		diag("encode: %s", loom_bpe_error(E));
	return ids;
}

static int roundtrip(const void *s, size_t n)
{
	struct loom_ids ids = enc(s, n, 0);
	uint8_t *b = NULL;
	size_t len = 0, cap = 0;
	int rc = loom_bpe_decode(E, ids.v, ids.n, 0, &b, &len, &cap);
	int good = rc == 0 && len == n && (n == 0 || !memcmp(b, s, n));
	free(b);
	loom_ids_release(&ids);
	return good;
}

/* Pieces of s joined with '|'. */
static char *pieces(const char *s)
{
	static char out[1024];
	size_t n = strlen(s), p = 0, o = 0;
	while (p < n) {
		size_t k = loom_pretok_next((const uint8_t *)s + p, n - p);
		if (o)
			out[o++] = '|';
		memcpy(out + o, s + p, k);
		o += k;
		p += k;
	}
	out[o] = 0;
	return out;
}

/* GPT-2's bpe() as written in openai/gpt-2 encoder.py: merge every
 * occurrence of the lowest-ranked bigram, repeatedly.  Naive reference. */
static size_t naive_bpe(const uint8_t *s, size_t n, uint32_t *out)
{
	uint32_t *w = malloc(n * sizeof *w), *nw = malloc(n * sizeof *nw);
	size_t m = n;
	for (size_t i = 0; i < n; i++)
		w[i] = V->byte_id[s[i]];
	while (m > 1) {
		uint32_t best = LOOM_VOCAB_NONE, a = 0, b = 0, id, bid = 0;
		for (size_t i = 0; i + 1 < m; i++) {
			uint32_t r = loom_vocab_merge(V, w[i], w[i + 1], &id);
			if (r < best) {
				best = r;
				a = w[i];
				b = w[i + 1];
				bid = id;
			}
		}
		if (best == LOOM_VOCAB_NONE)
			break;
		size_t k = 0;
		for (size_t i = 0; i < m;) {
			if (i + 1 < m && w[i] == a && w[i + 1] == b) {
				nw[k++] = bid;
				i += 2;
			} else {
				nw[k++] = w[i++];
			}
		}
		memcpy(w, nw, k * sizeof *w);
		m = k;
	}
	memcpy(out, w, m * sizeof *w);
	free(w);
	free(nw);
	return m;
}

static void test_pretok(void)
{
	is_str(pieces("hello world"), "hello| world", "pieces: words");
	is_str(pieces("I'm don't 'S"), "I|'m| don|'t| '|S", "pieces: contractions, case-sensitive");
	is_str(pieces("a   b"), "a|  | b", "pieces: space run keeps the last space");
	is_str(pieces("a\n\nb"), "a|\n|\n|b", "pieces: newline run before a letter");
	is_str(pieces("x  "), "x|  ", "pieces: trailing spaces");
	is_str(pieces("12 345 3.14"), "12| 345| 3|.|14", "pieces: numbers");
	is_str(pieces("?!'s ''s"), "?!'|s| ''|s", "pieces: punctuation run eats the apostrophe");
	is_str(pieces(" \n "), " \n ", "pieces: white space run at the end is one piece");
	is_str(pieces(" \n x"), " \n| x", "pieces: space newline space letter");
	is_str(pieces("a \xc2\x85 b"), "a| \xc2\x85| b", "pieces: U+0085 is white space");
	is_str(pieces("a\xef\xbb\xbf" "b"), "a|\xef\xbb\xbf|b", "pieces: U+FEFF is not");
	is_str(pieces("日本語の文章。次"), "日本語の文章|。|次", "pieces: Japanese letters and punctuation");
	is_str(pieces("x\xff\xfey \xc3"), "x|\xff\xfe|y| \xc3", "pieces: invalid bytes are class O");
	ok(loom_uclass(0x3000) == LOOM_UC_S && loom_uclass(0x1c) == LOOM_UC_O &&
	   loom_uclass(0x0661) == LOOM_UC_N && loom_uclass(0x2160) == LOOM_UC_N &&
	   loom_uclass(0x1d518) == LOOM_UC_L && loom_uclass(0x10ffff) == LOOM_UC_O &&
	   loom_uclass(0x110000) == LOOM_UC_O && loom_uclass(0x30fc) == LOOM_UC_L,
	   "classes: U+3000 S, U+001C O, Arabic digit N, Roman numeral N, math fraktur L");
	/* safe cut: same pieces either way */
	const char *t = "The quick, brown fox's 12 jumps.\n\n  Over  日本。";
	size_t n = strlen(t), cuts = 0, good = 0;
	for (size_t w = 1; w < n; w++) {
		size_t p = loom_pretok_safe_cut((const uint8_t *)t, w, w);
		if (!p)
			continue;
		cuts++;
		char a[256], b[256];
		snprintf(a, sizeof a, "%s", pieces(t));
		char *x = strndup(t, p);
		snprintf(b, sizeof b, "%s|", pieces(x));
		snprintf(b + strlen(b), sizeof b - strlen(b), "%s", pieces(t + p));
		free(x);
		good += !strcmp(a, b);
	}
	ok(cuts > 10 && good == cuts, "safe cuts give the same pieces (%zu of %zu)", good, cuts);
}

static void test_tricky(void)
{
	json_error_t je;
	json_t *t = json_load_file("tests/data/tricky_expected.json", JSON_ALLOW_NUL, &je);
	json_t *s = json_load_file("tests/data/tricky.json", JSON_ALLOW_NUL, &je);
	ok(t && json_array_size(t) == 66 && s && json_array_size(s) == 66,
	   "tricky files load (66 strings)");
	if (!t || !s) {
		diag("%s", je.text);
		return;
	}
	size_t i, bad = 0;
	json_t *x;
	json_array_foreach(t, i, x) {
		json_t *str = json_object_get(x, "s"), *ids = json_object_get(x, "ids");
		const char *p = json_string_value(str);
		size_t n = json_string_length(str);
		if (strcmp(p, json_string_value(json_array_get(s, i))))
			bad++;
		struct loom_ids got = enc(p, n, 0);
		int same = got.n == json_array_size(ids);
		for (size_t k = 0; same && k < got.n; k++)
			same = got.v[k] == json_integer_value(json_array_get(ids, k));
		if (!same) {
			bad++;
			diag("tricky %zu differs: %.40s (%zu ids, want %zu)", i, p, got.n,
			     json_array_size(ids));
		}
		if (!roundtrip(p, n)) {
			bad++;
			diag("tricky %zu does not round-trip", i);
		}
		loom_ids_release(&got);
	}
	is_int(bad, 0, "every tricky string gives GPT-2's ids and round-trips");
	json_decref(t);
	json_decref(s);
}

/* tests/data/bpe-regress.txt: documents separated by "\n\x1e\n"
 * (tests/data/gen_bpe_regress.py; ids from npm tiktoken gpt2 by
 * tests/data/gen_bpe_regress_ids.js);
 * bpe-regress.ids: one line of ids per document. */
static void test_regress(void)
{
	char *txt, *ids;
	size_t nt, ni;
	struct loom_err err;
	if (loom_read_file("tests/data/bpe-regress.txt", &txt, &nt, &err) ||
	    loom_read_file("tests/data/bpe-regress.ids", &ids, &ni, &err)) {
		ok(0, "regression files: %s", err.msg);
		return;
	}
	size_t docs = 0, bad = 0, tokens = 0;
	char *p = txt, *end = txt + nt, *q = ids;
	while (p <= end) {
		char *sep = memmem(p, (size_t)(end - p), "\n\x1e\n", 3);
		size_t len = sep ? (size_t)(sep - p) : (size_t)(end - p);
		struct loom_ids got = enc(p, len, 0);
		char *nl = strchr(q, '\n');
		if (!nl) {
			bad++;
			loom_ids_release(&got);
			break;
		}
		*nl = 0;
		size_t k = 0;
		int same = 1;
		for (char *tok = strtok(q, " "); tok; tok = strtok(NULL, " "), k++)
			if (k >= got.n || got.v[k] != strtoul(tok, NULL, 10))
				same = 0;
		if (!same || k != got.n) {
			bad++;
			diag("regression document %zu differs (%zu ids, want %zu)", docs, got.n, k);
		}
		tokens += got.n;
		q = nl + 1;
		docs++;
		loom_ids_release(&got);
		if (!sep)
			break;
		p = sep + 3;
	}
	ok(docs >= 10 && bad == 0, "regression file: %zu documents, %zu tokens, %zu differ",
	   docs, tokens, bad);
	ok(roundtrip(txt, nt), "regression text round-trips");
	free(txt);
	free(ids);
}

static void test_long_pieces(void)
{
	/* The heap path (pieces > LOOM_BPE_SHORT bytes) against naive bpe(). */
	static const char *alpha[] = { "a", "b", "e", "r", "th", "in", "ing", "ab", "x",
				       "\xe3\x81\x82", "\xe6\x97\xa5" };
	srand(7);
	size_t bad = 0, tried = 0;
	uint8_t s[400];
	uint32_t want[400];
	for (int t = 0; t < 300; t++) {
		size_t n = 0, lim = 10 + (size_t)(rand() % 380);
		int nalpha = 3 + t % 9;
		while (n + 3 < lim) {
			const char *a = alpha[rand() % nalpha];
			size_t l = strlen(a);
			memcpy(s + n, a, l);
			n += l;
		}
		struct loom_ids got = { 0 };
		loom_bpe_encode_piece(E, s, n, &got);
		size_t m = naive_bpe(s, n, want);
		tried++;
		if (got.n != m || memcmp(got.v, want, m * sizeof *want))
			bad++;
		loom_ids_release(&got);
	}
	is_int(bad, 0, "%zu pieces of 10..400 bytes: heap/linear merge == naive GPT-2 bpe()", tried);
}

/* Merger steps (loom_bpe_stats) of encoding a run of n bytes c. */
static uint64_t steps_run(size_t n, int c)
{
	uint64_t p, w, h, s0, s1;
	uint8_t *s = malloc(n);
	memset(s, c, n);
	loom_bpe_stats(E, &p, &w, &h, &s0);
	struct loom_ids ids = enc(s, n, 0);
	loom_bpe_stats(E, &p, &w, &h, &s1);
	loom_ids_release(&ids);
	free(s);
	return s1 - s0;
}

static void test_linear(void)
{
	/* 1 MB and 2 MB runs of one letter (one piece) and of spaces: the
	 * merger's steps (each O(log n)) grow 2x, not 4x, and stay a few per
	 * byte (about 5); a count, so the check holds on any machine */
	for (int c = 'a'; c; c = c == 'a' ? ' ' : 0) {
		uint64_t a1 = steps_run(1 << 20, c), a2 = steps_run(2 << 20, c);
		ok(a1 > 0 && a1 <= 8u << 20 && a2 <= 2 * a1 + 64,
		   "runs of '%c': 1 MB %llu merger steps, 2 MB %llu (%.2fx)", c,
		   (unsigned long long)a1, (unsigned long long)a2, (double)a2 / a1);
	}
	struct loom_ids ids = enc("aaaa", 4, 0);
	ok(ids.n == 1 && ids.v[0] == 24794, "'aaaa' is one token");
	loom_ids_release(&ids);
}

static void test_bytes(void)
{
	uint8_t all[512];
	for (int i = 0; i < 512; i++)
		all[i] = (uint8_t)(i * 7 + (i >> 8));
	ok(roundtrip(all, sizeof all), "every byte value round-trips");
	ok(roundtrip("a\0b\0\0c", 6), "NUL bytes round-trip");
	ok(roundtrip("\xed\xa0\x80 \xc0\xaf \xf4\x90\x80\x80 \xe2\x82", 15),
	   "surrogates, overlongs, > U+10FFFF, truncated sequence round-trip");
	struct loom_ids ids = enc("", 0, 0);
	ok(ids.n == 0, "empty input gives no ids");
	loom_ids_release(&ids);
	ok(roundtrip("", 0), "empty round trip");

	const char *eot = "a<|endoftext|>b";
	ids = enc(eot, strlen(eot), 0);
	ok(ids.n > 3, "<|endoftext|> is plain text by default (%zu ids)", ids.n);
	loom_ids_release(&ids);
	ids = enc(eot, strlen(eot), 1);
	ok(ids.n == 3 && ids.v[1] == 50256, "with allow_special it is id 50256");
	loom_ids_release(&ids);

	uint32_t bad[] = { 31373, 995, 50257 };
	uint8_t *b = NULL;
	size_t len = 0, cap = 0;
	is_int(loom_bpe_decode(E, bad, 3, 10, &b, &len, &cap), LOOM_ERANGE, "decode of 50257 fails");
	is_str(loom_bpe_error(E), "id 50257 at position 12 is not in the vocabulary (50257 ids)",
	       "the message names the id and its position");
	free(b);
}

static int load2(struct loom_vocab *v, const char *enc_json, const char *merges)
{
	return loom_vocab_load_gpt2_mem(v, enc_json, strlen(enc_json), "enc.json", merges,
					strlen(merges), "vocab.bpe");
}

/* a tiny valid encoder.json: 256 bytes + "ab" + "abc" + <|endoftext|> */
static char *tiny_encoder(const char *extra)
{
	static char buf[16384];
	size_t o = 0;
	o += (size_t)sprintf(buf + o, "{");
	for (int b = 0; b < 256; b++) {
		char s[8];
		uint8_t c = (uint8_t)b;
		s[loom_gpt2_bytes_to_str(&c, 1, s)] = 0;
		if (s[0] == '"' || s[0] == '\\')
			o += (size_t)sprintf(buf + o, "\"\\%s\": %d, ", s, b);
		else
			o += (size_t)sprintf(buf + o, "\"%s\": %d, ", s, b);
	}
	o += (size_t)sprintf(buf + o, "\"ab\": 256, \"abc\": 257, \"<|endoftext|>\": 258%s}",
			     extra);
	return buf;
}

static void test_bad_vocab(void)
{
	struct loom_vocab *v = loom_vocab_new();
	char enc_ok[16384];
	snprintf(enc_ok, sizeof enc_ok, "%s", tiny_encoder(""));
	is_int(load2(v, enc_ok, "#version: 0.2\na b\nab c\n"), 0, "tiny vocabulary loads");
	ok(v->n_specials == 1 && v->eot == 258 && v->n_merges == 2, "one special, two merges");

	char trunc[16384];
	snprintf(trunc, sizeof trunc, "%s", enc_ok);
	trunc[strlen(trunc) - 30] = 0;
	is_int(load2(v, trunc, "a b\n"), LOOM_ETRUNC, "truncated encoder.json");
	like(loom_vocab_error(v), "^'enc.json': truncated JSON at line 1 column", "names the file");
	is_int(load2(v, "<html>nope</html>", "a b\n"), LOOM_EFORMAT, "not JSON");
	like(loom_vocab_error(v), "^'enc.json': not valid JSON at line 1", "message");
	is_int(load2(v, "[1,2]", "a b\n"), LOOM_EFORMAT, "JSON but not an object");
	is_int(load2(v, tiny_encoder(", \"xy\": 256"), "a b\n"), LOOM_EFORMAT, "duplicate id");
	is_str(loom_vocab_error(v), "'enc.json': entry \"xy\": duplicate id 256", "names the entry");
	is_int(load2(v, tiny_encoder(", \"xy\": -3"), "a b\n"), LOOM_EFORMAT, "negative id");
	like(loom_vocab_error(v), "entry \"xy\": value is not an id", "names the entry");
	is_int(load2(v, tiny_encoder(", \"ab\": 300"), "a b\n"), LOOM_EFORMAT, "duplicate key");
	is_int(load2(v, tiny_encoder(", \"a b\": 300"), "a b\n"), LOOM_EFORMAT,
	       "character outside the byte alphabet");
	like(loom_vocab_error(v), "entry \"a b\": character at offset 1 is not in", "message");
	is_int(load2(v, enc_ok, "#version: 0.2\na b\nab q\n"), LOOM_EFORMAT, "merge result missing");
	is_str(loom_vocab_error(v),
	       "'vocab.bpe' line 3: merge \"ab q\": the merged token is not in the vocabulary",
	       "names file, line and merge");
	is_int(load2(v, enc_ok, "#version: 0.2\na b\nabx c\n"), LOOM_EFORMAT, "merge part missing");
	is_str(loom_vocab_error(v),
	       "'vocab.bpe' line 3: merge \"abx c\": first part is not in the vocabulary",
	       "names the part");
	is_int(load2(v, enc_ok, "a b\nab c\nab c\n"), LOOM_EFORMAT, "duplicate merge");
	is_int(load2(v, enc_ok, "a b\nabc\n"), LOOM_EFORMAT, "merge line without a space");
	is_int(load2(v, enc_ok, "a b\nab c"), LOOM_ETRUNC, "vocab.bpe without final newline");
	is_str(loom_vocab_error(v), "'vocab.bpe': truncated: line 2 has no newline", "message");
	/* HF's ByteLevelBPETokenizer saves a vocab.json with only the bytes it
	 * saw (and loom-train stores such a tokenizer.json as one): it loads,
	 * and encoding a missing byte is the error */
	is_int(load2(v, "{\"a\": 0, \"b\": 1}", "\n"), 0, "missing byte tokens load");
	ok(v->n_missing_bytes == 254 && v->byte_id['a'] == 0 && v->byte_id[0] == LOOM_VOCAB_NONE,
	   "  254 bytes without a token");
	{
		struct loom_bpe *eb = loom_bpe_new(v);
		struct loom_ids ib = { 0 };
		is_int(loom_bpe_encode(eb, (const uint8_t *)"abc", 3, 0, &ib), LOOM_EFORMAT,
		       "  encoding a byte without a token fails");
		is_str(loom_bpe_error(eb), "byte 0x63 'c' at offset 2 has no token in the vocabulary",
		       "  naming the byte and its offset");
		loom_ids_release(&ib);
		loom_bpe_free(eb);
	}

	const char *tk = "YQ== 0\nYg== 1\n";
	is_int(loom_vocab_load_tiktoken_mem(v, tk, strlen(tk), "x.tiktoken"), LOOM_EFORMAT,
	       "tiktoken without all bytes");
	is_int(loom_vocab_load_tiktoken_mem(v, "Y!== 0\n", 7, "x.tiktoken"), LOOM_EFORMAT,
	       "tiktoken bad base64");
	is_str(loom_vocab_error(v), "'x.tiktoken' line 1: \"Y!==\": bad base64", "message");
	is_int(loom_vocab_load_tiktoken_mem(v, "YQ== 0\nYg== 0\n", 14, "x.tiktoken"),
	       LOOM_EFORMAT, "tiktoken duplicate rank");
	is_int(loom_vocab_load_tiktoken_mem(v, "YQ== x\n", 7, "x.tiktoken"), LOOM_EFORMAT,
	       "tiktoken bad rank");
	is_int(loom_vocab_load_tiktoken_mem(v, "YQ== 0", 6, "x.tiktoken"), LOOM_ETRUNC,
	       "tiktoken truncated");

	/* a tiktoken file made from GPT-2's ranks encodes like GPT-2 */
	char *tkf = malloc(2u << 20);
	size_t o = 0;
	for (uint32_t id = 0; id < 50256; id++) {
		size_t tl;
		const uint8_t *t = loom_vocab_token(V, id, &tl);
		static const char *b64 =
			"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
		for (size_t i = 0; i < tl; i += 3) {
			uint32_t x = (uint32_t)t[i] << 16 | (i + 1 < tl ? t[i + 1] << 8 : 0) |
				     (i + 2 < tl ? t[i + 2] : 0);
			tkf[o++] = b64[x >> 18];
			tkf[o++] = b64[(x >> 12) & 63];
			tkf[o++] = i + 1 < tl ? b64[(x >> 6) & 63] : '=';
			tkf[o++] = i + 2 < tl ? b64[x & 63] : '=';
		}
		o += (size_t)sprintf(tkf + o, " %u\n", id);
	}
	is_int(loom_vocab_load_tiktoken_mem(v, tkf, o, "gpt2.tiktoken"), 0,
	       "GPT-2 ranks as a .tiktoken file load");
	free(tkf);
	ok(v->eot == 50256 && v->n_ids == 50257, "<|endoftext|> added as 50256");
	struct loom_bpe *e2 = loom_bpe_new(v);
	const char *txt = "Hello world, it's 2024: tokenizers\n\n  are  fun! 日本語のテキスト";
	struct loom_ids a = enc(txt, strlen(txt), 0), b = { 0 };
	loom_bpe_encode(e2, (const uint8_t *)txt, strlen(txt), 0, &b);
	ok(a.n == b.n && !memcmp(a.v, b.v, a.n * 4), "tiktoken rule gives the same ids (%zu)", a.n);
	loom_ids_release(&a);
	loom_ids_release(&b);
	loom_bpe_free(e2);
	loom_vocab_free(v);
}

int main(void)
{
	V = loom_vocab_new();
	double t0 = now();
	int rc = loom_vocab_load_gpt2(V, "share/vocab/gpt2/encoder.json",
				      "share/vocab/gpt2/vocab.bpe");
	double t = now() - t0;
	if (rc) {
		ok(0, "load gpt2: %s", loom_vocab_error(V));
		return done_testing();
	}
	ok(V->n_ids == 50257 && V->n_merges == 50000 && V->eot == 50256 && V->n_specials == 1,
	   "GPT-2 vocabulary: 50257 ids, 50000 merges, <|endoftext|> = 50256");
	diag("vocabulary load: %.1f ms", t * 1e3);
	E = loom_bpe_new(V);

	test_pretok();
	test_tricky();
	test_regress();
	test_long_pieces();
	test_bytes();
	test_linear();
	test_bad_vocab();

	loom_bpe_free(E);
	loom_vocab_free(V);
	return done_testing();
}
