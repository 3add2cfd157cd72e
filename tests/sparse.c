/* The block-sparse kernels (lib/kernels/loom_sparse.h) against their naive
 * references and against the dense kernels on masked weights. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom_kernels.h"
#include "loom_sparse.h"
#include "tap.h"

static uint64_t rs = 7;

static float frand(void)
{
	rs = loom_k_hash64(rs);
	return (float)((rs >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float *rnd(size_t n, float scale)
{
	float *p = malloc(sizeof(float) * (n ? n : 1));
	for (size_t i = 0; i < n; i++)
		p[i] = frand() * scale;
	return p;
}

/* max |a-b| / (atol + rtol*|b|) <= 1 */
static int close_arr(const float *a, const float *b, size_t n, double atol, double rtol,
		     const char *what)
{
	double worst = 0;
	size_t wi = 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)a[i] - b[i]) / (atol + rtol * fabs(b[i]));
		if (!(e <= worst)) {
			worst = e;
			wi = i;
		}
	}
	if (!(worst <= 1.0))
		diag("%s: worst at %zu: %g vs %g", what, wi, a[wi], b[wi]);
	return worst <= 1.0;
}

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
	loom_sparse_free(s);
	free(m), free(x), free(w), free(b), free(dy), free(wz), free(o1), free(o2), free(o3);
	free(dx1), free(dx2), free(dx3), free(dw1), free(dw2), free(dw3), free(db1), free(db2), free(db3);
	free(dwl), free(dwl1);
}

int main(void)
{
	struct loom_err err = { 0 };
	ok(!loom_sparse_new(48, 40, 16, &err) && err.code == LOOM_EINVAL && strstr(err.msg, "16"),
	   "a block size that does not divide the width is refused: %s", err.msg);
	test_shape(5, 32, 48, 16, 0.5);
	test_shape(33, 64, 128, 16, 0.1);
	test_shape(17, 64, 32, 8, 0.25);
	test_shape(9, 64, 96, 32, 0.5);
	test_shape(4, 32, 32, 16, 1.0);
	test_shape(4, 32, 32, 16, 0.0);
	return done_testing();
}
