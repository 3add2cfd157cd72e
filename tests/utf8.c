/* Unit tests for loom_utf8 (lib/common/loom_utf8.h): every code point
 * round-trips, and every 1-3 byte input (and 4-byte inputs over the edge
 * bytes) is classified as a from-the-definition reference decoder says:
 * overlongs, surrogates, > U+10FFFF and stray bytes refused, truncated
 * sequences told apart from invalid ones; loom_utf8_span agrees with
 * stepping loom_utf8_seq. */
#include "loom_utf8.h"
#include "tap.h"

/* Encode cp (any value < 2^21) in the UTF-8 bit pattern; its length. */
static int enc(uint32_t cp, uint8_t *o)
{
	if (cp < 0x80) {
		o[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (uint8_t)(0xC0 | cp >> 6);
		o[1] = (uint8_t)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (uint8_t)(0xE0 | cp >> 12);
		o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
		o[2] = (uint8_t)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (uint8_t)(0xF0 | cp >> 18);
	o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
	o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
	o[3] = (uint8_t)(0x80 | (cp & 0x3F));
	return 4;
}

/* The definition: a lead byte's pattern gives the length, then the
 * continuation bytes, then shortest form, no surrogate, <= U+10FFFF.
 * Returns the length of a complete valid sequence, 0 if invalid, -1 if
 * the n bytes are a proper prefix of some valid sequence. */
static int ref_full(const uint8_t *s, int len)
{
	static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	uint32_t cp = len == 1 ? s[0] : len == 2 ? s[0] & 0x1Fu : len == 3 ? s[0] & 0x0Fu : s[0] & 0x07u;
	for (int k = 1; k < len; k++) {
		if ((s[k] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (s[k] & 0x3F);
	}
	if (cp < min[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
		return 0;
	return len;
}

static int ref(const uint8_t *s, size_t n)
{
	int len = s[0] < 0x80 ? 1 : s[0] < 0xC0 ? 0 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 :
		  s[0] < 0xF8 ? 4 : 0;
	if (len == 0)
		return 0;
	if ((size_t)len <= n)
		return ref_full(s, len);
	/* truncated: a proper prefix iff some completion is valid; only the
	 * first two bytes constrain validity beyond the continuation bits,
	 * so completing with 0x80 or 0xBF everywhere decides it */
	uint8_t t[4];
	for (int fill = 0; fill < 2; fill++) {
		memcpy(t, s, n);
		for (int k = (int)n; k < len; k++)
			t[k] = fill ? 0xBF : 0x80;
		if (ref_full(t, len))
			return -1;
		if (n == 1 && len >= 3) /* second byte free too: try 0x80..0xBF */
			for (int b = 0x80; b <= 0xBF; b++) {
				t[1] = (uint8_t)b;
				if (ref_full(t, len))
					return -1;
			}
	}
	return 0;
}

static void every_code_point_round_trips(void)
{
	uint32_t bad = 0, first = 0;
	for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
		uint8_t b[4];
		int len = enc(cp, b);
		uint32_t got;
		int valid;
		size_t l = loom_utf8_decode(b, (size_t)len, &got, &valid);
		int surrogate = cp >= 0xD800 && cp <= 0xDFFF;
		int want_ok = !surrogate;
		int is_ok = valid && l == (size_t)len && got == cp && loom_utf8_seq(b, len) == len;
		int is_refused = !valid && l == 1 && got == 0xFFFD && loom_utf8_seq(b, len) == 0;
		if (want_ok ? !is_ok : !is_refused) {
			if (!bad++)
				first = cp;
		}
	}
	is_int(bad, 0, "U+0000..U+10FFFF decode to themselves, surrogates refused (first bad: U+%04X)",
	       (unsigned)first);
}

static void edge_cases(void)
{
	uint32_t cp;
	int valid;
	static const struct {
		const char *s;
		size_t n;
		int seq;
		const char *what;
	} c[] = {
		{ "\xC0\xAF", 2, 0, "overlong '/' in 2 bytes (C0 AF)" },
		{ "\xC1\xBF", 2, 0, "overlong U+007F (C1 BF)" },
		{ "\xC2\x80", 2, 2, "U+0080, the smallest 2-byte" },
		{ "\xE0\x80\xAF", 3, 0, "overlong '/' in 3 bytes (E0 80 AF)" },
		{ "\xE0\x9F\xBF", 3, 0, "overlong U+07FF (E0 9F BF)" },
		{ "\xE0\xA0\x80", 3, 3, "U+0800, the smallest 3-byte" },
		{ "\xF0\x80\x80\xAF", 4, 0, "overlong '/' in 4 bytes" },
		{ "\xF0\x8F\xBF\xBF", 4, 0, "overlong U+FFFF (F0 8F BF BF)" },
		{ "\xF0\x90\x80\x80", 4, 4, "U+10000, the smallest 4-byte" },
		{ "\xED\x9F\xBF", 3, 3, "U+D7FF, below the surrogates" },
		{ "\xED\xA0\x80", 3, 0, "U+D800, a high surrogate" },
		{ "\xED\xBF\xBF", 3, 0, "U+DFFF, a low surrogate" },
		{ "\xEE\x80\x80", 3, 3, "U+E000, above the surrogates" },
		{ "\xF4\x8F\xBF\xBF", 4, 4, "U+10FFFF, the largest" },
		{ "\xF4\x90\x80\x80", 4, 0, "U+110000 (F4 90 80 80)" },
		{ "\xF5\x80\x80\x80", 4, 0, "F5 lead byte (> U+10FFFF)" },
		{ "\xF7\xBF\xBF\xBF", 4, 0, "U+1FFFFF (F7 BF BF BF)" },
		{ "\xFF", 1, 0, "FF" },
		{ "\x80", 1, 0, "a stray continuation byte" },
		{ "\xC3", 1, -1, "2-byte sequence cut after its lead" },
		{ "\xE6\x97", 2, -1, "3-byte sequence cut after 2 bytes" },
		{ "\xF0\x9F\x98", 3, -1, "4-byte sequence cut after 3 bytes" },
		{ "\xF4\x90", 2, 0, "a cut > U+10FFFF prefix is invalid, not truncated" },
		{ "\xED\xA0", 2, 0, "a cut surrogate prefix is invalid, not truncated" },
		{ "\xE0\x80", 2, 0, "a cut overlong prefix is invalid, not truncated" },
		{ "\xC3" "A", 2, 0, "lead byte followed by ASCII" },
		{ "\xE6\x97" "A", 3, 0, "3-byte lead, one continuation, then ASCII" },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		const uint8_t *s = (const uint8_t *)c[i].s;
		is_int(loom_utf8_seq(s, c[i].n), c[i].seq, "seq: %s", c[i].what);
		size_t l = loom_utf8_decode(s, c[i].n, &cp, &valid);
		if (c[i].seq > 0)
			ok(valid && l == (size_t)c[i].seq, "decode: %s", c[i].what);
		else
			ok(!valid && l == 1 && cp == 0xFFFD, "decode: %s -> U+FFFD, 1 byte", c[i].what);
	}
	loom_utf8_decode((const uint8_t *)"\xF0\x9F\x98\x80", 4, &cp, &valid);
	is_int(cp, 0x1F600, "decode: F0 9F 98 80 is U+1F600");
	loom_utf8_decode((const uint8_t *)"\xE6\x97\xA5", 3, &cp, &valid);
	is_int(cp, 0x65E5, "decode: E6 97 A5 is U+65E5");
}

/* Every input of 1, 2 and 3 bytes, and 4-byte inputs over the bytes that
 * matter (every lead, edge continuation values), against the reference. */
static void exhaustive_against_reference(void)
{
	long bad = 0, n = 0;
	uint8_t s[4];
	for (uint32_t x = 0; x < 256; x++, n++) {
		s[0] = (uint8_t)x;
		bad += loom_utf8_seq(s, 1) != ref(s, 1);
	}
	for (uint32_t x = 0; x < 1u << 16; x++, n++) {
		s[0] = (uint8_t)(x >> 8), s[1] = (uint8_t)x;
		bad += loom_utf8_seq(s, 2) != ref(s, 2);
	}
	for (uint32_t x = 0; x < 1u << 24; x++, n++) {
		s[0] = (uint8_t)(x >> 16), s[1] = (uint8_t)(x >> 8), s[2] = (uint8_t)x;
		bad += loom_utf8_seq(s, 3) != ref(s, 3);
	}
	static const uint8_t edge[] = { 0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF };
	for (uint32_t lead = 0xC0; lead < 256; lead++)
		for (size_t a = 0; a < sizeof edge; a++)
			for (size_t b = 0; b < sizeof edge; b++)
				for (size_t c = 0; c < sizeof edge; c++, n++) {
					s[0] = (uint8_t)lead, s[1] = edge[a], s[2] = edge[b], s[3] = edge[c];
					bad += loom_utf8_seq(s, 4) != ref(s, 4);
				}
	is_int(bad, 0, "loom_utf8_seq agrees with the reference on %ld inputs", n);
}

/* span: the longest valid prefix, found by stepping loom_utf8_seq. */
static size_t span_ref(const uint8_t *s, size_t n, int *stop)
{
	size_t j = 0;
	int r = 1;
	while (j < n && (r = loom_utf8_seq(s + j, n - j)) > 0)
		j += (size_t)r;
	*stop = j < n ? r : 1;
	return j;
}

static void span(void)
{
	const char *t = "plain ASCII, long enough for the 8-byte steps: 0123456789";
	int stop;
	is_int(loom_utf8_span((const uint8_t *)t, strlen(t), &stop), strlen(t), "span: all ASCII");
	is_int(stop, 1, "span: whole input valid -> stop 1");
	const char *u = "\xE6\x97\xA5\xE6\x9C\xAC abc \xF0\x9F\x98\x80\xC3\xA9\xED\xA0\x80 tail";
	is_int(loom_utf8_span((const uint8_t *)u, strlen(u), &stop), 17, "span: stops at a surrogate");
	is_int(stop, 0, "span: invalid byte -> stop 0");
	is_int(loom_utf8_span((const uint8_t *)u, 14, &stop), 11, "span: stops before a cut sequence");
	is_int(stop, -1, "span: cut sequence -> stop -1");
	/* random mixes of the edge cases, against stepping seq */
	static const char *pieces[] = { "a", "abcdefghij", "\xC3\xA9", "\xE6\x97\xA5", "\xE1\x80",
					"\xF0\x9F\x98\x80", "\xED\xA0\x80", "\xC0\xAF", "\xF4\x90\x80\x80",
					"\x80", " ", "\xEC\xBF\xBF" };
	uint64_t rng = 42;
	long bad = 0;
	for (int k = 0; k < 20000; k++) {
		uint8_t buf[256];
		size_t n = 0;
		while (n < 200) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			const char *p = pieces[(rng >> 33) % (sizeof pieces / sizeof pieces[0])];
			memcpy(buf + n, p, strlen(p));
			n += strlen(p);
		}
		size_t cut = (size_t)(rng >> 40) % n + 1;
		int s1, s2;
		size_t a = loom_utf8_span(buf, cut, &s1), b = span_ref(buf, cut, &s2);
		bad += a != b || s1 != s2;
	}
	is_int(bad, 0, "span agrees with stepping loom_utf8_seq on 20000 random mixes");
}

int main(void)
{
	every_code_point_round_trips();
	edge_cases();
	exhaustive_against_reference();
	span();
	return done_testing();
}
