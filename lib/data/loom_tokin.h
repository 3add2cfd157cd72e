/*
 * loom_tokin.h - read a token stream ("-" = stdin) as u16 / u32
 * little-endian binary or whitespace-separated decimal text (the input of
 * loom-shard and of loom-bpe decode; formats: loom-shard(1)).
 *
 * Ownership: loom_tokin_open() returns an object freed with
 * loom_tokin_free() (accepts NULL); the path is copied.  Errors:
 * loom_tokin_open() returns NULL with the message in *err (the file cannot
 * be opened: LOOM_EIO; out of memory: LOOM_ENOMEM); loom_tokin_read()
 * returns a negative LOOM_E* with the message, naming the file and the
 * line (text) or byte offset (binary), from loom_tokin_error().
 * Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_TOKIN_H
#define LOOM_TOKIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loom_common.h"

enum loom_tokfmt { LOOM_TOK_U16, LOOM_TOK_U32, LOOM_TOK_TEXT };

/* "u16", "u32", "text" -> format; LOOM_EINVAL otherwise. */
int loom_tokfmt_parse(const char *s, enum loom_tokfmt *fmt);
const char *loom_tokfmt_name(enum loom_tokfmt fmt);

struct loom_tokin;

struct loom_tokin *loom_tokin_open(const char *path, enum loom_tokfmt fmt,
				   struct loom_err *err);
/* Up to cap tokens into out: returns the count (> 0), 0 at the end, or an
 * error (bad text token, token >= 2^32, binary input cut mid-token). */
ssize_t loom_tokin_read(struct loom_tokin *t, uint32_t *out, size_t cap);
/* Bytes consumed so far, and the input's size (0 if unknown, e.g. a pipe). */
uint64_t loom_tokin_bytes(const struct loom_tokin *t);
uint64_t loom_tokin_size(const struct loom_tokin *t);
void loom_tokin_free(struct loom_tokin *t);
const char *loom_tokin_error(const struct loom_tokin *t);

#endif
