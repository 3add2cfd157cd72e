/* Fuzz target: encode then decode with GPT-2's vocabulary must give the
 * input bytes back exactly (any bytes: invalid UTF-8, NULs, long runs);
 * pieces of the pre-tokenizer must tile the input; a safe cut must not
 * change the ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_bpe.h"
#include "loom_pretok.h"
#include "loom_vocab.h"

static struct loom_vocab *V;
static struct loom_bpe *E;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!V) {
		V = loom_vocab_new();
		if (loom_vocab_load_gpt2(V, "share/vocab/gpt2/encoder.json",
					 "share/vocab/gpt2/vocab.bpe")) {
			fprintf(stderr, "%s (run from the repository root)\n", loom_vocab_error(V));
			abort();
		}
		E = loom_bpe_new(V);
	}
	size_t p = 0;
	while (p < size) {
		size_t k = loom_pretok_next(data + p, size - p);
		if (k == 0 || k > size - p)
			abort();
		p += k;
	}
	struct loom_ids ids = { 0 }, a = { 0 };
	uint8_t *b = NULL;
	size_t len = 0, cap = 0;
	if (loom_bpe_encode(E, data, size, size & 1, &ids) ||
	    loom_bpe_decode(E, ids.v, ids.n, 0, &b, &len, &cap))
		abort();
	if (len != size || (size && memcmp(b, data, size)))
		abort();
	size_t cut = loom_pretok_safe_cut(data, size, size);
	if (cut && !(size & 1)) {
		if (loom_bpe_encode(E, data, cut, 0, &a) ||
		    loom_bpe_encode(E, data + cut, size - cut, 0, &a))
			abort();
		if (a.n != ids.n || memcmp(a.v, ids.v, a.n * sizeof *a.v))
			abort();
	}
	free(b);
	loom_ids_release(&ids);
	loom_ids_release(&a);
	return 0;
}
