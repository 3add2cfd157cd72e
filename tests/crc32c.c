/* Unit tests for loom_crc32c: check value, hardware vs table on random
 * buffers of every length and alignment, incremental use, masking,
 * combining the CRCs of pieces. */
#include <stdlib.h>

#include "loom_crc32c.h"
#include "tap.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

/* Bit-at-a-time reference, straight from the definition. */
static uint32_t crc_bitwise(const unsigned char *p, size_t n)
{
	uint32_t c = 0xFFFFFFFFu;
	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
	}
	return ~c;
}

int main(void)
{
	const char *v = "123456789";
	is_int(loom_crc32c_sw(0, v, 9), 0xE3069283u, "sw: crc32c(123456789)");
	is_int(loom_crc32c(0, v, 9), 0xE3069283u, "dispatch: crc32c(123456789)");
	is_int(loom_crc32c(0, "", 0), 0, "empty buffer");
	/* RFC 3720 B.4: 32 bytes of zeros -> 0x8A9136AA, of 0xFF -> 0x62A8AB43. */
	unsigned char z[32];
	memset(z, 0, 32);
	is_int(loom_crc32c(0, z, 32), 0x8A9136AAu, "32 zero bytes (RFC 3720)");
	memset(z, 0xff, 32);
	is_int(loom_crc32c(0, z, 32), 0x62A8AB43u, "32 0xFF bytes (RFC 3720)");

	/* Masking round trip and the TFRecord constant. */
	is_int(loom_crc32c_mask(0), 0xA282EAD8u, "mask(0)");
	int bad = 0;
	for (int i = 0; i < 10000; i++) {
		uint32_t c = rnd();
		bad += loom_crc32c_unmask(loom_crc32c_mask(c)) != c;
	}
	is_int(bad, 0, "unmask(mask(c)) == c");

	int hw = loom_crc32c_hw_available();
	diag("hardware crc32c: %s", hw ? "yes" : "no");

	size_t max = 3 * 8192 * 2 + 1000;
	unsigned char *buf = malloc(max + 16);
	for (size_t i = 0; i < max + 16; i++)
		buf[i] = (unsigned char)rnd();

	int mism_ref = 0, mism_hw = 0, mism_inc = 0;
	size_t lens[] = { 0, 1, 7, 8, 9, 15, 16, 63, 255, 256, 767, 768, 769, 1000,
			  3 * 256 * 2 + 5, 8191, 24575, 24576, 24577, 3 * 8192 * 2, max };
	for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
		for (size_t al = 0; al < 8; al++) {
			size_t n = lens[li];
			uint32_t ref = crc_bitwise(buf + al, n);
			uint32_t sw = loom_crc32c_sw(0, buf + al, n);
			mism_ref += sw != ref;
			if (hw)
				mism_hw += loom_crc32c_hw(0, buf + al, n) != ref;
			size_t cut = n / 3;
			uint32_t inc = loom_crc32c(0, buf + al, cut);
			inc = loom_crc32c(inc, buf + al + cut, n - cut);
			mism_inc += inc != ref;
		}
	is_int(mism_ref, 0, "slicing-by-8 == bitwise reference (lengths x alignments)");
	if (hw)
		is_int(mism_hw, 0, "sse4.2 (3-way) == bitwise reference");
	else
		ok(1, "# SKIP no sse4.2");
	is_int(mism_inc, 0, "incremental == one-shot");

	/* Random lengths: hw vs sw. */
	int mism = 0;
	for (int i = 0; i < 2000; i++) {
		size_t off = rnd() % 16, n = rnd() % (max - 16);
		uint32_t a = loom_crc32c_sw(0, buf + off, n);
		uint32_t b = loom_crc32c(0, buf + off, n);
		mism += a != b;
	}
	is_int(mism, 0, "dispatch == sw on 2000 random slices");

	/* Combining: the CRC of A||B from those of A and B, cut anywhere,
	 * empty pieces included. */
	size_t cuts[] = { 0, 1, 7, 8, 255, 256, 8191, 8192, 24577, max - 1, max };
	mism = 0;
	for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
		size_t a = cuts[i];
		uint32_t ca = loom_crc32c(0, buf, a), cb = loom_crc32c(0, buf + a, max - a);
		mism += loom_crc32c_combine(ca, cb, max - a) != loom_crc32c(0, buf, max);
	}
	is_int(mism, 0, "combine(crc(A), crc(B), |B|) == crc(A||B) at %zu cuts",
	       sizeof cuts / sizeof *cuts);
	is_int(loom_crc32c_combine(0x12345678u, 0, 0), 0x12345678u, "an empty B: crc(A)");
	is_int(loom_crc32c_combine(0, loom_crc32c(0, v, 9), 9), 0xE3069283u,
	       "an empty A: crc(B)");
	mism = 0;
	for (int i = 0; i < 200; i++) {
		/* a file cut in 1..8 random pieces, some empty, combined in order */
		size_t np = 1 + rnd() % 8, at = 0;
		uint32_t c = 0;
		for (size_t k = 0; k < np; k++) {
			size_t len = k == np - 1 ? max - at : (rnd() % 4 ? rnd() % (max - at + 1) : 0);
			c = loom_crc32c_combine(c, loom_crc32c(0, buf + at, len), len);
			at += len;
		}
		mism += c != loom_crc32c(0, buf, max);
	}
	is_int(mism, 0, "200 random cuttings in up to 8 pieces (empty ones too) combine to crc(A)");
	mism = 0;
	for (int i = 0; i < 200; i++) {
		/* lengths past 4 GB: (a.b).c == a.(b.c) as operators */
		uint64_t lb = (uint64_t)rnd() << 20 | rnd(), lc = (uint64_t)rnd() << 21 | rnd();
		uint32_t a = rnd(), b = rnd(), c = rnd();
		mism += loom_crc32c_combine(loom_crc32c_combine(a, b, lb), c, lc) !=
			loom_crc32c_combine(a, loom_crc32c_combine(b, c, lc), lb + lc);
	}
	is_int(mism, 0, "combine is associative for lengths up to 2^53");
	free(buf);
	return done_testing();
}
