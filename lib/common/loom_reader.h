/*
 * loom_reader.h - a buffered reader over a file descriptor.
 *
 * Purpose: the one read loop behind libloom's streaming parsers (TFRecord
 * records in loom_tfrecord, token streams in loom_tokin) and the tools'
 * text readers (loom-bpe encode and train): the unread bytes
 * sit in buf[start..end), the parser consumes them by advancing `start`,
 * and loom_reader_fill(r, want) slides what is left to the front and
 * read()s (restarting on EINTR, each read as large as the free space)
 * until at least `want` bytes are unread or the input ends.  The buffer
 * grows when `want` exceeds it.  Readers that never ask for more than the
 * initial capacity never reallocate.
 *
 * Ownership: the struct is embedded in its owner; loom_reader_init
 * allocates the buffer, loom_reader_release frees it (not the fd: closing
 * it is the owner's business).  Errors: loom_reader_fill returns LOOM_EIO
 * (errno of the failed read in r->errnum) or LOOM_ENOMEM;
 * loom_reader_fill_err words them, given the file's name.  Thread-safety: the default
 * (loom_common.h): one thread at a time per reader.
 */
#ifndef LOOM_READER_H
#define LOOM_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loom_common.h"

struct loom_reader {
	int fd;
	uint8_t *buf;
	size_t cap;        /* bytes allocated at buf */
	size_t start, end; /* the unread bytes are buf[start..end) */
	uint64_t pos;      /* input offset of buf[0] (the owner may preset it) */
	int eof;           /* read() returned 0: nothing more will come */
	int errnum;        /* errno of the read that failed with LOOM_EIO */
};

/* A reader of fd with a cap-byte buffer.  0 or LOOM_ENOMEM. */
int loom_reader_init(struct loom_reader *r, int fd, size_t cap);
/* Free the buffer (r may be zeroed or released already). */
void loom_reader_release(struct loom_reader *r);

/* The slow path of loom_reader_fill. */
ssize_t loom_reader_refill(struct loom_reader *r, size_t want);

/* Make at least `want` unread bytes available at buf[start] (fewer only
 * at the end of the input): returns how many are unread, or a negative
 * LOOM_E* code. */
static inline ssize_t loom_reader_fill(struct loom_reader *r, size_t want)
{
	if (r->end - r->start >= want)
		return (ssize_t)(r->end - r->start);
	return loom_reader_refill(r, want);
}

/* The slow path of loom_reader_fill_err. */
ssize_t loom_reader_refill_err(struct loom_reader *r, size_t want, const char *name,
			       struct loom_err *err);

/* loom_reader_fill, its error in err: "cannot read 'NAME': REASON"
 * (LOOM_EIO) or "out of memory" (LOOM_ENOMEM). */
static inline ssize_t loom_reader_fill_err(struct loom_reader *r, size_t want, const char *name,
					   struct loom_err *err)
{
	if (r->end - r->start >= want)
		return (ssize_t)(r->end - r->start);
	return loom_reader_refill_err(r, want, name, err);
}

#endif
