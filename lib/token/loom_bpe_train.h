/*
 * loom_bpe_train.h - learn byte-level BPE merges (GPT-2 style) from text.
 *
 * Purpose: the library behind `loom-bpe train`.  Two phases:
 *
 * 1. Counting.  Documents are fed as bytes (in as many pieces as the caller
 *    likes), split into pre-tokens by the GPT-2 pre-tokenizer
 *    (loom_pretok.h) exactly as encoding does, and the distinct pre-tokens
 *    are counted in a hash table.  Memory is bounded by the number (and
 *    size) of distinct pre-tokens plus one bounded document buffer: a long
 *    document is cut at points where loom_pretok_safe_cut() guarantees the
 *    same pieces, so even a single 10 GB "document" streams.
 *
 * 2. Learning (loom_bpe_trainer_learn).  Every distinct pre-token becomes a
 *    word of byte symbols with its count.  Adjacent symbol pairs are counted
 *    (weighted by word count; every adjacent position counts, so "aaa" gives
 *    the pair (a,a) twice, as HuggingFace's BpeTrainer counts), and the best
 *    pair is merged into a new token, repeatedly.  The data structures are
 *    those of HuggingFace tokenizers' BpeTrainer: a pair -> count table, a
 *    pair -> words occurrence index, and a max-heap of (count, pair) with
 *    lazy deletion (a popped entry whose count is stale is pushed back with
 *    the current count).  A merge only visits the words that contain the
 *    pair and updates the counts of the neighbouring pairs incrementally,
 *    so the whole run costs about the total size of the affected words, not
 *    merges x corpus.  Pre-tokens longer than 256 bytes keep a linked list
 *    of symbols and per-position occurrences instead of being rescanned,
 *    so one huge pre-token (a 100 MB line of letters) is not quadratic.
 *
 * Token ids: ids 0..255 are the 256 bytes in the order of GPT-2's
 * bytes_to_unicode table (printable bytes 33..126, 161..172, 174..255, then
 * the rest in increasing order; this is also the order of HuggingFace's
 * ByteLevel alphabet sorted by character), so id 0 is "!" as in GPT-2.
 * Merged tokens get 256, 257, ... in the order they are learned (merge rank
 * r makes token 256 + r, unless its byte string already is a token, then
 * that id is reused and no id is spent, as HuggingFace does).  Special
 * tokens get the ids after the merged tokens, in the order given (GPT-2's
 * <|endoftext|> = 50256 is exactly this layout); a special whose text
 * already is a token's byte string reuses that id.  Specials are not
 * recognised inside the training text: there they are plain text.
 *
 * Tie rule (deterministic, the same as HuggingFace's BpeTrainer): the pair
 * with the highest count wins; among equal counts the pair with the
 * smaller left token id, then the smaller right token id.  Results do not
 * depend on hash-table order, input piece boundaries or the platform.
 *
 * Stopping: when the vocabulary (256 + merged tokens + specials) reaches
 * vocab_size, or when the best remaining pair occurs fewer than
 * min_frequency times (count 0 pairs are never merged).
 *
 * Output (loom_bpe_trainer_write): DIR/encoder.json (token -> id, bytes
 * printed through bytes_to_unicode, specials verbatim), DIR/vocab.bpe
 * ("#version: 0.2" then one merge "A B" per line in rank order) and
 * DIR/tokenizer.json (HuggingFace: model BPE with vocab and merges,
 * ByteLevel pre-tokenizer add_prefix_space=false use_regex=true, ByteLevel
 * decoder and post-processor, specials as added_tokens).  Each file is
 * written under a temporary name and all three are renamed only when all
 * three were written.  DIR is created with its missing parents (mkdir -p);
 * DIR itself, when the call created it, is removed again on
 * failure.
 *
 * Ownership: the trainer owns everything it allocates; results returned by
 * the accessors stay valid until the trainer is freed.
 * Errors: 0 or a negative LOOM_E* code; the message is kept on the trainer
 * (loom_bpe_trainer_error).  Thread-safety: the default (loom_common.h):
 * one trainer per thread.
 */
#ifndef LOOM_BPE_TRAIN_H
#define LOOM_BPE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

struct loom_bpe_trainer;

struct loom_bpe_train_opts {
	size_t vocab_size;          /* >= 256 + n_specials */
	uint64_t min_frequency;     /* 0 or 1: merge any pair that occurs */
	const char *const *specials;/* NUL-terminated UTF-8 strings, may be NULL */
	size_t n_specials;
	/* Called now and then during learning (may be NULL). */
	void (*progress)(void *ctx, size_t merges_done, size_t merges_target);
	void *progress_ctx;
};

struct loom_bpe_train_stats {
	uint64_t docs;          /* documents ended with loom_bpe_trainer_end_doc */
	uint64_t bytes;         /* bytes fed */
	uint64_t pretokens;     /* pre-tokens counted */
	uint64_t distinct;      /* distinct pre-tokens */
	uint64_t merges;        /* merges learned */
	uint64_t vocab;         /* final vocabulary size (incl. specials) */
};

struct loom_bpe_trainer *loom_bpe_trainer_new(void);
void loom_bpe_trainer_free(struct loom_bpe_trainer *t);
const char *loom_bpe_trainer_error(const struct loom_bpe_trainer *t);

/* Counting: append n bytes to the current document. */
int loom_bpe_trainer_feed(struct loom_bpe_trainer *t, const void *buf, size_t n);
/* The current document ends (an empty document is still counted). */
int loom_bpe_trainer_end_doc(struct loom_bpe_trainer *t);
/* feed + end_doc, without copying when no document is pending. */
int loom_bpe_trainer_add_doc(struct loom_bpe_trainer *t, const void *buf, size_t n);
/* A stream of documents, a chunk at a time: each byte `sep` ends one (sep
 * < 0: the whole stream is one); an empty one between two separators is
 * not counted.  *open (0 before the first chunk) says a document is fed
 * but not ended: at the end of the stream, end it with end_doc. */
int loom_bpe_trainer_feed_docs(struct loom_bpe_trainer *t, const void *buf, size_t n, int sep,
			       int *open);

/* Pre-tokens longer than `bytes` (default 256) are merged through
 * per-position occurrence lists instead of being rescanned at each merge
 * that touches them (same result; for tests and tuning). */
void loom_bpe_trainer_set_long_word(struct loom_bpe_trainer *t, size_t bytes);

/* Validate options without learning (the checks learn does first). */
int loom_bpe_trainer_check(struct loom_bpe_trainer *t, const struct loom_bpe_train_opts *o);

/* Learning; call once, after all documents.  LOOM_EINVAL for a bad option
 * (vocab_size too small, empty/duplicate/invalid-UTF-8 special) or when
 * nothing was fed (no pre-tokens at all). */
int loom_bpe_trainer_learn(struct loom_bpe_trainer *t, const struct loom_bpe_train_opts *o);

void loom_bpe_trainer_stats(const struct loom_bpe_trainer *t, struct loom_bpe_train_stats *s);
/* loom-bpe train's summary line (no newline) into buf[n]: the counts of
 * s, the seconds in all, counting and learning, and the peak memory. */
void loom_bpe_train_summary(const struct loom_bpe_train_stats *s, double total, double count,
			    double learn, double peak_bytes, char *buf, size_t n);

/* Results after learn.  Token `id` (< vocab) as raw bytes; NULL if out of
 * range.  Merge `rank` (< merges) as (left id, right id, result id). */
const uint8_t *loom_bpe_trainer_token(const struct loom_bpe_trainer *t, size_t id,
				      size_t *len);
int loom_bpe_trainer_merge(const struct loom_bpe_trainer *t, size_t rank, uint32_t *left,
			   uint32_t *right, uint32_t *result);

/* The three files in memory (malloc'd, NUL-terminated; len without the
 * NUL; the JSON files lack the final newline write adds): data[0] =
 * encoder.json, data[1] = vocab.bpe, data[2] = tokenizer.json. */
int loom_bpe_trainer_render(struct loom_bpe_trainer *t, char *data[3], size_t len[3]);

/* Write DIR/encoder.json, DIR/vocab.bpe, DIR/tokenizer.json (see above). */
int loom_bpe_trainer_write(struct loom_bpe_trainer *t, const char *dir);

#endif
