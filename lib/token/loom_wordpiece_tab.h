/*
 * loom_wordpiece_tab.h - the generated character tables behind
 * loom_wordpiece.c (lib/token/loom_wordpiece_tab.c, made by
 * lib/token/gen_wordpiece_tab.py from the Unicode Character Database).
 *
 * Internal to lib/token; constant data, thread-safe.
 */
#ifndef LOOM_WORDPIECE_TAB_H
#define LOOM_WORDPIECE_TAB_H

#include <stddef.h>
#include <stdint.h>

enum {
	LOOM_WP_WS = 1,     /* White_Space */
	LOOM_WP_CTRL = 2,   /* removed by clean-up: Cc Cf Co Cs but TAB LF CR */
	LOOM_WP_PUNCT = 4,  /* a piece of its own: P* or ASCII punctuation */
	LOOM_WP_CJK = 8,    /* CJK ideograph: a piece of its own */
	LOOM_WP_STRIP = 16, /* changes under NFD without Mn marks */
	LOOM_WP_LOWER = 32, /* changes under lower-casing */
	/* Cased, Case_Ignorable (DerivedCoreProperties): Python's final sigma */
	LOOM_WP_CASED = 64,
	LOOM_WP_CASE_IGNORABLE = 128,
};

/* cp -> mapped code points pool[off .. off + n) */
struct loom_wp_map {
	uint32_t cp;
	uint16_t off;
	uint8_t n;
};

extern const uint8_t loom_wp_stage1[0x1100];
extern const uint8_t loom_wp_stage2[][256];
extern const uint32_t loom_wp_strip_pool[], loom_wp_lower_pool[];
extern const struct loom_wp_map loom_wp_strip[], loom_wp_lower[];
extern const uint32_t loom_wp_strip_n, loom_wp_lower_n;

static inline unsigned loom_wp_flags(uint32_t cp)
{
	return cp < 0x110000 ? loom_wp_stage2[loom_wp_stage1[cp >> 8]][cp & 255] : 0;
}

/* The entry of cp in the sorted map m[0..n), or NULL. */
static inline const struct loom_wp_map *loom_wp_map_find(const struct loom_wp_map *m,
							 uint32_t n, uint32_t cp)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (m[mid].cp < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && m[lo].cp == cp ? &m[lo] : NULL;
}

#endif
