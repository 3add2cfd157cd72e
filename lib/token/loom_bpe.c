/* loom_bpe.c - byte-level BPE encode/decode; see loom_bpe.h. */
#include "loom_bpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_buf.h"
#include "loom_pretok.h"

#define CACHE_BITS 14
#define CACHE_MAXB 32   /* piece bytes kept in a cache entry */
#define CACHE_MAXI 7    /* ids kept in a cache entry */

struct cache_ent {
	uint8_t len, nids;
	uint8_t b[CACHE_MAXB];
	uint32_t ids[CACHE_MAXI];
};

struct loom_bpe {
	const struct loom_vocab *v;
	uint8_t *whole;         /* per id: 0 unknown, 1 piece==token is exact, 2 not */
	struct cache_ent *cache;
	/* long-piece scratch */
	uint32_t *sym, *nxt, *prv;
	uint64_t *heap;
	size_t cap, heap_cap;
	struct loom_ids tmp;
	uint64_t pieces, hits_whole, hits_cache, steps;
	struct loom_err err;
};

int loom_ids_reserve(struct loom_ids *a, size_t extra)
{
	if (a->cap - a->n >= extra)
		return 0;
	size_t c = a->cap ? a->cap : 1024;
	while (c - a->n < extra)
		c *= 2;
	uint32_t *p = realloc(a->v, c * sizeof *p);
	if (!p)
		return LOOM_ENOMEM;
	a->v = p;
	a->cap = c;
	return 0;
}

void loom_ids_release(struct loom_ids *a)
{
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}

struct loom_bpe *loom_bpe_new(const struct loom_vocab *v)
{
	struct loom_bpe *e = calloc(1, sizeof *e);
	if (!e)
		return NULL;
	e->v = v;
	e->whole = calloc(v->n_ids ? v->n_ids : 1, 1);
	e->cache = calloc((size_t)1 << CACHE_BITS, sizeof *e->cache);
	if (!e->whole || !e->cache) {
		loom_bpe_free(e);
		return NULL;
	}
	return e;
}

void loom_bpe_free(struct loom_bpe *e)
{
	if (!e)
		return;
	free(e->whole);
	free(e->cache);
	free(e->sym);
	free(e->nxt);
	free(e->prv);
	free(e->heap);
	loom_ids_release(&e->tmp);
	free(e);
}

const char *loom_bpe_error(const struct loom_bpe *e)
{
	return e->err.msg;
}

void loom_bpe_stats(const struct loom_bpe *e, uint64_t *pieces, uint64_t *whole,
		    uint64_t *cached, uint64_t *steps)
{
	*pieces = e->pieces;
	*whole = e->hits_whole;
	*cached = e->hits_cache;
	*steps = e->steps;
}

/* ---- short pieces: linear scan ---------------------------------------- */

static int merge_short(struct loom_bpe *e, const uint8_t *s, size_t n, struct loom_ids *out)
{
	const struct loom_vocab *v = e->v;
	uint32_t sym[LOOM_BPE_SHORT], rank[LOOM_BPE_SHORT], mid[LOOM_BPE_SHORT];
	size_t m = n;
	for (size_t i = 0; i < n; i++)
		sym[i] = v->byte_id[s[i]];
	for (size_t i = 0; i + 1 < m; i++)
		rank[i] = loom_vocab_merge(v, sym[i], sym[i + 1], &mid[i]);
	while (m > 1) {
		uint32_t best = LOOM_VOCAB_NONE;
		size_t bi = 0;
		for (size_t i = 0; i + 1 < m; i++)
			if (rank[i] < best) {
				best = rank[i];
				bi = i;
			}
		if (best == LOOM_VOCAB_NONE)
			break;
		sym[bi] = mid[bi];
		m--;
		for (size_t i = bi + 1; i < m; i++) {
			sym[i] = sym[i + 1];
			rank[i] = rank[i + 1];
			mid[i] = mid[i + 1];
		}
		if (bi + 1 < m)
			rank[bi] = loom_vocab_merge(v, sym[bi], sym[bi + 1], &mid[bi]);
		if (bi > 0)
			rank[bi - 1] = loom_vocab_merge(v, sym[bi - 1], sym[bi], &mid[bi - 1]);
	}
	if (loom_ids_reserve(out, m))
		return loom_err_set(&e->err, LOOM_ENOMEM, "out of memory");
	memcpy(out->v + out->n, sym, m * sizeof *sym);
	out->n += m;
	return 0;
}

/* ---- long pieces: heap of (rank << 32 | position) ---------------------- */

static void heap_push(uint64_t *h, size_t *n, uint64_t x)
{
	size_t i = (*n)++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (h[p] <= x)
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = x;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
	uint64_t top = h[0], x = h[--*n];
	size_t i = 0, m = *n;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= m)
			break;
		if (c + 1 < m && h[c + 1] < h[c])
			c++;
		if (h[c] >= x)
			break;
		h[i] = h[c];
		i = c;
	}
	if (m)
		h[i] = x;
	return top;
}

#define NIL UINT32_MAX

static int grow_long(struct loom_bpe *e, size_t n)
{
	if (n <= e->cap)
		return 0;
	size_t c = e->cap ? e->cap : 256;
	while (c < n)
		c *= 2;
	uint32_t *a = realloc(e->sym, c * sizeof *a);
	if (a)
		e->sym = a;
	uint32_t *b = realloc(e->nxt, c * sizeof *b);
	if (b)
		e->nxt = b;
	uint32_t *d = realloc(e->prv, c * sizeof *d);
	if (d)
		e->prv = d;
	uint64_t *h = realloc(e->heap, (2 * c + 4) * sizeof *h);
	if (h)
		e->heap = h;
	if (!a || !b || !d || !h)
		return loom_err_set(&e->err, LOOM_ENOMEM, "out of memory (piece of %zu bytes)", n);
	e->cap = c;
	return 0;
}

static int merge_long(struct loom_bpe *e, const uint8_t *s, size_t n, struct loom_ids *out)
{
	const struct loom_vocab *v = e->v;
	size_t hn = 0;
	if (n >= NIL)
		return loom_err_set(&e->err, LOOM_ERANGE, "piece of %zu bytes is too long", n);
	if (grow_long(e, n))
		return LOOM_ENOMEM;
	uint32_t *sym = e->sym, *nxt = e->nxt, *prv = e->prv;
	uint64_t *h = e->heap;
	for (size_t i = 0; i < n; i++) {
		sym[i] = v->byte_id[s[i]];
		nxt[i] = i + 1 < n ? (uint32_t)(i + 1) : NIL;
		prv[i] = i ? (uint32_t)(i - 1) : NIL;
	}
	/* heap holds at most one live entry per symbol position: an entry for
	 * position p is pushed only when p's right pair changes, and there are
	 * at most n of those beyond the initial ones, so capacity 2n is ample;
	 * stale entries are compacted away when it fills. */
	for (size_t i = 0; i + 1 < n; i++) {
		uint32_t id, r = loom_vocab_merge(v, sym[i], sym[i + 1], &id);
		if (r != LOOM_VOCAB_NONE)
			h[hn++] = (uint64_t)r << 32 | i;
	}
	/* heapify */
	for (size_t k = hn / 2; k-- > 0;) {
		uint64_t x = h[k];
		size_t i = k;
		for (;;) {
			size_t c = 2 * i + 1;
			if (c >= hn)
				break;
			if (c + 1 < hn && h[c + 1] < h[c])
				c++;
			if (h[c] >= x)
				break;
			h[i] = h[c];
			i = c;
		}
		h[i] = x;
	}
	e->steps += n + hn; /* symbols set up, pairs heapified */
	while (hn) {
		uint64_t top = heap_pop(h, &hn);
		e->steps++;
		uint32_t r = (uint32_t)(top >> 32), p = (uint32_t)top, q, id = 0;
		if (sym[p] == NIL || (q = nxt[p]) == NIL)
			continue;
		if (loom_vocab_merge(v, sym[p], sym[q], &id) != r)
			continue; /* stale */
		sym[p] = id;
		sym[q] = NIL;
		nxt[p] = nxt[q];
		if (nxt[q] != NIL)
			prv[nxt[q]] = p;
		if (hn + 2 > 2 * e->cap + 4) {
			/* drop stale entries (cannot happen often: see above) */
			size_t w = 0;
			for (size_t i = 0; i < hn; i++) {
				uint32_t pp = (uint32_t)h[i], qq, x;
				if (sym[pp] != NIL && (qq = nxt[pp]) != NIL &&
				    loom_vocab_merge(v, sym[pp], sym[qq], &x) == (uint32_t)(h[i] >> 32))
					h[w++] = h[i];
			}
			size_t m = w;
			e->steps += hn + m;
			hn = 0;
			for (size_t i = 0; i < m; i++)
				heap_push(h, &hn, h[i]);
		}
		if (nxt[p] != NIL) {
			uint32_t r2 = loom_vocab_merge(v, sym[p], sym[nxt[p]], &id);
			if (r2 != LOOM_VOCAB_NONE)
				heap_push(h, &hn, (uint64_t)r2 << 32 | p), e->steps++;
		}
		if (prv[p] != NIL) {
			uint32_t r2 = loom_vocab_merge(v, sym[prv[p]], sym[p], &id);
			if (r2 != LOOM_VOCAB_NONE)
				heap_push(h, &hn, (uint64_t)r2 << 32 | prv[p]), e->steps++;
		}
	}
	size_t m = 0;
	for (uint32_t i = 0; i != NIL; i = nxt[i])
		m++;
	if (loom_ids_reserve(out, m))
		return loom_err_set(&e->err, LOOM_ENOMEM, "out of memory");
	for (uint32_t i = 0; i != NIL; i = nxt[i])
		out->v[out->n++] = sym[i];
	return 0;
}

static int merge_piece(struct loom_bpe *e, const uint8_t *s, size_t n, struct loom_ids *out)
{
	return n <= LOOM_BPE_SHORT ? merge_short(e, s, n, out) : merge_long(e, s, n, out);
}

static inline uint32_t cache_hash(const uint8_t *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return (uint32_t)(h >> 20) & ((1u << CACHE_BITS) - 1);
}

/* A vocabulary without some single-byte tokens (a tokenizer.json) cannot
 * encode a text holding such a byte: the first one is an error. */
static int missing_byte(struct loom_bpe *e, const uint8_t *s, size_t n, size_t base)
{
	const struct loom_vocab *v = e->v;
	if (!v->n_missing_bytes)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (v->byte_id[s[i]] == LOOM_VOCAB_NONE) {
			char shown[8] = "";
			if (s[i] > 0x20 && s[i] < 0x7f)
				snprintf(shown, sizeof shown, " '%c'", s[i]);
			return loom_err_set(&e->err, LOOM_EFORMAT,
					    "byte 0x%02x%s at offset %zu has no token in the vocabulary",
					    s[i], shown, base + i);
		}
	return 0;
}

int loom_bpe_encode_piece(struct loom_bpe *e, const uint8_t *s, size_t n,
			  struct loom_ids *out)
{
	const struct loom_vocab *v = e->v;
	int rc = missing_byte(e, s, n, 0);
	if (rc)
		return rc;
	e->pieces++;
	if (n == 1) {
		if (loom_ids_reserve(out, 1))
			return loom_err_set(&e->err, LOOM_ENOMEM, "out of memory");
		out->v[out->n++] = v->byte_id[s[0]];
		return 0;
	}
	uint32_t id = loom_vocab_lookup(v, s, n);
	if (id != LOOM_VOCAB_NONE && e->whole[id] != 2) {
		if (e->whole[id] == 0) {
			size_t before = out->n;
			int rc = merge_piece(e, s, n, out);
			if (rc)
				return rc;
			e->whole[id] = out->n - before == 1 && out->v[before] == id ? 1 : 2;
			return 0;
		}
		if (loom_ids_reserve(out, 1))
			return loom_err_set(&e->err, LOOM_ENOMEM, "out of memory");
		out->v[out->n++] = id;
		e->hits_whole++;
		return 0;
	}
	if (n > CACHE_MAXB)
		return merge_piece(e, s, n, out);
	struct cache_ent *c = &e->cache[cache_hash(s, n)];
	if (c->len == n && !memcmp(c->b, s, n)) {
		if (loom_ids_reserve(out, c->nids))
			return loom_err_set(&e->err, LOOM_ENOMEM, "out of memory");
		memcpy(out->v + out->n, c->ids, c->nids * sizeof *c->ids);
		out->n += c->nids;
		e->hits_cache++;
		return 0;
	}
	size_t before = out->n;
	rc = merge_piece(e, s, n, out);
	if (rc)
		return rc;
	size_t k = out->n - before;
	if (k <= CACHE_MAXI) {
		c->len = (uint8_t)n;
		c->nids = (uint8_t)k;
		memcpy(c->b, s, n);
		memcpy(c->ids, out->v + before, k * sizeof *c->ids);
	}
	return 0;
}

static int encode_plain(struct loom_bpe *e, const uint8_t *s, size_t n, struct loom_ids *out)
{
	size_t p = 0;
	while (p < n) {
		size_t k = loom_pretok_next(s + p, n - p);
		int rc = loom_bpe_encode_piece(e, s + p, k, out);
		if (rc)
			return rc;
		p += k;
	}
	return 0;
}

int loom_bpe_encode(struct loom_bpe *e, const uint8_t *s, size_t n, int allow_special,
		    struct loom_ids *out)
{
	const struct loom_vocab *v = e->v;
	int rc;
	if (!allow_special || !v->n_specials)
		return (rc = missing_byte(e, s, n, 0)) ? rc : encode_plain(e, s, n, out);
	size_t p = 0;
	while (p < n) {
		/* leftmost, then longest special occurrence in s[p..n) */
		size_t best = n, blen = 0;
		uint32_t bid = 0;
		for (uint32_t k = 0; k < v->n_specials; k++) {
			size_t tl;
			const uint8_t *t = loom_vocab_token(v, v->specials[k], &tl);
			const uint8_t *f = memmem(s + p, best + tl - p <= n - p ? best + tl - p : n - p, t, tl);
			if (!f)
				continue;
			size_t at = (size_t)(f - s);
			if (at < best || (at == best && tl > blen)) {
				best = at;
				blen = tl;
				bid = v->specials[k];
			}
		}
		if ((rc = missing_byte(e, s + p, best - p, p)))
			return rc;
		rc = encode_plain(e, s + p, best - p, out);
		if (rc)
			return rc;
		if (best == n)
			break;
		if (loom_ids_reserve(out, 1))
			return loom_err_set(&e->err, LOOM_ENOMEM, "out of memory");
		out->v[out->n++] = bid;
		p = best + blen;
	}
	return 0;
}

int loom_bpe_decode(struct loom_bpe *e, const uint32_t *ids, size_t n, uint64_t first,
		    uint8_t **buf, size_t *len, size_t *cap)
{
	const struct loom_vocab *v = e->v;
	for (size_t i = 0; i < n; i++) {
		uint32_t id = ids[i];
		if (id >= v->n_ids || !v->present[id])
			return loom_err_set(&e->err, LOOM_ERANGE,
					    "id %u at position %llu is not in the vocabulary (%u ids)",
					    id, (unsigned long long)(first + i), v->n_ids);
		size_t tl = v->off[id + 1] - v->off[id];
		if (loom_buf_put(buf, len, cap, v->bytes + v->off[id], tl))
			return loom_err_set(&e->err, LOOM_ENOMEM, "out of memory");
	}
	return 0;
}
