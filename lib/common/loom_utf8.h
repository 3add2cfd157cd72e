/*
 * loom_utf8.h - the one UTF-8 validator and decoder of libloom.
 *
 * Purpose: well-formed UTF-8 exactly as Unicode defines it (Table 3-7):
 * shortest form only (no overlongs: C0, C1, E0 80..9F, F0 80..8F are
 * refused), no surrogates (ED A0..BF), nothing above U+10FFFF (F4 90..,
 * F5..FF).  The dump and wikitext repair pass (loom_utf8_sanitize in
 * loom_wikitext.h), the GPT-2 pre-tokenizer and the vocabulary loaders all
 * use these rules, so a byte one of them calls invalid is invalid to all.
 * The two per-character functions are inline: they sit in the
 * pre-tokenizer's inner loop.
 *
 * Ownership: nothing allocates.  Errors: none; the return values say what
 * the bytes are.  Thread-safety: every function is thread-safe.
 */
#ifndef LOOM_UTF8_H
#define LOOM_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the well-formed sequence at s[0..n), n >= 1; 0 if s[0]
 * starts no well-formed sequence; -1 if the n bytes are a proper prefix of
 * one (a sequence truncated by the end of the buffer). */
static inline int loom_utf8_seq(const uint8_t *s, size_t n)
{
	unsigned c = s[0], c1;
	if (c < 0x80)
		return 1;
	if (c < 0xC2 || c >= 0xF5)
		return 0;
	if (n < 2)
		return -1;
	c1 = s[1];
	if ((c1 & 0xC0) != 0x80)
		return 0;
	if (c < 0xE0)
		return 2;
	if (c < 0xF0) {
		if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0))
			return 0;
		if (n < 3)
			return -1;
		return (s[2] & 0xC0) == 0x80 ? 3 : 0;
	}
	if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90))
		return 0;
	if (n < 3)
		return -1;
	if ((s[2] & 0xC0) != 0x80)
		return 0;
	if (n < 4)
		return -1;
	return (s[3] & 0xC0) == 0x80 ? 4 : 0;
}

/* Decode one character at s[0..n), n >= 1: stores the code point in *cp
 * and returns its byte length (1..4), *valid = 1; for a byte that starts
 * no well-formed sequence (truncated ones included) stores 0xFFFD and
 * returns 1, *valid = 0. */
static inline size_t loom_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp, int *valid)
{
	switch (loom_utf8_seq(s, n)) {
	case 1:
		*cp = s[0];
		*valid = 1;
		return 1;
	case 2:
		*cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
		*valid = 1;
		return 2;
	case 3:
		*cp = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
		*valid = 1;
		return 3;
	case 4:
		*cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
		      (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
		*valid = 1;
		return 4;
	default:
		*cp = 0xfffd;
		*valid = 0;
		return 1;
	}
}

/* Encode code point cp (< 0x110000) as UTF-8 into out (room for 4 bytes);
 * returns the byte count (1..4). */
static inline size_t loom_utf8_encode(uint8_t *out, uint32_t cp)
{
	if (cp < 0x80) {
		out[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (uint8_t)(0xc0 | cp >> 6);
		out[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (uint8_t)(0xe0 | cp >> 12);
		out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (uint8_t)(0xf0 | cp >> 18);
	out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

/* Length of the longest well-formed prefix of s[0..n) (ASCII runs are
 * scanned 8 bytes at a time).  When it is shorter than n, *stop is what
 * loom_utf8_seq says at that point: 0 (an invalid byte) or -1 (a
 * sequence cut by the end of the buffer); else *stop = 1. */
size_t loom_utf8_span(const uint8_t *s, size_t n, int *stop);

#endif
