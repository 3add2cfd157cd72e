/* loom_feed.c - see loom_feed.h */
#include "loom_feed.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom_batch.h"
#include "loom_example.h"
#include "loom_file.h"
#include "loom_hash.h"
#include "loom_manifest.h"
#include "loom_tfrecord.h"

struct shard {
	struct loom_tfr_file *f;
	uint64_t first, count;
};

enum { SLOT_EMPTY, SLOT_BUSY, SLOT_READY, SLOT_ERROR };

struct slot {
	int state;
	int rc;
	uint64_t seq;
	size_t len;
	unsigned char *buf;
	char msg[LOOM_ERR_MAX + 256];
};

struct loom_feed {
	struct loom_feed_opts o;
	struct shard *shards;
	size_t nshards;
	uint64_t N, K, G;		/* records, batches per epoch, global batch */
	uint32_t B, T1;
	char feature[128];		/* the Example feature holding the ids */
	/* a set with a kind (squad-features): the other features, carried in
	 * version-2 frames (formats/batch.md) */
	struct loom_batch_feature ft[LOOM_BATCH_MAX_FEATURES];
	size_t nf, nvals;		/* features, values of all of them in a frame */
	uint64_t start, end;		/* seq range [start, end) */
	size_t max_payload;
	/* Feistel permutation domain: 2^(2*half_bits) >= N */
	unsigned half_bits;
	/* ring */
	struct slot *slots;
	size_t nslots;
	uint64_t next_claim, written;
	int stop;			/* 1: a worker failed; 2: out of memory */
	pthread_mutex_t mu;
	pthread_cond_t cv_free, cv_ready;
	pthread_t *tid;
	unsigned nthreads;		/* started */
	/* the caller's side */
	uint64_t cur;			/* next seq to deliver */
	struct slot *held;		/* delivered, not yet given back */
	uint64_t frames, bytes;
	uint32_t last_epoch;
	int failed;
	struct loom_err err;
};

#define note(f, ...) loom_note((f)->o.note, (f)->o.note_ctx, __VA_ARGS__)

/* --- the permutation -------------------------------------------------------- */

static uint64_t round_fn(uint64_t key, unsigned r, uint64_t x)
{
	return loom_splitmix64(key ^ loom_splitmix64(((uint64_t)r << 56) ^ x));
}

/* Keyed 6-round balanced Feistel bijection on [0, 2^(2h)). */
static uint64_t feistel(unsigned h, uint64_t key, uint64_t x)
{
	const uint64_t mask = h >= 64 ? ~0ull : (1ull << h) - 1;
	uint64_t l = x >> h, r = x & mask;
	for (unsigned i = 0; i < 6; i++) {
		uint64_t t = l ^ (round_fn(key, i, r) & mask);
		l = r;
		r = t;
	}
	return (l << h) | r;
}

/* Position p of epoch e's permutation of [0, N). */
static uint64_t permute(const struct loom_feed *f, uint32_t epoch, uint64_t p)
{
	if (f->o.stream_order)
		return p;
	uint64_t key = loom_splitmix64(loom_splitmix64(f->o.seed) ^
				     (0x9e3779b97f4a7c15ull * (epoch + 1ull)));
	uint64_t x = p;
	do
		x = feistel(f->half_bits, key, x);
	while (x >= f->N);
	return x;
}

/* --- filling a frame -------------------------------------------------------- */

static size_t shard_of(const struct loom_feed *f, uint64_t g)
{
	size_t lo = 0, hi = f->nshards;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (f->shards[mid].first <= g)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

struct wbuf {
	unsigned char *payload;
	uint32_t *ids;
	uint32_t *tok;
	size_t ids_cap;
	int64_t *vals;			/* the frame's feature values, f->nvals */
	const int64_t *vptr[LOOM_BATCH_MAX_FEATURES];
	/* --bucket: the window last sorted (its first batch + 1; 0: none) and
	 * its records, by (size, shuffled position) */
	uint64_t win;
	struct brec *bsort;
};

struct brec {
	uint64_t size, j, g;    /* payload bytes, place in the shuffled window, record */
};

static int brec_cmp(const void *a, const void *b)
{
	const struct brec *x = a, *y = b;
	return x->size != y->size ? (x->size > y->size) - (x->size < y->size)
				  : (x->j > y->j) - (x->j < y->j);
}

/* Record rec's features into w's arrays at row b (exactly `length` values
 * each). */
static int fill_features(struct loom_feed *f, struct wbuf *w, struct slot *sl,
			 const struct shard *s, uint64_t rec, size_t len, uint32_t b)
{
	struct loom_err err;
	for (size_t k = 0; k < f->nf; k++) {
		uint32_t L = f->ft[k].length;
		int64_t *dst = (int64_t *)w->vptr[k] + (size_t)b * L;
		size_t n;
		int rc = loom_example_decode_i64(w->payload, len, f->ft[k].name, dst, L, &n, &err);
		char why[64];
		if ((rc == 0 || rc == LOOM_ERANGE) && n != L)
			snprintf(why, sizeof why, "%zu values, the manifest says %u", n, L);
		if (rc < 0 || n != L) {
			snprintf(sl->msg, sizeof sl->msg, "%s: record %llu: feature \"%s\": %s",
				 loom_tfr_file_path(s->f), (unsigned long long)rec, f->ft[k].name,
				 rc == 0 || rc == LOOM_ERANGE ? why : err.msg);
			return LOOM_EFORMAT;
		}
	}
	return 0;
}

/* --bucket: the B records of frame seq (this rank's rows).  The window of
 * W batches holding the frame is sorted once per worker (records by
 * payload size, ties by the shuffled order: the same bytes on every rank
 * and resume), cut into W global batches from the smallest; the frame's
 * place in the window picks one of them through a shuffle of the window
 * keyed by the seed, the epoch and the window. */
static const struct brec *bucket_rows(struct loom_feed *f, struct wbuf *w, uint64_t seq)
{
	uint32_t epoch = (uint32_t)(seq / f->K);
	uint64_t k = seq % f->K, W = f->o.bucket, w0 = k / W * W;
	uint64_t nw = f->K - w0 < W ? f->K - w0 : W;
	if (w->win != seq - k + w0 + 1) {
		for (uint64_t j = 0; j < nw * f->G; j++) {
			uint64_t g = permute(f, epoch, w0 * f->G + j);
			const struct shard *s = &f->shards[shard_of(f, g)];
			w->bsort[j] = (struct brec){ loom_tfr_file_payload_len(s->f, g - s->first), j, g };
		}
		qsort(w->bsort, nw * f->G, sizeof *w->bsort, brec_cmp);
		w->win = seq - k + w0 + 1;
	}
	/* slot k - w0 of the window: batch c of the sorted order, c the
	 * slot's place in a Fisher-Yates shuffle of [0, nw) */
	uint64_t key = loom_splitmix64(f->o.seed ^ loom_splitmix64(((uint64_t)epoch << 32) ^ w0));
	uint64_t order[nw];
	for (uint64_t j = 0; j < nw; j++)
		order[j] = j;
	for (uint64_t j = nw - 1; j > 0; j--) {
		key = loom_splitmix64(key);
		uint64_t r = key % (j + 1), t = order[j];
		order[j] = order[r];
		order[r] = t;
	}
	return w->bsort + order[k - w0] * f->G + (uint64_t)f->o.rank * f->B;
}

/* The B rows of frame `seq` into w->tok. */
static int fill_rows(struct loom_feed *f, struct wbuf *w, struct slot *sl, uint64_t seq)
{
	uint32_t epoch = (uint32_t)(seq / f->K);
	uint64_t base = (seq % f->K) * f->G + (uint64_t)f->o.rank * f->B;
	struct loom_err err;
	const struct brec *rows = f->o.bucket ? bucket_rows(f, w, seq) : NULL;
	for (uint32_t b = 0; b < f->B; b++) {
		uint64_t g = rows ? rows[b].g : permute(f, epoch, base + b);
		struct shard *s = &f->shards[shard_of(f, g)];
		uint64_t rec = g - s->first;
		size_t len, n;
		int rc = loom_tfr_file_read(s->f, rec, w->payload, f->max_payload, &len, &err);
		if (rc < 0) {
			snprintf(sl->msg, sizeof sl->msg, "%s", err.msg);
			return rc;
		}
		rc = loom_example_decode_u32(w->payload, len, f->feature, w->ids,
					     w->ids_cap, &n, &err);
		if (rc < 0) {
			snprintf(sl->msg, sizeof sl->msg, "%s: record %llu: %s",
				 loom_tfr_file_path(s->f), (unsigned long long)rec, err.msg);
			return rc;
		}
		if (f->nf && (rc = fill_features(f, w, sl, s, rec, len, b)) < 0)
			return rc;
		uint32_t *dst = w->tok + (size_t)b * f->T1;
		if (n >= f->T1) {
			memcpy(dst, w->ids, f->T1 * sizeof *dst);
		} else if (f->o.pad) {
			memcpy(dst, w->ids, n * sizeof *dst);
			for (size_t k = n; k < f->T1; k++)
				dst[k] = f->o.pad_id;
		} else {
			snprintf(sl->msg, sizeof sl->msg,
				 "%s: record %llu has %zu tokens but --seq %u needs %u "
				 "(use --pad ID or a smaller --seq)", loom_tfr_file_path(s->f),
				 (unsigned long long)rec, n, f->T1 - 1, f->T1);
			return LOOM_EFORMAT;
		}
	}
	return 0;
}

/* Frame `seq` (or its text lines) into sl->buf. */
static int fill(struct loom_feed *f, struct wbuf *w, struct slot *sl, uint64_t seq)
{
	int rc = fill_rows(f, w, sl, seq);
	if (rc < 0)
		return rc;
	uint32_t epoch = (uint32_t)(seq / f->K);
	if (f->o.text) {
		char *p = (char *)sl->buf;
		for (uint32_t b = 0; b < f->B; b++) {
			p += sprintf(p, "%llu %u %u:", (unsigned long long)seq, epoch, b);
			for (uint32_t k = 0; k < f->T1; k++)
				p += sprintf(p, " %u", w->tok[(size_t)b * f->T1 + k]);
			for (size_t k = 0; k < f->nf; k++) {
				uint32_t L = f->ft[k].length;
				p += sprintf(p, " | %s", f->ft[k].name);
				for (uint32_t i = 0; i < L; i++)
					p += sprintf(p, " %lld", (long long)w->vptr[k][(size_t)b * L + i]);
			}
			*p++ = '\n';
		}
		sl->len = (size_t)(p - (char *)sl->buf);
		return 0;
	}
	struct loom_batch_hdr h = {
		.dtype = (uint16_t)(f->o.dtype ? f->o.dtype : LOOM_BATCH_U16),
		.flags = f->o.pad ? LOOM_BATCH_F_PAD : 0, .batch = f->B, .seq_len = f->T1,
		.pad_id = f->o.pad ? f->o.pad_id : 0, .seq = seq, .epoch = epoch,
		.rank = (uint16_t)f->o.rank, .world = (uint16_t)f->o.world, .seed = f->o.seed,
	};
	struct loom_batch_feature ft[LOOM_BATCH_MAX_FEATURES];
	for (size_t k = 0; k < f->nf; k++) {
		ft[k] = f->ft[k];
		ft[k].dtype = loom_batch_narrowest(w->vptr[k], (size_t)f->B * ft[k].length);
	}
	long n = loom_batch_encode_features(&h, w->tok, ft, f->nf, w->vptr, sl->buf);
	if (n == LOOM_ERANGE && f->o.dtype == 0) {
		h.dtype = LOOM_BATCH_U32;
		n = loom_batch_encode_features(&h, w->tok, ft, f->nf, w->vptr, sl->buf);
	}
	if (n < 0) {
		snprintf(sl->msg, sizeof sl->msg, "batch %llu: a token id does not fit --dtype u16",
			 (unsigned long long)seq);
		return (int)n;
	}
	sl->len = (size_t)n;
	return 0;
}

static void *worker(void *arg)
{
	struct loom_feed *f = arg;
	struct wbuf w;
	w.ids_cap = f->max_payload + f->T1;
	w.payload = malloc(f->max_payload ? f->max_payload : 1);
	w.ids = malloc(w.ids_cap * sizeof *w.ids);
	w.tok = malloc((size_t)f->B * f->T1 * sizeof *w.tok);
	w.vals = malloc((f->nvals ? f->nvals : 1) * sizeof *w.vals);
	w.win = 0;
	w.bsort = f->o.bucket ? malloc((size_t)f->o.bucket * f->G * sizeof *w.bsort) : NULL;
	for (size_t k = 0, off = 0; w.vals && k < f->nf; k++) {
		w.vptr[k] = w.vals + off;
		off += (size_t)f->B * f->ft[k].length;
	}
	pthread_mutex_lock(&f->mu);
	if (!w.payload || !w.ids || !w.tok || !w.vals || (f->o.bucket && !w.bsort))
		f->stop = 2;
	for (;;) {
		if (f->stop || f->next_claim >= f->end)
			break;
		uint64_t seq = f->next_claim++;
		struct slot *sl = &f->slots[seq % f->nslots];
		while (!f->stop && seq >= f->written + f->nslots)
			pthread_cond_wait(&f->cv_free, &f->mu);
		/* Stopped by an error at a lower seq while waiting: that error is
		 * what the caller gets, this seq is never needed. */
		if (seq >= f->written + f->nslots)
			break;
		sl->state = SLOT_BUSY;
		sl->seq = seq;
		pthread_mutex_unlock(&f->mu);
		int rc = fill(f, &w, sl, seq);
		pthread_mutex_lock(&f->mu);
		sl->state = rc < 0 ? SLOT_ERROR : SLOT_READY;
		sl->rc = rc;
		if (rc < 0)
			f->stop = 1;	/* claimed earlier seqs still complete */
		pthread_cond_broadcast(&f->cv_ready);
	}
	pthread_cond_broadcast(&f->cv_ready);
	pthread_mutex_unlock(&f->mu);
	free(w.payload);
	free(w.ids);
	free(w.tok);
	free(w.vals);
	free(w.bsort);
	return NULL;
}

/* --- inputs ----------------------------------------------------------------- */

/* Shard tf (opened from `path`) joins the set; freed on failure. */
static int add_shard(struct loom_feed *f, struct loom_tfr_file *tf, const char *path,
		     const char *index, struct loom_err *err)
{
	struct shard *s = realloc(f->shards, (f->nshards + 1) * sizeof *s);
	if (!s) {
		loom_tfr_file_free(tf);
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	}
	f->shards = s;
	s[f->nshards].f = tf;
	s[f->nshards].first = f->N;
	s[f->nshards].count = loom_tfr_file_count(tf);
	f->N += s[f->nshards].count;
	if (loom_tfr_file_max_payload(tf) > f->max_payload)
		f->max_payload = loom_tfr_file_max_payload(tf);
	note(f, "shard %s: %llu records, index %s%s", path,
	     (unsigned long long)s[f->nshards].count, index ? index : path,
	     index ? "" : ".index");
	f->nshards++;
	return 0;
}

/* Open a shard of a manifest, checked against its entry: its size
 * ("bytes"), and its sha256 with verify (when recorded); one line naming
 * the manifest and the shard if they differ. */
static struct loom_tfr_file *open_shard(const char *manifest, const char *shard,
					const char *index, const struct loom_manifest_shard *e,
					int verify, struct loom_err *err)
{
	struct loom_err oe;
	uint64_t size;
	int fd = loom_file_open_regular(shard, UINT64_MAX, &size, &oe);
	if (fd < 0) {
		if (fd == LOOM_EIO)
			loom_err_set(err, LOOM_EIO, "%s: cannot open shard '%s': %s", manifest,
				     shard, strerror(errno));
		else
			loom_err_set(err, LOOM_EFORMAT, "%s: shard '%s' is not a regular file",
				     manifest, shard);
		return NULL;
	}
	char hex[LOOM_HASH_HEX_MAX];
	int rc = 0;
	if (e->has_bytes && size != (uint64_t)e->bytes)
		rc = loom_err_set(err, LOOM_EFORMAT, "%s: shard '%s' is %llu bytes, the "
				  "manifest says %lld", manifest, shard, (unsigned long long)size,
				  (long long)e->bytes);
	else if (verify && e->sha256 && (rc = loom_hash_file_hex("sha256", shard, hex, err)) == 0 &&
		 strcmp(hex, e->sha256))
		rc = loom_err_set(err, LOOM_ECHECKSUM, "%s: shard '%s' has sha256 %s, the "
				  "manifest says %s", manifest, shard, hex, e->sha256);
	if (rc < 0) {
		close(fd);
		return NULL;
	}
	return loom_tfr_file_open_fd(fd, size, shard, index, err);
}

/* A set with a kind: a squad-features set (formats/squad-features.md)
 * gives the record length and the features carried besides the ids. */
static int read_kind(struct loom_feed *f, const char *path, const struct loom_manifest *m,
		     struct loom_err *err)
{
	if (strcmp(m->kind, "squad-features"))
		return loom_err_set(err, LOOM_EFORMAT, "%s: a \"%s\" set: loom-feed reads "
				    "token-stream sets (loom-shard's) and squad-features sets",
				    path, m->kind);
	if (!m->has_seq_len || m->seq_len < 2 || m->seq_len > (1 << 24))
		return loom_err_set(err, LOOM_EFORMAT, "%s: a squad-features set without a "
				    "\"seq_len\" of 2 to 2^24", path);
	if (f->T1)
		return loom_err_set(err, LOOM_EINVAL, "%s: a squad-features set gives the record "
				    "length (%lld tokens): leave --seq out", path,
				    (long long)m->seq_len);
	if (f->o.pad)
		return loom_err_set(err, LOOM_EINVAL, "%s: --pad: the records of a squad-features "
				    "set all have %lld tokens", path, (long long)m->seq_len);
	f->T1 = (uint32_t)m->seq_len;
	const char *ids = m->feature ? m->feature : LOOM_EXAMPLE_IDS;
	for (size_t i = 0; i < m->nfeatures; i++) {
		const struct loom_manifest_feature *mf = &m->features[i];
		if (!strcmp(mf->name, ids))
			continue;
		if (f->nf == LOOM_BATCH_MAX_FEATURES || strlen(mf->name) >= LOOM_BATCH_NAME_MAX ||
		    (mf->per_token ? mf->length != m->seq_len : mf->length > 65535))
			return loom_err_set(err, LOOM_EFORMAT, "%s: features[%zu] \"%s\": more than "
					    "%d features, a name of %d bytes or more, or a length "
					    "a frame cannot carry", path, i, mf->name,
					    LOOM_BATCH_MAX_FEATURES, LOOM_BATCH_NAME_MAX);
		struct loom_batch_feature *bf = &f->ft[f->nf++];
		snprintf(bf->name, sizeof bf->name, "%s", mf->name);
		bf->shape = mf->per_token ? LOOM_BATCH_PER_TOKEN : LOOM_BATCH_PER_RECORD;
		bf->length = (uint32_t)mf->length;
		f->nvals += (size_t)f->B * bf->length;
	}
	return 0;
}

/* The shards of manifest `path` (names relative to its directory), each
 * checked against its entry; then its feature and seq_len. */
static int read_manifest(struct loom_feed *f, const char *path, struct loom_err *err)
{
	struct loom_manifest m;
	int rc = loom_manifest_read(path, &m, err);
	if (rc < 0)
		return rc;
	if (m.kind && (rc = read_kind(f, path, &m, err)) < 0) {
		loom_manifest_release(&m);
		return rc;
	}
	/* names are relative to the manifest's directory */
	const char *slash = strrchr(path, '/');
	char *dir = strndup(path, slash ? (size_t)(slash - path) + 1 : 0);
	if (!dir)
		rc = loom_err_set(err, LOOM_ENOMEM, "out of memory");
	for (size_t i = 0; rc == 0 && i < m.nshards; i++) {
		const struct loom_manifest_shard *e = &m.shards[i];
		if (!e->file) {
			rc = loom_err_set(err, LOOM_EFORMAT, "%s: shards[%zu] has no \"file\"",
					  path, i);
			break;
		}
		char *full = loom_path_join(dir, e->file);
		char *idx = e->index ? loom_path_join(dir, e->index) : NULL;
		struct loom_tfr_file *tf = NULL;
		if (!full || (e->index && !idx))
			rc = loom_err_set(err, LOOM_ENOMEM, "out of memory");
		else if (!(tf = e->bare ? loom_tfr_file_open(full, idx, err)
				       : open_shard(path, full, idx, e, f->o.verify, err)))
			rc = err->code;
		else
			rc = add_shard(f, tf, full, idx, err);
		if (rc == 0) {
			uint64_t count = f->shards[f->nshards - 1].count;
			if (e->has_records && (uint64_t)e->records != count)
				rc = loom_err_set(err, LOOM_EFORMAT, "%s: shard '%s' has %llu "
						  "records, the manifest says %lld", path, full,
						  (unsigned long long)count, (long long)e->records);
		}
		free(full);
		free(idx);
	}
	free(dir);
	if (rc == 0 && m.feature)
		snprintf(f->feature, sizeof f->feature, "%s", m.feature);
	if (rc == 0 && f->T1 < 1 && m.has_seq_len) /* a token set: its length is the user's */
		rc = loom_err_set(err, LOOM_EINVAL, "%s: a token set, whose frames' length is "
				  "chosen: give --seq (its records have %lld tokens: --seq %lld "
				  "takes them whole)", path, (long long)m.seq_len,
				  (long long)m.seq_len - 1);
	if (rc == 0 && m.has_seq_len && m.seq_len < (int64_t)f->T1 && !f->o.pad)
		rc = loom_err_set(err, LOOM_EFORMAT, "%s: records have seq_len %lld tokens but "
				  "--seq %u needs %u (use --pad ID or --seq %lld)", path,
				  (long long)m.seq_len, f->T1 - 1, f->T1, (long long)m.seq_len - 1);
	loom_manifest_release(&m);
	return rc;
}

/* --- the object ------------------------------------------------------------- */

static int check_opts(const struct loom_feed_opts *o, struct loom_err *err)
{
	uint32_t world = o->world ? o->world : 1;
	if (!o->manifest == !o->nshards)
		return loom_err_set(err, LOOM_EINVAL, "give a manifest or shard files");
	if (o->verify && !o->manifest)
		return loom_err_set(err, LOOM_EINVAL, "verify needs a manifest");
	if (o->batch < 1 || (o->seq_len < 1 && !o->manifest) ||
	    (uint64_t)o->batch * o->seq_len > LOOM_BATCH_MAX_TOKENS)
		return loom_err_set(err, LOOM_EINVAL, "a frame of %u x %u tokens", o->batch,
				    o->seq_len);
	if (o->rank >= world || world > 65535)
		return loom_err_set(err, LOOM_EINVAL, "rank %u of %u", o->rank, world);
	if (o->dtype && o->dtype != LOOM_BATCH_U16 && o->dtype != LOOM_BATCH_U32)
		return loom_err_set(err, LOOM_EINVAL, "dtype %d", o->dtype);
	if (o->bucket > 4096)
		return loom_err_set(err, LOOM_EINVAL, "bucket window of %u batches (at most 4096)",
				    o->bucket);
	if (o->dtype == LOOM_BATCH_U16 && o->pad && o->pad_id > 0xffff)
		return loom_err_set(err, LOOM_EINVAL, "pad id %u does not fit u16", o->pad_id);
	return 0;
}

struct loom_feed *loom_feed_new(const struct loom_feed_opts *o, struct loom_err *err)
{
	if (check_opts(o, err) < 0)
		return NULL;
	struct loom_feed *f = calloc(1, sizeof *f);
	if (!f) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	f->o = *o;
	f->o.manifest = NULL;
	f->o.shards = NULL;
	if (!f->o.world)
		f->o.world = 1;
	if (!f->o.threads)
		f->o.threads = 1;
	f->B = o->batch;
	f->T1 = o->seq_len;
	snprintf(f->feature, sizeof f->feature, "%s", LOOM_EXAMPLE_IDS);
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv_free, NULL);
	pthread_cond_init(&f->cv_ready, NULL);
	int rc = o->manifest ? read_manifest(f, o->manifest, err) : 0;
	for (size_t i = 0; rc == 0 && i < o->nshards; i++) {
		struct loom_tfr_file *tf = loom_tfr_file_open(o->shards[i], NULL, err);
		rc = tf ? add_shard(f, tf, o->shards[i], NULL, err) : err->code;
	}
	f->G = (uint64_t)f->B * f->o.world;
	if (rc == 0 && f->T1 < 1)
		rc = loom_err_set(err, LOOM_EINVAL, "a token-stream set needs a sequence length");
	if (rc == 0 && (uint64_t)f->B * f->T1 > LOOM_BATCH_MAX_TOKENS)
		rc = loom_err_set(err, LOOM_EINVAL, "a frame of %u x %u tokens", f->B, f->T1);
	if (rc == 0 && f->N < f->G)
		rc = loom_err_set(err, LOOM_EINVAL, "%llu records are fewer than one global batch "
				  "of %llu (--batch %u x --world %u)", (unsigned long long)f->N,
				  (unsigned long long)f->G, f->B, f->o.world);
	if (rc < 0) {
		loom_feed_free(f);
		return NULL;
	}
	f->K = f->N / f->G;
	f->half_bits = 1;
	while (f->half_bits < 32 && (1ull << (2 * f->half_bits)) < f->N)
		f->half_bits++;
	return f;
}

int loom_feed_start(struct loom_feed *f, uint64_t seq)
{
	if (f->failed)
		return f->failed;
	if (f->slots)
		return loom_err_set(&f->err, LOOM_EINVAL, "the feed is already started");
	uint64_t epochs = f->o.epochs;
	f->start = seq;
	f->end = epochs ? epochs * f->K : UINT64_MAX;
	if (epochs && f->end / f->K != epochs)
		f->end = UINT64_MAX;
	if (f->start > f->end)
		f->start = f->end;
	f->next_claim = f->written = f->cur = f->start;
	f->last_epoch = f->start < f->end ? (uint32_t)(f->start / f->K) : 0;

	f->nslots = f->o.threads * 4 < 8 ? 8 : f->o.threads * 4;
	f->slots = calloc(f->nslots, sizeof *f->slots);
	size_t fsz = f->o.text ? (size_t)f->B * (f->T1 * 11 + 64) + f->nvals * 21 + f->B * f->nf * 32
			       : loom_batch_frame_size_features(f->B, f->T1, f->ft, f->nf);
	for (size_t i = 0; f->slots && i < f->nslots; i++)
		if (!(f->slots[i].buf = malloc(fsz)))
			return f->failed = loom_err_set(&f->err, LOOM_ENOMEM, "out of memory");
	if (!f->slots || !(f->tid = calloc(f->o.threads, sizeof *f->tid)))
		return f->failed = loom_err_set(&f->err, LOOM_ENOMEM, "out of memory");
	for (; f->nthreads < f->o.threads; f->nthreads++) {
		int e = pthread_create(&f->tid[f->nthreads], NULL, worker, f);
		if (e)
			return f->failed = loom_err_errno(&f->err, LOOM_EIO, e,
							  "cannot start a thread");
	}
	return 0;
}

/* Give the frame delivered last back to the ring. */
static void give_back(struct loom_feed *f)
{
	if (!f->held)
		return;
	pthread_mutex_lock(&f->mu);
	f->held->state = SLOT_EMPTY;
	f->written = f->held->seq + 1;
	pthread_cond_broadcast(&f->cv_free);
	pthread_mutex_unlock(&f->mu);
	f->held = NULL;
}

int loom_feed_next(struct loom_feed *f, const void **buf, size_t *len)
{
	if (f->failed)
		return f->failed;
	if (!f->slots)
		return f->failed = loom_err_set(&f->err, LOOM_EINVAL, "the feed is not started");
	give_back(f);
	uint64_t seq = f->cur;
	if (seq >= f->end)
		return 0;
	struct slot *sl = &f->slots[seq % f->nslots];
	pthread_mutex_lock(&f->mu);
	while (!(sl->seq == seq && (sl->state == SLOT_READY || sl->state == SLOT_ERROR)) &&
	       f->stop != 2)
		pthread_cond_wait(&f->cv_ready, &f->mu);
	int stop = f->stop;
	pthread_mutex_unlock(&f->mu);
	if (stop == 2)
		return f->failed = loom_err_set(&f->err, LOOM_ENOMEM, "out of memory");
	if (seq == f->start || seq % f->K == 0)
		note(f, "epoch %llu %s at batch %llu (its batches %llu to %llu), seed %llu",
		     (unsigned long long)(seq / f->K), seq % f->K ? "resumes" : "starts",
		     (unsigned long long)seq, (unsigned long long)(seq / f->K * f->K),
		     (unsigned long long)((seq / f->K + 1) * f->K - 1),
		     (unsigned long long)f->o.seed);
	if (sl->state == SLOT_ERROR)
		return f->failed = loom_err_set(&f->err, sl->rc, "%s", sl->msg);
	f->held = sl;
	f->cur = seq + 1;
	f->frames++;
	f->bytes += sl->len;
	f->last_epoch = (uint32_t)(seq / f->K);
	*buf = sl->buf;
	*len = sl->len;
	return 1;
}

size_t loom_feed_end_frame(struct loom_feed *f, void *out)
{
	if (f->o.text)
		return 0;
	struct loom_batch_hdr h = {
		.dtype = (uint16_t)(f->o.dtype ? f->o.dtype : LOOM_BATCH_U16),
		.flags = LOOM_BATCH_F_END | (f->o.pad ? LOOM_BATCH_F_PAD : 0), .batch = f->B,
		.seq_len = f->T1, .pad_id = f->o.pad ? f->o.pad_id : 0,
		.seq = f->end == UINT64_MAX ? 0 : f->end, .epoch = f->last_epoch,
		.rank = (uint16_t)f->o.rank, .world = (uint16_t)f->o.world, .seed = f->o.seed,
	};
	loom_batch_encode(&h, NULL, out);
	f->bytes += LOOM_BATCH_HEADER_SIZE;
	return LOOM_BATCH_HEADER_SIZE;
}

void loom_feed_get_stats(const struct loom_feed *f, struct loom_feed_stats *st)
{
	*st = (struct loom_feed_stats){
		.records = f->N, .shards = f->nshards, .per_epoch = f->K,
		.frames = f->frames, .bytes = f->bytes, .seq = f->frames ? f->cur - 1 : f->start,
		.epoch = f->last_epoch, .seq_len = f->T1, .features = f->nf,
	};
}

const char *loom_feed_error(const struct loom_feed *f)
{
	return f->err.msg;
}

void loom_feed_free(struct loom_feed *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	f->stop = f->stop ? f->stop : 1;
	pthread_cond_broadcast(&f->cv_free);
	pthread_mutex_unlock(&f->mu);
	for (unsigned i = 0; i < f->nthreads; i++)
		pthread_join(f->tid[i], NULL);
	for (size_t i = 0; i < f->nshards; i++)
		loom_tfr_file_free(f->shards[i].f);
	for (size_t i = 0; f->slots && i < f->nslots; i++)
		free(f->slots[i].buf);
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv_free);
	pthread_cond_destroy(&f->cv_ready);
	free(f->slots);
	free(f->shards);
	free(f->tid);
	free(f);
}

void loom_feed_summary(const struct loom_feed_opts *o, const struct loom_feed_stats *st,
		       double seconds, char *buf, size_t n)
{
	char bb[32], feats[48] = "";
	if (st->features)
		snprintf(feats, sizeof feats, " + %zu feature%s", st->features,
			 st->features == 1 ? "" : "s");
	snprintf(buf, n,
		 "%llu batch%s of %ux%u%s (rank %u of %u) from %llu record%s in %llu "
		 "shard%s (%llu batches/epoch), %s in %.2f s: %.0f records/s, %.1f MB/s",
		 (unsigned long long)st->frames, st->frames == 1 ? "" : "es", o->batch, st->seq_len,
		 feats, o->rank, o->world, (unsigned long long)st->records,
		 st->records == 1 ? "" : "s", (unsigned long long)st->shards,
		 st->shards == 1 ? "" : "s", (unsigned long long)st->per_epoch,
		 loom_fmt_bytes((double)st->bytes, bb, sizeof bb), seconds,
		 seconds > 0 ? (double)st->frames * o->batch / seconds : 0,
		 seconds > 0 ? st->bytes / seconds / 1e6 : 0);
}
