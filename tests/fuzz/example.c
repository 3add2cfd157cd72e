/* Fuzz target: the tf.train.Example decoders.  The hand-written strict
 * check and protobuf-c's unpacker both run (their verdicts agree on the
 * plain encodings tests/example.c mutates, but not always on repeated
 * submessages, which protobuf merges: protobuf-c drops unknown fields of the
 * first occurrence and rejects some repeats that protobuf C++ accepts, so
 * verdicts are not compared here).  A decoded int64 feature must re-encode
 * and decode to the same values, byte-identical to protobuf-c's encoding;
 * u32 decoding agrees with int64 decoding; JSON conversion never crashes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom_example.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loom_err e;
	int a = loom_example_check(data, size, &e) == 0;
	(void)loom_example_check_pbc(data, size, &e);

	const char *keys[] = { "input_ids", "", "a" };
	for (size_t k = 0; k < 3; k++) {
		size_t n = 0, cap = size + 1;
		int64_t *v = malloc(cap * sizeof *v);
		uint32_t *v32 = malloc(cap * sizeof *v32);
		int rc = loom_example_decode_i64(data, size, keys[k], v, cap, &n, &e);
		if (rc == 0 && !a)
			abort(); /* decoded something the check rejects */
		if (rc == 0) {
			uint8_t *enc = malloc(loom_example_bound(strlen(keys[k]), n));
			size_t l = loom_example_encode_i64(keys[k], v, n, enc), n2;
			int64_t *w = malloc((n + 1) * sizeof *w);
			if (loom_example_decode_i64(enc, l, keys[k], w, n + 1, &n2, &e) != 0 ||
			    n2 != n || memcmp(v, w, n * sizeof *v))
				abort();
			uint8_t *ref;
			size_t rl;
			if (loom_example_encode_pbc(keys[k], v, n, &ref, &rl, &e) == 0) {
				if (rl != l || memcmp(ref, enc, l))
					abort();
				free(ref);
			}
			free(w);
			free(enc);
			/* u32 decode agrees whenever every value fits. */
			int fits = 1;
			for (size_t i = 0; i < n; i++)
				fits &= v[i] >= 0 && v[i] <= (int64_t)UINT32_MAX;
			size_t m;
			int rc32 = loom_example_decode_u32(data, size, keys[k], v32, cap, &m, &e);
			if (fits != (rc32 == 0))
				abort();
			for (size_t i = 0; rc32 == 0 && i < n; i++)
				if (v32[i] != (uint32_t)v[i])
					abort();
		}
		/* Too small a buffer is reported, never overrun. */
		if (rc == 0 && n > 0) {
			size_t m;
			if (loom_example_decode_i64(data, size, keys[k], v, n - 1, &m, &e) != LOOM_ERANGE ||
			    m != n)
				abort();
		}
		free(v);
		free(v32);
	}
	char *js;
	size_t jl;
	if (loom_example_to_json(data, size, &js, &jl, &e) == 0) {
		if (!a || strlen(js) != jl)
			abort();
		free(js);
	}
	return 0;
}
