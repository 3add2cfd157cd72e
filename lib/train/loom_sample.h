/*
 * loom_sample.h - text generation from a GPT: the next token of a context,
 * greedy or sampled, never an id the tokenizer lacks.
 *
 * Purpose: `loom-eval generate` and `loom-train --sample-every` share one
 * sampler: the last n_positions ids of the context through
 * loom_gpt_logits_last(), the logits of ids the vocabulary lacks (a padded
 * vocab_size such as 50304 for GPT-2's 50257, or holes) masked to
 * -infinity, then loom_gpt_sample() at the temperature (0 = argmax) among
 * the top_k most likely (0 = all), drawing from a splitmix64 counter that
 * starts at the seed (the same seed and context give the same tokens).
 *
 * Ownership: loom_sampler_init allocates buffers freed by
 * loom_sampler_release; the model is borrowed.  Errors: a negative LOOM_E*
 * code with the message in loom_gpt_error(g) (or LOOM_ENOMEM).
 * Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_SAMPLE_H
#define LOOM_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "loom_gpt.h"
#include "loom_vocab.h"

struct loom_sampler {
	struct loom_gpt *g;
	float temperature;
	int top_k;
	uint64_t rng;
	int32_t *ctx;          /* n_positions */
	float *logits;         /* vocab_size */
	float *scratch;        /* vocab_size: loom_gpt_sample()'s top-k selection */
	uint32_t *lacks, n_lacks; /* ids < vocab_size the vocabulary lacks */
};

/* v may be NULL (every id < vocab_size may be generated). */
int loom_sampler_init(struct loom_sampler *s, struct loom_gpt *g, const struct loom_vocab *v,
		      float temperature, int top_k, uint64_t seed);
/* The next token after ids[0..n), n >= 1 (each < vocab_size). */
int loom_sampler_next(struct loom_sampler *s, const uint32_t *ids, size_t n);
void loom_sampler_release(struct loom_sampler *s);

#endif
