/* Unit tests for loom_bpe_train: hand-checked merges, tie rule, overlap
 * counting, min_frequency, specials, streaming equivalence, determinism,
 * bad options and input, and the written files loading back into the
 * encoder (loom_vocab + loom_bpe) with an exact encode/decode round trip. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom_bpe.h"
#include "loom_bpe_train.h"
#include "loom_common.h"
#include "loom_file.h"
#include "loom_vocab.h"
#include "tap.h"

static const char *tiny[] = { "the cat sat on the mat", "the cat ate the rat", "that hat" };

static struct loom_bpe_trainer *train_docs(const char *const *docs, size_t n, size_t vocab,
					   uint64_t minf, const char *const *sp, size_t nsp,
					   int *rc)
{
	struct loom_bpe_trainer *t = loom_bpe_trainer_new();
	struct loom_bpe_train_opts o = { .vocab_size = vocab, .min_frequency = minf,
					 .specials = sp, .n_specials = nsp };
	for (size_t i = 0; i < n; i++)
		loom_bpe_trainer_add_doc(t, docs[i], strlen(docs[i]));
	*rc = loom_bpe_trainer_learn(t, &o);
	return t;
}

/* "A B|C D|..." of all merges, each token printed GPT-2 style. */
static char *merges_str(const struct loom_bpe_trainer *t)
{
	static char out[1 << 16];
	size_t k = 0;
	uint32_t l, r, z;
	out[0] = 0;
	for (size_t i = 0; loom_bpe_trainer_merge(t, i, &l, &r, &z) == 0; i++) {
		const uint32_t ids[2] = { l, r };
		for (int j = 0; j < 2; j++) {
			size_t n;
			const uint8_t *s = loom_bpe_trainer_token(t, ids[j], &n);
			if (k + 2 * n + 4 >= sizeof out)
				return out;
			k += loom_gpt2_bytes_to_str(s, n, out + k);
			out[k++] = j ? '|' : ' ';
		}
		out[k] = 0;
	}
	return out;
}

static void rm_dir(const char *dir)
{
	const char *names[] = { "encoder.json", "vocab.bpe", "tokenizer.json" };
	char p[700];
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
}

static const char *eot[] = { "<|endoftext|>" };

/* hand-checked merges and files, then determinism: a second run writes byte-identical files */
static void hand_checked(void)
{
	const char *tmp = tap_tmpdir();
	char d1[PATH_MAX + 32];
	char d2[PATH_MAX + 32];
	int rc;
	struct loom_bpe_train_stats st;
	/* --- hand-checked: pre-tokens the, " cat" x2, " the" x2, " sat", ...
	 * (a,t)=8 > (t,h)=5 > (th,e)=4; then three pairs tie at 2: (c,at),
	 * (Ġ,the), (Ġ,cat) - smaller left id first ('c' = 66 < 'Ġ' = 220),
	 * then smaller right id ("the" = 258 < "cat" = 259). */
	struct loom_bpe_trainer *t = train_docs(tiny, 3, 270, 2, eot, 1, &rc);
	is_int(rc, 0, "tiny corpus trains");
	is_str(merges_str(t), "a t|t h|th e|c at|Ġ the|Ġ cat|", "tiny corpus: expected merges");
	loom_bpe_trainer_stats(t, &st);
	is_int(st.docs, 3, "3 documents");
	is_int(st.pretokens, 13, "13 pre-tokens");
	is_int(st.distinct, 10, "10 distinct pre-tokens");
	is_int(st.merges, 6, "min_frequency 2 stops after 6 merges");
	is_int(st.vocab, 263, "vocabulary 256 + 6 + 1 special");
	size_t n;
	const uint8_t *s = loom_bpe_trainer_token(t, 262, &n);
	ok(s && n == 13 && !memcmp(s, "<|endoftext|>", 13), "special gets the id after the merges");
	s = loom_bpe_trainer_token(t, 0, &n);
	ok(s && n == 1 && *s == '!', "id 0 is '!' (GPT-2 byte order)");
	s = loom_bpe_trainer_token(t, 220, &n);
	ok(s && n == 1 && *s == ' ', "id 220 is the space byte (GPT-2's Ġ)");
	ok(loom_bpe_trainer_token(t, 263, &n) == NULL, "id past the vocabulary: NULL");

	/* write, load back with the encoder, round trip */
	snprintf(d1, sizeof d1, "%s/v1", tmp);
	is_int(loom_bpe_trainer_write(t, d1), 0, "write vocabulary directory");
	loom_bpe_trainer_free(t);
	char *bpe = tap_slurp(&n, "%s/%s", d1, "vocab.bpe");
	is_str(bpe, "#version: 0.2\na t\nt h\nth e\nc at\nĠ the\nĠ cat\n", "vocab.bpe text");
	free(bpe);
	char *enc = tap_slurp(&n, "%s/%s", d1, "encoder.json");
	ok(enc && strstr(enc, "\"\\u0120cat\": 261") && strstr(enc, "\"<|endoftext|>\": 262}"),
	   "encoder.json has \\u0120cat = 261 and <|endoftext|> = 262 last");
	free(enc);
	char *hf = tap_slurp(&n, "%s/%s", d1, "tokenizer.json");
	ok(hf && strstr(hf, "\"type\": \"BPE\"") && strstr(hf, "\"Ġ cat\"") &&
	   strstr(hf, "\"add_prefix_space\": false") && strstr(hf, "\"content\": \"<|endoftext|>\""),
	   "tokenizer.json: BPE model, merges, ByteLevel pre-tokenizer, added token");
	free(hf);

	struct loom_vocab *v = loom_vocab_new();
	char ep[PATH_MAX + 64], mp[PATH_MAX + 64];
	snprintf(ep, sizeof ep, "%s/encoder.json", d1);
	snprintf(mp, sizeof mp, "%s/vocab.bpe", d1);
	rc = loom_vocab_load_gpt2(v, ep, mp);
	is_int(rc, 0, "trained files load as a GPT-2 vocabulary");
	if (rc < 0)
		diag("%s", loom_vocab_error(v));
	if (rc == 0) {
		struct loom_bpe *e = loom_bpe_new(v);
		struct loom_ids ids = { 0 };
		const char *text = "the cat that sat";
		is_int(loom_bpe_encode(e, (const uint8_t *)text, strlen(text), 0, &ids), 0,
		       "encode with the trained vocabulary");
		/* the | Ġcat | Ġ th at | Ġ s at  ('s' = 115 - 33 = 82) */
		static const uint32_t want[] = { 258, 261, 220, 257, 256, 220, 82, 256 };
		is_int(ids.n, 8, "'the cat that sat' is 8 tokens");
		ok(ids.n == 8 && !memcmp(ids.v, want, sizeof want),
		   "ids: the, Ġcat, Ġ th at, Ġ s at");
		loom_ids_release(&ids);
		/* invalid UTF-8 and odd bytes round-trip through a trained vocab */
		const uint8_t odd[] = "caf\xc3\xa9 \xff\xfe the\x00 mat \xe3\x81";
		size_t oddn = sizeof odd - 1;
		uint8_t *buf = NULL;
		size_t len = 0, cap = 0;
		loom_bpe_encode(e, odd, oddn, 0, &ids);
		is_int(loom_bpe_decode(e, ids.v, ids.n, 0, &buf, &len, &cap), 0, "decode");
		ok(len == oddn && !memcmp(buf, odd, oddn), "encode|decode is exact on odd bytes");
		free(buf);
		loom_ids_release(&ids);
		loom_bpe_free(e);
	}
	loom_vocab_free(v);

	/* --- determinism: a second run writes byte-identical files */
	t = train_docs(tiny, 3, 270, 2, eot, 1, &rc);
	snprintf(d2, sizeof d2, "%s/v2", tmp);
	is_int(loom_bpe_trainer_write(t, d2), 0, "second run writes");
	loom_bpe_trainer_free(t);
	const char *names[] = { "encoder.json", "vocab.bpe", "tokenizer.json" };
	for (int i = 0; i < 3; i++) {
		size_t n1, n2;
		char *a = tap_slurp(&n1, "%s/%s", d1, names[i]), *b = tap_slurp(&n2, "%s/%s", d2, names[i]);
		ok(a && b && n1 == n2 && !memcmp(a, b, n1), "%s byte-identical across runs",
		   names[i]);
		free(a);
		free(b);
	}
	/* rewriting into an existing directory replaces the files */
	t = train_docs(tiny, 3, 258, 2, eot, 1, &rc);
	is_int(loom_bpe_trainer_write(t, d2), 0, "write into an existing directory");
	loom_bpe_trainer_free(t);
	bpe = tap_slurp(&n, "%s/%s", d2, "vocab.bpe");
	is_str(bpe, "#version: 0.2\na t\n", "vocab size 258 + 1 special: one merge");
	free(bpe);
	is_int(tap_count_dir(d2, ""), 3, "exactly three files, no temporaries");
	rm_dir(d1);
	rm_dir(d2);
}

/* min_frequency */
static void min_frequency(void)
{
	int rc;
	struct loom_bpe_train_stats st;
	struct loom_bpe_trainer *t;
	/* --- min_frequency */
	t = train_docs(tiny, 3, 300, 3, NULL, 0, &rc);
	is_str(merges_str(t), "a t|t h|th e|", "min_frequency 3: pairs seen twice are not merged");
	loom_bpe_trainer_free(t);
	t = train_docs(tiny, 3, 300, 0, NULL, 0, &rc);
	loom_bpe_trainer_stats(t, &st);
	ok(st.merges > 6, "min_frequency 0 merges pairs seen once too (%llu merges)",
	   (unsigned long long)st.merges);
	is_int(st.vocab, 256 + st.merges, "no specials: vocabulary = 256 + merges");
	loom_bpe_trainer_free(t);
}

/* tie rule with single occurrences, and overlap counting */
static void ties_and_overlaps(void)
{
	int rc;
	struct loom_bpe_trainer *t;
	/* --- tie rule with single occurrences, and overlap counting */
	static const char *ties[] = { "cd ab" };
	t = train_docs(ties, 1, 300, 1, NULL, 0, &rc);
	is_str(merges_str(t), "a b|c d|Ġ ab|", "ties: smaller (left, right) ids first");
	loom_bpe_trainer_free(t);
	static const char *runs[] = { "aaaa", "aaaa", "aaaaa", "ab" };
	/* (a,a): 3+3+4 = 10 -> aa; aaaa = aa aa: (aa,aa) = 2, aaaaa = aa aa a:
	 * (aa,aa) 1 + (aa,a) 1: (aa,aa) = 3 wins */
	t = train_docs(runs, 4, 300, 2, NULL, 0, &rc);
	is_str(merges_str(t), "a a|aa aa|", "runs: overlapping pairs counted as HF does");
	loom_bpe_trainer_free(t);
}

/* vocabulary size limit is exact */
static void vocab_size_limit(void)
{
	int rc;
	struct loom_bpe_train_stats st;
	struct loom_bpe_trainer *t;
	/* --- vocabulary size limit is exact */
	t = train_docs(tiny, 3, 259, 0, eot, 1, &rc);
	loom_bpe_trainer_stats(t, &st);
	is_int(st.vocab, 259, "vocab_size 259 reached exactly");
	is_int(st.merges, 2, "two merges");
	loom_bpe_trainer_free(t);
}

/* specials: several, and one that is already a token */
static void specials(void)
{
	const char *tmp = tap_tmpdir();
	char d1[PATH_MAX + 32];
	int rc;
	struct loom_bpe_train_stats st;
	struct loom_bpe_trainer *t;
	size_t n;
	const uint8_t *s;
	char *hf;
	/* --- specials: several, and one that is already a token */
	static const char *sp[] = { "<|endoftext|>", "<pad>", "at" };
	t = train_docs(tiny, 3, 262, 2, sp, 3, &rc);
	is_int(rc, 0, "three specials");
	loom_bpe_trainer_stats(t, &st);
	is_int(st.merges, 3, "vocab 262 - 3 specials: 3 merges");
	s = loom_bpe_trainer_token(t, 260, &n);
	ok(s && n == 5 && !memcmp(s, "<pad>", 5), "second special gets id 260");
	is_int(st.vocab, 261, "special 'at' reuses token 256: vocabulary 261");
	snprintf(d1, sizeof d1, "%s/v3", tmp);
	is_int(loom_bpe_trainer_write(t, d1), 0, "write with specials");
	hf = tap_slurp(&n, "%s/%s", d1, "tokenizer.json");
	ok(hf && strstr(hf, "\"id\": 256,\n      \"content\": \"at\""),
	   "tokenizer.json: added token 'at' has id 256");
	free(hf);
	loom_bpe_trainer_free(t);
	rm_dir(d1);
}

/* bad options and input */
static void bad_options(void)
{
	const char *tmp = tap_tmpdir();
	char d1[PATH_MAX + 32];
	char d2[PATH_MAX + 32];
	int rc;
	struct loom_bpe_train_stats st;
	struct loom_bpe_trainer *t;
	/* --- bad options and input */
	t = train_docs(tiny, 3, 256, 2, eot, 1, &rc);
	is_int(rc, LOOM_EINVAL, "vocab_size 256 with a special: EINVAL");
	ok(strstr(loom_bpe_trainer_error(t), "smaller than 256") != NULL, "message: %s",
	   loom_bpe_trainer_error(t));
	loom_bpe_trainer_free(t);
	t = train_docs(tiny, 3, 256, 2, NULL, 0, &rc);
	is_int(rc, 0, "vocab_size 256 without specials: no merges, fine");
	loom_bpe_trainer_stats(t, &st);
	is_int(st.merges, 0, "zero merges");
	loom_bpe_trainer_free(t);
	static const char *dup[] = { "<s>", "<s>" };
	t = train_docs(tiny, 3, 300, 2, dup, 2, &rc);
	is_int(rc, LOOM_EINVAL, "duplicate special: EINVAL");
	loom_bpe_trainer_free(t);
	static const char *badutf[] = { "<\xff>" };
	t = train_docs(tiny, 3, 300, 2, badutf, 1, &rc);
	is_int(rc, LOOM_EINVAL, "special that is not UTF-8: EINVAL");
	loom_bpe_trainer_free(t);
	static const char *empty[] = { "", "" };
	t = train_docs(empty, 2, 300, 2, NULL, 0, &rc);
	is_int(rc, LOOM_EINVAL, "empty input: EINVAL");
	ok(strstr(loom_bpe_trainer_error(t), "empty") != NULL, "message: %s",
	   loom_bpe_trainer_error(t));
	snprintf(d1, sizeof d1, "%s/never", tmp);
	ok(loom_bpe_trainer_write(t, d1) < 0 && access(d1, F_OK) < 0,
	   "write after a failed learn fails, creates nothing");
	loom_bpe_trainer_free(t);
	t = train_docs(tiny, 3, 300, 2, NULL, 0, &rc);
	snprintf(d1, sizeof d1, "%s/new/sub/dir", tmp);
	is_int(loom_bpe_trainer_write(t, d1), 0, "missing parent directories are created");
	ok(access(d1, F_OK) == 0, "  the output directory exists");
	rm_dir(d1);
	for (int i = 0; i < 2; i++) {
		*strrchr(d1, '/') = 0;
		rmdir(d1);
	}
	snprintf(d1, sizeof d1, "%s/afile", tmp);
	loom_write_file_atomic(d1, "x", 1, &(struct loom_err){ 0 });
	ok(loom_bpe_trainer_write(t, d1) == LOOM_EIO, "output path is a file: EIO");
	snprintf(d2, sizeof d2, "%s/afile/sub", tmp);
	rc = loom_bpe_trainer_write(t, d2);
	ok(rc == LOOM_EIO && strstr(loom_bpe_trainer_error(t), "afile"),
	   "a file where a parent should be: EIO naming it (%s)", loom_bpe_trainer_error(t));
	unlink(d1);
	is_int(tap_count_dir(tmp, ""), 0, "failed writes leave nothing behind");
	loom_bpe_trainer_free(t);
}

/* streaming: a 3 MB document fed in odd pieces counts what one piece does */
static void streaming(void)
{
	/* --- streaming: a 3 MB single document fed in odd pieces counts the
	 * same pre-tokens as in one piece (cuts at safe points) */
	size_t big = 3u << 20;
	char *doc = malloc(big);
	uint64_t x = 12345;
	const char *words[] = { "the", " Cat", "  ", "\n", "'s", " 12", "!!", " \xe6\x97\xa5",
				"\xff", "   ", "x", " ok." };
	size_t k = 0;
	while (k < big) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		const char *w = words[(x >> 33) % 12];
		size_t wl = strlen(w);
		if (k + wl > big)
			break;
		memcpy(doc + k, w, wl);
		k += wl;
	}
	struct loom_bpe_trainer *a = loom_bpe_trainer_new(), *b = loom_bpe_trainer_new();
	struct loom_bpe_train_opts o = { .vocab_size = 400, .min_frequency = 2 };
	loom_bpe_trainer_add_doc(a, doc, k);
	for (size_t p = 0, step = 1; p < k; p += step, step = step * 3 % 70001 + 1)
		loom_bpe_trainer_feed(b, doc + p, p + step > k ? k - p : step);
	loom_bpe_trainer_end_doc(b);
	is_int(loom_bpe_trainer_learn(a, &o), 0, "big document in one piece");
	is_int(loom_bpe_trainer_learn(b, &o), 0, "big document streamed");
	struct loom_bpe_train_stats sa, sb;
	loom_bpe_trainer_stats(a, &sa);
	loom_bpe_trainer_stats(b, &sb);
	ok(sa.pretokens == sb.pretokens && sa.distinct == sb.distinct && sa.bytes == sb.bytes &&
	   sa.docs == 1 && sb.docs == 1, "same counts (%llu pre-tokens, %llu distinct)",
	   (unsigned long long)sa.pretokens, (unsigned long long)sa.distinct);
	char *ma = strdup(merges_str(a));
	is_str(merges_str(b), ma, "same merges");
	free(ma);
	loom_bpe_trainer_free(a);
	loom_bpe_trainer_free(b);
	free(doc);
}

/* position lists (long words) give exactly the rescanning result */
static void position_lists(void)
{
	struct loom_bpe_train_stats st;
	/* --- position lists (long words) give exactly the rescanning result */
	{
		static const char *docs[] = {
			"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab aaaa aaa", "abababababababa bab",
			"the cat sat on the mat", "the cat ate the rat", "that hat",
			"xyxyxyxyyyyyxxxxyxyxyyxyxyxxyyxyxyyxyyyxxyxyxyxyxyxxxyyyxyx",
			"mississippi missing misses", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
		};
		char *ref = NULL;
		for (int mode = 0; mode < 3; mode++) {
			struct loom_bpe_trainer *u = loom_bpe_trainer_new();
			loom_bpe_trainer_set_long_word(u, mode == 0 ? (size_t)-1 : mode == 1 ? 0 : 5);
			for (size_t i = 0; i < sizeof docs / sizeof *docs; i++)
				loom_bpe_trainer_add_doc(u, docs[i], strlen(docs[i]));
			struct loom_bpe_train_opts lo = { .vocab_size = 400, .min_frequency = 1 };
			is_int(loom_bpe_trainer_learn(u, &lo), 0, "long-word mode %d learns", mode);
			if (!mode) {
				ref = strdup(merges_str(u));
				loom_bpe_trainer_stats(u, &st);
				ok(st.merges > 40, "rescanning: %llu merges",
				   (unsigned long long)st.merges);
			} else {
				is_str(merges_str(u), ref, "position lists (threshold %s) = rescanning",
				       mode == 1 ? "0" : "5");
			}
			loom_bpe_trainer_free(u);
		}
		free(ref);
	}
}

/* Counts of a document stream fed in chunks of `step` bytes (documents
 * cut at sep, < 0: one document), into *st. */
static int feed_in_chunks(const char *text, size_t n, size_t step, int sep,
			  struct loom_bpe_train_stats *st)
{
	struct loom_bpe_trainer *t = loom_bpe_trainer_new();
	int open = 0, rc = 0;
	for (size_t at = 0; at < n && !rc; at += step)
		rc = loom_bpe_trainer_feed_docs(t, text + at, at + step > n ? n - at : step, sep, &open);
	if (!rc && open)
		rc = loom_bpe_trainer_end_doc(t);
	loom_bpe_trainer_stats(t, st);
	loom_bpe_trainer_free(t);
	return rc;
}

/* loom_bpe_trainer_feed_docs: documents across chunk boundaries count the
 * same, whatever the chunk size; empty lines are no documents. */
static void feed_docs(void)
{
	static const char text[] = "the cat sat\n\nhello world, hello\nlast line without end";
	size_t n = sizeof text - 1;
	struct loom_bpe_train_stats one, st;
	is_int(feed_in_chunks(text, n, n, '\n', &one), 0, "feed_docs: lines in one chunk");
	ok(one.docs == 3 && one.bytes == n - 3, "3 documents (the empty line is none), separators not fed");
	int same = 1;
	for (size_t step = 1; step < n; step++) {
		feed_in_chunks(text, n, step, '\n', &st);
		same &= st.docs == one.docs && st.bytes == one.bytes &&
			st.pretokens == one.pretokens && st.distinct == one.distinct;
	}
	ok(same, "feed_docs: the same counts for every chunk size");
	feed_in_chunks(text, n, 7, -1, &st);
	ok(st.docs == 1 && st.bytes == n, "sep < 0: the stream is one document");
	feed_in_chunks(text, n, 5, 0, &st);
	ok(st.docs == 1 && st.bytes == n, "NUL separators: none in the text, one document");
}

int main(void)
{
	tap_tmpdir();
	feed_docs();
	struct loom_bpe_train_stats st = { .docs = 1, .bytes = 5300, .pretokens = 1030, .distinct = 308,
					   .merges = 43, .vocab = 300 };
	char line[512];
	loom_bpe_train_summary(&st, 0.5, 0.25, 0.125, 2.1e6, line, sizeof line);
	is_str(line, "train: 1 document, 5.3 kB, 1030 pre-tokens (308 distinct), 43 merges, vocabulary 300; "
		     "0.50 s (count 0.25 s, learn 0.12 s), peak memory 2.1 MB", "the summary line");
	hand_checked();
	min_frequency();
	ties_and_overlaps();
	vocab_size_limit();
	specials();
	bad_options();
	streaming();
	position_lists();
	return done_testing();
}
