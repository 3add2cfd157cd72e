/*
 * loom_records.h - the records of a list of TFRecord files, each handed to
 * a function: all of them in stream order, or a range numbered across the
 * files, read through their indexes (loom-cat's two ways of reading).
 *
 * Purpose: streaming (loom_tfr_reader) reads any file or stdin ("-"),
 * checking every CRC; a range [a, b) counts records from 0 over the files
 * in order, opens each file with its FILE.index (loom_tfr_file) and reads
 * only the records of the range, stopping once past b.  Each record goes
 * to fn with its file, its number in that file, its byte offset and its
 * payload; after each file read to the end (or to the range's end), done
 * says how many records it has and which were read.
 *
 * Ownership: the payload passed to fn is valid during the call only.
 * Errors: 0, or the first negative code: fn's own (it has said what went
 * wrong; err.msg is then ""), or the reader's (LOOM_EIO, LOOM_EFORMAT...,
 * one line naming the file, record and offset in *err); LOOM_EINVAL only
 * for stdin in a range (it has no index), reached before the range ends.  Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_RECORDS_H
#define LOOM_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

struct loom_records_fns {
	int (*fn)(void *ctx, const char *path, uint64_t idx, uint64_t off, const uint8_t *p,
		  size_t len);
	/* a file done: its records (streamed: all read, lo = 0, hi = count) */
	void (*done)(void *ctx, const char *path, uint64_t count, uint64_t lo, uint64_t hi);
	void *ctx;
};

/* Every record of files[0..n), streamed. */
int loom_records_stream(char *const *files, int n, const struct loom_records_fns *f,
			struct loom_err *err);
/* Records a (included) to b (excluded) numbered across files[0..n). */
int loom_records_range(char *const *files, int n, uint64_t a, uint64_t b,
		       const struct loom_records_fns *f, struct loom_err *err);

#endif
