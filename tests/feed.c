/* Unit tests for loom_feed (lib/data/loom_feed.h): every record exactly
 * once per epoch in a seeded order that is the same for the same seed;
 * frame shapes, cutting and padding; epochs and shuffling across shards;
 * the same bytes from 1 and N workers; rank slices; starting mid-stream;
 * bad manifests and shards refused with a message naming the file.  The
 * shards are made here with loom_shard: record r holds the L tokens
 * base + r*L .. base + r*L + L-1, so a row names its record. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom_batch.h"
#include "loom_ckpt.h"
#include "loom_feed.h"
#include "loom_file.h"
#include "loom_manifest.h"
#include "loom_shard.h"
#include "tap.h"

static const char *dir; /* tap_tmpdir() */

/* dir/NAME: `records` records of L tokens from `base` on, in stream order,
 * in `shards` round-robin shards (or contiguous ones of `per` records). */
static const char *make_shards(const char *name, uint64_t records, uint32_t L,
			       uint64_t shards, uint64_t per, uint32_t base)
{
	static char manifest[256];
	char prefix[200];
	snprintf(prefix, sizeof prefix, "%s/%s", dir, name);
	snprintf(manifest, sizeof manifest, "%s.manifest.json", prefix);
	struct loom_shard_opts o = { .prefix = prefix, .seq_len = L, .shards = shards,
				     .records_per_shard = per, .threads = 1,
				     .memory = 1 << 20 };
	struct loom_err e;
	struct loom_shard *s = loom_shard_new(&o, &e);
	size_t n = records * L + 1;	/* one more: windows start below n - L */
	uint32_t *tok = malloc(n * sizeof *tok);
	for (size_t i = 0; tok && i < n; i++)
		tok[i] = base + (uint32_t)i;
	int rc = s && tok ? loom_shard_tokens(s, tok, n) : -1;
	if (rc == 0)
		rc = loom_shard_finish(s);
	if (rc)
		diag("making %s: %s", name, s ? loom_shard_error(s) : e.msg);
	loom_shard_free(s);
	free(tok);
	return manifest;
}

/* dir/NAME-0000i-of-0000n.tfrecord into out. */
static const char *shard_path(char *out, size_t n, const char *name, int i, int of)
{
	char prefix[200];
	snprintf(prefix, sizeof prefix, "%s/%s", dir, name);
	loom_shard_name(out, n, prefix, (uint64_t)i, (uint64_t)of);
	return out;
}

/* A whole feed: its bytes (frames, then the END frame) or its error. */
struct run {
	unsigned char *buf;
	size_t len;
	int rc;			/* 0, or the error of _new, _start or _next */
	char msg[LOOM_ERR_MAX];
	struct loom_feed_stats st;
};

static void run_feed(struct run *r, const struct loom_feed_opts *o, uint64_t start)
{
	struct loom_err e;
	memset(r, 0, sizeof *r);
	struct loom_feed *f = loom_feed_new(o, &e);
	if (!f) {
		r->rc = e.code;
		snprintf(r->msg, sizeof r->msg, "%s", e.msg);
		return;
	}
	const void *p;
	size_t n;
	int rc = loom_feed_start(f, start);
	while (rc == 0 && (rc = loom_feed_next(f, &p, &n)) > 0) {
		r->buf = realloc(r->buf, r->len + n + LOOM_BATCH_HEADER_SIZE);
		memcpy(r->buf + r->len, p, n);
		r->len += n;
		rc = 0;
	}
	if (rc == 0) {
		r->buf = realloc(r->buf, r->len + LOOM_BATCH_HEADER_SIZE);
		r->len += loom_feed_end_frame(f, r->buf + r->len);
	}
	r->rc = rc;
	if (rc < 0)
		snprintf(r->msg, sizeof r->msg, "%s", loom_feed_error(f));
	loom_feed_get_stats(f, &r->st);
	loom_feed_free(f);
}

/* The frames of a run, decoded: rows[i] is frame i's B x T1 tokens. */
struct frames {
	size_t n;
	struct loom_batch_hdr h[2048], end;
	uint32_t *tok;		/* n x B x T1 */
	int ok;			/* the stream reads cleanly to its END frame */
};

static void decode(struct frames *fr, const struct run *r)
{
	struct loom_batch_reader *rd = loom_batch_reader_new_mem(r->buf, r->len, "feed");
	const uint32_t *t;
	int rc;
	fr->n = 0;
	fr->tok = NULL;
	while ((rc = loom_batch_read(rd, &fr->h[fr->n], &t)) == 1 && fr->n < 2047) {
		size_t k = (size_t)fr->h[0].batch * fr->h[0].seq_len;
		fr->tok = realloc(fr->tok, (fr->n + 1) * k * sizeof *t);
		memcpy(fr->tok + fr->n * k, t, k * sizeof *t);
		fr->n++;
	}
	fr->end = fr->h[fr->n];
	fr->ok = rc == 0;
	if (rc < 0)
		diag("%s", loom_batch_reader_error(rd));
	loom_batch_reader_free(rd);
}

static struct loom_feed_opts opts(const char *manifest, uint32_t B, uint32_t T1,
				  uint64_t seed, uint64_t epochs)
{
	return (struct loom_feed_opts){ .manifest = manifest, .batch = B, .seq_len = T1,
					.seed = seed, .epochs = epochs, .threads = 2 };
}

/* Every row is T1 consecutive ids from the start of a record of L. */
static int rows_whole(const struct frames *fr, uint32_t L, uint32_t base)
{
	uint32_t B = fr->h[0].batch, T1 = fr->h[0].seq_len;
	for (size_t i = 0; i < fr->n * B; i++) {
		const uint32_t *row = fr->tok + i * T1;
		if ((row[0] - base) % L)
			return 0;
		for (uint32_t k = 1; k < T1; k++)
			if (row[k] != row[0] + k)
				return 0;
	}
	return 1;
}

#define RECORD(fr, i, L) ((fr)->tok[(size_t)(i) * (fr)->h[0].seq_len] / (L))

/* 210 records in 3 shards, batches of 5: 42 per epoch, every record once. */
static void permutation(const char *m)
{
	struct loom_feed_opts o = opts(m, 5, 9, 11, 3);
	struct run a, b, c;
	struct frames fa, fc;
	run_feed(&a, &o, 0);
	is_int(a.rc, 0, "3 epochs of 210 records in batches of 5");
	decode(&fa, &a);
	ok(fa.ok, "  the stream reads cleanly to its END frame");
	is_int(fa.n, 126, "  3 x 42 frames");
	is_int(fa.end.seq, 126, "  END frame: next seq 126");
	is_int(fa.end.epoch, 2, "  END frame: last epoch 2");
	int seqs = 1, epochs = 1;
	for (size_t i = 0; i < fa.n; i++) {
		seqs &= fa.h[i].seq == i;
		epochs &= fa.h[i].epoch == i / 42;
	}
	ok(seqs && epochs, "  frame i has seq i, epoch i / 42");
	ok(rows_whole(&fa, 9, 0), "  every row is a whole record");
	for (int e = 0; e < 3; e++) {
		int seen[210] = { 0 }, once = 1;
		for (size_t i = 0; i < 210; i++)
			seen[RECORD(&fa, e * 210 + i, 9)]++;
		for (int r = 0; r < 210; r++)
			once &= seen[r] == 1;
		ok(once, "  epoch %d: each of the 210 records exactly once", e);
	}
	int same01 = 1, same12 = 1;
	for (size_t i = 0; i < 210; i++) {
		same01 &= RECORD(&fa, i, 9) == RECORD(&fa, 210 + i, 9);
		same12 &= RECORD(&fa, 210 + i, 9) == RECORD(&fa, 420 + i, 9);
	}
	ok(!same01 && !same12, "  each epoch has its own order");
	int sorted = 1;
	for (size_t i = 1; i < 210; i++)
		sorted &= RECORD(&fa, i, 9) > RECORD(&fa, i - 1, 9);
	ok(!sorted, "  shuffled, not stream order");

	run_feed(&b, &o, 0);
	ok(b.len == a.len && !memcmp(a.buf, b.buf, a.len), "same seed: the same bytes");
	o.seed = 12;
	run_feed(&c, &o, 0);
	decode(&fc, &c);
	int differ = 0;
	for (size_t i = 0; i < 210; i++)
		differ |= RECORD(&fa, i, 9) != RECORD(&fc, i, 9);
	ok(differ, "another seed: another order");
	int seen[210] = { 0 }, once = 1;
	for (size_t i = 0; i < 210; i++)
		seen[RECORD(&fc, i, 9)]++;
	for (int r = 0; r < 210; r++)
		once &= seen[r] == 1;
	ok(once, "  still each record once");
	is_int(a.st.records, 210, "stats: records");
	is_int(a.st.shards, 3, "stats: shards");
	is_int(a.st.per_epoch, 42, "stats: batches per epoch");
	is_int(a.st.frames, 126, "stats: frames");
	is_int(a.st.bytes, a.len, "stats: bytes, END frame included");
	is_int(a.st.epoch, 2, "stats: last epoch");
	free(a.buf);
	free(b.buf);
	free(c.buf);
	free(fa.tok);
	free(fc.tok);

	/* 210 = 52 x 4 + 2: the remainder of each epoch is dropped */
	o = opts(m, 4, 9, 11, 2);
	run_feed(&a, &o, 0);
	decode(&fa, &a);
	is_int(fa.n, 104, "batches of 4: 52 per epoch, 2 records left out");
	int distinct = 1, seen2[210] = { 0 };
	for (size_t i = 0; i < 208; i++)
		distinct &= seen2[RECORD(&fa, i, 9)]++ == 0;
	ok(distinct, "  208 distinct records in epoch 0");
	free(a.buf);
	free(fa.tok);
}

/* The order does not depend on the number of workers or the ring size. */
static void workers(const char *m)
{
	struct loom_feed_opts o = opts(m, 3, 9, 5, 4);
	struct run one, r;
	o.threads = 1;
	run_feed(&one, &o, 0);
	is_int(one.rc, 0, "one worker");
	static const unsigned n[] = { 2, 3, 8, 64 };
	for (size_t i = 0; i < sizeof n / sizeof *n; i++) {
		o.threads = n[i];
		run_feed(&r, &o, 0);
		ok(r.rc == 0 && r.len == one.len && !memcmp(r.buf, one.buf, one.len),
		   "%u workers: the same bytes as one", n[i]);
		free(r.buf);
	}
	o.threads = 0;
	run_feed(&r, &o, 0);
	ok(r.rc == 0 && r.len == one.len && !memcmp(r.buf, one.buf, one.len),
	   "threads 0 = one worker");
	free(r.buf);
	free(one.buf);
}

/* Rank r of W with batch B = rows [rB, (r+1)B) of the world-1 frames with
 * batch W x B; starting at seq s = the full stream from frame s on. */
static void ranks_and_start(const char *m)
{
	struct loom_feed_opts o = opts(m, 6, 9, 3, 2);
	struct run w1, rk, st;
	struct frames f1, fr, fs;
	run_feed(&w1, &o, 0);
	decode(&f1, &w1);
	int slices = 1, hdr = 1;
	for (uint32_t r = 0; r < 3; r++) {
		o = opts(m, 2, 9, 3, 2);
		o.rank = r;
		o.world = 3;
		run_feed(&rk, &o, 0);
		decode(&fr, &rk);
		slices &= fr.n == f1.n;
		for (size_t i = 0; slices && i < fr.n; i++) {
			hdr &= fr.h[i].rank == r && fr.h[i].world == 3 && fr.h[i].batch == 2;
			slices &= !memcmp(fr.tok + i * 2 * 9, f1.tok + (i * 6 + r * 2) * 9,
					  2 * 9 * sizeof *fr.tok);
		}
		free(rk.buf);
		free(fr.tok);
	}
	ok(slices, "ranks 0..2 of 3, batch 2: slices of the world-1 frames of batch 6");
	ok(hdr, "  their frames carry rank, world and batch");

	o = opts(m, 6, 9, 3, 2);
	run_feed(&st, &o, 50);
	decode(&fs, &st);
	is_int(fs.n, f1.n - 50, "start at 50: the frames from 50 on");
	ok(fs.n && fs.h[0].seq == 50 && fs.h[0].epoch == 1 &&
	   !memcmp(fs.tok, f1.tok + 50 * 6 * 9, fs.n * 6 * 9 * sizeof *fs.tok),
	   "  the same frames, seq and epoch");
	is_int(fs.end.seq, f1.end.seq, "  the same END frame seq");
	free(st.buf);
	free(fs.tok);
	run_feed(&st, &o, 1000);
	decode(&fs, &st);
	ok(st.rc == 0 && fs.ok && fs.n == 0 && fs.end.seq == 70,
	   "start past the end: only the END frame (seq 70)");
	free(st.buf);
	free(fs.tok);
	struct loom_err e;
	struct loom_feed_stats s = { 0 };
	struct loom_feed *f = loom_feed_new(&o, &e);
	if (f && loom_feed_start(f, 50) == 0)
		loom_feed_get_stats(f, &s);
	ok(s.seq == 50 && s.epoch == 1 && s.frames == 0 && s.bytes == 0,
	   "stats before the first frame: its seq and epoch, nothing delivered");
	loom_feed_free(f);
	o.epochs = 0;
	f = loom_feed_new(&o, &e);
	const void *p;
	size_t n;
	int rc = f ? loom_feed_start(f, 0) : -1;
	for (int i = 0; rc == 0 && i < 200; i++)
		rc = loom_feed_next(f, &p, &n) == 1 ? 0 : -1;
	ok(rc == 0, "epochs 0: endless (200 frames, 35 a epoch)");
	loom_feed_free(f);
	free(w1.buf);
	free(f1.tok);
}

/* Records from every shard from the first frames on; a shard list in the
 * manifest's order gives the manifest's bytes. */
static void across_shards(void)
{
	/* contiguous shards: records 0..69 in shard 0, 70..139 in 1, ... */
	const char *m = make_shards("c", 210, 9, 0, 70, 0);
	struct loom_feed_opts o = opts(m, 5, 9, 11, 1);
	struct run a, b;
	struct frames fa;
	run_feed(&a, &o, 0);
	decode(&fa, &a);
	int from[3] = { 0 };
	for (size_t i = 0; i < 15; i++)
		from[RECORD(&fa, i, 9) / 70]++;
	ok(from[0] && from[1] && from[2], "the first 3 frames draw from all 3 shards (%d %d %d)",
	   from[0], from[1], from[2]);
	char p[3][300];
	const char *files[3] = { shard_path(p[0], 300, "c", 0, 3),
				 shard_path(p[1], 300, "c", 1, 3), shard_path(p[2], 300, "c", 2, 3) };
	o.manifest = NULL;
	o.shards = files;
	o.nshards = 3;
	run_feed(&b, &o, 0);
	ok(b.rc == 0 && b.len == a.len && !memcmp(a.buf, b.buf, a.len),
	   "the shard files in the manifest's order: the manifest's bytes");
	free(b.buf);
	const char *swapped[3] = { files[1], files[0], files[2] };
	o.shards = swapped;
	run_feed(&b, &o, 0);
	ok(b.rc == 0 && b.len == a.len && memcmp(a.buf, b.buf, a.len),
	   "  in another order: other bytes (records are numbered across shards)");
	free(a.buf);
	free(b.buf);
	free(fa.tok);
}

/* Shapes: rows cut to T+1, short records padded or refused, dtypes, text. */
static void shapes(const char *m, const char *m5, const char *mbig)
{
	struct loom_feed_opts o = opts(m, 4, 6, 1, 1);
	struct run r;
	struct frames fr;
	run_feed(&r, &o, 0);
	decode(&fr, &r);
	ok(r.rc == 0 && fr.n == 52 && fr.h[0].batch == 4 && fr.h[0].seq_len == 6 &&
	   fr.h[0].dtype == LOOM_BATCH_U16 && !(fr.h[0].flags & LOOM_BATCH_F_PAD),
	   "seq_len 6 of records of 9: u16 frames of 4 x 6");
	ok(rows_whole(&fr, 9, 0), "  rows are the records' first 6 ids");
	free(r.buf);
	free(fr.tok);

	o = opts(m5, 4, 9, 1, 1);
	o.pad = 1;
	o.pad_id = 999;
	run_feed(&r, &o, 0);
	decode(&fr, &r);
	int padded = 1;
	for (size_t i = 0; i < fr.n * 4; i++) {
		const uint32_t *row = fr.tok + i * 9;
		padded &= row[0] % 5 == 0 && row[4] == row[0] + 4;
		for (int k = 5; k < 9; k++)
			padded &= row[k] == 999;
	}
	ok(r.rc == 0 && fr.n == 50 && padded, "records of 5, seq_len 9, pad 999: 5 ids, 4 pads");
	ok((fr.h[0].flags & LOOM_BATCH_F_PAD) && fr.h[0].pad_id == 999 &&
	   (fr.end.flags & LOOM_BATCH_F_PAD) && fr.end.pad_id == 999,
	   "  frames and END frame carry the PAD flag and the pad id");
	free(r.buf);
	free(fr.tok);
	o.pad = 0;
	run_feed(&r, &o, 0);
	is_int(r.rc, LOOM_EFORMAT, "records of 5, seq_len 9, no pad: refused");
	ok(strstr(r.msg, "s5.manifest.json: records have seq_len 5 tokens but --seq 8 needs 9"),
	   "  naming the manifest: %s", r.msg);
	char p[300];
	const char *file = shard_path(p, sizeof p, "s5", 0, 1);
	o.manifest = NULL;
	o.shards = &file;
	o.nshards = 1;
	run_feed(&r, &o, 0);
	is_int(r.rc, LOOM_EFORMAT, "  given as a shard file: refused at the first frame");
	ok(strstr(r.msg, "s5-00000-of-00001.tfrecord: record ") &&
	   strstr(r.msg, " has 5 tokens but --seq 8 needs 9 (use --pad ID"),
	   "  naming the shard and the record: %s", r.msg);
	free(r.buf);

	o = opts(mbig, 2, 9, 1, 1);
	run_feed(&r, &o, 0);
	decode(&fr, &r);
	ok(r.rc == 0 && fr.h[0].dtype == LOOM_BATCH_U32 && fr.tok[0] >= 70000,
	   "ids >= 2^16, dtype auto: u32 frames");
	free(r.buf);
	free(fr.tok);
	o.dtype = LOOM_BATCH_U16;
	run_feed(&r, &o, 0);
	is_int(r.rc, LOOM_ERANGE, "  dtype u16: refused");
	is_str(r.msg, "batch 0: a token id does not fit --dtype u16", "  says so");
	free(r.buf);
	o = opts(m, 4, 9, 1, 1);
	o.dtype = LOOM_BATCH_U32;
	run_feed(&r, &o, 0);
	decode(&fr, &r);
	ok(r.rc == 0 && fr.h[0].dtype == LOOM_BATCH_U32 && fr.end.dtype == LOOM_BATCH_U32,
	   "small ids, dtype u32: u32 frames");
	free(r.buf);
	free(fr.tok);

	o = opts(m, 2, 3, 1, 1);
	o.text = 1;
	run_feed(&r, &o, 0);
	char want[64];
	int a = r.len > 0 ? atoi((char *)r.buf + 6) : -1;
	snprintf(want, sizeof want, "0 0 0: %d %d %d\n0 0 1: ", a, a + 1, a + 2);
	ok(r.rc == 0 && r.len > strlen(want) && !memcmp(r.buf, want, strlen(want)),
	   "text: \"SEQ EPOCH ROW: ids\" lines");
	int lines = 0;
	for (size_t i = 0; i < r.len; i++)
		lines += r.buf[i] == '\n';
	is_int(lines, 210, "  one per record, and no END frame");
	free(r.buf);
}

static char notes[8][600];
static int nnotes;

static void note(void *ctx, const char *line)
{
	(*(int *)ctx)++;
	if (nnotes < 8)
		snprintf(notes[nnotes++], sizeof notes[0], "%s", line);
}

static void notes_said(const char *m)
{
	int calls = 0;
	struct loom_feed_opts o = opts(m, 5, 9, 11, 3);
	o.note = note;
	o.note_ctx = &calls;
	struct run r;
	run_feed(&r, &o, 50);
	is_int(calls, 5, "notes: 3 shards opened, 2 epochs (resumed, started)");
	char want[600];
	snprintf(want, sizeof want, "shard %s/d-00000-of-00003.tfrecord: 70 records, index "
		 "%s/d-00000-of-00003.tfrecord.index", dir, dir);
	is_str(notes[0], want, "  a shard: its records and index");
	is_str(notes[3], "epoch 1 resumes at batch 50 (its batches 42 to 83), seed 11",
	       "  the epoch resumed");
	is_str(notes[4], "epoch 2 starts at batch 84 (its batches 84 to 125), seed 11",
	       "  the next epoch");
	free(r.buf);
}

static void write_file(const char *name, const void *data, size_t len)
{
	char path[4200];
	struct loom_err e;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (loom_write_file_atomic(path, data, len, &e) < 0)
		diag("%s", e.msg);
}

static void write_text(const char *name, const char *text)
{
	write_file(name, text, strlen(text));
}

/* A manifest `name` whose shards are d's with `entry` for the second. */
static void manifest_with(const char *name, const char *entry)
{
	char text[1000];
	snprintf(text, sizeof text, "{\"seq_len\": 9, \"shards\": [{\"file\": "
		 "\"d-00000-of-00003.tfrecord\"}, %s]}", entry);
	write_text(name, text);
}

/* Run a feed of manifest dir/NAME (or shard file dir/NAME); check the
 * code and that the message has `has`. */
static void refused(const char *name, int shard, int verify, int code, const char *has,
		    const char *what)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	const char *file = path;
	struct loom_feed_opts o = opts(shard ? NULL : path, 2, 9, 1, 1);
	o.verify = verify;
	if (shard) {
		o.shards = &file;
		o.nshards = 1;
	}
	struct run r;
	run_feed(&r, &o, 0);
	is_int(r.rc, code, "%s: refused", what);
	ok(strstr(r.msg, has) != NULL, "  %s", r.msg);
	if (!strstr(r.msg, has))
		diag("expected: ...%s...", has);
	free(r.buf);
}

static void bad_input(const char *m)
{
	char d0[300], d1[300], i0[310], text[2000], has[600];
	shard_path(d0, sizeof d0, "d", 0, 3);
	shard_path(d1, sizeof d1, "d", 1, 3);
	struct stat st;
	stat(d1, &st);

	refused("none.json", 0, 0, LOOM_EIO, "none.json", "a missing manifest");
	static const struct { const char *name, *text; int code; const char *has, *what; } bad[] = {
		{ "junk.json", "{\"shards\": [\n  oops", LOOM_EFORMAT, "junk.json: line 2: ",
		  "a manifest that is not JSON" },
		{ "dup.json", "{\"shards\": [], \"shards\": []}", LOOM_EFORMAT,
		  "dup.json: line 1: duplicate object key", "a duplicate key" },
		{ "noshards.json", "{\"shards\": 3}", LOOM_EFORMAT,
		  "noshards.json: no \"shards\" list", "\"shards\" not a list" },
		{ "empty.json", "{\"shards\": []}", LOOM_EFORMAT, "empty.json: no \"shards\" list",
		  "an empty shard list" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		write_text(bad[i].name, bad[i].text);
		refused(bad[i].name, 0, 0, bad[i].code, bad[i].has, bad[i].what);
	}
	manifest_with("nofile.json", "{\"index\": \"x\"}");
	refused("nofile.json", 0, 0, LOOM_EFORMAT, "nofile.json: shards[1] has no \"file\"",
		"an entry without a file");
	manifest_with("gone.json", "{\"file\": \"gone.tfrecord\"}");
	snprintf(has, sizeof has, "gone.json: cannot open shard '%s/gone.tfrecord'", dir);
	refused("gone.json", 0, 0, LOOM_EIO, has, "a shard that is not there");
	snprintf(text, sizeof text, "{\"file\": \"d-00001-of-00003.tfrecord\", \"bytes\": %lld}",
		 (long long)st.st_size + 1);
	manifest_with("size.json", text);
	snprintf(has, sizeof has, "size.json: shard '%s' is %lld bytes, the manifest says %lld",
		 d1, (long long)st.st_size, (long long)st.st_size + 1);
	refused("size.json", 0, 0, LOOM_EFORMAT, has, "a shard of another size");
	manifest_with("recs.json", "{\"file\": \"d-00001-of-00003.tfrecord\", \"records\": 71}");
	snprintf(has, sizeof has, "recs.json: shard '%s' has 70 records, the manifest says 71", d1);
	refused("recs.json", 0, 0, LOOM_EFORMAT, has, "a shard with other records");
	manifest_with("sha.json", "{\"file\": \"d-00001-of-00003.tfrecord\", \"sha256\": "
		      "\"00000000000000000000000000000000000000000000000000000000000000ff\"}");
	snprintf(has, sizeof has, "sha.json: shard '%s' has sha256 ", d1);
	refused("sha.json", 0, 1, LOOM_ECHECKSUM, has, "verify: a shard with another sha256");
	struct run r;
	struct loom_feed_opts o = opts(NULL, 2, 9, 1, 1);
	char path[4200];
	snprintf(path, sizeof path, "%s/sha.json", dir);
	o.manifest = path;
	run_feed(&r, &o, 0);
	is_int(r.rc, 0, "  without verify the sha256 is not read");
	free(r.buf);
	o.manifest = m;
	o.verify = 1;
	run_feed(&r, &o, 0);
	is_int(r.rc, 0, "  verify: loom-shard's own manifest passes");
	free(r.buf);

	refused("nope.tfrecord", 1, 0, LOOM_EIO, "nope.tfrecord", "a missing shard file");
	/* a copy of shard 0 with a byte of a record's payload changed */
	char *data;
	size_t len;
	struct loom_err e;
	if (loom_read_file(d0, &data, &len, &e) == 0) {
		data[30] ^= 0x40;
		write_file("bad.tfrecord", data, len);
		free(data);
	}
	snprintf(i0, sizeof i0, "%s.index", d0);
	if (loom_read_file(i0, &data, &len, &e) == 0) {
		write_file("bad.tfrecord.index", data, len);
		free(data);
	}
	refused("bad.tfrecord", 1, 0, LOOM_ECHECKSUM, "bad.tfrecord: record 0 at byte 0: ",
		"a shard with a bad record (when its frame is made)");
	o = opts(m, 71, 9, 1, 1);
	o.world = 3;
	run_feed(&r, &o, 0);
	is_int(r.rc, LOOM_EINVAL, "fewer records than one global batch");
	is_str(r.msg, "210 records are fewer than one global batch of 213 (--batch 71 x --world 3)",
	       "  says so");
	o = opts(m, 2, 9, 1, 1);
	o.rank = 2;
	o.world = 2;
	run_feed(&r, &o, 0);
	is_int(r.rc, LOOM_EINVAL, "rank 2 of 2: invalid");
	o = opts(m, 2, 9, 1, 1);
	o.shards = (const char *const[]){ d0 };
	o.nshards = 1;
	run_feed(&r, &o, 0);
	is_int(r.rc, LOOM_EINVAL, "a manifest and shard files: invalid");
}

static void manifest_read(void)
{
	write_text("any.json", "{\"feature\": \"ids\", \"seq_len\": 7, \"shards\": [\"a.tfrecord\", "
		   "{\"path\": \"b\", \"index\": \"b.idx\", \"records\": 3}, "
		   "{\"path\": \"c\", \"sha256\": null}]}");
	char path[4200];
	snprintf(path, sizeof path, "%s/any.json", dir);
	struct loom_manifest m;
	struct loom_err e;
	int rc = loom_manifest_read(path, &m, &e);
	is_int(rc, 0, "loom_manifest_read");
	if (rc)
		return;
	ok(!strcmp(m.feature, "ids") && m.has_seq_len && m.seq_len == 7 && m.nshards == 3,
	   "  feature, seq_len, 3 shards");
	ok(m.shards[0].bare && !strcmp(m.shards[0].file, "a.tfrecord") && !m.shards[0].index,
	   "  a bare string is a file name");
	ok(!m.shards[1].bare && !strcmp(m.shards[1].file, "b") &&
	   !strcmp(m.shards[1].index, "b.idx") && m.shards[1].has_records &&
	   m.shards[1].records == 3 && !m.shards[1].has_bytes,
	   "  \"path\" when there is no \"file\"; no size: none");
	ok(!strcmp(m.shards[2].file, "c") && !m.shards[2].sha256, "  a null sha256: none");
	loom_manifest_release(&m);
	loom_manifest_release(&m);
	ok(1, "loom_manifest_release twice");
	/* a key of the wrong type is refused by name (formats/manifest.md) */
	static const struct {
		const char *json, *msg;
	} bad[] = {
		{ "{\"shards\": [{\"file\": \"b\", \"bytes\": \"4\"}]}",
		  "shards[0].bytes is \"4\", expected a whole number >= 0" },
		{ "{\"shards\": [\"a\", {\"file\": \"b\", \"records\": -1}]}",
		  "shards[1].records is -1, expected a whole number >= 0" },
		{ "{\"shards\": [{\"file\": \"b\", \"sha256\": 1}]}",
		  "shards[0].sha256 is 1, expected a string or null" },
		{ "{\"shards\": [{\"file\": \"b\", \"index\": null}]}",
		  "shards[0].index is null, expected a string" },
		{ "{\"seq_len\": 2.5, \"shards\": [\"a\"]}", "seq_len is 2.5, expected a whole number >= 0" },
		{ "{\"feature\": [], \"shards\": [\"a\"]}", "feature is [], expected a string" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		write_text("bad.json", bad[i].json);
		snprintf(path, sizeof path, "%s/bad.json", dir);
		is_int(loom_manifest_read(path, &m, &e), LOOM_EFORMAT, "wrong type %zu refused", i);
		ok(strstr(e.msg, "bad.json: ") && strstr(e.msg, bad[i].msg), "  %s", e.msg);
		loom_manifest_release(&m);
	}
	loom_feed_free(NULL);
	ok(1, "loom_feed_free(NULL)");
}

/* loom_ckpt_feed_resume: a checkpoint's data position checked against the
 * feed (seed, global batch, sequence length) and against itself. */
static uint64_t resume_at(const char *m, const char *state, uint32_t B, uint32_t T1,
			  uint64_t seed, uint32_t world, int *rc, struct loom_err *e)
{
	char ck[300], p[320];
	snprintf(ck, sizeof ck, "%s/ck", dir);
	mkdir(ck, 0755);
	snprintf(p, sizeof p, "%s/config.json", ck);
	FILE *f = fopen(p, "w");
	fputs("{}\n", f);
	fclose(f);
	snprintf(p, sizeof p, "%s/state.json", ck);
	f = fopen(p, "w");
	fputs(state, f);
	fclose(f);
	struct loom_feed_opts o = opts(m, B, T1, seed, 2);
	o.world = world;
	struct loom_feed *fd = loom_feed_new(&o, e);
	uint64_t seq = 12345;
	*rc = fd ? loom_ckpt_feed_resume(ck, &o, fd, &seq, e) : -100;
	loom_feed_free(fd);
	return seq;
}

static void resume(const char *m)
{
	struct loom_err e;
	int rc;
	const char *st = "{\"step\": 7, \"samples\": 240, \"data\": {\"next_seq\": 60, \"epoch\": 1, "
			 "\"seed\": 1, \"batch\": 4, \"seq_len\": 9, \"world\": 1}}";
	ok(resume_at(m, st, 4, 9, 1, 1, &rc, &e) == 60 && rc == 0, "resume: next_seq 60");
	ok(resume_at(m, st, 2, 9, 1, 2, &rc, &e) == 60 && rc == 0, "2 ranks of 2: the same global batch");
	resume_at(m, st, 4, 9, 2, 1, &rc, &e);
	ok(rc == LOOM_EINVAL && !strcmp(e.msg, "the checkpoint was trained on --seed 1, not 2"), "%s", e.msg);
	resume_at(m, st, 8, 9, 1, 1, &rc, &e);
	ok(rc == LOOM_EINVAL && !strcmp(e.msg, "the checkpoint's global batch is 4 records (4 x 1), this one 8"),
	   "%s", e.msg);
	resume_at(m, st, 4, 6, 1, 1, &rc, &e);
	ok(rc == LOOM_EINVAL && !strcmp(e.msg, "the checkpoint was trained on --seq 8, not 5"), "%s", e.msg);
	resume_at(m, "{\"step\": 7, \"data\": {\"next_seq\": 60, \"epoch\": 3, \"seed\": 1, "
		  "\"batch\": 4, \"seq_len\": 9, \"world\": 1}}", 4, 9, 1, 1, &rc, &e);
	ok(rc == LOOM_EFORMAT && strstr(e.msg, "ck: state.json disagrees with itself: data.epoch is 3, "
					"but data.next_seq 60 is in epoch 1"), "%s", e.msg);
	resume_at(m, "{\"step\": 7, \"samples\": 241, \"data\": {\"next_seq\": 60, \"epoch\": 1, "
		  "\"seed\": 1, \"batch\": 4, \"seq_len\": 9, \"world\": 1}}", 4, 9, 1, 1, &rc, &e);
	ok(rc == LOOM_EFORMAT && strstr(e.msg, "'samples' is 241, but data.next_seq 60 batches of 4 x 1 hold 240"),
	   "%s", e.msg);
	ok(resume_at(m, "{\"step\": 3}", 4, 9, 1, 1, &rc, &e) == 0 && rc == 0,
	   "a state without a data position: from 0");
}

int main(void)
{
	dir = tap_tmpdir();
	const char *m = make_shards("d", 210, 9, 3, 0, 0);
	char mm[256], m5[256], mbig[256];
	snprintf(mm, sizeof mm, "%s", m);
	snprintf(m5, sizeof m5, "%s", make_shards("s5", 200, 5, 1, 0, 0));
	snprintf(mbig, sizeof mbig, "%s", make_shards("big", 20, 9, 2, 0, 70000));
	permutation(mm);
	workers(mm);
	ranks_and_start(mm);
	across_shards();
	shapes(mm, m5, mbig);
	notes_said(mm);
	bad_input(mm);
	manifest_read();
	resume(mm);
	struct loom_feed_opts o = { .batch = 4, .rank = 1, .world = 2 };
	struct loom_feed_stats st = { .records = 210, .shards = 3, .per_epoch = 52, .frames = 10,
				      .bytes = 3000000, .seq_len = 9, .features = 2 };
	char line[512];
	loom_feed_summary(&o, &st, 2, line, sizeof line);
	is_str(line, "10 batches of 4x9 + 2 features (rank 1 of 2) from 210 records in 3 shards "
		     "(52 batches/epoch), 3.0 MB in 2.00 s: 20 records/s, 1.5 MB/s", "summary line");
	st = (struct loom_feed_stats){ .records = 1, .shards = 1, .frames = 1, .seq_len = 5 };
	loom_feed_summary(&o, &st, 0, line, sizeof line);
	is_str(line, "1 batch of 4x5 (rank 1 of 2) from 1 record in 1 shard (0 batches/epoch), 0 B in "
		     "0.00 s: 0 records/s, 0.0 MB/s", "summary line: one of each, no time");
	return done_testing();
}
