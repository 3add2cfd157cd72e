/*
 * loom_kernels.h - the compute kernels of the GPT (lib/train/loom_gpt.h)
 * and of BERT (lib/train/loom_bert.h), each a fast version beside a naive
 * reference.  Both models share the layernorm, dropout, cross-entropy and
 * AdamW kernels; the GPT uses the Conv1D-layout matmul, tanh-GELU and
 * causal attention, BERT the nn.Linear-layout linear kernels, erf-GELU
 * and bidirectional attention masked by each row's length.
 *
 * Purpose: plain functions over flat float arrays (shapes in the
 * comments; row-major; N = B*T rows).  The fast kernels do every matrix
 * product through the matmul backend mm (lib/kernels/loom_mm.h: OpenBLAS sgemm in
 * fp32, which mm == NULL means, or oneDNN bf16) and use OpenMP for the rest; the `_naive`
 * ones are straightforward loops kept as the specification and tested
 * against the fast ones (tests/gpt_kernels.c).
 *
 * Determinism: every fast kernel gives bit-identical results for the same
 * inputs and thread count on one machine.  Reductions over rows
 * (weight/bias gradients, embedding gradients) are split by columns, never
 * by rows, so no two threads add into one value; global sums use
 * fixed-size chunks.  The fast kernels are built for several instruction
 * sets (loom_k_isa()), so machines of different kinds may differ in the
 * last bits, as OpenBLAS's kernels do.
 *
 * Weights are in GPT-2 "Conv1D" layout: w[in, out], y = x @ w + b, for
 * the matmul kernels, and in nn.Linear layout w[out, in], y = x @ w^T + b,
 * for the linear kernels (BERT: lib/train/loom_bert.h).
 * Nothing here allocates except the attention kernels' per-thread
 * scratch (a few tiles; the naive ones a row); nothing prints.  Errors:
 * most kernels cannot fail (void); the attention kernels return
 * LOOM_ENOMEM when their scratch cannot be allocated.  Thread-safety: the default
 * (loom_common.h): kernels are functions without an object, each runs an
 * OpenMP team of its own; an mm passed in is an object (loom_mm.h).
 */
#ifndef LOOM_KERNELS_H
#define LOOM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "loom_mm.h"

/* For the kernels' .c files: the fast kernels are compiled three times
 * (ifunc dispatch at load time): AVX-512, AVX2+FMA and baseline x86-64,
 * so a stock build vectorises with the widest units of the machine it runs
 * on (softmax, GELU, AdamW ... run 2-3x faster than with SSE2); OpenMP's
 * outlined loops are cloned with their function.  A given machine always
 * runs the same clone, so results stay bit-identical run to run.
 * Elsewhere (and with LOOM_NO_CLONES: clang's fuzz build) one version is
 * built. */
#if defined(__x86_64__) && defined(__gnu_linux__) && !defined(LOOM_NO_CLONES)
#define LOOM_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LOOM_SIMD
#endif

/* out[B,T,C] = wte[tok[b,t], :] + wpe[t, :], or with token types typ[B,T]
 * (BERT; NULL: none) (wte[tok[b,t], :] + wtt[typ[b,t], :]) + wpe[t, :].
 * With pos[B*T] (NULL: t) token (b,t) takes position pos[b*T+t]: packed
 * rows of several lengths (B = 1, T = their token count).  wte holds the
 * rows of ids v0 .. v0+nv-1 (the whole table: 0, V; a tensor-parallel
 * rank's vocabulary slice: the others add 0); wpe NULL adds no position
 * (a tensor-parallel rank other than the first). */
void loom_k_encoder_fwd(float *out, const int32_t *tok, const float *wte, int v0, int nv,
			const float *wpe, const int32_t *typ, const float *wtt, const int32_t *pos,
			int B, int T, int C);
void loom_k_encoder_fwd_naive(float *out, const int32_t *tok, const float *wte, int v0,
			      int nv, const float *wpe, const int32_t *typ, const float *wtt,
			      const int32_t *pos, int B, int T, int C);
/* dwte[nv,C] += scatter(dout) of the ids v0 .. v0+nv-1, dwpe[T,C] +=
 * sum_b dout (by pos[] when given), and with typ dwtt[types,C] +=
 * scatter(dout) by type */
void loom_k_encoder_bwd(float *dwte, int v0, int nv, float *dwpe, float *dwtt,
			const float *dout, const int32_t *tok, const int32_t *typ,
			const int32_t *pos, int B, int T, int C);
void loom_k_encoder_bwd_naive(float *dwte, int v0, int nv, float *dwpe, float *dwtt,
			      const float *dout, const int32_t *tok, const int32_t *typ,
			      const int32_t *pos, int B, int T, int C);

/* out[N,C] = (inp - mean) * rstd * w + b; mean[N], rstd[N] saved. */
void loom_k_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
			  const float *w, const float *b, int N, int C, float eps);
void loom_k_layernorm_fwd_naive(float *out, float *mean, float *rstd, const float *inp,
				const float *w, const float *b, int N, int C, float eps);
/* dinp[N,C] +=, dw[C] +=, db[C] += */
void loom_k_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout,
			  const float *inp, const float *w, const float *mean,
			  const float *rstd, int N, int C);
void loom_k_layernorm_bwd_naive(float *dinp, float *dw, float *db, const float *dout,
				const float *inp, const float *w, const float *mean,
				const float *rstd, int N, int C);

/* out[N,OC] = inp[N,IC] @ w[IC,OC] + bias[OC] (bias may be NULL); the
 * product in mm's precision (bf16: errors sticky in mm, see loom_mm.h) */
void loom_k_matmul_fwd(struct loom_mm *mm, float *out, const float *inp, const float *w,
		       const float *bias, int N, int IC, int OC);
void loom_k_matmul_fwd_naive(float *out, const float *inp, const float *w,
			     const float *bias, int N, int IC, int OC);
/* dinp[N,IC] = dout @ w^T (overwritten; may be NULL), dw[IC,OC] += inp^T @ dout,
 * dbias[OC] += sum_n dout (may be NULL).  dinp may be inp (written last). */
void loom_k_matmul_bwd(struct loom_mm *mm, float *dinp, float *dw, float *dbias,
		       const float *dout, const float *inp, const float *w, int N, int IC, int OC);
void loom_k_matmul_bwd_naive(float *dinp, float *dw, float *dbias, const float *dout,
			     const float *inp, const float *w, int N, int IC, int OC);

/* nn.Linear: out[N,OC] = inp[N,IC] @ w^T + bias with w[OC,IC] (read
 * transposed by the backend, bf16 too); backward dinp[N,IC] = dout @ w
 * (overwritten; may be NULL; may be inp), dw[OC,IC] += dout^T @ inp,
 * dbias += sum_n dout.  The same code as the matmul kernels with the
 * other weight layout, tested against loom_k_matmul_*_naive on w^T. */
void loom_k_linear_fwd(struct loom_mm *mm, float *out, const float *inp, const float *w,
		       const float *bias, int N, int IC, int OC);
void loom_k_linear_bwd(struct loom_mm *mm, float *dinp, float *dw, float *dbias,
		       const float *dout, const float *inp, const float *w, int N, int IC, int OC);

/* Multi-head attention, causal (len == NULL: the GPT) or bidirectional
 * with a key-padding mask (len[B]: BERT, whose rows are real tokens then
 * padding): query i of batch row b sees keys j <= i (causal) or
 * j < len[b] (len[b] kept in 1..T; every query, padding ones too, sees
 * the row's real keys, as HuggingFace's additive mask does; keys from
 * len[b] on get zero gradient).  qkv[B,T,3C] (q|k|v, heads of C/NH),
 * out[B,T,C], lse[B,NH,T] the log-sum-exp of each row of scaled scores
 * S_ij = q_i . k_j / sqrt(C/NH) over the visible j, so the softmax probabilities are
 * P_ij = exp(S_ij - lse_i).  With attention dropout p > 0 the output is
 * drop(P) @ V, element (b,h,i,j) of the mask drawn from `key` as
 * loom_k_dropout() draws element (b*NH+h)*T*T + i*T + j; backward
 * regenerates the mask from the same key.
 *
 * The fast kernels are flash attention: tiles of queries against tiles of
 * keys with an online softmax, threaded over (query tile, b, h) forward
 * and (b, h) backward, with a few tiles of scratch per thread; backward
 * recomputes P from qkv and lse.  The naive ones are the definition and
 * also produce (forward) and consume (backward) att[B,NH,T,T], P (zero
 * where not visible; kept without dropout).  Return 0, or LOOM_ENOMEM if
 * scratch could not be allocated.
 *
 * Packed rows (off[B+1]; NULL: padded rows of T): FlashAttention's
 * varlen layout, row b's len[b] tokens at off[b] .. off[b+1]-1 of qkv
 * [off[B],3C], out and dout [off[B],C], with only its real queries
 * computed; lse is then [off[B]*NH], row b's head h at
 * off[b]*NH + h*len[b].  Causal packed rows (off without len: the GPT's
 * rows that end early) take len[b] = off[b+1] - off[b], 0..T (a row of
 * none computes nothing).  T stays the padded length: the dropout mask
 * and att are indexed as in a padded run, so both give the same numbers
 * on the real tokens (causal: a real query never sees a padding key). */
int loom_k_attention_fwd(float *out, float *lse, const float *qkv, const int32_t *len,
			 const int32_t *off, int B, int T, int C, int NH, float p, uint64_t key);
int loom_k_attention_fwd_naive(float *out, float *att, float *lse, const float *qkv,
			       const int32_t *len, const int32_t *off, int B, int T, int C, int NH,
			       float p, uint64_t key);
/* dqkv[B,T,3C] = gradient (overwritten), from dout[B,T,C] and the
 * forward's out and lse (fast) or att (naive). */
int loom_k_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
			 const float *lse, const int32_t *len, const int32_t *off, int B, int T, int C,
			 int NH, float p, uint64_t key);
int loom_k_attention_bwd_naive(float *dqkv, const float *dout, const float *qkv,
			       const float *att, const int32_t *len, const int32_t *off, int B, int T,
			       int C, int NH, float p, uint64_t key);

/* The same for heads h0 .. h0 + NH - 1 of a layer of NHall (tensor
 * parallelism: a rank's heads; qkv[B,T,3C] with C = NH x head size):
 * head h's dropout mask is the one the layer's head h0 + h draws among
 * all NHall, element (b*NHall+h0+h)*T*T + i*T + j, so the split layer
 * drops what the whole one drops (h0 0, NHall NH: the kernels above). */
int loom_k_attention_fwd_heads(float *out, float *lse, const float *qkv, const int32_t *len,
			       const int32_t *off, int B, int T, int C, int NH, int h0, int NHall,
			       float p, uint64_t key);
int loom_k_attention_fwd_heads_naive(float *out, float *att, float *lse, const float *qkv,
				     const int32_t *len, const int32_t *off, int B, int T, int C,
				     int NH, int h0, int NHall, float p, uint64_t key);
int loom_k_attention_bwd_heads(float *dqkv, const float *dout, const float *qkv,
			       const float *out, const float *lse, const int32_t *len,
			       const int32_t *off, int B, int T, int C, int NH, int h0, int NHall,
			       float p, uint64_t key);
int loom_k_attention_bwd_heads_naive(float *dqkv, const float *dout, const float *qkv,
				     const float *att, const int32_t *len, const int32_t *off,
				     int B, int T, int C, int NH, int h0, int NHall, float p,
				     uint64_t key);

/* GELU, tanh approximation ("gelu_new"). */
void loom_k_gelu_fwd(float *out, const float *inp, size_t n);
void loom_k_gelu_fwd_naive(float *out, const float *inp, size_t n);
/* dinp = dout * gelu'(inp) (dinp may alias dout) */
void loom_k_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n);
void loom_k_gelu_bwd_naive(float *dinp, const float *inp, const float *dout, size_t n);

/* GELU with the exact erf, 0.5 x (1 + erf(x / sqrt 2)) (HuggingFace's
 * "gelu", BERT's); the fast one through a polynomial erf (absolute error
 * ~2e-7). */
void loom_k_gelu_erf_fwd(float *out, const float *inp, size_t n);
void loom_k_gelu_erf_fwd_naive(float *out, const float *inp, size_t n);
void loom_k_gelu_erf_bwd(float *dinp, const float *inp, const float *dout, size_t n);
void loom_k_gelu_erf_bwd_naive(float *dinp, const float *inp, const float *dout, size_t n);

/* out = a + b */
void loom_k_residual_fwd(float *out, const float *a, const float *b, size_t n);
/* x[n] = 0 by the team (memset is its naive version): the gradient
 * buffers that a backward kernel adds into */
void loom_k_zero(float *x, size_t n);

/* Dropout with a counter-based mask: element i is kept iff
 * hash(key, i) >= p; kept values are scaled by 1/(1-p).  The same key
 * gives the same mask (recompute and backward regenerate it).  x in place. */
void loom_k_dropout(float *x, size_t n, float p, uint64_t key);
void loom_k_dropout_naive(float *x, size_t n, float p, uint64_t key);
/* Packed tokens x[N,C] (rows of several lengths laid end to end) into
 * out (may be x; a copy when p == 0): token n's element c dropped as
 * element at[n]*C + c of loom_k_dropout()'s mask, at[n] its index b*T+t in
 * the padded [B,T,C] layout, so packed and padded runs drop the same
 * elements. */
void loom_k_dropout_at(float *out, const float *x, int N, int C, float p, uint64_t key,
		       const int32_t *at);
void loom_k_dropout_at_naive(float *out, const float *x, int N, int C, float p, uint64_t key,
			     const int32_t *at);
/* The same from x into out[n] (a copy when p == 0; out may be x): the
 * backward's dropped gradient in one pass. */
void loom_k_dropout_copy(float *out, const float *x, size_t n, float p, uint64_t key);
void loom_k_dropout_copy_naive(float *out, const float *x, size_t n, float p, uint64_t key);

/* Softmax + cross-entropy.  logits[N,V] are replaced by probabilities;
 * losses[N] = -log p[target] (0 where target == ignore_id).  Returns the
 * number of counted (non-ignored) targets. */
int loom_k_crossentropy_fwd(float *logits, float *losses, const int32_t *targets, int N,
			    int V, int ignore_id);
int loom_k_crossentropy_fwd_naive(float *logits, float *losses, const int32_t *targets,
				  int N, int V, int ignore_id);
/* The softmax's row passes, also for a row split over ranks (tensor
 * parallelism's vocabulary-parallel loss): the maximum of r[0..n); r[v]
 * replaced by exp(r[v] - mx), returning their sum; r[v] scaled by s. */
float loom_k_row_max(const float *r, int n);
float loom_k_row_exp(float *r, int n, float mx);
void loom_k_row_scale(float *r, int n, float s);
/* probs[N,V] -> dlogits in place: (p - onehot(target)) * dloss * w[n]
 * (w[N] per-row loss weights, NULL: all 1); rows with target == ignore_id
 * become zero.  probs are those of ids v0 .. v0+V-1 (the whole
 * vocabulary: 0; a tensor-parallel rank's slice: a target outside it
 * takes no onehot here). */
void loom_k_crossentropy_bwd(float *probs, const int32_t *targets, int N, int V, int v0,
			     int ignore_id, float dloss, const float *w);
void loom_k_crossentropy_bwd_naive(float *probs, const int32_t *targets, int N, int V, int v0,
				   int ignore_id, float dloss, const float *w);

/* Inverse-count loss weights: w[b,t] = 1/k where k is the number of times
 * targets[b,t] occurs among targets[b, 0..T-1] (its own row of the batch);
 * 0 where targets[b,t] == ignore_id (ignored targets are not counted).
 * A row of distinct targets weighs 1 everywhere.  Each row is O(T^2)
 * integer compares (below the attention's O(T^2 C)); threaded over rows,
 * so it is its own reference. */
void loom_k_token_weights(float *w, const int32_t *targets, int B, int T, int ignore_id);

/* AdamW step t (1-based) with bias correction; decoupled weight decay wd;
 * the gradient is used as g * gscale (gradient clipping folded in) and
 * then zeroed (saving a separate pass over the gradients). */
void loom_k_adamw(float *p, float *g, float *m, float *v, size_t n, float lr,
		  float beta1, float beta2, float eps, float wd, int64_t t, float gscale);
void loom_k_adamw_naive(float *p, float *g, float *m, float *v, size_t n, float lr,
			float beta1, float beta2, float eps, float wd, int64_t t, float gscale);
/* The same as a share of the caller's OpenMP team: called by every thread
 * inside a parallel region (an orphaned `omp for ... nowait`: no barrier),
 * so that one region updates every tensor of a model; the values are
 * loom_k_adamw's. */
void loom_k_adamw_team(float *p, float *g, float *m, float *v, size_t n, float lr,
		       float beta1, float beta2, float eps, float wd, int64_t t, float gscale);

/* sum of x[i]^2 in double, in fixed chunks (thread-count independent). */
double loom_k_sumsq(const float *x, size_t n);
double loom_k_sumsq_naive(const float *x, size_t n);

/* The instruction set the fast kernels run with on this machine (the
 * clone the loader picked): "AVX-512", "AVX2" or "baseline". */
const char *loom_k_isa(void);

#endif
