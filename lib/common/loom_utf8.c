/* loom_utf8.c - UTF-8 validation; see loom_utf8.h. */
#include "loom_utf8.h"

#include <string.h>

size_t loom_utf8_span(const uint8_t *s, size_t n, int *stop)
{
	size_t j = 0;
	int r = 1;
	while (j < n) {
		if (s[j] < 0x80) {
			j++;
			while (j + 8 <= n) {
				uint64_t w;
				memcpy(&w, s + j, 8);
				if (w & 0x8080808080808080ull)
					break;
				j += 8;
			}
			continue;
		}
		/* common 3-byte case (CJK) inline */
		if (s[j] >= 0xE1 && s[j] <= 0xEC && j + 2 < n && (s[j + 1] & 0xC0) == 0x80 &&
		    (s[j + 2] & 0xC0) == 0x80) {
			j += 3;
			continue;
		}
		r = loom_utf8_seq(s + j, n - j);
		if (r <= 0)
			break;
		j += r;
	}
	*stop = j < n ? r : 1;
	return j;
}
