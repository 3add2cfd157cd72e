/* The block-sparse kernels (lib/kernels/loom_sparse.h) against their naive
 * references and against the dense kernels on masked weights, over random
 * shapes (rows not a multiple of the kernels' row tiles), block sizes 8,
 * 16, 32 (and 4, the generic path) and densities 0 .. 1; a
 * finite-difference check of a small sparse layer's gradients; and
 * bit-identical results run to run and across thread counts. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "loom_kernels.h"
#include "loom_sparse.h"
#include "tap.h"
#include "testlib.h"

/* a mask of exactly `live` blocks of ib*ob, chosen by the hash */
static uint8_t *mask_of(int ib, int ob, int live)
{
	size_t nb = (size_t)ib * ob;
	uint8_t *m = calloc(nb, 1);
	for (int k = 0; k < live;) {
		size_t p = (size_t)((frand() * 0.5f + 0.5f) * (float)nb);
		p = p >= nb ? nb - 1 : p;
		if (!m[p]) {
			m[p] = 1;
			k++;
		}
	}
	return m;
}

/* w with the dead blocks zeroed */
static float *masked(const float *w, const uint8_t *m, int bs, int IC, int OC)
{
	float *z = malloc(sizeof(float) * IC * OC);
	for (int c = 0; c < IC; c++)
		for (int o = 0; o < OC; o++)
			z[(size_t)c * OC + o] = m[(size_t)(c / bs) * (OC / bs) + o / bs] ? w[(size_t)c * OC + o] : 0;
	return z;
}

static void test_shape(int N, int IC, int OC, int bs, double density)
{
	int ib = IC / bs, ob = OC / bs, live = (int)(density * ib * ob + 0.5);
	size_t nw = (size_t)IC * OC;
	uint8_t *m = mask_of(ib, ob, live);
	float *x = rnd((size_t)N * IC, 1), *w = rnd(nw, 0.5f), *b = rnd(OC, 1);
	float *dy = rnd((size_t)N * OC, 1), *wz = masked(w, m, bs, IC, OC);
	struct loom_err err = { 0 };
	struct loom_sparse *s = loom_sparse_new(IC, OC, bs, &err);
	ok(s && loom_sparse_set_mask(s, m) == 0 && loom_sparse_live(s) == live,
	   "%dx%d bs %d: %d live blocks", IC, OC, bs, live);
	loom_sparse_pack(s, w);
	float *o1 = rnd((size_t)N * OC, 1), *o2 = rnd((size_t)N * OC, 1), *o3 = rnd((size_t)N * OC, 1);
	loom_sparse_matmul_fwd(s, o1, x, b, N);
	loom_sparse_matmul_fwd_naive(o2, x, w, m, bs, b, N, IC, OC);
	loom_k_matmul_fwd(NULL, o3, x, wz, b, N, IC, OC);
	ok(close_arr(o1, o2, (size_t)N * OC, 1e-4, 1e-4, "fwd"), "fwd = naive (N %d, %dx%d, bs %d, density %.2f)", N, IC, OC, bs, density);
	ok(close_arr(o1, o3, (size_t)N * OC, 1e-4, 1e-4, "fwd dense"), "fwd = dense on masked weights");
	float *dx1 = rnd((size_t)N * IC, 1), *dx2 = rnd((size_t)N * IC, 1), *dx3 = rnd((size_t)N * IC, 1);
	float *dw1 = rnd(nw, 1), *dw2 = malloc(sizeof(float) * nw), *dw3 = malloc(sizeof(float) * nw);
	memcpy(dw2, dw1, sizeof(float) * nw);
	memcpy(dw3, dw1, sizeof(float) * nw);
	float *db1 = rnd(OC, 1), *db2 = malloc(sizeof(float) * OC), *db3 = malloc(sizeof(float) * OC);
	memcpy(db2, db1, sizeof(float) * OC);
	memcpy(db3, db1, sizeof(float) * OC);
	loom_sparse_matmul_bwd(s, dx1, dw1, db1, dy, x, N);
	loom_sparse_matmul_bwd_naive(dx2, dw2, db2, dy, x, w, m, bs, N, IC, OC);
	loom_k_matmul_bwd(NULL, dx3, dw3, db3, dy, x, wz, N, IC, OC);
	ok(close_arr(dx1, dx2, (size_t)N * IC, 1e-4, 1e-4, "dinp"), "dinp = naive");
	ok(close_arr(dx1, dx3, (size_t)N * IC, 1e-4, 1e-4, "dinp dense"), "dinp = dense on masked weights");
	ok(close_arr(dw1, dw2, nw, 1e-4, 1e-4, "dw"), "dw = naive (live blocks accumulated, dead untouched)");
	/* the dense gradient equals the sparse one inside the live blocks */
	float *dwl = masked(dw3, m, bs, IC, OC), *dwl1 = masked(dw1, m, bs, IC, OC);
	ok(close_arr(dwl1, dwl, nw, 1e-4, 1e-4, "dw dense"), "dw = dense gradient in the live blocks");
	int untouched = 1;
	for (int c = 0; c < IC; c++)
		for (int o = 0; o < OC; o++)
			if (!m[(size_t)(c / bs) * ob + o / bs] && dw1[(size_t)c * OC + o] != dw2[(size_t)c * OC + o])
				untouched = 0;
	ok(untouched, "dead blocks of dw untouched");
	ok(close_arr(db1, db2, OC, 1e-4, 1e-4, "dbias"), "dbias = naive");
	/* dinp may be inp: the input gradient is written after every read of inp */
	size_t nx = (size_t)N * IC;
	float *xr = malloc(sizeof(float) * nx), *dwr = calloc(nw, sizeof(float));
	float *xa = malloc(sizeof(float) * nx), *dwa = calloc(nw, sizeof(float));
	float *xn = malloc(sizeof(float) * nx), *dwn = calloc(nw, sizeof(float));
	float *dwnr = calloc(nw, sizeof(float));
	memcpy(xa, x, sizeof(float) * nx);
	memcpy(xn, x, sizeof(float) * nx);
	loom_sparse_matmul_bwd(s, xr, dwr, NULL, dy, x, N);
	loom_sparse_matmul_bwd(s, xa, dwa, NULL, dy, xa, N);
	ok(!memcmp(xa, xr, sizeof(float) * nx) && !memcmp(dwa, dwr, sizeof(float) * nw),
	   "dinp may be inp (fast): same gradients as separate buffers");
	loom_sparse_matmul_bwd_naive(xr, dwnr, NULL, dy, x, w, m, bs, N, IC, OC);
	loom_sparse_matmul_bwd_naive(xn, dwn, NULL, dy, xn, w, m, bs, N, IC, OC);
	ok(!memcmp(xn, xr, sizeof(float) * nx) && !memcmp(dwn, dwnr, sizeof(float) * nw),
	   "dinp may be inp (naive)");
	free(xr), free(dwr), free(xa), free(dwa), free(xn), free(dwn), free(dwnr);
	loom_sparse_free(s);
	free(m), free(x), free(w), free(b), free(dy), free(wz), free(o1), free(o2), free(o3);
	free(dx1), free(dx2), free(dx3), free(dw1), free(dw2), free(dw3), free(db1), free(db2), free(db3);
	free(dwl), free(dwl1);
}

static int irand(int n)
{
	rs = loom_splitmix64(rs);
	return (int)(rs % (uint64_t)n);
}

/* loss = 0.5 * sum y^2 (double) of y = x @ w + b through the sparse forward */
static double loss_of(struct loom_sparse *s, const float *x, const float *w, const float *b,
		      float *y, int N, int OC)
{
	loom_sparse_pack(s, w);
	loom_sparse_matmul_fwd(s, y, x, b, N);
	double l = 0;
	for (size_t k = 0; k < (size_t)N * OC; k++)
		l += 0.5 * (double)y[k] * y[k];
	return l;
}

/* central differences of the loss against the backward's gradients (dout =
 * y) for every input, every live weight and every bias */
static void test_gradcheck(int N, int IC, int OC, int bs, double density)
{
	int ib = IC / bs, ob = OC / bs, live = (int)(density * ib * ob + 0.5);
	uint8_t *m = mask_of(ib, ob, live);
	float *x = rnd((size_t)N * IC, 1), *w = rnd((size_t)IC * OC, 0.5f), *b = rnd(OC, 1);
	float *y = malloc(sizeof(float) * N * OC), *dx = malloc(sizeof(float) * N * IC);
	float *dw = calloc((size_t)IC * OC, sizeof(float)), *db = calloc(OC, sizeof(float));
	struct loom_err err = { 0 };
	struct loom_sparse *s = loom_sparse_new(IC, OC, bs, &err);
	loom_sparse_set_mask(s, m);
	loss_of(s, x, w, b, y, N, OC);
	loom_sparse_matmul_bwd(s, dx, dw, db, y, x, N);
	const float h = 1e-2f;
	double worst = 0;
	/* thousands of tiny products: threads would only wait for each other */
	int threads = omp_get_max_threads();
	omp_set_num_threads(1);
	int checked = 0;
	/* the loss is quadratic in each parameter: central differences are
	 * exact but for rounding */
#define FD(arr, k, grad)                                                                       \
	do {                                                                                   \
		float keep = arr[k];                                                           \
		arr[k] = keep + h;                                                             \
		double lp = loss_of(s, x, w, b, y, N, OC);                                     \
		arr[k] = keep - h;                                                             \
		double lm = loss_of(s, x, w, b, y, N, OC);                                     \
		arr[k] = keep;                                                                 \
		double fd = (lp - lm) / (2 * h), e = fabs(fd - (grad)) / (0.05 + fabs(fd));    \
		worst = e > worst ? e : worst;                                                 \
		checked++;                                                                     \
	} while (0)
	for (int k = 0; k < N * IC; k++)
		FD(x, k, dx[k]);
	for (int c = 0; c < IC; c++)
		for (int o = 0; o < OC; o++)
			if (m[(c / bs) * ob + o / bs])
				FD(w, c * OC + o, dw[c * OC + o]);
	for (int o = 0; o < OC; o++)
		FD(b, o, db[o]);
#undef FD
	omp_set_num_threads(threads);
	ok(worst < 2e-3 && checked == N * IC + live * bs * bs + OC,
	   "gradient check N %d, %dx%d, bs %d, %d live blocks: %d derivatives, worst relative error %.2g",
	   N, IC, OC, bs, live, checked, worst);
	loom_sparse_free(s);
	free(m), free(x), free(w), free(b), free(y), free(dx), free(dw), free(db);
}

/* the same inputs twice, and on one then two threads: bit-identical */
static void test_determinism(int N, int IC, int OC, int bs, double density)
{
	int ib = IC / bs, ob = OC / bs, live = (int)(density * ib * ob + 0.5);
	size_t ny = (size_t)N * OC, nx = (size_t)N * IC, nw = (size_t)IC * OC;
	uint8_t *m = mask_of(ib, ob, live);
	float *x = rnd(nx, 1), *w = rnd(nw, 0.5f), *b = rnd(OC, 1), *dy = rnd(ny, 1);
	float *out[3];
	struct loom_err err = { 0 };
	struct loom_sparse *s = loom_sparse_new(IC, OC, bs, &err);
	loom_sparse_set_mask(s, m);
	int threads = omp_get_max_threads();
	for (int r = 0; r < 3; r++) {
		omp_set_num_threads(r == 2 ? 1 : threads);
		out[r] = calloc(ny + nx + nw + OC, sizeof(float));
		loom_sparse_pack(s, w);
		loom_sparse_matmul_fwd(s, out[r], x, b, N);
		loom_sparse_matmul_bwd(s, out[r] + ny, out[r] + ny + nx, out[r] + ny + nx + nw, dy, x, N);
	}
	omp_set_num_threads(threads);
	size_t bytes = sizeof(float) * (ny + nx + nw + OC);
	ok(!memcmp(out[0], out[1], bytes), "bs %d: forward and backward bit-identical run to run (%d threads)", bs, threads);
	ok(!memcmp(out[0], out[2], bytes), "bs %d: and on one thread", bs);
	loom_sparse_free(s);
	free(m), free(x), free(w), free(b), free(dy), free(out[0]), free(out[1]), free(out[2]);
}

int main(void)
{
	rs = 7;
	struct loom_err err = { 0 };
	ok(!loom_sparse_new(48, 40, 16, &err) && err.code == LOOM_EINVAL && strstr(err.msg, "16"),
	   "a block size that does not divide the width is refused: %s", err.msg);
	test_shape(5, 32, 48, 16, 0.5);
	test_shape(33, 64, 128, 16, 0.1);
	test_shape(17, 64, 32, 8, 0.25);
	test_shape(9, 64, 96, 32, 0.5);
	test_shape(4, 32, 32, 16, 1.0);
	test_shape(4, 32, 32, 16, 0.0);
	test_shape(7, 16, 24, 4, 0.5); /* a block size without a tuned kernel */
	/* random shapes: every block size, density and kind of row count */
	static const int sizes[] = { 8, 16, 32 };
	static const double dens[] = { 0, 0.1, 0.5, 1 };
	for (int b = 0; b < 3; b++)
		for (int d = 0; d < 4; d++) {
			int bs = sizes[b];
			test_shape(1 + irand(70), bs * (1 + irand(6)), bs * (1 + irand(6)), bs, dens[d]);
		}
	/* the gpt2 MLP's shapes at a few rows */
	test_shape(17, 768, 3072, 16, 0.1);
	test_shape(17, 3072, 768, 16, 0.1);
	for (int b = 0; b < 3; b++) {
		test_gradcheck(3, 2 * sizes[b], 3 * sizes[b], sizes[b], 0.5);
		test_determinism(100, 4 * sizes[b], 3 * sizes[b], sizes[b], 0.5);
	}
	return done_testing();
}
