/* tests/wordpiece.c - loom_wordpiece: BERT's normalizer, pre-tokenizer,
 * greedy WordPiece, offsets, decoding and vocabulary validation, on a small
 * vocabulary written here.  The expected ids are what HuggingFace's
 * BertTokenizerFast gives for the same vocabulary and options (its rules,
 * worked by hand below; tests/bench/wordpiece.sh compares whole texts). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loom_wordpiece.h"
#include "tap.h"

/* line number = id */
static const char VOCAB[] =
	"[PAD]\n"     /* 0 */
	"[UNK]\n"     /* 1 */
	"[CLS]\n"     /* 2 */
	"[SEP]\n"     /* 3 */
	"[MASK]\n"    /* 4 */
	"un\n"        /* 5 */
	"##aff\n"     /* 6 */
	"##able\n"    /* 7 */
	"hello\n"     /* 8 */
	",\n"         /* 9 */
	"world\n"     /* 10 */
	"!\n"         /* 11 */
	"cafe\n"      /* 12 */
	"東\n"        /* 13 */
	"京\n"        /* 14 */
	"$\n"         /* 15 */
	"i\n"         /* 16 */
	"Hello\n"     /* 17 */
	"café\n"      /* 18 */
	"a\n"         /* 19 */
	"##a\n"       /* 20 */
	".\n"         /* 21 */
	"ᄒ\n"         /* 22: U+1112, Hangul choseong hieuh */
	"##ᅡ\n"       /* 23: U+1161 */
	"##ᆫ\n"       /* 24: U+11AB */
	"dup  \n"     /* 25: trailing spaces trimmed */
	"dup\n";      /* 26: the later line wins */

static struct loom_wordpiece *load(int lowercase)
{
	struct loom_wordpiece_opts o;
	loom_wordpiece_opts_default(&o);
	o.lowercase = lowercase;
	struct loom_wordpiece *w = loom_wordpiece_new();
	int rc = loom_wordpiece_load_mem(w, VOCAB, sizeof VOCAB - 1, "vocab.txt", &o);
	if (rc)
		diag("load: %s", loom_wordpiece_error(w));
	return w;
}

/* ids of text as "a b c" */
static const char *enc(struct loom_wordpiece *w, const char *text)
{
	static char buf[4096];
	struct loom_ids ids = { 0 };
	if (loom_wordpiece_encode(w, (const uint8_t *)text, strlen(text), &ids, NULL, 0))
		return loom_wordpiece_error(w);
	size_t p = 0;
	buf[0] = 0;
	for (size_t i = 0; i < ids.n && p < sizeof buf - 16; i++)
		p += (size_t)snprintf(buf + p, sizeof buf - p, i ? " %u" : "%u", ids.v[i]);
	loom_ids_release(&ids);
	return buf;
}

static void case_greedy(void)
{
	struct loom_wordpiece *w = load(1);
	is_str(enc(w, "unaffable"), "5 6 7", "greedy longest match with ## parts");
	is_str(enc(w, "Hello, WORLD!"), "8 9 10 11", "lower-cased, punctuation split");
	is_str(enc(w, "unaffablex"), "1", "a word with a part not in the vocabulary is one [UNK]");
	is_str(enc(w, "aaaa"), "19 20 20 20", "repeated ## parts");
	is_str(enc(w, "dup"), "26", "a token listed twice takes the later id (trailing space trimmed)");
	char longw[202];
	memset(longw, 'a', 101);
	longw[101] = 0;
	is_str(enc(w, longw), "1", "a word of 101 characters is [UNK]");
	longw[100] = 0;
	const char *r = enc(w, longw);
	ok(!strncmp(r, "19 20 20", 8) && strlen(r) == 2 + 99 * 3, "a word of 100 characters is encoded");
	is_str(enc(w, ""), "", "empty text: no ids");
	is_str(enc(w, " \t\n "), "", "white space only: no ids");
	loom_wordpiece_free(w);
}

static void case_normalizer(void)
{
	struct loom_wordpiece *w = load(1);
	is_str(enc(w, "Caf\xc3\xa9"), "12", "accent stripped when lower-casing (precomposed)");
	is_str(enc(w, "Cafe\xcc\x81"), "12", "combining acute (Mn) removed");
	is_str(enc(w, "\xc4\xb0"), "16", "U+0130 decomposes, loses its dot, lower-cases to i");
	is_str(enc(w, "\xe6\x9d\xb1\xe4\xba\xac"), "13 14", "CJK ideographs are words of their own");
	is_str(enc(w, "a\xe6\x9d\xb1" "a"), "19 13 19", "CJK splits the word around it");
	is_str(enc(w, "hel\x01lo\xe2\x80\x8b"), "8", "control and format characters removed (clean-up)");
	is_str(enc(w, "hello\xc2\xa0world\xe3\x80\x80!"), "8 10 11", "Unicode white space splits");
	is_str(enc(w, "$hello"), "15 8", "ASCII symbols are punctuation");
	is_str(enc(w, "hel\xfflo"), "8", "an invalid byte is U+FFFD, removed by clean-up");
	is_str(enc(w, "\xed\x95\x9c"), "22 23 24", "a Hangul syllable decomposes into its jamo");
	is_str(enc(w, "hello\xe3\x80\x82"), "8 1", "ideographic full stop is punctuation ([UNK] here)");
	loom_wordpiece_free(w);
	w = load(0);
	is_str(enc(w, "Hello"), "17", "cased: no lower-casing");
	is_str(enc(w, "caf\xc3\xa9"), "18", "cased: accents kept");
	is_str(enc(w, "hello"), "8", "cased: lower-case text still matches");
	loom_wordpiece_free(w);
}

static void case_offsets(void)
{
	struct loom_wordpiece *w = load(1);
	const char *text = "  Unaffable, Caf\xc3\xa9 \xc4\xb0 zzz";
	struct loom_ids ids = { 0 };
	struct loom_offsets o = { 0 };
	int rc = loom_wordpiece_encode(w, (const uint8_t *)text, strlen(text), &ids, &o, 100);
	is_int(rc, 0, "encode with offsets");
	is_int(ids.n, 7, "7 tokens");
	is_int(o.n, 7, "7 spans");
	static const unsigned want[7][2] = { { 2, 4 }, { 4, 7 }, { 7, 11 }, { 11, 12 },
					     { 13, 18 }, { 19, 21 }, { 22, 25 } };
	int good = o.n == 7;
	for (size_t i = 0; good && i < 7; i++)
		good = o.start[i] == 100 + want[i][0] && o.end[i] == 100 + want[i][1];
	ok(good, "spans: parts of a word, punctuation, a 2-byte accent, U+0130 whole, [UNK] whole word");
	for (size_t i = 0; i < o.n && !good; i++)
		diag("token %zu id %u: [%llu, %llu)", i, ids.v[i], (unsigned long long)o.start[i],
		     (unsigned long long)o.end[i]);
	loom_ids_release(&ids);
	loom_offsets_release(&o);
	loom_wordpiece_free(w);
}

static const char *dec(struct loom_wordpiece *w, const uint32_t *ids, size_t n, int skip)
{
	static char out[1024];
	uint8_t *b = NULL;
	size_t len = 0, cap = 0;
	loom_wordpiece_decode_reset(w);
	if (loom_wordpiece_decode(w, ids, n, 0, skip, 1, &b, &len, &cap)) {
		free(b);
		return loom_wordpiece_error(w);
	}
	snprintf(out, sizeof out, "%.*s", (int)len, b ? (char *)b : "");
	free(b);
	return out;
}

static void case_decode(void)
{
	struct loom_wordpiece *w = load(1);
	const uint32_t a[] = { 2, 5, 6, 7, 9, 8, 10, 11, 3 };
	is_str(dec(w, a, 9, 0), "[CLS] unaffable, hello world! [SEP]",
	       "decode glues ## parts and cleans up the space before , and !");
	is_str(dec(w, a, 9, 1), "unaffable, hello world!", "skip_special drops [CLS] [SEP]");
	const uint32_t b[] = { 6, 21 };
	is_str(dec(w, b, 2, 0), "##aff.", "a first token keeps its ## (as HuggingFace)");
	{ /* calls continue one text; a reset starts another */
		uint8_t *tb = NULL;
		size_t tl = 0, tc = 0;
		loom_wordpiece_decode_reset(w);
		int rc = loom_wordpiece_decode(w, a + 1, 1, 0, 0, 1, &tb, &tl, &tc) ||
			 loom_wordpiece_decode(w, a + 5, 1, 1, 0, 1, &tb, &tl, &tc) ||
			 loom_wordpiece_decode(w, a + 2, 1, 2, 0, 1, &tb, &tl, &tc);
		loom_wordpiece_decode_reset(w);
		rc = rc || loom_wordpiece_decode(w, a + 6, 1, 0, 0, 1, &tb, &tl, &tc);
		char got[64];
		snprintf(got, sizeof got, "%d %.*s", rc, (int)tl, tb ? (char *)tb : "");
		is_str(got, "0 un helloaffworld",
		       "successive calls join with a space, ## glues, a reset starts anew");
		free(tb);
	}
	const uint32_t bad[] = { 8, 27 };
	ok(strstr(dec(w, bad, 2, 0), "token 1: id 27 is not in the vocabulary (27 tokens)") != NULL,
	   "an id past the vocabulary is named with its position");
	is_int(loom_wordpiece_size(w), 27, "size");
	size_t n;
	const char *t = loom_wordpiece_token(w, 25, &n);
	ok(t && n == 3 && !memcmp(t, "dup", 3), "token text, trimmed");
	is_int(loom_wordpiece_id(w, "##able", 6), 7, "id of a token");
	is_int(loom_wordpiece_id(w, "nope", 4), LOOM_VOCAB_NONE, "id of an absent token");
	struct loom_wordpiece *e = loom_wordpiece_new();
	is_int(loom_wordpiece_id(e, "dup", 3), LOOM_VOCAB_NONE, "id without a vocabulary");
	ok(loom_wordpiece_size(e) == 0 && !loom_wordpiece_token(e, 0, &n),
	   "size and token without a vocabulary");
	loom_wordpiece_free(e);
	struct loom_wordpiece *d = loom_wordpiece_dup(w);
	loom_wordpiece_free(w);
	is_str(enc(d, "unaffable"), "5 6 7", "a dup'd object keeps the shared vocabulary");
	loom_wordpiece_free(d);
}

static void case_bad_vocab(void)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
		{ "", "v.txt: empty vocabulary" },
		{ "a\nb\n", "v.txt: no [UNK] token in the vocabulary" },
		{ "[UNK]\nok\nb\xff\n", "v.txt:3: invalid UTF-8 at byte 2 of the line" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct loom_wordpiece *w = loom_wordpiece_new();
		int rc = loom_wordpiece_load_mem(w, bad[i].text, strlen(bad[i].text), "v.txt", NULL);
		is_int(rc, LOOM_EFORMAT, "bad vocabulary %zu refused", i);
		is_str(loom_wordpiece_error(w), bad[i].msg, "message %zu", i);
		struct loom_ids ids = { 0 };
		is_int(loom_wordpiece_encode(w, (const uint8_t *)"x", 1, &ids, NULL, 0), LOOM_EINVAL,
		       "no vocabulary: encode refused");
		loom_wordpiece_free(w);
	}
	struct loom_wordpiece *w = loom_wordpiece_new();
	is_int(loom_wordpiece_load(w, "/nonexistent/vocab.txt", NULL), LOOM_EIO, "missing file");
	ok(strstr(loom_wordpiece_error(w), "cannot open '/nonexistent/vocab.txt': No such file") != NULL,
	   "missing file named");
	is_int(loom_wordpiece_load(w, "/dev/zero", NULL), LOOM_EFORMAT, "/dev/zero refused");
	is_str(loom_wordpiece_error(w), "'/dev/zero' is a device, not a file or a pipe", "a device refused by name");
	loom_wordpiece_free(w);
	loom_wordpiece_free(NULL);
}

/* A tokenizer.json (HuggingFace's layout for bert-base-uncased) with
 * parts replaced by `norm`, `model_extra` and `added`. */
static int load_hf(struct loom_wordpiece *w, const char *norm, const char *model_extra,
		   const char *added)
{
	char j[2048];
	int n = snprintf(j, sizeof j,
			 "{\"version\": \"1.0\", \"added_tokens\": [%s],"
			 " \"normalizer\": %s,"
			 " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},"
			 " \"post_processor\": {\"type\": \"TemplateProcessing\"},"
			 " \"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"##\", \"cleanup\": true},"
			 " \"model\": {\"type\": \"WordPiece\", %s \"vocab\": {\"[PAD]\": 0, \"[UNK]\": 1,"
			 " \"[CLS]\": 2, \"[SEP]\": 3, \"un\": 4, \"##aff\": 5, \"##able\": 6, \"hello\": 7,"
			 " \",\": 8, \"cafe\": 9, \"Hello\": 10}}}",
			 added, norm, model_extra);
	return loom_wordpiece_load_hf_mem(w, j, (size_t)n, "tok.json");
}

static void case_hf(void)
{
	static const char *const bert =
		"{\"type\": \"BertNormalizer\", \"clean_text\": true, \"handle_chinese_chars\": true,"
		" \"strip_accents\": null, \"lowercase\": true}";
	static const char *const model =
		"\"unk_token\": \"[UNK]\", \"continuing_subword_prefix\": \"##\","
		" \"max_input_chars_per_word\": 100,";
	static const char *const added =
		"{\"id\": 0, \"content\": \"[PAD]\", \"special\": true},"
		" {\"id\": 1, \"content\": \"[UNK]\", \"special\": true}";
	struct loom_wordpiece *w = loom_wordpiece_new();
	is_int(load_hf(w, bert, model, added), 0, "tokenizer.json: loads");
	is_int(loom_wordpiece_size(w), 11, "tokenizer.json: 11 tokens");
	/* lower-cased, accents stripped: un ##aff ##able | hello | , | cafe | [UNK] */
	is_str(enc(w, "UNAFFABLE Hello, Café xyz"), "4 5 6 7 8 9 1", "tokenizer.json: its ids");
	is_int(load_hf(w, "{\"type\": \"BertNormalizer\", \"lowercase\": false}", model, ""), 0,
	       "tokenizer.json: lowercase false loads");
	/* cased, and strip_accents null follows lowercase: café kept, [UNK] */
	is_str(enc(w, "Hello hello Café"), "10 7 1", "tokenizer.json: lowercase false is cased");
	is_int(load_hf(w, "null", "\"max_input_chars_per_word\": 4,", ""), 0,
	       "tokenizer.json: no normalizer, max_input_chars_per_word 4");
	is_str(enc(w, "cafe hello Hello"), "9 1 1", "tokenizer.json: words over 4 characters are [UNK]");

	static const struct {
		const char *norm, *model, *added, *msg;
	} bad[] = {
		{ "{\"type\": \"Sequence\", \"normalizers\": []}", "", "",
		  "'tok.json': normalizer Sequence, not BertNormalizer (or none)" },
		{ "{\"type\": \"BertNormalizer\", \"lowercase\": 1}", "", "",
		  "'tok.json': normalizer.lowercase is not true, false or null" },
		{ "null", "\"continuing_subword_prefix\": \"@@\",", "",
		  "'tok.json': model.continuing_subword_prefix \"@@\" is not supported (loom's is \"##\")" },
		{ "null", "\"unk_token\": \"<unk>\",", "",
		  "'tok.json': model.unk_token \"<unk>\" is not supported (loom's is \"[UNK]\")" },
		{ "null", "\"max_input_chars_per_word\": -1,", "",
		  "'tok.json': model.max_input_chars_per_word is not a count" },
		{ "null", "", "{\"id\": 2, \"content\": \"[UNK]\"}",
		  "'tok.json': added_tokens[0] \"[UNK]\" is not model.vocab's entry of its id: not supported" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		is_int(load_hf(w, bad[i].norm, bad[i].model, bad[i].added), LOOM_EFORMAT,
		       "tokenizer.json refused (%zu)", i);
		is_str(loom_wordpiece_error(w), bad[i].msg, "... naming what (%zu)", i);
	}
	static const struct {
		const char *json, *msg;
	} whole[] = {
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
		  "'t.json': model type BPE, not WordPiece" },
		{ "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0}},"
		  " \"pre_tokenizer\": {\"type\": \"Whitespace\"}}",
		  "'t.json': pre_tokenizer Whitespace, not BertPreTokenizer" },
		{ "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0}},"
		  " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, \"decoder\": {\"type\": \"ByteLevel\"}}",
		  "'t.json': decoder ByteLevel, not WordPiece" },
		{ "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0}},"
		  " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},"
		  " \"decoder\": {\"type\": \"WordPiece\", \"cleanup\": \"true\"}}",
		  "'t.json': decoder.cleanup is not true, false or null" },
		{ "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0, \"a\": 0}},"
		  " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}",
		  "'t.json': model.vocab: id 0 is both \"[UNK]\" and \"a\"" },
		{ "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0, \"a\": 2}},"
		  " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}",
		  "'t.json': model.vocab \"a\": id is not an integer in 0..1" },
		{ "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0, \"a \": 1}},"
		  " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}",
		  "'t.json': model.vocab \"a \" (id 1) ends with or holds white space: not supported" },
		{ "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}},"
		  " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}",
		  "t.json: no [UNK] token in the vocabulary" },
		{ "[1, 2", "'t.json':1:5: ']' expected near end of file" },
		{ "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0}},"
		  " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, \"truncation\": {\"max_length\": 512}}",
		  "'t.json': truncation is set: loom does not truncate the ids (want \"truncation\": null)" },
		{ "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0}},"
		  " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, \"padding\": {\"pad_id\": 0}}",
		  "'t.json': padding is set: loom does not pad the ids (want \"padding\": null)" },
	};
	for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
		is_int(loom_wordpiece_load_hf_mem(w, whole[i].json, strlen(whole[i].json), "t.json"),
		       LOOM_EFORMAT, "tokenizer.json refused (whole %zu)", i);
		is_str(loom_wordpiece_error(w), whole[i].msg, "... naming what (whole %zu)", i);
	}
	/* a refused file leaves the last good vocabulary in place */
	is_str(enc(w, "cafe hello"), "9 1", "tokenizer.json: refusals keep the loaded vocabulary");
	is_int(loom_wordpiece_load_hf(w, "/nonexistent/tokenizer.json"), LOOM_EIO, "missing file");
	loom_wordpiece_free(w);
}

/* loom_wordpiece_safe_cut: after the last white space within the window */
static void case_safe_cut(void)
{
	const uint8_t *t = (const uint8_t *)"ab cd\tef";
	is_int(loom_wordpiece_safe_cut(t, 8, 16), 6, "after the last white space (TAB)");
	is_int(loom_wordpiece_safe_cut(t, 6, 16), 6, "the last byte itself may be the white space");
	is_int(loom_wordpiece_safe_cut(t, 8, 2), 0, "none within a window of 2");
	is_int(loom_wordpiece_safe_cut(t, 8, 3), 6, "the window's first byte counts");
	is_int(loom_wordpiece_safe_cut(t, 5, 16), 3, "an earlier space");
	is_int(loom_wordpiece_safe_cut(t, 2, 16), 0, "no white space: 0");
	is_int(loom_wordpiece_safe_cut(t, 0, 16), 0, "n == 0: 0");
	/* the two halves encode as the whole */
	struct loom_wordpiece *w = load(1);
	const char *doc = "unaffable hello,\nhello unaffable";
	size_t n = strlen(doc), p = loom_wordpiece_safe_cut((const uint8_t *)doc, n - 4, 16);
	char whole[256], a[256];
	snprintf(whole, sizeof whole, "%s", enc(w, doc));
	char head[64];
	snprintf(head, sizeof head, "%.*s", (int)p, doc);
	snprintf(a, sizeof a, "%s", enc(w, head));
	size_t al = strlen(a);
	snprintf(a + al, sizeof a - al, " %s", enc(w, doc + p));
	is_str(a, whole, "encoding the two parts gives the whole's ids");
	loom_wordpiece_free(w);
}

/* tap_path(name) written with text, its directories made. */
static const char *put(const char *name, const char *text)
{
	char *p = (char *)tap_path(name); /* a rotating buffer of its own */
	for (char *s = strchr(p + strlen(tap_tmpdir()) + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = 0;
		mkdir(p, 0700);
		*s = '/';
	}
	FILE *f = fopen(p, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		diag("cannot write %s", p);
	return p;
}

/* One rule: opened with casing, lower-cases (1), is cased (0) or fails (-1,
 * its message in msg). */
static int opened(const char *spec, enum loom_casing casing, char *msg, size_t n)
{
	struct loom_err err = { 0 };
	struct loom_wordpiece *w = loom_wordpiece_open(spec, casing, &err);
	snprintf(msg, n, "%s", w ? loom_wordpiece_casing_rule(w) : err.msg);
	int lc = w ? loom_wordpiece_lowercases(w) : err.code == LOOM_EINVAL ? -1 : -2;
	loom_wordpiece_free(w);
	return lc;
}

/* loom_wordpiece_open's casing rules, in their order. */
static void case_open_casing(void)
{
	static const char lower_only[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n";
	char m[512];
	const char *mixed = put("plain/vocab.txt", VOCAB);
	const char *lower = put("low/vocab.txt", lower_only);
	is_int(opened(mixed, LOOM_CASING_AUTO, m, sizeof m), 0,
	       "a bare vocab.txt with upper-case tokens is cased");
	is_str(m, "its tokens (upper-case ones)", "  and says why");
	is_int(opened(lower, LOOM_CASING_AUTO, m, sizeof m), 1,
	       "one without lower-cases ([CLS] and the like do not count)");
	is_int(opened(mixed, LOOM_CASING_LOWER, m, sizeof m), 1, "LOWER given wins");
	is_int(opened(lower, LOOM_CASING_CASED, m, sizeof m), 0, "CASED given wins");
	put("plain/tokenizer_config.json", "{\"do_lower_case\": true}");
	is_int(opened(mixed, LOOM_CASING_AUTO, m, sizeof m), 1,
	       "tokenizer_config.json beside it: do_lower_case true");
	is_str(m, "tokenizer_config.json's do_lower_case", "  and says why");
	const char *dir = tap_path("plain");
	is_int(opened(dir, LOOM_CASING_AUTO, m, sizeof m), 1, "a directory: the same");
	put("plain/tokenizer_config.json", "{\"do_lower_case\": false}");
	is_int(opened(dir, LOOM_CASING_AUTO, m, sizeof m), 0, "do_lower_case false");
	is_int(opened(dir, LOOM_CASING_LOWER, m, sizeof m), 1, "  LOWER given still wins");
	put("plain/tokenizer_config.json", "{\"do_lower_case\": \"yes\"}");
	is_int(opened(dir, LOOM_CASING_AUTO, m, sizeof m), -2, "do_lower_case mistyped: refused");
	ok(strstr(m, "do_lower_case is not true or false") != NULL, "  named: %s", m);
	const char *unc = put("x-uncased/vocab.txt", VOCAB);
	is_int(opened(unc, LOOM_CASING_AUTO, m, sizeof m), -1,
	       "a name saying uncased, upper-case tokens: LOOM_EINVAL");
	ok(strstr(m, "its name says uncased, but it has upper-case tokens ('Hello')") != NULL,
	   "  names a token: %s", m);
	is_int(opened(unc, LOOM_CASING_CASED, m, sizeof m), 0, "  unless given");
	const char *cas = put("x-cased/vocab.txt", lower_only);
	is_int(opened(cas, LOOM_CASING_AUTO, m, sizeof m), -1,
	       "a name saying cased, no upper-case token: LOOM_EINVAL");
	is_int(opened(cas, LOOM_CASING_NONE, m, sizeof m), 1, "  NONE (decoding) never refuses");
	const char *hf = put("tok.json", "{}");
	is_int(opened(hf, LOOM_CASING_LOWER, m, sizeof m), -1,
	       "a tokenizer.json with a casing given: LOOM_EINVAL");
	is_int(opened(put("missing/x", ""), LOOM_CASING_AUTO, m, sizeof m), -2,
	       "an empty vocabulary: its error");
}

/* loom_wordpiece_casing_hint: the option a tool's user can give. */
static const char *hint_of(const char *spec, enum loom_casing casing)
{
	static char h[64];
	struct loom_err err = { 0 };
	struct loom_wordpiece *w = loom_wordpiece_open(spec, casing, &err);
	snprintf(h, sizeof h, "%s", w ? "(opened)" : loom_wordpiece_casing_hint(&err));
	loom_wordpiece_free(w);
	return h;
}

static void case_casing_hint(void)
{
	is_str(hint_of(tap_path("x-uncased/vocab.txt"), LOOM_CASING_AUTO), " (--lowercase or --cased)",
	       "casing hint: a name that disagrees with the tokens: give one");
	is_str(hint_of(tap_path("x-cased/vocab.txt"), LOOM_CASING_AUTO), " (--lowercase or --cased)",
	       "  the other way round too");
	is_str(hint_of(tap_path("tok.json"), LOOM_CASING_CASED), " (drop --lowercase/--cased)",
	       "  a tokenizer.json with a casing: drop it");
	is_str(hint_of(tap_path("missing/x"), LOOM_CASING_AUTO), "", "  another error: none");
	struct loom_err other = { LOOM_EIO, "x: say whether it lower-cases" };
	is_str(loom_wordpiece_casing_hint(&other), "", "  only for LOOM_EINVAL");
}

/* loom_wordpiece_spec: which --vocab specs are WordPiece. */
static void case_spec(void)
{
	struct loom_err err;
	char d[4300], p[4400], long_dir[4200];
	const char *tmp = tap_tmpdir();
	ok(loom_wordpiece_spec("bert-base-uncased", &err) == 1 &&
	   loom_wordpiece_spec("my/vocab.txt", &err) == 1 && loom_wordpiece_spec("gpt2", &err) == 0 &&
	   loom_wordpiece_spec("a.txt,b.bpe", &err) == 0, "spec: names and suffixes");
	snprintf(d, sizeof d, "%s/wpdir", tmp);
	mkdir(d, 0755);
	is_int(loom_wordpiece_spec(d, &err), 0, "spec: a directory without vocab.txt");
	snprintf(p, sizeof p, "%s/vocab.txt", d);
	fclose(fopen(p, "w"));
	is_int(loom_wordpiece_spec(d, &err), 1, "spec: a directory with vocab.txt");
	snprintf(p, sizeof p, "%s/encoder.json", d);
	fclose(fopen(p, "w"));
	is_int(loom_wordpiece_spec(d, &err), 0, "spec: ... and encoder.json: BPE");
	snprintf(p, sizeof p, "%s/tok.json", tmp);
	FILE *f = fopen(p, "w");
	fputs("{\"model\": {\"type\": \"WordPiece\"}}", f);
	fclose(f);
	is_int(loom_wordpiece_spec(p, &err), 1, "spec: a tokenizer.json saying WordPiece");
	f = fopen(p, "w");
	fputs("{\"model\": {\"type\": \"BPE\"}}", f);
	fclose(f);
	is_int(loom_wordpiece_spec(p, &err), 0, "spec: a BPE tokenizer.json");
	memset(long_dir, 'x', sizeof long_dir - 1);
	long_dir[sizeof long_dir - 1] = 0;
	long_dir[0] = '/';
	is_int(loom_wordpiece_spec(long_dir, &err), 0, "spec: a path too long that is no directory");
}

int main(void)
{
	case_spec();
	case_greedy();
	case_normalizer();
	case_offsets();
	case_decode();
	case_bad_vocab();
	case_hf();
	case_safe_cut();
	case_open_casing();
	case_casing_hint();
	return done_testing();
}
