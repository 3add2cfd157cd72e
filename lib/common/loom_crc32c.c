/* loom_crc32c.c - see loom_crc32c.h */
#include "loom_crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#define POLY 0x82F63B78u /* reflected Castagnoli polynomial */

/* ---- tables (built once) ---------------------------------------------- */

static uint32_t slice[8][256];
/* zeros_pow[k]: the operator "append 2^k zero bytes" on a CRC, as a GF(2)
 * matrix (32 columns); for combining CRCs (loom_crc32c_combine) and, as
 * byte-indexed tables, the interleaved hardware streams. */
static uint32_t zeros_pow[64][32];
#define LONG 8192 /* 2^13 */
#define SHORT 256 /* 2^8 */
static uint32_t zeros_long[4][256], zeros_short[4][256];
static int have_hw;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
	uint32_t sum = 0;
	while (vec) {
		if (vec & 1)
			sum ^= *mat;
		vec >>= 1;
		mat++;
	}
	return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
	for (int n = 0; n < 32; n++)
		sq[n] = gf2_times(mat, mat[n]);
}

static void zeros_init(void)
{
	uint32_t bit[32], two[32], four[32], row = 1;
	bit[0] = POLY; /* one zero bit */
	for (int n = 1; n < 32; n++) {
		bit[n] = row;
		row <<= 1;
	}
	gf2_square(two, bit);
	gf2_square(four, two);
	gf2_square(zeros_pow[0], four); /* eight bits: one byte */
	for (int k = 1; k < 64; k++)
		gf2_square(zeros_pow[k], zeros_pow[k - 1]);
}

static void zeros_table(uint32_t zeros[4][256], const uint32_t *op)
{
	for (uint32_t n = 0; n < 256; n++) {
		zeros[0][n] = gf2_times(op, n);
		zeros[1][n] = gf2_times(op, n << 8);
		zeros[2][n] = gf2_times(op, n << 16);
		zeros[3][n] = gf2_times(op, n << 24);
	}
}

static inline uint32_t shift(uint32_t zeros[4][256], uint32_t crc)
{
	return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^
	       zeros[2][(crc >> 16) & 0xff] ^ zeros[3][crc >> 24];
}

static void init(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		slice[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = slice[0][n];
		for (int k = 1; k < 8; k++) {
			c = slice[0][c & 0xff] ^ (c >> 8);
			slice[k][n] = c;
		}
	}
	zeros_init();
	zeros_table(zeros_long, zeros_pow[13]);
	zeros_table(zeros_short, zeros_pow[8]);
#if defined(__x86_64__)
	__builtin_cpu_init();
	have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static inline void ensure_init(void)
{
	pthread_once(&once, init);
}

/* ---- portable: slicing-by-8 ------------------------------------------- */

static inline uint64_t load64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

uint32_t loom_crc32c_sw(uint32_t crc, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	ensure_init();
	crc = ~crc;
	while (n && ((uintptr_t)p & 7)) {
		crc = slice[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		n--;
	}
	while (n >= 8) {
		uint64_t w = load64(p) ^ crc;
		crc = slice[7][w & 0xff] ^ slice[6][(w >> 8) & 0xff] ^
		      slice[5][(w >> 16) & 0xff] ^ slice[4][(w >> 24) & 0xff] ^
		      slice[3][(w >> 32) & 0xff] ^ slice[2][(w >> 40) & 0xff] ^
		      slice[1][(w >> 48) & 0xff] ^ slice[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = slice[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/* ---- hardware: SSE4.2, three interleaved streams ---------------------- */

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint64_t hw_blocks(uint64_t c0, const unsigned char **pp, size_t *np, size_t block,
			  uint32_t zeros[4][256])
{
	const unsigned char *p = *pp;
	size_t n = *np;
	while (n >= 3 * block) {
		uint64_t c1 = 0, c2 = 0;
		const unsigned char *end = p + block;
		do {
			uint64_t a, b, c;
			memcpy(&a, p, 8);
			memcpy(&b, p + block, 8);
			memcpy(&c, p + 2 * block, 8);
			c0 = _mm_crc32_u64(c0, a);
			c1 = _mm_crc32_u64(c1, b);
			c2 = _mm_crc32_u64(c2, c);
			p += 8;
		} while (p < end);
		c0 = shift(zeros, (uint32_t)c0) ^ c1;
		c0 = shift(zeros, (uint32_t)c0) ^ c2;
		p += 2 * block;
		n -= 3 * block;
	}
	*pp = p;
	*np = n;
	return c0;
}

__attribute__((target("sse4.2")))
uint32_t loom_crc32c_hw(uint32_t crc, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	uint64_t c = ~crc;
	ensure_init();
	while (n && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		n--;
	}
	if (n >= 3 * LONG)
		c = hw_blocks(c, &p, &n, LONG, zeros_long);
	if (n >= 3 * SHORT)
		c = hw_blocks(c, &p, &n, SHORT, zeros_short);
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
		p += 8;
		n -= 8;
	}
	while (n--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return ~(uint32_t)c;
}

int loom_crc32c_hw_available(void)
{
	ensure_init();
	return have_hw;
}
#else
uint32_t loom_crc32c_hw(uint32_t crc, const void *buf, size_t n)
{
	return loom_crc32c_sw(crc, buf, n);
}

int loom_crc32c_hw_available(void)
{
	return 0;
}
#endif

uint32_t loom_crc32c(uint32_t crc, const void *buf, size_t n)
{
	ensure_init();
	return have_hw ? loom_crc32c_hw(crc, buf, n) : loom_crc32c_sw(crc, buf, n);
}

uint32_t loom_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2)
{
	ensure_init();
	for (int k = 0; len2; k++, len2 >>= 1)
		if (len2 & 1)
			crc1 = gf2_times(zeros_pow[k], crc1);
	return crc1 ^ crc2;
}
