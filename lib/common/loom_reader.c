/* loom_reader.c - a buffered reader over a file descriptor; see loom_reader.h. */
#include "loom_reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom_common.h"

int loom_reader_init(struct loom_reader *r, int fd, size_t cap)
{
	memset(r, 0, sizeof *r);
	r->fd = fd;
	if (!(r->buf = malloc(cap)))
		return LOOM_ENOMEM;
	r->cap = cap;
	return 0;
}

void loom_reader_release(struct loom_reader *r)
{
	free(r->buf);
	r->buf = NULL;
	r->cap = r->start = r->end = 0;
}

ssize_t loom_reader_refill(struct loom_reader *r, size_t want)
{
	if (r->start) { /* slide what is left to the front */
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->pos += r->start;
		r->start = 0;
	}
	if (want > r->cap) {
		size_t nc = r->cap ? r->cap : 4096;
		while (nc < want)
			nc *= 2;
		uint8_t *p = realloc(r->buf, nc);
		if (!p)
			return LOOM_ENOMEM;
		r->buf = p;
		r->cap = nc;
	}
	while (r->end < want && !r->eof) {
		ssize_t n = read(r->fd, r->buf + r->end, r->cap - r->end);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r->errnum = errno;
			return LOOM_EIO;
		}
		if (n == 0)
			r->eof = 1;
		r->end += (size_t)n;
	}
	return (ssize_t)r->end;
}

ssize_t loom_reader_refill_err(struct loom_reader *r, size_t want, const char *name,
			       struct loom_err *err)
{
	ssize_t got = loom_reader_refill(r, want);
	if (got == LOOM_EIO)
		return loom_err_errno(err, LOOM_EIO, r->errnum, "cannot read '%s'", name);
	if (got < 0)
		return loom_err_set(err, (int)got, "out of memory");
	return got;
}
