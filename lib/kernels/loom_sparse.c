/* loom_sparse.c - block-sparse weights and their kernels (see loom_sparse.h) */
#include "loom_sparse.h"

#include "loom_kernels.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

struct loom_sparse {
	int IC, OC, bs, ib, ob; /* ib = IC/bs input blocks, ob = OC/bs output blocks */
	int wide;               /* AVX-512: 32 vector registers for the tiles */
	int nnz;
	int32_t *col_ptr, *row_idx; /* BSC by output block j */
	int32_t *row_ptr, *col_idx; /* by input block i, for the input gradient */
	int32_t *tblk;              /* transposed order -> block number in val */
	float *val, *valt;          /* [nnz][bs][bs]: [a][b] and [b][a] */
	struct loom_err err;
};

struct loom_sparse *loom_sparse_new(int IC, int OC, int bs, struct loom_err *err)
{
	if (bs < 1 || IC < bs || OC < bs || IC % bs || OC % bs) {
		loom_err_set(err, LOOM_EINVAL,
			     "block size %d does not divide the layer's %d x %d weight", bs, IC, OC);
		return NULL;
	}
	struct loom_sparse *s = calloc(1, sizeof *s);
	if (s) {
		s->IC = IC, s->OC = OC, s->bs = bs, s->ib = IC / bs, s->ob = OC / bs;
		s->wide = !strcmp(loom_k_isa(), "AVX-512");
		s->col_ptr = calloc((size_t)s->ob + 1, sizeof(int32_t));
		s->row_ptr = calloc((size_t)s->ib + 1, sizeof(int32_t));
	}
	if (!s || !s->col_ptr || !s->row_ptr) {
		loom_sparse_free(s);
		loom_err_set(err, LOOM_ENOMEM, "out of memory for a %d x %d block-sparse weight",
			     IC, OC);
		return NULL;
	}
	return s;
}

static void free_blocks(struct loom_sparse *s)
{
	free(s->row_idx);
	free(s->col_idx);
	free(s->tblk);
	free(s->val);
	free(s->valt);
	s->row_idx = s->col_idx = s->tblk = NULL;
	s->val = s->valt = NULL;
}

void loom_sparse_free(struct loom_sparse *s)
{
	if (!s)
		return;
	free_blocks(s);
	free(s->col_ptr);
	free(s->row_ptr);
	free(s);
}

const char *loom_sparse_error(const struct loom_sparse *s)
{
	return s->err.msg;
}

int loom_sparse_live(const struct loom_sparse *s)
{
	return s->nnz;
}

int loom_sparse_set_mask(struct loom_sparse *s, const uint8_t *mask)
{
	int ib = s->ib, ob = s->ob, nnz = 0;
	size_t bb = (size_t)s->bs * s->bs;
	for (size_t k = 0; k < (size_t)ib * ob; k++)
		nnz += mask[k] != 0;
	free_blocks(s);
	s->nnz = 0;
	size_t n = nnz ? (size_t)nnz : 1;
	s->row_idx = malloc(n * sizeof(int32_t));
	s->col_idx = malloc(n * sizeof(int32_t));
	s->tblk = malloc(n * sizeof(int32_t));
	s->val = malloc(n * bb * sizeof(float));
	s->valt = malloc(n * bb * sizeof(float));
	if (!s->row_idx || !s->col_idx || !s->tblk || !s->val || !s->valt) {
		free_blocks(s);
		memset(s->col_ptr, 0, ((size_t)ob + 1) * sizeof(int32_t));
		memset(s->row_ptr, 0, ((size_t)ib + 1) * sizeof(int32_t));
		return loom_err_set(&s->err, LOOM_ENOMEM, "out of memory for %d live blocks", nnz);
	}
	/* by output block column j, input rows ascending */
	int k = 0;
	for (int j = 0; j < ob; j++) {
		s->col_ptr[j] = k;
		for (int i = 0; i < ib; i++)
			if (mask[(size_t)i * ob + j])
				s->row_idx[k++] = i;
	}
	s->col_ptr[ob] = k;
	/* by input block row i, output columns ascending */
	k = 0;
	for (int i = 0; i < ib; i++) {
		s->row_ptr[i] = k;
		for (int j = 0; j < ob; j++)
			if (mask[(size_t)i * ob + j]) {
				int b = s->col_ptr[j];
				while (s->row_idx[b] != i)
					b++;
				s->col_idx[k] = j;
				s->tblk[k++] = b;
			}
	}
	s->row_ptr[ib] = k;
	s->nnz = nnz;
	return 0;
}

void loom_sparse_pack(struct loom_sparse *s, const float *w)
{
	int bs = s->bs, OC = s->OC;
	size_t bb = (size_t)bs * bs;
	#pragma omp parallel for schedule(static)
	for (int j = 0; j < s->ob; j++)
		for (int k = s->col_ptr[j]; k < s->col_ptr[j + 1]; k++) {
			const float *src = w + (size_t)s->row_idx[k] * bs * OC + (size_t)j * bs;
			float *v = s->val + k * bb;
			for (int a = 0; a < bs; a++)
				memcpy(v + (size_t)a * bs, src + (size_t)a * OC, bs * sizeof(float));
		}
	#pragma omp parallel for schedule(static)
	for (int i = 0; i < s->ib; i++)
		for (int k = s->row_ptr[i]; k < s->row_ptr[i + 1]; k++) {
			const float *v = s->val + (size_t)s->tblk[k] * bb;
			float *t = s->valt + k * bb;
			for (int a = 0; a < bs; a++)
				for (int b = 0; b < bs; b++)
					t[(size_t)b * bs + a] = v[(size_t)a * bs + b];
		}
}

static void fwd_any(const struct loom_sparse *s, float *out, const float *inp, const float *bias,
		    int N)
{
	int bs = s->bs, IC = s->IC, OC = s->OC;
	size_t bb = (size_t)bs * bs;
	#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *x = inp + (size_t)n * IC;
		float *y = out + (size_t)n * OC;
		for (int j = 0; j < s->ob; j++) {
			float *yj = y + (size_t)j * bs;
			for (int b = 0; b < bs; b++)
				yj[b] = bias ? bias[j * bs + b] : 0.0f;
			for (int k = s->col_ptr[j]; k < s->col_ptr[j + 1]; k++) {
				const float *xi = x + (size_t)s->row_idx[k] * bs, *v = s->val + k * bb;
				for (int a = 0; a < bs; a++)
					for (int b = 0; b < bs; b++)
						yj[b] += xi[a] * v[(size_t)a * bs + b];
			}
		}
	}
}

static void bwd_any(const struct loom_sparse *s, float *dinp, float *dw, float *dbias,
		    const float *dout, const float *inp, int N)
{
	int bs = s->bs, IC = s->IC, OC = s->OC;
	size_t bb = (size_t)bs * bs;
	if (dinp) {
		#pragma omp parallel for schedule(static)
		for (int n = 0; n < N; n++) {
			const float *dy = dout + (size_t)n * OC;
			float *dx = dinp + (size_t)n * IC;
			for (int i = 0; i < s->ib; i++) {
				float *dxi = dx + (size_t)i * bs;
				for (int a = 0; a < bs; a++)
					dxi[a] = 0.0f;
				for (int k = s->row_ptr[i]; k < s->row_ptr[i + 1]; k++) {
					const float *dyj = dy + (size_t)s->col_idx[k] * bs;
					const float *t = s->valt + k * bb;
					for (int b = 0; b < bs; b++)
						for (int a = 0; a < bs; a++)
							dxi[a] += dyj[b] * t[(size_t)b * bs + a];
				}
			}
		}
	}
	#pragma omp parallel for schedule(dynamic)
	for (int k = 0; k < s->nnz; k++) {
		int j = 0;
		while (s->col_ptr[j + 1] <= k)
			j++;
		int i = s->row_idx[k];
		float *g = dw + (size_t)i * bs * OC + (size_t)j * bs;
		for (int n = 0; n < N; n++) {
			const float *x = inp + (size_t)n * IC + (size_t)i * bs;
			const float *dy = dout + (size_t)n * OC + (size_t)j * bs;
			for (int a = 0; a < bs; a++)
				for (int b = 0; b < bs; b++)
					g[(size_t)a * OC + b] += x[a] * dy[b];
		}
	}
	if (dbias) {
		#pragma omp parallel for schedule(static)
		for (int o = 0; o < OC; o++) {
			float acc = 0.0f;
			for (int n = 0; n < N; n++)
				acc += dout[(size_t)n * OC + o];
			dbias[o] += acc;
		}
	}
}

/* ---- fast kernels ------------------------------------------------------
 *
 * Written on GCC vectors of 8 floats (one ymm; two halves of an xmm pair
 * in the baseline clone), a block row being BS/8 of them; BS, the row tile
 * R and the block rows per pass A are constants of each inlined instance,
 * so accumulators live in registers.  Every output value is summed by one
 * thread in a fixed order (blocks ascending, rows ascending), whatever the
 * thread count. */
typedef float v8 __attribute__((vector_size(32), aligned(4), may_alias));
#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 32")
enum { VMAX = 4, RMAX = 16, AMAX = 16 }; /* BS <= 32, R <= RMAX, A <= AMAX */

#define LD(p) (*(const v8 *)(p))
#define ST(p, v) (*(v8 *)(p) = (v))
/* broadcast (0 + x would be an add: -0 + 0 is +0) */
#define BC(x) ((v8){ (x), (x), (x), (x), (x), (x), (x), (x) })

/* y[r][0..BS) (r < R, rows ys apart) = init[0..BS) (zero if NULL) +
 * sum over k in [k0,k1), a < BS of x[r][idx[k]*BS + a] * blk[k][a][0..BS)
 * (rows of x xs apart): R rows of a product against one block column. */
INLINE void rows_tile(float *y, size_t ys, const float *x, size_t xs, const float *init,
		      const float *blk, const int32_t *idx, int k0, int k1, const int BS,
		      const int R)
{
	const int NV = BS / 8;
	v8 acc[RMAX][VMAX] = { 0 };
	UNROLL for (int r = 0; r < R; r++)
		UNROLL for (int v = 0; v < NV; v++)
			acc[r][v] = init ? LD(init + 8 * v) : (v8){ 0 };
	for (int k = k0; k < k1; k++) {
		const float *xb = x + (size_t)idx[k] * BS, *wb = blk + (size_t)k * BS * BS;
		for (int a = 0; a < BS; a++) {
			v8 w[VMAX] = { 0 };
			UNROLL for (int v = 0; v < NV; v++)
				w[v] = LD(wb + a * BS + 8 * v);
			UNROLL for (int r = 0; r < R; r++) {
				v8 xv = BC(xb[r * xs + a]);
				UNROLL for (int v = 0; v < NV; v++)
					acc[r][v] += xv * w[v];
			}
		}
	}
	UNROLL for (int r = 0; r < R; r++)
		UNROLL for (int v = 0; v < NV; v++)
			ST(y + r * ys + 8 * v, acc[r][v]);
}

/* g[a][0..BS) (a < A, rows gs apart) += sum over n in [0,N) of
 * x[n][a] * d[n][0..BS) (rows xs and ds apart): A rows of one block's
 * weight gradient. */
INLINE void block_rows(float *g, size_t gs, const float *x, size_t xs, const float *d,
		       size_t ds, int N, const int BS, const int A)
{
	const int NV = BS / 8;
	v8 acc[AMAX][VMAX] = { 0 };
	UNROLL for (int a = 0; a < A; a++)
		UNROLL for (int v = 0; v < NV; v++)
			acc[a][v] = LD(g + a * gs + 8 * v);
	for (int n = 0; n < N; n++) {
		v8 dv[VMAX] = { 0 };
		UNROLL for (int v = 0; v < NV; v++)
			dv[v] = LD(d + n * ds + 8 * v);
		UNROLL for (int a = 0; a < A; a++) {
			v8 xv = BC(x[n * xs + a]);
			UNROLL for (int v = 0; v < NV; v++)
				acc[a][v] += xv * dv[v];
		}
	}
	UNROLL for (int a = 0; a < A; a++)
		UNROLL for (int v = 0; v < NV; v++)
			ST(g + a * gs + 8 * v, acc[a][v]);
}

/* Rows tile t of y[N, nb*BS] (rows ys apart) = x @ the blocks (+ bias):
 * block column c holds blocks ptr[c] .. ptr[c+1]-1 of input block idx[k].
 * Tiles t < N/R have R rows, the others one (the last N % R rows). */
INLINE void rows_product(int t, float *y, size_t ys, const float *x, size_t xs,
			 const float *bias, const float *blk, const int32_t *ptr,
			 const int32_t *idx, int nb, int N, const int BS, const int R)
{
	int nt = N / R;
	if (t < nt)
		for (int c = 0; c < nb; c++)
			rows_tile(y + (size_t)t * R * ys + (size_t)c * BS, ys, x + (size_t)t * R * xs,
				  xs, bias ? bias + c * BS : NULL, blk, idx, ptr[c], ptr[c + 1], BS,
				  R);
	else
		for (int c = 0, n = nt * R + t - nt; c < nb; c++)
			rows_tile(y + (size_t)n * ys + (size_t)c * BS, ys, x + (size_t)n * xs, xs,
				  bias ? bias + c * BS : NULL, blk, idx, ptr[c], ptr[c + 1], BS, 1);
}

/* Rows of the weight gradient per pass over a chunk: x's and dout's rows
 * of a chunk stay in L1 across the passes over a block's rows. */
#define WG_ROWS 128

/* dst[n][0..BS) = src[n * ss + 0..BS) for n < N: a panel of BS columns. */
INLINE void panel(float *dst, const float *src, size_t ss, int N, const int BS)
{
	for (int n = 0; n < N; n++)
		UNROLL for (int v = 0; v < BS / 8; v++)
			ST(dst + (size_t)n * BS + 8 * v, LD(src + n * ss + 8 * v));
}

/* Block column j of dw += inp^T @ dout in the live blocks, and of
 * dbias += sum_n dout; each block summed over all rows in order.  x is
 * inp's block column i at x + i * xi, rows xs apart (panels of xp, or inp
 * itself); d is dout's block column j, rows ds apart. */
INLINE void weight_grad(const struct loom_sparse *s, int j, float *dw, float *dbias,
			const float *d, size_t ds, const float *x, size_t xi, size_t xs, int N,
			const int BS, const int A)
{
	size_t OC = s->OC;
	for (int k = s->col_ptr[j]; k < s->col_ptr[j + 1]; k++) {
		size_t i = s->row_idx[k];
		float *g = dw + i * BS * OC + (size_t)j * BS;
		for (int n0 = 0; n0 < N; n0 += WG_ROWS) {
			int m = N - n0 < WG_ROWS ? N - n0 : WG_ROWS;
			for (int a0 = 0; a0 < BS; a0 += A)
				block_rows(g + a0 * OC, OC, x + i * xi + n0 * xs + a0, xs,
					   d + n0 * ds, ds, m, BS, A);
		}
	}
	if (dbias) {
		v8 acc[VMAX] = { 0 };
		for (int n = 0; n < N; n++)
			UNROLL for (int v = 0; v < BS / 8; v++)
				acc[v] += LD(d + n * ds + 8 * v);
		UNROLL for (int v = 0; v < BS / 8; v++)
			ST(dbias + j * BS + 8 * v, LD(dbias + j * BS + 8 * v) + acc[v]);
	}
}

/* Register tiles (s->wide: AVX-512's 32 vector registers, else 16): the
 * forward and the input gradient keep R rows x BS/8 accumulators (+ a
 * block row and a broadcast), the weight gradient A block rows x BS/8
 * (+ a dout row).  The parallel loops are here, not in the inlined
 * helpers, so that each instance is outlined (and cloned) on its own. */
static int tile_rows(const struct loom_sparse *s)
{
	switch (s->bs) {
	case 8: return s->wide ? 16 : 12;
	case 16: return s->wide ? 12 : 6;
	default: return s->wide ? 6 : 2;
	}
}

LOOM_SIMD
void loom_sparse_matmul_fwd(const struct loom_sparse *s, float *out, const float *inp,
			    const float *bias, int N)
{
	if (s->bs != 8 && s->bs != 16 && s->bs != 32) {
		fwd_any(s, out, inp, bias, N);
		return;
	}
	int R = tile_rows(s), kind = s->bs * 2 + s->wide;
#define FWD(BS, R) rows_product(t, out, s->OC, inp, s->IC, bias, s->val, s->col_ptr, s->row_idx, s->ob, N, BS, R)
	#pragma omp parallel for schedule(static)
	for (int t = 0; t < N / R + N % R; t++) {
		switch (kind) {
		case 16: FWD(8, 12); break;
		case 17: FWD(8, 16); break;
		case 32: FWD(16, 6); break;
		case 33: FWD(16, 12); break;
		case 64: FWD(32, 2); break;
		case 65: FWD(32, 6); break;
		}
	}
#undef FWD
}

/* The weight gradient reads inp and dout by block columns: both are
 * gathered into panels first ([N][BS] each, contiguous), inp's at once
 * (xp, shared), dout's a column at a time by the thread that owns it (dp,
 * N*BS floats a thread).  Without memory for them, the same kernel reads
 * inp and dout in place. */
LOOM_SIMD
void loom_sparse_matmul_bwd(const struct loom_sparse *s, float *dinp, float *dw, float *dbias,
			    const float *dout, const float *inp, int N)
{
	if (s->bs != 8 && s->bs != 16 && s->bs != 32) {
		bwd_any(s, dinp, dw, dbias, dout, inp, N);
		return;
	}
	int R = tile_rows(s), kind = s->bs * 2 + s->wide, bs = s->bs;
	size_t IC = s->IC, OC = s->OC;
	float *xp = malloc(sizeof(float) * N * IC);
	float *dp = xp ? malloc(sizeof(float) * N * bs * omp_get_max_threads()) : NULL;
	if (!dp) {
		free(xp);
		xp = NULL;
	}
#define DINP(BS, R) rows_product(t, dinp, IC, dout, OC, NULL, s->valt, s->row_ptr, s->col_idx, s->ib, N, BS, R)
#define PANELS(BS) for (int i = 0; i < s->ib; i++) panel(xp + i * N * IC / s->ib + (size_t)n0 * BS, inp + n0 * IC + i * BS, IC, n1 - n0, BS)
#define DW(BS, A) (xp ? (panel(d, dout + (size_t)j * BS, OC, N, BS), weight_grad(s, j, dw, dbias, d, BS, xp, (size_t)N * BS, BS, N, BS, A)) \
		      : weight_grad(s, j, dw, dbias, dout + (size_t)j * BS, OC, inp, BS, IC, N, BS, A))
	#pragma omp parallel
	{
		if (dinp) {
			#pragma omp for schedule(static)
			for (int t = 0; t < N / R + N % R; t++) {
				switch (kind) {
				case 16: DINP(8, 12); break;
				case 17: DINP(8, 16); break;
				case 32: DINP(16, 6); break;
				case 33: DINP(16, 12); break;
				case 64: DINP(32, 2); break;
				case 65: DINP(32, 6); break;
				}
			}
		}
		if (xp) {
			#pragma omp for schedule(static)
			for (int n0 = 0; n0 < N; n0 += 64) {
				int n1 = N - n0 < 64 ? N : n0 + 64;
				switch (bs) {
				case 8: PANELS(8); break;
				case 16: PANELS(16); break;
				case 32: PANELS(32); break;
				}
			}
		}
		float *d = xp ? dp + (size_t)omp_get_thread_num() * N * bs : NULL;
		#pragma omp for schedule(dynamic, 1) nowait
		for (int j = 0; j < s->ob; j++) {
			switch (kind) {
			case 16: DW(8, 8); break;
			case 17: DW(8, 8); break;
			case 32: DW(16, 4); break;
			case 33: DW(16, 8); break;
			case 64: DW(32, 2); break;
			case 65: DW(32, 4); break;
			}
		}
	}
#undef DINP
#undef PANELS
#undef DW
	free(xp);
	free(dp);
}

void loom_sparse_matmul_fwd_naive(float *out, const float *inp, const float *w,
				  const uint8_t *mask, int bs, const float *bias, int N, int IC,
				  int OC)
{
	int ob = OC / bs;
	for (int n = 0; n < N; n++)
		for (int o = 0; o < OC; o++) {
			float acc = bias ? bias[o] : 0.0f;
			for (int c = 0; c < IC; c++)
				if (mask[(size_t)(c / bs) * ob + o / bs])
					acc += inp[(size_t)n * IC + c] * w[(size_t)c * OC + o];
			out[(size_t)n * OC + o] = acc;
		}
}

void loom_sparse_matmul_bwd_naive(float *dinp, float *dw, float *dbias, const float *dout,
				  const float *inp, const float *w, const uint8_t *mask, int bs,
				  int N, int IC, int OC)
{
	int ob = OC / bs;
	for (int n = 0; n < N; n++) {
		for (int c = 0; c < IC; c++) {
			float acc = 0.0f;
			for (int o = 0; o < OC; o++)
				if (mask[(size_t)(c / bs) * ob + o / bs])
					acc += dout[(size_t)n * OC + o] * w[(size_t)c * OC + o];
			if (dinp)
				dinp[(size_t)n * IC + c] = acc;
		}
	}
	for (int c = 0; c < IC; c++)
		for (int o = 0; o < OC; o++) {
			if (!mask[(size_t)(c / bs) * ob + o / bs])
				continue;
			float acc = 0.0f;
			for (int n = 0; n < N; n++)
				acc += inp[(size_t)n * IC + c] * dout[(size_t)n * OC + o];
			dw[(size_t)c * OC + o] += acc;
		}
	if (dbias)
		for (int o = 0; o < OC; o++) {
			float acc = 0.0f;
			for (int n = 0; n < N; n++)
				acc += dout[(size_t)n * OC + o];
			dbias[o] += acc;
		}
}
