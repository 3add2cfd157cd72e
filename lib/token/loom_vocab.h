/*
 * loom_vocab.h - byte-level BPE vocabularies: GPT-2 encoder.json + vocab.bpe
 * and tiktoken .tiktoken rank files; GPT-2's bytes_to_unicode table.
 *
 * Purpose: load and validate a vocabulary into the tables the encoder
 * (loom_bpe.h) needs: id -> bytes, bytes -> id (whole-piece lookup), and
 * (left id, right id) -> (merge rank, merged id).
 *
 *  - GPT-2 format: encoder.json maps token strings to ids, each byte of a
 *    token printed as one character by bytes_to_unicode below; vocab.bpe
 *    is an optional "#version..." first line, then one merge "A B" per
 *    line in rank order (rank 0 first).  Both parts and their concatenation
 *    must be tokens.  Tokens that are neither single bytes nor the result
 *    of a merge are the special tokens (GPT-2: <|endoftext|> = 50256).  A
 *    key with characters outside the byte alphabet is accepted verbatim
 *    only when it looks like a special token (<...> or [...]).  Single-byte
 *    tokens may be missing, as in the vocab.json HuggingFace's trainer
 *    saves (n_missing_bytes, as for tokenizer.json below).
 *    encoder.json is parsed by a fast path for the plain {"token": id}
 *    shape (about 4x faster than jansson on GPT-2's 50k entries); anything
 *    else goes through jansson, which also words the JSON errors.
 *  - HuggingFace tokenizer.json of a byte-level BPE (loom-bpe train's
 *    own, HF's ByteLevelBPETokenizer and GPT-2's): model type BPE with
 *    model.vocab (GPT-2 printed tokens -> ids) and model.merges (rank
 *    order, each "A B" or ["A", "B"]), a ByteLevel pre-tokenizer
 *    (add_prefix_space false, use_regex true), a ByteLevel (or no)
 *    decoder, no normalizer; added_tokens not in model.vocab under the
 *    same id are added as special tokens with their text verbatim.  The
 *    ids are the file's, so encoding gives HF's ids.  HF's trainer keeps
 *    only the bytes it saw: single-byte tokens may be missing
 *    (n_missing_bytes; byte_id[b] is then LOOM_VOCAB_NONE and encoding a
 *    text with such a byte fails, naming it and its offset).  A ByteLevel
 *    post-processor (offsets only) is accepted.  Anything else that
 *    changes the pieces, the text or the ids (another pre-tokenizer, a
 *    normalizer, subword affixes, a post-processor that adds tokens, BPE
 *    dropout, ignore_merges, truncation, padding, an added token with
 *    lstrip/rstrip/single_word) is refused with a message naming it.
 *    One pass reads model.vocab and model.merges straight into the
 *    loader's arrays and the small rest through jansson (a malformed file
 *    is re-read as a whole DOM, which words the error; a truncated one is
 *    named without it).
 *  - tiktoken format: lines "BASE64 RANK"; the id of a token is its rank and
 *    a pair of tokens merges when its concatenation is a token, the lowest
 *    rank first (tiktoken's rule).  One special token <|endoftext|> is added
 *    with id max rank + 1 (r50k_base's layout).
 *
 * Validation (each failure is one message naming the file and the entry,
 * LOOM_EFORMAT / LOOM_ETRUNC): not JSON or truncated JSON (line, column),
 * a value that is not an id in [0, 2^24), duplicate ids, duplicate keys,
 * a character outside the byte alphabet, a missing single-byte token (a
 * tiktoken file),
 * a merge line that is not "A B", a merge part or result that is not in
 * the vocabulary, a duplicate merge, a vocab.bpe whose last line has no
 * newline (truncated), bad base64, duplicate ranks.
 *
 * Ownership: loom_vocab_new/_free.  Thread-safety: unlike the default
 * (loom_common.h), a loaded vocabulary is immutable and may be shared by
 * any number of threads (loom_bpe objects); loading is one thread's.
 * Errors: 0 or a negative LOOM_E* code, message in loom_vocab_error().
 */
#ifndef LOOM_VOCAB_H
#define LOOM_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

/* GPT-2's bytes_to_unicode: the code point that prints byte b. */
extern const uint16_t loom_gpt2_byte_to_unicode[256];
/* Its inverse: the byte printed as code point cp, or -1. */
int loom_gpt2_unicode_to_byte(uint32_t cp);
/* Print bytes b[0..n) GPT-2 style as UTF-8 into out (room for 2*n bytes,
 * no NUL added); returns the number of bytes written. */
size_t loom_gpt2_bytes_to_str(const uint8_t *b, size_t n, char *out);
/* Parse a GPT-2 printed token s[0..n) (UTF-8) back to bytes into out (room
 * for n bytes); returns the byte count, or LOOM_EFORMAT if s is not valid
 * UTF-8 or a character is outside the byte alphabet (*bad = offset of it
 * in s). */
long loom_gpt2_str_to_bytes(const char *s, size_t n, uint8_t *out, size_t *bad);

#define LOOM_VOCAB_NONE UINT32_MAX
#define LOOM_VOCAB_MAX_ID ((1u << 24) - 1)

/* Pair table slot (internal to loom_vocab.c / loom_bpe.c). */
struct loom_vocab_pair {
	uint64_t key;       /* (left << 32 | right) + 1; 0 = empty slot */
	uint32_t rank;
	uint32_t id;
};

struct loom_vocab {
	uint32_t n_ids;         /* max id + 1 (ids may have holes) */
	uint32_t n_tokens;      /* ids that are tokens */
	uint64_t *off;          /* n_ids + 1: token i = bytes[off[i]..off[i+1]) */
	uint8_t *bytes;
	uint8_t *present;       /* n_ids: 1 if id is a token, 2 if special */
	uint32_t byte_id[256];  /* id of each single-byte token, LOOM_VOCAB_NONE
	                           for a byte without one (tokenizer.json only) */
	uint32_t n_missing_bytes; /* bytes without a token */
	uint64_t *tok_slot;     /* bytes -> id hash (open addressing):
	                           hash tag << 32 | (id + 1), 0 = empty */
	uint32_t tok_mask;
	struct loom_vocab_pair *pair;
	uint32_t pair_mask;
	uint32_t n_merges;
	uint32_t *specials;     /* ids of special tokens, in id order */
	uint32_t n_specials;
	uint32_t eot;           /* id of <|endoftext|>, or LOOM_VOCAB_NONE */
	char *name;             /* what was loaded, for messages */
	struct loom_err err;
};

struct loom_vocab *loom_vocab_new(void);

/* For the tokenizer.json readers (jansson's json_t): the "type" of member
 * `key` of root, "null" when it is null or absent, "?" when it has none. */
struct json_t;
const char *loom_hf_type(struct json_t *root, const char *key);
/* 0, or LOOM_EFORMAT with a message naming `name` in *err when root sets
 * "truncation" or "padding" (loom neither truncates nor pads the ids). */
int loom_hf_no_cut(struct json_t *root, const char *name, struct loom_err *err);
/* A boolean member `key` of o: dflt when absent or null, -2 when it is
 * of another JSON type (a string "true" is not taken for true). */
int loom_hf_bool(struct json_t *o, const char *key, int dflt);
void loom_vocab_free(struct loom_vocab *v);
const char *loom_vocab_error(const struct loom_vocab *v);

/* Load GPT-2 encoder.json + vocab.bpe from files. */
int loom_vocab_load_gpt2(struct loom_vocab *v, const char *encoder_json,
			 const char *vocab_bpe);
/* The same from memory (names are used in messages only). */
int loom_vocab_load_gpt2_mem(struct loom_vocab *v, const char *enc, size_t enc_len,
			     const char *enc_name, const char *merges, size_t merges_len,
			     const char *merges_name);
/* Load a tiktoken rank file (file / memory). */
int loom_vocab_load_tiktoken(struct loom_vocab *v, const char *path);
int loom_vocab_load_tiktoken_mem(struct loom_vocab *v, const char *buf, size_t len,
				 const char *name);
/* Load a HuggingFace tokenizer.json (file / memory). */
int loom_vocab_load_hf(struct loom_vocab *v, const char *path);
int loom_vocab_load_hf_mem(struct loom_vocab *v, const char *buf, size_t len,
			   const char *name);
/* The tools' --vocab: "gpt2" (share/vocab/gpt2), a directory holding
 * encoder.json + vocab.bpe, "ENCODER.json,VOCAB.bpe", a FILE.json
 * (HuggingFace tokenizer.json) or a .tiktoken file. */
int loom_vocab_load_spec(struct loom_vocab *v, const char *spec);

/* A loaded vocabulary as GPT-2's two files (HuggingFace's vocab.json and
 * merges.txt): {"token": id} in id order, every token (specials and
 * added tokens too: "my special" is "myĠspecial") printed through
 * bytes_to_unicode, and "#version: 0.2" then one merge
 * "A B" per line in rank order.  Loading them gives the same ids, tokens,
 * merges and special tokens.  Malloc'd, NUL-terminated (lengths without the NUL).  For
 * vocabularies loaded from GPT-2 files (a tiktoken file's merges have no
 * order of their own: LOOM_EINVAL).  lib/token/loom_vocab_render.c. */
int loom_vocab_render_gpt2(struct loom_vocab *v, char **vocab_json, size_t *json_len,
			   char **merges, size_t *merges_len);

/* Id of the token with bytes s[0..n), or LOOM_VOCAB_NONE. */
uint32_t loom_vocab_lookup(const struct loom_vocab *v, const uint8_t *s, size_t n);
/* Bytes of token id (NULL if id is not a token). */
const uint8_t *loom_vocab_token(const struct loom_vocab *v, uint32_t id, size_t *len);
/* Merge of the pair (a, b): returns its rank and stores the merged id, or
 * returns LOOM_VOCAB_NONE. */
static inline uint32_t loom_vocab_merge(const struct loom_vocab *v, uint32_t a,
					uint32_t b, uint32_t *id)
{
	uint64_t key = ((uint64_t)a << 32 | b) + 1;
	uint32_t h = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & v->pair_mask;
	for (;;) {
		const struct loom_vocab_pair *p = &v->pair[h];
		if (p->key == key) {
			*id = p->id;
			return p->rank;
		}
		if (!p->key)
			return LOOM_VOCAB_NONE;
		h = (h + 1) & v->pair_mask;
	}
}

#endif
