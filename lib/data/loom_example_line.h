/*
 * loom_example_line.h - one tf.train.Example as one line of text, as
 * loom-cat prints it.
 *
 * Purpose: render a TFRecord payload as a line ending in '\n':
 *   ids   the values of one int64 feature, "a b c" (any other feature and
 *         any other kind of Example around it are ignored)
 *   JSON  {"key":[a,b,c]} when the Example is exactly one int64 feature
 *         (encoded as loom_example_encode_i64 encodes it: the fast path),
 *         else loom_example_to_json's object of every feature.
 * The line lives in buffers the object keeps and grows, so a stream of
 * records costs no allocation once the largest has been seen.
 *
 * Ownership: loom_example_line_init/_release; a line returned is valid
 * until the next call.  Errors: 0 or negative LOOM_E* (LOOM_EFORMAT: not
 * an Example, or no such int64 feature for ids; LOOM_ENOMEM), message in
 * l->err without the file or record (callers prefix them).
 * Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_EXAMPLE_LINE_H
#define LOOM_EXAMPLE_LINE_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

struct loom_example_line {
	int64_t *vals;          /* the decoded values */
	size_t vcap;
	uint8_t *renc;          /* their fast-path encoding, to compare */
	size_t rcap;
	char *buf;              /* the line */
	size_t cap;
	struct loom_err err;
};

void loom_example_line_init(struct loom_example_line *l);
void loom_example_line_release(struct loom_example_line *l);

/* Render payload p[0..len): the int64 feature `key` as bare ids
 * (ids_only), else as JSON.  *line, *n: the line, '\n' included. */
int loom_example_line(struct loom_example_line *l, const uint8_t *p, size_t len,
		      const char *key, int ids_only, const char **line, size_t *n);

#endif
