/* encode_mt.c - loom_encode_mt: the ids of documents across chunks and
 * threads are those of each document encoded alone, in input order, for
 * any thread count; counters; errors with their codes and messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_bpe.h"
#include "loom_encode_mt.h"
#include "loom_vocab.h"
#include "tap.h"

static struct loom_vocab *V;

/* The write function: appends to a buffer; fails with `fail` once more
 * than `limit` bytes were written (limit 0: never). */
struct sink {
	uint8_t *p;
	size_t n, cap, limit;
	int fail;
};

static int sink_write(void *ctx, const void *p, size_t n)
{
	struct sink *s = ctx;
	if (s->limit && s->n + n > s->limit)
		return s->fail;
	if (s->n + n > s->cap) {
		s->cap = (s->n + n) * 2;
		s->p = realloc(s->p, s->cap);
	}
	memcpy(s->p + s->n, p, n);
	s->n += n;
	return 0;
}

static struct loom_encode_mt_opts opts(struct sink *s, int threads)
{
	return (struct loom_encode_mt_opts){ .vocab = V, .docs = LOOM_DOCS_LINES,
					     .fmt = LOOM_TOK_U32, .eos = V->eot, .min_tokens = 1,
					     .threads = threads, .write = sink_write, .ctx = s };
}

/* Encode files with o; returns the code of the run (and its message). */
static int run(const struct loom_encode_mt_opts *o, const char *const *files, size_t n,
	       struct loom_encode_mt_stats *st, char *msg, size_t msgn)
{
	struct loom_err err = { 0 };
	struct loom_encode_mt *m = loom_encode_mt_new(o, &err);
	if (!m) {
		snprintf(msg, msgn, "%s", err.msg);
		return err.code;
	}
	int rc = loom_encode_mt_run(m, files, n);
	snprintf(msg, msgn, "%s", loom_encode_mt_error(m));
	if (st)
		loom_encode_mt_get_stats(m, st);
	loom_encode_mt_free(m);
	return rc;
}

static void write_file(const char *path, const char *s, size_t n)
{
	FILE *f = fopen(path, "wb");
	fwrite(s, 1, n, f);
	fclose(f);
}

/* Documents of many lengths, one of them 1.8 MB (cut across chunks),
 * empty ones and one of a single token (dropped with min_tokens 2). */
static char *corpus(size_t *len)
{
	static const char *words[] = { "the", "loom", "weaves", "Wikipedia's", "text,", "1925",
				       "into", "ids;", "café", "\xe4\xb8\xad\xe6\x96\x87", "!" };
	size_t cap = 4u << 20, n = 0;
	char *s = malloc(cap);
	uint64_t r = 7;
	for (int d = 0; d < 400; d++) {
		size_t words_in = d == 200 ? 300000 : d % 7 == 3 ? 0 : d % 11 == 5 ? 1 : 1 + d * 13 % 300;
		for (size_t w = 0; w < words_in; w++) {
			r = loom_splitmix64(r);
			n += (size_t)sprintf(s + n, "%s%s", w ? " " : "", words[r % 11]);
		}
		s[n++] = '\n';
	}
	*len = n;
	return s;
}

/* The expected output: each line encoded alone, kept when it has at
 * least min_tokens ids, eos after it, as u32. */
static struct sink reference(const char *s, size_t n, uint64_t min_tokens, uint64_t *docs,
			     uint64_t *dropped)
{
	struct sink ref = { 0 };
	struct loom_bpe *e = loom_bpe_new(V);
	struct loom_ids ids = { 0 };
	*docs = *dropped = 0;
	for (size_t p = 0; p < n;) {
		const char *q = memchr(s + p, '\n', n - p);
		size_t end = q ? (size_t)(q - s) : n;
		ids.n = 0;
		loom_bpe_encode(e, (const uint8_t *)s + p, end - p, 0, &ids);
		if (ids.n >= min_tokens && ids.n) {
			sink_write(&ref, ids.v, ids.n * 4);
			sink_write(&ref, &V->eot, 4);
			++*docs;
		} else if (ids.n) {
			++*dropped;
		}
		p = end + 1;
	}
	loom_ids_release(&ids);
	loom_bpe_free(e);
	return ref;
}

static void case_threads(void)
{
	size_t n;
	char *s = corpus(&n);
	const char *path = tap_path("corpus.txt");
	write_file(path, s, n);
	uint64_t docs, dropped;
	struct sink ref = reference(s, n, 2, &docs, &dropped);
	ok(n > (3u << 19) && docs > 300 && dropped > 0, "corpus: %zu bytes, %llu documents", n,
	   (unsigned long long)docs);
	for (int threads = 1; threads <= 4; threads++) {
		struct sink out = { 0 };
		struct loom_encode_mt_opts o = opts(&out, threads);
		o.min_tokens = 2;
		struct loom_encode_mt_stats st;
		char msg[LOOM_ERR_MAX];
		is_int(run(&o, &path, 1, &st, msg, sizeof msg), 0, "threads %d: runs", threads);
		ok(out.n == ref.n && !memcmp(out.p, ref.p, ref.n),
		   "threads %d: the ids of each document encoded alone, in order", threads);
		ok(st.docs == docs && st.dropped == dropped && st.tokens == ref.n / 4 &&
		   st.bytes == n, "threads %d: counters (documents, dropped, ids, bytes)", threads);
		free(out.p);
	}
	free(ref.p);
	free(s);
}

/* Text: one document a line, eos last; two files are one stream. */
static void case_text(void)
{
	const char *a = tap_path("a.txt"), *b = tap_path("b.txt");
	write_file(a, "Hello world\n\n", 13);
	write_file(b, "Hello", 5); /* no final newline: still a document */
	const char *files[] = { a, b };
	struct sink out = { 0 };
	struct loom_encode_mt_opts o = opts(&out, 2);
	o.fmt = LOOM_TOK_TEXT;
	char msg[LOOM_ERR_MAX];
	is_int(run(&o, files, 2, NULL, msg, sizeof msg), 0, "text: runs");
	sink_write(&out, "", 1);
	is_str((char *)out.p, "15496 995 50256\n15496 50256\n", "text: ids, eos, a line each");
	free(out.p);
}

static void case_errors(void)
{
	char msg[LOOM_ERR_MAX], want[600];
	struct sink out = { 0 };
	struct loom_encode_mt_opts o = opts(&out, 1);
	const char *missing = tap_path("missing.txt");
	is_int(run(&o, &missing, 1, NULL, msg, sizeof msg), LOOM_EIO, "missing file: LOOM_EIO");
	snprintf(want, sizeof want, "cannot open '%s': No such file or directory", missing);
	is_str(msg, want, "missing file: the message names it");

	const char *j = tap_path("bad.jsonl");
	write_file(j, "{\"text\": \"a\"}\n{\"title\": 1}\n", 27);
	o = opts(&out, 3);
	o.docs = LOOM_DOCS_JSONL;
	is_int(run(&o, &j, 1, NULL, msg, sizeof msg), LOOM_EFORMAT, "jsonl without the field: LOOM_EFORMAT");
	snprintf(want, sizeof want, "%s: line 2: no string field \"text\"", j);
	is_str(msg, want, "jsonl: the message names the file and the line");

	size_t n;
	char *s = corpus(&n);
	const char *path = tap_path("corpus2.txt");
	write_file(path, s, n);
	free(s);
	for (int threads = 1; threads <= 2; threads++) {
		struct sink cut = { .limit = 3u << 19, .fail = LOOM_EIO };
		o = opts(&cut, threads);
		is_int(run(&o, &path, 1, NULL, msg, sizeof msg), LOOM_EIO,
		       "threads %d: the write function's code stops the run", threads);
		is_str(msg, "cannot write the ids", "threads %d: its message", threads);
		ok(cut.n > 0 && cut.n <= cut.limit, "threads %d: what came before was written", threads);
		free(cut.p);
	}

	struct loom_err err = { 0 };
	o = opts(&out, 0);
	ok(!loom_encode_mt_new(&o, &err) && err.code == LOOM_EINVAL, "0 threads: LOOM_EINVAL");
	o = opts(&out, 1);
	o.write = NULL;
	ok(!loom_encode_mt_new(&o, &err) && err.code == LOOM_EINVAL, "no write function: LOOM_EINVAL");
	free(out.p);
}

int main(void)
{
	V = loom_vocab_new();
	if (loom_vocab_load_gpt2(V, "share/vocab/gpt2/encoder.json", "share/vocab/gpt2/vocab.bpe")) {
		ok(0, "load gpt2: %s", loom_vocab_error(V));
		return done_testing();
	}
	case_threads();
	case_text();
	case_errors();
	loom_vocab_free(V);
	return done_testing();
}
