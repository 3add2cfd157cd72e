/*
 * loom_crc32c.h - CRC-32C (Castagnoli), as TFRecord framing uses it.
 *
 * Purpose: crc32c with the SSE4.2 crc32 instruction when the CPU has it
 * (runtime detection; three interleaved streams for long buffers) and a
 * portable slicing-by-8 table fallback; both are always compiled and tested
 * against each other.  Plus TFRecord's masked form:
 *   mask(crc) = ((crc >> 15) | (crc << 17)) + 0xA282EAD8
 * Check value: crc32c("123456789") = 0xE3069283.
 *
 * Ownership/errors: pure functions, no allocation, thread-safe.
 * Incremental use: crc = loom_crc32c(0, a, na); crc = loom_crc32c(crc, b, nb).
 * Pieces computed apart (e.g. by several processes, each its part of a
 * file): loom_crc32c(0, a||b) = loom_crc32c_combine(crc_a, crc_b, nb), as
 * zlib's crc32_combine, with GF(2) matrices of "append 2^k zero bytes"
 * built once: at most 64 matrix-vector products, whatever nb.
 */
#ifndef LOOM_CRC32C_H
#define LOOM_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Best available implementation. */
uint32_t loom_crc32c(uint32_t crc, const void *buf, size_t n);
/* Portable table implementation (slicing-by-8). */
uint32_t loom_crc32c_sw(uint32_t crc, const void *buf, size_t n);
/* Hardware implementation; only call when loom_crc32c_hw_available(). */
uint32_t loom_crc32c_hw(uint32_t crc, const void *buf, size_t n);
int loom_crc32c_hw_available(void);
/* The CRC of A||B from crc1 = loom_crc32c(0, A, na), crc2 = loom_crc32c(0,
 * B, len2) and len2 (the unmasked CRCs; len2 0 gives crc1). */
uint32_t loom_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);

static inline uint32_t loom_crc32c_mask(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

static inline uint32_t loom_crc32c_unmask(uint32_t m)
{
	uint32_t r = m - 0xA282EAD8u;
	return (r >> 17) | (r << 15);
}

/* Masked CRC of a buffer, as stored in TFRecord files. */
static inline uint32_t loom_crc32c_masked(const void *buf, size_t n)
{
	return loom_crc32c_mask(loom_crc32c(0, buf, n));
}

#endif
