/* Every fast GPT kernel (lib/kernels/loom_kernels.h) against its naive reference,
 * on random shapes including odd sizes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom_kernels.h"
#include "tap.h"
#include "testlib.h"

static float *dup(const float *x, size_t n)
{
	float *p = malloc(sizeof(float) * (n ? n : 1));
	memcpy(p, x, sizeof(float) * n);
	return p;
}

static void test_matmul(int N, int IC, int OC)
{
	float *x = rnd((size_t)N * IC, 1), *w = rnd((size_t)IC * OC, 0.5f), *b = rnd(OC, 1);
	float *o1 = rnd((size_t)N * OC, 1), *o2 = rnd((size_t)N * OC, 1);
	loom_k_matmul_fwd(NULL, o1, x, w, b, N, IC, OC);
	loom_k_matmul_fwd_naive(o2, x, w, b, N, IC, OC);
	ok(close_arr(o1, o2, (size_t)N * OC, 1e-4, 1e-4, "mm fwd"), "matmul fwd %dx%dx%d", N, IC, OC);
	loom_k_matmul_fwd(NULL, o1, x, w, NULL, N, IC, OC);
	loom_k_matmul_fwd_naive(o2, x, w, NULL, N, IC, OC);
	ok(close_arr(o1, o2, (size_t)N * OC, 1e-4, 1e-4, "mm fwd nb"), "matmul fwd no bias %dx%dx%d",
	   N, IC, OC);
	float *dout = rnd((size_t)N * OC, 1);
	float *dx1 = rnd((size_t)N * IC, 1), *dx2 = rnd((size_t)N * IC, 1);
	float *dw1 = rnd((size_t)IC * OC, 1), *dw2 = dup(dw1, (size_t)IC * OC);
	float *db1 = rnd(OC, 1), *db2 = dup(db1, OC);
	loom_k_matmul_bwd(NULL, dx1, dw1, db1, dout, x, w, N, IC, OC);
	loom_k_matmul_bwd_naive(dx2, dw2, db2, dout, x, w, N, IC, OC);
	ok(close_arr(dx1, dx2, (size_t)N * IC, 1e-4, 1e-4, "dx") &&
	   close_arr(dw1, dw2, (size_t)IC * OC, 1e-4, 1e-4, "dw") &&
	   close_arr(db1, db2, OC, 1e-4, 1e-4, "db"), "matmul bwd %dx%dx%d", N, IC, OC);
	/* dinp may be inp: the input gradient overwrites the input after the
	 * weight gradient has read it */
	float *xa = dup(x, (size_t)N * IC);
	memcpy(dw1, dw2, sizeof(float) * IC * OC);
	loom_k_matmul_bwd(NULL, xa, dw1, NULL, dout, xa, w, N, IC, OC);
	loom_k_matmul_bwd_naive(dx2, dw2, NULL, dout, x, w, N, IC, OC);
	ok(close_arr(xa, dx2, (size_t)N * IC, 1e-4, 1e-4, "dx=x") &&
	   close_arr(dw1, dw2, (size_t)IC * OC, 1e-4, 1e-4, "dw (dx=x)"),
	   "matmul bwd %dx%dx%d with dinp = inp", N, IC, OC);
	memcpy(xa, x, sizeof(float) * N * IC);
	loom_k_matmul_bwd_naive(xa, dw2, NULL, dout, xa, w, N, IC, OC);
	ok(close_arr(xa, dx2, (size_t)N * IC, 1e-5, 1e-5, "naive dx=x"),
	   "naive matmul bwd %dx%dx%d with dinp = inp", N, IC, OC);
	free(xa);
	free(x); free(w); free(b); free(o1); free(o2); free(dout);
	free(dx1); free(dx2); free(dw1); free(dw2); free(db1); free(db2);
}

/* The nn.Linear kernels (w[OC,IC]) against the naive matmul on w^T. */
static void test_linear(int N, int IC, int OC)
{
	float *x = rnd((size_t)N * IC, 1), *w = rnd((size_t)OC * IC, 0.5f), *b = rnd(OC, 1);
	float *wt = rnd((size_t)IC * OC, 1);
	for (int i = 0; i < IC; i++)
		for (int o = 0; o < OC; o++)
			wt[(size_t)i * OC + o] = w[(size_t)o * IC + i];
	float *o1 = rnd((size_t)N * OC, 1), *o2 = rnd((size_t)N * OC, 1);
	loom_k_linear_fwd(NULL, o1, x, w, b, N, IC, OC);
	loom_k_matmul_fwd_naive(o2, x, wt, b, N, IC, OC);
	ok(close_arr(o1, o2, (size_t)N * OC, 1e-4, 1e-4, "linear fwd"), "linear fwd %dx%dx%d", N,
	   IC, OC);
	float *dout = rnd((size_t)N * OC, 1), *dx1 = rnd((size_t)N * IC, 1);
	float *dx2 = rnd((size_t)N * IC, 1), *dw1 = calloc((size_t)IC * OC, sizeof(float));
	float *dw2 = calloc((size_t)IC * OC, sizeof(float)), *db1 = rnd(OC, 1), *db2 = dup(db1, OC);
	loom_k_linear_bwd(NULL, dx1, dw1, db1, dout, x, w, N, IC, OC);
	loom_k_matmul_bwd_naive(dx2, dw2, db2, dout, x, wt, N, IC, OC);
	int okw = 1; /* dw1 [OC,IC] against dw2^T */
	for (int i = 0; i < IC; i++)
		for (int o = 0; o < OC; o++)
			okw &= fabs(dw1[(size_t)o * IC + i] - dw2[(size_t)i * OC + o]) <=
			       1e-4 * (1 + fabs(dw2[(size_t)i * OC + o]));
	ok(close_arr(dx1, dx2, (size_t)N * IC, 1e-4, 1e-4, "linear dx") && okw &&
	   close_arr(db1, db2, OC, 1e-4, 1e-4, "linear db"), "linear bwd %dx%dx%d", N, IC, OC);
	free(x); free(w); free(b); free(wt); free(o1); free(o2); free(dout);
	free(dx1); free(dx2); free(dw1); free(dw2); free(db1); free(db2);
}

static void test_layernorm(int N, int C)
{
	float *x = rnd((size_t)N * C, 2), *w = rnd(C, 1), *b = rnd(C, 1);
	float *o1 = rnd((size_t)N * C, 1), *o2 = rnd((size_t)N * C, 1);
	float m1[64], r1[64], m2[64], r2[64];
	loom_k_layernorm_fwd(o1, m1, r1, x, w, b, N, C, 1e-5f);
	loom_k_layernorm_fwd_naive(o2, m2, r2, x, w, b, N, C, 1e-5f);
	ok(close_arr(o1, o2, (size_t)N * C, 1e-5, 1e-4, "ln") &&
	   close_arr(m1, m2, N, 1e-6, 1e-5, "mean") && close_arr(r1, r2, N, 1e-6, 1e-4, "rstd"),
	   "layernorm fwd %dx%d", N, C);
	float *dy = rnd((size_t)N * C, 1), *dx1 = rnd((size_t)N * C, 1);
	float *dx2 = dup(dx1, (size_t)N * C), *dw1 = rnd(C, 1), *dw2 = dup(dw1, C);
	float *db1 = rnd(C, 1), *db2 = dup(db1, C);
	loom_k_layernorm_bwd(dx1, dw1, db1, dy, x, w, m2, r2, N, C);
	loom_k_layernorm_bwd_naive(dx2, dw2, db2, dy, x, w, m2, r2, N, C);
	ok(close_arr(dx1, dx2, (size_t)N * C, 1e-4, 1e-3, "ln dx") &&
	   close_arr(dw1, dw2, C, 1e-4, 1e-4, "ln dw") && close_arr(db1, db2, C, 1e-4, 1e-4, "ln db"),
	   "layernorm bwd %dx%d", N, C);
	free(x); free(w); free(b); free(o1); free(o2); free(dy);
	free(dx1); free(dx2); free(dw1); free(dw2); free(db1); free(db2);
}

/* The flash-attention kernels against the naive ones: output and
 * log-sum-exp forward; backward from the fast forward's out and lse against
 * the naive backward from the naive probabilities.  Causal, or (masked)
 * bidirectional with row lengths from T down to 1. */
static void test_attention(int B, int T, int C, int NH, float p, int masked)
{
	size_t n3 = (size_t)B * T * 3 * C, n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
	size_t nl = (size_t)B * NH * T;
	float *qkv = rnd(n3, 1.5f), *o1 = rnd(n, 1), *o2 = rnd(n, 1), *a2 = rnd(na, 1);
	float *l1 = rnd(nl, 1), *l2 = rnd(nl, 1);
	int32_t len[8];
	for (int b = 0; b < B; b++)
		len[b] = b == 0 ? T : 1 + (int32_t)(loom_splitmix64((uint64_t)(b * 31 + T)) % T);
	const int32_t *ln = masked ? len : NULL;
	const char *mode = masked ? "masked" : "causal";
	is_int(loom_k_attention_fwd(o1, l1, qkv, ln, NULL, B, T, C, NH, p, 41), 0, "attention fwd runs");
	is_int(loom_k_attention_fwd_naive(o2, a2, l2, qkv, ln, NULL, B, T, C, NH, p, 41), 0,
	       "attention fwd naive runs");
	ok(close_arr(o1, o2, n, 1e-5, 1e-4, "att out") && close_arr(l1, l2, nl, 1e-5, 1e-5, "lse"),
	   "attention fwd %s B=%d T=%d C=%d NH=%d dropout %.2f", mode, B, T, C, NH, p);
	float *dy = rnd(n, 1), *d1 = rnd(n3, 1), *d2 = rnd(n3, 1);
	is_int(loom_k_attention_bwd(d1, dy, qkv, o1, l1, ln, NULL, B, T, C, NH, p, 41), 0,
	       "attention bwd runs");
	loom_k_attention_bwd_naive(d2, dy, qkv, a2, ln, NULL, B, T, C, NH, p, 41);
	ok(close_arr(d1, d2, n3, 1e-5, 1e-3, "att bwd"),
	   "attention bwd %s B=%d T=%d C=%d NH=%d dropout %.2f", mode, B, T, C, NH, p);
	if (masked) {
		/* keys past a row's length are invisible: changing them
		 * changes no output */
		float *q2 = dup(qkv, n3), *o3 = rnd(n, 1);
		for (int b = 0; b < B; b++)
			for (int t = len[b]; t < T; t++)
				for (int c = C; c < 3 * C; c++)
					q2[((size_t)b * T + t) * 3 * C + c] += 1.0f;
		loom_k_attention_fwd(o3, l2, q2, ln, NULL, B, T, C, NH, p, 41);
		ok(!memcmp(o1, o3, sizeof(float) * n),
		   "attention masked B=%d T=%d: padding keys and values change nothing", B, T);
		free(q2);
		free(o3);
	}
	if (p > 0) {
		/* the mask is real: without dropout the output differs */
		loom_k_attention_fwd(o2, l2, qkv, ln, NULL, B, T, C, NH, 0, 41);
		double diff = 0;
		for (size_t i = 0; i < n; i++)
			diff = fmax(diff, fabs((double)o1[i] - o2[i]));
		ok(diff > 1e-3, "attention dropout changes the output (max diff %.3g)", diff);
	}
	free(qkv); free(o1); free(o2); free(a2); free(l1); free(l2); free(dy); free(d1); free(d2);
}

/* Packed rows (FlashAttention's varlen layout): the real tokens of padded
 * rows laid end to end give, on those tokens, the padded kernels' output,
 * lse and gradient (with zero gradient arriving at the padding, which is
 * what a loss over real tokens sends); fast against naive too.  Dropout
 * keeps the padded mask.  Masked (BERT: len given) or causal (the GPT's
 * rows that end early: off alone, a row of 0 tokens among them). */
static void test_attention_packed(int B, int T, int C, int NH, float p, int causal)
{
	size_t n3 = (size_t)B * T * 3 * C, n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
	size_t nl = (size_t)B * NH * T;
	int32_t len[8], off[9] = { 0 };
	for (int b = 0; b < B; b++) {
		uint64_t r = loom_splitmix64((uint64_t)(b * 17 + T));
		len[b] = b == 1 ? T : causal && b == 2 ? 0 : (int32_t)(!causal + r % (T + causal));
		off[b + 1] = off[b] + len[b];
	}
	int N = off[B];
	const int32_t *ln = causal ? NULL : len;
	const char *mode = causal ? "causal" : "masked";
	float *qkv = rnd(n3, 1.5f), *dy = rnd(n, 1), *o1 = rnd(n, 1), *l1 = rnd(nl, 1);
	float *d1 = rnd(n3, 1), *pq = rnd((size_t)N * 3 * C, 1), *pdy = rnd((size_t)N * C, 1);
	float *po = rnd((size_t)N * C, 1), *po2 = rnd((size_t)N * C, 1), *pl = rnd((size_t)N * NH, 1);
	float *pl2 = rnd((size_t)N * NH, 1), *pd = rnd((size_t)N * 3 * C, 1);
	float *pd2 = rnd((size_t)N * 3 * C, 1), *a2 = rnd(na, 1);
	for (int b = 0; b < B; b++) {
		for (int t = len[b]; t < T; t++)
			memset(dy + ((size_t)b * T + t) * C, 0, sizeof(float) * C);
		memcpy(pq + (size_t)off[b] * 3 * C, qkv + (size_t)b * T * 3 * C,
		       sizeof(float) * len[b] * 3 * C);
		memcpy(pdy + (size_t)off[b] * C, dy + (size_t)b * T * C, sizeof(float) * len[b] * C);
	}
	loom_k_attention_fwd(o1, l1, qkv, ln, NULL, B, T, C, NH, p, 43);
	loom_k_attention_bwd(d1, dy, qkv, o1, l1, ln, NULL, B, T, C, NH, p, 43);
	is_int(loom_k_attention_fwd(po, pl, pq, ln, off, B, T, C, NH, p, 43), 0, "packed fwd runs");
	is_int(loom_k_attention_bwd(pd, pdy, pq, po, pl, ln, off, B, T, C, NH, p, 43), 0,
	       "packed bwd runs");
	loom_k_attention_fwd_naive(po2, a2, pl2, pq, ln, off, B, T, C, NH, p, 43);
	loom_k_attention_bwd_naive(pd2, pdy, pq, a2, ln, off, B, T, C, NH, p, 43);
	int same = 1;
	for (int b = 0; b < B; b++) {
		same &= close_arr(po + (size_t)off[b] * C, o1 + (size_t)b * T * C,
				  (size_t)len[b] * C, 1e-6, 1e-6, "packed out");
		same &= close_arr(pd + (size_t)off[b] * 3 * C, d1 + (size_t)b * T * 3 * C,
				  (size_t)len[b] * 3 * C, 1e-6, 1e-6, "packed dqkv");
		for (int h = 0; h < NH; h++)
			same &= close_arr(pl + (size_t)off[b] * NH + (size_t)h * len[b],
					  l1 + ((size_t)b * NH + h) * T, len[b], 1e-6, 1e-6,
					  "packed lse");
	}
	ok(same, "attention packed %s = padded on the real tokens B=%d T=%d C=%d NH=%d dropout %.2f",
	   mode, B, T, C, NH, p);
	ok(close_arr(po, po2, (size_t)N * C, 1e-5, 1e-4, "packed naive out") &&
	   close_arr(pl, pl2, (size_t)N * NH, 1e-5, 1e-5, "packed naive lse") &&
	   close_arr(pd, pd2, (size_t)N * 3 * C, 1e-5, 1e-3, "packed naive bwd"),
	   "attention packed %s fast = naive B=%d T=%d dropout %.2f", mode, B, T, p);
	free(qkv); free(dy); free(o1); free(l1); free(d1); free(pq); free(pdy); free(po);
	free(po2); free(pl); free(pl2); free(pd); free(pd2); free(a2);
}

static void test_encoder(int B, int T, int C, int V)
{
	int32_t tok[256];
	for (int i = 0; i < B * T; i++)
		tok[i] = (int32_t)(loom_splitmix64(i * 7 + 1) % V) % 3; /* repeats on purpose */
	float *wte = rnd((size_t)V * C, 1), *wpe = rnd((size_t)T * C, 1);
	float *o1 = rnd((size_t)B * T * C, 1), *o2 = rnd((size_t)B * T * C, 1);
	loom_k_encoder_fwd(o1, tok, wte, 0, V, wpe, NULL, NULL, NULL, B, T, C);
	loom_k_encoder_fwd_naive(o2, tok, wte, 0, V, wpe, NULL, NULL, NULL, B, T, C);
	ok(!memcmp(o1, o2, sizeof(float) * B * T * C), "encoder fwd %dx%dx%d", B, T, C);
	float *dw1 = rnd((size_t)V * C, 1), *dw2 = dup(dw1, (size_t)V * C);
	float *dp1 = rnd((size_t)T * C, 1), *dp2 = dup(dp1, (size_t)T * C);
	loom_k_encoder_bwd(dw1, 0, V, dp1, NULL, o1, tok, NULL, NULL, B, T, C);
	loom_k_encoder_bwd_naive(dw2, 0, V, dp2, NULL, o1, tok, NULL, NULL, B, T, C);
	ok(close_arr(dw1, dw2, (size_t)V * C, 1e-6, 1e-5, "dwte") &&
	   close_arr(dp1, dp2, (size_t)T * C, 1e-6, 1e-5, "dwpe"), "encoder bwd %dx%dx%d", B, T, C);
	/* with token types (BERT) */
	int32_t typ[256];
	for (int i = 0; i < B * T; i++)
		typ[i] = (int32_t)(loom_splitmix64(i * 3 + 5) % 2);
	float *wtt = rnd((size_t)2 * C, 1), *dt1 = rnd((size_t)2 * C, 1), *dt2 = dup(dt1, 2 * C);
	loom_k_encoder_fwd(o1, tok, wte, 0, V, wpe, typ, wtt, NULL, B, T, C);
	loom_k_encoder_fwd_naive(o2, tok, wte, 0, V, wpe, typ, wtt, NULL, B, T, C);
	ok(close_arr(o1, o2, (size_t)B * T * C, 1e-6, 1e-6, "types fwd"),
	   "encoder fwd with token types %dx%dx%d", B, T, C);
	loom_k_encoder_bwd(dw1, 0, V, dp1, dt1, o1, tok, typ, NULL, B, T, C);
	loom_k_encoder_bwd_naive(dw2, 0, V, dp2, dt2, o1, tok, typ, NULL, B, T, C);
	ok(close_arr(dw1, dw2, (size_t)V * C, 1e-6, 1e-5, "dwte") &&
	   close_arr(dp1, dp2, (size_t)T * C, 1e-6, 1e-5, "dwpe") &&
	   close_arr(dt1, dt2, (size_t)2 * C, 1e-6, 1e-5, "dwtt"),
	   "encoder bwd with token types %dx%dx%d", B, T, C);
	/* a tensor-parallel rank's vocabulary slice (ids 1..V-1 here, tok
	 * holds 0..2), no positions: the rows of its ids, the others 0 */
	loom_k_encoder_fwd(o1, tok, wte + C, 1, V - 1, NULL, NULL, NULL, NULL, B, T, C);
	loom_k_encoder_fwd_naive(o2, tok, wte + C, 1, V - 1, NULL, NULL, NULL, NULL, B, T, C);
	int slice_ok = !memcmp(o1, o2, sizeof(float) * B * T * C);
	for (int i = 0; i < B * T; i++)
		slice_ok &= tok[i] ? o1[(size_t)i * C] == wte[(size_t)tok[i] * C]
				   : o1[(size_t)i * C] == 0.0f;
	ok(slice_ok, "encoder fwd of a vocabulary slice %dx%dx%d", B, T, C);
	float *w0 = dup(dw1, C);
	loom_k_encoder_bwd(dw1 + C, 1, V - 1, dp1, NULL, o1, tok, NULL, NULL, B, T, C);
	loom_k_encoder_bwd_naive(dw2 + C, 1, V - 1, dp2, NULL, o1, tok, NULL, NULL, B, T, C);
	ok(close_arr(dw1, dw2, (size_t)V * C, 1e-6, 1e-5, "slice dwte") &&
	   close_arr(dp1, dp2, (size_t)T * C, 1e-6, 1e-5, "slice dwpe") &&
	   !memcmp(w0, dw1, sizeof(float) * C), "encoder bwd of a vocabulary slice %dx%dx%d", B, T, C);
	free(w0);
	free(wte); free(wpe); free(o1); free(o2); free(dw1); free(dw2); free(dp1); free(dp2);
	free(wtt); free(dt1); free(dt2);
}

/* The two GELUs: tanh approximation (GPT) and erf (BERT). */
static const struct gelu_kind {
	const char *name;
	void (*fwd)(float *, const float *, size_t), (*fwd_naive)(float *, const float *, size_t);
	void (*bwd)(float *, const float *, const float *, size_t);
	void (*bwd_naive)(float *, const float *, const float *, size_t);
} gelus[2] = {
	{ "gelu", loom_k_gelu_fwd, loom_k_gelu_fwd_naive, loom_k_gelu_bwd, loom_k_gelu_bwd_naive },
	{ "gelu erf", loom_k_gelu_erf_fwd, loom_k_gelu_erf_fwd_naive, loom_k_gelu_erf_bwd,
	  loom_k_gelu_erf_bwd_naive },
};

/* fast against naive, forward and backward (o1, o2 [n] scratch);
 * `what` names the inputs in the test names */
static void check_gelu(const struct gelu_kind *k, const float *x, const float *dy, float *o1,
		       float *o2, size_t n, const char *what)
{
	k->fwd(o1, x, n);
	k->fwd_naive(o2, x, n);
	ok(close_arr(o1, o2, n, 1e-5, 1e-5, k->name), "%s fwd %s", k->name, what);
	k->bwd(o1, x, dy, n);
	k->bwd_naive(o2, x, dy, n);
	ok(close_arr(o1, o2, n, 1e-5, 1e-5, k->name), "%s bwd %s", k->name, what);
}

/* Dropout of packed tokens draws the padded layout's mask: tokens 0, 2, 3
 * and 6 of a [7,C] array, packed, come out as in the padded array. */
static void test_dropout_at(int C)
{
	static const int32_t at[] = { 0, 2, 3, 6 };
	float *x = rnd((size_t)7 * C, 1), *pk = rnd((size_t)4 * C, 1), *pk2 = rnd((size_t)4 * C, 1);
	for (int n = 0; n < 4; n++)
		memcpy(pk + (size_t)n * C, x + (size_t)at[n] * C, sizeof(float) * C);
	memcpy(pk2, pk, sizeof(float) * 4 * C);
	loom_k_dropout(x, (size_t)7 * C, 0.4f, 7);
	loom_k_dropout_at(pk, pk, 4, C, 0.4f, 7, at);
	loom_k_dropout_at_naive(pk2, pk2, 4, C, 0.4f, 7, at);
	int same = 1;
	for (int n = 0; n < 4; n++)
		same &= !memcmp(pk + (size_t)n * C, x + (size_t)at[n] * C, sizeof(float) * C);
	ok(same && close_arr(pk, pk2, (size_t)4 * C, 1e-6, 1e-6, "dropout at naive"),
	   "dropout of packed tokens = the padded mask's elements (C=%d)", C);
	free(x); free(pk); free(pk2);
}

static void test_elementwise(size_t n)
{
	float *x = rnd(n, 4), *o1 = rnd(n, 1), *o2 = rnd(n, 1), *dy = rnd(n, 1);
	char what[32];
	snprintf(what, sizeof what, "n=%zu", n);
	for (int k = 0; k < 2; k++) {
		check_gelu(&gelus[k], x, dy, o1, o2, n, what);
		memcpy(o2, dy, sizeof(float) * n);
		gelus[k].bwd(o2, x, o2, n); /* in place */
		ok(close_arr(o2, o1, n, 1e-6, 1e-5, "in place"), "%s bwd in place n=%zu",
		   gelus[k].name, n);
	}
	memcpy(o1, x, sizeof(float) * n);
	memcpy(o2, x, sizeof(float) * n);
	loom_k_dropout(o1, n, 0.3f, 99);
	loom_k_dropout_naive(o2, n, 0.3f, 99);
	ok(close_arr(o1, o2, n, 1e-6, 1e-6, "dropout"), "dropout n=%zu", n);
	float *o3 = rnd(n, 1);
	loom_k_dropout_copy(o3, x, n, 0.3f, 99);
	ok(memcmp(o3, o1, sizeof(float) * n) == 0, "dropout_copy = dropout n=%zu", n);
	loom_k_dropout_copy_naive(o3, x, n, 0.3f, 99);
	ok(close_arr(o3, o2, n, 1e-6, 1e-6, "dropout_copy_naive"), "dropout_copy_naive n=%zu", n);
	loom_k_dropout_copy(o3, x, n, 0.0f, 99);
	ok(memcmp(o3, x, sizeof(float) * n) == 0, "dropout_copy p=0 copies n=%zu", n);
	loom_k_zero(o3, n);
	int zero = 1;
	for (size_t i = 0; i < n; i++)
		zero &= o3[i] == 0.0f;
	ok(zero, "zero n=%zu", n);
	free(o3);
	size_t zeros = 0;
	for (size_t i = 0; i < n; i++)
		zeros += o1[i] == 0;
	ok(n < 1000 || fabs((double)zeros / n - 0.3) < 0.05, "dropout drops ~30%% (%zu/%zu)",
	   zeros, n);
	double s1 = loom_k_sumsq(x, n), s2 = loom_k_sumsq_naive(x, n);
	ok(fabs(s1 - s2) <= 1e-9 * s2, "sumsq n=%zu", n);
	free(x); free(o1); free(o2); free(dy);
}

/* GELU over inputs far outside the usual range (exp's clamps, both tails). */
static void test_gelu_wide(void)
{
	enum { n = 4001 };
	float x[n], o1[n], o2[n], dy[n];
	for (int i = 0; i < n; i++) {
		x[i] = (i - n / 2) * 0.06f; /* -120 .. 120 */
		dy[i] = 1.0f;
	}
	for (int k = 0; k < 2; k++)
		check_gelu(&gelus[k], x, dy, o1, o2, n, "on -120..120");
	/* its derivative against central differences of the naive forward
	 * (h = 1e-2: error ~h^2, far above fp32 rounding) on -6..6 */
	int bad = 0;
	for (int i = 0; i < n; i += 10) {
		float xs = (i - n / 2) * 0.003f, xp = xs + 1e-2f, xm = xs - 1e-2f, fp, fm, d, one = 1;
		loom_k_gelu_erf_fwd_naive(&fp, &xp, 1);
		loom_k_gelu_erf_fwd_naive(&fm, &xm, 1);
		loom_k_gelu_erf_bwd(&d, &xs, &one, 1);
		bad += fabs((fp - fm) / 2e-2 - d) > 2e-4;
	}
	ok(!bad, "gelu erf bwd matches finite differences on -6..6 (%d off)", bad);
}

static void test_crossentropy(int N, int V, float spread)
{
	float *lg = rnd((size_t)N * V, spread), *l2 = dup(lg, (size_t)N * V);
	float loss1[64], loss2[64];
	int32_t tg[64];
	for (int i = 0; i < N; i++)
		tg[i] = i % 5 == 3 ? 0 : (int32_t)(loom_splitmix64(i + 100) % V);
	int c1 = loom_k_crossentropy_fwd(lg, loss1, tg, N, V, 0);
	int c2 = loom_k_crossentropy_fwd_naive(l2, loss2, tg, N, V, 0);
	is_int(c1, c2, "crossentropy counts (N=%d V=%d)", N, V);
	ok(close_arr(loss1, loss2, N, 1e-5, 1e-5, "loss") &&
	   close_arr(lg, l2, (size_t)N * V, 1e-7, 1e-4, "probs"),
	   "crossentropy fwd N=%d V=%d logits +-%g", N, V, spread);
	float *l3 = dup(lg, (size_t)N * V);
	loom_k_crossentropy_bwd(lg, tg, N, V, 0, 0, 0.25f, NULL);
	loom_k_crossentropy_bwd_naive(l2, tg, N, V, 0, 0, 0.25f, NULL);
	ok(close_arr(lg, l2, (size_t)N * V, 1e-7, 1e-4, "dlogits"), "crossentropy bwd N=%d V=%d",
	   N, V);
	/* the columns of ids 2..V-1 as a vocabulary slice: the same numbers */
	float *l4 = malloc(sizeof(float) * N * (V - 2));
	for (int n = 0; n < N; n++)
		memcpy(l4 + (size_t)n * (V - 2), l3 + (size_t)n * V + 2, sizeof(float) * (V - 2));
	loom_k_crossentropy_bwd(l4, tg, N, V - 2, 2, 0, 0.25f, NULL);
	int same = 1;
	for (int n = 0; n < N; n++)
		same &= !memcmp(l4 + (size_t)n * (V - 2), lg + (size_t)n * V + 2,
				sizeof(float) * (V - 2));
	ok(same, "crossentropy bwd of a vocabulary slice N=%d V=%d", N, V);
	free(l3);
	free(l4);
	free(lg); free(l2);
}

/* Inverse-count token weights on a hand-made batch (repeats, ignored
 * targets), then on a random one against a count done here. */
static void test_token_weights(void)
{
	enum { IGN = 9 };
	const int32_t tg[2][8] = { { 3, 7, 3, 3, IGN, 7, 1, IGN }, { 2, 2, 2, 2, 5, IGN, 7, 2 } };
	const float want[2][8] = { { 1 / 3.f, 1 / 2.f, 1 / 3.f, 1 / 3.f, 0, 1 / 2.f, 1, 0 },
				   { 1 / 5.f, 1 / 5.f, 1 / 5.f, 1 / 5.f, 1, 0, 1, 1 / 5.f } };
	float w[16];
	loom_k_token_weights(w, &tg[0][0], 2, 8, IGN);
	ok(!memcmp(w, want, sizeof w), "token weights: 1/k within each row, ignored targets 0");
	loom_k_token_weights(w, &tg[0][0], 1, 16, IGN);
	ok(w[0] == 1 / 3.f && w[8] == 1 / 5.f && w[6] == 1 && w[1] == 1 / 3.f && w[14] == 1 / 3.f,
	   "token weights: as one row of 16 the 7s of both halves count together");

	enum { RB = 3, RT = 67 };
	int32_t rt[RB * RT];
	float rw[RB * RT];
	for (int i = 0; i < RB * RT; i++)
		rt[i] = (int32_t)(loom_splitmix64(i + 500) % 11) - 1; /* -1 = ignored */
	loom_k_token_weights(rw, rt, RB, RT, -1);
	int good = 1;
	for (int b = 0; b < RB; b++)
		for (int i = 0; i < RT; i++) {
			int k = 0, t = rt[b * RT + i];
			for (int j = 0; j < RT; j++)
				k += rt[b * RT + j] == t;
			float e = t == -1 ? 0.0f : 1.0f / (float)k;
			good &= rw[b * RT + i] == e;
		}
	ok(good, "token weights of a random %dx%d batch equal a direct count", RB, RT);
}

/* log(sum_v exp(r[v])) in double */
static double lse_ref(const float *r, int V)
{
	double mx = r[0], se = 0;
	for (int v = 1; v < V; v++)
		mx = r[v] > mx ? r[v] : mx;
	for (int v = 0; v < V; v++)
		se += exp(r[v] - mx);
	return mx + log(se);
}

/* The weighted cross-entropy the model trains on, sum_i w_i * loss_i /
 * ntok (ntok = number of non-ignored targets = non-zero weights), in
 * double from the logits; its gradient from the kernels (forward, then
 * backward with dloss = 1/ntok and the weights) against the closed form
 * and against central finite differences of this function. */
static double wxent_ref(const float *lg, const int32_t *tg, const float *w, int N, int V,
			int ign)
{
	double s = 0;
	int ntok = 0;
	for (int n = 0; n < N; n++) {
		if (tg[n] == ign)
			continue;
		const float *r = lg + (size_t)n * V;
		s += w[n] * (lse_ref(r, V) - r[tg[n]]);
		ntok++;
	}
	return s / ntok;
}

static void test_weighted_crossentropy(void)
{
	enum { WB = 2, WT = 8, V = 11, N = WB * WT, IGN = 9 };
	const int32_t tg[N] = { 3, 7, 3, 3, IGN, 7, 1, IGN, 2, 2, 2, 2, 5, IGN, 6, 2 };
	float w[N], loss[N];
	loom_k_token_weights(w, tg, WB, WT, IGN);
	float *lg0 = rnd((size_t)N * V, 3), *lg = dup(lg0, (size_t)N * V);
	float *l2 = dup(lg0, (size_t)N * V);
	int ntok = loom_k_crossentropy_fwd(lg, loss, tg, N, V, IGN);
	is_int(ntok, 13, "weighted xent: 13 counted targets");
	double ws = 0, plain = 0;
	for (int n = 0; n < N; n++) {
		ws += (double)w[n] * loss[n];
		plain += loss[n];
	}
	double want = wxent_ref(lg0, tg, w, N, V, IGN);
	ok(fabs(ws / ntok - want) <= 1e-6 * want, "weighted xent forward %.7f vs reference %.7f",
	   ws / ntok, want);
	ok(ws / ntok < plain / ntok, "repeats weigh less: weighted %.4f < plain mean %.4f",
	   ws / ntok, plain / ntok);

	loom_k_crossentropy_bwd(lg, tg, N, V, 0, IGN, 1.0f / (float)ntok, w);
	loom_k_crossentropy_fwd_naive(l2, loss, tg, N, V, IGN);
	loom_k_crossentropy_bwd_naive(l2, tg, N, V, 0, IGN, 1.0f / (float)ntok, w);
	ok(close_arr(lg, l2, (size_t)N * V, 1e-8, 1e-5, "weighted dlogits"),
	   "weighted xent backward: fast = naive");
	/* closed form: (softmax - onehot) * w / ntok, 0 on ignored rows */
	float cf[N * V];
	for (int n = 0; n < N; n++) {
		const float *r = lg0 + (size_t)n * V;
		double lse = lse_ref(r, V);
		for (int v = 0; v < V; v++)
			cf[n * V + v] = tg[n] == IGN ? 0.0f :
				(float)((exp(r[v] - lse) - (v == tg[n])) * w[n] / ntok);
	}
	ok(close_arr(lg, cf, (size_t)N * V, 1e-8, 1e-5, "closed form"),
	   "weighted xent backward = (softmax - onehot) * w / ntok");
	int bad = 0;
	const float h = 1e-2f;
	for (int i = 0; i < N * V; i++) {
		float save = lg0[i];
		lg0[i] = save + h;
		double lp = wxent_ref(lg0, tg, w, N, V, IGN);
		lg0[i] = save - h;
		double lm = wxent_ref(lg0, tg, w, N, V, IGN);
		lg0[i] = save;
		double fd = (lp - lm) / (2 * h);
		if (fabs(fd - lg[i]) > 1e-5 + 1e-3 * fabs(fd) && bad++ < 3)
			diag("dlogits[%d]: analytic %.7g, numeric %.7g", i, lg[i], fd);
	}
	ok(!bad, "weighted xent backward = finite differences of the weighted loss (%d logits)",
	   N * V);
	free(lg0); free(lg); free(l2);
}

static void test_adamw(size_t n)
{
	float *p1 = rnd(n, 1), *g = rnd(n, 1), *m1 = rnd(n, 0.1f), *v1 = rnd(n, 0.1f);
	for (size_t i = 0; i < n; i++)
		v1[i] = fabsf(v1[i]);
	float *p2 = dup(p1, n), *m2 = dup(m1, n), *v2 = dup(v1, n);
	float *g1 = dup(g, n), *g2 = dup(g, n);
	for (int t = 1; t <= 3; t++) {
		memcpy(g1, g, sizeof(float) * n);
		memcpy(g2, g, sizeof(float) * n);
		loom_k_adamw(p1, g1, m1, v1, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t, t == 2 ? 0.5f : 1.0f);
		loom_k_adamw_naive(p2, g2, m2, v2, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t, t == 2 ? 0.5f : 1.0f);
	}
	ok(close_arr(p1, p2, n, 1e-6, 1e-5, "p") && close_arr(m1, m2, n, 1e-7, 1e-5, "m") &&
	   close_arr(v1, v2, n, 1e-7, 1e-5, "v"), "adamw n=%zu", n);
	int zeroed = 1;
	for (size_t i = 0; i < n; i++)
		zeroed &= g1[i] == 0.0f;
	ok(zeroed, "adamw leaves the gradients zeroed");
	/* the team version: two halves updated by one parallel region */
	memcpy(p2, p1, sizeof(float) * n);
	memcpy(m2, m1, sizeof(float) * n);
	memcpy(v2, v1, sizeof(float) * n);
	memcpy(g1, g, sizeof(float) * n);
	memcpy(g2, g, sizeof(float) * n);
	size_t h = n / 2;
	#pragma omp parallel
	{
		loom_k_adamw_team(p1, g1, m1, v1, h, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 4, 0.7f);
		loom_k_adamw_team(p1 + h, g1 + h, m1 + h, v1 + h, n - h, 1e-2f, 0.9f, 0.95f, 1e-8f,
				  0.0f, 4, 0.7f);
	}
	loom_k_adamw_naive(p2, g2, m2, v2, h, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 4, 0.7f);
	loom_k_adamw_naive(p2 + h, g2 + h, m2 + h, v2 + h, n - h, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f,
			   4, 0.7f);
	ok(close_arr(p1, p2, n, 1e-6, 1e-5, "p") && close_arr(m1, m2, n, 1e-7, 1e-5, "m") &&
	   close_arr(v1, v2, n, 1e-7, 1e-5, "v"), "adamw_team in one region n=%zu", n);
	free(g1);
	free(g2);
	free(p1); free(g); free(m1); free(v1); free(p2); free(m2); free(v2);
}

int main(void)
{
	static const int mm[][3] = { { 1, 1, 1 }, { 7, 13, 5 }, { 33, 64, 96 }, { 16, 17, 129 } };
	for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++)
		test_matmul(mm[i][0], mm[i][1], mm[i][2]);
	for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++)
		test_linear(mm[i][0], mm[i][1], mm[i][2]);
	test_layernorm(1, 1);
	test_layernorm(5, 7);
	test_layernorm(40, 130);
	/* the fast kernels take tiles of 64 queries and keys: T = 64 and 128
	 * fill them, 65 and 150 leave a partial last tile */
	static const int at[][4] = { { 1, 1, 4, 1 }, { 2, 5, 12, 3 }, { 3, 17, 32, 4 }, { 1, 64, 16, 2 },
				     { 2, 65, 8, 1 }, { 1, 128, 24, 2 }, { 2, 150, 16, 2 } };
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
		for (int masked = 0; masked < 2; masked++) {
			test_attention(at[i][0], at[i][1], at[i][2], at[i][3], 0, masked);
			test_attention(at[i][0], at[i][1], at[i][2], at[i][3], 0.25f, masked);
		}
		for (int causal = 0; causal < 2; causal++) {
			test_attention_packed(at[i][0] + 1, at[i][1], at[i][2], at[i][3], 0, causal);
			test_attention_packed(at[i][0] + 1, at[i][1], at[i][2], at[i][3], 0.25f,
					      causal);
		}
	}
	test_encoder(2, 3, 5, 7);
	test_encoder(3, 11, 70, 13);
	test_elementwise(1);
	test_dropout_at(1);
	test_dropout_at(77);
	test_elementwise(1001);
	test_elementwise(200003);
	test_gelu_wide();
	test_crossentropy(1, 2, 5);
	test_crossentropy(13, 37, 5);
	test_crossentropy(40, 1001, 5);
	test_crossentropy(7, 3001, 200); /* most exps underflow */
	test_token_weights();
	test_weighted_crossentropy();
	test_adamw(1);
	test_adamw(10007);
	return done_testing();
}
