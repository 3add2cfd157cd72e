/*
 * loom_wordpiece.h - BERT's WordPiece tokenizer, exactly HuggingFace's
 * BertTokenizerFast (BertNormalizer + BertPreTokenizer + WordPiece).
 *
 * Purpose: text bytes -> token ids (with the byte span of the input that
 * each token came from) and ids -> text, for BERT vocabularies (vocab.txt:
 * one token a line, line number = id).
 *
 * Encoding, in HuggingFace's order, one character at a time:
 *  1. clean-up (clean_text): NUL, U+FFFD and control characters (general
 *     category Cc Cf Co Cs, but TAB LF CR) are removed; White_Space
 *     characters become spaces;
 *  2. CJK ideographs (chinese_chars) become pieces of their own;
 *  3. accents stripped (strip_accents, default: as lowercase): canonical
 *     decomposition (NFD), then marks of category Mn removed;
 *  4. lower-cased (lowercase): Unicode's full lower-case mapping of each
 *     character (no context: final sigma is not special);
 *  5. pre-tokenized: split at White_Space, and every punctuation character
 *     (category P*, or ASCII punctuation such as $ + < = > ^ ` | ~) is a
 *     piece of its own;
 *  6. each piece (a "word") of more than max_chars characters is [UNK];
 *     else greedy longest-match-first from the left, later parts looked up
 *     with the "##" prefix; a word with any part not in the vocabulary is
 *     one [UNK].
 * Tables: Unicode 15.0 (lib/token/gen_wordpiece_tab.py).  One known
 * simplification: NFD's canonical reordering of combining marks is not
 * done (marks that survive the Mn removal keep their order).
 *
 * Invalid UTF-8: each byte that does not start a well-formed sequence is
 * read as U+FFFD (as a decoder substituting it would), which clean-up
 * removes; without clean-up it is part of its word, as "\xEF\xBF\xBD".
 *
 * Offsets: with offsets requested, token i came from input bytes
 * [start[i], end[i]): from the first byte of the first character it
 * holds to the last byte of its last one (a character that expands to
 * several, as U+0130 or a Hangul syllable, belongs whole to each token
 * holding a part of it).  An [UNK] covers its whole word.
 *
 * Decoding (HuggingFace's WordPiece decoder): tokens are joined with a
 * space, a "##" part is glued to the token before it without its prefix,
 * and (cleanup) " ." " ?" " !" " ," and the English contractions lose
 * their space; special tokens ([PAD] [UNK] [CLS] [SEP] [MASK]) are
 * dropped with skip_special.
 *
 * Vocabulary (vocab.txt): a token a line, trailing white space removed, a
 * token appearing twice takes the later line's id (as HuggingFace);
 * "[UNK]" must be present.  Failures name the file and line
 * (LOOM_EFORMAT): empty file, invalid UTF-8, no [UNK], more than 2^24
 * lines.
 *
 * Ownership: loom_wordpiece_new/_free.  The loaded vocabulary is
 * immutable; encode/decode keep scratch space in the object, so one
 * object per thread (loom_wordpiece_dup shares the vocabulary).
 * Errors: 0 or a negative LOOM_E* code, message in loom_wordpiece_error().
 */
#ifndef LOOM_WORDPIECE_H
#define LOOM_WORDPIECE_H

#include <stddef.h>
#include <stdint.h>

#include "loom_bpe.h"
#include "loom_common.h"

struct loom_wordpiece_opts {
	int lowercase;       /* 1: lower-case (bert-base-uncased); 0: cased */
	int strip_accents;   /* -1: as lowercase; 0 no; 1 yes */
	int clean_text;      /* 1 */
	int chinese_chars;   /* 1 */
	uint32_t max_chars;  /* 100: longer words are [UNK] */
};
/* bert-base-uncased's settings. */
void loom_wordpiece_opts_default(struct loom_wordpiece_opts *o);

/* Byte spans of the tokens in the input: token i is [start[i], end[i]). */
struct loom_offsets {
	uint64_t *start, *end;
	size_t n, cap;
};
void loom_offsets_release(struct loom_offsets *o);

struct loom_wordpiece;

struct loom_wordpiece *loom_wordpiece_new(void);
void loom_wordpiece_free(struct loom_wordpiece *w);
const char *loom_wordpiece_error(const struct loom_wordpiece *w);

/* Load vocab.txt (from a file / memory; name is for messages). */
int loom_wordpiece_load(struct loom_wordpiece *w, const char *path,
			const struct loom_wordpiece_opts *o);
int loom_wordpiece_load_mem(struct loom_wordpiece *w, const char *buf, size_t len,
			    const char *name, const struct loom_wordpiece_opts *o);
/* The vocab.txt that `spec` names: "bert-base-uncased" (shipped in
 * share/vocab/bert-base-uncased/, found by loom_share_path) or a path,
 * into out[0..n).  LOOM_EINVAL if the shipped one is nowhere or the path
 * does not fit in n bytes. */
int loom_wordpiece_vocab_path(const char *spec, char *out, size_t n);
/* Load a HuggingFace tokenizer.json whose model is WordPiece (as
 * bert-base-uncased's): model {type WordPiece, vocab {token: id} with ids
 * 0..n-1, unk_token "[UNK]", continuing_subword_prefix "##",
 * max_input_chars_per_word}, normalizer BertNormalizer (clean_text,
 * handle_chinese_chars, strip_accents (null: as lowercase), lowercase) or
 * null (none of them), pre_tokenizer BertPreTokenizer, decoder WordPiece
 * (prefix "##", cleanup true) or null.  Anything else is refused by name
 * (LOOM_EFORMAT) rather than giving other ids than HuggingFace's: another
 * model, normalizer, pre-tokenizer or decoder, another prefix or unknown
 * token, an added token that is not the vocabulary's entry of its id,
 * truncation or padding set (loom_hf_no_cut, as for BPE).
 * Added tokens are not looked for in the text, and the post-processor's
 * [CLS] ... [SEP] is not added (HuggingFace's add_special_tokens=False). */
int loom_wordpiece_load_hf(struct loom_wordpiece *w, const char *path);
int loom_wordpiece_load_hf_mem(struct loom_wordpiece *w, const char *buf, size_t len,
			       const char *name);
/* A BERT's input is [CLS] question [SEP] context [SEP] [PAD]...: 0 when
 * the vocabulary holds those three, else LOOM_EFORMAT naming the
 * vocabulary (`name`, its file) and the first one missing ("'DIR/vocab.txt'
 * lacks [SEP], which a BERT's input needs"). */
int loom_wordpiece_check_bert(struct loom_wordpiece *w, const char *name);
/* Casing: whether the normalizer lower-cases (and strips accents). */
enum loom_casing {
	LOOM_CASING_AUTO,   /* as the tokenizer's files say (below) */
	LOOM_CASING_LOWER,  /* lower-case and strip accents (bert-base-uncased) */
	LOOM_CASING_CASED,  /* keep case and accents (bert-base-cased) */
	LOOM_CASING_NONE,   /* decoding only: not decided, never refused */
};
/* The options of a tokenizer_config.json (HuggingFace's BertTokenizer):
 * do_lower_case, strip_accents (null: as lowercase), tokenize_chinese_chars,
 * each kept from *o when absent.  Returns 1 when the file says
 * do_lower_case, 0 when it does not (or does not exist: ENOENT), a
 * negative LOOM_E* code when it cannot be read or a key is mistyped. */
int loom_wordpiece_read_config(const char *path, struct loom_wordpiece_opts *o,
			       struct loom_err *err);
/* Open the WordPiece tokenizer that `spec` names and decide its casing the
 * way a HuggingFace user expects, first rule that applies:
 *  1. a tokenizer.json (FILE.json): its normalizer says; LOOM_CASING_LOWER
 *     or _CASED with it is refused (LOOM_EINVAL);
 *  2. LOOM_CASING_LOWER or _CASED: as given (as BertTokenizer's
 *     do_lower_case= argument overrides the saved one);
 *  3. a tokenizer_config.json beside the vocab.txt (a checkpoint or a
 *     HuggingFace directory) with do_lower_case: as it says (its
 *     strip_accents and tokenize_chinese_chars too);
 *  4. a bare vocab.txt: its tokens decide.  A vocabulary with tokens that
 *     hold upper-case letters A-Z (special tokens such as [CLS] apart) is
 *     cased: lower-cased text could never produce them; one without is
 *     lower-cased (bert-base-uncased's).  When the path's name says the
 *     opposite ("uncased" with upper-case tokens, "cased" without any),
 *     the two disagree and the casing must be given (LOOM_EINVAL, naming
 *     a token).
 * `spec`: "bert-base-uncased" (shipped), a directory holding vocab.txt,
 * a vocab.txt path, or a tokenizer.json.  NULL on failure, err set:
 * LOOM_EINVAL (the casing cannot be decided or given, as above), a read
 * error naming the file, LOOM_EFORMAT (a bad vocab.txt, tokenizer.json or
 * tokenizer_config.json), LOOM_ERANGE (a path too long). */
struct loom_wordpiece *loom_wordpiece_open(const char *spec, enum loom_casing casing,
					   struct loom_err *err);
/* What the tools' options (--lowercase, --cased) can do about a
 * LOOM_EINVAL of loom_wordpiece_open, to follow its message: " (--lowercase
 * or --cased)" when the casing must be given, " (drop --lowercase/--cased)"
 * when none can be, else "". */
const char *loom_wordpiece_casing_hint(const struct loom_err *err);
/* Does a --vocab spec name a WordPiece vocabulary (1) or not (0, a
 * byte-level BPE one for loom_vocab_load_spec): bert-base-uncased,
 * FILE.txt, a directory with vocab.txt and no encoder.json, or a
 * tokenizer.json that says "WordPiece" anywhere (loom_wordpiece_open then
 * checks that its model is).  LOOM_ERANGE for a path too long (the
 * message: "'SPEC...': path too long"), or the error reading the file. */
int loom_wordpiece_spec(const char *spec, struct loom_err *err);
/* After loom_wordpiece_open: the file loaded, whether it lower-cases, and
 * which rule decided ("tokenizer_config.json's do_lower_case", ...). */
const char *loom_wordpiece_path(const struct loom_wordpiece *w);
int loom_wordpiece_lowercases(const struct loom_wordpiece *w);
const char *loom_wordpiece_casing_rule(const struct loom_wordpiece *w);

/* A second object for another thread, sharing w's vocabulary (w must
 * outlive it); NULL when out of memory. */
struct loom_wordpiece *loom_wordpiece_dup(const struct loom_wordpiece *w);

/* Vocabulary size (lines), the id of a token (LOOM_VOCAB_NONE if absent)
 * and the text of an id (NULL if id >= size); without a vocabulary loaded
 * 0, LOOM_VOCAB_NONE and NULL. */
uint32_t loom_wordpiece_size(const struct loom_wordpiece *w);
uint32_t loom_wordpiece_id(const struct loom_wordpiece *w, const char *tok, size_t n);
const char *loom_wordpiece_token(const struct loom_wordpiece *w, uint32_t id, size_t *n);

/* Append the ids of text s[0..n) to *out, and their spans (relative to s,
 * plus `base`) to *offs when it is not NULL. */
int loom_wordpiece_encode(struct loom_wordpiece *w, const uint8_t *s, size_t n,
			  struct loom_ids *out, struct loom_offsets *offs, uint64_t base);

/* For streaming very long documents: the end p (1..n) of the last ASCII
 * white space byte (space, TAB, CR, LF) among the last `window` bytes of
 * s[0..n); 0 if there is none (or n == 0).  White space ends a word
 * whatever the options, and these bytes are never part of a UTF-8
 * sequence, so s[0..p) and what follows it encode to the ids of the
 * whole. */
size_t loom_wordpiece_safe_cut(const uint8_t *s, size_t n, size_t window);

/* Append the text of ids[0..n) to the buffer *buf (malloc'd, *len used,
 * *cap allocated; all may start 0/NULL).  Successive calls continue one
 * text (a token after an earlier call's is joined with a space) until
 * loom_wordpiece_decode_reset; a new object starts a text.  An id past
 * the vocabulary is an error naming it and its position (first + index). */
int loom_wordpiece_decode(struct loom_wordpiece *w, const uint32_t *ids, size_t n,
			  uint64_t first, int skip_special, int cleanup,
			  uint8_t **buf, size_t *len, size_t *cap);
/* Start a new text: the next token decoded has no space before it. */
void loom_wordpiece_decode_reset(struct loom_wordpiece *w);

#endif
