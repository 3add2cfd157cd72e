/* loom_shard.c - see loom_shard.h */
#include "loom_shard.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <pthread.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "loom_example.h"
#include "loom_file.h"
#include "loom_reader.h"
#include "loom_tfrecord.h"

/* ======================================================================
 * Token input
 * ====================================================================== */

int loom_tokfmt_parse(const char *s, enum loom_tokfmt *fmt)
{
	if (!strcmp(s, "u16"))
		*fmt = LOOM_TOK_U16;
	else if (!strcmp(s, "u32"))
		*fmt = LOOM_TOK_U32;
	else if (!strcmp(s, "text"))
		*fmt = LOOM_TOK_TEXT;
	else
		return LOOM_EINVAL;
	return 0;
}

const char *loom_tokfmt_name(enum loom_tokfmt fmt)
{
	return fmt == LOOM_TOK_U16 ? "u16" : fmt == LOOM_TOK_U32 ? "u32" : "text";
}

#define TOKIN_BUF (1u << 20)

struct loom_tokin {
	struct loom_reader rd;
	int own;
	char *name;
	enum loom_tokfmt fmt;
	uint64_t size;
	uint64_t line;       /* text: current line (1-based) */
	struct loom_err err;
};

struct loom_tokin *loom_tokin_open(const char *path, enum loom_tokfmt fmt,
				   struct loom_err *err)
{
	struct loom_tokin *t = calloc(1, sizeof *t);
	if (!t || loom_reader_init(&t->rd, -1, TOKIN_BUF) ||
	    !(t->name = strdup(strcmp(path, "-") ? path : "(stdin)"))) {
		if (t)
			loom_reader_release(&t->rd);
		free(t);
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	t->fmt = fmt;
	t->line = 1;
	if (strcmp(path, "-") == 0) {
		t->rd.fd = STDIN_FILENO;
	} else {
		t->rd.fd = open(path, O_RDONLY | O_CLOEXEC);
		if (t->rd.fd < 0) {
			loom_err_errno(err, LOOM_EIO, errno, "cannot open '%s'", path);
			loom_tokin_free(t);
			return NULL;
		}
		t->own = 1;
	}
	struct stat st;
	if (fstat(t->rd.fd, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			loom_err_set(err, LOOM_EIO, "cannot read '%s': Is a directory", path);
			loom_tokin_free(t);
			return NULL;
		}
		if (S_ISREG(st.st_mode)) {
			t->size = (uint64_t)st.st_size;
#ifdef POSIX_FADV_SEQUENTIAL
			posix_fadvise(t->rd.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
		}
	}
	return t;
}

/* Refill: keep the unread bytes, read until 64 KiB (or, for a token cut
 * by the end of the buffer, at least one more byte) are unread. */
static int tokin_fill(struct loom_tokin *t)
{
	size_t want = t->rd.end - t->rd.start + 1;
	ssize_t got = loom_reader_fill(&t->rd, want > 65536 ? want : 65536);
	if (got == LOOM_EIO)
		return loom_err_errno(&t->err, LOOM_EIO, t->rd.errnum, "cannot read '%s'", t->name);
	if (got < 0)
		return loom_err_set(&t->err, (int)got, "out of memory");
	return 0;
}

/* u16 little-endian -> u32 (a loop the compiler vectorizes). */
static void widen_u16(uint32_t *restrict out, const uint8_t *restrict p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint16_t v;
		memcpy(&v, p + 2 * i, 2);
		out[i] = v;
	}
}

static ssize_t tokin_binary(struct loom_tokin *t, uint32_t *out, size_t cap)
{
	size_t w = t->fmt == LOOM_TOK_U16 ? 2 : 4;
	if (t->rd.end - t->rd.start < w && !t->rd.eof) {
		int rc = tokin_fill(t);
		if (rc < 0)
			return rc;
	}
	size_t avail = (t->rd.end - t->rd.start) / w;
	if (avail == 0) {
		if (t->rd.end > t->rd.start)
			return loom_err_set(&t->err, LOOM_ETRUNC,
					    "%s: input ends inside a %s token (%zu stray byte%s at"
					    " byte %" PRIu64 ")", t->name,
					    loom_tokfmt_name(t->fmt), t->rd.end - t->rd.start,
					    t->rd.end - t->rd.start == 1 ? "" : "s",
					    t->rd.pos + t->rd.start);
		return 0;
	}
	if (avail > cap)
		avail = cap;
	const uint8_t *p = t->rd.buf + t->rd.start;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (w == 2)
		widen_u16(out, p, avail);
	else
		memcpy(out, p, avail * 4);
#else
	if (w == 2)
		for (size_t i = 0; i < avail; i++)
			out[i] = (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
	else
		for (size_t i = 0; i < avail; i++)
			out[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
				 (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
#endif
	t->rd.start += avail * w;
	return (ssize_t)avail;
}

static inline int is_space(uint8_t c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static ssize_t tokin_text(struct loom_tokin *t, uint32_t *out, size_t cap)
{
	size_t n = 0;
	while (n < cap) {
		/* Skip whitespace. */
		while (t->rd.start < t->rd.end && is_space(t->rd.buf[t->rd.start]))
			t->line += t->rd.buf[t->rd.start++] == '\n';
		if (t->rd.start == t->rd.end) {
			if (t->rd.eof || n)
				break;
			int rc = tokin_fill(t);
			if (rc < 0)
				return rc;
			continue;
		}
		/* A token must be complete in the buffer: refill if it may continue. */
		size_t e = t->rd.start;
		while (e < t->rd.end && !is_space(t->rd.buf[e]))
			e++;
		if (e == t->rd.end && !t->rd.eof) {
			if (t->rd.start == 0 && t->rd.end >= TOKIN_BUF)
				return loom_err_set(&t->err, LOOM_EFORMAT,
						    "%s: line %" PRIu64 ": token longer than 1 MiB",
						    t->name, t->line);
			if (n)
				break; /* return what we have; next call refills */
			int rc = tokin_fill(t);
			if (rc < 0)
				return rc;
			continue;
		}
		const uint8_t *p = t->rd.buf + t->rd.start;
		size_t len = e - t->rd.start;
		uint64_t v = 0;
		int digits = 1;
		for (size_t i = 0; i < len; i++) {
			if (p[i] < '0' || p[i] > '9') {
				digits = 0;
				break;
			}
			if (v <= UINT32_MAX)
				v = v * 10 + (p[i] - '0');
		}
		if (!digits || v > UINT32_MAX) {
			char shown[40];
			size_t sl = len < 32 ? len : 32;
			memcpy(shown, p, sl);
			shown[sl] = 0;
			for (size_t i = 0; i < sl; i++)
				if ((uint8_t)shown[i] < 0x20 || (uint8_t)shown[i] >= 0x7f)
					shown[i] = '?';
			return loom_err_set(&t->err, digits ? LOOM_ERANGE : LOOM_EFORMAT,
					    "%s: line %" PRIu64 ": token '%s%s' %s", t->name, t->line,
					    shown, len > sl ? "..." : "",
					    digits ? "is >= 2^32" : "is not a number");
		}
		out[n++] = (uint32_t)v;
		t->rd.start = e;
	}
	return (ssize_t)n;
}

ssize_t loom_tokin_read(struct loom_tokin *t, uint32_t *out, size_t cap)
{
	if (t->err.code)
		return t->err.code;
	if (!cap)
		return 0;
	return t->fmt == LOOM_TOK_TEXT ? tokin_text(t, out, cap) : tokin_binary(t, out, cap);
}

uint64_t loom_tokin_bytes(const struct loom_tokin *t)
{
	return t->rd.pos + t->rd.start;
}

uint64_t loom_tokin_size(const struct loom_tokin *t)
{
	return t->size;
}

void loom_tokin_free(struct loom_tokin *t)
{
	if (!t)
		return;
	if (t->own)
		close(t->rd.fd);
	free(t->name);
	loom_reader_release(&t->rd);
	free(t);
}

const char *loom_tokin_error(const struct loom_tokin *t)
{
	return t->err.msg;
}

/* ======================================================================
 * Sample rules
 * ====================================================================== */

uint64_t loom_shard_count(uint64_t n, uint32_t seq_len, uint32_t stride, int keep_tail,
			  uint64_t *tail)
{
	uint64_t L = seq_len, S = stride ? stride : seq_len, k = 0;
	if (n > L)
		k = (n - L - 1) / S + 1; /* starts 0, S, ... < n - L */
	uint64_t next = k * S, t = 0;
	if (keep_tail && next < n && (n - next) * 2 >= L)
		t = n - next;
	if (tail)
		*tail = t;
	return k + (t ? 1 : 0);
}

uint64_t loom_shard_key(uint64_t seed, uint64_t i)
{
	/* A bijection of i for a fixed seed: no two samples share a key. */
	return loom_mix64(i * 0x9E3779B97F4A7C15ull + seed);
}

void loom_shard_name(char *out, size_t n, const char *prefix, uint64_t i, uint64_t total)
{
	snprintf(out, n, "%s-%05" PRIu64 "-of-%05" PRIu64 ".tfrecord", prefix, i, total);
}

/* ======================================================================
 * Sharder
 * ====================================================================== */

uint64_t loom_shard_default_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	uint64_t m = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize / 4 : 0;
	return m > (512ull << 20) ? m : 512ull << 20;
}

#define NBUCKET 256
#define BATCH_TOKENS (1u << 20) /* a batch of windows encoded together */
#define BATCH_MAX 4096
#define REC_HDR 12 /* bucket record: u64 key, u32 payload length */

struct ent {
	uint64_t key;
	uint64_t off;
	uint32_t len;
};

struct bucket {
	int fd;
	uint8_t *buf;
	size_t used;
	uint64_t bytes;
};

struct encoder_arg {
	struct loom_shard *s;
	int k;
};

struct loom_shard {
	struct loom_shard_opts o;
	char *prefix, *tmpdir, *feature, *vocab_sha256, *input_format;
	char **argv;
	uint64_t L, S;

	/* window state */
	uint32_t *tb;
	size_t tcap, tlen;
	uint64_t tb0;        /* stream index of tb[0] */
	uint64_t next;       /* next window start */
	uint64_t total;      /* tokens seen */
	uint64_t nsamples;   /* samples kept (this side of a validation split) */
	uint64_t nseen;      /* samples cut from the stream (their key index) */
	uint64_t nout;       /* samples that reached the output order */
	uint64_t tail;

	uint8_t *enc;        /* scratch for one encoded sample */
	size_t enc_cap;
	/* samples waiting to be encoded: their tokens (u16 if b16, else u32)
	 * and counts */
	const void **bptr;
	size_t *bcnt, *blen, bn, batch;
	int b16;
	unsigned width;      /* shuffle: bytes per stored token (2 or 4) */
	uint8_t *bbuf;       /* batch x enc_cap */
	int threads;
	/* encoder threads (see encoder()) */
	pthread_mutex_t mu;
	pthread_cond_t go, cv_done;
	unsigned gen;
	int pending, quit, nenc, enc_failed;
	pthread_t *enc_tid;
	struct encoder_arg *enc_arg;

	/* shuffle: in memory */
	uint8_t *arena;
	size_t alen, acap;
	struct ent *ents;
	size_t nents, ecap;
	/* shuffle: spilled */
	int spilled;
	struct bucket *bk;   /* NBUCKET */
	size_t bk_bufsize;
	uint64_t spill_bytes;

	/* writers */
	struct loom_tfr_writer **w;
	uint64_t nw, wcap;
	uint64_t written;    /* records handed to writers */
	size_t wbuf;

	/* the output set (see "Committing the set" below) */
	char *dir, *base;    /* the prefix's directory and last component */
	char run[16];        /* this run's id, in the names of its files */
	char **old;          /* files named by the manifest found at the start */
	size_t nold;
	char *lock_path;
	int lock_fd;
	char **done;         /* this run's files, removed again on failure */
	size_t ndone;
	int finished;
	json_t *run_set, *final_set; /* prepared: the manifests under the run's
					and the final names, until the commit */
	struct loom_shard_stats st;
	struct loom_err err;
};

static int open_set(struct loom_shard *s);

static char *dupz(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int nomem(struct loom_shard *s)
{
	return loom_err_set(&s->err, LOOM_ENOMEM, "out of memory");
}

struct loom_shard *loom_shard_new(const struct loom_shard_opts *o, struct loom_err *err)
{
	if (!o->prefix || !*o->prefix || o->seq_len == 0 ||
	    (o->shards == 0 && o->records_per_shard == 0)) {
		loom_err_set(err, LOOM_EINVAL, "invalid sharding options");
		return NULL;
	}
	struct loom_shard *s = calloc(1, sizeof *s);
	if (!s) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	s->o = *o;
	s->lock_fd = -1;
	s->L = o->seq_len;
	s->S = o->stride ? o->stride : o->seq_len;
	s->prefix = dupz(o->prefix);
	s->feature = dupz(o->feature ? o->feature : LOOM_EXAMPLE_IDS);
	s->vocab_sha256 = dupz(o->vocab_sha256);
	s->input_format = dupz(o->input_format);
	if (o->tmpdir) {
		s->tmpdir = dupz(o->tmpdir);
	} else {
		char *c = dupz(o->prefix);
		s->tmpdir = c ? dupz(dirname(c)) : NULL;
		free(c);
	}
	if (s->tmpdir && !o->tmpdir && loom_mkdir_p(s->tmpdir, err) < 0) {
		/* the output directory, created as mkdir -p */
		loom_shard_free(s);
		return NULL;
	}
	if (s->tmpdir) {
		struct stat st;
		if (stat(s->tmpdir, &st) < 0 || !S_ISDIR(st.st_mode)) {
			loom_err_set(err, LOOM_EIO, "%s directory '%s' does not exist",
				     o->tmpdir ? "temporary" : "output", s->tmpdir);
			loom_shard_free(s);
			return NULL;
		}
		if (access(s->tmpdir, W_OK) < 0) {
			loom_err_errno(err, LOOM_EIO, errno, "cannot write to '%s'", s->tmpdir);
			loom_shard_free(s);
			return NULL;
		}
	}
	s->argv = calloc((size_t)o->argc + 1, sizeof *s->argv);
	int bad = !s->prefix || !s->feature || !s->tmpdir || !s->argv ||
		  (o->vocab_sha256 && !s->vocab_sha256) || (o->input_format && !s->input_format);
	for (int i = 0; !bad && i < o->argc; i++)
		bad = !(s->argv[i] = strdup(o->argv[i]));
	s->o.prefix = s->prefix;
	s->o.feature = s->feature;
	s->o.tmpdir = s->tmpdir;
	s->o.vocab_sha256 = s->vocab_sha256;
	s->o.input_format = s->input_format;
	s->o.argv = s->argv;
	if (!s->o.memory)
		s->o.memory = loom_shard_default_memory();
	/* Raw samples kept for the shuffle: 2 bytes a token when every id is
	 * known to fit (u16 input, or a vocabulary of at most 2^16). */
	s->width = (o->input_format && !strcmp(o->input_format, "u16")) ||
			   (o->vocab_size && o->vocab_size <= 65536) ? 2 : 4;
	/* The window buffer holds a sample plus a batch of tokens; a batch is
	 * about BATCH_TOKENS tokens of windows (fewer, larger parallel steps). */
	s->tcap = (size_t)s->L + BATCH_TOKENS;
	s->batch = BATCH_TOKENS / s->L;
	s->batch = s->batch < 4 ? 4 : s->batch > BATCH_MAX ? BATCH_MAX : s->batch;
	s->tb = malloc(s->tcap * sizeof *s->tb);
	s->enc_cap = loom_example_bound(strlen(s->feature), (size_t)s->L);
	s->enc = malloc(s->enc_cap);
	s->bbuf = malloc(s->batch * s->enc_cap);
	s->bptr = malloc(s->batch * sizeof *s->bptr);
	s->bcnt = malloc(s->batch * sizeof *s->bcnt);
	s->blen = malloc(s->batch * sizeof *s->blen);
	if (o->threads > 0) {
		s->threads = o->threads;
	} else {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		s->threads = n > 0 ? (int)n : 1;
	}
	if (s->threads > 64)
		s->threads = 64;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->go, NULL);
	pthread_cond_init(&s->cv_done, NULL);
	if (bad || !s->tb || !s->enc || !s->bbuf || !s->bptr || !s->bcnt || !s->blen) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		loom_shard_free(s);
		return NULL;
	}
	/* Per-writer buffer: an eighth of the budget over the writers. */
	uint64_t nwriters = o->shards ? o->shards : 1;
	uint64_t wb = s->o.memory / 8 / nwriters;
	s->wbuf = (size_t)(wb < (64u << 10) ? (64u << 10) : wb > (4u << 20) ? (4u << 20) : wb);
	uint64_t bb = s->o.memory / 4 / NBUCKET;
	s->bk_bufsize = (size_t)(bb < (4u << 10) ? (4u << 10) : bb > (1u << 20) ? (1u << 20) : bb);
	if (open_set(s) < 0) {
		*err = s->err;
		loom_shard_free(s);
		return NULL;
	}
	return s;
}

/* ---- writers ---- */

static int writer_path(struct loom_shard *s, uint64_t j, uint64_t total, char *out, size_t n)
{
	loom_shard_name(out, n, s->prefix, j, total);
	if (strlen(out) + 8 >= n)
		return loom_err_set(&s->err, LOOM_EINVAL, "output prefix too long");
	return 0;
}

static int open_writer(struct loom_shard *s, uint64_t j, uint64_t total)
{
	char path[4096];
	struct loom_err e;
	int rc = writer_path(s, j, total, path, sizeof path);
	if (rc < 0)
		return rc;
	if (j >= s->wcap) {
		uint64_t nc = s->wcap ? s->wcap * 2 : 16;
		while (nc <= j)
			nc *= 2;
		struct loom_tfr_writer **p = realloc(s->w, nc * sizeof *p);
		if (!p)
			return nomem(s);
		memset(p + s->wcap, 0, (nc - s->wcap) * sizeof *p);
		s->w = p;
		s->wcap = nc;
	}
	s->w[j] = loom_tfr_writer_new(path, s->wbuf,
				      (s->o.no_sha256 ? 0 : LOOM_TFW_SHA256) | LOOM_TFW_ASYNC, &e);
	if (!s->w[j])
		return loom_err_set(&s->err, e.code, "%s", e.msg);
	if (j + 1 > s->nw)
		s->nw = j + 1;
	return 0;
}

/* The writer for the next output record. */
static struct loom_tfr_writer *next_writer(struct loom_shard *s)
{
	uint64_t r = s->written, j;
	if (s->o.shards) {
		if (!s->nw)
			for (uint64_t k = 0; k < s->o.shards; k++)
				if (open_writer(s, k, s->o.shards) < 0)
					return NULL;
		j = r % s->o.shards;
	} else {
		j = r / s->o.records_per_shard;
		if (j >= s->nw && open_writer(s, j, 0) < 0)
			return NULL;
	}
	return s->w[j];
}

static int put_payload(struct loom_shard *s, const uint8_t *p, size_t n)
{
	if (s->o.val_records && (s->nout++ < s->o.val_records) != !!s->o.val)
		return 0; /* the other side of the validation split */
	if (s->o.progress && s->o.shuffle && (s->written & 4095) == 0)
		s->o.progress(s->o.progress_ctx, s->written, s->nsamples);
	struct loom_tfr_writer *w = next_writer(s);
	if (!w)
		return s->err.code ? s->err.code : LOOM_EIO;
	if (loom_tfr_writer_write(w, p, n) < 0)
		return loom_err_set(&s->err, LOOM_EIO, "%s", loom_tfr_writer_error(w));
	s->written++;
	return 0;
}

/* ---- buckets ---- */

static int tmp_fd(struct loom_shard *s)
{
	size_t n = strlen(s->tmpdir) + 32;
	char *path = malloc(n);
	if (!path)
		return nomem(s);
	snprintf(path, n, "%s/.loom-shard-XXXXXX", s->tmpdir);
	int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0) {
		int rc = loom_err_errno(&s->err, LOOM_EIO, errno,
					"cannot create a temporary file in '%s'", s->tmpdir);
		free(path);
		return rc;
	}
	unlink(path); /* anonymous from now on: nothing to clean up */
	free(path);
	return fd;
}

static int bucket_flush(struct loom_shard *s, struct bucket *b)
{
	if (!b->used)
		return 0;
	int rc = loom_write_all(b->fd, b->buf, b->used);
	if (rc < 0)
		return loom_err_errno(&s->err, LOOM_EIO, -rc, "cannot write a temporary file in '%s'",
				      s->tmpdir);
	s->spill_bytes += b->used;
	b->bytes += b->used;
	b->used = 0;
	return 0;
}

static int bucket_put(struct loom_shard *s, struct bucket *b, uint64_t key, const uint8_t *p,
		      size_t n)
{
	size_t need = REC_HDR + n;
	if (b->used + need > s->bk_bufsize) {
		int rc = bucket_flush(s, b);
		if (rc < 0)
			return rc;
	}
	if (need > s->bk_bufsize) { /* larger than the buffer: write through */
		uint8_t h[REC_HDR];
		memcpy(h, &key, 8);
		uint32_t l = (uint32_t)n;
		memcpy(h + 8, &l, 4);
		int rc = loom_write_all(b->fd, h, REC_HDR);
		if (rc == 0)
			rc = loom_write_all(b->fd, p, n);
		if (rc < 0)
			return loom_err_errno(&s->err, LOOM_EIO, -rc,
					      "cannot write a temporary file in '%s'", s->tmpdir);
		b->bytes += need;
		s->spill_bytes += need;
		return 0;
	}
	uint8_t *d = b->buf + b->used;
	uint32_t l = (uint32_t)n;
	memcpy(d, &key, 8);
	memcpy(d + 8, &l, 4);
	memcpy(d + REC_HDR, p, n);
	b->used += need;
	return 0;
}

static void buckets_free(struct bucket *bk, int nb)
{
	if (!bk)
		return;
	for (int i = 0; i < nb; i++) {
		if (bk[i].fd > 0)
			close(bk[i].fd);
		free(bk[i].buf);
	}
	free(bk);
}

static struct bucket *buckets_new(struct loom_shard *s, int nb)
{
	struct bucket *bk = calloc((size_t)nb, sizeof *bk);
	if (!bk) {
		nomem(s);
		return NULL;
	}
	for (int i = 0; i < nb; i++) {
		bk[i].fd = tmp_fd(s);
		bk[i].buf = malloc(s->bk_bufsize);
		if (bk[i].fd < 0 || !bk[i].buf) {
			if (bk[i].fd >= 0 && !bk[i].buf)
				nomem(s);
			if (bk[i].fd < 0)
				bk[i].fd = 0;
			buckets_free(bk, nb);
			return NULL;
		}
	}
	return bk;
}

/* Raw tokens, width (2 or 4) bytes each, native byte order; returns
 * nonzero if a token does not fit 2 bytes (the caller's promise broken). */
static int pack_tokens(uint8_t *restrict d, const uint32_t *restrict tok, size_t n,
		       unsigned width)
{
	if (width == 4) {
		memcpy(d, tok, n * 4);
		return 0;
	}
	size_t i = 0;
	uint32_t high = 0;
#if defined(__SSE2__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* Ids < 2^16: shifted into int16 range, packed with signed
	 * saturation (exact), shifted back: 8 ids a step. */
	const __m128i bias = _mm_set1_epi32(0x8000), flip = _mm_set1_epi16((short)0x8000);
	__m128i any = _mm_setzero_si128();
	for (; i + 8 <= n; i += 8) {
		__m128i a = _mm_loadu_si128((const __m128i *)(tok + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(tok + i + 4));
		any = _mm_or_si128(any, _mm_or_si128(a, b));
		a = _mm_sub_epi32(a, bias);
		b = _mm_sub_epi32(b, bias);
		_mm_storeu_si128((__m128i *)(d + 2 * i), _mm_xor_si128(_mm_packs_epi32(a, b), flip));
	}
	any = _mm_srli_epi32(any, 16);
	high = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi32(any, _mm_setzero_si128())) != 0xffff;
#endif
	for (; i < n; i++) {
		uint16_t v = (uint16_t)tok[i];
		high |= tok[i] >> 16;
		memcpy(d + 2 * i, &v, 2);
	}
	return high != 0;
}

static int too_wide(struct loom_shard *s)
{
	return loom_err_set(&s->err, LOOM_ERANGE, "token >= 65536 in %s input",
			    s->input_format ? s->input_format : "16-bit");
}

static int spill(struct loom_shard *s)
{
	s->bk = buckets_new(s, NBUCKET);
	if (!s->bk)
		return s->err.code;
	for (size_t i = 0; i < s->nents; i++) {
		struct ent *e = &s->ents[i];
		int rc = bucket_put(s, &s->bk[e->key >> 56], e->key, s->arena + e->off, e->len);
		if (rc < 0)
			return rc;
	}
	free(s->arena);
	free(s->ents);
	s->arena = NULL;
	s->ents = NULL;
	s->alen = s->acap = s->nents = s->ecap = 0;
	s->spilled = 1;
	return 0;
}

/* ---- samples ---- */

/* Spilled: the sample's raw tokens (width bytes each) into its bucket. */
static int store_raw_spilled(struct loom_shard *s, uint64_t key, const uint32_t *tok, size_t n)
{
	uint8_t *d = s->enc; /* enc_cap >= 10 n */
	if (pack_tokens(d, tok, n, s->width))
		return too_wide(s);
	return bucket_put(s, &s->bk[key >> 56], key, d, n * s->width);
}

/* Shuffle: keep the next sample's raw tokens under its key, in memory
 * while they fit the budget, else in its bucket file; encoding waits for
 * the output order. */
static int store_raw(struct loom_shard *s, uint64_t key, const uint32_t *tok, size_t n)
{
	s->nsamples++;
	size_t l = n * s->width;
	if (s->spilled)
		return store_raw_spilled(s, key, tok, n);
	if (s->acap - s->alen < l || s->nents == s->ecap) {
		/* Grow by doubling, the samples and their entries together
		 * within 3/4 of the budget; beyond it, spill. */
		uint64_t lim = s->o.memory / 4 * 3;
		size_t na = s->acap, ne = s->ecap;
		if (na - s->alen < l) {
			na = na ? na * 2 : (1u << 20);
			while (na - s->alen < l)
				na *= 2;
		}
		if (s->nents == ne)
			ne = ne ? ne * 2 : 1024;
		if ((uint64_t)na + (uint64_t)ne * sizeof(struct ent) > lim) {
			/* Clamp the arena to what is left; spill if too small. */
			uint64_t eb = (uint64_t)ne * sizeof(struct ent);
			na = eb < lim ? (size_t)(lim - eb) : 0;
			if (na < s->alen + l) {
				int rc = spill(s);
				return rc < 0 ? rc : store_raw_spilled(s, key, tok, n);
			}
		}
		if (na != s->acap) {
			uint8_t *q = realloc(s->arena, na);
			if (!q)
				return nomem(s);
			s->arena = q;
			s->acap = na;
		}
		if (ne != s->ecap) {
			struct ent *q = realloc(s->ents, ne * sizeof *q);
			if (!q)
				return nomem(s);
			s->ents = q;
			s->ecap = ne;
		}
	}
	if (pack_tokens(s->arena + s->alen, tok, n, s->width))
		return too_wide(s);
	s->ents[s->nents++] = (struct ent){ key, s->alen, (uint32_t)l };
	s->alen += l;
	return 0;
}

/* Encode samples [i0, i1) of the batch into their slots. */
static void encode_slice(struct loom_shard *s, size_t i0, size_t i1)
{
	for (size_t i = i0; i < i1; i++)
		s->blen[i] = s->b16 ? loom_example_encode_u16(s->feature, s->bptr[i], s->bcnt[i],
							      s->bbuf + i * s->enc_cap)
				    : loom_example_encode_u32(s->feature, s->bptr[i], s->bcnt[i],
							      s->bbuf + i * s->enc_cap);
}

/* Encoding helpers: worker k (1..threads-1) encodes slice k of each batch;
 * they sleep on a condition variable between batches (no spinning). */
static void *encoder(void *arg)
{
	struct loom_shard *s = ((struct encoder_arg *)arg)->s;
	int k = ((struct encoder_arg *)arg)->k;
	unsigned seen = 0;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (s->gen == seen && !s->quit)
			pthread_cond_wait(&s->go, &s->mu);
		if (s->quit)
			break;
		seen = s->gen;
		size_t nb = s->bn, T = (size_t)s->threads;
		pthread_mutex_unlock(&s->mu);
		encode_slice(s, nb * (size_t)k / T, nb * (size_t)(k + 1) / T);
		pthread_mutex_lock(&s->mu);
		if (--s->pending == 0)
			pthread_cond_signal(&s->cv_done);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static void encoders_stop(struct loom_shard *s)
{
	if (!s->nenc)
		return;
	pthread_mutex_lock(&s->mu);
	s->quit = 1;
	pthread_cond_broadcast(&s->go);
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < s->nenc; i++)
		pthread_join(s->enc_tid[i], NULL);
	s->nenc = 0;
}

/* Encode the batched samples (in parallel, each into its own slot), then
 * write them in order: the output does not depend on the thread count. */
static int flush_batch(struct loom_shard *s)
{
	size_t nb = s->bn;
	if (!nb)
		return 0;
	if (s->threads > 1 && !s->nenc && !s->enc_failed) {
		s->enc_tid = calloc((size_t)s->threads, sizeof *s->enc_tid);
		s->enc_arg = calloc((size_t)s->threads, sizeof *s->enc_arg);
		for (int k = 1; s->enc_tid && s->enc_arg && k < s->threads; k++) {
			s->enc_arg[k] = (struct encoder_arg){ s, k };
			if (pthread_create(&s->enc_tid[s->nenc], NULL, encoder, &s->enc_arg[k]))
				break;
			s->nenc++;
		}
		if (s->nenc != s->threads - 1) { /* run with what we have: none */
			encoders_stop(s);
			s->enc_failed = 1;
		}
	}
	if (s->nenc && nb >= 4) {
		size_t T = (size_t)s->threads;
		pthread_mutex_lock(&s->mu);
		s->pending = s->nenc;
		s->gen++;
		pthread_cond_broadcast(&s->go);
		pthread_mutex_unlock(&s->mu);
		encode_slice(s, 0, nb / T);
		pthread_mutex_lock(&s->mu);
		while (s->pending)
			pthread_cond_wait(&s->cv_done, &s->mu);
		pthread_mutex_unlock(&s->mu);
	} else {
		encode_slice(s, 0, nb);
	}
	s->bn = 0;
	for (size_t i = 0; i < nb; i++) {
		int rc = put_payload(s, s->bbuf + (size_t)i * s->enc_cap, s->blen[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The next sample of the stream: kept raw for the shuffle, or batched
 * for encoding in stream order (tok must stay put until flush_batch). */
static int cut(struct loom_shard *s, const uint32_t *tok, size_t n)
{
	uint64_t key = loom_shard_key(s->o.seed, s->nseen++);
	if (s->o.val_key && (key < s->o.val_key) != !!s->o.val)
		return 0; /* the other side of the validation split */
	if (s->o.shuffle)
		return store_raw(s, key, tok, n);
	s->nsamples++;
	s->b16 = 0;
	s->bptr[s->bn] = tok;
	s->bcnt[s->bn++] = n;
	return s->bn == s->batch ? flush_batch(s) : 0;
}

int loom_shard_tokens(struct loom_shard *s, const uint32_t *tok, size_t n)
{
	if (s->err.code)
		return s->err.code;
	if (s->o.vocab_size)
		for (size_t i = 0; i < n; i++)
			if (tok[i] >= s->o.vocab_size)
				return loom_err_set(&s->err, LOOM_ERANGE,
						    "token %u at position %" PRIu64
						    " is not below the vocabulary size %" PRIu64,
						    tok[i], s->total + i, s->o.vocab_size);
	while (n) {
		/* Drop tokens before the next window start. */
		if (s->next > s->tb0) {
			uint64_t drop = s->next - s->tb0;
			if (drop >= s->tlen) {
				uint64_t skip_in = drop - s->tlen; /* not yet received */
				s->tb0 += s->tlen;
				s->tlen = 0;
				if (skip_in) {
					size_t k = skip_in < n ? (size_t)skip_in : n;
					tok += k;
					n -= k;
					s->total += k;
					s->tb0 += k;
					continue;
				}
			} else {
				memmove(s->tb, s->tb + drop, (s->tlen - drop) * sizeof *s->tb);
				s->tlen -= (size_t)drop;
				s->tb0 += drop;
			}
		}
		size_t k = s->tcap - s->tlen;
		if (k > n)
			k = n;
		memcpy(s->tb + s->tlen, tok, k * sizeof *tok);
		s->tlen += k;
		s->total += k;
		tok += k;
		n -= k;
		/* Emit every window that has a token after it (start < n - L). */
		while (s->next + s->L < s->total) {
			int rc = cut(s, s->tb + (s->next - s->tb0), (size_t)s->L);
			if (rc < 0)
				return rc;
			s->next += s->S;
		}
		int rc = flush_batch(s); /* before the buffer moves */
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int cmp_ent(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* Sort samples (raw tokens at base + off, aligned to their width) by key,
 * then encode them straight from there in batches (in parallel) and write
 * them in that order; base stays put until the last batch is written. */
static int write_sorted(struct loom_shard *s, const uint8_t *base, struct ent *e, size_t n)
{
	qsort(e, n, sizeof *e, cmp_ent);
	s->b16 = s->width == 2;
	for (size_t i = 0; i < n; i++) {
		s->bptr[s->bn] = base + e[i].off;
		s->bcnt[s->bn++] = e[i].len / s->width;
		if (s->bn == s->batch) {
			int rc = flush_batch(s);
			if (rc < 0)
				return rc;
		}
	}
	return flush_batch(s);
}

/* Load a bucket file (size bytes) and write it in key order, or, when it
 * does not fit the budget, split it into 2..256 sub-buckets by the next
 * key bits after the `used` top bits (sub-bucket order = key order). */
static int do_bucket(struct loom_shard *s, int fd, uint64_t size, int used)
{
	if (!size)
		return 0;
	uint64_t nrec_est = size / (REC_HDR + 64);
	uint64_t half = s->o.memory / 2;
	if (size + nrec_est * sizeof(struct ent) > half && used < 64) {
		/* Fan-out: enough that a part fits twice over, at most 256. */
		int bits = 1;
		while (bits < 8 && (size >> bits) * 2 > half)
			bits++;
		if (bits > 64 - used)
			bits = 64 - used;
		int nb = 1 << bits;
		struct bucket *sub = buckets_new(s, nb);
		if (!sub)
			return s->err.code;
		size_t cap = 1u << 20, have = 0;
		uint8_t *buf = malloc(cap);
		uint64_t off = 0;
		int rc = buf ? 0 : nomem(s);
		int shift = 64 - used - bits;
		uint64_t mask = (uint64_t)nb - 1;
		while (rc == 0 && (off < size || have)) {
			if (off < size && have < cap) {
				size_t want = cap - have;
				if (want > size - off)
					want = (size_t)(size - off);
				if (loom_pread_all(fd, buf + have, want, (off_t)off) != 0) {
					rc = loom_err_errno(&s->err, LOOM_EIO, errno,
							    "cannot read a temporary file");
					break;
				}
				have += want;
				off += want;
			}
			size_t pos = 0;
			while (have - pos >= REC_HDR) {
				uint64_t key;
				uint32_t l;
				memcpy(&key, buf + pos, 8);
				memcpy(&l, buf + pos + 8, 4);
				if (have - pos < REC_HDR + (size_t)l) {
					if (REC_HDR + (size_t)l > cap) {
						uint8_t *nb2 = realloc(buf, REC_HDR + (size_t)l);
						if (!nb2) {
							rc = nomem(s);
							break;
						}
						buf = nb2;
						cap = REC_HDR + (size_t)l;
					}
					break;
				}
				rc = bucket_put(s, &sub[(key >> shift) & mask], key,
						buf + pos + REC_HDR, l);
				if (rc < 0)
					break;
				pos += REC_HDR + l;
			}
			memmove(buf, buf + pos, have - pos);
			have -= pos;
			if (off >= size && have && pos == 0 && rc == 0) {
				rc = loom_err_set(&s->err, LOOM_EFORMAT, "corrupt temporary file");
				break;
			}
		}
		free(buf);
		for (int i = 0; rc == 0 && i < nb; i++)
			rc = bucket_flush(s, &sub[i]);
		for (int i = 0; rc == 0 && i < nb; i++) {
			rc = do_bucket(s, sub[i].fd, sub[i].bytes, used + bits);
			close(sub[i].fd);
			sub[i].fd = 0;
		}
		buckets_free(sub, nb);
		return rc;
	}
	uint8_t *buf = malloc((size_t)size);
	if (!buf)
		return nomem(s);
	if (loom_pread_all(fd, buf, (size_t)size, 0) != 0) {
		free(buf);
		return loom_err_errno(&s->err, LOOM_EIO, errno, "cannot read a temporary file");
	}
	size_t n = 0, cap = 1024;
	struct ent *e = malloc(cap * sizeof *e);
	int rc = e ? 0 : nomem(s);
	for (uint64_t pos = 0; rc == 0 && pos < size;) {
		uint64_t key;
		uint32_t l;
		memcpy(&key, buf + pos, 8);
		memcpy(&l, buf + pos + 8, 4);
		if (n == cap) {
			struct ent *p = realloc(e, cap * 2 * sizeof *e);
			if (!p) {
				rc = nomem(s);
				break;
			}
			e = p;
			cap *= 2;
		}
		e[n++] = (struct ent){ key, pos + REC_HDR, l };
		pos += REC_HDR + l;
	}
	if (rc == 0)
		rc = write_sorted(s, buf, e, n);
	free(e);
	free(buf);
	return rc;
}

/* ---- the output set ----
 *
 * Committing the set ("Committing a set" in formats/manifest.md): the
 * manifest is the commit point.  This run writes each shard under a name
 * of its own, ".NAME.tmp-runXXXXXXXX" (NAME the final name; its index is
 * that name plus ".index", as always), fsyncs them and commits a manifest
 * naming those files: from that rename on, the new set is the output.
 * Then the old set's files are removed, each new file is hard-linked to
 * its final name, a second manifest naming the final names replaces the
 * first, and the run's names are removed.  Whenever the process dies, the
 * manifest names a complete set: the old one or the new one.  Leftovers
 * (temporaries, files no manifest names) are removed by the next run, under
 * a lock (".PREFIX.lock") that keeps two runs off one prefix. */

/* Length of "BASE-NNNNN-of-NNNNN.tfrecord[.index]" at the start of name,
 * or 0. */
static size_t match_shard_name(const char *base, const char *name)
{
	size_t bl = strlen(base), d;
	if (strncmp(name, base, bl) || name[bl] != '-')
		return 0;
	const char *p = name + bl + 1;
	if ((d = strspn(p, "0123456789")) < 5 || strncmp(p + d, "-of-", 4))
		return 0;
	p += d + 4;
	if ((d = strspn(p, "0123456789")) < 5 || strncmp(p + d, ".tfrecord", 9))
		return 0;
	p += d + 9;
	if (!strncmp(p, ".index", 6))
		p += 6;
	return (size_t)(p - name);
}

/* Is `name` a file of the output set of prefix `base` (a shard, an index),
 * or a temporary of one (".NAME.tmp-*", also of the manifest)? */
static int set_file(const char *base, const char *name)
{
	size_t n = match_shard_name(base, name), bl = strlen(base);
	if (n)
		return name[n] == 0;
	if (name[0] != '.')
		return 0;
	while (*name == '.')
		name++;
	n = match_shard_name(base, name);
	if (!n && !strncmp(name, base, bl) && !strncmp(name + bl, ".manifest.json", 14))
		n = bl + 14;
	return n && !strncmp(name + n, ".tmp-", 5) && name[n + 5];
}

static int named_old(const struct loom_shard *s, const char *name)
{
	for (size_t i = 0; i < s->nold; i++)
		if (!strcmp(s->old[i], name))
			return 1;
	return 0;
}

/* Append a copy of str to the list *v of *n strings. */
static int push_name(struct loom_shard *s, char ***v, size_t *n, const char *str)
{
	char **p = realloc(*v, (*n + 1) * sizeof *p);
	if (!p)
		return nomem(s);
	*v = p;
	if (!(p[*n] = strdup(str)))
		return nomem(s);
	(*n)++;
	return 0;
}

static int add_old(struct loom_shard *s, const char *name)
{
	/* Only the prefix's own names are ever removed: nothing outside the
	 * directory, nothing a tampered manifest might name. */
	if (strchr(name, '/') || !set_file(s->base, name))
		return 0;
	return push_name(s, &s->old, &s->nold, name);
}

/* The files named by the manifest in place (none if there is none or it is
 * not a manifest: then no set can be read there). */
static int read_old_set(struct loom_shard *s)
{
	char path[4200];
	snprintf(path, sizeof path, "%s.manifest.json", s->prefix);
	struct loom_manifest m;
	struct loom_err err;
	int rc = 0;
	if (loom_manifest_read(path, &m, &err) < 0)
		return 0;
	for (size_t i = 0; rc == 0 && i < m.nshards; i++) {
		if (m.shards[i].file)
			rc = add_old(s, m.shards[i].file);
		if (rc == 0 && m.shards[i].index)
			rc = add_old(s, m.shards[i].index);
	}
	loom_manifest_release(&m);
	return rc;
}

static void commit_step(struct loom_shard *s, const char *what, const char *path)
{
	if (s->o.commit_step)
		s->o.commit_step(s->o.commit_step_ctx, what, path);
}

static int remove_file(struct loom_shard *s, const char *path)
{
	commit_step(s, "unlink", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return loom_err_errno(&s->err, LOOM_EIO, errno, "cannot remove '%s'", path);
	return 0;
}

/* Remove what killed runs left: temporaries and set files that the
 * manifest in place does not name. */
static int remove_leftovers(struct loom_shard *s)
{
	DIR *d = opendir(s->dir);
	if (!d)
		return loom_err_errno(&s->err, LOOM_EIO, errno, "cannot read directory '%s'",
				      s->dir);
	struct dirent *de;
	int rc = 0, removed = 0;
	while (rc == 0 && (de = readdir(d))) {
		if (!set_file(s->base, de->d_name) || named_old(s, de->d_name))
			continue;
		char path[8192];
		snprintf(path, sizeof path, "%s/%s", s->dir, de->d_name);
		rc = remove_file(s, path);
		removed = 1;
	}
	closedir(d);
	if (rc == 0 && removed)
		rc = loom_fsync_dir_of(s->dir, &s->err);
	return rc;
}

/* Hold DIR/.BASE.lock for the run (loom_lock_take); another run on the
 * prefix is refused. */
static int lock_prefix(struct loom_shard *s)
{
	size_t n = strlen(s->dir) + strlen(s->base) + 16;
	if (!(s->lock_path = malloc(n)))
		return nomem(s);
	snprintf(s->lock_path, n, "%s/.%s.lock", s->dir, s->base);
	if (access(s->dir, F_OK) && errno == ENOENT)
		return loom_err_set(&s->err, LOOM_EIO, "output directory '%s' does not exist",
				    s->dir);
	int rc = loom_lock_take(s->lock_path, &s->lock_fd, &s->err);
	if (rc == LOOM_EBUSY)
		return loom_err_set(&s->err, LOOM_EIO,
				    "another loom-shard is writing '%s' (it holds '%s')", s->prefix,
				    s->lock_path);
	return rc;
}

/* Lock the prefix, note the set in place, remove leftovers, pick the run id. */
static int open_set(struct loom_shard *s)
{
	char *c = strdup(s->prefix);
	if (!c)
		return nomem(s);
	s->dir = strdup(dirname(c));
	free(c);
	s->base = strdup(loom_basename(s->prefix));
	if (!s->dir || !s->base)
		return nomem(s);
	if (!*s->base || !strcmp(s->base, ".") || !strcmp(s->base, ".."))
		return loom_err_set(&s->err, LOOM_EINVAL,
				    "output prefix '%s' names no file in a directory", s->prefix);
	int rc = lock_prefix(s);
	if (rc == 0)
		rc = read_old_set(s);
	if (rc == 0)
		rc = remove_leftovers(s);
	uint32_t id;
	if (getentropy(&id, sizeof id) < 0)
		id = (uint32_t)getpid() ^ (uint32_t)(loom_now() * 1e6);
	size_t i;
	do { /* a name that no file of the old set has */
		snprintf(s->run, sizeof s->run, "run%08" PRIx32, id++);
		for (i = 0; i < s->nold && !strstr(s->old[i], s->run); i++)
			;
	} while (i < s->nold);
	return rc;
}

static int remember(struct loom_shard *s, const char *path)
{
	return push_name(s, &s->done, &s->ndone, path);
}

/* ---- finish ---- */

static int write_manifest(struct loom_shard *s, json_t *shards)
{
	json_t *m = json_object();
	json_t *cmd = json_array();
	if (!m || !cmd) {
		json_decref(m);
		json_decref(cmd);
		json_decref(shards);
		return nomem(s);
	}
	for (int i = 0; i < s->o.argc; i++)
		json_array_append_new(cmd, json_string(s->argv[i]));
	json_object_set_new(m, "format", json_string("loom-tfrecord-shards"));
	json_object_set_new(m, "schema_version", json_integer(1));
	json_object_set_new(m, "feature", json_string(s->feature));
	json_object_set_new(m, "seq_len", json_integer((json_int_t)s->L));
	json_object_set_new(m, "stride", json_integer((json_int_t)s->S));
	json_object_set_new(m, "keep_tail", json_boolean(s->o.keep_tail));
	json_object_set_new(m, "input_format",
			    s->input_format ? json_string(s->input_format) : json_null());
	json_object_set_new(m, "vocab_size",
			    s->o.vocab_size ? json_integer((json_int_t)s->o.vocab_size) : json_null());
	json_object_set_new(m, "vocab_sha256",
			    s->vocab_sha256 ? json_string(s->vocab_sha256) : json_null());
	json_object_set_new(m, "tokens", json_integer((json_int_t)s->total));
	json_object_set_new(m, "records", json_integer((json_int_t)s->written));
	json_object_set_new(m, "tail_tokens", json_integer((json_int_t)s->tail));
	json_object_set_new(m, "shuffle", json_boolean(s->o.shuffle));
	json_object_set_new(m, "seed", json_integer((json_int_t)s->o.seed));
	json_object_set_new(m, "sharding", json_string(s->o.shards ? "round-robin"
							: "contiguous"));
	json_object_set_new(m, "shards", shards);
	json_object_set_new(m, "command", cmd);
	if (s->o.val_key || s->o.val_records) {
		char rule[96];
		if (s->o.val_key)
			snprintf(rule, sizeof rule, "key < 0x%016" PRIx64, s->o.val_key);
		else
			snprintf(rule, sizeof rule, "first %" PRIu64, s->o.val_records);
		json_object_set_new(m, "split", json_string(s->o.val ? "validation" : "training"));
		json_object_set_new(m, "split_rule", json_string(rule));
	}
	char *text = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(m);
	if (!text)
		return nomem(s);
	size_t tl = strlen(text);
	char *t2 = realloc(text, tl + 2);
	if (!t2) {
		free(text);
		return nomem(s);
	}
	t2[tl] = '\n';
	t2[tl + 1] = 0;
	snprintf(s->st.manifest, sizeof s->st.manifest, "%s.manifest.json", s->prefix);
	commit_step(s, "rename", s->st.manifest);
	int rc = loom_write_file_atomic(s->st.manifest, t2, tl + 1, &s->err);
	free(t2);
	return rc;
}

static json_t *shard_entry(struct loom_shard *s, struct loom_tfr_writer *w,
			   const char *path, const char *ipath)
{
	return json_pack("{s:s, s:s, s:I, s:I, s:o}",
			 "file", loom_basename(path),
			 "index", loom_basename(ipath),
			 "records", (json_int_t)loom_tfr_writer_records(w),
			 "bytes", (json_int_t)loom_tfr_writer_bytes(w),
			 "sha256", s->o.no_sha256 ? json_null()
			 : json_string(loom_tfr_writer_sha256(w)));
}

/* After the commit point: remove the old set, give the new one its final
 * names (the manifest `final` names them) and drop this run's names. */
static int publish(struct loom_shard *s, json_t *final)
{
	int rc = 0;
	for (size_t i = 0; i < s->nold && rc == 0; i++) {
		char path[8192];
		snprintf(path, sizeof path, "%s/%s", s->dir, s->old[i]);
		rc = remove_file(s, path);
	}
	size_t i;
	json_t *e;
	json_array_foreach(final, i, e) {
		for (int k = 0; k < 2 && rc == 0; k++) {
			char path[8192];
			const char *run = s->done[2 * i + (size_t)k];
			snprintf(path, sizeof path, "%s/%s", s->dir,
				 json_string_value(json_object_get(e, k ? "index" : "file")));
			if ((rc = remove_file(s, path)) < 0)
				break;
			commit_step(s, "link", path);
			if (link(run, path) < 0)
				rc = loom_err_errno(&s->err, LOOM_EIO, errno,
						    "cannot link '%s' to '%s'", path, run);
		}
	}
	if (rc == 0)
		rc = loom_fsync_dir_of(s->dir, &s->err);
	if (rc < 0) {
		json_decref(final);
		return rc;
	}
	if ((rc = write_manifest(s, final)) < 0)
		return rc;
	for (size_t k = 0; k < s->ndone && rc == 0; k++)
		rc = remove_file(s, s->done[k]);
	if (rc == 0)
		rc = loom_fsync_dir_of(s->dir, &s->err);
	return rc;
}

static void rollback(struct loom_shard *s)
{
	for (size_t i = 0; i < s->ndone; i++) {
		unlink(s->done[i]);
		free(s->done[i]);
	}
	free(s->done);
	s->done = NULL;
	s->ndone = 0;
}

static int prepare(struct loom_shard *s)
{
	int rc;
	uint64_t tail = 0;
	if (s->o.keep_tail && s->next < s->total && (s->total - s->next) * 2 >= s->L) {
		tail = s->total - s->next;
		rc = cut(s, s->tb + (s->next - s->tb0), (size_t)tail);
		if (rc == 0)
			rc = flush_batch(s);
		if (rc < 0)
			return rc;
	}
	s->tail = tail;
	if (!s->nseen)
		return loom_err_set(&s->err, LOOM_EFORMAT,
				    "no samples: the input has %" PRIu64 " tokens; a sample needs more"
				    " than --seq-len %" PRIu64 " (or --keep-tail and at least %" PRIu64
				    ")", s->total, s->L, (s->L + 1) / 2);
	if (s->o.shuffle && !s->spilled) {
		rc = write_sorted(s, s->arena, s->ents, s->nents);
		if (rc < 0)
			return rc;
	} else if (s->o.shuffle) {
		for (int i = 0; i < NBUCKET; i++)
			if ((rc = bucket_flush(s, &s->bk[i])) < 0)
				return rc;
		for (int i = 0; i < NBUCKET; i++) {
			rc = do_bucket(s, s->bk[i].fd, s->bk[i].bytes, 8);
			if (rc < 0)
				return rc;
			close(s->bk[i].fd); /* free its disk space early */
			s->bk[i].fd = 0;
		}
	}
	if (!s->written)
		return loom_err_set(&s->err, LOOM_EFORMAT,
				    s->o.val ? "the validation split has none of the %" PRIu64
					       " samples: raise --val-fraction or --val-records"
					     : "the validation split takes all %" PRIu64 " samples:"
					       " none is left for training", s->nseen);
	/* Each shard and its index under this run's names, fsynced. */
	rc = 0;
	json_t *run = json_array(), *final = json_array();
	if (!run || !final) {
		json_decref(run);
		json_decref(final);
		return nomem(s);
	}
	for (uint64_t j = 0; j < s->nw && rc == 0; j++) {
		char path[4096], ipath[4200], rpath[4400], ripath[4500];
		struct loom_tfr_writer *w = s->w[j];
		writer_path(s, j, s->nw, path, sizeof path);
		snprintf(ipath, sizeof ipath, "%s.index", path);
		snprintf(rpath, sizeof rpath, "%s/.%s.tmp-%s", s->dir, loom_basename(path), s->run);
		snprintf(ripath, sizeof ripath, "%s.index", rpath);
		commit_step(s, "rename", rpath);
		if (loom_tfr_writer_rename(w, rpath) < 0 || loom_tfr_writer_commit(w) < 0) {
			rc = loom_err_set(&s->err, LOOM_EIO, "%s", loom_tfr_writer_error(w));
			break;
		}
		if ((rc = remember(s, rpath)) < 0)
			break;
		commit_step(s, "rename", ripath);
		if (loom_tfr_writer_write_index(w, ripath) < 0) {
			rc = loom_err_set(&s->err, LOOM_EIO, "%s", loom_tfr_writer_error(w));
			break;
		}
		if ((rc = remember(s, ripath)) < 0)
			break;
		json_array_append_new(run, shard_entry(s, w, rpath, ripath));
		json_array_append_new(final, shard_entry(s, w, path, ipath));
		s->st.bytes += loom_tfr_writer_bytes(w);
	}
	if (rc < 0) {
		json_decref(run);
		json_decref(final);
		return rc;
	}
	s->run_set = run;
	s->final_set = final;
	return 0;
}

static int commit(struct loom_shard *s)
{
	/* The commit point: a manifest naming this run's files. */
	json_t *final = s->final_set;
	int rc = write_manifest(s, s->run_set);
	s->run_set = s->final_set = NULL;
	if (rc < 0) {
		json_decref(final);
		return rc;
	}
	s->finished = 1;
	s->st.tokens = s->total;
	s->st.samples = s->written;
	s->st.tail_tokens = s->tail;
	s->st.shards = s->nw;
	s->st.spilled = s->spill_bytes;
	rc = publish(s, final);
	if (rc < 0) /* the new set is in place, under one of its two names */
		snprintf(s->st.note, sizeof s->st.note, "%s (the new set is complete;"
			 " the next run removes what is left over)", s->err.msg);
	return 0;
}

int loom_shard_prepare(struct loom_shard *s)
{
	if (s->err.code)
		return s->err.code;
	if (s->finished || s->final_set)
		return 0;
	int rc = prepare(s);
	if (rc < 0)
		rollback(s);
	return rc;
}

int loom_shard_commit(struct loom_shard *s)
{
	if (s->err.code)
		return s->err.code;
	if (s->finished)
		return 0;
	if (!s->final_set)
		return loom_err_set(&s->err, LOOM_EINVAL, "loom_shard_commit before loom_shard_prepare");
	int rc = commit(s);
	if (rc < 0)
		rollback(s);
	return rc;
}

int loom_shard_finish(struct loom_shard *s)
{
	int rc = loom_shard_prepare(s);
	return rc < 0 ? rc : loom_shard_commit(s);
}

void loom_shard_get_stats(const struct loom_shard *s, struct loom_shard_stats *st)
{
	*st = s->st;
	if (!s->finished) {
		st->tokens = s->total;
		st->samples = s->nsamples;
		st->spilled = s->spill_bytes;
	}
}

void loom_shard_free(struct loom_shard *s)
{
	if (!s)
		return;
	if (!s->finished)
		rollback(s);
	json_decref(s->run_set);
	json_decref(s->final_set);
	for (size_t i = 0; i < s->ndone; i++)
		free(s->done[i]);
	free(s->done);
	for (size_t i = 0; i < s->nold; i++)
		free(s->old[i]);
	free(s->old);
	loom_lock_release(s->lock_path, &s->lock_fd);
	free(s->lock_path);
	free(s->dir);
	free(s->base);
	for (uint64_t j = 0; j < s->nw; j++)
		loom_tfr_writer_free(s->w[j]);
	free(s->w);
	buckets_free(s->bk, NBUCKET);
	free(s->arena);
	free(s->ents);
	free(s->tb);
	free(s->enc);
	encoders_stop(s);
	free(s->enc_tid);
	free(s->enc_arg);
	free(s->bbuf);
	free(s->bptr);
	free(s->bcnt);
	free(s->blen);
	free(s->prefix);
	free(s->tmpdir);
	free(s->feature);
	free(s->vocab_sha256);
	free(s->input_format);
	if (s->argv)
		for (int i = 0; i < s->o.argc; i++)
			free(s->argv[i]);
	free(s->argv);
	free(s);
}

const char *loom_shard_error(const struct loom_shard *s)
{
	return s->err.msg;
}

/* ======================================================================
 * Manifest reader
 * ====================================================================== */

static const char *json_str(json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A key the manifest (formats/manifest.md) may have must have its type
 * (a string, or a whole number >= 0; null where nullable): else
 * LOOM_EFORMAT naming the file, the key and what was expected. */
static int manifest_key(const char *path, json_t *o, const char *where, const char *key,
			int type, int nullable, struct loom_err *err)
{
	json_t *v = json_object_get(o, key);
	if (!v || (nullable && json_is_null(v)))
		return 0;
	if (type == JSON_STRING ? json_is_string(v)
				: json_is_integer(v) && json_integer_value(v) >= 0)
		return 0;
	char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	loom_err_set(err, LOOM_EFORMAT, "%s: %s%s is %.40s, expected %s", path, where, key,
		     text ? text : "?",
		     type == JSON_STRING ? (nullable ? "a string or null" : "a string")
					 : "a whole number >= 0");
	free(text);
	return LOOM_EFORMAT;
}

int loom_manifest_read(const char *path, struct loom_manifest *m, struct loom_err *err)
{
	json_error_t je;
	char *text;
	size_t len;
	memset(m, 0, sizeof *m);
	int rc = loom_file_read_bounded(path, LOOM_FILE_MAX_LIST, &text, &len, err);
	if (rc < 0)
		return rc;
	json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	free(text);
	if (!j)
		return loom_err_set(err, LOOM_EFORMAT, "%s: line %d: %s", path, je.line, je.text);
	m->priv = j;
	json_t *shards = json_object_get(j, "shards"), *e;
	if (!json_is_array(shards) || json_array_size(shards) == 0) {
		loom_manifest_release(m);
		return loom_err_set(err, LOOM_EFORMAT, "%s: no \"shards\" list", path);
	}
	m->nshards = json_array_size(shards);
	if (!(m->shards = calloc(m->nshards, sizeof *m->shards))) {
		loom_manifest_release(m);
		return loom_err_set(err, LOOM_ENOMEM, "%s: out of memory", path);
	}
	size_t i;
	json_array_foreach(shards, i, e) {
		char where[48];
		snprintf(where, sizeof where, "shards[%zu].", i);
		if (json_is_object(e) &&
		    ((rc = manifest_key(path, e, where, "bytes", JSON_INTEGER, 0, err)) ||
		     (rc = manifest_key(path, e, where, "sha256", JSON_STRING, 1, err)) ||
		     (rc = manifest_key(path, e, where, "records", JSON_INTEGER, 0, err)) ||
		     (rc = manifest_key(path, e, where, "index", JSON_STRING, 0, err)))) {
			loom_manifest_release(m);
			return rc;
		}
		struct loom_manifest_shard *sh = &m->shards[i];
		json_t *name = json_is_string(e) ? e : json_object_get(e, "file");
		sh->file = json_str(name ? name : json_object_get(e, "path"));
		sh->bare = json_is_string(e);
		sh->index = json_str(json_object_get(e, "index"));
		json_t *r = json_object_get(e, "records"), *b = json_object_get(e, "bytes");
		sh->has_records = json_is_integer(r);
		sh->records = json_integer_value(r);
		sh->has_bytes = json_is_integer(b);
		sh->bytes = json_integer_value(b);
		sh->sha256 = json_str(json_object_get(e, "sha256"));
	}
	if ((rc = manifest_key(path, j, "", "feature", JSON_STRING, 0, err)) ||
	    (rc = manifest_key(path, j, "", "seq_len", JSON_INTEGER, 0, err))) {
		loom_manifest_release(m);
		return rc;
	}
	m->feature = json_str(json_object_get(j, "feature"));
	json_t *L = json_object_get(j, "seq_len");
	m->has_seq_len = json_is_integer(L);
	m->seq_len = json_integer_value(L);
	return 0;
}

void loom_manifest_release(struct loom_manifest *m)
{
	free(m->shards);
	json_decref(m->priv);
	memset(m, 0, sizeof *m);
}
