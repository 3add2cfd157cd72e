/*
 * loom_decode.h - token ids back to text, byte-level BPE or WordPiece, a
 * document at a time: loom-bpe decode's loop.
 *
 * Purpose: the ids of a stream (a chunk at a time) are decoded by the
 * tokenizer given (loom_bpe_decode or loom_wordpiece_decode).  With a
 * separator (sep >= 0), each end-of-text id (eos) ends a document and is
 * written as that one byte ('\n', NUL) instead of its text, and a
 * WordPiece document starts without a space; without one (sep < 0) the
 * end-of-text id is decoded as any other.
 *
 * Ownership: the tokenizers are the caller's; the text goes to the
 * caller's growing buffer (*buf malloc'd, *len used, *cap allocated).
 * Errors: 0 or negative LOOM_E*: an id past the vocabulary, named with its
 * position in the stream (first + index), or LOOM_ENOMEM; the message in
 * *err.  Thread-safety: the default (loom_common.h); the tokenizers' state
 * (WordPiece's text in progress) changes.
 */
#ifndef LOOM_DECODE_H
#define LOOM_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "loom_bpe.h"
#include "loom_common.h"
#include "loom_wordpiece.h"

struct loom_decode_opts {
	struct loom_bpe *bpe;       /* one of the two */
	struct loom_wordpiece *wp;
	uint32_t eos;               /* the end-of-text id */
	int sep;                    /* its byte, or < 0: decode it as text */
	int skip_special;           /* WordPiece: drop [PAD] [UNK] [CLS] [SEP] [MASK] */
};

/* Append the text of ids[0..n), the first at position `first`. */
int loom_decode_docs(const struct loom_decode_opts *o, const uint32_t *ids, size_t n,
		     uint64_t first, uint8_t **buf, size_t *len, size_t *cap, struct loom_err *err);

#endif
