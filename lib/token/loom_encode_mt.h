/*
 * loom_encode_mt.h - text documents -> token ids, on one thread or several,
 * written in input order (the engine of `loom-bpe encode`, as zstd keeps
 * its multi-threaded compressor, zstdmt_compress.c, in its library).
 *
 * Purpose: read files ("-" = stdin) one after the other, cut them into
 * chunks of about 1 MiB of whole documents, encode each chunk (byte-level
 * BPE with loom_bpe, or WordPiece with loom_wordpiece), drop the documents
 * shorter than min_tokens, append eos after each kept one, format the ids
 * (u16 / u32 little-endian, or text: one document a line) and hand them to
 * the caller's write function, in input order whatever the thread count:
 * the output is the same for any count.  Documents: lines (one a line),
 * nul (NUL-separated), jsonl (one JSON object a line, the text in `field`)
 * or whole (each file is one document).  A document longer than a chunk
 * is cut where loom_pretok_safe_cut (WordPiece: loom_wordpiece_safe_cut)
 * allows, and never inside a special token when allow_special; its parts
 * are encoded separately and joined in the output.  With threads > 1, the
 * caller's thread reads and writes and `threads` workers encode, each with
 * an encoder of its own, over 3 x threads chunk slots (each holds a chunk's
 * text and its formatted ids: a few MiB).
 *
 * Ownership: loom_encode_mt_new() returns an object freed with
 * loom_encode_mt_free() (accepts NULL); it keeps pointers to the
 * vocabulary (or WordPiece object) and the field name, which must outlive
 * it, and copies nothing else.  Errors: loom_encode_mt_new() returns NULL
 * with the message in *err (bad options: LOOM_EINVAL; LOOM_ENOMEM);
 * loom_encode_mt_run() returns 0 or a negative LOOM_E* with the message
 * from loom_encode_mt_error(): a file that cannot be opened or read
 * (LOOM_EIO, "cannot open 'F': reason"), a text the tokenizer refuses or a
 * jsonl line that is not an object with a string `field` (LOOM_EFORMAT or
 * the tokenizer's code, "F: line N: reason"), LOOM_ENOMEM, or the code the
 * write function returned ("cannot write the ids": its own message is the
 * caller's).  After an error, what was written stops at a chunk boundary.
 * Thread-safety: the default (loom_common.h); the workers are the
 * object's own, started and joined within loom_encode_mt_run(); the
 * callbacks are called on the caller's thread only.
 */
#ifndef LOOM_ENCODE_MT_H
#define LOOM_ENCODE_MT_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"
#include "loom_tokin.h"
#include "loom_vocab.h"
#include "loom_wordpiece.h"

/* How the input is cut into documents. */
enum loom_docs { LOOM_DOCS_LINES, LOOM_DOCS_NUL, LOOM_DOCS_JSONL, LOOM_DOCS_WHOLE };

struct loom_encode_mt_stats {
	uint64_t docs;      /* documents written */
	uint64_t dropped;   /* non-empty documents under min_tokens */
	uint64_t tokens;    /* ids written, eos included */
	uint64_t bytes;     /* input bytes read */
};

struct loom_encode_mt_opts {
	const struct loom_vocab *vocab;     /* byte-level BPE, or ... */
	const struct loom_wordpiece *wp;    /* ... WordPiece (each worker a copy);
					       exactly one is set */
	enum loom_docs docs;
	enum loom_tokfmt fmt;               /* the output's format */
	int allow_special;                  /* BPE: the vocabulary's special tokens
					       in the text are tokens */
	uint32_t eos;                       /* appended after each document
					       (LOOM_VOCAB_NONE: nothing) */
	uint64_t min_tokens;                /* shorter documents are dropped
					       (empty ones always are) */
	const char *field;                  /* jsonl: the text's field (NULL: "text") */
	int threads;                        /* 1: all on the caller's thread;
					       2 .. 256: encoding workers */
	/* The ids, in input order (n > 0): returns 0, or a negative LOOM_E*
	 * that stops the run with that code. */
	int (*write)(void *ctx, const void *p, size_t n);
	/* Each input file as it is opened (its name, "(stdin)" for "-"), and
	 * the counters after each chunk is written (either may be NULL). */
	void (*on_file)(void *ctx, const char *name);
	void (*progress)(void *ctx, const struct loom_encode_mt_stats *st);
	void *ctx;
};

struct loom_encode_mt;

struct loom_encode_mt *loom_encode_mt_new(const struct loom_encode_mt_opts *o,
					  struct loom_err *err);
/* Encode files[0 .. nfiles) as one stream (a document never spans two
 * files) through o->write; once per object. */
int loom_encode_mt_run(struct loom_encode_mt *m, const char *const *files, size_t nfiles);
void loom_encode_mt_get_stats(const struct loom_encode_mt *m, struct loom_encode_mt_stats *st);
const char *loom_encode_mt_error(const struct loom_encode_mt *m);
void loom_encode_mt_free(struct loom_encode_mt *m);

#endif
