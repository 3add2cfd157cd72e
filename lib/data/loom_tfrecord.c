/* loom_tfrecord.c - see loom_tfrecord.h */
#include "loom_tfrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

#include "loom_crc32c.h"
#include "loom_file.h"
#include "loom_hash.h"
#include "loom_reader.h"

static inline void put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void put_u64(uint8_t *p, uint64_t v)
{
	put_u32(p, (uint32_t)v);
	put_u32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t get_u64(const uint8_t *p)
{
	return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static void frame_header(uint8_t *h, uint64_t n)
{
	put_u64(h, n);
	put_u32(h + 8, loom_crc32c_masked(h, 8));
}

const char *loom_tfr_versions(void)
{
	static char v[160];
	snprintf(v, sizeof v, "protobuf-c %s, jansson %s, CRC-32C %s", protobuf_c_version(),
		 JANSSON_VERSION, loom_crc32c_hw_available() ? "SSE4.2" : "table");
	return v;
}

void loom_tfr_frame(uint8_t *out, const void *payload, size_t n)
{
	frame_header(out, n);
	memcpy(out + LOOM_TFR_HEADER, payload, n);
	put_u32(out + LOOM_TFR_HEADER + n, loom_crc32c_masked(payload, n));
}

int loom_tfr_sniff(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	return len >= LOOM_TFR_HEADER && get_u32(p + 8) == loom_crc32c_masked(p, 8);
}

/* "NAME: record REC at byte OFF: why" */
static __attribute__((format(printf, 6, 7))) int
record_error(struct loom_err *e, int code, const char *name, uint64_t rec, uint64_t off,
	     const char *fmt, ...)
{
	char why[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	return loom_err_set(e, code, "%s: record %" PRIu64 " at byte %" PRIu64 ": %s", name,
			    rec, off, why);
}

int loom_tfr_buf_next(const void *buf, size_t len, uint64_t *off, uint64_t index,
		      const char *name, struct loom_tfr_record *rec, struct loom_err *err)
{
	const uint8_t *p = (const uint8_t *)buf + *off;
	uint64_t o = *off, left = len - o;
	if (!left)
		return LOOM_EOF;
	if (left < LOOM_TFR_HEADER)
		return record_error(err, LOOM_ETRUNC, name, index, o,
				    "truncated record header (%" PRIu64 " of 12 bytes)", left);
	uint64_t n = get_u64(p);
	if (get_u32(p + 8) != loom_crc32c_masked(p, 8))
		return record_error(err, LOOM_ECHECKSUM, name, index, o,
				    "length CRC mismatch (length field %" PRIu64 ")", n);
	if (n > left - LOOM_TFR_HEADER || left - LOOM_TFR_HEADER - n < LOOM_TFR_FOOTER)
		return record_error(err, LOOM_ETRUNC, name, index, o,
				    "truncated record (payload of %" PRIu64 " bytes, %" PRIu64
				    " bytes left)", n, left - LOOM_TFR_HEADER);
	if (get_u32(p + LOOM_TFR_HEADER + n) != loom_crc32c_masked(p + LOOM_TFR_HEADER, n))
		return record_error(err, LOOM_ECHECKSUM, name, index, o, "payload CRC mismatch");
	rec->data = p + LOOM_TFR_HEADER;
	rec->len = (size_t)n;
	rec->offset = o;
	rec->index = index;
	*off = o + n + LOOM_TFR_OVERHEAD;
	return 0;
}

/* ======================================================================
 * Writer
 * ====================================================================== */

/* Shards do not each hold a descriptor: the shard files open at once (read
 * and written) keep at most half the soft limit on open files (the rest is
 * for everything else); a shard past that is opened for each read, or each
 * block written, and closed after it, so a set of more shards than the
 * limit (1,100 under ulimit -n 1024) is written and read.  Such writes
 * take park_mu: they never hold more than one descriptor at a time. */
static pthread_mutex_t fd_mu = PTHREAD_MUTEX_INITIALIZER, park_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t fds_held, fds_budget;

static int fd_take(void)
{
	pthread_mutex_lock(&fd_mu);
	if (!fds_budget) {
		struct rlimit rl;
		fds_budget = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
				     ? (uint64_t)rl.rlim_cur / 2 : 1 << 20;
		if (fds_budget < 8)
			fds_budget = 8;
	}
	int ok = fds_held < fds_budget;
	fds_held += (uint64_t)ok;
	pthread_mutex_unlock(&fd_mu);
	return ok;
}

static void fd_give(void)
{
	pthread_mutex_lock(&fd_mu);
	fds_held--;
	pthread_mutex_unlock(&fd_mu);
}

struct loom_tfr_writer {
	struct loom_outfile out;
	int flags;
	int committed;
	uint8_t *buf;        /* current fill buffer */
	size_t cap, used;
	size_t reserved;     /* max payload of an open reserve(), 0 if none */
	uint64_t records;
	uint64_t bytes;      /* bytes framed so far (written + buffered) */
	uint64_t *off;       /* index: offsets of records (off[records] = bytes) */
	uint64_t off_cap;
	struct loom_hash *sha;
	char sha_hex[LOOM_HASH_HEX_MAX];
	struct loom_err err;

	/* LOOM_TFW_ASYNC: a background thread hashes and writes `pend`. */
	int async, thread_started;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint8_t *pend;       /* buffer handed to the thread */
	size_t pend_len;
	int pend_full;       /* 1 while the thread owns `pend` */
	int quit;
	int io_rc;           /* first error of the thread */
	int holds_fd;        /* its file stays open (else parked between writes) */
	struct loom_err io_err;
	uint8_t *spare;      /* the other buffer */
};

static int sink(struct loom_tfr_writer *w, struct loom_err *err, const uint8_t *p, size_t n)
{
	if (w->sha && loom_hash_update(w->sha, p, n) < 0)
		return loom_err_set(err, LOOM_EIO, "%s", loom_hash_error(w->sha));
	uint64_t off = w->out.bytes;
	int parked = w->out.tmp && !w->holds_fd, rc = 0;
	if (parked)
		pthread_mutex_lock(&park_mu);
	if (loom_outfile_write(&w->out, p, n) < 0)
		rc = loom_err_set(err, LOOM_EIO, "%s", loom_outfile_error(&w->out));
#ifdef SYNC_FILE_RANGE_WRITE
	/* Start writing large blocks back now (no wait), so the fsync at
	 * commit finds little left to do; failures (a pipe) do not matter. */
	if (rc == 0 && n >= (1u << 20) && w->out.tmp)
		(void)sync_file_range(w->out.fd, (off64_t)off, (off64_t)n, SYNC_FILE_RANGE_WRITE);
#else
	(void)off;
#endif
	if (parked) {
		if (rc == 0 && loom_outfile_park(&w->out) < 0)
			rc = loom_err_set(err, LOOM_EIO, "%s", loom_outfile_error(&w->out));
		pthread_mutex_unlock(&park_mu);
	}
	return rc;
}

static void *io_thread(void *arg)
{
	struct loom_tfr_writer *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->pend_full && !w->quit)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->pend_full && w->quit)
			break;
		uint8_t *p = w->pend;
		size_t n = w->pend_len;
		int failed = w->io_rc;
		pthread_mutex_unlock(&w->mu);
		int rc = failed ? 0 : sink(w, &w->io_err, p, n);
		pthread_mutex_lock(&w->mu);
		if (rc < 0 && !w->io_rc)
			w->io_rc = rc;
		w->pend_full = 0;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* Wait until the thread owns no buffer; returns its error, if any. */
static int async_drain(struct loom_tfr_writer *w)
{
	pthread_mutex_lock(&w->mu);
	while (w->pend_full)
		pthread_cond_wait(&w->cv, &w->mu);
	int rc = w->io_rc;
	pthread_mutex_unlock(&w->mu);
	if (rc < 0)
		loom_err_set(&w->err, rc, "%s", w->io_err.msg);
	return rc;
}

static int flush(struct loom_tfr_writer *w)
{
	if (!w->used)
		return 0;
	if (!w->async) {
		int rc = sink(w, &w->err, w->buf, w->used);
		w->used = 0;
		return rc;
	}
	if (!w->thread_started) {
		int e = pthread_create(&w->thread, NULL, io_thread, w);
		if (e) {
			/* No thread: fall back to writing here. */
			w->async = 0;
			return flush(w);
		}
		w->thread_started = 1;
	}
	int rc = async_drain(w);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&w->mu);
	uint8_t *t = w->pend;
	w->pend = w->buf;
	w->pend_len = w->used;
	w->pend_full = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	w->buf = t ? t : w->spare;
	w->spare = NULL;
	w->used = 0;
	return 0;
}

struct loom_tfr_writer *loom_tfr_writer_new(const char *path, size_t bufsize,
					    int flags, struct loom_err *err)
{
	struct loom_tfr_writer *w = calloc(1, sizeof *w);
	if (!w) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	w->flags = flags;
	w->cap = bufsize ? bufsize : 4u << 20;
	if (w->cap < 4096)
		w->cap = 4096;
	w->buf = malloc(w->cap);
	if (flags & LOOM_TFW_ASYNC) {
		w->async = 1;
		w->spare = malloc(w->cap);
		pthread_mutex_init(&w->mu, NULL);
		pthread_cond_init(&w->cv, NULL);
	}
	if (!w->buf || (w->async && !w->spare)) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		goto fail;
	}
	if (!(flags & LOOM_TFW_NO_INDEX)) {
		w->off_cap = 1024;
		w->off = malloc(w->off_cap * sizeof *w->off);
		if (!w->off) {
			loom_err_set(err, LOOM_ENOMEM, "out of memory");
			goto fail;
		}
		w->off[0] = 0;
	}
	if (flags & LOOM_TFW_SHA256) {
		w->sha = loom_hash_new("sha256");
		if (!w->sha) {
			loom_err_set(err, LOOM_ENOMEM, "cannot start sha256");
			goto fail;
		}
	}
	if (loom_outfile_open(&w->out, path) < 0) {
		loom_err_set(err, w->out.err.code ? w->out.err.code : LOOM_EIO, "%s",
			     loom_outfile_error(&w->out));
		goto fail;
	}
	if (w->out.tmp && !(w->holds_fd = fd_take()) && loom_outfile_park(&w->out) < 0) {
		loom_err_set(err, LOOM_EIO, "%s", loom_outfile_error(&w->out));
		goto fail;
	}
	return w;
fail:
	loom_tfr_writer_free(w);
	return NULL;
}

static int note_record(struct loom_tfr_writer *w, size_t n)
{
	w->records++;
	w->bytes += n + LOOM_TFR_OVERHEAD;
	if (w->off) {
		if (w->records + 1 > w->off_cap) {
			uint64_t nc = w->off_cap * 2;
			uint64_t *p = realloc(w->off, nc * sizeof *p);
			if (!p)
				return loom_err_set(&w->err, LOOM_ENOMEM, "out of memory");
			w->off = p;
			w->off_cap = nc;
		}
		w->off[w->records] = w->bytes;
	}
	return 0;
}

uint8_t *loom_tfr_writer_reserve(struct loom_tfr_writer *w, size_t max)
{
	if (w->committed) {
		loom_err_set(&w->err, LOOM_EINVAL, "%s: write after commit", w->out.path);
		return NULL;
	}
	size_t need = max + LOOM_TFR_OVERHEAD;
	if (need < max) {
		loom_err_set(&w->err, LOOM_ERANGE, "record too large");
		return NULL;
	}
	if (w->cap - w->used < need && flush(w) < 0)
		return NULL;
	if (w->cap < need) {
		/* A record larger than the buffer: grow it (and the spare). */
		uint8_t *p = realloc(w->buf, need);
		if (!p) {
			loom_err_set(&w->err, LOOM_ENOMEM, "out of memory");
			return NULL;
		}
		w->buf = p;
		if (w->async) {
			if (async_drain(w) < 0)
				return NULL;
			uint8_t **other = w->pend ? &w->pend : &w->spare;
			uint8_t *q = realloc(*other, need);
			if (!q) {
				loom_err_set(&w->err, LOOM_ENOMEM, "out of memory");
				return NULL;
			}
			*other = q;
		}
		w->cap = need;
	}
	w->reserved = max;
	return w->buf + w->used + LOOM_TFR_HEADER;
}

int loom_tfr_writer_finish(struct loom_tfr_writer *w, size_t n)
{
	if (n > w->reserved)
		return loom_err_set(&w->err, LOOM_EINVAL,
				    "finish(%zu) exceeds reserve(%zu)", n, w->reserved);
	uint8_t *h = w->buf + w->used;
	frame_header(h, n);
	put_u32(h + LOOM_TFR_HEADER + n, loom_crc32c_masked(h + LOOM_TFR_HEADER, n));
	w->used += n + LOOM_TFR_OVERHEAD;
	w->reserved = 0;
	return note_record(w, n);
}

int loom_tfr_writer_write(struct loom_tfr_writer *w, const void *payload, size_t n)
{
	uint8_t *p = loom_tfr_writer_reserve(w, n);
	if (!p)
		return w->err.code ? w->err.code : LOOM_EIO;
	memcpy(p, payload, n);
	return loom_tfr_writer_finish(w, n);
}

int loom_tfr_writer_rename(struct loom_tfr_writer *w, const char *path)
{
	if (w->committed || !w->out.tmp)
		return loom_err_set(&w->err, LOOM_EINVAL, "cannot rename '%s'",
				    w->out.path ? w->out.path : "-");
	if (w->async && w->thread_started) {
		int rc = async_drain(w); /* the thread may be using the name */
		if (rc < 0)
			return rc;
	}
	char *p = strdup(path);
	if (!p)
		return loom_err_set(&w->err, LOOM_ENOMEM, "out of memory");
	free(w->out.path);
	w->out.path = p;
	return 0;
}

static void stop_thread(struct loom_tfr_writer *w)
{
	if (!w->thread_started)
		return;
	pthread_mutex_lock(&w->mu);
	w->quit = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	w->thread_started = 0;
}

int loom_tfr_writer_commit(struct loom_tfr_writer *w)
{
	if (w->committed)
		return 0;
	int rc = flush(w);
	if (rc == 0 && w->async && w->thread_started)
		rc = async_drain(w);
	stop_thread(w);
	if (rc < 0)
		return rc;
	if (w->sha && loom_hash_final_hex(w->sha, w->sha_hex) < 0)
		return loom_err_set(&w->err, LOOM_EIO, "%s", loom_hash_error(w->sha));
	int parked = w->out.tmp && !w->holds_fd;
	if (parked)
		pthread_mutex_lock(&park_mu);
	rc = loom_outfile_commit(&w->out);
	if (parked)
		pthread_mutex_unlock(&park_mu);
	if (rc < 0)
		return loom_err_set(&w->err, LOOM_EIO, "%s", loom_outfile_error(&w->out));
	w->committed = 1;
	return 0;
}

int loom_tfr_writer_write_index(struct loom_tfr_writer *w, const char *path)
{
	if (!w->off)
		return loom_err_set(&w->err, LOOM_EINVAL, "writer keeps no index");
	return loom_tfr_index_write(path, w->off, w->records, &w->err);
}

const char *loom_tfr_writer_sha256(const struct loom_tfr_writer *w)
{
	return w->sha_hex;
}

uint64_t loom_tfr_writer_records(const struct loom_tfr_writer *w)
{
	return w->records;
}

uint64_t loom_tfr_writer_bytes(const struct loom_tfr_writer *w)
{
	return w->bytes;
}

void loom_tfr_writer_free(struct loom_tfr_writer *w)
{
	if (!w)
		return;
	stop_thread(w);
	if (!w->committed)
		loom_outfile_abort(&w->out);
	if (w->holds_fd)
		fd_give();
	if (w->flags & LOOM_TFW_ASYNC) {
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
	}
	free(w->buf);
	free(w->pend);
	free(w->spare);
	free(w->off);
	loom_hash_free(w->sha);
	free(w);
}

const char *loom_tfr_writer_error(const struct loom_tfr_writer *w)
{
	return w->err.msg;
}

/* ======================================================================
 * Streaming reader
 * ====================================================================== */

struct loom_tfr_reader {
	struct loom_reader rd; /* rd.pos: the file offset of rd.buf[0] */
	int own_fd;
	char *name;
	int flags;
	int regular;
	uint64_t size;       /* file size (regular files) */
	uint64_t index;      /* number of the next record */
	struct loom_err err;
};

#define READ_CHUNK (1u << 20)

static struct loom_tfr_reader *reader_new(int fd, const char *name, int flags,
					  struct loom_err *err)
{
	struct loom_tfr_reader *r = calloc(1, sizeof *r);
	if (!r || !(r->name = strdup(name)) || loom_reader_init(&r->rd, fd, READ_CHUNK)) {
		if (r)
			free(r->name);
		free(r);
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	r->flags = flags;
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		r->regular = 1;
		r->size = (uint64_t)st.st_size;
		off_t cur = lseek(fd, 0, SEEK_CUR);
		if (cur > 0) /* the record stream starts at the current offset */
			r->rd.pos = (uint64_t)cur;
#ifdef POSIX_FADV_SEQUENTIAL
		posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
	}
	return r;
}

struct loom_tfr_reader *loom_tfr_reader_fdopen(int fd, const char *name, int flags,
					       struct loom_err *err)
{
	return reader_new(fd, name, flags, err);
}

struct loom_tfr_reader *loom_tfr_reader_open(const char *path, int flags,
					     struct loom_err *err)
{
	if (strcmp(path, "-") == 0)
		return reader_new(STDIN_FILENO, "(stdin)", flags, err);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		loom_err_errno(err, LOOM_EIO, errno, "cannot open '%s'", path);
		return NULL;
	}
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		loom_err_set(err, LOOM_EIO, "cannot read '%s': Is a directory", path);
		return NULL;
	}
	struct loom_tfr_reader *r = reader_new(fd, path, flags, err);
	if (!r) {
		close(fd);
		return NULL;
	}
	r->own_fd = 1;
	return r;
}

#define RERR(r, code, off, ...) \
	record_error(&(r)->err, code, (r)->name, (r)->index, off, __VA_ARGS__)

/* Skip `n` payload+footer bytes without reading them (regular files). */
static int skip_bytes(struct loom_tfr_reader *r, uint64_t n)
{
	struct loom_reader *rd = &r->rd;
	size_t have = rd->end - rd->start;
	if (n <= have) {
		rd->start += n;
		return 0;
	}
	n -= have;
	rd->pos += rd->end; /* pos is the file offset of buf[0] */
	rd->start = rd->end = 0;
	if (lseek(rd->fd, (off_t)n, SEEK_CUR) < 0)
		return loom_err_errno(&r->err, LOOM_EIO, errno, "cannot seek in '%s'", r->name);
	rd->pos += n;
	return 0;
}

int loom_tfr_reader_next(struct loom_tfr_reader *r, struct loom_tfr_record *rec)
{
	if (r->err.code)
		return r->err.code;
	ssize_t got = loom_reader_fill_err(&r->rd, LOOM_TFR_HEADER, r->name, &r->err);
	if (got < 0)
		return (int)got;
	uint64_t off = r->rd.pos + r->rd.start;
	if (got == 0)
		return LOOM_EOF;
	if (got < LOOM_TFR_HEADER)
		return RERR(r, LOOM_ETRUNC, off,
			    "truncated record header (%zd of 12 bytes)", got);
	const uint8_t *h = r->rd.buf + r->rd.start;
	uint64_t len = get_u64(h);
	if (get_u32(h + 8) != loom_crc32c_masked(h, 8))
		return RERR(r, LOOM_ECHECKSUM, off, "length CRC mismatch (length field %" PRIu64 ")",
			    len);
	if (r->regular) {
		uint64_t left = r->size > off ? r->size - off : 0;
		if (len > left || left - len < LOOM_TFR_OVERHEAD)
			return RERR(r, LOOM_ETRUNC, off,
				    "truncated record: length field says %" PRIu64
				    " payload bytes, the file has %" PRIu64
				    " bytes left for payload and CRC",
				    len, left - LOOM_TFR_HEADER);
	} else if (len > LOOM_TFR_MAX_RECORD) {
		return RERR(r, LOOM_EFORMAT, off, "length %" PRIu64 " exceeds the %llu byte limit",
			    len, LOOM_TFR_MAX_RECORD);
	}
	size_t total = (size_t)len + LOOM_TFR_OVERHEAD;
	if ((r->flags & LOOM_TFR_SKIP_PAYLOAD) && r->regular) {
		r->rd.start += LOOM_TFR_HEADER;
		int rc = skip_bytes(r, len + LOOM_TFR_FOOTER);
		if (rc < 0)
			return rc;
		rec->data = NULL;
	} else {
		got = loom_reader_fill_err(&r->rd, total, r->name, &r->err);
		if (got < 0)
			return (int)got;
		if ((size_t)got < total)
			return RERR(r, LOOM_ETRUNC, off,
				    "truncated record (payload of %" PRIu64 " bytes, %zd of %zu"
				    " bytes present)", len, got, total);
		const uint8_t *p = r->rd.buf + r->rd.start + LOOM_TFR_HEADER;
		if (!(r->flags & (LOOM_TFR_NO_PAYLOAD_CRC | LOOM_TFR_SKIP_PAYLOAD)) &&
		    get_u32(p + len) != loom_crc32c_masked(p, (size_t)len))
			return RERR(r, LOOM_ECHECKSUM, off, "payload CRC mismatch");
		rec->data = (r->flags & LOOM_TFR_SKIP_PAYLOAD) ? NULL : p;
		r->rd.start += total;
	}
	rec->len = (size_t)len;
	rec->offset = off;
	rec->index = r->index++;
	return 0;
}

uint64_t loom_tfr_reader_offset(const struct loom_tfr_reader *r)
{
	return r->rd.pos + r->rd.start;
}

void loom_tfr_reader_free(struct loom_tfr_reader *r)
{
	if (!r)
		return;
	if (r->own_fd)
		close(r->rd.fd);
	free(r->name);
	loom_reader_release(&r->rd);
	free(r);
}

const char *loom_tfr_reader_error(const struct loom_tfr_reader *r)
{
	return r->err.msg;
}

/* ======================================================================
 * Index
 * ====================================================================== */

int loom_tfr_index_parse(const char *text, size_t len, const char *name,
			 uint64_t **offsets, uint64_t *n, struct loom_err *err)
{
	size_t lines = 0;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	if (len && text[len - 1] != '\n')
		lines++;
	uint64_t *off = malloc((lines + 1) * sizeof *off);
	if (!off)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	off[0] = 0;
	size_t i = 0, line = 0;
	while (i < len) {
		uint64_t v[2];
		for (int k = 0; k < 2; k++) {
			size_t d = 0;
			v[k] = 0;
			while (i < len && text[i] >= '0' && text[i] <= '9') {
				unsigned dig = (unsigned)(text[i] - '0');
				if (v[k] > (UINT64_MAX - dig) / 10)
					goto bad;
				v[k] = v[k] * 10 + dig;
				i++;
				d++;
			}
			if (!d)
				goto bad;
			if (k == 0) {
				if (i >= len || text[i] != ' ')
					goto bad;
				i++;
			}
		}
		if (i < len && text[i] != '\n')
			goto bad;
		i++;
		if (v[0] != off[line]) {
			loom_err_set(err, LOOM_EFORMAT,
				     "%s: line %zu: offset %" PRIu64 " but the previous record ends"
				     " at %" PRIu64, name, line + 1, v[0], off[line]);
			free(off);
			return LOOM_EFORMAT;
		}
		if (v[1] < LOOM_TFR_OVERHEAD || v[0] + v[1] < v[0]) {
			loom_err_set(err, LOOM_EFORMAT,
				     "%s: line %zu: record size %" PRIu64 " is impossible", name,
				     line + 1, v[1]);
			free(off);
			return LOOM_EFORMAT;
		}
		off[line + 1] = v[0] + v[1];
		line++;
	}
	*offsets = off;
	*n = line;
	return 0;
bad:
	loom_err_set(err, LOOM_EFORMAT, "%s: line %zu: not '<offset> <size>'", name, line + 1);
	free(off);
	return LOOM_EFORMAT;
}

size_t loom_tfr_index_max(uint64_t file_bytes)
{
	uint64_t lines = file_bytes / LOOM_TFR_OVERHEAD + 1;
	return lines > SIZE_MAX / 128 - 4096 ? SIZE_MAX / 2 : (size_t)lines * 96 + 4096;
}

int loom_tfr_index_format(const uint64_t *offsets, uint64_t n, char **text, size_t *len,
			  struct loom_err *err)
{
	size_t cap = (size_t)n * 42 + 1, used = 0;
	char *t = malloc(cap);
	if (!t)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	for (uint64_t i = 0; i < n; i++) {
		char tmp[24];
		uint64_t vals[2] = { offsets[i], offsets[i + 1] - offsets[i] };
		for (int k = 0; k < 2; k++) {
			int d = 0;
			uint64_t v = vals[k];
			do {
				tmp[d++] = (char)('0' + v % 10);
				v /= 10;
			} while (v);
			while (d)
				t[used++] = tmp[--d];
			t[used++] = k ? '\n' : ' ';
		}
	}
	t[used] = 0;
	*text = t;
	*len = used;
	return 0;
}

int loom_tfr_index_write(const char *path, const uint64_t *offsets, uint64_t n,
			 struct loom_err *err)
{
	char *t;
	size_t len;
	int rc = loom_tfr_index_format(offsets, n, &t, &len, err);
	if (rc < 0)
		return rc;
	rc = loom_write_file_atomic(path, t, len, err);
	free(t);
	return rc;
}

int loom_tfr_scan(const char *path,
		  int (*check)(void *ctx, const uint8_t *payload, size_t len, struct loom_err *e),
		  void (*progress)(void *ctx, uint64_t records, uint64_t bytes), void *ctx,
		  struct loom_tfr_scan *s, struct loom_err *err)
{
	memset(s, 0, sizeof *s);
	s->pmin = UINT64_MAX;
	struct loom_tfr_reader *r = loom_tfr_reader_open(path, check ? 0 : LOOM_TFR_SKIP_PAYLOAD,
							 err);
	if (!r)
		return err->code ? err->code : LOOM_EIO;
	size_t cap = 1 << 16;
	uint64_t n = 0, *off = malloc(cap * sizeof *off);
	struct loom_tfr_record rec;
	int rc, told = 0; /* the error is in err already */
	if (!off) {
		loom_tfr_reader_free(r);
		return loom_err_set(err, LOOM_ENOMEM, "%s: out of memory", path);
	}
	off[0] = 0;
	while ((rc = loom_tfr_reader_next(r, &rec)) == 0) {
		struct loom_err ce;
		if (check && (rc = check(ctx, rec.data, rec.len, &ce)) < 0) {
			loom_err_set(err, rc, "%s: record %" PRIu64 " at byte %" PRIu64 ": %s", path,
				     rec.index, rec.offset, ce.msg);
			told = 1;
			break;
		}
		if (n + 2 > cap) {
			uint64_t *p = realloc(off, 2 * cap * sizeof *off);
			if (!p) {
				rc = loom_err_set(err, LOOM_ENOMEM, "%s: out of memory", path);
				told = 1;
				break;
			}
			off = p;
			cap *= 2;
		}
		off[n] = rec.offset;
		off[++n] = rec.offset + rec.len + LOOM_TFR_OVERHEAD;
		s->psum += rec.len;
		if (rec.len < s->pmin)
			s->pmin = rec.len;
		if (rec.len > s->pmax)
			s->pmax = rec.len;
		if (progress && (n & 1023) == 0)
			progress(ctx, n, loom_tfr_reader_offset(r));
	}
	if (rc == LOOM_EOF) {
		s->offsets = off;
		s->records = n;
		s->bytes = loom_tfr_reader_offset(r);
		rc = 0;
	} else {
		if (!told) /* the reader's own */
			loom_err_set(err, rc, "%s", loom_tfr_reader_error(r));
		free(off);
	}
	loom_tfr_reader_free(r);
	return rc;
}

/* ======================================================================
 * Random access
 * ====================================================================== */

struct loom_tfr_file {
	int fd;              /* -1: opened again for each read (fd budget spent) */
	char *path;
	uint64_t n;
	uint64_t *off;
	size_t max_payload;
	struct loom_err err;
};

/* f's file for one read (f->fd, or opened again: it must still be the
 * regular file of the size its index covers). */
static int read_fd(struct loom_tfr_file *f, struct loom_err *err)
{
	if (f->fd >= 0)
		return f->fd;
	uint64_t size;
	int fd = loom_file_open_regular(f->path, UINT64_MAX, &size, err);
	if (fd >= 0 && size != f->off[f->n]) {
		close(fd);
		return loom_err_set(err, LOOM_EFORMAT, "'%s' is %" PRIu64 " bytes now, %" PRIu64
				    " when it was opened (changed while read?)", f->path, size,
				    f->off[f->n]);
	}
	return fd;
}

struct loom_tfr_file *loom_tfr_file_open(const char *path, const char *index_path,
					 struct loom_err *err)
{
	uint64_t fsize;
	int fd = loom_file_open_regular(path, UINT64_MAX, &fsize, err);
	return fd < 0 ? NULL : loom_tfr_file_open_fd(fd, fsize, path, index_path, err);
}

struct loom_tfr_file *loom_tfr_file_open_fd(int fd, uint64_t fsize, const char *path,
					    const char *index_path, struct loom_err *err)
{
	struct loom_tfr_file *f = calloc(1, sizeof *f);
	char *ipath = NULL, *text = NULL;
	size_t tlen;
	if (!f || !(f->path = strdup(path))) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		free(f);
		close(fd);
		return NULL;
	}
	f->fd = fd;
	if (!index_path) {
		if (asprintf(&ipath, "%s.index", path) < 0) {
			ipath = NULL;
			loom_err_set(err, LOOM_ENOMEM, "out of memory");
			goto fail;
		}
		index_path = ipath;
	}
	if (loom_file_read_bounded(index_path, loom_tfr_index_max(fsize), &text, &tlen, err) < 0)
		goto fail;
	if (loom_tfr_index_parse(text, tlen, index_path, &f->off, &f->n, err) < 0)
		goto fail;
	if (f->off[f->n] != fsize) {
		loom_err_set(err, LOOM_EFORMAT,
			     "%s: index disagrees with its file: it covers %" PRIu64
			     " bytes in %" PRIu64 " records, the file has %" PRIu64 " bytes",
			     index_path, f->off[f->n], f->n, fsize);
		goto fail;
	}
	for (uint64_t i = 0; i < f->n; i++) {
		uint64_t p = f->off[i + 1] - f->off[i] - LOOM_TFR_OVERHEAD;
		if (p > SIZE_MAX / 2) {
			loom_err_set(err, LOOM_ERANGE, "%s: record %" PRIu64 " too large",
				     index_path, i);
			goto fail;
		}
		if (p > f->max_payload)
			f->max_payload = (size_t)p;
	}
	free(text);
	free(ipath);
	if (!fd_take()) {
		close(f->fd);
		f->fd = -1;
	}
	return f;
fail:
	free(text);
	free(ipath);
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	loom_tfr_file_free(f);
	return NULL;
}

uint64_t loom_tfr_file_count(const struct loom_tfr_file *f)
{
	return f->n;
}

size_t loom_tfr_file_payload_len(const struct loom_tfr_file *f, uint64_t i)
{
	return i < f->n ? (size_t)(f->off[i + 1] - f->off[i] - LOOM_TFR_OVERHEAD) : 0;
}

size_t loom_tfr_file_max_payload(const struct loom_tfr_file *f)
{
	return f->max_payload;
}

uint64_t loom_tfr_file_offset(const struct loom_tfr_file *f, uint64_t i)
{
	return i <= f->n ? f->off[i] : f->off[f->n];
}

static int read_record(struct loom_tfr_file *f, int fd, uint64_t i, uint64_t off, size_t plen,
		       void *buf, size_t *len, struct loom_err *err);

int loom_tfr_file_read(struct loom_tfr_file *f, uint64_t i, void *buf, size_t cap,
		       size_t *len, struct loom_err *err)
{
	if (!err)
		err = &f->err;
	if (i >= f->n)
		return loom_err_set(err, LOOM_EINVAL, "%s: record %" PRIu64 " out of range (%"
				    PRIu64 " records)", f->path, i, f->n);
	uint64_t off = f->off[i];
	size_t plen = loom_tfr_file_payload_len(f, i);
	if (cap < plen)
		return loom_err_set(err, LOOM_ERANGE, "%s: record %" PRIu64
				    ": buffer of %zu bytes for a payload of %zu", f->path, i,
				    cap, plen);
	int fd = read_fd(f, err);
	if (fd < 0)
		return fd;
	int rc = read_record(f, fd, i, off, plen, buf, len, err);
	if (fd != f->fd)
		close(fd);
	return rc;
}

static int read_record(struct loom_tfr_file *f, int fd, uint64_t i, uint64_t off, size_t plen,
		       void *buf, size_t *len, struct loom_err *err)
{
	uint8_t h[LOOM_TFR_HEADER], t[LOOM_TFR_FOOTER];
	struct iovec iov[3] = { { h, sizeof h }, { buf, plen }, { t, sizeof t } };
	size_t want = plen + LOOM_TFR_OVERHEAD, done = 0;
	while (done < want) {
		/* Rare partial reads: redo the remaining part with pread. */
		ssize_t n;
		if (done == 0)
			n = preadv(fd, iov, 3, (off_t)off);
		else {
			uint8_t *tmp = malloc(want - done);
			if (!tmp)
				return loom_err_set(err, LOOM_ENOMEM, "out of memory");
			n = pread(fd, tmp, want - done, (off_t)(off + done));
			for (ssize_t k = 0; k < n; k++) {
				size_t at = done + (size_t)k;
				if (at < LOOM_TFR_HEADER)
					h[at] = tmp[k];
				else if (at < LOOM_TFR_HEADER + plen)
					((uint8_t *)buf)[at - LOOM_TFR_HEADER] = tmp[k];
				else
					t[at - LOOM_TFR_HEADER - plen] = tmp[k];
			}
			free(tmp);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return loom_err_errno(err, LOOM_EIO, errno, "cannot read '%s'", f->path);
		}
		if (n == 0)
			return record_error(err, LOOM_ETRUNC, f->path, i, off,
					    "file ends inside the record (file shrank?)");
		done += (size_t)n;
	}
	uint64_t hl = get_u64(h);
	if (get_u32(h + 8) != loom_crc32c_masked(h, 8))
		return record_error(err, LOOM_ECHECKSUM, f->path, i, off,
				    "length CRC mismatch (length field %" PRIu64 ")", hl);
	if (hl != plen)
		return record_error(err, LOOM_EFORMAT, f->path, i, off,
				    "index disagrees with its file: index says a payload of %zu"
				    " bytes, the record header says %" PRIu64, plen, hl);
	if (get_u32(t) != loom_crc32c_masked(buf, plen))
		return record_error(err, LOOM_ECHECKSUM, f->path, i, off,
				    "payload CRC mismatch");
	if (len)
		*len = plen;
	return 0;
}

const char *loom_tfr_file_path(const struct loom_tfr_file *f)
{
	return f->path;
}

void loom_tfr_file_free(struct loom_tfr_file *f)
{
	if (!f)
		return;
	if (f->fd >= 0) {
		close(f->fd);
		fd_give();
	}
	free(f->path);
	free(f->off);
	free(f);
}

const char *loom_tfr_file_error(const struct loom_tfr_file *f)
{
	return f->err.msg;
}
