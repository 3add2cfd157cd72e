/* loom_kernels.c - fast (sgemm + OpenMP) and naive GPT kernels; see loom_kernels.h. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#endif

#include "loom_kernels.h"

/* `omp simd` is a request: clang reports loops it could not vectorise (e.g.
 * under sanitizers) as warnings, which -Werror would turn into errors. */
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

const char *loom_k_isa(void)
{
#if defined(__x86_64__) && defined(__gnu_linux__) && !defined(LOOM_NO_CLONES)
	__builtin_cpu_init();
#if defined(__clang__) /* clang knows no x86-64-vN feature strings */
	if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd"))
		return "AVX-512";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "AVX2";
#else
	if (__builtin_cpu_supports("x86-64-v4"))
		return "AVX-512";
	if (__builtin_cpu_supports("x86-64-v3"))
		return "AVX2";
#endif
#endif
	return "baseline";
}

/* Element-wise loops with sqrtf vectorise only when the compiler may ignore
 * errno (no argument here is ever out of domain): the Makefile compiles
 * this file with -fno-math-errno. */

/* expf that vectorises (glibc's expf is a scalar call; its vector
 * variants need -ffast-math): exp(x) = 2^n * exp(r), n = round(x / ln 2)
 * by the 1.5*2^23 trick, r = x - n ln 2 in two parts (Cephes), a
 * degree-6 polynomial for exp(r); relative error ~2 ulp.  x is clamped to
 * [-87.3, 88.7] (no inf, no denormals: exp(-inf) gives ~1e-38, not 0);
 * NaN stays NaN.  Used inside `omp simd` loops. */
static inline float vexpf(float x)
{
	x = x < -87.3f ? -87.3f : x;
	x = x > 88.7f ? 88.7f : x;
	float t = x * 1.44269504088896341f + 12582912.0f;
	float n = t - 12582912.0f;
	float r = x - n * 0.693359375f;
	r = r - n * -2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	uint32_t e = ((uint32_t)(int32_t)n + 127u) << 23; /* unsigned: a NaN's n shifts no sign */
	float s;
	memcpy(&s, &e, sizeof s);
	return p * s;
}

/* tanh through exp (much faster than tanhf; absolute error ~1e-7, and
 * GELU only ever uses 1 + tanh). */
static inline float fast_tanh(float u)
{
	return 1.0f - 2.0f / (1.0f + vexpf(2.0f * u));
}

/* Reductions over rows (weight/bias gradients): inside a parallel region,
 * the calling thread's contiguous range [*c0, *c1) of C columns, in
 * multiples of 16.  Each column is summed by one thread, rows in order, so
 * the sums do not depend on the thread count. */
static inline void col_range(int C, int *c0, int *c1)
{
	int nt = omp_get_num_threads(), t = omp_get_thread_num();
	int w = ((C + nt - 1) / nt + 15) & ~15;
	*c0 = t * w < C ? t * w : C;
	*c1 = *c0 + w < C ? *c0 + w : C;
}

/* dst[c] += sum over n of src[n, c], src [N, OC]: each thread adds the
 * rows of its columns (col_range) in order into a local accumulator (a few
 * kB, in L1) while reading src row by row.  Inlined into cloned kernels. */
#define COLSUM_MAX 1024
static inline __attribute__((always_inline)) void colsum_add(float *dst, const float *src,
							      int N, int OC)
{
	#pragma omp parallel
	{
		int c0, c1;
		col_range(OC, &c0, &c1);
		float acc[COLSUM_MAX];
		for (int s0 = c0; s0 < c1; s0 += COLSUM_MAX) {
			int m = c1 - s0 < COLSUM_MAX ? c1 - s0 : COLSUM_MAX;
			memset(acc, 0, sizeof(float) * m);
			for (int n = 0; n < N; n++) {
				const float *r = src + (size_t)n * OC + s0;
				#pragma omp simd
				for (int c = 0; c < m; c++)
					acc[c] += r[c];
			}
			for (int c = 0; c < m; c++)
				dst[s0 + c] += acc[c];
		}
	}
}

/* ---- encoder ----------------------------------------------------------- */

LOOM_SIMD
void loom_k_encoder_fwd(float *out, const int32_t *tok, const float *wte, int v0, int nv,
			const float *wpe, const int32_t *typ, const float *wtt, const int32_t *pos,
			int B, int T, int C)
{
	#pragma omp parallel for schedule(static)
	for (int bt = 0; bt < B * T; bt++) {
		int id = tok[bt] - v0;
		const float *e = id >= 0 && id < nv ? wte + (size_t)id * C : NULL;
		const float *p = wpe ? wpe + (size_t)(pos ? pos[bt] : bt % T) * C : NULL;
		const float *y = typ ? wtt + (size_t)typ[bt] * C : NULL;
		float *o = out + (size_t)bt * C;
		if (e && p && y) {
			for (int c = 0; c < C; c++)
				o[c] = e[c] + y[c] + p[c];
		} else if (e && p) {
			for (int c = 0; c < C; c++)
				o[c] = e[c] + p[c];
		} else { /* a slice of the model: what this rank holds */
			for (int c = 0; c < C; c++)
				o[c] = (e ? e[c] : 0.0f) + (y ? y[c] : 0.0f) + (p ? p[c] : 0.0f);
		}
	}
}

void loom_k_encoder_fwd_naive(float *out, const int32_t *tok, const float *wte, int v0,
			      int nv, const float *wpe, const int32_t *typ, const float *wtt,
			      const int32_t *pos, int B, int T, int C)
{
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int c = 0; c < C; c++) {
				int id = tok[b * T + t] - v0;
				out[((size_t)b * T + t) * C + c] =
					(id >= 0 && id < nv ? wte[(size_t)id * C + c] : 0.0f) +
					(typ ? wtt[(size_t)typ[b * T + t] * C + c] : 0.0f) +
					(wpe ? wpe[(size_t)(pos ? pos[b * T + t] : t) * C + c] : 0.0f);
			}
}

LOOM_SIMD
void loom_k_encoder_bwd(float *dwte, int v0, int nv, float *dwpe, float *dwtt,
			const float *dout, const int32_t *tok, const int32_t *typ,
			const int32_t *pos, int B, int T, int C)
{
	#pragma omp parallel
	{
		int c0, c1;
		col_range(C, &c0, &c1);
		for (int b = 0; b < B; b++)
			for (int t = 0; t < T; t++) {
				const float *d = dout + ((size_t)b * T + t) * C;
				int id = tok[b * T + t] - v0;
				float *p = dwpe + (size_t)(pos ? pos[b * T + t] : t) * C;
				#pragma omp simd
				for (int c = c0; c < c1; c++)
					p[c] += d[c];
				if (id >= 0 && id < nv) {
					float *e = dwte + (size_t)id * C;
					#pragma omp simd
					for (int c = c0; c < c1; c++)
						e[c] += d[c];
				}
				if (typ) {
					float *y = dwtt + (size_t)typ[b * T + t] * C;
					#pragma omp simd
					for (int c = c0; c < c1; c++)
						y[c] += d[c];
				}
			}
	}
}

void loom_k_encoder_bwd_naive(float *dwte, int v0, int nv, float *dwpe, float *dwtt,
			      const float *dout, const int32_t *tok, const int32_t *typ,
			      const int32_t *pos, int B, int T, int C)
{
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int c = 0; c < C; c++) {
				float d = dout[((size_t)b * T + t) * C + c];
				int id = tok[b * T + t] - v0;
				if (id >= 0 && id < nv)
					dwte[(size_t)id * C + c] += d;
				dwpe[(size_t)(pos ? pos[b * T + t] : t) * C + c] += d;
				if (typ)
					dwtt[(size_t)typ[b * T + t] * C + c] += d;
			}
}

/* ---- layernorm --------------------------------------------------------- */

static void ln_row(float *o, float *mean, float *rstd, const float *x, const float *w,
		   const float *b, int C, float eps)
{
	float m = 0, v = 0;
	#pragma omp simd reduction(+:m)
	for (int c = 0; c < C; c++)
		m += x[c];
	m /= C;
	#pragma omp simd reduction(+:v)
	for (int c = 0; c < C; c++) {
		float d = x[c] - m;
		v += d * d;
	}
	v /= C;
	float s = 1.0f / sqrtf(v + eps);
	#pragma omp simd
	for (int c = 0; c < C; c++)
		o[c] = (x[c] - m) * s * w[c] + b[c];
	*mean = m;
	*rstd = s;
}

LOOM_SIMD
void loom_k_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
			  const float *w, const float *b, int N, int C, float eps)
{
	#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++)
		ln_row(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, w, b, C, eps);
}

void loom_k_layernorm_fwd_naive(float *out, float *mean, float *rstd, const float *inp,
				const float *w, const float *b, int N, int C, float eps)
{
	for (int n = 0; n < N; n++) {
		const float *x = inp + (size_t)n * C;
		double m = 0, v = 0;
		for (int c = 0; c < C; c++)
			m += x[c];
		m /= C;
		for (int c = 0; c < C; c++)
			v += (x[c] - m) * (x[c] - m);
		v /= C;
		double s = 1.0 / sqrt(v + eps);
		for (int c = 0; c < C; c++)
			out[(size_t)n * C + c] = (float)((x[c] - m) * s * w[c] + b[c]);
		mean[n] = (float)m;
		rstd[n] = (float)s;
	}
}

LOOM_SIMD
void loom_k_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout,
			  const float *inp, const float *w, const float *mean,
			  const float *rstd, int N, int C)
{
	#pragma omp parallel
	{
		#pragma omp for schedule(static)
		for (int n = 0; n < N; n++) {
			const float *dy = dout + (size_t)n * C, *x = inp + (size_t)n * C;
			float *dx = dinp + (size_t)n * C;
			float m = mean[n], s = rstd[n], a = 0, bb = 0;
			#pragma omp simd reduction(+:a, bb)
			for (int c = 0; c < C; c++) {
				float dn = dy[c] * w[c];
				a += dn;
				bb += dn * (x[c] - m) * s;
			}
			a /= C;
			bb /= C;
			#pragma omp simd
			for (int c = 0; c < C; c++) {
				float norm = (x[c] - m) * s;
				dx[c] += (dy[c] * w[c] - a - norm * bb) * s;
			}
		}
		/* dw, db: the rows streamed through this thread's columns */
		int c0, c1;
		col_range(C, &c0, &c1);
		for (int n = 0; n < N; n++) {
			const float *dy = dout + (size_t)n * C, *x = inp + (size_t)n * C;
			float m = mean[n], s = rstd[n];
			#pragma omp simd
			for (int c = c0; c < c1; c++) {
				dw[c] += dy[c] * (x[c] - m) * s;
				db[c] += dy[c];
			}
		}
	}
}

void loom_k_layernorm_bwd_naive(float *dinp, float *dw, float *db, const float *dout,
				const float *inp, const float *w, const float *mean,
				const float *rstd, int N, int C)
{
	for (int n = 0; n < N; n++) {
		const float *dy = dout + (size_t)n * C, *x = inp + (size_t)n * C;
		double a = 0, bb = 0;
		for (int c = 0; c < C; c++) {
			double norm = (x[c] - mean[n]) * (double)rstd[n];
			a += dy[c] * w[c];
			bb += dy[c] * w[c] * norm;
		}
		a /= C;
		bb /= C;
		for (int c = 0; c < C; c++) {
			double norm = (x[c] - mean[n]) * (double)rstd[n];
			dw[c] += (float)(dy[c] * norm);
			db[c] += dy[c];
			dinp[(size_t)n * C + c] += (float)((dy[c] * w[c] - a - norm * bb) * rstd[n]);
		}
	}
}

/* ---- matmul ------------------------------------------------------------ */

/* The fast matmul and linear kernels: w[IC,OC] (wt 0) or w[OC,IC] (wt 1:
 * nn.Linear, read transposed by the backend, never copied). */
static inline __attribute__((always_inline)) void prod_fwd(struct loom_mm *mm, int wt,
							    float *out, const float *inp,
							    const float *w, const float *bias,
							    int N, int IC, int OC)
{
	if (bias) {
		#pragma omp parallel for schedule(static)
		for (int n = 0; n < N; n++)
			memcpy(out + (size_t)n * OC, bias, sizeof(float) * OC);
	}
	loom_mm_gemm(mm, 0, wt, N, OC, IC, inp, w, bias != NULL, out);
}

static inline __attribute__((always_inline)) void prod_bwd(struct loom_mm *mm, int wt,
							    float *dinp, float *dw, float *dbias,
							    const float *dout, const float *inp,
							    const float *w, int N, int IC, int OC)
{
	loom_mm_pin(mm, dout, (size_t)N * OC); /* bf16: dout converted once for both */
	if (wt)
		loom_mm_gemm(mm, 1, 0, OC, IC, N, dout, inp, 1, dw);
	else
		loom_mm_gemm(mm, 1, 0, IC, OC, N, inp, dout, 1, dw);
	if (dbias)
		colsum_add(dbias, dout, N, OC);
	if (dinp) /* last: it may overwrite inp */
		loom_mm_gemm(mm, 0, !wt, N, IC, OC, dout, w, 0, dinp);
	loom_mm_unpin(mm);
}

LOOM_SIMD
void loom_k_matmul_fwd(struct loom_mm *mm, float *out, const float *inp, const float *w,
		       const float *bias, int N, int IC, int OC)
{
	prod_fwd(mm, 0, out, inp, w, bias, N, IC, OC);
}

void loom_k_matmul_fwd_naive(float *out, const float *inp, const float *w,
			     const float *bias, int N, int IC, int OC)
{
	for (int n = 0; n < N; n++)
		for (int o = 0; o < OC; o++) {
			double s = bias ? bias[o] : 0;
			for (int i = 0; i < IC; i++)
				s += (double)inp[(size_t)n * IC + i] * w[(size_t)i * OC + o];
			out[(size_t)n * OC + o] = (float)s;
		}
}

LOOM_SIMD
void loom_k_matmul_bwd(struct loom_mm *mm, float *dinp, float *dw, float *dbias,
		       const float *dout, const float *inp, const float *w, int N, int IC, int OC)
{
	prod_bwd(mm, 0, dinp, dw, dbias, dout, inp, w, N, IC, OC);
}

void loom_k_matmul_bwd_naive(float *dinp, float *dw, float *dbias, const float *dout,
			     const float *inp, const float *w, int N, int IC, int OC)
{
	for (int i = 0; i < IC; i++)
		for (int o = 0; o < OC; o++) {
			double s = 0;
			for (int n = 0; n < N; n++)
				s += (double)inp[(size_t)n * IC + i] * dout[(size_t)n * OC + o];
			dw[(size_t)i * OC + o] += (float)s;
		}
	if (dbias)
		for (int o = 0; o < OC; o++) {
			double s = 0;
			for (int n = 0; n < N; n++)
				s += dout[(size_t)n * OC + o];
			dbias[o] += (float)s;
		}
	if (dinp)
		for (int n = 0; n < N; n++)
			for (int i = 0; i < IC; i++) {
				double s = 0;
				for (int o = 0; o < OC; o++)
					s += (double)dout[(size_t)n * OC + o] * w[(size_t)i * OC + o];
				dinp[(size_t)n * IC + i] = (float)s;
			}
}

LOOM_SIMD
void loom_k_linear_fwd(struct loom_mm *mm, float *out, const float *inp, const float *w,
		       const float *bias, int N, int IC, int OC)
{
	prod_fwd(mm, 1, out, inp, w, bias, N, IC, OC);
}

LOOM_SIMD
void loom_k_linear_bwd(struct loom_mm *mm, float *dinp, float *dw, float *dbias,
		       const float *dout, const float *inp, const float *w, int N, int IC, int OC)
{
	prod_bwd(mm, 1, dinp, dw, dbias, dout, inp, w, N, IC, OC);
}

/* ---- counter-based randomness (dropout masks) ------------------------ */

static inline int keep(uint64_t key, size_t i, float p)
{
	uint64_t h = loom_splitmix64(key ^ loom_splitmix64((uint64_t)i));
	return (float)((h >> 40) * (1.0 / 16777216.0)) >= p;
}

/* ---- attention --------------------------------------------------------- */

/* Row i of head bh with attention dropout: d[j] = p_ij * mask_ij / (1-p)
 * for the nv visible keys j < nv, 0 after.  The mask element index is
 * (bh * T + i) * T + j, the same in the fast and the naive kernels. */
static void att_drop_row(float *d, const float *prow, int i, int nv, int T, size_t bh,
			 float p, uint64_t key)
{
	float s = 1.0f / (1.0f - p);
	size_t base = (bh * T + i) * (size_t)T;
	for (int j = 0; j < nv; j++)
		d[j] = keep(key, base + j, p) ? prow[j] * s : 0.0f;
	for (int j = nv; j < T; j++)
		d[j] = 0;
}

/* Keys visible to every query of batch row b without a causal mask: the
 * row's valid length, kept in 1..T. */
static inline int att_len(const int32_t *len, int b, int T)
{
	int n = len[b];
	return n < 1 ? 1 : n > T ? T : n;
}

/* The fast kernels are flash attention (Dao et al. 2022, with
 * FlashAttention-2's loop order): queries and keys are taken in tiles of
 * ATT_BQ and ATT_BK rows, and a query tile meets only the key tiles up to
 * its last query (causal), or (with lengths) every key tile up to the
 * row's length.  Forward computes S = scale Q K^T one tile at a time with an
 * online softmax: the running row max m and sum l, the output accumulated
 * unnormalised and rescaled by exp(m_old - m_new) when the max grows; only
 * the output and lse = m + log l per row are kept.  Backward recomputes
 * P = exp(S - lse) tile by tile.  Scratch is a few tiles per thread, so
 * nothing of size T x T exists. */
#define ATT_BQ 64 /* queries per tile */
#define ATT_BK 64 /* keys per tile (64..256 and 64 or 128 queries measured alike) */

/* Keys j0 .. j0+n-1 of a tile of nk are visible to query i (j <= i). */
static inline int att_ncols(int i, int j0, int nk)
{
	int n = i - j0 + 1;
	return n < 0 ? 0 : n < nk ? n : nk;
}

/* Row b's place: its first token r0 and its query count Tq (all T of a
 * padded row; a packed row's len[b], or causal (len NULL) its
 * off[b+1] - off[b], which may be 0), and where its lse rows start. */
struct att_row {
	size_t r0, lse0;
	int Tq;
};

static inline struct att_row att_row(const int32_t *len, const int32_t *off, int b, int h, int T,
				     int NH)
{
	struct att_row w;
	if (off) {
		w.Tq = len ? att_len(len, b, T) : off[b + 1] - off[b];
		w.r0 = (size_t)off[b];
		w.lse0 = (size_t)off[b] * NH + (size_t)h * w.Tq;
	} else {
		w.Tq = T;
		w.r0 = (size_t)b * T;
		w.lse0 = ((size_t)b * NH + h) * T;
	}
	return w;
}

/* The kernels below for heads h0 .. h0 + NH - 1 of NHd (the dropout
 * mask's layout: loom_k_attention_fwd_heads); the public ones wrap them. */
LOOM_SIMD
static int attention_fwd(float *out, float *lse, const float *qkv, const int32_t *len,
			 const int32_t *off, int B, int T, int C, int NH, int h0, int NHd, float p,
			 uint64_t key)
{
	int hs = C / NH, C3 = 3 * C, BH = B * NH, nb = (T + ATT_BQ - 1) / ATT_BQ, fail = 0;
	float scale = 1.0f / sqrtf((float)hs), s = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
	#pragma omp parallel
	{
		/* S tile, its dropped copy, the unnormalised output O, m and l */
		float *S = malloc(sizeof(float) * ((size_t)2 * ATT_BQ * ATT_BK +
						   (size_t)ATT_BQ * hs + 2 * ATT_BQ));
		if (!S) {
			#pragma omp atomic write
			fail = 1;
		}
		float *D = S + ATT_BQ * ATT_BK, *O = D + ATT_BQ * ATT_BK;
		float *m = O + (size_t)ATT_BQ * hs, *l = m + ATT_BQ;
		/* (query tile, b, h), the tiles with the most key tiles first;
		 * each item is one thread's, so results do not depend on the
		 * schedule */
		#pragma omp for schedule(dynamic)
		for (int it = 0; it < nb * BH; it++) {
			if (!S)
				continue;
			int ib = nb - 1 - it / BH, bh = it % BH, b = bh / NH, h = bh % NH;
			struct att_row w = att_row(len, off, b, h, T, NH);
			int i0 = ib * ATT_BQ, nq = w.Tq - i0 < ATT_BQ ? w.Tq - i0 : ATT_BQ;
			if (nq <= 0)
				continue;
			const float *q = qkv + w.r0 * C3 + h * hs, *k = q + C, *v = q + 2 * C;
			for (int r = 0; r < nq; r++) {
				m[r] = -INFINITY;
				l[r] = 0;
			}
			memset(O, 0, sizeof(float) * (size_t)nq * hs);
			/* causal: keys after the tile's last query are never
			 * visible; else those from the row's length on */
			int jend = len ? att_len(len, b, T) : i0 + nq;
			for (int j0 = 0; j0 < jend; j0 += ATT_BK) {
				int nk = jend - j0 < ATT_BK ? jend - j0 : ATT_BK;
				/* S[nq, nk] = scale Q[i0:] K[j0:]^T */
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, hs, scale,
					    q + (size_t)i0 * C3, C3, k + (size_t)j0 * C3, C3, 0.0f, S,
					    ATT_BK);
				for (int r = 0; r < nq; r++) {
					int i = i0 + r, n = len ? nk : att_ncols(i, j0, nk);
					float *sr = S + r * ATT_BK, *orow = O + (size_t)r * hs;
					float mx = m[r], sum = 0;
					#pragma omp simd reduction(max:mx)
					for (int c = 0; c < n; c++)
						mx = sr[c] > mx ? sr[c] : mx;
					float al = vexpf(m[r] - mx); /* ~0 on the first tile */
					#pragma omp simd reduction(+:sum)
					for (int c = 0; c < n; c++) {
						sr[c] = vexpf(sr[c] - mx);
						sum += sr[c];
					}
					for (int c = n; c < nk; c++)
						sr[c] = 0;
					l[r] = l[r] * al + sum;
					m[r] = mx;
					#pragma omp simd
					for (int d = 0; d < hs; d++)
						orow[d] *= al;
					if (p > 0) {
						float *dr = D + r * ATT_BK;
						size_t base = (((size_t)b * NHd + h0 + h) * T + i) * T + j0;
						#pragma omp simd
						for (int c = 0; c < nk; c++)
							dr[c] = (c < n) & keep(key, base + c, p) ? sr[c] * s : 0.0f;
					}
				}
				/* O += P V[j0:] (P with dropout applied) */
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, hs, nk, 1.0f,
					    p > 0 ? D : S, ATT_BK, v + (size_t)j0 * C3, C3, 1.0f, O, hs);
			}
			for (int r = 0; r < nq; r++) {
				float inv = 1.0f / l[r], *o = out + (w.r0 + i0 + r) * C + h * hs;
				const float *orow = O + (size_t)r * hs;
				#pragma omp simd
				for (int d = 0; d < hs; d++)
					o[d] = orow[d] * inv;
				lse[w.lse0 + i0 + r] = m[r] + logf(l[r]);
			}
		}
		free(S);
	}
	return fail ? LOOM_ENOMEM : 0;
}

static int attention_fwd_naive(float *out, float *att, float *lse, const float *qkv,
			       const int32_t *len, const int32_t *off, int B, int T, int C, int NH,
			       int h0, int NHd, float p, uint64_t key)
{
	int hs = C / NH, C3 = 3 * C;
	double scale = 1.0 / sqrt((double)hs);
	float *dr = malloc(sizeof(float) * T);
	if (!dr)
		return LOOM_ENOMEM;
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++) {
			struct att_row w = att_row(len, off, b, h, T, NH);
			for (int i = 0; i < w.Tq; i++) {
				const float *q = qkv + (w.r0 + i) * C3 + h * hs;
				float *a = att + (((size_t)b * NH + h) * T + i) * T;
				int nv = len ? att_len(len, b, T) : i + 1; /* keys j < nv */
				double mx = -INFINITY, sum = 0;
				for (int j = 0; j < nv; j++) {
					const float *k = qkv + (w.r0 + j) * C3 + C + h * hs;
					double s = 0;
					for (int d = 0; d < hs; d++)
						s += (double)q[d] * k[d];
					a[j] = (float)(s * scale);
					if (a[j] > mx)
						mx = a[j];
				}
				for (int j = 0; j < nv; j++) {
					double e = exp(a[j] - mx);
					a[j] = (float)e;
					sum += e;
				}
				for (int j = 0; j < T; j++)
					a[j] = j < nv ? (float)(a[j] / sum) : 0.0f;
				lse[w.lse0 + i] = (float)(mx + log(sum));
				for (int j = 0; j < nv; j++)
					dr[j] = a[j];
				if (p > 0)
					att_drop_row(dr, a, i, nv, T, (size_t)b * NHd + h0 + h, p, key);
				float *o = out + (w.r0 + i) * C + h * hs;
				for (int d = 0; d < hs; d++) {
					double s = 0;
					for (int j = 0; j < nv; j++)
						s += (double)dr[j] *
						     qkv[(w.r0 + j) * C3 + 2 * C + h * hs + d];
					o[d] = (float)s;
				}
			}
		}
	free(dr);
	return 0;
}

/* Backward, FlashAttention-2 style with D = rowsum(dO * O): for each key
 * tile j (dK_j, dV_j accumulated in scratch) and each query tile i >= j,
 * P = exp(S - lse), dP = dO V^T (times the dropout mask / (1-p)),
 * dS = P * (dP - D), dV_j += drop(P)^T dO, dK_j += scale dS^T Q,
 * dQ_i += scale dS K_j.  Threaded over (b, h): dQ rows collect every key
 * tile's part in a fixed order without atomics, so results are
 * bit-identical for any thread count. */
LOOM_SIMD
static int attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
			 const float *lse, const int32_t *len, const int32_t *off, int B, int T, int C,
			 int NH, int h0, int NHd, float p, uint64_t key)
{
	int hs = C / NH, C3 = 3 * C, fail = 0;
	float scale = 1.0f / sqrtf((float)hs), s = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
	#pragma omp parallel
	{
		/* P, dP -> dS and the dropped P tiles; dK, dV of a key tile; D[T] */
		float *P = malloc(sizeof(float) * ((size_t)3 * ATT_BQ * ATT_BK +
						   (size_t)2 * ATT_BK * hs + T));
		if (!P) {
			#pragma omp atomic write
			fail = 1;
		}
		float *dP = P + ATT_BQ * ATT_BK, *Pd = dP + ATT_BQ * ATT_BK;
		float *dK = Pd + ATT_BQ * ATT_BK, *dV = dK + (size_t)ATT_BK * hs;
		float *Dr = dV + (size_t)ATT_BK * hs;
		#pragma omp for schedule(dynamic)
		for (int bh = 0; bh < B * NH; bh++) {
			if (!P)
				continue;
			int b = bh / NH, h = bh % NH;
			struct att_row w = att_row(len, off, b, h, T, NH);
			const int Tq = w.Tq;
			const float *q = qkv + w.r0 * C3 + h * hs, *k = q + C, *v = q + 2 * C;
			const float *dy = dout + w.r0 * C + h * hs;
			const float *o = out + w.r0 * C + h * hs, *ls = lse + w.lse0;
			float *dq = dqkv + w.r0 * C3 + h * hs, *dk = dq + C, *dv = dq + 2 * C;
			for (int i = 0; i < Tq; i++) {
				const float *a = dy + (size_t)i * C, *c = o + (size_t)i * C;
				float dot = 0;
				#pragma omp simd reduction(+:dot)
				for (int d = 0; d < hs; d++)
					dot += a[d] * c[d];
				Dr[i] = dot;
				memset(dq + (size_t)i * C3, 0, sizeof(float) * hs);
			}
			/* keys from the row's length on are never visible: zero gradient */
			int jend = len ? att_len(len, b, T) : Tq;
			for (int j = jend; j < Tq; j++) {
				memset(dk + (size_t)j * C3, 0, sizeof(float) * hs);
				memset(dv + (size_t)j * C3, 0, sizeof(float) * hs);
			}
			for (int j0 = 0; j0 < jend; j0 += ATT_BK) {
				int nk = jend - j0 < ATT_BK ? jend - j0 : ATT_BK;
				memset(dK, 0, sizeof(float) * (size_t)nk * hs);
				memset(dV, 0, sizeof(float) * (size_t)nk * hs);
				/* causal: from the query tile holding query j0 */
				for (int i0 = len ? 0 : j0 / ATT_BQ * ATT_BQ; i0 < Tq; i0 += ATT_BQ) {
					int nq = Tq - i0 < ATT_BQ ? Tq - i0 : ATT_BQ;
					cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, hs, scale,
						    q + (size_t)i0 * C3, C3, k + (size_t)j0 * C3, C3, 0.0f,
						    P, ATT_BK);
					cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, hs, 1.0f,
						    dy + (size_t)i0 * C, C, v + (size_t)j0 * C3, C3, 0.0f,
						    dP, ATT_BK);
					for (int r = 0; r < nq; r++) {
						int i = i0 + r, n = len ? nk : att_ncols(i, j0, nk);
						float *pr = P + r * ATT_BK, *gr = dP + r * ATT_BK, li = ls[i];
						float di = Dr[i];
						#pragma omp simd
						for (int c = 0; c < n; c++)
							pr[c] = vexpf(pr[c] - li);
						for (int c = n; c < nk; c++)
							pr[c] = 0;
						if (p > 0) {
							float *dr = Pd + r * ATT_BK;
							size_t base = (((size_t)b * NHd + h0 + h) * T + i) * T + j0;
							#pragma omp simd
							for (int c = 0; c < nk; c++) {
								int kp = (c < n) & keep(key, base + c, p);
								dr[c] = kp ? pr[c] * s : 0.0f;
								gr[c] = kp ? gr[c] * s : 0.0f;
							}
						}
						#pragma omp simd
						for (int c = 0; c < nk; c++)
							gr[c] = pr[c] * (gr[c] - di);
					}
					/* dV_j += drop(P)^T dO_i; dK_j += scale dS^T Q_i; dQ_i += scale dS K_j */
					cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, hs, nq, 1.0f,
						    p > 0 ? Pd : P, ATT_BK, dy + (size_t)i0 * C, C, 1.0f, dV, hs);
					cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, hs, nq, scale,
						    dP, ATT_BK, q + (size_t)i0 * C3, C3, 1.0f, dK, hs);
					cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, hs, nk, scale,
						    dP, ATT_BK, k + (size_t)j0 * C3, C3, 1.0f,
						    dq + (size_t)i0 * C3, C3);
				}
				for (int r = 0; r < nk; r++) {
					memcpy(dk + (size_t)(j0 + r) * C3, dK + (size_t)r * hs, sizeof(float) * hs);
					memcpy(dv + (size_t)(j0 + r) * C3, dV + (size_t)r * hs, sizeof(float) * hs);
				}
			}
		}
		free(P);
	}
	return fail ? LOOM_ENOMEM : 0;
}

static int attention_bwd_naive(float *dqkv, const float *dout, const float *qkv,
			       const float *att, const int32_t *len, const int32_t *off, int B, int T,
			       int C, int NH, int h0, int NHd, float p, uint64_t key)
{
	int hs = C / NH, C3 = 3 * C;
	double scale = 1.0 / sqrt((double)hs);
	double *dp = malloc(sizeof(double) * T);
	float *dr = malloc(sizeof(float) * T);
	if (!dp || !dr) {
		free(dp);
		free(dr);
		return LOOM_ENOMEM;
	}
	memset(dqkv, 0, sizeof(float) * (off ? (size_t)off[B] : (size_t)B * T) * C3);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++) {
			struct att_row w = att_row(len, off, b, h, T, NH);
			for (int i = 0; i < w.Tq; i++) {
				const float *a = att + (((size_t)b * NH + h) * T + i) * T;
				const float *dy = dout + (w.r0 + i) * C + h * hs;
				const float *q = qkv + (w.r0 + i) * C3 + h * hs;
				float *dq = dqkv + (w.r0 + i) * C3 + h * hs;
				size_t base = (((size_t)b * NHd + h0 + h) * T + i) * (size_t)T;
				int nv = len ? att_len(len, b, T) : i + 1; /* keys j < nv */
				/* y_i = sum_j D_ij v_j, D_ij = P_ij m_ij / (1-p) */
				for (int j = 0; j < nv; j++)
					dr[j] = p <= 0 ? 1.0f : keep(key, base + j, p) ? 1.0f / (1.0f - p) : 0.0f;
				double dot = 0;
				for (int j = 0; j < nv; j++) {
					const float *v = qkv + (w.r0 + j) * C3 + 2 * C + h * hs;
					float *dv = dqkv + (w.r0 + j) * C3 + 2 * C + h * hs;
					double s = 0;
					for (int d = 0; d < hs; d++) {
						s += (double)dy[d] * v[d];
						dv[d] += a[j] * dr[j] * dy[d];
					}
					dp[j] = s * dr[j]; /* dL/dP_ij */
					dot += a[j] * dp[j];
				}
				for (int j = 0; j < nv; j++) {
					double ds = a[j] * (dp[j] - dot) * scale;
					const float *k = qkv + (w.r0 + j) * C3 + C + h * hs;
					float *dk = dqkv + (w.r0 + j) * C3 + C + h * hs;
					for (int d = 0; d < hs; d++) {
						dq[d] += (float)(ds * k[d]);
						dk[d] += (float)(ds * q[d]);
					}
				}
			}
		}
	free(dp);
	free(dr);
	return 0;
}

int loom_k_attention_fwd(float *out, float *lse, const float *qkv, const int32_t *len,
			 const int32_t *off, int B, int T, int C, int NH, float p, uint64_t key)
{
	return attention_fwd(out, lse, qkv, len, off, B, T, C, NH, 0, NH, p, key);
}

int loom_k_attention_fwd_naive(float *out, float *att, float *lse, const float *qkv,
			       const int32_t *len, const int32_t *off, int B, int T, int C, int NH,
			       float p, uint64_t key)
{
	return attention_fwd_naive(out, att, lse, qkv, len, off, B, T, C, NH, 0, NH, p, key);
}

int loom_k_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
			 const float *lse, const int32_t *len, const int32_t *off, int B, int T, int C,
			 int NH, float p, uint64_t key)
{
	return attention_bwd(dqkv, dout, qkv, out, lse, len, off, B, T, C, NH, 0, NH, p, key);
}

int loom_k_attention_bwd_naive(float *dqkv, const float *dout, const float *qkv,
			       const float *att, const int32_t *len, const int32_t *off, int B, int T,
			       int C, int NH, float p, uint64_t key)
{
	return attention_bwd_naive(dqkv, dout, qkv, att, len, off, B, T, C, NH, 0, NH, p, key);
}

int loom_k_attention_fwd_heads(float *out, float *lse, const float *qkv, const int32_t *len,
			       const int32_t *off, int B, int T, int C, int NH, int h0, int NHall,
			       float p, uint64_t key)
{
	return attention_fwd(out, lse, qkv, len, off, B, T, C, NH, h0, NHall, p, key);
}

int loom_k_attention_fwd_heads_naive(float *out, float *att, float *lse, const float *qkv,
				     const int32_t *len, const int32_t *off, int B, int T, int C,
				     int NH, int h0, int NHall, float p, uint64_t key)
{
	return attention_fwd_naive(out, att, lse, qkv, len, off, B, T, C, NH, h0, NHall, p, key);
}

int loom_k_attention_bwd_heads(float *dqkv, const float *dout, const float *qkv,
			       const float *out, const float *lse, const int32_t *len,
			       const int32_t *off, int B, int T, int C, int NH, int h0, int NHall,
			       float p, uint64_t key)
{
	return attention_bwd(dqkv, dout, qkv, out, lse, len, off, B, T, C, NH, h0, NHall, p, key);
}

int loom_k_attention_bwd_heads_naive(float *dqkv, const float *dout, const float *qkv,
				     const float *att, const int32_t *len, const int32_t *off,
				     int B, int T, int C, int NH, int h0, int NHall, float p,
				     uint64_t key)
{
	return attention_bwd_naive(dqkv, dout, qkv, att, len, off, B, T, C, NH, h0, NHall, p, key);
}

/* ---- gelu -------------------------------------------------------------- */

LOOM_SIMD
void loom_k_gelu_fwd(float *out, const float *inp, size_t n)
{
	#pragma omp parallel for simd schedule(static)
	for (size_t i = 0; i < n; i++) {
		float x = inp[i];
		out[i] = 0.5f * x * (1.0f + fast_tanh(GELU_K * (x + 0.044715f * x * x * x)));
	}
}

void loom_k_gelu_fwd_naive(float *out, const float *inp, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double x = inp[i];
		out[i] = (float)(0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))));
	}
}

LOOM_SIMD
void loom_k_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n)
{
	#pragma omp parallel for simd schedule(static)
	for (size_t i = 0; i < n; i++) {
		float x = inp[i];
		float u = GELU_K * (x + 0.044715f * x * x * x);
		float th = fast_tanh(u);
		float sech2 = 1.0f - th * th;
		float g = 0.5f * (1.0f + th) +
			  0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
		dinp[i] = dout[i] * g;
	}
}

void loom_k_gelu_bwd_naive(float *dinp, const float *inp, const float *dout, size_t n)
{
	double k = sqrt(2.0 / M_PI);
	for (size_t i = 0; i < n; i++) {
		double x = inp[i], th = tanh(k * (x + 0.044715 * x * x * x));
		double g = 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * k * (1 + 3 * 0.044715 * x * x);
		dinp[i] = (float)(dout[i] * g);
	}
}

/* erf(x) by Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7, about
 * fp32's resolution near 1) with the vectorising vexpf: erff is a scalar
 * call.  Odd: the formula for |x|, the sign put back. */
static inline float verf(float x)
{
	float a = x < 0 ? -x : x;
	float t = 1.0f / (1.0f + 0.3275911f * a);
	float y = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f +
		  t * (-1.453152027f + t * 1.061405429f))));
	float r = 1.0f - y * vexpf(-a * a);
	return x < 0 ? -r : r;
}

#define SQRT1_2 0.7071067811865476f   /* 1/sqrt(2) */
#define INV_SQRT2PI 0.3989422804014327f /* 1/sqrt(2 pi) */

LOOM_SIMD
void loom_k_gelu_erf_fwd(float *out, const float *inp, size_t n)
{
	#pragma omp parallel for simd schedule(static)
	for (size_t i = 0; i < n; i++) {
		float x = inp[i];
		out[i] = 0.5f * x * (1.0f + verf(x * SQRT1_2));
	}
}

void loom_k_gelu_erf_fwd_naive(float *out, const float *inp, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double x = inp[i];
		out[i] = (float)(0.5 * x * (1.0 + erf(x / sqrt(2.0))));
	}
}

LOOM_SIMD
void loom_k_gelu_erf_bwd(float *dinp, const float *inp, const float *dout, size_t n)
{
	#pragma omp parallel for simd schedule(static)
	for (size_t i = 0; i < n; i++) {
		float x = inp[i];
		float g = 0.5f * (1.0f + verf(x * SQRT1_2)) + x * INV_SQRT2PI * vexpf(-0.5f * x * x);
		dinp[i] = dout[i] * g;
	}
}

void loom_k_gelu_erf_bwd_naive(float *dinp, const float *inp, const float *dout, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double x = inp[i];
		double g = 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
		dinp[i] = (float)(dout[i] * g);
	}
}

LOOM_SIMD
void loom_k_residual_fwd(float *out, const float *a, const float *b, size_t n)
{
	#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		out[i] = a[i] + b[i];
}

void loom_k_zero(float *x, size_t n)
{
	#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		x[i] = 0.0f;
}

/* ---- dropout ----------------------------------------------------------- */

LOOM_SIMD
void loom_k_dropout_copy(float *out, const float *x, size_t n, float p, uint64_t key)
{
	if (p <= 0) {
		if (out != x) {
			#pragma omp parallel for schedule(static)
			for (size_t i = 0; i < n; i++)
				out[i] = x[i];
		}
		return;
	}
	float s = 1.0f / (1.0f - p);
	#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		out[i] = keep(key, i, p) ? x[i] * s : 0.0f;
}

void loom_k_dropout(float *x, size_t n, float p, uint64_t key)
{
	loom_k_dropout_copy(x, x, n, p, key);
}

void loom_k_dropout_naive(float *x, size_t n, float p, uint64_t key)
{
	if (p <= 0)
		return;
	for (size_t i = 0; i < n; i++)
		x[i] = keep(key, i, p) ? x[i] / (1.0f - p) : 0.0f;
}

LOOM_SIMD
void loom_k_dropout_at(float *out, const float *x, int N, int C, float p, uint64_t key,
		       const int32_t *at)
{
	if (p <= 0) {
		if (out != x)
			memcpy(out, x, sizeof(float) * (size_t)N * C);
		return;
	}
	float s = 1.0f / (1.0f - p);
	#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *r = x + (size_t)n * C;
		float *o = out + (size_t)n * C;
		size_t e = (size_t)at[n] * C;
		for (int c = 0; c < C; c++)
			o[c] = keep(key, e + c, p) ? r[c] * s : 0.0f;
	}
}

void loom_k_dropout_at_naive(float *out, const float *x, int N, int C, float p, uint64_t key,
			     const int32_t *at)
{
	for (int n = 0; n < N; n++)
		for (int c = 0; c < C; c++) {
			size_t i = (size_t)n * C + c;
			out[i] = p <= 0 ? x[i] : keep(key, (size_t)at[n] * C + c, p) ? x[i] / (1.0f - p) : 0.0f;
		}
}

void loom_k_dropout_copy_naive(float *out, const float *x, size_t n, float p, uint64_t key)
{
	memcpy(out, x, n * sizeof(float));
	loom_k_dropout_naive(out, n, p, key);
}

/* ---- cross-entropy ----------------------------------------------------- */

LOOM_SIMD
float loom_k_row_max(const float *r, int n)
{
	float mx = -INFINITY;
	#pragma omp simd reduction(max:mx)
	for (int v = 0; v < n; v++)
		mx = r[v] > mx ? r[v] : mx;
	return mx;
}

float loom_k_row_exp(float *r, int n, float mx)
{
	float sum = 0;
	#pragma omp simd reduction(+:sum)
	for (int v = 0; v < n; v++) {
		r[v] = vexpf(r[v] - mx);
		sum += r[v];
	}
	return sum;
}

void loom_k_row_scale(float *r, int n, float s)
{
	#pragma omp simd
	for (int v = 0; v < n; v++)
		r[v] *= s;
}

int loom_k_crossentropy_fwd(float *logits, float *losses, const int32_t *targets, int N,
			    int V, int ignore_id)
{
	int count = 0;
	#pragma omp parallel for schedule(static) reduction(+:count)
	for (int n = 0; n < N; n++) {
		float *r = logits + (size_t)n * V, mx = loom_k_row_max(r, V);
		int t = targets[n];
		float lt = t >= 0 && t < V ? r[t] : 0;
		float sum = loom_k_row_exp(r, V, mx);
		loom_k_row_scale(r, V, 1.0f / sum);
		if (t == ignore_id) {
			losses[n] = 0;
		} else {
			losses[n] = logf(sum) + mx - lt;
			count++;
		}
	}
	return count;
}

int loom_k_crossentropy_fwd_naive(float *logits, float *losses, const int32_t *targets,
				  int N, int V, int ignore_id)
{
	int count = 0;
	for (int n = 0; n < N; n++) {
		float *r = logits + (size_t)n * V;
		double mx = -INFINITY, sum = 0;
		for (int v = 0; v < V; v++)
			if (r[v] > mx)
				mx = r[v];
		for (int v = 0; v < V; v++)
			sum += exp(r[v] - mx);
		int t = targets[n];
		losses[n] = t == ignore_id ? 0.0f : (float)(log(sum) + mx - r[t]);
		count += t != ignore_id;
		for (int v = 0; v < V; v++)
			r[v] = (float)(exp(r[v] - mx) / sum);
	}
	return count;
}

LOOM_SIMD
void loom_k_crossentropy_bwd(float *probs, const int32_t *targets, int N, int V, int v0,
			     int ignore_id, float dloss, const float *w)
{
	#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		float *r = probs + (size_t)n * V;
		int t = targets[n];
		if (t == ignore_id) {
			memset(r, 0, sizeof(float) * V);
			continue;
		}
		float d = w ? dloss * w[n] : dloss;
		for (int v = 0; v < V; v++)
			r[v] *= d;
		if (t - v0 >= 0 && t - v0 < V)
			r[t - v0] -= d;
	}
}

void loom_k_crossentropy_bwd_naive(float *probs, const int32_t *targets, int N, int V, int v0,
				   int ignore_id, float dloss, const float *w)
{
	for (int n = 0; n < N; n++)
		for (int v = 0; v < V; v++) {
			float *p = probs + (size_t)n * V + v;
			if (targets[n] == ignore_id)
				*p = 0;
			else
				*p = (*p - (v0 + v == targets[n] ? 1.0f : 0.0f)) *
				     (dloss * (w ? w[n] : 1.0f));
		}
}

void loom_k_token_weights(float *w, const int32_t *targets, int B, int T, int ignore_id)
{
	#pragma omp parallel for schedule(static)
	for (int b = 0; b < B; b++) {
		const int32_t *tg = targets + (size_t)b * T;
		float *wb = w + (size_t)b * T;
		for (int i = 0; i < T; i++) {
			if (tg[i] == ignore_id) {
				wb[i] = 0.0f;
				continue;
			}
			int k = 0;
			for (int j = 0; j < T; j++)
				k += tg[j] == tg[i];
			wb[i] = 1.0f / (float)k;
		}
	}
}

/* ---- optimizer --------------------------------------------------------- */

void loom_k_adamw(float *p, float *g, float *m, float *v, size_t n, float lr,
		  float beta1, float beta2, float eps, float wd, int64_t t, float gscale)
{
	/* small tensors (biases, layernorms) do not wake the other threads */
	#pragma omp parallel if (n >= 65536)
	loom_k_adamw_team(p, g, m, v, n, lr, beta1, beta2, eps, wd, t, gscale);
}

LOOM_SIMD
void loom_k_adamw_team(float *p, float *g, float *m, float *v, size_t n, float lr,
		       float beta1, float beta2, float eps, float wd, int64_t t, float gscale)
{
	float c1 = 1.0f / (1.0f - powf(beta1, (float)t));
	float c2 = 1.0f / (1.0f - powf(beta2, (float)t));
	#pragma omp for simd schedule(static) nowait
	for (size_t i = 0; i < n; i++) {
		float gi = g[i] * gscale;
		float mi = beta1 * m[i] + (1.0f - beta1) * gi;
		float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
		m[i] = mi;
		v[i] = vi;
		g[i] = 0.0f;
		p[i] -= lr * (mi * c1 / (sqrtf(vi * c2) + eps) + wd * p[i]);
	}
}

void loom_k_adamw_naive(float *p, float *g, float *m, float *v, size_t n, float lr,
			float beta1, float beta2, float eps, float wd, int64_t t, float gscale)
{
	for (size_t i = 0; i < n; i++) {
		float gi = g[i] * gscale;
		m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
		v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
		g[i] = 0.0f;
		double mh = m[i] / (1.0 - pow(beta1, (double)t));
		double vh = v[i] / (1.0 - pow(beta2, (double)t));
		p[i] = (float)(p[i] - lr * (mh / (sqrt(vh) + eps) + wd * p[i]));
	}
}

#define SUMSQ_CHUNK 65536

/* Sum of squares of one chunk: 16 running double sums (one sum would be
 * bound by the add latency), added pairwise at the end: a fixed order that
 * any vector width reproduces.  Inlined into the cloned caller, so it is
 * vectorised for the machine's widest units. */
static inline __attribute__((always_inline)) double sumsq_chunk(const float *x, size_t n)
{
	double l[16] = { 0 };
	size_t i = 0;
	for (; i + 16 <= n; i += 16)
		#pragma omp simd
		for (int j = 0; j < 16; j++)
			l[j] += (double)x[i + j] * x[i + j];
	for (int w = 8; w >= 1; w /= 2)
		for (int j = 0; j < w; j++)
			l[j] += l[j + w];
	double s = l[0];
	for (; i < n; i++)
		s += (double)x[i] * x[i];
	return s;
}

LOOM_SIMD
double loom_k_sumsq(const float *x, size_t n)
{
	size_t nch = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
	double part[256], total = 0;
	/* process in rounds of 256 chunks; each chunk summed serially */
	for (size_t base = 0; base < nch; base += 256) {
		size_t m = nch - base < 256 ? nch - base : 256;
		#pragma omp parallel for schedule(static)
		for (size_t c = 0; c < m; c++) {
			size_t i0 = (base + c) * SUMSQ_CHUNK;
			size_t i1 = i0 + SUMSQ_CHUNK < n ? i0 + SUMSQ_CHUNK : n;
			part[c] = sumsq_chunk(x + i0, i1 - i0);
		}
		for (size_t c = 0; c < m; c++)
			total += part[c];
	}
	return total;
}

double loom_k_sumsq_naive(const float *x, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	return s;
}
