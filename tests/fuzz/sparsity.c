/* Fuzz target: the RigL side file of a checkpoint (sparsity.safetensors,
 * loom_gpt_sparsity_from_st) for the tiny preset's shape with sparsity
 * 0.5 and blocks of 8.  Whatever it accepts must leave every layer with
 * the same, positive number of live blocks in its mask and initial mask,
 * and every dead block of the weights zero. */
#include <stdint.h>
#include <stdlib.h>

#include "loom_gpt.h"
#include "loom_rigl.h"
#include "loom_safetensors.h"

static struct loom_gpt *model(void)
{
	static struct loom_gpt *g;
	if (!g) {
		struct loom_config c;
		loom_config_defaults(&c);
		c.sparsity = 0.5;
		c.block_size = 8;
		if (loom_config_validate(&c) || !(g = loom_gpt_new(&c)))
			abort();
		loom_gpt_init_weights(g, 1);
	}
	return g;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loom_err err = {0};
	struct loom_gpt *g = model();
	struct loom_st *st = loom_st_parse(data, size, "sparsity.safetensors", &err);
	if (!st)
		return 0;
	int rc = loom_gpt_sparsity_from_st(g, st);
	loom_st_free(st);
	if (rc) {
		if (!loom_gpt_error(g)[0])
			abort(); /* every refusal has a message */
		return 0;
	}
	const struct loom_rigl *r = g->rigl;
	for (int l = 0; l < r->n; l++) {
		const struct loom_rigl_layer *L = &r->layer[l];
		int n = 0, n0 = 0;
		for (int b = 0; b < L->nb; b++) {
			if (L->mask[b] > 1 || L->mask0[b] > 1)
				abort();
			n += L->mask[b];
			n0 += L->mask0[b];
		}
		if (n != n0 || n < 1 || n != L->live)
			abort();
	}
	float x = 1.0f;
	for (size_t j = 0; j < g->n_params; j++) {
		x = 1.0f;
		loom_rigl_mask_range(r, j, j + 1, &x);
		if (x == 0.0f && g->params[j] != 0.0f)
			abort();
	}
	return 0;
}
