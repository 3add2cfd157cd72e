/* loom_example.c - see loom_example.h
 *
 * Wire format reminder (protobuf): a field is a varint key (number << 3 |
 * wire type) followed by a varint (type 0), 8 bytes (1), a varint length
 * and that many bytes (2) or 4 bytes (5).  An Example holding one int64 list:
 *
 *   0a L1                       Example.features (1, LEN)
 *     0a L2                     Features.feature map entry (1, LEN)
 *       0a KL key...            entry.key (1, LEN)
 *       12 L3                   entry.value: Feature (2, LEN)
 *         1a L4                 Feature.int64_list (3, LEN)
 *           0a L5 varints...    Int64List.value, packed (1, LEN)
 *
 * The Int64List body is omitted when the list is empty, exactly as
 * protobuf-c and protobuf C++ do for an empty packed repeated field.
 */
#include "loom_example.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <openssl/evp.h>

#include "tensorflow/example.pb-c.h"
#include "loom_utf8.h"

/* ---- encoding ------------------------------------------------------------ */

static inline size_t vsize64(uint64_t v)
{
	/* 1 + floor(bits/7), with bits = 64 - clz(v|1) */
	unsigned bits = 64u - (unsigned)__builtin_clzll(v | 1);
	return (bits * 9u + 64u) / 64u;
}

static inline size_t vsize32(uint32_t v)
{
	unsigned bits = 32u - (unsigned)__builtin_clz(v | 1);
	return (bits * 9u + 64u) / 64u;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

size_t loom_example_bound(size_t keylen, size_t n)
{
	return n * 10 + keylen + 6 * 11;
}

/* Bytes of one map entry (key + Feature{int64_list}) around a packed
 * body of plen bytes holding n values. */
static size_t entry_len(size_t klen, size_t n, size_t plen)
{
	size_t l_list = n ? 1 + vsize64(plen) + plen : 0;
	size_t l_feat = l_list ? 1 + vsize64(l_list) + l_list : 1 + 1;
	/* an empty key is proto3's default: omitted, as protobuf-c does */
	size_t l_key = klen ? 1 + vsize64(klen) + klen : 0;
	return l_key + 1 + vsize64(l_feat) + l_feat;
}

/* Write the headers of one map entry, up to its packed body. */
static uint8_t *put_entry(uint8_t *p, const char *key, size_t klen, size_t n, size_t plen)
{
	size_t l_list = n ? 1 + vsize64(plen) + plen : 0;
	size_t l_feat = l_list ? 1 + vsize64(l_list) + l_list : 1 + 1;
	*p++ = 0x0a;
	p = put_varint(p, entry_len(klen, n, plen));
	if (klen) {
		*p++ = 0x0a;
		p = put_varint(p, klen);
		memcpy(p, key, klen);
		p += klen;
	}
	*p++ = 0x12;
	p = put_varint(p, l_feat);
	*p++ = 0x1a;
	p = put_varint(p, l_list);
	if (n) {
		*p++ = 0x0a;
		p = put_varint(p, plen);
	}
	return p;
}

/* Write the five nested headers around a packed body of plen bytes. */
static uint8_t *put_headers(uint8_t *p, const char *key, size_t klen, size_t n, size_t plen)
{
	size_t l_entry = entry_len(klen, n, plen);
	*p++ = 0x0a;
	p = put_varint(p, 1 + vsize64(l_entry) + l_entry);
	return put_entry(p, key, klen, n, plen);
}

/* Scalar packed body of v[0..n) at p; returns the end.  Ids below 2^21
 * (any real vocabulary): a branch-free 4-byte store of up to 3 varint
 * bytes; the bound leaves room for the over-write. */
/* The i-th id of v: u16 (w16) or u32 array. */
static inline __attribute__((always_inline)) uint32_t id_at(const void *v, size_t i, int w16)
{
	return w16 ? ((const uint16_t *)v)[i] : ((const uint32_t *)v)[i];
}

static inline __attribute__((always_inline)) const void *ids_from(const void *v, size_t i,
								  int w16)
{
	return w16 ? (const void *)((const uint16_t *)v + i) : (const void *)((const uint32_t *)v + i);
}

static inline __attribute__((always_inline)) uint8_t *body_g(uint8_t *p, const void *v, size_t n,
							     int w16)
{
	static const uint32_t cont[4] = { 0, 0, 0x80, 0x8080 };
	for (size_t i = 0; i < n; i++) {
		uint32_t x = id_at(v, i, w16);
		if (__builtin_expect(x < 0x200000, 1)) {
			size_t len = vsize32(x);
			uint32_t w = (x & 0x7f) | (x << 1 & 0x7f00) | (x << 2 & 0x7f0000);
			w |= cont[len];
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			memcpy(p, &w, 4);
#else
			p[0] = (uint8_t)w;
			p[1] = (uint8_t)(w >> 8);
			p[2] = (uint8_t)(w >> 16);
			p[3] = 0;
#endif
			p += len;
		} else {
			p = put_varint(p, x);
		}
	}
	return p;
}

static inline __attribute__((always_inline)) size_t plen_g(const void *v, size_t n, int w16)
{
	size_t plen = 0;
	for (size_t i = 0; i < n; i++)
		plen += vsize32(id_at(v, i, w16));
	return plen;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(LOOM_NO_AVX2)
/*
 * AVX2 path (chosen at run time): 8 ids at a time.  Each id < 2^21 becomes
 * a 4-byte little-endian word holding its 1-3 varint bytes with the
 * continuation bits set; per 128-bit lane, a shuffle picked by the lengths
 * of its 4 ids (index: bit t = id t >= 2^7, bit 4+t = id t >= 2^14) packs
 * the used bytes together, and one unaligned 16-byte store writes them (at
 * most 12 used, the rest is over-written by the next store; the bound
 * leaves room).  A group of 8 holding an id >= 2^21 goes the scalar way.
 */
#include <immintrin.h>
#include <pthread.h>

static uint8_t shuf_tab[256][16] __attribute__((aligned(16)));
static uint8_t shuf_len[256];
static int use_avx2;
static pthread_once_t avx2_once = PTHREAD_ONCE_INIT;

static void avx2_init(void)
{
	for (unsigned idx = 0; idx < 256; idx++) {
		unsigned k = 0;
		for (unsigned t = 0; t < 4; t++) {
			unsigned len = 1 + (idx >> t & 1) + (idx >> (4 + t) & 1);
			for (unsigned b = 0; b < len; b++)
				shuf_tab[idx][k++] = (uint8_t)(4 * t + b);
		}
		shuf_len[idx] = (uint8_t)k;
		while (k < 16)
			shuf_tab[idx][k++] = 0x80;
	}
	__builtin_cpu_init();
	use_avx2 = __builtin_cpu_supports("avx2");
}

/* Number of ids >= 2^21 in x's 8 lanes is zero? */
__attribute__((target("avx2"))) static inline int all_small(__m256i x)
{
	__m256i hi = _mm256_srli_epi32(x, 21);
	return _mm256_testz_si256(hi, hi);
}

__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256i
load8(const void *v, size_t i, int w16)
{
	if (w16)
		return _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)v + i)));
	return _mm256_loadu_si256((const __m256i *)((const uint32_t *)v + i));
}

__attribute__((target("avx2"))) static inline __attribute__((always_inline)) size_t
plen_avx2(const void *v, size_t n, int w16)
{
	/* vsize32(x) = 1 + [x >= 2^7] + [x >= 2^14] + [x >= 2^21] + [x >= 2^28] */
	__m256i acc = _mm256_setzero_si256();
	const __m256i t7 = _mm256_set1_epi32(1 << 7), t14 = _mm256_set1_epi32(1 << 14);
	const __m256i t21 = _mm256_set1_epi32(1 << 21), t28 = _mm256_set1_epi32(1 << 28);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i x = load8(v, i, w16);
		acc = _mm256_sub_epi32(acc, _mm256_cmpeq_epi32(_mm256_max_epu32(x, t7), x));
		acc = _mm256_sub_epi32(acc, _mm256_cmpeq_epi32(_mm256_max_epu32(x, t14), x));
		acc = _mm256_sub_epi32(acc, _mm256_cmpeq_epi32(_mm256_max_epu32(x, t21), x));
		acc = _mm256_sub_epi32(acc, _mm256_cmpeq_epi32(_mm256_max_epu32(x, t28), x));
	}
	/* Lanes count at most n / 8 * 4 < 2^31 each for any sane n. */
	__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
	s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
	s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
	return i + (size_t)(uint32_t)_mm_cvtsi128_si32(s4) + plen_g(ids_from(v, i, w16), n - i, w16);
}

__attribute__((target("avx2"))) static inline __attribute__((always_inline)) uint8_t *
body_avx2(uint8_t *p, const void *v, size_t n, int w16)
{
	const __m256i m7f = _mm256_set1_epi32(0x7f), m7f00 = _mm256_set1_epi32(0x7f00);
	const __m256i m7f0000 = _mm256_set1_epi32(0x7f0000);
	const __m256i c80 = _mm256_set1_epi32(0x80), c8000 = _mm256_set1_epi32(0x8000);
	const __m256i l7 = _mm256_set1_epi32(0x7f), l14 = _mm256_set1_epi32(0x3fff);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i x = load8(v, i, w16);
		if (!w16 && __builtin_expect(!all_small(x), 0)) {
			p = body_g(p, ids_from(v, i, w16), 8, w16);
			continue;
		}
		__m256i ge1 = _mm256_cmpgt_epi32(x, l7);   /* x < 2^21: signed is fine */
		__m256i ge2 = _mm256_cmpgt_epi32(x, l14);
		__m256i w = _mm256_or_si256(
			_mm256_or_si256(_mm256_and_si256(x, m7f),
					_mm256_and_si256(_mm256_slli_epi32(x, 1), m7f00)),
			_mm256_or_si256(_mm256_and_si256(_mm256_slli_epi32(x, 2), m7f0000),
					_mm256_or_si256(_mm256_and_si256(ge1, c80),
							_mm256_and_si256(ge2, c8000))));
		unsigned m1 = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(ge1));
		unsigned m2 = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(ge2));
		unsigned i0 = (m1 & 15) | (m2 & 15) << 4, i1 = m1 >> 4 | (m2 & 0xf0);
		__m128i lo = _mm256_castsi256_si128(w), hi = _mm256_extracti128_si256(w, 1);
		_mm_storeu_si128((__m128i *)p,
				 _mm_shuffle_epi8(lo, _mm_load_si128((const __m128i *)shuf_tab[i0])));
		p += shuf_len[i0];
		_mm_storeu_si128((__m128i *)p,
				 _mm_shuffle_epi8(hi, _mm_load_si128((const __m128i *)shuf_tab[i1])));
		p += shuf_len[i1];
	}
	return body_g(p, ids_from(v, i, w16), n - i, w16);
}

__attribute__((target("avx2"))) static size_t encode_avx2(const char *key, const void *v,
							   size_t n, uint8_t *out, int w16)
{
	uint8_t *p = put_headers(out, key, strlen(key), n, plen_avx2(v, n, w16));
	return (size_t)(body_avx2(p, v, n, w16) - out);
}

__attribute__((target("avx2"))) static size_t encode_avx2_u32(const char *key,
							       const uint32_t *v, size_t n,
							       uint8_t *out)
{
	return encode_avx2(key, v, n, out, 0);
}

__attribute__((target("avx2"))) static size_t encode_avx2_u16(const char *key,
							       const uint16_t *v, size_t n,
							       uint8_t *out)
{
	return encode_avx2(key, v, n, out, 1);
}
#define HAVE_AVX2_PATH 1
#endif

size_t loom_example_encode_u32(const char *key, const uint32_t *v, size_t n, uint8_t *out)
{
#ifdef HAVE_AVX2_PATH
	pthread_once(&avx2_once, avx2_init);
	if (use_avx2)
		return encode_avx2_u32(key, v, n, out);
#endif
	uint8_t *p = put_headers(out, key, strlen(key), n, plen_g(v, n, 0));
	return (size_t)(body_g(p, v, n, 0) - out);
}

size_t loom_example_encode_u16(const char *key, const uint16_t *v, size_t n, uint8_t *out)
{
#ifdef HAVE_AVX2_PATH
	pthread_once(&avx2_once, avx2_init);
	if (use_avx2)
		return encode_avx2_u16(key, v, n, out);
#endif
	uint8_t *p = put_headers(out, key, strlen(key), n, plen_g(v, n, 1));
	return (size_t)(body_g(p, v, n, 1) - out);
}

static size_t plen_i64(const int64_t *v, size_t n)
{
	size_t plen = 0;
	for (size_t i = 0; i < n; i++)
		plen += vsize64((uint64_t)v[i]);
	return plen;
}

size_t loom_example_encode_i64(const char *key, const int64_t *v, size_t n, uint8_t *out)
{
	uint8_t *p = put_headers(out, key, strlen(key), n, plen_i64(v, n));
	for (size_t i = 0; i < n; i++)
		p = put_varint(p, (uint64_t)v[i]);
	return (size_t)(p - out);
}

size_t loom_example_bound_i64s(const struct loom_example_i64 *f, size_t nf)
{
	size_t b = 11;
	for (size_t k = 0; k < nf; k++)
		b += loom_example_bound(strlen(f[k].key), f[k].n);
	return b;
}

size_t loom_example_encode_i64s(const struct loom_example_i64 *f, size_t nf, uint8_t *out)
{
	/* The entries after room for the Example's header (a tag and the
	 * body's length, at most 11 bytes; the bound counts them), then the
	 * header in front: each feature's payload length is counted once. */
	uint8_t *body = out + 11, *p = body, hdr[11], *h = hdr;
	for (size_t k = 0; k < nf; k++) {
		p = put_entry(p, f[k].key, strlen(f[k].key), f[k].n, plen_i64(f[k].v, f[k].n));
		for (size_t i = 0; i < f[k].n; i++)
			p = put_varint(p, (uint64_t)f[k].v[i]);
	}
	size_t blen = (size_t)(p - body);
	*h++ = 0x0a;
	h = put_varint(h, blen);
	memmove(out + (h - hdr), body, blen);
	memcpy(out, hdr, (size_t)(h - hdr));
	return (size_t)(h - hdr) + blen;
}

int loom_example_encode_pbc(const char *key, const int64_t *v, size_t n, uint8_t **out,
			    size_t *len, struct loom_err *err)
{
	Tensorflow__Int64List list = TENSORFLOW__INT64_LIST__INIT;
	Tensorflow__Feature feat = TENSORFLOW__FEATURE__INIT;
	Tensorflow__Features__FeatureEntry entry = TENSORFLOW__FEATURES__FEATURE_ENTRY__INIT;
	Tensorflow__Features__FeatureEntry *entries[1] = { &entry };
	Tensorflow__Features features = TENSORFLOW__FEATURES__INIT;
	Tensorflow__Example ex = TENSORFLOW__EXAMPLE__INIT;

	list.n_value = n;
	list.value = (int64_t *)v;
	feat.kind_case = TENSORFLOW__FEATURE__KIND_INT64_LIST;
	feat.int64_list = &list;
	entry.key = (char *)key;
	entry.value = &feat;
	features.n_feature = 1;
	features.feature = entries;
	ex.features = &features;
	size_t sz = tensorflow__example__get_packed_size(&ex);
	uint8_t *buf = malloc(sz ? sz : 1);
	if (!buf)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	*len = tensorflow__example__pack(&ex, buf);
	*out = buf;
	return 0;
}

/* ---- strict hand-written decoding ---------------------------------------- */

struct rd {
	const uint8_t *base; /* start of the whole payload (for offsets) */
	struct loom_err *err;
	/* u32 decoding: first value >= 2^32 of the current values (a later
	 * map entry or oneof switch replaces them, and clears this). */
	const uint8_t *bad_at;
	uint64_t bad_val;
};

#define BAD(r, at, ...) \
	(loom_err_set((r)->err, LOOM_EFORMAT, "not a tf.train.Example: " __VA_ARGS__), \
	 (void)(at), LOOM_EFORMAT)

static inline int get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
	const uint8_t *p = *pp;
	if (p < end && *p < 0x80) {
		*v = *p;
		*pp = p + 1;
		return 0;
	}
	uint64_t x = 0;
	for (unsigned s = 0; s < 70 && p < end; s += 7) {
		uint8_t b = *p++;
		x |= (uint64_t)(b & 0x7f) << (s < 64 ? s : 63);
		if (!(b & 0x80)) {
			*v = x;
			*pp = p;
			return 0;
		}
	}
	return LOOM_EFORMAT;
}

/* Read a field key; *num, *wt.  Returns 0 or an error. */
static int get_key(struct rd *r, const uint8_t **pp, const uint8_t *end, uint32_t *num,
		   unsigned *wt)
{
	uint64_t k;
	const uint8_t *at = *pp;
	if (get_varint(pp, end, &k) < 0)
		return BAD(r, at, "truncated field key at byte %td", at - r->base);
	if ((k >> 3) == 0 || (k >> 3) > 0x1fffffff)
		return BAD(r, at, "invalid field number at byte %td", at - r->base);
	*num = (uint32_t)(k >> 3);
	*wt = (unsigned)(k & 7);
	return 0;
}

/* Length-delimited body: [*bp, *be). */
static int get_len(struct rd *r, const uint8_t **pp, const uint8_t *end, const uint8_t **bp,
		   const uint8_t **be)
{
	uint64_t l;
	const uint8_t *at = *pp;
	if (get_varint(pp, end, &l) < 0)
		return BAD(r, at, "truncated length at byte %td", at - r->base);
	if (l > (uint64_t)(end - *pp))
		return BAD(r, at, "length %" PRIu64 " at byte %td runs past the end", l,
			   at - r->base);
	*bp = *pp;
	*be = *pp + l;
	*pp = *be;
	return 0;
}

static int unexpected(struct rd *r, const uint8_t *at, const char *msg, uint32_t num,
		      unsigned wt)
{
	return BAD(r, at, "unexpected field %u (wire type %u) in %s at byte %td", num, wt, msg,
		   at - r->base);
}

/* Check that [b, be) is a sequence of varints of at most 10 bytes, 8 bytes
 * at a time: a byte < 0x80 ends a varint; a run of 10 or more bytes >= 0x80
 * is too long, and the last byte must end one.  (*count is only advanced
 * by the byte loop: callers of the check do not use it.) */
static int packed_check(struct rd *r, const uint8_t *b, const uint8_t *be, size_t *count)
{
	const uint64_t H = 0x8080808080808080ull;
	unsigned run = 0;
	size_t n = 0;
#if defined(__SSE2__)
	/* 16 bytes at a time: bit j of m = byte j continues a varint.  With the
	 * previous block's bits below, a run of 10 set bits ending in this
	 * block means a varint longer than 10 bytes. */
	uint32_t prev = 0;
	while (be - b >= 16) {
		uint32_t m = (uint32_t)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)b));
		uint32_t c = prev | m << 16;
		uint32_t a2 = c & c << 1, a4 = a2 & a2 << 2, a8 = a4 & a4 << 4;
		if ((a8 & a2 << 8) >> 16)
			goto toolong;
		prev = m;
		b += 16;
	}
	{
		uint32_t t = ~prev & 0xffff;
		run = t ? (unsigned)__builtin_clz(t << 16) : 16;
		if (run >= 10)
			goto toolong;
	}
#endif
	while (be - b >= 8) {
		uint64_t w;
		memcpy(&w, b, 8);
		uint64_t t = ~w & H; /* terminators */
		if (!t) {
			run += 8;
			if (run >= 10)
				goto toolong;
		} else {
			if (run + (unsigned)(__builtin_ctzll(t) >> 3) >= 10)
				goto toolong;
			run = (unsigned)(__builtin_clzll(t) >> 3);
		}
		b += 8;
	}
	for (; b < be; b++) {
		if (*b & 0x80) {
			if (++run >= 10)
				goto toolong;
		} else {
			run = 0;
			n++;
		}
	}
	if (run)
		return BAD(r, be, "truncated varint at byte %td", be - r->base);
	*count += n;
	return 0;
toolong:
	return BAD(r, b, "varint longer than 10 bytes near byte %td", b - r->base);
}

/* Decode packed token ids (each < 2^32) into o32 + *count. */
static int packed_u32(struct rd *r, const uint8_t *b, const uint8_t *be, uint32_t *o32,
		      size_t *count)
{
	uint32_t *o = o32 + *count;
	while (b < be) {
		uint32_t x = b[0];
		if (x < 0x80) {
			*o++ = x;
			b++;
			continue;
		}
		if (be - b >= 3) {
			uint32_t y = b[1];
			if (y < 0x80) {
				*o++ = (x & 0x7f) | y << 7;
				b += 2;
				continue;
			}
			uint32_t z = b[2];
			if (z < 0x80) {
				*o++ = (x & 0x7f) | (y & 0x7f) << 7 | z << 14;
				b += 3;
				continue;
			}
		}
		uint64_t v;
		const uint8_t *vat = b;
		if (get_varint(&b, be, &v) < 0)
			return BAD(r, vat, "truncated varint at byte %td", vat - r->base);
		if (v > UINT32_MAX && !r->bad_at) {
			r->bad_at = vat;
			r->bad_val = v;
		}
		*o++ = (uint32_t)v;
	}
	*count = (size_t)(o - o32);
	return 0;
}

/* Validate (and, when out != NULL, decode into out/cap/count) an Int64List. */
static int int64_list(struct rd *r, const uint8_t *p, const uint8_t *end, int64_t *o64,
		      uint32_t *o32, size_t cap, size_t *count)
{
	while (p < end) {
		uint32_t num;
		unsigned wt;
		const uint8_t *at = p;
		int rc = get_key(r, &p, end, &num, &wt);
		if (rc < 0)
			return rc;
		if (num != 1 || (wt != 0 && wt != 2))
			return unexpected(r, at, "Int64List", num, wt);
		const uint8_t *b = p, *be = p;
		if (wt == 2) {
			if ((rc = get_len(r, &p, end, &b, &be)) < 0)
				return rc;
			if (!o64 && !o32) { /* validate only: word at a time */
				rc = packed_check(r, b, be, count);
				if (rc < 0)
					return rc;
				continue;
			}
			if (o32 && *count + (size_t)(be - b) <= cap) {
				/* Room for as many values as bytes: no bounds checks. */
				rc = packed_u32(r, b, be, o32, count);
				if (rc < 0)
					return rc;
				continue;
			}
		} else {
			be = end; /* one varint */
		}
		while (b < be) {
			uint64_t v;
			const uint8_t *vat = b;
			if (get_varint(&b, be, &v) < 0)
				return BAD(r, vat, "truncated varint at byte %td",
					   vat - r->base);
			size_t i = (*count)++;
			if (i < cap) {
				if (o64)
					o64[i] = (int64_t)v;
				if (o32) {
					if (v > UINT32_MAX && !r->bad_at) {
						r->bad_at = vat;
						r->bad_val = v;
					}
					o32[i] = (uint32_t)v;
				}
			}
			if (wt == 0) {
				p = b;
				break;
			}
		}
	}
	return 0;
}

static int float_list(struct rd *r, const uint8_t *p, const uint8_t *end)
{
	while (p < end) {
		uint32_t num;
		unsigned wt;
		const uint8_t *at = p;
		int rc = get_key(r, &p, end, &num, &wt);
		if (rc < 0)
			return rc;
		if (num != 1 || (wt != 5 && wt != 2))
			return unexpected(r, at, "FloatList", num, wt);
		if (wt == 5) {
			if (end - p < 4)
				return BAD(r, at, "truncated float at byte %td", at - r->base);
			p += 4;
		} else {
			const uint8_t *b, *be;
			if ((rc = get_len(r, &p, end, &b, &be)) < 0)
				return rc;
			if ((be - b) % 4)
				return BAD(r, at, "packed floats of %td bytes at byte %td",
					   be - b, at - r->base);
		}
	}
	return 0;
}

static int bytes_list(struct rd *r, const uint8_t *p, const uint8_t *end)
{
	while (p < end) {
		uint32_t num;
		unsigned wt;
		const uint8_t *at = p, *b, *be;
		int rc = get_key(r, &p, end, &num, &wt);
		if (rc < 0)
			return rc;
		if (num != 1 || wt != 2)
			return unexpected(r, at, "BytesList", num, wt);
		if ((rc = get_len(r, &p, end, &b, &be)) < 0)
			return rc;
	}
	return 0;
}

/* A Feature (possibly spread over several occurrences, which protobuf
 * merges).  *kind receives the final oneof case (0 none, 1 bytes, 2 float,
 * 3 int64); int64 values are decoded when o64/o32 are given. */
static int feature(struct rd *r, const uint8_t *p, const uint8_t *end, int *kind,
		   int64_t *o64, uint32_t *o32, size_t cap, size_t *count)
{
	while (p < end) {
		uint32_t num;
		unsigned wt;
		const uint8_t *at = p, *b, *be;
		int rc = get_key(r, &p, end, &num, &wt);
		if (rc < 0)
			return rc;
		if (num < 1 || num > 3 || wt != 2)
			return unexpected(r, at, "Feature", num, wt);
		if ((rc = get_len(r, &p, end, &b, &be)) < 0)
			return rc;
		if (num == 3) {
			if (*kind != 3) {
				*count = 0; /* the oneof switched: values start over */
				if (o64 || o32)
					r->bad_at = NULL;
			}
			rc = int64_list(r, b, be, o64, o32, cap, count);
		} else {
			rc = num == 1 ? bytes_list(r, b, be) : float_list(r, b, be);
		}
		if (rc < 0)
			return rc;
		*kind = (int)num;
	}
	return 0;
}

/* A feature name is a proto3 string: valid UTF-8 (protobuf refuses the
 * Example otherwise, and JSON cannot carry it): its first invalid byte, or
 * NULL. */
static const uint8_t *utf8_bad(const uint8_t *b, const uint8_t *e)
{
	int stop;
	size_t n = loom_utf8_span(b, (size_t)(e - b), &stop);
	return b + n < e ? b + n : NULL;
}

/* Walk a whole Example.  If key != NULL, decode that int64 feature. */
static int walk(struct rd *r, const uint8_t *p, const uint8_t *end, const char *key,
		int64_t *o64, uint32_t *o32, size_t cap, size_t *count, int *found)
{
	size_t klen = key ? strlen(key) : 0;
	while (p < end) {
		uint32_t num;
		unsigned wt;
		const uint8_t *at = p, *fb, *fe;
		int rc = get_key(r, &p, end, &num, &wt);
		if (rc < 0)
			return rc;
		if (num != 1 || wt != 2)
			return unexpected(r, at, "Example", num, wt);
		if ((rc = get_len(r, &p, end, &fb, &fe)) < 0)
			return rc;
		while (fb < fe) { /* Features */
			const uint8_t *eb, *ee;
			at = fb;
			if ((rc = get_key(r, &fb, fe, &num, &wt)) < 0)
				return rc;
			if (num != 1 || wt != 2)
				return unexpected(r, at, "Features", num, wt);
			if ((rc = get_len(r, &fb, fe, &eb, &ee)) < 0)
				return rc;
			/* Map entry: find its (last) key first. */
			const uint8_t *kb = NULL, *kend = NULL, *q = eb;
			while (q < ee) {
				const uint8_t *b, *be;
				at = q;
				if ((rc = get_key(r, &q, ee, &num, &wt)) < 0)
					return rc;
				if ((num != 1 && num != 2) || wt != 2)
					return unexpected(r, at, "feature map entry", num, wt);
				if ((rc = get_len(r, &q, ee, &b, &be)) < 0)
					return rc;
				if (num == 1) {
					kb = b;
					kend = be;
				}
			}
			const uint8_t *bad = kb ? utf8_bad(kb, kend) : NULL;
			if (bad)
				return BAD(r, bad, "feature name: invalid UTF-8 at byte %td",
					   bad - r->base);
			int match = key && kb && (size_t)(kend - kb) == klen &&
				    memcmp(kb, key, klen) == 0;
			if (key && !kb && klen == 0)
				match = 1;
			int kind = 0;
			size_t cnt = 0;
			if (match)
				r->bad_at = NULL;
			for (q = eb; q < ee;) {
				const uint8_t *b, *be;
				get_key(r, &q, ee, &num, &wt);
				get_len(r, &q, ee, &b, &be);
				if (num != 2)
					continue;
				if (match)
					rc = feature(r, b, be, &kind, o64, o32, cap, &cnt);
				else
					rc = feature(r, b, be, &kind, NULL, NULL, 0, &cnt);
				if (rc < 0)
					return rc;
			}
			if (match) { /* the last entry for a key wins */
				*found = kind == 3 ? 1 : -kind - 1;
				*count = cnt;
			}
		}
	}
	return 0;
}

static int decode(const uint8_t *p, size_t len, const char *key, int64_t *o64, uint32_t *o32,
		  size_t cap, size_t *n, struct loom_err *err)
{
	struct loom_err scratch;
	struct rd r = { p, err ? err : &scratch, NULL, 0 };
	int found = 0;
	size_t count = 0;
	int rc = walk(&r, p, p + len, key, o64, o32, cap, &count, &found);
	if (rc < 0)
		return rc;
	if (found == 0)
		return loom_err_set(r.err, LOOM_EFORMAT, "no feature '%s'", key);
	if (found < 0) {
		static const char *kinds[] = { "an empty feature", "a bytes list",
					       "a float list" };
		return loom_err_set(r.err, LOOM_EFORMAT, "feature '%s' is %s, not an int64 list",
				    key, kinds[-found - 1]);
	}
	*n = count;
	if (o32 && r.bad_at && count <= cap) {
		loom_err_set(r.err, LOOM_ERANGE,
			     "value %" PRId64 " at byte %td is not a token id (0 <= id < 2^32)",
			     (int64_t)r.bad_val, r.bad_at - p);
		return LOOM_ERANGE;
	}
	if (count > cap)
		return loom_err_set(r.err, LOOM_ERANGE, "feature '%s' has %zu values, room for %zu",
				    key, count, cap);
	return 0;
}

int loom_example_decode_i64(const uint8_t *p, size_t len, const char *key, int64_t *out,
			    size_t cap, size_t *n, struct loom_err *err)
{
	return decode(p, len, key, out, NULL, cap, n, err);
}

int loom_example_decode_u32(const uint8_t *p, size_t len, const char *key, uint32_t *out,
			    size_t cap, size_t *n, struct loom_err *err)
{
	return decode(p, len, key, NULL, out, cap, n, err);
}

/* ---- protobuf-c: strict check and JSON ----------------------------------- */

static int unknown(const ProtobufCMessage *m)
{
	return m && m->n_unknown_fields;
}

/* Unpack with protobuf-c and require no unknown fields anywhere. */
static Tensorflow__Example *pbc_unpack(const uint8_t *p, size_t len, struct loom_err *err)
{
	Tensorflow__Example *ex = tensorflow__example__unpack(NULL, len, p);
	if (!ex) {
		loom_err_set(err, LOOM_EFORMAT, "not a tf.train.Example: protobuf parse failed");
		return NULL;
	}
	int bad = unknown(&ex->base);
	Tensorflow__Features *fs = ex->features;
	if (fs) {
		bad |= unknown(&fs->base);
		for (size_t i = 0; i < fs->n_feature && !bad; i++) {
			Tensorflow__Features__FeatureEntry *e = fs->feature[i];
			Tensorflow__Feature *f = e->value;
			bad |= unknown(&e->base) || unknown(f ? &f->base : NULL);
			bad |= e->key && utf8_bad((const uint8_t *)e->key,
						  (const uint8_t *)e->key + strlen(e->key)) != NULL;
			if (!f)
				continue;
			switch (f->kind_case) {
			case TENSORFLOW__FEATURE__KIND_BYTES_LIST:
				bad |= unknown(&f->bytes_list->base);
				break;
			case TENSORFLOW__FEATURE__KIND_FLOAT_LIST:
				bad |= unknown(&f->float_list->base);
				break;
			case TENSORFLOW__FEATURE__KIND_INT64_LIST:
				bad |= unknown(&f->int64_list->base);
				break;
			default:
				break;
			}
		}
	}
	if (bad) {
		tensorflow__example__free_unpacked(ex, NULL);
		loom_err_set(err, LOOM_EFORMAT,
			     "not a tf.train.Example: unknown fields or a feature name not UTF-8");
		return NULL;
	}
	return ex;
}

int loom_example_check(const uint8_t *p, size_t len, struct loom_err *err)
{
	struct loom_err scratch;
	struct rd r = { p, err ? err : &scratch, NULL, 0 };
	int found = 0;
	size_t count = 0;
	return walk(&r, p, p + len, NULL, NULL, NULL, 0, &count, &found);
}

int loom_example_check_pbc(const uint8_t *p, size_t len, struct loom_err *err)
{
	struct loom_err scratch;
	Tensorflow__Example *ex = pbc_unpack(p, len, err ? err : &scratch);
	if (!ex)
		return LOOM_EFORMAT;
	tensorflow__example__free_unpacked(ex, NULL);
	return 0;
}

static json_t *bytes_value(const ProtobufCBinaryData *b)
{
	json_t *s = json_stringn((const char *)b->data, b->len);
	if (s)
		return s; /* valid UTF-8 */
	size_t cap = 4 * ((b->len + 2) / 3) + 1;
	unsigned char *enc = malloc(cap);
	if (!enc)
		return NULL;
	int n = EVP_EncodeBlock(enc, b->data, (int)b->len);
	json_t *o = json_pack("{s:s#}", "base64", (const char *)enc, (int)n);
	free(enc);
	return o;
}

int loom_example_to_json(const uint8_t *p, size_t len, char **json, size_t *jlen,
			 struct loom_err *err)
{
	struct loom_err scratch;
	if (!err)
		err = &scratch;
	/* The strict walker gives a better message (with the byte offset). */
	int rc = loom_example_check(p, len, err);
	if (rc < 0)
		return rc;
	Tensorflow__Example *ex = pbc_unpack(p, len, err);
	if (!ex)
		return LOOM_EFORMAT;
	json_t *obj = json_object();
	rc = obj ? 0 : LOOM_ENOMEM;
	Tensorflow__Features *fs = ex->features;
	for (size_t i = 0; fs && i < fs->n_feature && rc == 0; i++) {
		Tensorflow__Features__FeatureEntry *e = fs->feature[i];
		Tensorflow__Feature *f = e->value;
		json_t *arr = json_array();
		if (!arr) {
			rc = LOOM_ENOMEM;
			break;
		}
		if (f && f->kind_case == TENSORFLOW__FEATURE__KIND_INT64_LIST)
			for (size_t k = 0; k < f->int64_list->n_value; k++)
				json_array_append_new(arr, json_integer(f->int64_list->value[k]));
		else if (f && f->kind_case == TENSORFLOW__FEATURE__KIND_FLOAT_LIST)
			for (size_t k = 0; k < f->float_list->n_value; k++) {
				double d = f->float_list->value[k];
				/* JSON has no NaN/Inf: write them as strings. */
				json_array_append_new(arr, isfinite(d) ? json_real(d)
						      : json_string(isnan(d) ? "NaN"
								    : d > 0 ? "Infinity"
									    : "-Infinity"));
			}
		else if (f && f->kind_case == TENSORFLOW__FEATURE__KIND_BYTES_LIST)
			for (size_t k = 0; k < f->bytes_list->n_value; k++) {
				json_t *v = bytes_value(&f->bytes_list->value[k]);
				if (!v) {
					rc = LOOM_ENOMEM;
					break;
				}
				json_array_append_new(arr, v);
			}
		if (json_object_set_new(obj, e->key, arr) < 0) {
			rc = loom_err_set(err, LOOM_EFORMAT,
					  "feature name is not valid UTF-8");
			break;
		}
	}
	tensorflow__example__free_unpacked(ex, NULL);
	if (rc == LOOM_ENOMEM)
		loom_err_set(err, rc, "out of memory");
	if (rc < 0) {
		json_decref(obj);
		return rc;
	}
	char *s = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
	json_decref(obj);
	if (!s)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	*json = s;
	*jlen = strlen(s);
	return 0;
}
