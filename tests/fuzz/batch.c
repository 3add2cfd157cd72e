/* Fuzz target: the batch frame reader (lib/data/loom_batch.h), accepting
 * frames with features (version 2), on arbitrary bytes.  Every frame it
 * accepts must have the size its header promises, tokens that fit its
 * dtype and the values of every feature its table lists. */
#include <stdint.h>
#include <stdlib.h>

#include "loom_batch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loom_batch_reader *r = loom_batch_reader_new_mem(data, size, "fuzz");
	struct loom_batch_hdr h;
	const uint32_t *tok;
	uint64_t sum = 0;
	int rc;
	if (!r)
		return 0;
	loom_batch_reader_accept_features(r);
	while ((rc = loom_batch_read(r, &h, &tok)) == 1) {
		const struct loom_batch_feature *f;
		size_t nf;
		loom_batch_reader_features(r, &f, &nf);
		for (size_t k = 0; k < nf; k++) {
			const int64_t *v = loom_batch_reader_values(r, k);
			if (!v)
				abort();
			for (size_t i = 0; i < (size_t)h.batch * f[k].length; i++)
				sum += (uint64_t)v[i];
		}
		size_t n = (size_t)h.batch * h.seq_len;
		for (size_t i = 0; i < n; i++) {
			if (h.dtype == LOOM_BATCH_U16 && tok[i] > 0xffff)
				abort();
			sum += tok[i];
		}
		if (loom_batch_reader_offset(r) > size)
			abort();
	}
	if (rc < 0 && !loom_batch_reader_error(r)[0])
		abort();	/* every error has a message */
	loom_batch_reader_free(r);
	return (int)(sum & 0);
}
