/*
 * loom_pretok.h - GPT-2 pre-tokenizer: splits text into the pieces that
 * byte-level BPE then encodes one by one.
 *
 * Purpose: a hand-written splitter (no regex engine) that is exactly the
 * GPT-2 pattern as tiktoken's regex engine (Rust regex / fancy-regex)
 * runs it, leftmost-first alternation:
 *
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * Classes are Unicode 15.0 (tables generated into lib/token/loom_unicode_tab.c
 * by lib/token/gen_unicode_tab.py from UnicodeData.txt / PropList.txt):
 *   L = general category Lu Ll Lt Lm Lo
 *   N = general category Nd Nl No
 *   S = property White_Space (U+0009-000D, 0020, 0085, 00A0, 1680,
 *       2000-200A, 2028, 2029, 202F, 205F, 3000).  U+FEFF is not White_Space
 *       (it is Cf, so "other"); U+001C-001F are not White_Space either.
 *   O = everything else.
 * Contractions are case-sensitive ("'S" is not one); ` ?` is U+0020 only.
 *
 * Invalid UTF-8: input is bytes.  At each position a well-formed UTF-8
 * sequence (shortest form, no surrogates, <= U+10FFFF: loom_utf8_decode
 * in loom_utf8.h) is one character;
 * otherwise the single byte at that position is one character of class O
 * (exactly how a decoder substituting U+FFFD, itself class O, would
 * classify it).  Pieces are always contiguous byte ranges of the input, so
 * encode|decode stays byte-exact for any input, valid UTF-8 or not.  A NUL
 * byte is an ordinary class-O character.
 *
 * The end of the buffer is the end of the text (it matters for \s+(?!\S)).
 *
 * Ownership: no state, no allocation; thread-safe.
 */
#ifndef LOOM_PRETOK_H
#define LOOM_PRETOK_H

#include <stddef.h>
#include <stdint.h>

#include "loom_utf8.h"

/* Character classes of the pattern. */
enum { LOOM_UC_O = 0, LOOM_UC_L = 1, LOOM_UC_N = 2, LOOM_UC_S = 3 };

/* Byte length (1..n) of the first pre-token piece of s[0..n); 0 if n == 0.
 * Iterate:  for (p = 0; p < n; p += k) k = loom_pretok_next(s + p, n - p); */
size_t loom_pretok_next(const uint8_t *s, size_t n);

/* Class (LOOM_UC_*) of code point cp (any value; > 0x10FFFF gives O). */
int loom_uclass(uint32_t cp);
/* The Unicode version of the class tables, as "15.0.0". */
extern const char loom_uc_version[];

/* For streaming very long documents: the largest p in [1, n) such that
 * splitting s[0..n) at p gives exactly the same pieces as the whole
 * (pieces of s[0..p) followed by pieces of s[p..n) - for any bytes that
 * may follow s[n-1]), looking back at most `window` bytes from n; 0 if no
 * such point was found. */
size_t loom_pretok_safe_cut(const uint8_t *s, size_t n, size_t window);

#endif
