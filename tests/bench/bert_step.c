/* bert_step PRESET B T PRECISION STEPS: time BERT question-answering
 * training steps (lib/train/loom_bert.h: forward with dropout, backward,
 * AdamW) at batch B, sequence T, precision fp32 or bf16, on random inputs
 * (one row in four padded to 3/4 of T); prints the best and the median
 * step in ms and the tokens/s of the best (tests/bench/bert-step.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom_bert.h"
#include "loom_kernels.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct loom_bert_config c;
	if (argc != 6 || loom_bert_preset(argv[1], LOOM_BERT_QA, &c)) {
		fprintf(stderr, "usage: bert_step PRESET B T fp32|bf16 STEPS\n");
		return 2;
	}
	int B = atoi(argv[2]), T = atoi(argv[3]), steps = atoi(argv[5]);
	c.precision = strcmp(argv[4], "bf16") ? LOOM_PREC_FP32 : LOOM_PREC_BF16;
	if (B < 1 || T < 1 || T > c.max_positions || steps < 1) {
		fprintf(stderr, "bert_step: bad B, T or STEPS\n");
		return 2;
	}
	struct loom_bert *b = loom_bert_new(&c);
	if (!b) {
		fprintf(stderr, "bert_step: out of memory\n");
		return 1;
	}
	loom_bert_init_weights(b, 1);
	size_t N = (size_t)B * T;
	int32_t *ids = malloc(sizeof(int32_t) * N * 3), *seg = ids + N, *mask = seg + N;
	int32_t *sp = malloc(sizeof(int32_t) * 2 * B), *ep = sp + B;
	for (size_t i = 0; i < N; i++) {
		int r = (int)(i / T), t = (int)(i % T), real = r % 4 != 3 || t < 3 * T / 4;
		ids[i] = real ? 1 + (int32_t)(loom_splitmix64(i) % (uint64_t)(c.vocab_size - 1)) : 0;
		seg[i] = real && t >= T / 4;
		mask[i] = real;
	}
	for (int r = 0; r < B; r++) {
		sp[r] = T / 2;
		ep[r] = T / 2 + 3;
	}
	struct loom_bert_batch x = { ids, seg, mask, sp, ep, NULL };
	double *ms = malloc(sizeof(double) * steps);
	for (int s = 0; s <= steps; s++) { /* step 0: warm-up */
		double t0 = now();
		float loss, norm;
		if (loom_bert_forward(b, &x, B, T, 1, (uint64_t)s, &loss) ||
		    loom_bert_backward(b, 1.0f)) {
			fprintf(stderr, "bert_step: %s\n", loom_bert_error(b));
			return 1;
		}
		loom_bert_step(b, 1e-5f, s + 1, &norm);
		if (s)
			ms[s - 1] = (now() - t0) * 1e3;
	}
	qsort(ms, steps, sizeof *ms, cmp);
	printf("best_ms %.1f median_ms %.1f tokens_per_s %.1f\n", ms[0], ms[steps / 2],
	       N / (ms[0] * 1e-3));
	free(ms);
	free(ids);
	free(sp);
	loom_bert_free(b);
	return 0;
}
