/* loom_sample.c - the sampler of loom-eval generate and loom-train
 * --sample-every (see loom_sample.h). */
#include "loom_sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int loom_sampler_init(struct loom_sampler *s, struct loom_gpt *g, const struct loom_vocab *v,
		      float temperature, int top_k, uint64_t seed)
{
	const int V = g->V, P = g->P;
	memset(s, 0, sizeof *s);
	s->g = g;
	s->temperature = temperature;
	s->top_k = top_k;
	s->rng = seed;
	s->ctx = malloc(sizeof *s->ctx * (size_t)P);
	s->logits = malloc(sizeof *s->logits * (size_t)V);
	s->scratch = malloc(sizeof *s->scratch * (size_t)V);
	s->lacks = malloc(sizeof *s->lacks * (size_t)V);
	if (!s->ctx || !s->logits || !s->scratch || !s->lacks) {
		loom_sampler_release(s);
		return LOOM_ENOMEM;
	}
	for (uint32_t id = 0; v && id < (uint32_t)V; id++)
		if (id >= v->n_ids || !v->present[id])
			s->lacks[s->n_lacks++] = id;
	return 0;
}

int loom_sampler_next(struct loom_sampler *s, const uint32_t *ids, size_t n)
{
	struct loom_gpt *g = s->g;
	size_t m = n < (size_t)g->P ? n : (size_t)g->P;
	for (size_t i = 0; i < m; i++)
		s->ctx[i] = (int32_t)ids[n - m + i];
	int rc = loom_gpt_logits_last(g, s->ctx, (int)m, s->logits);
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < s->n_lacks; i++)
		s->logits[s->lacks[i]] = -INFINITY;
	return loom_gpt_sample(s->logits, g->V, s->temperature, s->top_k, s->scratch, &s->rng);
}

void loom_sampler_release(struct loom_sampler *s)
{
	free(s->ctx);
	free(s->logits);
	free(s->scratch);
	free(s->lacks);
	s->ctx = NULL;
	s->logits = NULL;
	s->scratch = NULL;
	s->lacks = NULL;
}
