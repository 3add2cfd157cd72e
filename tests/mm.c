/* The matmul backend (lib/kernels/loom_mm.h): every transpose form of
 * loom_mm_gemm and the matmul kernels' forward, input gradient and weight
 * gradient, fp32 and bf16, against the naive fp32 references; fp32 on a
 * team of 1 to 5 threads (the same bits at each count); the bf16
 * refusal on a CPU without bf16 (LOOM_NO_BF16).  bf16 checks are skipped
 * on a CPU without bf16 matmul. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "loom_kernels.h"
#include "loom_mm.h"
#include "tap.h"
#include "testlib.h"

static float *absdup(const float *x, size_t n)
{
	float *p = malloc(sizeof(float) * (n ? n : 1));
	for (size_t i = 0; i < n; i++)
		p[i] = fabsf(x[i]);
	return p;
}

/* |a - ref| <= tol * bound + 1e-6 everywhere, bound = sum |x||w| of each
 * element (bf16 rounds each operand by 2^-9: tol 2^-7 covers the product
 * with margin; fp32 uses 1e-5) */
static int within(const float *a, const float *ref, const float *bound, size_t n, double tol,
		  const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (!(fabs((double)a[i] - ref[i]) <= tol * bound[i] + 1e-6)) {
			diag("%s: element %zu: %.9g vs %.9g (bound %g)", what, i, a[i], ref[i],
			     tol * bound[i]);
			return 0;
		}
	return 1;
}

/* C = op(A) @ op(B) (+ C) in double */
static void gemm_ref(int ta, int tb, int M, int N, int K, const float *A, const float *B,
		     int acc, float *C)
{
	for (int m = 0; m < M; m++)
		for (int n = 0; n < N; n++) {
			double s = acc ? C[(size_t)m * N + n] : 0;
			for (int k = 0; k < K; k++)
				s += (double)(ta ? A[(size_t)k * M + m] : A[(size_t)m * K + k]) *
				     (tb ? B[(size_t)n * K + k] : B[(size_t)k * N + n]);
			C[(size_t)m * N + n] = (float)s;
		}
}

static void test_gemm(struct loom_mm *mm, double tol, int M, int N, int K)
{
	const char *name = loom_mm_name(mm);
	float *A = rnd((size_t)M * K, 1), *B = rnd((size_t)K * N, 0.5f);
	float *aA = absdup(A, (size_t)M * K), *aB = absdup(B, (size_t)K * N);
	float *C0 = rnd((size_t)M * N, 1);
	float *C = malloc(sizeof(float) * M * N), *R = malloc(sizeof(float) * M * N);
	float *bound = malloc(sizeof(float) * M * N);
	struct loom_err err = { 0 };
	for (int form = 0; form < 8; form++) {
		int ta = form & 1, tb = form >> 1 & 1, acc = form >> 2;
		memcpy(C, C0, sizeof(float) * M * N);
		memcpy(R, C0, sizeof(float) * M * N);
		loom_mm_gemm(mm, ta, tb, M, N, K, A, B, acc, C);
		gemm_ref(ta, tb, M, N, K, A, B, acc, R);
		gemm_ref(ta, tb, M, N, K, aA, aB, 0, bound);
		ok(loom_mm_check(mm, &err) == 0 && within(C, R, bound, (size_t)M * N, tol, "gemm"),
		   "%s gemm %s%s%s %dx%dx%d", name, ta ? "A^T " : "", tb ? "B^T " : "",
		   acc ? "+= " : "", M, N, K);
	}
	free(A); free(B); free(aA); free(aB); free(C0); free(C); free(R); free(bound);
}

/* the kernels' three products: forward, input gradient (dout @ w^T),
 * weight gradient (inp^T @ dout, accumulated); w registered as weights */
static void test_kernels(struct loom_mm *mm, double tol, int N, int IC, int OC)
{
	const char *name = loom_mm_name(mm);
	size_t nx = (size_t)N * IC, nw = (size_t)IC * OC, no = (size_t)N * OC;
	float *x = rnd(nx, 1), *w = rnd(nw, 0.5f), *b = rnd(OC, 1), *dout = rnd(no, 1);
	float *ax = absdup(x, nx), *aw = absdup(w, nw), *ad = absdup(dout, no);
	float *o = malloc(sizeof(float) * no), *r = malloc(sizeof(float) * no);
	float *bo = malloc(sizeof(float) * no), *dx = malloc(sizeof(float) * nx);
	float *rdx = malloc(sizeof(float) * nx), *bdx = malloc(sizeof(float) * nx);
	float *dw = rnd(nw, 1), *rdw = malloc(sizeof(float) * nw), *bdw = malloc(sizeof(float) * nw);
	float *db = rnd(OC, 1), *rdb = malloc(sizeof(float) * OC), *bdb = calloc(OC, sizeof(float));
	struct loom_err err = { 0 };
	ok(loom_mm_weights(mm, w, nw) == 0, "%s: weights registered", name);
	loom_k_matmul_fwd(mm, o, x, w, b, N, IC, OC);
	loom_k_matmul_fwd_naive(r, x, w, b, N, IC, OC);
	loom_k_matmul_fwd_naive(bo, ax, aw, NULL, N, IC, OC);
	ok(loom_mm_check(mm, &err) == 0 && within(o, r, bo, no, tol, "fwd"),
	   "%s matmul forward %dx%dx%d", name, N, IC, OC);
	memcpy(rdw, dw, sizeof(float) * nw);
	memcpy(rdb, db, sizeof(float) * OC);
	loom_k_matmul_bwd(mm, dx, dw, db, dout, x, w, N, IC, OC);
	loom_k_matmul_bwd_naive(rdx, rdw, rdb, dout, x, w, N, IC, OC);
	memset(bdw, 0, sizeof(float) * nw);
	loom_k_matmul_bwd_naive(bdx, bdw, bdb, ad, ax, aw, N, IC, OC);
	ok(loom_mm_check(mm, &err) == 0 && within(dx, rdx, bdx, nx, tol, "dinp"),
	   "%s matmul input gradient %dx%dx%d", name, N, IC, OC);
	ok(within(dw, rdw, bdw, nw, tol, "dw"), "%s matmul weight gradient (accumulated) %dx%dx%d",
	   name, N, IC, OC);
	ok(within(db, rdb, bdb, OC, 1e-5, "db"),
	   "%s bias gradient in fp32 %dx%dx%d", name, N, IC, OC);
	free(x); free(w); free(b); free(dout); free(ax); free(aw); free(ad); free(o); free(r);
	free(bo); free(dx); free(rdx); free(bdx); free(dw); free(rdw); free(bdw); free(db);
	free(rdb); free(bdb);
}

/* fp32 on a team (loom_mm.h): every form at 1 thread against the double
 * reference, and at 2, 4 and 5 threads the same bits as at 1 (the team's
 * blocks split C, never a sum) */
static void test_team(int M, int N, int K)
{
	static const int threads[] = { 2, 4, 5 };
	float *A = rnd((size_t)M * K, 1), *B = rnd((size_t)K * N, 0.5f);
	float *aA = absdup(A, (size_t)M * K), *aB = absdup(B, (size_t)K * N);
	float *C0 = rnd((size_t)M * N, 1), *C1 = malloc(sizeof(float) * M * N);
	float *C = malloc(sizeof(float) * M * N), *R = malloc(sizeof(float) * M * N);
	float *bound = malloc(sizeof(float) * M * N);
	int pm, pn;
	loom_mm_team_grid(M, N, K, 5, &pm, &pn);
	for (int form = 0; form < 8; form++) {
		int ta = form & 1, tb = form >> 1 & 1, acc = form >> 2, same = 1;
		if (M == 1 && (ta || !tb)) /* one row: only a @ B^T is split */
			continue;
		omp_set_num_threads(1);
		memcpy(C1, C0, sizeof(float) * M * N);
		memcpy(R, C0, sizeof(float) * M * N);
		loom_mm_gemm(NULL, ta, tb, M, N, K, A, B, acc, C1);
		gemm_ref(ta, tb, M, N, K, A, B, acc, R);
		gemm_ref(ta, tb, M, N, K, aA, aB, 0, bound);
		for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
			omp_set_num_threads(threads[t]);
			memcpy(C, C0, sizeof(float) * M * N);
			loom_mm_gemm(NULL, ta, tb, M, N, K, A, B, acc, C);
			same &= !memcmp(C, C1, sizeof(float) * M * N);
		}
		ok(within(C1, R, bound, (size_t)M * N, 1e-5, "team") && same,
		   "team gemm %s%s%s %dx%dx%d (%dx%d blocks on 5 threads): 2, 4, 5 threads give "
		   "the bits of 1", ta ? "A^T " : "", tb ? "B^T " : "", acc ? "+= " : "", M, N, K,
		   pm, pn);
	}
	omp_set_num_threads(omp_get_num_procs());
	free(A); free(B); free(aA); free(aB); free(C0); free(C1); free(C); free(R); free(bound);
}

static const int shapes[][3] = { { 1, 1, 1 }, { 7, 13, 5 }, { 33, 64, 96 }, { 64, 48, 192 },
				 { 130, 96, 17 } };
#define NSHAPES (sizeof shapes / sizeof shapes[0])

int main(void)
{
	rs = 7;
	struct loom_err err = { 0 };
	char why[256];

	/* refusal on a CPU without bf16 (simulated) */
	setenv("LOOM_NO_BF16", "1", 1);
	ok(loom_mm_bf16_missing(why, sizeof why) == 1 && strstr(why, "LOOM_NO_BF16"),
	   "LOOM_NO_BF16=1: bf16 reported missing (%s)", why);
	ok(loom_mm_new(LOOM_PREC_BF16, &err) == NULL && err.code == LOOM_EINVAL &&
	   !strncmp(err.msg, "precision=bf16: ", 16) && !strchr(err.msg, '\n'),
	   "bf16 backend refused with one line: %s", err.msg);
	unsetenv("LOOM_NO_BF16");

	struct loom_mm *f = loom_mm_new(LOOM_PREC_FP32, &err);
	ok(f && loom_mm_precision(f) == LOOM_PREC_FP32 && loom_mm_precision(NULL) == LOOM_PREC_FP32,
	   "fp32 backend");
	for (size_t i = 0; i < NSHAPES; i++) {
		test_gemm(f, 1e-5, shapes[i][0], shapes[i][1], shapes[i][2]);
		test_kernels(f, 1e-5, shapes[i][0], shapes[i][1], shapes[i][2]);
	}
	loom_mm_free(f);
	loom_mm_free(NULL);

	/* the team's grid: small products whole; blocks of at least
	 * LOOM_MM_PART_MIN, no more than the threads */
	int pm, pn;
	loom_mm_team_grid(64, 48, 192, 16, &pm, &pn);
	ok(pm == 1 && pn == 1, "team: a small product stays whole (%dx%d)", pm, pn);
	loom_mm_team_grid(1024, 2304, 768, 2, &pm, &pn);
	ok(pm * pn == 2, "team: gpt2's QKV forward on 2 threads, 2 blocks (%dx%d)", pm, pn);
	loom_mm_team_grid(1024, 2304, 768, 16, &pm, &pn);
	ok(pm == 2 && pn == 8, "team: on 16 threads a 2x8 grid, each block's operands small "
	   "(%dx%d)", pm, pn);
	loom_mm_team_grid(300, 300, 300, 16, &pm, &pn);
	ok(pm * pn == 3, "team: 27M multiply-adds on 16 threads, 3 blocks of >= 7.3M (%dx%d)",
	   pm, pn);
	test_team(64, 64, 3000); /* whole, on the caller at any count (OpenBLAS's
				  * own threads would sum it otherwise) */
	test_team(333, 250, 190);
	test_team(520, 300, 240);
	test_team(40, 900, 450);
	test_team(1, 4100, 3700);

	if (loom_mm_bf16_missing(why, sizeof why)) {
		ok(1, "# SKIP bf16 checks: %s", why);
		return done_testing();
	}
	struct loom_mm *h = loom_mm_new(LOOM_PREC_BF16, &err);
	ok(h && loom_mm_precision(h) == LOOM_PREC_BF16, "bf16 backend: %s", h ? "" : err.msg);
	if (!h)
		return done_testing();
	for (int rep = 0; rep < 2; rep++) /* the second round reuses cached primitives */
		for (size_t i = 0; i < NSHAPES; i++) {
			test_gemm(h, 1.0 / 128, shapes[i][0], shapes[i][1], shapes[i][2]);
			test_kernels(h, 1.0 / 128, shapes[i][0], shapes[i][1], shapes[i][2]);
		}

	/* bf16 really rounds (not an fp32 product in disguise), and the
	 * registered weights are read from their bf16 copy until registered
	 * again */
	float x[2] = { 1.0f + 1.0f / 512, 0 }, w[2] = { 1.0f, 0 }, y = 0;
	loom_mm_weights(h, w, 2);
	loom_mm_gemm(h, 0, 0, 1, 1, 1, x, w, 0, &y);
	ok(y == 1.0f, "bf16 product rounds its inputs (1+2^-9 -> 1): %.9g", y);
	w[0] = 2.0f;
	x[0] = 3.0f;
	loom_mm_gemm(h, 0, 0, 1, 1, 1, x, w, 0, &y);
	ok(y == 3.0f, "weights changed but not registered again: the bf16 copy (1) is used");
	loom_mm_weights(h, w, 2);
	loom_mm_gemm(h, 0, 0, 1, 1, 1, x, w, 0, &y);
	ok(y == 6.0f && loom_mm_check(h, &err) == 0, "registered again: the new weights (2) are used");
	/* a pinned operand is read from its copy made at pin time (so it is
	 * converted once for two products), by products in either role; a
	 * second unpinned operand meanwhile is refused */
	float pa[4] = { 1, 2, 3, 4 }, pb[4] = { 1, 0, 0, 1 }, pc[4], pd[4];
	loom_mm_pin(h, pa, 4);
	pa[0] = 100; /* not seen: the copy was made at pin time */
	loom_mm_gemm(h, 1, 0, 2, 2, 2, pa, pb, 0, pc); /* pinned as A^T, times identity */
	loom_mm_gemm(h, 0, 0, 2, 2, 2, pb, pa, 0, pd); /* identity times pinned as B */
	ok(loom_mm_check(h, &err) == 0 && pc[0] == 1 && pc[1] == 3 && pc[2] == 2 && pc[3] == 4,
	   "pinned operand: its copy is used as A (%g %g %g %g)", pc[0], pc[1], pc[2], pc[3]);
	ok(pd[0] == 1 && pd[1] == 2 && pd[2] == 3 && pd[3] == 4,
	   "pinned operand: its copy is used as B (%g %g %g %g)", pd[0], pd[1], pd[2], pd[3]);
	float pe[4] = { 1, 0, 0, 1 };
	loom_mm_gemm(h, 0, 0, 2, 2, 2, pb, pe, 0, pd);
	ok(loom_mm_check(h, &err) == LOOM_EINVAL && strstr(err.msg, "pinned"),
	   "two unpinned operands while pinned: refused (%s)", err.msg);
	loom_mm_unpin(h);
	loom_mm_gemm(h, 0, 0, 2, 2, 2, pb, pa, 0, pd);
	ok(loom_mm_check(h, &err) == 0 && pd[0] == 100 && pd[3] == 4,
	   "unpinned: converted as used again (%g)", pd[0]);
	uint16_t hb[3];
	float src[3] = { 1.0f, -2.5f, NAN };
	loom_mm_to_bf16(hb, src, 3);
	ok(hb[0] == 0x3f80 && hb[1] == 0xc020 && (hb[2] & 0x7f80) == 0x7f80 && (hb[2] & 0x7f),
	   "fp32 -> bf16 conversion (NaN stays NaN)");
	loom_mm_free(h);
	return done_testing();
}
