/* loom_sparse.c - block-sparse weights and their kernels (see loom_sparse.h) */
#include "loom_sparse.h"

#include "loom_kernels.h"

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

/* Block sizes without a tuned kernel: plain loops over the live blocks
 * (a thread per row of inp, per block of dw, per column of dbias). */
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
}

/* ---- fast kernels ------------------------------------------------------
 *
 * Written on GCC vectors of 8 floats (one ymm; two xmm in the baseline
 * clone), a block row being BS/8 of them; BS, the row tile R and the block
 * rows per pass A are constants of each inlined instance, so accumulators
 * live in registers.  Every output value is summed by one thread in a
 * fixed order (blocks ascending, rows ascending), whatever the thread
 * count.  The parallel loops are in the public (cloned) functions with a
 * switch on the block size inside, so that each instance is outlined and
 * specialised on its own. */
typedef float v8 __attribute__((vector_size(32), aligned(4), may_alias));
#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 32")
enum { VMAX = 4, RMAX = 16, AMAX = 16 }; /* BS <= 32, R <= RMAX, A <= AMAX */

#define LD(p) (*(const v8 *)(p))
#define ST(p, v) (*(v8 *)(p) = (v))
/* broadcast (0 + x would be an add: -0 + 0 is +0) */
#define BC(x) ((v8){ (x), (x), (x), (x), (x), (x), (x), (x) })

/* Register tiles (s->wide: AVX-512's 32 vector registers, else 16): the
 * forward and the input gradient keep R rows x BS/8 accumulators (+ a
 * block row and a broadcast), the weight gradient A block rows x BS/8
 * (+ a dout row).  F(BS, R, A) for kind = bs * 2 + wide; tile_rows() is R. */
#define BY_KIND(kind, F)                                                                       \
	switch (kind) {                                                                        \
	case 16: { F(8, 12, 8); } break;                                                       \
	case 17: { F(8, 16, 8); } break;                                                       \
	case 32: { F(16, 6, 4); } break;                                                       \
	case 33: { F(16, 14, 8); } break;                                                      \
	case 64: { F(32, 2, 2); } break;                                                       \
	case 65: { F(32, 6, 4); } break;                                                       \
	}

static int tile_rows(const struct loom_sparse *s)
{
	switch (s->bs) {
	case 8: return s->wide ? 16 : 12;
	case 16: return s->wide ? 14 : 6;
	default: return s->wide ? 6 : 2;
	}
}

/* y[r][0..BS) (r < R, rows ys apart) = init[0..BS) (zero if NULL) +
 * sum over k in [k0,k1), a < BS of x(r, idx[k]*BS + a) * blk[k][a][0..BS),
 * x(r, c) = x[r * rs + c * cs]: R rows of a product against one block
 * column. */
INLINE void rows_tile(float *y, size_t ys, const float *x, size_t rs, size_t cs,
		      const float *init, const float *blk, const int32_t *idx, int k0, int k1,
		      const int BS, const int R)
{
	const int NV = BS / 8;
	v8 acc[RMAX][VMAX] = { 0 };
	UNROLL for (int r = 0; r < R; r++)
		UNROLL for (int v = 0; v < NV; v++)
			acc[r][v] = init ? LD(init + 8 * v) : (v8){ 0 };
	for (int k = k0; k < k1; k++) {
		const float *xb = x + (size_t)idx[k] * BS * cs, *wb = blk + (size_t)k * BS * BS;
		for (int a = 0; a < BS; a++) {
			v8 w[VMAX] = { 0 };
			UNROLL for (int v = 0; v < NV; v++)
				w[v] = LD(wb + a * BS + 8 * v);
			UNROLL for (int r = 0; r < R; r++) {
				v8 xv = BC(xb[r * rs + a * cs]);
				UNROLL for (int v = 0; v < NV; v++)
					acc[r][v] += xv * w[v];
			}
		}
	}
	UNROLL for (int r = 0; r < R; r++)
		UNROLL for (int v = 0; v < NV; v++)
			ST(y + r * ys + 8 * v, acc[r][v]);
}

/* Rows tile t of y[N, nb*BS] (rows ys apart) = x[N, W] @ the blocks
 * (+ bias): block column c holds blocks ptr[c] .. ptr[c+1]-1 of input
 * block idx[k].  Tiles t < N/R have R rows, copied transposed into xt[W][R]
 * (the thread's, or NULL: read in place), the others one (the last N % R
 * rows). */
INLINE void rows_product(int t, float *y, size_t ys, const float *x, size_t W,
			 const float *bias, const float *blk, const int32_t *ptr,
			 const int32_t *idx, int nb, int N, float *xt, const int BS, const int R)
{
	int nt = N / R;
	if (t < nt) {
		const float *xr = x + (size_t)t * R * W;
		if (xt)
			for (size_t c = 0; c < W; c++)
				UNROLL for (int r = 0; r < R; r++)
					xt[c * R + r] = xr[r * W + c];
		y += (size_t)t * R * ys;
		for (int c = 0; c < nb; c++)
			rows_tile(y + (size_t)c * BS, ys, xt ? xt : xr, xt ? 1 : W, xt ? R : 1,
				  bias ? bias + c * BS : NULL, blk, idx, ptr[c], ptr[c + 1], BS, R);
	} else {
		int n = nt * R + t - nt;
		for (int c = 0; c < nb; c++)
			rows_tile(y + (size_t)n * ys + (size_t)c * BS, ys, x + (size_t)n * W, 0, 1,
				  bias ? bias + c * BS : NULL, blk, idx, ptr[c], ptr[c + 1], BS, 1);
	}
}

/* g[a][0..BS) (a < A, rows gs apart) += sum over n in [0,N) of
 * x[n][a] * d[n][0..BS) (rows xs and ds apart). */
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

/* Rows of the weight gradient per pass over a chunk: x's and dout's rows
 * of a chunk stay in L1 across the passes over a block's rows. */
#define WG_ROWS 128

/* One live block g[BS][BS] (rows gs apart) += x^T d over n < N, x and d
 * block columns of inp and dout (rows xs and ds apart). */
INLINE void block_grad(float *g, size_t gs, const float *x, size_t xs, const float *d,
		       size_t ds, int N, const int BS, const int A)
{
	for (int n0 = 0; n0 < N; n0 += WG_ROWS) {
		int m = N - n0 < WG_ROWS ? N - n0 : WG_ROWS;
		for (int a0 = 0; a0 < BS; a0 += A)
			block_rows(g + a0 * gs, gs, x + (size_t)n0 * xs + a0, xs,
				   d + (size_t)n0 * ds, ds, m, BS, A);
	}
}

/* dst[n][0..BS) = src[n * ss + 0..BS) for n < N: a panel of BS columns. */
INLINE void panel(float *dst, const float *src, size_t ss, int N, const int BS)
{
	for (int n = 0; n < N; n++)
		UNROLL for (int v = 0; v < BS / 8; v++)
			ST(dst + (size_t)n * BS + 8 * v, LD(src + n * ss + 8 * v));
}

/* dbias[0..BS) += sum over n < N of d[n * ds + 0..BS), rows in order */
INLINE void col_sum(float *dbias, const float *d, size_t ds, int N, const int BS)
{
	v8 acc[VMAX] = { 0 };
	for (int n = 0; n < N; n++)
		UNROLL for (int v = 0; v < BS / 8; v++)
			acc[v] += LD(d + n * ds + 8 * v);
	UNROLL for (int v = 0; v < BS / 8; v++)
		ST(dbias + 8 * v, LD(dbias + 8 * v) + acc[v]);
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
#define FWD(BS, R, A) rows_product(t, out, s->OC, inp, s->IC, bias, s->val, s->col_ptr, s->row_idx, s->ob, N, xt, BS, R)
	#pragma omp parallel
	{
		float *xt = malloc(sizeof(float) * R * s->IC);
		#pragma omp for schedule(static)
		for (int t = 0; t < N / R + N % R; t++)
			BY_KIND(kind, FWD)
		free(xt);
	}
#undef FWD
}

/* The weight gradient reads inp and dout by block columns, gathered first
 * (row by row: strided reads would miss the TLB at every row) into panels
 * xp[IC/BS][N][BS] and dp[OC/BS][N][BS].  A thread takes all the blocks
 * of a column of the weight (dp's panel stays in its cache while xp's
 * stream), or of a row when inp is the wider.  Without memory for the
 * panels, the same kernels read inp and dout in place. */
LOOM_SIMD
void loom_sparse_matmul_bwd(const struct loom_sparse *s, float *dinp, float *dw, float *dbias,
			    const float *dout, const float *inp, int N)
{
	if (s->bs != 8 && s->bs != 16 && s->bs != 32) {
		bwd_any(s, dinp, dw, dbias, dout, inp, N);
		return;
	}
	int R = tile_rows(s), kind = s->bs * 2 + s->wide, by_row = s->IC > s->OC;
	size_t IC = s->IC, OC = s->OC, nbs = (size_t)N * s->bs;
	float *xp = malloc(sizeof(float) * N * IC), *dp = malloc(sizeof(float) * N * OC);
	/* column c of x (rows xs apart) and the stride, in the panels or in place */
	const float *xc = xp ? xp : inp, *dc = dp ? dp : dout;
	size_t xcs = xp ? nbs : (size_t)s->bs, xs = xp ? (size_t)s->bs : IC;
	size_t dcs = dp ? nbs : (size_t)s->bs, ds = dp ? (size_t)s->bs : OC;
#define DINP(BS, R, A) rows_product(t, dinp, IC, dout, OC, NULL, s->valt, s->row_ptr, s->col_idx, s->ib, N, xt, BS, R)
#define PANELS(BS, R, A) \
	for (int c = 0; xp && c < s->ib; c++) \
		panel(xp + c * nbs + (size_t)n0 * BS, inp + n0 * IC + c * BS, IC, n1 - n0, BS); \
	for (int c = 0; dp && c < s->ob; c++) \
		panel(dp + c * nbs + (size_t)n0 * BS, dout + n0 * OC + c * BS, OC, n1 - n0, BS)
#define SUM(BS, R, A) col_sum(dbias + j * BS, dc + j * dcs, ds, N, BS)
#define BY_ROW(BS, R, A) \
	for (int k = s->row_ptr[i]; k < s->row_ptr[i + 1]; k++) \
		block_grad(dw + (size_t)i * BS * OC + (size_t)s->col_idx[k] * BS, OC, xc + i * xcs, xs, \
			   dc + s->col_idx[k] * dcs, ds, N, BS, A)
#define BY_COL(BS, R, A) \
	for (int k = s->col_ptr[j]; k < s->col_ptr[j + 1]; k++) \
		block_grad(dw + (size_t)s->row_idx[k] * BS * OC + (size_t)j * BS, OC, \
			   xc + s->row_idx[k] * xcs, xs, dc + j * dcs, ds, N, BS, A)
	#pragma omp parallel
	{
		if (xp || dp) {
			#pragma omp for schedule(static)
			for (int n0 = 0; n0 < N; n0 += 64) {
				int n1 = N - n0 < 64 ? N : n0 + 64;
				BY_KIND(kind, PANELS)
			}
		}
		if (dbias) {
			#pragma omp for schedule(static) nowait
			for (int j = 0; j < s->ob; j++)
				BY_KIND(kind, SUM)
		}
		if (by_row) {
			#pragma omp for schedule(dynamic, 1) nowait
			for (int i = 0; i < s->ib; i++)
				BY_KIND(kind, BY_ROW)
		} else {
			#pragma omp for schedule(dynamic, 1) nowait
			for (int j = 0; j < s->ob; j++)
				BY_KIND(kind, BY_COL)
		}
		/* the input gradient last: every read of inp is done, so dinp
		 * may be inp */
		if (dinp) {
			#pragma omp barrier
			float *xt = malloc(sizeof(float) * R * OC);
			#pragma omp for schedule(static) nowait
			for (int t = 0; t < N / R + N % R; t++)
				BY_KIND(kind, DINP)
			free(xt);
		}
	}
#undef DINP
#undef PANELS
#undef SUM
#undef BY_ROW
#undef BY_COL
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
}
