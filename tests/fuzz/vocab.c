/* Fuzz target: the vocabulary loaders (GPT-2 encoder.json + vocab.bpe,
 * tiktoken rank files, HuggingFace tokenizer.json).  Input: the first
 * byte selects the loader (bit 0: tiktoken, else bit 1: tokenizer.json,
 * else GPT-2); for GPT-2 the rest is split at the first "\n--\n" into
 * encoder.json and vocab.bpe.
 * A vocabulary that loads must encode and decode a text byte-exactly, and
 * (unless it has no merge order: tiktoken) its rendering as vocab.json +
 * merges.txt (what a checkpoint stores) must load back as the same
 * tokens, merges and specials. */
#include <stdlib.h>
#include <string.h>

#include "loom_bpe.h"
#include "loom_vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct loom_vocab *v = loom_vocab_new();
	const char *s = (const char *)data + 1;
	size_t n = size - 1;
	int rc;
	if (data[0] & 1) {
		rc = loom_vocab_load_tiktoken_mem(v, s, n, "fuzz.tiktoken");
	} else if (data[0] & 2) {
		rc = loom_vocab_load_hf_mem(v, s, n, "tokenizer.json");
	} else {
		const char *sep = memmem(s, n, "\n--\n", 4);
		size_t el = sep ? (size_t)(sep - s) : n;
		const char *m = sep ? sep + 4 : s + n;
		rc = loom_vocab_load_gpt2_mem(v, s, el, "enc.json", m, (size_t)(s + n - m),
					      "vocab.bpe");
	}
	if (rc == 0) {
		static const char text[] = "Hello, world! it's 2024\n\n  日本語\xff\x00z";
		struct loom_bpe *e = loom_bpe_new(v);
		struct loom_ids ids = { 0 };
		uint8_t *b = NULL;
		size_t len = 0, cap = 0;
		/* (a tokenizer.json may lack bytes of the text: an error, not a crash) */
		if (e && loom_bpe_encode(e, (const uint8_t *)text, sizeof text, 1, &ids) == 0 &&
		    loom_bpe_decode(e, ids.v, ids.n, 0, &b, &len, &cap) == 0 &&
		    (len != sizeof text || memcmp(b, text, len)))
			abort();
		free(b);
		loom_ids_release(&ids);
		loom_bpe_free(e);
		char *js, *mg;
		size_t jl, ml;
		if (loom_vocab_render_gpt2(v, &js, &jl, &mg, &ml) == 0) {
			struct loom_vocab *w = loom_vocab_new();
			if (loom_vocab_load_gpt2_mem(w, js, jl, "vocab.json", mg, ml, "merges.txt") ||
			    w->n_ids != v->n_ids || w->n_merges != v->n_merges ||
			    w->n_specials != v->n_specials || w->eot != v->eot ||
			    memcmp(w->present, v->present, v->n_ids) ||
			    memcmp(w->off, v->off, sizeof *v->off * (v->n_ids + 1)) ||
			    memcmp(w->bytes, v->bytes, v->off[v->n_ids]))
				abort();
			loom_vocab_free(w);
			free(js);
			free(mg);
		}
	} else if (!loom_vocab_error(v)[0]) {
		abort(); /* a failure always has a message */
	}
	loom_vocab_free(v);
	return 0;
}
