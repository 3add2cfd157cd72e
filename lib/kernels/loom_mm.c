/* loom_mm.c - see loom_mm.h */
#include "loom_mm.h"

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One cached oneDNN matmul and its memory objects (rebound per call). */
struct prim {
	int ta, tb, M, N, K, acc;
	dnnl_primitive_t p;
	dnnl_memory_t src, wei, dst;
};

struct loom_mm {
	int prec;
	dnnl_engine_t eng;
	dnnl_stream_t stream;
	struct prim *prims;
	int nprims, cap;
	const float *w;         /* registered weights [nw] and their bf16 copy */
	size_t nw;
	uint16_t *w16;
	uint16_t *scr[2];       /* scratch for converted A / B operands */
	size_t scr_n[2];
	const float *pin;       /* pinned operand [pin_n], converted in scr[1] */
	size_t pin_n;
	struct loom_err err;    /* sticky */
};

int loom_mm_bf16_missing(char *why, size_t n)
{
	const char *e = getenv("LOOM_NO_BF16");
	if (e && *e && strcmp(e, "0")) {
		snprintf(why, n, "bf16 matmul is unavailable (LOOM_NO_BF16 is set)");
		return 1;
	}
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[8192];
	int found = 0;
	if (f) {
		while (!found && fgets(line, sizeof line, f)) {
			if (strncmp(line, "flags", 5))
				continue;
			for (char *s = NULL, *t = strtok_r(line, " \t\n", &s); t;
			     t = strtok_r(NULL, " \t\n", &s))
				found |= !strcmp(t, "avx512_bf16") || !strcmp(t, "amx_bf16");
			break;
		}
		fclose(f);
	}
	if (found)
		return 0;
	snprintf(why, n, "this CPU has no bf16 matrix instructions (neither avx512_bf16 nor amx_bf16 in /proc/cpuinfo)");
	return 1;
}

static int dnnl_fail(struct loom_err *e, dnnl_status_t st, const char *what)
{
	return loom_err_set(e, st == dnnl_out_of_memory ? LOOM_ENOMEM : LOOM_EINVAL,
			    "oneDNN: %s failed (status %d)", what, (int)st);
}

struct loom_mm *loom_mm_new(int precision, struct loom_err *err)
{
	char why[256];
	if (precision == LOOM_PREC_BF16 && loom_mm_bf16_missing(why, sizeof why)) {
		loom_err_set(err, LOOM_EINVAL, "precision=bf16: %s", why);
		return NULL;
	}
	struct loom_mm *mm = calloc(1, sizeof *mm);
	if (!mm) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	mm->prec = precision;
	if (precision == LOOM_PREC_BF16) {
		dnnl_status_t st = dnnl_engine_create(&mm->eng, dnnl_cpu, 0);
		if (st == dnnl_success && (st = dnnl_stream_create(&mm->stream, mm->eng,
								     dnnl_stream_default_flags)))
			dnnl_fail(err, st, "stream creation");
		else if (st)
			dnnl_fail(err, st, "CPU engine creation");
		if (st) {
			loom_mm_free(mm);
			return NULL;
		}
	}
	return mm;
}

void loom_mm_free(struct loom_mm *mm)
{
	if (!mm)
		return;
	for (int i = 0; i < mm->nprims; i++) {
		dnnl_primitive_destroy(mm->prims[i].p);
		dnnl_memory_destroy(mm->prims[i].src);
		dnnl_memory_destroy(mm->prims[i].wei);
		dnnl_memory_destroy(mm->prims[i].dst);
	}
	free(mm->prims);
	if (mm->stream)
		dnnl_stream_destroy(mm->stream);
	if (mm->eng)
		dnnl_engine_destroy(mm->eng);
	loom_lazy_free(mm->w16);
	free(mm->scr[0]);
	free(mm->scr[1]);
	free(mm);
}

int loom_mm_precision(const struct loom_mm *mm)
{
	return mm ? mm->prec : LOOM_PREC_FP32;
}

const char *loom_mm_name(const struct loom_mm *mm)
{
	return loom_mm_precision(mm) == LOOM_PREC_BF16 ? "oneDNN bf16 matmul" : "OpenBLAS sgemm";
}

void loom_mm_to_bf16(uint16_t *dst, const float *src, size_t n)
{
	#pragma omp parallel for simd schedule(static)
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &src[i], 4);
		uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
		uint32_t r = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
		dst[i] = (uint16_t)(nan ? (u >> 16) | 0x40u : r);
	}
}

static uint16_t *grow(uint16_t **buf, size_t *cap, size_t n)
{
	if (n <= *cap)
		return *buf;
	free(*buf);
	*cap = 0;
	if (posix_memalign((void **)buf, 64, n * sizeof(uint16_t))) {
		*buf = NULL;
		return NULL;
	}
	*cap = n;
	return *buf;
}

/* Register w[0..n) with a bf16 copy of its own size (lazily backed). */
static int weights_at(struct loom_mm *mm, const float *w, size_t n)
{
	if (n > mm->nw || !mm->w16) {
		loom_lazy_free(mm->w16);
		mm->nw = 0;
		if (!(mm->w16 = loom_lazy_alloc((n ? n : 1) * sizeof(uint16_t))))
			return mm->err.code ? mm->err.code :
			       loom_err_set(&mm->err, LOOM_ENOMEM,
					    "out of memory for the bf16 copy of %zu weights", n);
	}
	mm->w = w;
	mm->nw = n;
	return 0;
}

int loom_mm_weights(struct loom_mm *mm, const float *w, size_t n)
{
	return loom_mm_weights_range(mm, w, n, 0, n);
}

int loom_mm_weights_range(struct loom_mm *mm, const float *w, size_t n, size_t lo, size_t hi)
{
	if (!mm || mm->prec != LOOM_PREC_BF16)
		return 0;
	int rc = weights_at(mm, w, n);
	if (!rc)
		loom_mm_to_bf16(mm->w16 + lo, w + lo, hi - lo);
	return rc;
}

void loom_mm_weights_drop(struct loom_mm *mm, size_t lo, size_t hi)
{
	if (mm && mm->w16 && hi <= mm->nw && lo < hi)
		loom_lazy_release(mm->w16 + lo, (hi - lo) * sizeof(uint16_t));
}

/* The bf16 version of operand x[n]: the weight copy, the pinned copy, or
 * x converted into scratch slot s (slot 0 while one is pinned: *used
 * counts the uses of slot 0, which the pinned state allows once).  NULL
 * on ENOMEM or a second use of slot 0 (error set). */
static const uint16_t *operand(struct loom_mm *mm, const float *x, size_t n, int s, int *used)
{
	uintptr_t p = (uintptr_t)x, w0 = (uintptr_t)mm->w;
	if (mm->w16 && p >= w0 && (p - w0) / sizeof(float) + n <= mm->nw)
		return mm->w16 + (p - w0) / sizeof(float);
	if (mm->pin) {
		if (x == mm->pin && n == mm->pin_n)
			return mm->scr[1];
		if ((*used)++) {
			loom_err_set(&mm->err, LOOM_EINVAL,
				     "bf16 product with two unpinned operands while one is pinned");
			return NULL;
		}
		s = 0;
	}
	uint16_t *d = grow(&mm->scr[s], &mm->scr_n[s], n);
	if (d)
		loom_mm_to_bf16(d, x, n);
	else
		loom_err_set(&mm->err, LOOM_ENOMEM, "out of memory for a bf16 operand of %zu values",
			     n);
	return d;
}

void loom_mm_pin(struct loom_mm *mm, const float *x, size_t n)
{
	if (!mm || mm->prec != LOOM_PREC_BF16 || mm->err.code)
		return;
	mm->pin = NULL;
	uint16_t *d = grow(&mm->scr[1], &mm->scr_n[1], n);
	if (!d) {
		loom_err_set(&mm->err, LOOM_ENOMEM, "out of memory for a bf16 operand of %zu values",
			     n);
		return;
	}
	loom_mm_to_bf16(d, x, n);
	mm->pin = x;
	mm->pin_n = n;
}

void loom_mm_unpin(struct loom_mm *mm)
{
	if (mm)
		mm->pin = NULL;
}

static struct prim *get_prim(struct loom_mm *mm, int ta, int tb, int M, int N, int K, int acc)
{
	for (int i = 0; i < mm->nprims; i++) {
		struct prim *q = &mm->prims[i];
		if (q->ta == ta && q->tb == tb && q->M == M && q->N == N && q->K == K && q->acc == acc)
			return q;
	}
	if (mm->nprims == mm->cap) {
		int cap = mm->cap ? 2 * mm->cap : 16;
		struct prim *np = realloc(mm->prims, (size_t)cap * sizeof *np);
		if (!np) {
			loom_err_set(&mm->err, LOOM_ENOMEM, "out of memory");
			return NULL;
		}
		mm->prims = np;
		mm->cap = cap;
	}
	struct prim q = { ta, tb, M, N, K, acc, NULL, NULL, NULL, NULL };
	dnnl_memory_desc_t a_md, b_md, c_md;
	dnnl_dims_t ad = { M, K }, bd = { K, N }, cd = { M, N };
	dnnl_dims_t as = { ta ? 1 : K, ta ? M : 1 }, bs = { tb ? 1 : N, tb ? K : 1 }, cs = { N, 1 };
	dnnl_matmul_desc_t md;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_status_t st;
	const char *what = "matmul description";
	if ((st = dnnl_memory_desc_init_by_strides(&a_md, 2, ad, dnnl_bf16, as)) ||
	    (st = dnnl_memory_desc_init_by_strides(&b_md, 2, bd, dnnl_bf16, bs)) ||
	    (st = dnnl_memory_desc_init_by_strides(&c_md, 2, cd, dnnl_f32, cs)) ||
	    (st = dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &c_md)))
		goto fail;
	what = "matmul attributes";
	if ((st = dnnl_primitive_attr_create(&attr)) || (st = dnnl_post_ops_create(&po)) ||
	    (acc && (st = dnnl_post_ops_append_sum(po, 1.0f))) ||
	    (st = dnnl_primitive_attr_set_post_ops(attr, po)))
		goto fail;
	what = "matmul primitive";
	if ((st = dnnl_primitive_desc_create(&pd, &md, attr, mm->eng, NULL)) ||
	    (st = dnnl_primitive_create(&q.p, pd)))
		goto fail;
	what = "matmul memory";
	if ((st = dnnl_memory_create(&q.src, &a_md, mm->eng, DNNL_MEMORY_NONE)) ||
	    (st = dnnl_memory_create(&q.wei, &b_md, mm->eng, DNNL_MEMORY_NONE)) ||
	    (st = dnnl_memory_create(&q.dst, &c_md, mm->eng, DNNL_MEMORY_NONE)))
		goto fail;
	dnnl_primitive_desc_destroy(pd);
	dnnl_post_ops_destroy(po);
	dnnl_primitive_attr_destroy(attr);
	mm->prims[mm->nprims] = q;
	return &mm->prims[mm->nprims++];
fail:
	loom_err_set(&mm->err, st == dnnl_out_of_memory ? LOOM_ENOMEM : LOOM_EINVAL,
		     "oneDNN: %s for a %dx%dx%d bf16 product failed (status %d)", what, M, N, K,
		     (int)st);
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (po)
		dnnl_post_ops_destroy(po);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	if (q.p)
		dnnl_primitive_destroy(q.p);
	dnnl_memory_destroy(q.src);
	dnnl_memory_destroy(q.wei);
	dnnl_memory_destroy(q.dst);
	return NULL;
}

/* The rows [m0, m0 + m) and columns [n0, n0 + n) of C = op(A) op(B) + beta C
 * on this thread (OpenBLAS sgemm, or sgemv for one row; loom keeps
 * OpenBLAS at one thread, loom_blas.c). */
static void sgemm_block(int ta, int tb, int M, int N, int K, const float *A, const float *B,
			float beta, float *C, int m0, int m, int n0, int n)
{
	if (M == 1 && !ta) /* one row: c = op(B)^T a */
		cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? n : K, tb ? K : n,
			    1.0f, B + (tb ? (size_t)n0 * K : (size_t)n0), tb ? K : N, A, 1, beta,
			    C + n0, 1);
	else
		cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
			    m, n, K, 1.0f, A + (ta ? (size_t)m0 : (size_t)m0 * K), ta ? M : K,
			    B + (tb ? (size_t)n0 * K : (size_t)n0), tb ? K : N, beta,
			    C + (size_t)m0 * N + n0, N);
}

/* [lo, hi) of part i of p over [0, L), boundaries on multiples of 16 */
static void part(int L, int p, int i, int *lo, int *n)
{
	int u = (L + 15) / 16, a = (int)((long)u * i / p) * 16, b = (int)((long)u * (i + 1) / p) * 16;
	*lo = a < L ? a : L;
	*n = (b < L ? b : L) - *lo;
}

void loom_mm_team_grid(int M, int N, int K, int threads, int *pm, int *pn)
{
	/* parts of at least LOOM_MM_PART_MIN multiply-adds (OpenBLAS sgemm's own
	 * "direct" path, whose results differ, takes only smaller ones) */
	double mnk = (double)M * N * K;
	int p = threads < mnk / LOOM_MM_PART_MIN ? threads : (int)(mnk / LOOM_MM_PART_MIN);
	p = p < 1 ? 1 : p;
	*pm = 1;
	*pn = p;
	double best = 1e300;
	for (int a = 1; a <= p; a++) {
		/* each thread packs its rows of op(A) and columns of op(B) */
		double cost = (double)M / a + (double)N / (p / a);
		if (p % a == 0 && (M + 15) / 16 >= a && (N + 15) / 16 >= p / a && cost < best) {
			best = cost;
			*pm = a;
			*pn = p / a;
		}
	}
}

/* fp32: each thread of the team one block of C in a pm x pn grid of
 * blocks, by single-threaded sgemm; nothing shared, one barrier. */
static void sgemm_team(int ta, int tb, int M, int N, int K, const float *A, const float *B,
		       float beta, float *C)
{
	int pm = 1, pn = 1;
	/* a row times B[K,N] (sgemv's column-sweep form: each sum's order
	 * depends on the block) stays whole */
	if (!omp_in_parallel() && !(M == 1 && !ta && !tb))
		loom_mm_team_grid(M, N, K, omp_get_max_threads(), &pm, &pn);
	if (pm * pn == 1) { /* whole, on this thread: an OpenMP build of OpenBLAS
			     * would thread it over omp_get_max_threads() */
		int nt = omp_get_max_threads();
		omp_set_num_threads(1);
		sgemm_block(ta, tb, M, N, K, A, B, beta, C, 0, M, 0, N);
		omp_set_num_threads(nt);
		return;
	}
	#pragma omp parallel for num_threads(pm * pn) schedule(static, 1)
	for (int t = 0; t < pm * pn; t++) {
		int m0, m, n0, n;
		part(M, pm, t / pn, &m0, &m);
		part(N, pn, t % pn, &n0, &n);
		if (m > 0 && n > 0)
			sgemm_block(ta, tb, M, N, K, A, B, beta, C, m0, m, n0, n);
	}
}

void loom_mm_gemm(struct loom_mm *mm, int ta, int tb, int M, int N, int K, const float *A,
		  const float *B, int accumulate, float *C)
{
	if (!mm || mm->prec == LOOM_PREC_FP32) {
		sgemm_team(ta, tb, M, N, K, A, B, accumulate ? 1.0f : 0.0f, C);
		return;
	}
	if (mm->err.code)
		return;
	int used = 0;
	struct prim *q = get_prim(mm, ta, tb, M, N, K, accumulate);
	const uint16_t *a = q ? operand(mm, A, (size_t)M * K, 0, &used) : NULL;
	const uint16_t *b = a ? operand(mm, B, (size_t)K * N, 1, &used) : NULL;
	if (!b)
		return;
	dnnl_status_t st;
	dnnl_exec_arg_t args[3] = {
		{ DNNL_ARG_SRC, q->src }, { DNNL_ARG_WEIGHTS, q->wei }, { DNNL_ARG_DST, q->dst },
	};
	if ((st = dnnl_memory_set_data_handle(q->src, (void *)a)) ||
	    (st = dnnl_memory_set_data_handle(q->wei, (void *)b)) ||
	    (st = dnnl_memory_set_data_handle(q->dst, C)) ||
	    (st = dnnl_primitive_execute(q->p, mm->stream, 3, args)) ||
	    (st = dnnl_stream_wait(mm->stream)))
		dnnl_fail(&mm->err, st, "matmul");
}

int loom_mm_check(struct loom_mm *mm, struct loom_err *err)
{
	if (!mm || !mm->err.code)
		return 0;
	int rc = loom_err_set(err, mm->err.code, "%s", mm->err.msg);
	loom_err_clear(&mm->err);
	return rc;
}
