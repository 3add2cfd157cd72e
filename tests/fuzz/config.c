/* Fuzz target: loom_config (a JSON config file's text, and the same bytes as
 * a --set list), then validation, the dry-run arithmetic and the dump. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom_config.h"
#include "loom_gpt.h"

static void finish(struct loom_config *c)
{
	if (loom_config_validate(c))
		return;
	struct loom_model_mem m;
	(void)loom_config_n_params(c);
	(void)loom_config_flops_per_token(c);
	(void)loom_config_lr(c, 1);
	(void)loom_config_lr(c, c->steps);
	(void)loom_config_prune_ratio(c, c->steps / 2);
	(void)loom_config_prune_due(c, c->prune_every);
	if (c->micro_batch <= 64 && c->seq_len <= 4096)
		loom_gpt_memory_plan(c, c->micro_batch, c->seq_len, c->recompute, &m);
	free(loom_config_dump(c));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loom_config c;
	loom_config_defaults(&c);
	json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	if (j) {
		if (!loom_config_apply_json(&c, j))
			finish(&c);
		json_decref(j);
	}
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	loom_config_defaults(&c);
	if (!loom_config_apply_sets(&c, s))
		finish(&c);
	free(s);
	return 0;
}
