/* loom_buf.c - growable byte buffers; see loom_buf.h. */
#include "loom_buf.h"

#include <stdlib.h>

#include "loom_common.h"

int loom_buf_grow(uint8_t **buf, size_t len, size_t *cap, size_t more)
{
	if (more > SIZE_MAX / 2 - len)
		return LOOM_ENOMEM;
	size_t c = *cap ? *cap : 4096;
	while (c - len < more)
		c *= 2;
	uint8_t *b = realloc(*buf, c);
	if (!b)
		return LOOM_ENOMEM;
	*buf = b;
	*cap = c;
	return 0;
}
