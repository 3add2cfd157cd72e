/* sparse_mlp - time the gpt2 MLP layer (768 -> 3072 -> GELU -> 768, N rows)
 * forward + backward, dense on sgemm (loom_k_matmul_*, mm NULL = OpenBLAS)
 * against block-sparse (loom_sparse_*, packing both weights included) at
 * a few block sizes and densities.  Rounds interleave the variants (the
 * machine is shared and its speed drifts); each keeps its best step.
 *
 *   sparse_mlp THREADS ROUNDS [N]
 *
 * prints one line per round and variant, then `best dense SECONDS` and
 * `best sparse BS DENSITY SECONDS` (run by tests/bench/sparse.sh). */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom_kernels.h"
#include "loom_sparse.h"

enum { C = 768, H = 3072 };

static const struct {
	int bs;
	double density;
} variants[] = { { 16, 0.1 }, { 16, 0.5 }, { 8, 0.1 }, { 32, 0.1 } };
#define NVAR ((int)(sizeof variants / sizeof variants[0]))

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static float *fill(size_t n, float scale, uint64_t seed)
{
	float *p = malloc(sizeof(float) * n);
	if (!p) {
		fprintf(stderr, "sparse_mlp: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((loom_splitmix64(seed ^ i) >> 40) * (1.0 / 16777216.0) * 2 - 1) * scale;
	return p;
}

/* exactly round(density * blocks) live blocks, w zero outside them */
static struct loom_sparse *sparse_of(float *w, int IC, int OC, int bs, double density,
				     uint64_t seed)
{
	int ib = IC / bs, ob = OC / bs, nb = ib * ob, live = (int)(density * nb + 0.5);
	uint8_t *m = calloc((size_t)nb, 1);
	for (int k = 0; k < live; seed++) {
		int p = (int)(loom_splitmix64(seed) % (uint64_t)nb);
		if (!m[p])
			m[p] = 1, k++;
	}
	for (int c = 0; c < IC; c++)
		for (int o = 0; o < OC; o++)
			if (!m[(c / bs) * ob + o / bs])
				w[(size_t)c * OC + o] = 0;
	struct loom_err err = { 0 };
	struct loom_sparse *s = loom_sparse_new(IC, OC, bs, &err);
	if (!s || loom_sparse_set_mask(s, m)) {
		fprintf(stderr, "sparse_mlp: %s\n", s ? loom_sparse_error(s) : err.msg);
		exit(1);
	}
	free(m);
	return s;
}

struct acts {
	int N;
	float *x, *h, *g, *y, *dy, *dg, *dx;
};

/* one forward + backward; s1, s2 NULL: dense */
static double step(struct acts *a, struct loom_sparse *s1, struct loom_sparse *s2,
		   const float *w1, const float *b1, const float *w2, const float *b2, float *dw1,
		   float *db1, float *dw2, float *db2)
{
	int N = a->N;
	double t = now();
	if (s1) {
		loom_sparse_pack(s1, w1);
		loom_sparse_pack(s2, w2);
		loom_sparse_matmul_fwd(s1, a->h, a->x, b1, N);
	} else {
		loom_k_matmul_fwd(NULL, a->h, a->x, w1, b1, N, C, H);
	}
	loom_k_gelu_fwd(a->g, a->h, (size_t)N * H);
	if (s1) {
		loom_sparse_matmul_fwd(s2, a->y, a->g, b2, N);
		loom_sparse_matmul_bwd(s2, a->dg, dw2, db2, a->dy, a->g, N);
	} else {
		loom_k_matmul_fwd(NULL, a->y, a->g, w2, b2, N, H, C);
		loom_k_matmul_bwd(NULL, a->dg, dw2, db2, a->dy, a->g, w2, N, H, C);
	}
	loom_k_gelu_bwd(a->dg, a->h, a->dg, (size_t)N * H);
	if (s1)
		loom_sparse_matmul_bwd(s1, a->dx, dw1, db1, a->dg, a->x, N);
	else
		loom_k_matmul_bwd(NULL, a->dx, dw1, db1, a->dg, a->x, w1, N, C, H);
	return now() - t;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: sparse_mlp THREADS ROUNDS [N]\n");
		return 2;
	}
	int threads = atoi(argv[1]), rounds = atoi(argv[2]), N = argc > 3 ? atoi(argv[3]) : 2048;
	if (threads < 1 || rounds < 1 || N < 1) {
		fprintf(stderr, "sparse_mlp: THREADS, ROUNDS and N must be positive\n");
		return 2;
	}
	omp_set_num_threads(threads);
	openblas_set_num_threads(threads);
	struct acts a = { N, fill((size_t)N * C, 1, 1), fill((size_t)N * H, 0, 0),
			  fill((size_t)N * H, 0, 0), fill((size_t)N * C, 0, 0),
			  fill((size_t)N * C, 1, 2), fill((size_t)N * H, 0, 0),
			  fill((size_t)N * C, 0, 0) };
	float *w1 = fill((size_t)C * H, 0.02f, 3), *w2 = fill((size_t)H * C, 0.02f, 4);
	float *b1 = fill(H, 0.02f, 5), *b2 = fill(C, 0.02f, 6);
	float *dw1 = fill((size_t)C * H, 0, 0), *dw2 = fill((size_t)H * C, 0, 0);
	float *db1 = fill(H, 0, 0), *db2 = fill(C, 0, 0);
	struct loom_sparse *s1[NVAR], *s2[NVAR];
	float *sw1[NVAR], *sw2[NVAR];
	for (int v = 0; v < NVAR; v++) {
		sw1[v] = fill((size_t)C * H, 0.02f, 3);
		sw2[v] = fill((size_t)H * C, 0.02f, 4);
		s1[v] = sparse_of(sw1[v], C, H, variants[v].bs, variants[v].density, 100 + v);
		s2[v] = sparse_of(sw2[v], H, C, variants[v].bs, variants[v].density, 200 + v);
	}
	printf("sparse_mlp: %d x (%d -> %d -> GELU -> %d) forward+backward, %d threads, %s kernels\n",
	       N, C, H, C, threads, loom_k_isa());
	double best_d = 1e30, best_s[NVAR];
	for (int v = 0; v < NVAR; v++)
		best_s[v] = 1e30;
	/* round 0 warms up (page faults, thread pools) and is not counted */
	for (int r = 0; r <= rounds; r++) {
		double t = step(&a, NULL, NULL, w1, b1, w2, b2, dw1, db1, dw2, db2);
		if (r) {
			best_d = t < best_d ? t : best_d;
			printf("round %d: dense %.4f s\n", r, t);
		}
		for (int v = 0; v < NVAR; v++) {
			t = step(&a, s1[v], s2[v], sw1[v], b1, sw2[v], b2, dw1, db1, dw2, db2);
			if (r) {
				best_s[v] = t < best_s[v] ? t : best_s[v];
				printf("round %d: sparse bs %d density %.2f %.4f s\n", r,
				       variants[v].bs, variants[v].density, t);
			}
		}
		fflush(stdout);
	}
	printf("best dense %.6f\n", best_d);
	for (int v = 0; v < NVAR; v++)
		printf("best sparse %d %.2f %.6f\n", variants[v].bs, variants[v].density, best_s[v]);
	for (int v = 0; v < NVAR; v++) {
		loom_sparse_free(s1[v]);
		loom_sparse_free(s2[v]);
		free(sw1[v]);
		free(sw2[v]);
	}
	free(a.x), free(a.h), free(a.g), free(a.y), free(a.dy), free(a.dg), free(a.dx);
	free(w1), free(w2), free(b1), free(b2), free(dw1), free(dw2), free(db1), free(db2);
	return 0;
}
