/*
 * Fuzz target for loom_bpe_train: arbitrary bytes are the training text
 * (documents split at '\n'; the first byte picks the vocabulary size and
 * min_frequency).  Whatever is learned must render to files that the
 * vocabulary loader accepts (encoder.json + vocab.bpe), whose
 * tokenizer.json is valid JSON with as many merges, and with which every
 * training document encodes and decodes back to its exact bytes.  A second
 * trainer that merges every word through position lists (the long-word
 * path) must render byte-identical files.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "loom_bpe.h"
#include "loom_bpe_train.h"
#include "loom_vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *sp[] = { "<|endoftext|>", "<pad>" };
	if (size < 1)
		return 0;
	struct loom_bpe_train_opts o = {
		.vocab_size = 258 + (data[0] & 63),
		.min_frequency = (data[0] >> 6) & 3,
		.specials = sp,
		.n_specials = 2,
	};
	const uint8_t *text = data + 1;
	size_t n = size - 1;
	struct loom_bpe_trainer *t = loom_bpe_trainer_new();
	if (!t)
		return 0;
	for (size_t p = 0; p < n;) {
		const uint8_t *e = memchr(text + p, '\n', n - p);
		size_t k = e ? (size_t)(e - (text + p)) : n - p;
		/* feed documents in two pieces to exercise the streaming path */
		if (loom_bpe_trainer_feed(t, text + p, k / 2) < 0 ||
		    loom_bpe_trainer_feed(t, text + p + k / 2, k - k / 2) < 0 ||
		    loom_bpe_trainer_end_doc(t) < 0)
			abort();
		p += k + 1;
	}
	/* the same text once more, every word merged through position lists:
	 * the result must be byte-identical */
	struct loom_bpe_trainer *t2 = loom_bpe_trainer_new();
	if (!t2)
		abort();
	loom_bpe_trainer_set_long_word(t2, 0);
	if (loom_bpe_trainer_add_doc(t2, "", 0) < 0)
		abort();
	for (size_t p = 0; p < n;) {
		const uint8_t *e = memchr(text + p, '\n', n - p);
		size_t k = e ? (size_t)(e - (text + p)) : n - p;
		if (loom_bpe_trainer_add_doc(t2, text + p, k) < 0)
			abort();
		p += k + 1;
	}
	int rc1 = loom_bpe_trainer_learn(t, &o), rc2 = loom_bpe_trainer_learn(t2, &o);
	if (rc1 != rc2)
		abort();
	if (rc1 < 0) {
		loom_bpe_trainer_free(t);
		loom_bpe_trainer_free(t2);
		return 0; /* empty text */
	}
	char *files[3], *files2[3];
	size_t len[3], len2[3];
	if (loom_bpe_trainer_render(t, files, len) < 0 ||
	    loom_bpe_trainer_render(t2, files2, len2) < 0)
		abort();
	for (int i = 0; i < 3; i++) {
		if (len[i] != len2[i] || memcmp(files[i], files2[i], len[i]))
			abort();
		free(files2[i]);
	}
	loom_bpe_trainer_free(t2);
	struct loom_bpe_train_stats st;
	loom_bpe_trainer_stats(t, &st);
	if (st.vocab > o.vocab_size)
		abort();

	json_error_t jerr;
	json_t *hf = json_loadb(files[2], len[2], 0, &jerr);
	json_t *merges = json_object_get(json_object_get(hf, "model"), "merges");
	if (!hf || json_array_size(merges) != st.merges)
		abort();
	json_decref(hf);

	struct loom_vocab *v = loom_vocab_new();
	if (loom_vocab_load_gpt2_mem(v, files[0], len[0], "encoder.json", files[1], len[1],
				     "vocab.bpe") < 0)
		abort();
	struct loom_bpe *b = loom_bpe_new(v);
	struct loom_ids ids = { 0 };
	uint8_t *out = NULL;
	size_t olen = 0, ocap = 0;
	for (size_t p = 0; p < n;) {
		const uint8_t *e = memchr(text + p, '\n', n - p);
		size_t k = e ? (size_t)(e - (text + p)) : n - p;
		ids.n = 0;
		olen = 0;
		if (loom_bpe_encode(b, text + p, k, 0, &ids) < 0 ||
		    loom_bpe_decode(b, ids.v, ids.n, 0, &out, &olen, &ocap) < 0 ||
		    olen != k || (k && memcmp(out, text + p, k)))
			abort();
		p += k + 1;
	}
	free(out);
	loom_ids_release(&ids);
	loom_bpe_free(b);
	loom_vocab_free(v);
	for (int i = 0; i < 3; i++)
		free(files[i]);
	loom_bpe_trainer_free(t);
	return 0;
}
