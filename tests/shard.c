/* Unit tests for loom_shard: the window rule against a brute-force model,
 * shuffle keys, token input across buffer boundaries, chunking invariance,
 * and the external shuffle (including recursive bucket splits) producing
 * exactly the in-memory result. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string.h>

#include "loom_example.h"
#include "loom_file.h"
#include "loom_manifest.h"
#include "loom_shard.h"
#include "loom_tokin.h"
#include "loom_tfrecord.h"
#include "tap.h"

static const char *dir;
/* the token stream the sharding cases cut: 200000 ids below 50257 */
#define NTOK 200000
static uint32_t *tok;

/* Brute force: starts 0, S, 2S ... while start < n - L, then the tail. */
static uint64_t model(uint64_t n, uint64_t L, uint64_t S, int keep, uint64_t *tail)
{
	uint64_t k = 0, start = 0;
	while ((int64_t)start < (int64_t)n - (int64_t)L) {
		k++;
		start += S;
	}
	*tail = keep && start < n && (n - start) * 2 >= L ? n - start : 0;
	return k + (*tail ? 1 : 0);
}

/* The fast Example encoder (vector path: 8 ids a time, scalar for groups
 * holding an id >= 2^21 and for the remainder) == protobuf-c, for ids at
 * every varint length boundary mixed at random, every count 0..70. */
static void encoder_vs_pbc(void)
{
	static const uint32_t edge[] = { 0, 1, 127, 128, 16383, 16384, 65535, 0x1fffff,
					 0x200000, 0xfffffff, 0x10000000, 0xffffffffu };
	uint32_t v[70];
	int64_t v64[70];
	uint8_t *out = malloc(loom_example_bound(9, 70));
	uint64_t x = 88172645463325252ull;
	int bad = 0, cases = 0;
	for (int round = 0; round < 400 && out; round++)
		for (size_t n = 0; n <= 70; n += 1 + (size_t)(round % 3)) {
			for (size_t i = 0; i < n; i++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				/* rounds < 300: only ids < 2^21 (the all-vector case) */
				int k = (int)(x % (round < 300 ? 8 : 12));
				uint64_t r = (x >> 24) % ((uint64_t)edge[k] + 1);
				v[i] = (x >> 32) % 3 == 0 ? edge[k] : (uint32_t)r;
				v64[i] = v[i];
			}
			uint8_t *ref;
			size_t rl;
			struct loom_err e;
			memset(out, 0xee, loom_example_bound(9, 70));
			size_t l = loom_example_encode_u32("input_ids", v, n, out);
			if (loom_example_encode_pbc("input_ids", v64, n, &ref, &rl, &e) < 0) {
				bad++;
				continue;
			}
			bad += l != rl || memcmp(out, ref, rl) != 0;
			free(ref);
			cases++;
		}
	ok(out && bad == 0, "fast u32 Example encoder == protobuf-c in %d mixes of varint lengths",
	   cases);
	/* u16 ids: the u16 encoder == the u32 one, every count 0..300 */
	uint16_t w16[300];
	uint32_t w32[300];
	uint8_t *o16 = malloc(loom_example_bound(9, 300)), *o32 = malloc(loom_example_bound(9, 300));
	bad = 0;
	for (size_t n = 0; n <= 300 && o16 && o32; n++) {
		for (size_t i = 0; i < n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			w16[i] = (uint16_t)(x >> (48 + x % 10)); /* every varint length */
			w32[i] = w16[i];
		}
		size_t a = loom_example_encode_u16("input_ids", w16, n, o16);
		size_t b = loom_example_encode_u32("input_ids", w32, n, o32);
		bad += a != b || memcmp(o16, o32, a) != 0;
	}
	ok(o16 && o32 && bad == 0, "u16 Example encoder == u32 encoder, 0..300 ids");
	free(o16);
	free(o32);
	free(out);
}

/* Shard tokens[0..n) with the given memory and chunking; returns 0/err. */
static int run(const char *name, const uint32_t *tok, size_t n, uint64_t memory, size_t chunk,
	       uint64_t shards, uint64_t rps, int shuffle, struct loom_shard_stats *st)
{
	char prefix[256];
	snprintf(prefix, sizeof prefix, "%s/%s", dir, name);
	struct loom_shard_opts o = { .prefix = prefix, .seq_len = 24, .stride = 10,
				     .keep_tail = 1, .shuffle = shuffle, .seed = 99,
				     .shards = shards, .records_per_shard = rps,
				     .memory = memory };
	struct loom_err e;
	struct loom_shard *s = loom_shard_new(&o, &e);
	if (!s) {
		diag("%s", e.msg);
		return -1;
	}
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i += chunk)
		rc = loom_shard_tokens(s, tok + i, n - i < chunk ? n - i : chunk);
	if (rc == 0)
		rc = loom_shard_finish(s);
	if (rc)
		diag("%s", loom_shard_error(s));
	if (st)
		loom_shard_get_stats(s, st);
	loom_shard_free(s);
	return rc;
}

static int same(const char *a, const char *b)
{
	size_t la, lb;
	char *x = tap_slurp(&la, "%s/%s", dir, a), *y = tap_slurp(&lb, "%s/%s", dir, b);
	int r = x && y && la == lb && memcmp(x, y, la) == 0;
	free(x);
	free(y);
	return r;
}

/* the window rule */
static void window_rule(void)
{
	int bad = 0;
	for (uint64_t n = 0; n < 60; n++)
		for (uint32_t L = 1; L < 20; L++)
			for (uint32_t S = 1; S < 25; S++)
				for (int keep = 0; keep < 2; keep++) {
					uint64_t t1, t2;
					uint64_t a = loom_shard_count(n, L, S, keep, &t1);
					uint64_t b = model(n, L, S, keep, &t2);
					bad += a != b || t1 != t2;
				}
	is_int(bad, 0, "loom_shard_count == brute-force model (n<60, L<20, S<25, tail)");
	uint64_t t;
	is_int(loom_shard_count(100, 10, 10, 0, &t), 9, "100 tokens, L=S=10: 9 samples");
	is_int(loom_shard_count(10, 10, 10, 1, &t), 1, "n == L with tail: 1 sample");
	is_int(t, 10, "  the tail is the whole stream");
	is_int(loom_shard_count(1000000000ull, 2049, 2049, 0, &t), 488042, "1e9 tokens, L=2049");
}

/* shuffle keys: a bijection for a fixed seed; shard names */
static void shuffle_keys(void)
{
	size_t nk = 1 << 20;
	uint64_t *keys = malloc(nk * sizeof *keys);
	for (size_t i = 0; i < nk; i++)
		keys[i] = loom_shard_key(5, i);
	int dup = 0, topb[256] = { 0 };
	for (size_t i = 0; i < nk; i++)
		topb[keys[i] >> 56]++;
	for (int i = 0; i < 256; i++)
		dup += topb[i] < 3500 || topb[i] > 4700; /* expected 4096 each */
	is_int(dup, 0, "top key bytes spread evenly over the 256 buckets");
	ok(loom_shard_key(5, 0) != loom_shard_key(6, 0), "the seed changes keys");
	free(keys);
	char nm[256];
	loom_shard_name(nm, sizeof nm, "out/x", 3, 12);
	is_str(nm, "out/x-00003-of-00012.tfrecord", "shard name");
}

/* token input: text across the 1 MiB read buffer, formats */
static void token_input(void)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/tok.txt", dir);
	FILE *f = fopen(path, "w");
	/* ~1.5 MB: tokens straddle the 1 MiB read buffer. */
	uint64_t sum = 0, cnt = 0;
	for (uint32_t i = 0; ftell(f) < 1500000; i++) {
		uint32_t v = i * 2654435761u;
		fprintf(f, i % 7 ? "%u " : "%u\n", v);
		sum += v;
		cnt++;
	}
	fclose(f);
	struct loom_err e;
	struct loom_tokin *in = loom_tokin_open(path, LOOM_TOK_TEXT, &e);
	uint32_t buf[1000];
	ssize_t r;
	uint64_t gsum = 0, gcnt = 0;
	while ((r = loom_tokin_read(in, buf, 1000)) > 0)
		for (ssize_t i = 0; i < r; i++) {
			gsum += buf[i];
			gcnt++;
		}
	is_int(r, 0, "text input read to the end");
	ok(gsum == sum && gcnt == cnt, "all %" PRIu64 " tokens, across buffer boundaries", cnt);
	ok(loom_tokin_bytes(in) == loom_tokin_size(in), "bytes consumed == file size");
	loom_tokin_free(in);
	enum loom_tokfmt fmt;
	ok(loom_tokfmt_parse("u32", &fmt) == 0 && fmt == LOOM_TOK_U32, "format u32");
	ok(loom_tokfmt_parse("i32", &fmt) == LOOM_EINVAL, "format i32 rejected");
}

/* sharding: in memory, chunked, spilled, split again, records per shard */
static void sharding(void)
{
	size_t n = NTOK;
	char path[4200];
	struct loom_err e;
	struct loom_shard_stats st;
	is_int(run("mem", tok, n, 1ull << 30, n, 3, 0, 1, &st), 0, "in-memory shuffle");
	is_int(st.spilled, 0, "  nothing spilled");
	is_int(st.samples, loom_shard_count(n, 24, 10, 1, NULL), "  sample count");
	is_int(run("chunk", tok, n, 1ull << 30, 7, 3, 0, 1, NULL), 0, "fed 7 tokens at a time");
	ok(same("mem-00000-of-00003.tfrecord", "chunk-00000-of-00003.tfrecord") &&
	   same("mem-00002-of-00003.tfrecord", "chunk-00002-of-00003.tfrecord"),
	   "  identical output");
	is_int(run("spill", tok, n, 256 << 10, 4096, 3, 0, 1, &st), 0, "spilling shuffle (256K)");
	ok(st.spilled > 0, "  spilled %" PRIu64 " bytes", st.spilled);
	ok(same("mem-00000-of-00003.tfrecord", "spill-00000-of-00003.tfrecord") &&
	   same("mem-00001-of-00003.tfrecord", "spill-00001-of-00003.tfrecord") &&
	   same("mem-00002-of-00003.tfrecord", "spill-00002-of-00003.tfrecord"),
	   "  identical to the in-memory shuffle");
	is_int(run("deep", tok, n, 4 << 10, 4096, 3, 0, 1, &st), 0,
	       "4K budget: buckets split again");
	ok(st.spilled > 3 * (uint64_t)st.bytes / 2, "  spilled twice over (%" PRIu64 " of %" PRIu64 ")",
	   st.spilled, st.bytes);
	ok(same("mem-00000-of-00003.tfrecord", "deep-00000-of-00003.tfrecord") &&
	   same("mem-00002-of-00003.tfrecord", "deep-00002-of-00003.tfrecord"),
	   "  still identical");
	ok(same("mem-00000-of-00003.tfrecord.index", "deep-00000-of-00003.tfrecord.index"),
	   "  indexes too");
	is_int(run("rps", tok, n, 1ull << 30, n, 0, 5000, 0, &st), 0, "records per shard 5000");
	is_int(st.shards, (st.samples + 4999) / 5000, "  %" PRIu64 " shards", st.shards);
	snprintf(path, sizeof path, "%s/rps-00002-of-%05" PRIu64 ".tfrecord", dir, st.shards);
	struct loom_tfr_file *tf = loom_tfr_file_open(path, NULL, &e);
	ok(tf && loom_tfr_file_count(tf) == 5000, "  shard 2 has 5000 records");
	loom_tfr_file_free(tf);
}

/* a failing run leaves nothing */
static void failing_run(void)
{
	struct loom_err e;
	char prefix[256];
	snprintf(prefix, sizeof prefix, "%s/fail", dir);
	struct loom_shard_opts o = { .prefix = prefix, .seq_len = 24, .shards = 2,
				     .vocab_size = 1000, .memory = 1 << 20 };
	struct loom_shard *s = loom_shard_new(&o, &e);
	uint32_t okt[100];
	for (int i = 0; i < 100; i++)
		okt[i] = (uint32_t)i;
	is_int(loom_shard_tokens(s, okt, 100), 0, "tokens below the vocabulary size");
	is_int(loom_shard_tokens(s, tok, 1000), LOOM_ERANGE, "a token >= vocab size");
	loom_shard_free(s);
	/* input_format "u16" promises ids < 2^16 (kept 2 bytes each for the
	 * shuffle): a library caller breaking it gets an error, not wrapped ids */
	struct loom_shard_opts o16 = { .prefix = prefix, .seq_len = 24, .shards = 2,
				       .shuffle = 1, .input_format = "u16", .memory = 1 << 20 };
	s = loom_shard_new(&o16, &e);
	uint32_t wide[100];
	for (int i = 0; i < 100; i++)
		wide[i] = i == 60 ? 70000 : (uint32_t)i;
	int rc16 = s ? loom_shard_tokens(s, wide, 100) : -1;
	if (s && rc16 == 0)
		rc16 = loom_shard_finish(s);
	is_int(rc16, LOOM_ERANGE, "u16 input format: an id >= 2^16 is an error");
	is_str(s ? loom_shard_error(s) : "", "token >= 65536 in u16 input", "  and says so");
	loom_shard_free(s);
	is_int(tap_count_dir_containing(dir, "fail"), 0, "  nothing left of the failed run");
}

/* a second run on a prefix another holds: LOOM_EBUSY, named */
static void busy_prefix(void)
{
	struct loom_err e;
	char prefix[256], has[512];
	snprintf(prefix, sizeof prefix, "%s/busy", dir);
	struct loom_shard_opts o = { .prefix = prefix, .seq_len = 24, .shards = 1,
				     .vocab_size = 1000, .memory = 1 << 20 };
	struct loom_shard *a = loom_shard_new(&o, &e);
	ok(a != NULL, "a first run holds the prefix");
	struct loom_shard *b = loom_shard_new(&o, &e);
	ok(b == NULL, "a second one is refused");
	is_int(e.code, LOOM_EBUSY, "  with LOOM_EBUSY");
	snprintf(has, sizeof has, "another loom-shard is writing '%s'", prefix);
	ok(strstr(e.msg, has) != NULL, "  naming the prefix");
	loom_shard_free(b);
	loom_shard_free(a);
}

/* loom_shard_summary: loom-shard's line. */
static void summary(void)
{
	struct loom_shard_opts o = { .seq_len = 10, .stride = 5, .shuffle = 1 };
	struct loom_shard_stats st = { .tokens = 3001, .samples = 546, .shards = 1, .bytes = 30900,
				       .spilled = 2000000, .manifest = "d/s.manifest.json" };
	struct loom_shard_stats val = { .samples = 1, .manifest = "d/s.val.manifest.json" };
	char line[9000];
	loom_shard_summary(&o, &st, &val, 0.5, line, sizeof line);
	is_str(line, "3001 tokens -> 546 records (seq 10, stride 5) in 1 shard, 30.9 kB, shuffled, "
		     "spilled 2.0 MB, 0.50 s -> d/s.manifest.json; validation 1 record -> "
		     "d/s.val.manifest.json", "summary: with a validation split and a spill");
	o = (struct loom_shard_opts){ .seq_len = 7 };
	st = (struct loom_shard_stats){ .tokens = 8, .samples = 1, .tail_tokens = 1, .shards = 2,
					.bytes = 90, .manifest = "m" };
	loom_shard_summary(&o, &st, NULL, 0, line, sizeof line);
	is_str(line, "8 tokens -> 1 record (seq 7, stride 7, 1 tail) in 2 shards, 90 B, stream order, "
		     "0.00 s -> m", "summary: stride = seq, a tail, stream order");
}

int main(void)
{
	dir = tap_tmpdir();
	summary();
	encoder_vs_pbc();
	window_rule();
	shuffle_keys();
	token_input();
	tok = malloc(NTOK * sizeof *tok);
	for (size_t i = 0; i < NTOK; i++)
		tok[i] = (uint32_t)((i * 2654435761u) % 50257);
	sharding();
	failing_run();
	busy_prefix();
	free(tok);
	return done_testing();
}
