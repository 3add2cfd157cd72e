/* Fuzz target: loom_wordpiece_load_hf_mem, the WordPiece tokenizer.json
 * loader.  A tokenizer that loads must encode a text into ids inside its
 * vocabulary, and decode them back without error. */
#include <stdlib.h>
#include <string.h>

#include "loom_wordpiece.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loom_wordpiece *w = loom_wordpiece_new();
	if (loom_wordpiece_load_hf_mem(w, (const char *)data, size, "tokenizer.json") == 0) {
		static const char text[] = "Hello, World! UNAFFABLE caf\xc3\xa9 \xe6\x9d\xb1 \xff\x00z";
		struct loom_ids ids = { 0 };
		uint8_t *b = NULL;
		size_t len = 0, cap = 0;
		if (loom_wordpiece_encode(w, (const uint8_t *)text, sizeof text - 1, &ids, NULL, 0))
			abort();
		for (size_t i = 0; i < ids.n; i++)
			if (ids.v[i] >= loom_wordpiece_size(w))
				abort();
		if (loom_wordpiece_decode(w, ids.v, ids.n, 0, 0, 1, &b, &len, &cap))
			abort();
		free(b);
		loom_ids_release(&ids);
	}
	loom_wordpiece_free(w);
	return 0;
}
