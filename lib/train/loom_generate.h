/*
 * loom_generate.h - text from a GPT: a prompt continued token by token
 * through the sampler (lib/train/loom_sample.h), decoded with the
 * vocabulary (or, without one, written as token ids), shared by
 * `loom-train --sample-every` and `loom-eval generate`.
 *
 * Ownership: loom_generate_init() / loom_generate_release() own the ids,
 * the sampler, the decoder and the text buffer; the model and the
 * vocabulary are borrowed.  Errors: a negative LOOM_E* code, the message
 * in x->err.  Nothing prints.  Thread-safety: one per thread.
 */
#ifndef LOOM_GENERATE_H
#define LOOM_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "loom_bpe.h"
#include "loom_common.h"
#include "loom_sample.h"

struct loom_generate {
	struct loom_gpt *g;
	const struct loom_vocab *v;     /* NULL: ids, no text */
	struct loom_bpe *bpe;
	struct loom_sampler smp;
	struct loom_ids ids;            /* the prompt, then what was generated */
	uint8_t *buf;                   /* loom_generate_decode's bytes */
	size_t len, cap;
	struct loom_err err;
};

/* Ready to continue prompt[0..n) (n >= 1, each < vocab_size) by up to
 * max_new tokens at `temperature` (0: greedy) among the top_k most
 * likely, drawn from `seed`; v may be NULL. */
int loom_generate_init(struct loom_generate *x, struct loom_gpt *g, const struct loom_vocab *v,
		       const uint32_t *prompt, size_t n, size_t max_new, float temperature,
		       int top_k, uint64_t seed);
/* The next token, appended to x->ids: its id (>= 0), or an error. */
int loom_generate_next(struct loom_generate *x);
/* ids[from..) decoded into x->buf[0..x->len) (without a vocabulary: the
 * ids in decimal, separated by spaces). */
int loom_generate_decode(struct loom_generate *x, size_t from);
/* p[0..n) as valid UTF-8 (U+FFFD for what is not), malloc'd; NULL on ENOMEM. */
char *loom_generate_valid_utf8(const uint8_t *p, size_t n);
void loom_generate_release(struct loom_generate *x);

/* A prompt's ids appended to *ids: `text` encoded with v, or without a
 * vocabulary (v NULL) token ids separated by spaces; at least one, each
 * below V.  LOOM_EINVAL (a prompt that cannot be: the caller's usage
 * error), LOOM_EFORMAT (the encoder refused it) or LOOM_ENOMEM, the
 * message in err naming the prompt `what` (an option). */
int loom_generate_prompt(const struct loom_vocab *v, const char *text, const char *what, int V,
			 struct loom_ids *ids, struct loom_err *err);

#endif
