/* gpt_varlen PRESET B T ROUNDS: GPT evaluation and training on records of
 * mixed lengths (lib/train/loom_gpt.h's rows that end early), packed
 * against the padded reference (g->padded) in the same process, from the
 * same weights on the same batches: row r of each batch holds
 * (T+1) k/8 real ids, k from 1 to 8 by a hash (the rest padding, as
 * loom-feed --pad writes records shorter than the sequence; 59% of the
 * tokens real at B=8).  Each round times one evaluation forward and one
 * training micro-batch (forward with dropout and backward) of each;
 * prints the real tokens/s of the best round of each and their ratio, by
 * the wall clock, then the ratios by CPU time (tests/bench/gpt-varlen.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom_gpt.h"
#include "loom_kernels.h"

/* seconds on the clock: wall (CLOCK_MONOTONIC) or this process's CPU
 * time (CLOCK_PROCESS_CPUTIME_ID: steadier on a loaded machine, and
 * equal to the wall time's work at one thread) */
static double now(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	struct loom_config c;
	loom_config_defaults(&c);
	if (argc != 5 || loom_config_apply_preset(&c, argv[1])) {
		fprintf(stderr, "usage: gpt_varlen PRESET B T ROUNDS\n");
		return 2;
	}
	int B = atoi(argv[2]), T = atoi(argv[3]), rounds = atoi(argv[4]);
	if (B < 1 || T < 1 || T > c.n_positions || rounds < 1) {
		fprintf(stderr, "gpt_varlen: bad B, T or ROUNDS\n");
		return 2;
	}
	c.micro_batch = B;
	c.seq_len = T;
	struct loom_gpt *g[2] = { loom_gpt_new(&c), loom_gpt_new(&c) };
	size_t N = (size_t)B * T;
	uint32_t *rec = malloc(sizeof(uint32_t) * (size_t)B * (T + 1)), pad = (uint32_t)c.vocab_size;
	int32_t *in = malloc(sizeof(int32_t) * 2 * N), *tg = in + N;
	if (!g[0] || !g[1] || !rec || !in) {
		fprintf(stderr, "gpt_varlen: out of memory\n");
		return 1;
	}
	int64_t real = 0;
	for (int r = 0; r < B; r++) {
		int len = (T + 1) * (1 + (int)(loom_splitmix64((uint64_t)r) % 8)) / 8;
		for (int t = 0; t <= T; t++)
			rec[(size_t)r * (T + 1) + t] =
				t < len ? (uint32_t)(loom_splitmix64((uint64_t)r * 4099 + t) %
						     (uint64_t)(c.vocab_size - 1))
					: pad;
		real += len - 1; /* its counted targets */
	}
	loom_gpt_split_records(rec, B, T + 1, T, in, tg);
	loom_gpt_mask_pad(g[0], pad, in, tg, N);
	/* [wall, cpu][packed][eval, train] */
	double best[2][2][2] = { { { 1e30, 1e30 }, { 1e30, 1e30 } },
				 { { 1e30, 1e30 }, { 1e30, 1e30 } } };
	float loss[2][2];
	for (int k = 0; k < 2; k++) {
		loom_gpt_init_weights(g[k], 1);
		g[k]->padded = k == 0;
	}
	for (int r = 0; r <= rounds; r++) /* round 0: warm-up */
		for (int k = 0; k < 2; k++) {
			double t[3][2];
			t[0][0] = now(CLOCK_MONOTONIC);
			t[0][1] = now(CLOCK_PROCESS_CPUTIME_ID);
			int rc = loom_gpt_forward(g[k], in, tg, B, T, 0, 0, &loss[k][0]);
			t[1][0] = now(CLOCK_MONOTONIC);
			t[1][1] = now(CLOCK_PROCESS_CPUTIME_ID);
			rc = rc ? rc : loom_gpt_train_micro(g[k], in, tg, B, T, 7, 1.0f, &loss[k][1]);
			t[2][0] = now(CLOCK_MONOTONIC);
			t[2][1] = now(CLOCK_PROCESS_CPUTIME_ID);
			if (rc) {
				fprintf(stderr, "gpt_varlen: %s\n", loom_gpt_error(g[k]));
				return 1;
			}
			loom_gpt_zero_grad(g[k]);
			for (int c = 0; r && c < 2; c++)
				for (int j = 0; j < 2; j++)
					if (t[j + 1][c] - t[j][c] < best[c][k][j])
						best[c][k][j] = t[j + 1][c] - t[j][c];
		}
	printf("real_tokens %lld of %zu eval_loss %.6f %.6f train_loss %.6f %.6f\n",
	       (long long)real, N, loss[0][0], loss[1][0], loss[0][1], loss[1][1]);
	double(*w)[2] = best[0], (*u)[2] = best[1];
	printf("eval_padded %.1f eval_packed %.1f eval_x %.2f train_padded %.1f train_packed %.1f "
	       "train_x %.2f\n", real / w[0][0], real / w[1][0], w[0][0] / w[1][0],
	       real / w[0][1], real / w[1][1], w[0][1] / w[1][1]);
	printf("cpu_eval_x %.2f cpu_train_x %.2f\n", u[0][0] / u[1][0], u[0][1] / u[1][1]);
	free(rec);
	free(in);
	loom_gpt_free(g[0]);
	loom_gpt_free(g[1]);
	return 0;
}
