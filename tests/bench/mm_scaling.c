/* mm_scaling - the products of a gpt2 (B=8, T=128) or bert-base (B=2,
 * T=384) training step, timed at 1 and 2 threads (issue 29) for each way
 * of running them on a team of threads:
 *   blas  OpenBLAS sgemm, threaded by OpenBLAS itself (loom until now)
 *   team  loom's own team: each thread one single-threaded sgemm on a
 *         block of the output (loom_mm_gemm today)
 *   dnnl  oneDNN's fp32 dnnl_sgemm, threaded by oneDNN
 * All three run on the one OpenMP runtime (libgomp: Debian's OpenBLAS
 * openmp variant and oneDNN's OMP build), so there is no second pool.
 * The thread counts alternate within each round and every (way, count)
 * keeps its best round: the machine is shared.  Also checks that each way
 * gives the same bits at 1 and 2 threads.  Besides the wall-clock
 * speedup, "cpu_bound" is 2 x (CPU seconds at 1 thread) / (CPU seconds at
 * 2): the speedup the work allows if both threads ran all along (with
 * OMP_WAIT_POLICY=passive a waiting OpenMP thread sleeps; OpenBLAS's own
 * threads spin while they wait, which counts).
 * Usage: mm_scaling gpt2|bert ROUNDS [WAYS...]
 * Output: "WAY THREADS seconds" per line, then "WAY speedup X" and
 * "WAY exact 0|1". */
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_common.h"
#include "loom_mm.h"

/* one product of the step: C[M,N] = op(A) op(B), repeated `times` per step */
struct shape {
	int ta, tb, M, N, K, times;
};

static int nshapes;
static struct shape shapes[32];

static void add(int ta, int tb, int M, int N, int K, int times)
{
	shapes[nshapes++] = (struct shape){ ta, tb, M, N, K, times };
}

/* the linear layer [N,IC] -> [N,OC], w[OC,IC] (nn.Linear), forward and
 * both gradients, `times` per step */
static void linear(int N, int IC, int OC, int times)
{
	add(0, 1, N, OC, IC, times);  /* out = inp w^T */
	add(1, 0, OC, IC, N, times);  /* dw += dout^T inp */
	add(0, 0, N, IC, OC, times);  /* dinp = dout w */
}

static void blas_gemm(const struct shape *s, const float *A, const float *B, float *C)
{
	cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
		    s->tb ? CblasTrans : CblasNoTrans, s->M, s->N, s->K, 1.0f, A,
		    s->ta ? s->M : s->K, B, s->tb ? s->K : s->N, 0.0f, C, s->N);
}

static void onednn_gemm(const struct shape *s, const float *A, const float *B, float *C)
{
	dnnl_sgemm(s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->M, s->N, s->K, 1.0f, A,
		   s->ta ? s->M : s->K, B, s->tb ? s->K : s->N, 0.0f, C, s->N);
}

/* the products s[0..n) on `threads` threads the given way; seconds */
/* the products s[0..n) on `threads` threads the given way; seconds, and
 * the CPU seconds of the process in *cpu */
static double run(const char *way, int threads, const struct shape *s, int n, const float *A,
		  const float *B, float *C, double *cpu)
{
	/* first: the OpenMP build's openblas_set_num_threads() sets OpenMP's
	 * count too */
	openblas_set_num_threads(strcmp(way, "blas") ? 1 : threads);
	omp_set_num_threads(threads);
	double t0 = loom_now(), c0 = loom_cpu_now();
	for (int i = 0; i < n; i++)
		for (int r = 0; r < s[i].times; r++) {
			if (!strcmp(way, "blas"))
				blas_gemm(&s[i], A, B, C);
			else if (!strcmp(way, "dnnl"))
				onednn_gemm(&s[i], A, B, C);
			else
				loom_mm_gemm(NULL, s[i].ta, s[i].tb, s[i].M, s[i].N, s[i].K, A, B, 0,
					     C);
		}
	*cpu = loom_cpu_now() - c0;
	return loom_now() - t0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: mm_scaling gpt2|bert ROUNDS [blas|team|dnnl...]\n");
		return 2;
	}
	int N = !strcmp(argv[1], "bert") ? 2 * 384 : 8 * 128, rounds = atoi(argv[2]);
	int V = N == 768 ? 30522 : 50257, C = 768, hr = N == 768 ? 0 : 256;
	/* one layer's products and one twelfth of the head's (a step has
	 * 12 layers) */
	linear(N, C, 3 * C, 1);
	linear(N, C, C, 1);
	linear(N, C, 4 * C, 1);
	linear(N, 4 * C, C, 1);
	if (hr) /* gpt2's LM head in chunks of 256 rows, wte[V,C]: 4 chunks a step */
		linear(hr / 4, C, V, 1);
	else /* bert's masked-LM decoder over the 15% masked positions */
		linear(N * 15 / 100 / 12, C, V, 1);
	static const char *const all[] = { "blas", "team", "dnnl" };
	const char *const *ways = argc > 3 ? (const char *const *)argv + 3 : all;
	int nways = argc > 3 ? argc - 3 : 3;
	size_t big = (size_t)V * C > (size_t)N * 4 * C ? (size_t)V * C : (size_t)N * 4 * C;
	float *A = malloc(big * sizeof(float)), *B = malloc(big * sizeof(float));
	float *Cm = malloc(big * sizeof(float)), *ref = malloc(big * sizeof(float));
	if (!A || !B || !Cm || !ref)
		return 1;
	for (size_t i = 0; i < big; i++) {
		A[i] = (float)((i * 7919) % 1009) / 1009.0f - 0.5f;
		B[i] = (float)((i * 104729) % 997) / 997.0f - 0.5f;
	}
	double best[8][2], bcpu[8][2];
	double flops = 0;
	for (int i = 0; i < nshapes; i++)
		flops += 2.0 * shapes[i].M * shapes[i].N * (double)shapes[i].K * shapes[i].times;
	for (int w = 0; w < nways; w++) {
		best[w][0] = best[w][1] = bcpu[w][0] = bcpu[w][1] = 1e30;
		/* bits at 1 and 2 threads, each product once */
		int exact = 1;
		for (int i = 0; i < nshapes; i++) {
			struct shape one = shapes[i];
			one.times = 1;
			double cpu;
			run(ways[w], 1, &one, 1, A, B, ref, &cpu);
			run(ways[w], 2, &one, 1, A, B, Cm, &cpu);
			exact &= !memcmp(ref, Cm, sizeof(float) * one.M * one.N);
		}
		printf("%s exact %d\n", ways[w], exact);
	}
	for (int r = 0; r < rounds; r++)
		for (int w = 0; w < nways; w++)
			for (int t = 0; t < 2; t++) {
				int th = (r + t) % 2 ? 1 : 2; /* alternate which count goes first */
				double cpu, dt = run(ways[w], th, shapes, nshapes, A, B, Cm, &cpu);
				if (dt < best[w][th - 1])
					best[w][th - 1] = dt;
				if (cpu < bcpu[w][th - 1])
					bcpu[w][th - 1] = cpu;
			}
	for (int w = 0; w < nways; w++) {
		for (int t = 0; t < 2; t++)
			printf("%s %d %.4f s %.1f GFLOP/s, CPU %.4f s\n", ways[w], t + 1,
			       best[w][t], flops / best[w][t] / 1e9, bcpu[w][t]);
		printf("%s speedup %.3f\n", ways[w], best[w][0] / best[w][1]);
		printf("%s cpu_bound %.3f\n", ways[w], 2 * bcpu[w][0] / bcpu[w][1]);
	}
	free(A);
	free(B);
	free(Cm);
	free(ref);
	return 0;
}
