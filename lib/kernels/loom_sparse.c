/* loom_sparse.c - block-sparse weights and their kernels (see loom_sparse.h) */
#include "loom_sparse.h"

#include <stdlib.h>
#include <string.h>

struct loom_sparse {
	int IC, OC, bs, ib, ob; /* ib = IC/bs input blocks, ob = OC/bs output blocks */
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

void loom_sparse_matmul_fwd(const struct loom_sparse *s, float *out, const float *inp,
			    const float *bias, int N)
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

void loom_sparse_matmul_bwd(const struct loom_sparse *s, float *dinp, float *dw, float *dbias,
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
