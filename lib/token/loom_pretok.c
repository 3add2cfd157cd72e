/* loom_pretok.c - GPT-2 pre-tokenizer; see loom_pretok.h. */
#include "loom_pretok.h"

extern const uint8_t loom_uc_stage1[0x110000 >> 8];
extern const uint8_t loom_uc_stage2[][64];

enum { O = LOOM_UC_O, L = LOOM_UC_L, N = LOOM_UC_N, S = LOOM_UC_S };

/* ASCII classes (the same values as the generated table gives). */
static const uint8_t ascii_class[128] = {
	[0x09 ... 0x0d] = S, [' '] = S,
	['0' ... '9'] = N,
	['A' ... 'Z'] = L, ['a' ... 'z'] = L,
};

int loom_uclass(uint32_t cp)
{
	if (cp > 0x10ffff)
		return O;
	return (loom_uc_stage2[loom_uc_stage1[cp >> 8]][(cp & 255) >> 2] >>
		((cp & 3) * 2)) & 3;
}

static inline int cont(uint8_t b)
{
	return (b & 0xc0) == 0x80;
}

/* Class of the character at s[0..n), n >= 1; its length in *len. */
static inline int cls(const uint8_t *s, size_t n, size_t *len)
{
	if (s[0] < 0x80) {
		*len = 1;
		return ascii_class[s[0]];
	}
	uint32_t cp;
	int valid;
	*len = loom_utf8_decode(s, n, &cp, &valid);
	return valid ? loom_uclass(cp) : O;
}

/* End of the run of class k characters starting at i. */
static size_t run(const uint8_t *s, size_t n, size_t i, int k)
{
	while (i < n) {
		if (s[i] < 0x80) {
			if (ascii_class[s[i]] != k)
				break;
			i++;
			continue;
		}
		size_t l;
		if (cls(s + i, n - i, &l) != k)
			break;
		i += l;
	}
	return i;
}

size_t loom_pretok_next(const uint8_t *s, size_t n)
{
	size_t l0, l1;
	int c0, c1;

	if (n == 0)
		return 0;
	if (s[0] == '\'' && n >= 2) {
		uint8_t d = s[1];
		if (d == 's' || d == 't' || d == 'm' || d == 'd')
			return 2;
		if (n >= 3 && ((d == 'r' && s[2] == 'e') || (d == 'v' && s[2] == 'e') ||
			       (d == 'l' && s[2] == 'l')))
			return 3;
	}
	if (s[0] == ' ' && n >= 2) {
		/* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+' */
		c1 = cls(s + 1, n - 1, &l1);
		if (c1 != S)
			return run(s, n, 1 + l1, c1);
	}
	c0 = cls(s, n, &l0);
	if (c0 != S)
		return run(s, n, l0, c0);
	/* \s+(?!\S) | \s+ */
	size_t j = l0, last = 0;
	while (j < n) {
		size_t l;
		if (s[j] < 0x80) {
			if (ascii_class[s[j]] != S)
				break;
			l = 1;
		} else if (cls(s + j, n - j, &l) != S) {
			break;
		}
		last = j;
		j += l;
	}
	if (j == n)
		return n;       /* run reaches the end of the text */
	return last ? last : j; /* keep the last space for the next piece */
}

size_t loom_pretok_safe_cut(const uint8_t *s, size_t n, size_t window)
{
	size_t stop = n > window ? n - window : 1;
	if (n < 2)
		return 0;
	if (stop < 1)
		stop = 1;
	for (size_t p = n - 1; p >= stop && p > 0; p--) {
		uint32_t cpy, cpx = 0;
		int vy, vx = 0, cy, cx;
		size_t ly, lx = 0, q;
		if (cont(s[p]))
			continue;
		ly = loom_utf8_decode(s + p, n - p, &cpy, &vy);
		if (!vy)
			continue;
		cy = loom_uclass(cpy);
		if (cy == S)
			continue;
		/* the valid character that ends exactly at p */
		for (q = p; q > 0 && p - q < 4;) {
			q--;
			if (!cont(s[q])) {
				lx = loom_utf8_decode(s + q, n - q, &cpx, &vx);
				break;
			}
		}
		if (!vx || q + lx != p || cpx == '\'')
			continue;
		cx = loom_uclass(cpx);
		if (cx != S && cx != cy)
			return p;
		(void)ly;
	}
	return 0;
}
