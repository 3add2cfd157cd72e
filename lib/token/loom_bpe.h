/*
 * loom_bpe.h - byte-level BPE encoder and decoder, exactly GPT-2's.
 *
 * Purpose: text bytes -> token ids (GPT-2 pre-tokenizer, loom_pretok.h,
 * then BPE of each piece by merge rank) and ids -> bytes.
 *
 * Encoding a piece: a piece that is one token is looked up whole (its
 * one-token result is verified once per token by running the merges, so
 * the result is exact for any vocabulary); short pieces merge by a linear
 * scan for the lowest-ranked adjacent pair (ties: leftmost), long pieces
 * (> LOOM_BPE_SHORT bytes) with a binary heap of (rank, position) over a
 * linked list of symbols, O(n log n), so a 1 MB run of one character is
 * never quadratic.  The merge order (lowest rank first, leftmost among
 * equal ranks, one pair at a time) gives GPT-2's result for vocabularies
 * whose merges only use earlier tokens (every trained vocabulary), and is
 * HuggingFace tokenizers' order in general.  A small direct-mapped cache
 * remembers the ids of recent multi-token pieces.
 *
 * Special tokens: with allow_special, occurrences of the vocabulary's
 * special tokens in the text (leftmost, longest first) become their ids;
 * otherwise they are plain text.
 *
 * Bytes without a token: a vocabulary read from a tokenizer.json may lack
 * some single-byte tokens; text holding such a byte is an error naming the
 * byte and its offset in the text passed in (LOOM_EFORMAT).
 *
 * Decoding: concatenates the tokens' bytes (special tokens give their
 * text); an id that is not in the vocabulary is an error naming the id and
 * its position.  encode then decode gives back the input bytes exactly,
 * also for invalid UTF-8 (see loom_pretok.h).
 *
 * Ownership and thread-safety: one struct loom_bpe per thread (the
 * default, loom_common.h); it borrows the vocabulary, which must outlive
 * it and may be shared by any number of them (loom_vocab.h).  Memory: about 1.1 MB plus
 * 28 bytes per byte of the longest piece (> LOOM_BPE_SHORT) encoded so far.
 * Errors: 0 or a negative LOOM_E* code; message in loom_bpe_error().
 */
#ifndef LOOM_BPE_H
#define LOOM_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"
#include "loom_vocab.h"

#define LOOM_BPE_SHORT 64

/* A growable array of ids. */
struct loom_ids {
	uint32_t *v;
	size_t n, cap;
};
int loom_ids_reserve(struct loom_ids *a, size_t extra);
void loom_ids_release(struct loom_ids *a);

struct loom_bpe;

struct loom_bpe *loom_bpe_new(const struct loom_vocab *v);
void loom_bpe_free(struct loom_bpe *e);
const char *loom_bpe_error(const struct loom_bpe *e);

/* Append the ids of text s[0..n) to *out.  The text is one whole
 * document (or a part of one cut with loom_pretok_safe_cut). */
int loom_bpe_encode(struct loom_bpe *e, const uint8_t *s, size_t n, int allow_special,
		    struct loom_ids *out);
/* Append the ids of one pre-token piece (no pre-tokenization). */
int loom_bpe_encode_piece(struct loom_bpe *e, const uint8_t *s, size_t n,
			  struct loom_ids *out);

/* Append the bytes of ids[0..n) to the buffer *buf (malloc'd, *len used,
 * *cap allocated; all may start 0/NULL).  `first` is the position of
 * ids[0] in the whole stream, for the message of an unknown id. */
int loom_bpe_decode(struct loom_bpe *e, const uint32_t *ids, size_t n, uint64_t first,
		    uint8_t **buf, size_t *len, size_t *cap);

/* Counters since loom_bpe_new: pieces, pieces found whole, cache hits, and
 * steps of the long-piece merger (symbols set up, heap entries pushed and
 * popped: each costs O(log n), so a linear count means O(n log n) work). */
void loom_bpe_stats(const struct loom_bpe *e, uint64_t *pieces, uint64_t *whole,
		    uint64_t *cached, uint64_t *steps);

#endif
