/* Fuzz target: the safetensors reader behind the checkpoint loader
 * (lib/train/loom_safetensors.h).  Whatever it accepts must lie inside the input:
 * every tensor's bytes are read here, so ASan catches any offset that was
 * not checked against the file size. */
#include <stdint.h>
#include <stdlib.h>

#include "loom_safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loom_err err = {0};
	struct loom_st *st = loom_st_parse(data, size, "fuzz.safetensors", &err);
	if (!st) {
		if (!err.msg[0])
			abort();	/* every refusal has a message */
		return 0;
	}
	uint64_t total = 0;
	unsigned sum = 0;
	for (size_t i = 0; i < loom_st_count(st); i++) {
		const struct loom_st_tensor *t = loom_st_get(st, i);
		const uint8_t *p = t->data;
		if (p < data || p + t->nbytes > data + size)
			abort();
		for (uint64_t k = 0; k < t->nbytes; k++)
			sum += p[k];
		total += t->nbytes;
		if (loom_st_find(st, t->name) != t)
			abort();
	}
	if (total > size)
		abort();
	(void)loom_st_meta(st, "format");
	loom_st_free(st);
	return (int)(sum & 0);
}
