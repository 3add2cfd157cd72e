/* loom_batch.c - see loom_batch.h and formats/batch.md */
#include "loom_batch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom_crc32c.h"
#include "loom_file.h"
#include "loom_profile.h"

#define KNOWN_FLAGS (LOOM_BATCH_F_END | LOOM_BATCH_F_PAD)
#define KNOWN_FLAGS_V2 (KNOWN_FLAGS | LOOM_BATCH_F_FEATURES)
#define ENTRY_SIZE 32

static void put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

size_t loom_batch_dtype_size(unsigned dtype)
{
	return dtype == LOOM_BATCH_U16 ? 2 : dtype == LOOM_BATCH_U32 ? 4 : 0;
}

size_t loom_batch_frame_size(unsigned dtype, uint32_t batch, uint32_t seq_len)
{
	return LOOM_BATCH_HEADER_SIZE + (size_t)batch * seq_len * loom_batch_dtype_size(dtype);
}

static size_t pad8(uint64_t n)
{
	return (size_t)((n + 7) & ~(uint64_t)7);
}

static size_t feat_dsize(unsigned dtype)
{
	switch (dtype) {
	case LOOM_BATCH_U8: return 1;
	case LOOM_BATCH_U16: return 2;
	case LOOM_BATCH_U32: case LOOM_BATCH_I32: return 4;
	case LOOM_BATCH_I64: return 8;
	default: return 0;
	}
}

/* Values of feature f in a frame of h's shape. */
static uint64_t feat_count(const struct loom_batch_hdr *h, const struct loom_batch_feature *f)
{
	return (uint64_t)h->batch * f->length;
}

/* The feature table f[0..nf) for frames of h's shape: "" if good, else
 * why not into why[0..n). */
static int bad_table(const struct loom_batch_hdr *h, const struct loom_batch_feature *f,
		     size_t nf, char *why, size_t n)
{
	if (nf < 1 || nf > LOOM_BATCH_MAX_FEATURES) {
		snprintf(why, n, "%zu features (1 to %d)", nf, LOOM_BATCH_MAX_FEATURES);
		return 1;
	}
	for (size_t k = 0; k < nf; k++) {
		const struct loom_batch_feature *e = &f[k];
		size_t l = strnlen(e->name, LOOM_BATCH_NAME_MAX);
		const char *what = NULL;
		if (l == 0 || l == LOOM_BATCH_NAME_MAX)
			what = "name empty or without its NUL";
		else if (e->shape != LOOM_BATCH_PER_TOKEN && e->shape != LOOM_BATCH_PER_RECORD)
			what = "unknown shape";
		else if (!feat_dsize(e->dtype))
			what = "unknown dtype";
		else if (e->shape == LOOM_BATCH_PER_TOKEN ? e->length != h->seq_len
							  : e->length < 1 || e->length > 65535)
			what = "length does not fit its shape";
		for (size_t j = 0; !what && j < k; j++)
			if (!strncmp(f[j].name, e->name, LOOM_BATCH_NAME_MAX))
				what = "name repeats";
		if (what) {
			snprintf(why, n, "feature %zu \"%.*s\": %s (shape %u, dtype %u, length %u)",
				 k, (int)l, e->name, what, e->shape, e->dtype, e->length);
			return 1;
		}
	}
	return 0;
}

uint8_t loom_batch_narrowest(const int64_t *v, size_t n)
{
	int64_t lo = 0, hi = 0;
	for (size_t i = 0; i < n; i++) {
		lo = v[i] < lo ? v[i] : lo;
		hi = v[i] > hi ? v[i] : hi;
	}
	if (lo >= 0 && hi <= 255)
		return LOOM_BATCH_U8;
	return lo >= INT32_MIN && hi <= INT32_MAX ? LOOM_BATCH_I32 : LOOM_BATCH_I64;
}

size_t loom_batch_frame_size_features(uint32_t batch, uint32_t seq_len,
				      const struct loom_batch_feature *f, size_t nf)
{
	size_t sz = LOOM_BATCH_HEADER_SIZE + 8 + ENTRY_SIZE * nf +
		    pad8((uint64_t)batch * seq_len * 4);
	for (size_t k = 0; k < nf; k++)
		sz += pad8((uint64_t)batch * f[k].length * 8);
	return sz;
}

static void encode_hdr(const struct loom_batch_hdr *h, unsigned char *p)
{
	memcpy(p, LOOM_BATCH_MAGIC, 4);
	put16(p + 4, h->flags & LOOM_BATCH_F_FEATURES ? LOOM_BATCH_VERSION_FEATURES
						       : LOOM_BATCH_VERSION);
	put16(p + 6, LOOM_BATCH_HEADER_SIZE);
	put16(p + 8, h->dtype);
	put16(p + 10, h->flags);
	put32(p + 12, h->batch);
	put32(p + 16, h->seq_len);
	put32(p + 20, h->pad_id);
	put64(p + 24, h->seq);
	put32(p + 32, h->epoch);
	put16(p + 36, h->rank);
	put16(p + 38, h->world);
	put64(p + 40, h->payload_bytes);
	put64(p + 48, h->seed);
	put32(p + 56, h->payload_crc);
	put32(p + 60, loom_crc32c(0, p, 60));
}

long loom_batch_encode(const struct loom_batch_hdr *h0, const uint32_t *tokens, void *out)
{
	struct loom_batch_hdr h = *h0;
	unsigned char *p = out;
	size_t tsz = loom_batch_dtype_size(h.dtype);
	if (!tsz || h.world == 0 || h.rank >= h.world || (h.flags & ~KNOWN_FLAGS))
		return LOOM_EINVAL;
	if (h.flags & LOOM_BATCH_F_END) {
		h.payload_bytes = 0;
		h.payload_crc = loom_crc32c(0, NULL, 0);
		encode_hdr(&h, p);
		return LOOM_BATCH_HEADER_SIZE;
	}
	uint64_t n = (uint64_t)h.batch * h.seq_len;
	if (h.batch == 0 || h.seq_len < 2 || n > LOOM_BATCH_MAX_TOKENS || !tokens)
		return LOOM_EINVAL;
	unsigned char *q = p + LOOM_BATCH_HEADER_SIZE;
	if (h.dtype == LOOM_BATCH_U16) {
		for (uint64_t i = 0; i < n; i++) {
			if (tokens[i] > 0xffff)
				return LOOM_ERANGE;
			put16(q + 2 * i, (uint16_t)tokens[i]);
		}
	} else {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		memcpy(q, tokens, n * 4);
#else
		for (uint64_t i = 0; i < n; i++)
			put32(q + 4 * i, tokens[i]);
#endif
	}
	h.payload_bytes = n * tsz;
	h.payload_crc = loom_crc32c(0, q, h.payload_bytes);
	encode_hdr(&h, p);
	return (long)(LOOM_BATCH_HEADER_SIZE + h.payload_bytes);
}

static int put_value(unsigned char *p, unsigned dtype, int64_t v)
{
	switch (dtype) {
	case LOOM_BATCH_U8:
		if (v < 0 || v > 255)
			return LOOM_ERANGE;
		*p = (unsigned char)v;
		return 0;
	case LOOM_BATCH_U16:
		if (v < 0 || v > 0xffff)
			return LOOM_ERANGE;
		put16(p, (uint16_t)v);
		return 0;
	case LOOM_BATCH_U32:
		if (v < 0 || v > 0xffffffffll)
			return LOOM_ERANGE;
		put32(p, (uint32_t)v);
		return 0;
	case LOOM_BATCH_I32:
		if (v < INT32_MIN || v > INT32_MAX)
			return LOOM_ERANGE;
		put32(p, (uint32_t)v);
		return 0;
	default:
		put64(p, (uint64_t)v);
		return 0;
	}
}

static int64_t get_value(const unsigned char *p, unsigned dtype)
{
	switch (dtype) {
	case LOOM_BATCH_U8: return *p;
	case LOOM_BATCH_U16: return get16(p);
	case LOOM_BATCH_U32: return get32(p);
	case LOOM_BATCH_I32: return (int32_t)get32(p);
	default: return (int64_t)get64(p);
	}
}

long loom_batch_encode_features(const struct loom_batch_hdr *h0, const uint32_t *tokens,
				const struct loom_batch_feature *f, size_t nf,
				const int64_t *const *values, void *out)
{
	if (nf == 0)
		return loom_batch_encode(h0, tokens, out);
	struct loom_batch_hdr h = *h0;
	h.flags |= LOOM_BATCH_F_FEATURES;
	char why[160];
	if ((h.flags & LOOM_BATCH_F_END) || bad_table(&h, f, nf, why, sizeof why))
		return LOOM_EINVAL;
	/* the ids as a version-1 payload, after the table */
	unsigned char *p = out, *q = p + LOOM_BATCH_HEADER_SIZE;
	size_t table = 8 + ENTRY_SIZE * nf;
	struct loom_batch_hdr hv1 = *h0;
	hv1.flags &= (uint16_t)~LOOM_BATCH_F_FEATURES;
	long n = loom_batch_encode(&hv1, tokens, q + table - LOOM_BATCH_HEADER_SIZE);
	if (n < 0)
		return n;
	size_t ids = (size_t)n - LOOM_BATCH_HEADER_SIZE;
	/* loom_batch_encode wrote its header over the table: write the table now */
	memset(q, 0, table);
	put16(q, (uint16_t)nf);
	put16(q + 2, ENTRY_SIZE);
	for (size_t k = 0; k < nf; k++) {
		unsigned char *e = q + 8 + ENTRY_SIZE * k;
		memcpy(e, f[k].name, strnlen(f[k].name, LOOM_BATCH_NAME_MAX));
		e[24] = f[k].shape;
		e[25] = f[k].dtype;
		put32(e + 28, f[k].length);
	}
	size_t off = table + ids;
	memset(q + off, 0, pad8(off) - off);
	off = pad8(off);
	for (size_t k = 0; k < nf; k++) {
		uint64_t cnt = feat_count(&h, &f[k]);
		size_t ds = feat_dsize(f[k].dtype);
		for (uint64_t i = 0; i < cnt; i++)
			if (put_value(q + off + i * ds, f[k].dtype, values[k][i]) < 0)
				return LOOM_ERANGE;
		size_t end = off + (size_t)cnt * ds;
		memset(q + end, 0, pad8(end) - end);
		off = pad8(end);
	}
	h.payload_bytes = off;
	h.payload_crc = loom_crc32c(0, q, off);
	encode_hdr(&h, p);
	return (long)(LOOM_BATCH_HEADER_SIZE + off);
}

int loom_batch_decode_hdr(const void *buf, struct loom_batch_hdr *h, struct loom_err *err)
{
	const unsigned char *p = buf;
	if (memcmp(p, LOOM_BATCH_MAGIC, 4) != 0)
		return loom_err_set(err, LOOM_EFORMAT,
				    "bad magic %02x %02x %02x %02x (not a loom batch frame)",
				    p[0], p[1], p[2], p[3]);
	h->version = get16(p + 4);
	if (h->version != LOOM_BATCH_VERSION && h->version != LOOM_BATCH_VERSION_FEATURES)
		return loom_err_set(err, LOOM_EFORMAT,
				    "unsupported frame version %u (this reader knows %d and %d)",
				    h->version, LOOM_BATCH_VERSION, LOOM_BATCH_VERSION_FEATURES);
	if (get16(p + 6) != LOOM_BATCH_HEADER_SIZE)
		return loom_err_set(err, LOOM_EFORMAT, "header size %u, expected %d",
				    get16(p + 6), LOOM_BATCH_HEADER_SIZE);
	uint32_t crc = loom_crc32c(0, p, 60);
	if (crc != get32(p + 60))
		return loom_err_set(err, LOOM_ECHECKSUM,
				    "header checksum mismatch (stored %08x, computed %08x)",
				    get32(p + 60), crc);
	h->dtype = get16(p + 8);
	h->flags = get16(p + 10);
	h->batch = get32(p + 12);
	h->seq_len = get32(p + 16);
	h->pad_id = get32(p + 20);
	h->seq = get64(p + 24);
	h->epoch = get32(p + 32);
	h->rank = get16(p + 36);
	h->world = get16(p + 38);
	h->payload_bytes = get64(p + 40);
	h->seed = get64(p + 48);
	h->payload_crc = get32(p + 56);
	size_t tsz = loom_batch_dtype_size(h->dtype);
	if (!tsz)
		return loom_err_set(err, LOOM_EFORMAT, "unknown dtype %u", h->dtype);
	if (h->flags & ~(h->version == LOOM_BATCH_VERSION ? KNOWN_FLAGS : KNOWN_FLAGS_V2))
		return loom_err_set(err, LOOM_EFORMAT, "unknown flags 0x%04x", h->flags);
	if (h->world == 0 || h->rank >= h->world)
		return loom_err_set(err, LOOM_EFORMAT, "rank %u of world %u", h->rank, h->world);
	if (h->flags & LOOM_BATCH_F_END) {
		if (h->payload_bytes != 0)
			return loom_err_set(err, LOOM_EFORMAT,
					    "end-of-stream frame with %llu payload bytes",
					    (unsigned long long)h->payload_bytes);
		return 0;
	}
	/* loom writes token frames as version 1: a version-2 data frame
	 * without its features is no frame of a stream (formats/batch.md) */
	if (h->version == LOOM_BATCH_VERSION_FEATURES && !(h->flags & LOOM_BATCH_F_FEATURES))
		return loom_err_set(err, LOOM_EFORMAT, "a version-2 frame without features (flag "
				    "FEATURES): token frames are version 1");
	uint64_t n = (uint64_t)h->batch * h->seq_len;
	if (h->batch == 0 || h->seq_len < 2 || n > LOOM_BATCH_MAX_TOKENS)
		return loom_err_set(err, LOOM_EFORMAT, "bad shape %ux%u", h->batch, h->seq_len);
	if (h->flags & LOOM_BATCH_F_FEATURES) {
		/* the exact size needs the feature table (loom_batch_read) */
		if (h->payload_bytes < 8 + ENTRY_SIZE + pad8(n * tsz) ||
		    h->payload_bytes > LOOM_BATCH_MAX_PAYLOAD)
			return loom_err_set(err, LOOM_EFORMAT,
					    "payload_bytes %llu: no room for shape %ux%u and a "
					    "feature table, or more than %llu",
					    (unsigned long long)h->payload_bytes, h->batch,
					    h->seq_len, (unsigned long long)LOOM_BATCH_MAX_PAYLOAD);
		return 0;
	}
	if (h->payload_bytes != n * tsz)
		return loom_err_set(err, LOOM_EFORMAT,
				    "payload_bytes %llu does not match shape %ux%u of %zu-byte tokens",
				    (unsigned long long)h->payload_bytes, h->batch, h->seq_len, tsz);
	return 0;
}

/* --- reader --------------------------------------------------------------- */

struct loom_batch_reader {
	int fd;
	const unsigned char *mem;
	size_t mem_len, mem_pos;
	char *name;
	uint32_t want_batch, want_seq_len;
	int have_shape, ended;
	void (*wait)(void *ctx, int fd);	/* loom_batch_reader_on_wait */
	void *wait_ctx;
	uint64_t frames, offset, last_seq;
	unsigned char *raw;
	size_t raw_cap;
	uint32_t *tok;
	size_t tok_cap;
	/* features (version 2) */
	int accept_features, version;	/* version of the data frames so far */
	const char *features_hint;	/* what to do with a refused frame with features */
	struct loom_batch_feature ftab[LOOM_BATCH_MAX_FEATURES];
	size_t nf;
	int64_t *vals;			/* every feature's values */
	size_t vals_cap, voff[LOOM_BATCH_MAX_FEATURES];
	struct loom_err err;
};

static struct loom_batch_reader *reader_alloc(const char *name)
{
	struct loom_batch_reader *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->fd = -1;
	r->name = strdup(name ? name : "stream");
	if (!r->name) {
		free(r);
		return NULL;
	}
	return r;
}

struct loom_batch_reader *loom_batch_reader_new(int fd, const char *name)
{
	struct loom_batch_reader *r = reader_alloc(name);
	if (r)
		r->fd = fd;
	return r;
}

struct loom_batch_reader *loom_batch_reader_new_mem(const void *buf, size_t len,
						    const char *name)
{
	struct loom_batch_reader *r = reader_alloc(name);
	if (r) {
		r->mem = buf;
		r->mem_len = len;
	}
	return r;
}

void loom_batch_reader_free(struct loom_batch_reader *r)
{
	if (!r)
		return;
	free(r->raw);
	free(r->tok);
	free(r->vals);
	free(r->name);
	free(r);
}

void loom_batch_reader_features_hint(struct loom_batch_reader *r, const char *hint)
{
	r->features_hint = hint;
}

void loom_batch_reader_accept_features(struct loom_batch_reader *r)
{
	r->accept_features = 1;
}

void loom_batch_reader_features(const struct loom_batch_reader *r,
				const struct loom_batch_feature **f, size_t *n)
{
	*f = r->ftab;
	*n = r->nf;
}

const int64_t *loom_batch_reader_values(const struct loom_batch_reader *r, size_t k)
{
	return k < r->nf ? r->vals + r->voff[k] : NULL;
}

void loom_batch_reader_expect(struct loom_batch_reader *r, uint32_t batch, uint32_t seq_len)
{
	r->want_batch = batch;
	r->want_seq_len = seq_len;
	r->have_shape = batch || seq_len;
}

void loom_batch_reader_on_wait(struct loom_batch_reader *r, void (*wait)(void *ctx, int fd),
			       void *ctx)
{
	r->wait = wait;
	r->wait_ctx = ctx;
}

/* Read up to n bytes (fewer only at EOF): bytes read, or -errno. */
static ssize_t src_read(struct loom_batch_reader *r, void *buf, size_t n)
{
	if (r->fd < 0) {
		size_t k = r->mem_len - r->mem_pos < n ? r->mem_len - r->mem_pos : n;
		if (k)
			memcpy(buf, r->mem + r->mem_pos, k);
		r->mem_pos += k;
		return (ssize_t)k;
	}
	size_t got = 0;
	while (got < n) {
		if (r->wait)
			r->wait(r->wait_ctx, r->fd);
		ssize_t k = read(r->fd, (char *)buf + got, n - got);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

#define FAIL(code, ...) \
	frame_err(r, code, __VA_ARGS__)

static __attribute__((format(printf, 3, 4))) int
frame_err(struct loom_batch_reader *r, int code, const char *fmt, ...)
{
	char msg[LOOM_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return loom_err_set(&r->err, code, "%s: frame %llu at byte %llu: %s", r->name,
			    (unsigned long long)r->frames, (unsigned long long)r->offset, msg);
}

/* The feature table and values of a version-2 payload (r->raw, checked
 * by its CRC); *ids = where the ids start. */
static int read_features(struct loom_batch_reader *r, const struct loom_batch_hdr *h,
			 const unsigned char **ids)
{
	const unsigned char *q = r->raw;
	uint64_t pb = h->payload_bytes;
	size_t nf = get16(q);
	if (get16(q + 2) != ENTRY_SIZE || get32(q + 4) != 0 || nf < 1 ||
	    nf > LOOM_BATCH_MAX_FEATURES || 8 + ENTRY_SIZE * nf > pb)
		return FAIL(LOOM_EFORMAT, "bad feature table: %zu features of %u bytes, "
			    "reserved %u", nf, get16(q + 2), get32(q + 4));
	struct loom_batch_feature t[LOOM_BATCH_MAX_FEATURES];
	for (size_t k = 0; k < nf; k++) {
		const unsigned char *e = q + 8 + ENTRY_SIZE * k;
		memcpy(t[k].name, e, LOOM_BATCH_NAME_MAX);
		t[k].shape = e[24];
		t[k].dtype = e[25];
		t[k].length = get32(e + 28);
		if (get16(e + 26))
			return FAIL(LOOM_EFORMAT, "feature %zu: reserved bytes not 0", k);
	}
	char why[160];
	if (bad_table(h, t, nf, why, sizeof why))
		return FAIL(LOOM_EFORMAT, "%s", why);
	uint64_t n = (uint64_t)h->batch * h->seq_len, off = 8 + ENTRY_SIZE * nf, total = 0;
	uint64_t need = pad8(off + n * loom_batch_dtype_size(h->dtype));
	for (size_t k = 0; k < nf; k++) {
		need += pad8(feat_count(h, &t[k]) * feat_dsize(t[k].dtype));
		total += feat_count(h, &t[k]);
	}
	if (need != pb)
		return FAIL(LOOM_EFORMAT, "payload_bytes %llu, the feature table needs %llu",
			    (unsigned long long)pb, (unsigned long long)need);
	if (r->nf) {
		for (size_t k = 0; k < nf || k < r->nf; k++)
			if (nf != r->nf || strcmp(t[k].name, r->ftab[k].name) ||
			    t[k].shape != r->ftab[k].shape || t[k].length != r->ftab[k].length)
				return FAIL(LOOM_EFORMAT, "feature %zu \"%s\" differs from the first "
					    "frame's features", k, k < nf ? t[k].name : "(none)");
	}
	if (total > r->vals_cap) {
		int64_t *v = realloc(r->vals, total * sizeof *v);
		if (!v)
			return FAIL(LOOM_ENOMEM, "out of memory");
		r->vals = v;
		r->vals_cap = total;
	}
	*ids = q + off;
	off = pad8(off + n * loom_batch_dtype_size(h->dtype));
	size_t vo = 0;
	for (size_t k = 0; k < nf; k++) {
		uint64_t cnt = feat_count(h, &t[k]);
		size_t ds = feat_dsize(t[k].dtype);
		r->voff[k] = vo;
		for (uint64_t i = 0; i < cnt; i++)
			r->vals[vo + i] = get_value(q + off + i * ds, t[k].dtype);
		vo += cnt;
		off = pad8(off + cnt * ds);
	}
	memcpy(r->ftab, t, nf * sizeof *t);
	r->nf = nf;
	return 0;
}

static int read_frame(struct loom_batch_reader *r, struct loom_batch_hdr *h,
		      const uint32_t **tokens)
{
	unsigned char hb[LOOM_BATCH_HEADER_SIZE];
	struct loom_err e;
	if (r->ended)
		return 0;
	ssize_t got = src_read(r, hb, sizeof hb);
	if (got < 0)
		return FAIL(LOOM_EIO, "cannot read: %s", strerror((int)-got));
	if (got == 0)
		return loom_err_set(&r->err, LOOM_ETRUNC,
				    "%s: stream ended after frame %llu (byte %llu) without an "
				    "end-of-stream frame (did the feeder die?)", r->name,
				    (unsigned long long)r->frames, (unsigned long long)r->offset);
	if ((size_t)got < sizeof hb)
		return FAIL(LOOM_ETRUNC, "stream ends inside the frame header (%zd of %d bytes)",
			    got, LOOM_BATCH_HEADER_SIZE);
	int rc = loom_batch_decode_hdr(hb, h, &e);
	if (rc < 0)
		return FAIL(rc, "%s", e.msg);
	if (h->flags & LOOM_BATCH_F_END) {
		if (r->frames && h->seq != r->last_seq + 1)
			return FAIL(LOOM_EFORMAT,
				    "end-of-stream frame says the next sequence number is %llu, "
				    "but the last frame was %llu", (unsigned long long)h->seq,
				    (unsigned long long)r->last_seq);
		r->offset += sizeof hb;
		unsigned char extra;
		got = src_read(r, &extra, 1);
		if (got > 0)
			return FAIL(LOOM_EFORMAT, "data after the end-of-stream frame");
		r->ended = 1;
		return 0;
	}
	if (r->have_shape && ((r->want_batch && h->batch != r->want_batch) ||
			      (r->want_seq_len && h->seq_len != r->want_seq_len)))
		return FAIL(LOOM_EFORMAT, "shape %ux%u, expected %ux%u", h->batch, h->seq_len,
			    r->want_batch ? r->want_batch : h->batch,
			    r->want_seq_len ? r->want_seq_len : h->seq_len);
	if ((h->flags & LOOM_BATCH_F_FEATURES) && !r->accept_features)
		return FAIL(LOOM_EFORMAT, "a frame with features (version 2): this reader reads "
			    "token frames only%s%s", r->features_hint ? "; " : "",
			    r->features_hint ? r->features_hint : "");
	if (r->frames && h->version != r->version)
		return FAIL(LOOM_EFORMAT, "version %u frame in a stream of version %d frames",
			    h->version, r->version);
	if (r->frames && h->seq != r->last_seq + 1)
		return FAIL(LOOM_EFORMAT, "sequence number %llu, expected %llu",
			    (unsigned long long)h->seq, (unsigned long long)(r->last_seq + 1));
	if (r->fd < 0 && h->payload_bytes > r->mem_len - r->mem_pos)
		return FAIL(LOOM_ETRUNC, "stream ends inside the payload (%zu of %llu bytes)",
			    r->mem_len - r->mem_pos, (unsigned long long)h->payload_bytes);
	if (h->payload_bytes > r->raw_cap) {
		unsigned char *p = realloc(r->raw, h->payload_bytes);
		if (!p)
			return FAIL(LOOM_ENOMEM, "out of memory");
		r->raw = p;
		r->raw_cap = h->payload_bytes;
	}
	size_t n = (size_t)h->batch * h->seq_len;
	if (n > r->tok_cap) {
		uint32_t *p = realloc(r->tok, n * sizeof *p);
		if (!p)
			return FAIL(LOOM_ENOMEM, "out of memory");
		r->tok = p;
		r->tok_cap = n;
	}
	got = src_read(r, r->raw, h->payload_bytes);
	if (got < 0)
		return FAIL(LOOM_EIO, "cannot read: %s", strerror((int)-got));
	if ((uint64_t)got < h->payload_bytes)
		return FAIL(LOOM_ETRUNC, "stream ends inside the payload (%zd of %llu bytes)",
			    got, (unsigned long long)h->payload_bytes);
	uint32_t crc = loom_crc32c(0, r->raw, h->payload_bytes);
	if (crc != h->payload_crc)
		return FAIL(LOOM_ECHECKSUM,
			    "payload checksum mismatch (stored %08x, computed %08x)",
			    h->payload_crc, crc);
	const unsigned char *ids = r->raw;
	if (h->flags & LOOM_BATCH_F_FEATURES) {
		rc = read_features(r, h, &ids);
		if (rc < 0)
			return rc;
	}
	if (h->dtype == LOOM_BATCH_U16) {
		for (size_t i = 0; i < n; i++)
			r->tok[i] = get16(ids + 2 * i);
	} else {
		for (size_t i = 0; i < n; i++)
			r->tok[i] = get32(ids + 4 * i);
	}
	if (!r->have_shape) {
		r->want_batch = h->batch;
		r->want_seq_len = h->seq_len;
		r->have_shape = 1;
	}
	r->offset += sizeof hb + h->payload_bytes;
	r->version = h->version;
	r->frames++;
	r->last_seq = h->seq;
	*tokens = r->tok;
	return 1;
}

/* the frame's read, timed for loom-train --profile (loom_profile.h) */
int loom_batch_read(struct loom_batch_reader *r, struct loom_batch_hdr *h,
		    const uint32_t **tokens)
{
	int rc;
	LOOM_PROF(LOOM_PROF_DATA, rc = read_frame(r, h, tokens););
	return rc;
}

uint64_t loom_batch_reader_frames(const struct loom_batch_reader *r)
{
	return r->frames;
}

uint64_t loom_batch_reader_offset(const struct loom_batch_reader *r)
{
	return r->offset;
}

const char *loom_batch_reader_error(const struct loom_batch_reader *r)
{
	return r->err.msg;
}

size_t loom_batch_first_bad_id(const struct loom_batch_hdr *h, const uint32_t *tok,
			       uint64_t limit)
{
	size_t n = (size_t)h->batch * h->seq_len;
	int pad = (h->flags & LOOM_BATCH_F_PAD) != 0;
	for (size_t i = 0; i < n; i++)
		if (tok[i] >= limit && !(pad && tok[i] == h->pad_id))
			return i;
	return n;
}
