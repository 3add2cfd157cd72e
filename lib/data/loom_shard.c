/* loom_shard.c - see loom_shard.h */
#include "loom_shard.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <pthread.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "loom_example.h"
#include "loom_file.h"
#include "loom_shardset.h"

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
	int prepared;        /* loom_shard_prepare() done */
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

	struct loom_shardset *set; /* the output set */
	int finished;
	struct loom_shard_stats st;
	struct loom_err err;
};

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
	uint64_t bb = s->o.memory / 4 / NBUCKET;
	s->bk_bufsize = (size_t)(bb < (4u << 10) ? (4u << 10) : bb > (1u << 20) ? (1u << 20) : bb);
	struct loom_shardset_opts so = {
		.prefix = s->prefix,
		.who = "loom-shard",
		.shards = o->shards,
		.records_per_shard = o->records_per_shard,
		.buffer = (size_t)(wb < (64u << 10) ? (64u << 10) : wb > (4u << 20) ? (4u << 20) : wb),
		.no_sha256 = o->no_sha256,
		.commit_step = o->commit_step,
		.commit_step_ctx = o->commit_step_ctx,
	};
	if (!(s->set = loom_shardset_open(&so, err))) {
		loom_shard_free(s);
		return NULL;
	}
	return s;
}

/* ---- output ---- */

static int put_payload(struct loom_shard *s, const uint8_t *p, size_t n)
{
	if (s->o.val_records && (s->nout++ < s->o.val_records) != !!s->o.val)
		return 0; /* the other side of the validation split */
	uint64_t written = loom_shardset_records(s->set);
	if (s->o.progress && s->o.shuffle && (written & 4095) == 0)
		s->o.progress(s->o.progress_ctx, written, s->nsamples);
	return loom_shardset_put(s->set, p, n, &s->err);
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
	if (n)
		qsort(e, n, sizeof *e, cmp_ent); /* e is NULL without samples */
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

/* The tail, the second pass, every shard and index under this run's names. */
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
				    " than --seq %" PRIu64 " (or --keep-tail and at least %" PRIu64
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
	if (!loom_shardset_records(s->set))
		return loom_err_set(&s->err, LOOM_EFORMAT,
				    s->o.val ? "the validation split has none of the %" PRIu64
					       " samples: raise --val-fraction or --val-records"
					     : "the validation split takes all %" PRIu64 " samples:"
					       " none is left for training", s->nseen);
	return loom_shardset_prepare(s->set, &s->err);
}

/* The manifest: the commit point (loom_shardset.h). */
static int commit(struct loom_shard *s)
{
	int rc;
	uint64_t written = loom_shardset_records(s->set);
	json_t *cmd = json_array(), *m = json_object();
	if (!m || !cmd) {
		json_decref(m);
		json_decref(cmd);
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
	json_object_set_new(m, "records", json_integer((json_int_t)written));
	json_object_set_new(m, "tail_tokens", json_integer((json_int_t)s->tail));
	json_object_set_new(m, "shuffle", json_boolean(s->o.shuffle));
	json_object_set_new(m, "seed", json_integer((json_int_t)s->o.seed));
	json_object_set_new(m, "sharding", json_string(s->o.shards ? "round-robin"
							: "contiguous"));
	json_object_set_new(m, "shards", json_null());
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
	struct loom_shardset_result r;
	if ((rc = loom_shardset_commit(s->set, m, &r, &s->err)) < 0)
		return rc;
	s->finished = 1;
	s->st.tokens = s->total;
	s->st.samples = written;
	s->st.tail_tokens = s->tail;
	s->st.shards = r.shards;
	s->st.bytes = r.bytes;
	s->st.spilled = s->spill_bytes;
	snprintf(s->st.manifest, sizeof s->st.manifest, "%s", r.manifest);
	snprintf(s->st.note, sizeof s->st.note, "%s", r.note);
	return 0;
}

int loom_shard_prepare(struct loom_shard *s)
{
	if (s->err.code)
		return s->err.code;
	if (s->finished || s->prepared)
		return 0;
	int rc = prepare(s);
	s->prepared = rc == 0;
	return rc;
}

int loom_shard_commit(struct loom_shard *s)
{
	if (s->err.code)
		return s->err.code;
	if (s->finished)
		return 0;
	if (!s->prepared)
		return loom_err_set(&s->err, LOOM_EINVAL, "loom_shard_commit before loom_shard_prepare");
	return commit(s);
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
	loom_shardset_free(s->set); /* before a commit: removes the run's files */
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

void loom_shard_summary(const struct loom_shard_opts *o, const struct loom_shard_stats *st,
			const struct loom_shard_stats *val, double seconds, char *buf, size_t n)
{
	char b1[32], b2[32], sp[64] = "", vs[4200] = "";
	if (st->spilled)
		snprintf(sp, sizeof sp, ", spilled %s", loom_fmt_bytes((double)st->spilled, b2, sizeof b2));
	if (val)
		snprintf(vs, sizeof vs, "; validation %" PRIu64 " record%s -> %s", val->samples,
			 val->samples == 1 ? "" : "s", val->manifest);
	snprintf(buf, n,
		 "%" PRIu64 " tokens -> %" PRIu64 " record%s (seq %u, stride %u%s)"
		 " in %" PRIu64 " shard%s, %s, %s%s, %.2f s -> %s%s",
		 st->tokens, st->samples, st->samples == 1 ? "" : "s", o->seq_len,
		 o->stride ? o->stride : o->seq_len, st->tail_tokens ? ", 1 tail" : "", st->shards,
		 st->shards == 1 ? "" : "s", loom_fmt_bytes((double)st->bytes, b1, sizeof b1),
		 o->shuffle ? "shuffled" : "stream order", sp, seconds, st->manifest, vs);
}
