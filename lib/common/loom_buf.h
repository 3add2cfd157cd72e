/*
 * loom_buf.h - a growable byte buffer kept as three variables.
 *
 * Purpose: the (buf, len, cap) output buffers of the decoders
 * (loom_bpe_decode, loom_wordpiece_decode) and of the tools that fill
 * them: room is made by doubling from 4096 bytes, and bytes are appended.
 *
 * Ownership: *buf is malloc'd (realloc'd here) and belongs to the caller,
 * who frees it; all three may start 0/NULL.  Errors: 0 or LOOM_ENOMEM,
 * with the buffer, its length and its capacity unchanged.  Thread-safety:
 * a buffer is used by one thread at a time.
 */
#ifndef LOOM_BUF_H
#define LOOM_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Grow *buf (capacity *cap) to hold at least len + more bytes; the slow
 * path of loom_buf_reserve. */
int loom_buf_grow(uint8_t **buf, size_t len, size_t *cap, size_t more);

/* Make room for `more` bytes after the first len. */
static inline int loom_buf_reserve(uint8_t **buf, size_t len, size_t *cap, size_t more)
{
	return *cap - len >= more ? 0 : loom_buf_grow(buf, len, cap, more);
}

/* Append p[0..n) to the buffer. */
static inline int loom_buf_put(uint8_t **buf, size_t *len, size_t *cap, const void *p, size_t n)
{
	int rc = loom_buf_reserve(buf, *len, cap, n);
	if (rc)
		return rc;
	memcpy(*buf + *len, p, n);
	*len += n;
	return 0;
}

#endif
