/*
 * loom_gpt.h - a GPT-2 / GPT-3 style decoder-only transformer in plain C
 * (llm.c style): forward, backward, AdamW, generation helpers.
 *
 * Model: token + learned position embeddings (+ optional dropout),
 * n_layer pre-LayerNorm blocks of causal multi-head self-attention
 * (optional dropout on the attention probabilities, cfg.attn_dropout) and a
 * GELU(tanh) MLP of width 4C (residual dropout after each projection),
 * final LayerNorm, LM head tied to the token embedding.
 *
 * Memory: parameters, gradients and the AdamW moments m and v are each ONE
 * float allocation of n_params values, laid out as HuggingFace GPT-2's
 * state dict in its order and layouts (Conv1D weights [in, out]):
 *   transformer.wte.weight [V, C], transformer.wpe.weight [P, C],
 *   transformer.h.{i}.ln_1.weight/bias [C], .attn.c_attn.weight [C, 3C],
 *   .attn.c_attn.bias [3C], .attn.c_proj.weight [C, C], .attn.c_proj.bias,
 *   .ln_2.weight/bias, .mlp.c_fc.weight [C, 4C], .mlp.c_fc.bias [4C],
 *   .mlp.c_proj.weight [4C, C], .mlp.c_proj.bias, transformer.ln_f.weight/bias.
 * g->tensors[] lists (name, shape, offset, decay) so checkpoints dump and
 * load tensors directly (loom_gpt_ckpt_tensors()).  Activations are one
 * more allocation, sized for the (B, T) of the last forward, linear in T
 * (attention keeps its output and one log-sum-exp per row, never the
 * T x T probabilities; the MLP keeps its input to GELU, whose output is
 * recomputed in backward; LayerNorm outputs are recomputed from the saved
 * mean and rstd; at large N the mid-block residual is rebuilt in backward;
 * the LM head and loss run over chunks of rows, keeping only per-row
 * losses, and backward recomputes each chunk's logits, or, in a training
 * micro-batch (loom_gpt_train_micro), forward takes each chunk's gradient
 * at once, so no [N, vocab] tensor exists; everything else shares three scratch buffers); with
 * cfg.recompute only each layer's output is kept and the layer is
 * recomputed during backward.
 *
 * Precision: cfg.precision picks the matmul backend (lib/kernels/loom_mm.h); in
 * bf16 every matmul of forward and backward multiplies bf16 copies (the
 * weights converted once per step) with fp32 accumulation, while
 * parameters, gradients, AdamW moments, LayerNorm, softmax, GELU and the
 * loss stay fp32.  A bf16 model on a CPU without bf16 matmul fails its
 * first forward (LOOM_EINVAL, naming what is missing).
 *
 * Loss weighting (cfg.loss_weighting): the reported loss (*loss of
 * loom_gpt_forward, g->loss, loom_gpt_eval_counts) is always the plain
 * mean cross-entropy over the counted targets.  With inverse_count the
 * TRAINING objective, which backward differentiates, is
 *   wloss = sum_i w_i * loss_i / ntok,
 * w_i = 1/k for a target occurring k times in its row of the batch, 0 for
 * ignored targets (loom_k_token_weights), ntok the counted targets: the
 * weighted sum divided by the number of non-zero weights, as in the seed,
 * Graphcore's sparse language model (graphcore/examples,
 * applications/tensorflow/dynamic_sparsity/language_modelling/
 * train_sparse.py: tf.losses.sparse_softmax_cross_entropy with the
 * inverse-count weights and TF1's default reduction
 * SUM_BY_NONZERO_WEIGHTS).  So a row of distinct targets gives the plain
 * mean, and repeats lower the objective below it.  grad_accum
 * micro-batches (backward's scale) and data-parallel ranks (gradients
 * averaged) then average these per-micro-batch objectives, as the seed
 * averages its accumulated gradients and replicas.
 *
 * Sparsity (cfg.sparsity > 0, RigL: lib/train/loom_rigl.h): the
 * projections cfg.sparse_layers names (qkv, proj, fc, fcproj) run on
 * lib/kernels/loom_sparse.h over their live blocks; the dense master
 * weight keeps dead blocks exactly 0 (also in m and v).  The masks start
 * random from the seed (loom_gpt_new and loom_gpt_init_weights).  A step
 * t is announced with loom_gpt_begin_step(): when t updates the masks
 * (loom_config_prune_due), backward computes the dense gradient of the
 * sparse layers (else only their live blocks'), and loom_gpt_step()
 * scores the blocks with it, masks it to the live blocks, takes the AdamW
 * step with the masked gradient (as RigL's reference implementation, not
 * the paper's Algorithm 1, which skips the step's update) and then
 * updates the masks (loom_gpt_rigl_update).  The sparse weights are packed
 * once per step, at the first forward after the weights changed.
 *
 * Tensor parallelism (loom_gpt_new_tp, Megatron-LM's 1D splits): a
 * model may hold one rank's slices of a model split over tp ranks.  The
 * attention's Q/K/V projection is split by heads (columns: rank r holds
 * heads r NH/tp .. of each of Q, K, V, so c_attn.weight is [C, 3C/tp]),
 * its output projection by rows (c_proj.weight [C/tp, C]); the MLP's
 * first projection by columns ([C, 4C/tp], its bias [4C/tp]), the second
 * by rows ([4C/tp, C]); wte by vocabulary rows ([V/tp, C]: ids r V/tp ..),
 * the tied LM head with it, as a vocabulary-parallel cross-entropy (each
 * rank's [rows, V/tp] logits; the row maxima, sums of exp and target
 * logits all-reduced: no rank holds the [rows, V] logits).  wpe, the
 * LayerNorms and the biases of the row-split products are whole on every
 * rank, their gradients the same on each.  The partial sums of the [N,C]
 * activations are added through the reduce call (lib/train/loom_dist.h,
 * installed by the connect hook): after each row-split product in
 * forward (and the embedding lookup), after each column-split product's
 * input gradient (and the LM head's) in backward.  Dropout acts on the
 * reduced [N,C] activations, the same mask on every rank; attention
 * dropout draws a head's mask by its index among all n_head
 * (loom_k_attention_fwd_heads), the whole layer's.  Each forward
 * checks that the ranks got the same batch.  The step's gradient norm
 * counts the whole tensors once.  loom_gpt_tp_copy moves slices between a
 * whole model's arrays and a rank's (initialisation); checkpoints take a
 * rank's slices as runs of the whole tensors (loom_tp_ckpt_runs).  The
 * model-neutral parts (slices, team sum, batch check, step, the
 * vocabulary-parallel loss, checkpoint runs) are lib/train/loom_tp.h's,
 * shared with BERT.
 *
 * Rows that end early: a forward with targets whose rows end in a tail
 * of ignore_id targets (records shorter than seq_len: loom-feed --pad
 * pads them, loom_gpt_mask_pad makes the padding's targets ignore_id)
 * computes each row only up to its last counted target, the rows packed
 * into one [sum of lengths, C] activation (FlashAttention's varlen
 * layout): the embedding at each token's position in its row, the
 * products, LayerNorm, GELU and dropout over those tokens, causal
 * attention within each row, the LM head and loss over their targets.
 * The positions cut off never reach a counted target (causal), so loss,
 * gradients and evaluation counts are the padded run's, dropout drawing
 * the padded layout's mask elements.  Batches whose rows are all full,
 * without targets (generation), of a tensor-parallel model, or with
 * g->padded set run padded; so does a batch whose every target is
 * ignored.  The activations are laid out for the tokens computed.
 *
 * Sequence parallelism (cfg.sequence_parallel with tp > 1, Megatron-LM's):
 * the regions between the products, LayerNorms, dropout and residual
 * adds, hold only rank r's Nr = B T / tp tokens, rows r Nr .. of the
 * flattened [B T] (with B 1: a slice of the sequence), so the residual
 * stream, the LayerNorm statistics and the embeddings' output take 1/tp of
 * their memory and time.  Before each column-split product its LayerNorm
 * output is all-gathered (the gather call), after each row-split product
 * the partial sums are reduce-scattered (scatter) instead of all-reduced;
 * backward gathers the dropped output gradient of a row-split product
 * and the recomputed LayerNorm output, and scatters the LayerNorm input
 * gradient.  The embedding lookup is scattered; ln_f's output gathered
 * for the vocabulary-parallel head, whose input gradient is scattered.
 * Dropout draws row n's mask as the whole [B T, C]'s (loom_k_dropout_at),
 * so a run is one process's; the LayerNorm weight gradients, partial
 * over the tokens, are all-reduced after each layer's backward.
 *
 * Determinism: same parameters, data, dropout key and thread count give
 * bit-identical results (see loom_kernels.h).
 *
 * Ownership: loom_gpt_new/_free; the model owns its parameters, moments,
 * activations and scratch.  Errors: 0 or negative LOOM_E*; message in
 * g->err (loom_gpt_error()).  Nothing prints.  Thread-safety: the default
 * (loom_common.h): one thread drives a model, whose kernels run OpenMP
 * teams of their own.
 */
#ifndef LOOM_GPT_H
#define LOOM_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"
#include "loom_config.h"
#include "loom_dist.h"
#include "loom_model.h"

/* Per-layer activations (pointers into g->acts). */
struct loom_gpt_lacts {
	float *ln1_mean, *ln1_rstd;         /* [N], [N] (outputs recomputed) */
	float *qkv;                         /* [N,3C] */
	float *atty;                        /* [N,C] */
	float *lse;                         /* [N*NH] log-sum-exp ([B,NH,T] padded) */
	float *res2;                        /* [N,C] (NULL: not kept, see res2) */
	float *ln2_mean, *ln2_rstd;         /* [N], [N] (outputs recomputed) */
	float *fch;                         /* [N,4C] MLP pre-activation */
	float *res3;                        /* [N,C] layer output */
};

struct loom_gpt {
	struct loom_config cfg;
	int L, C, NH, V, P;                 /* layers, hidden, heads, vocab, positions */
	size_t n_params;
	float *params, *grads, *m, *v;      /* one allocation each */
	int n_tensors;
	struct loom_tensor *tensors;
	/* activations for the current (B, T) and N: n_acts floats laid out in acts,
	 * which holds acts_cap (the largest layout so far: never shrinks),
	 * laid out for acts_N tokens; inputs, targets, at and pos hold
	 * io_cap ids (one allocation at inputs, off after them) */
	int B, T;
	size_t n_acts, acts_cap, acts_N, io_cap;
	float *acts;
	struct loom_gpt_lacts *layer;       /* [L] */
	float *encoded;                     /* [N,C] (layer 1's res3 slot if L > 1) */
	float *lnf_mean, *lnf_rstd;         /* [N], [N] */
	float *losses;                      /* [N] */
	float *lweights;                    /* [N] loss weights (NULL: loss_weighting none) */
	/* shared buffers: tmp [N,C] and dres [N,C]; work [max(N*4C, hr*V)]
	 * (gelu output, MLP and attention gradients, the LM-head chunk) */
	float *tmp, *dres, *work;
	float *lnf;                         /* = tmp: ln_f output [N,C] */
	float *logits;                      /* = work: one LM-head chunk [hr,V] */
	size_t hr;                          /* rows per LM-head chunk */
	int res2;                           /* layers keep res2 (else rebuilt) */
	/* read by the next forward: rows per LM-head chunk wanted (0: one
	 * chunk up to 512 MB of logits, else chunks that fit work), and
	 * keep_res2 (0: keep while all layers' res2 fit 256 MB or under
	 * recompute; 1: keep; -1: rebuild in backward) */
	int head_rows, keep_res2;
	/* read by the next forward: 1 runs every row at full T (the padded
	 * reference); 0 (default) runs a batch with targets whose rows end
	 * early packed (see Rows that end early above) */
	int padded;
	/* the last forward's rows: N tokens computed, B*T, or packed (the
	 * rows at their real length laid end to end: row b's at off[b] ..
	 * off[b+1]-1, token n at position pos[n] of its row and pat[n] =
	 * b*T + pos[n] in the padded layout, whose dropout mask it draws) */
	int N, packed;
	int32_t *off, *pat, *pos;           /* [B+1], [N], [N] (when packed) */
	int32_t *inputs, *targets;          /* [N] copies of the last batch */
	int have_targets;
	int ntok;                           /* counted targets of the last forward */
	int64_t ncorrect;                   /* of those, argmax hits (forward with train 0) */
	float loss;                         /* mean loss of the last forward */
	float wloss;                        /* its training objective (= loss unless weighted) */
	int train;                          /* last forward used dropout */
	int head_done;                      /* its forward took the LM head's backward */
	uint64_t key;                       /* dropout key of the last forward */
	/* The calls of data and tensor parallelism (lib/train/loom_dist.h),
	 * installed by the connect hook (loom_gpt_dist_model), each called
	 * with dist.ctx; all NULL until then (one process):
	 *  - grad_ready(ctx, l) as soon as layer l's gradients are final (l =
	 *    L-1 .. 0; layer L-1's call also covers ln_f), then
	 *    grad_ready(ctx, -1) after the embeddings.  Not called when every
	 *    target was ignored, unless need is set (its backward runs, with a
	 *    zero gradient).
	 *  - weight sharding: the model reads the parameters of unit u (-1: wte
	 *    and wpe; l: layer l, layer L-1 with ln_f) only between need(ctx,
	 *    u, next, err) and done(ctx, u), `next` being the unit it will read
	 *    after u (LOOM_GPT_UNIT_NONE: none); need returns 0 or an error
	 *    (message in *err).  When set, a unit's sparse weights are packed
	 *    and its bf16 copy made each time it arrives, and the embeddings'
	 *    output keeps a slot of its own (cfg's loom_config_shards_weights()),
	 *    so backward never reads wte/wpe.  The gradients of a unit are
	 *    written only between need(u) and grad_ready(u).  tick(ctx) after
	 *    each projection's product (forward and backward), on the calling
	 *    thread: MPI moves large messages only inside MPI calls, so the
	 *    gathers progress.
	 *  - tensor parallelism: reduce (sum or max over the tp ranks);
	 *    sequence parallelism: gather and scatter (see below). */
	struct loom_dist_calls dist;
	/* matmul backend (lib/kernels/loom_mm.h) of cfg.precision, made by the first
	 * forward (NULL: fp32); w16_ok: its bf16 weight copy is current */
	struct loom_mm *mm;
	int w16_ok;
	/* RigL (NULL when dense): the masks; per layer l and projection j
	 * (0 qkv, 1 proj, 2 fc, 3 fcproj) sp[4l+j] the block-sparse weight
	 * (NULL: dense) and rl[4l+j] its layer in rigl (-1); sp_ok: packed
	 * values current; rigl_dense: the current step updates the masks
	 * (loom_gpt_begin_step), so backward computes dense gradients */
	struct loom_rigl *rigl;
	struct loom_sparse **sp;
	int *rl;
	int sp_ok, sp_mask_ok, rigl_dense;
	/* tensor parallelism: rank tp_rank of tp (1: the whole model); its
	 * heads NHl, attention width Cl = C/tp, MLP width Fl = 4C/tp and
	 * vocabulary rows Vl = V/tp (ids tp_rank Vl ..), summed or maxed over
	 * the tp ranks by dist.reduce; xent [3 hr]: the loss's per-row maxima,
	 * sums and target logits */
	int tp, tp_rank, NHl, Cl, Fl, Vl;
	float *xent;
	/* sequence parallelism (seq 1, cfg.sequence_parallel with tp > 1):
	 * the LayerNorm, dropout and residual regions hold this rank's Nr =
	 * B T / tp tokens, rows r0 = tp_rank Nr .. of the flattened [B T]
	 * (at[Nr]: their indices, the dropout masks' rows); dist.gather and
	 * dist.scatter the all-gather and reduce-scatter around the
	 * products; lnd [4C]: a layer's LayerNorm gradients of these tokens,
	 * summed over the ranks.  Without: Nr = B T, r0 0. */
	int seq, Nr, r0;
	int32_t *at;
	float *lnd;
	struct loom_err err;
};

#define LOOM_GPT_UNIT_NONE (-2)
/* The range [*lo, *hi) of the flat parameter array that unit u holds
 * (see dist.need above). */
void loom_gpt_unit_range(const struct loom_gpt *g, int u, size_t *lo, size_t *hi);

/* Model from a validated config; parameters are zero until
 * loom_gpt_init_weights() or a checkpoint load.  NULL on ENOMEM. */
struct loom_gpt *loom_gpt_new(const struct loom_config *cfg);
/* Rank `rank`'s slices of the model split over tp ranks (see Tensor
 * parallelism above; tp must divide n_head, 4 n_embd and vocab_size:
 * loom_config_validate checks cfg->tensor_parallel); tp 1 is
 * loom_gpt_new.  It computes only once connected (loom_gpt_dist_model). */
struct loom_gpt *loom_gpt_new_tp(const struct loom_config *cfg, int rank, int tp);
/* Tensor parallelism: the payload bytes a rank sends per optimizer step
 * of `micro` micro-batches at the last forward's (B, T), by ring
 * all-reduces (2 (tp-1)/tp x the buffer): per micro-batch [B,T,C] after
 * the embedding lookup, after each row-split product (2 a layer) and
 * after each column-split product's input gradient (2 a layer, and the
 * LM head's), one more a layer when res2 is rebuilt in backward, two more
 * with recompute; the loss's 3 [B,T] and the 16-byte batch check; the
 * norm's 8 bytes per step.  Sequence parallelism: instead of the [B,T,C]
 * all-reduces, ring all-gathers and reduce-scatters ((tp-1)/tp x [B,T,C]
 * each): the lookup, 4 a layer in forward, ln_f's output; the head's, 6 a
 * layer in backward (1 more rebuilding res2, 4 more with recompute), the
 * embeddings' gradient; plus the LayerNorm gradients' all-reduces (4C a
 * layer, 2C for ln_f).  0 for tp 1.  That is loom_gpt_train_micro's
 * count, the LM head in chunks or not (a loom_gpt_backward after
 * loom_gpt_forward with chunks, head_rows < B T, recomputes their loss:
 * 3 [B,T] more). */
uint64_t loom_gpt_tp_bytes(const struct loom_gpt *g, int micro);
/* The parameters a rank holds when cfg's model is split over
 * cfg->tensor_parallel ranks (the whole count when 1). */
uint64_t loom_gpt_tp_params(const struct loom_config *cfg);
/* Between a whole model's flat array `full` (loom_gpt_new's layout: the
 * params, grads or a moment) and rank `rank`'s slices of it in g's layout
 * (g: any rank's model of the same split), tensor by tensor: to_full 0
 * copies the slices out of full, 1 into it. */
void loom_gpt_tp_copy(const struct loom_gpt *g, int rank, float *slices, float *full,
		      int to_full);
/* Its tensor-parallel team (lib/train/loom_tp.h) into *t: slices, split
 * kinds, the reduce call; errors into g's. */
struct loom_tp;
void loom_gpt_tp(const struct loom_gpt *g, struct loom_tp *t);
void loom_gpt_free(struct loom_gpt *g);
const char *loom_gpt_error(const struct loom_gpt *g);

/* GPT-2 initialisation: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)),
 * biases 0, LayerNorm weights 1.  Counter-based: independent of threads. */
void loom_gpt_init_weights(struct loom_gpt *g, uint64_t seed);

/* Forward on inputs[B,T] (token ids < V).  With targets[B,T] (ids < V or
 * cfg.ignore_id) computes the mean cross-entropy into *loss (may be NULL)
 * and keeps what backward needs; without, only the blocks and ln_f run
 * (logits for generation: loom_gpt_logits_last()).  train != 0 applies dropout with the
 * mask key `key`.  T <= n_positions. */
int loom_gpt_forward(struct loom_gpt *g, const int32_t *inputs, const int32_t *targets,
		     int B, int T, int train, uint64_t key, float *loss);
/* Backward of the last forward (which had targets); gradients are ADDED
 * to g->grads: the gradient of scale * g->wloss (scale = 1/grad_accum). */
int loom_gpt_backward(struct loom_gpt *g, float scale);
/* A training micro-batch: loom_gpt_forward(train 1) then
 * loom_gpt_backward(scale), with the same results, except that the LM
 * head's gradient is taken in forward, chunk by chunk while its logits
 * are at hand, so a chunked head (large B*T*vocab) computes its logits
 * once instead of twice. */
int loom_gpt_train_micro(struct loom_gpt *g, const int32_t *inputs, const int32_t *targets,
			 int B, int T, uint64_t key, float scale, float *loss);
void loom_gpt_zero_grad(struct loom_gpt *g);
/* Global gradient norm (before clipping) into *norm; clip to cfg.grad_clip
 * (if > 0); AdamW step `t` (1-based) at learning rate lr, weight decay only
 * on tensors with decay set.  Leaves the gradients zeroed (gradients start
 * zeroed after loom_gpt_new/init_weights), so a training loop needs no
 * loom_gpt_zero_grad(). */
void loom_gpt_step(struct loom_gpt *g, float lr, int64_t t, float *norm);
/* The coming forward/backward passes belong to optimizer step t (1-based):
 * with sparsity, t may update the masks (see above).  Without this call
 * no step updates them. */
void loom_gpt_begin_step(struct loom_gpt *g, int64_t t);
/* RigL: update the masks at step t from the weights and g->rigl's scores
 * (loom_rigl_update at loom_config_prune_ratio(t)), zero the changed
 * blocks in the weights and (if not NULL) g->m, g->v; repack.  Called by
 * loom_gpt_step; a data-parallel step calls it after its all-gather and
 * zeroes its own moment shards. */
void loom_gpt_rigl_update(struct loom_gpt *g, int64_t t);
/* RigL: the masks in g->rigl changed outside an update (e.g. loaded from a
 * checkpoint): hand them to the sparse kernels and zero the dead blocks in
 * the weights and (if not NULL) the moments. */
void loom_gpt_rigl_sync(struct loom_gpt *g);
/* Tell the model its parameters changed outside loom_gpt_step() and
 * loom_gpt_init_weights() (e.g. a data-parallel update): in bf16 the next
 * forward makes a new bf16 copy of the weights.  Loading a checkpoint
 * before the first forward needs no call. */
void loom_gpt_weights_changed(struct loom_gpt *g);
/* The masks in g->rigl changed (a sharded update: lib/train/loom_dist_zero.c,
 * which zeroed the changed blocks itself): repack from the next forward. */
void loom_gpt_masks_changed(struct loom_gpt *g);
/* Data parallelism's view of g (lib/train/loom_dist.h) into *m: its
 * parameter store, layer tags, step, the connect hook that sets g->dist
 * (the need/done/tick/grad_ready calls and tensor parallelism's) and,
 * with sparsity, the RigL mask hooks on g->rigl.  Borrows g. */
void loom_gpt_dist_model(struct loom_gpt *g, struct loom_dist_model *m);

/* Evaluation counts of the last forward with targets: summed NLL, counted
 * tokens, tokens whose argmax prediction equals the target (counted by a forward
 * with train 0 only). */
void loom_gpt_eval_counts(const struct loom_gpt *g, double *nll, int64_t *ntok,
			  int64_t *ncorrect);

/* Generation: forward one sequence tok[n] (1 <= n <= n_positions) and write
 * the logits of the last position into out[V].  Tensor parallelism: a
 * collective of the replica's ranks, each computing its vocabulary rows'
 * logits; every rank gets all V (summed over the ranks). */
int loom_gpt_logits_last(struct loom_gpt *g, const int32_t *tok, int n, float *out);
/* Sample a token from logits[V] at temperature (<= 0: argmax), keeping the
 * top_k largest (0 = all; scratch[V] the caller's, used when 0 < top_k <
 * V); *rng is a splitmix64 counter state.  A logit of -INFINITY (a masked
 * id) is never sampled while any other is finite. */
int loom_gpt_sample(const float *logits, int V, float temperature, int top_k, float *scratch,
		    uint64_t *rng);

/* Split frame records rec[B, rec_len] into inputs/targets [B, T]
 * (inputs = rec[b, 0..T-1], targets = rec[b, 1..T]). */
void loom_gpt_split_records(const uint32_t *rec, int B, int rec_len, int T, int32_t *in,
			    int32_t *tg);
/* Padded frames (loom-feed --pad ID, flag PAD): targets equal to pad_id
 * become g's ignore_id (no loss, no gradient, not counted by eval); inputs
 * equal to pad_id become 0 (padding is at the end of a record, so those
 * inputs only feed positions whose targets are ignored).  pad_id is any
 * u32; the caller must first refuse other ids outside the vocabulary
 * (loom_batch_first_bad_id), as ids above INT32_MAX are all alike here. */
void loom_gpt_mask_pad(const struct loom_gpt *g, uint32_t pad_id, int32_t *in, int32_t *tg,
		       size_t n);

/* A forward on a batch frame (h, tok) of records of T+1 (or more)
 * tokens: T inputs and their next-token targets (padding masked) in in/tg
 * (B x T each), the loss sums added to *s (loom-eval; the trainer's
 * evaluation, through loom_gpt_ops). */
struct loom_batch_hdr;
int loom_gpt_eval_frame(struct loom_gpt *g, const struct loom_batch_hdr *h, const uint32_t *tok,
			int T, int32_t *in, int32_t *tg, struct loom_eval_sums *s);
/* The model interface (lib/train/loom_model.h) of a struct loom_gpt. */
extern const struct loom_model_ops loom_gpt_ops;

/* Memory plan per rank (bytes) for a config at batch B, sequence T, on
 * cfg->data_parallel ranks sharding cfg->sharding (one rank: the whole
 * model, whatever the sharding), each replica split over
 * cfg->tensor_parallel ranks (a rank's slices: loom_gpt_tp_params; the
 * activations inside the split products divided by it).  sharding=optimizer: full weights and
 * gradients, 1/N of the AdamW moments and a gradient shard (1/N);
 * sharding=weights: 1/N of weights, gradients and moments, plus the
 * gathered buffers (full copies of the layers in use) and the embedding
 * output's own activation slot. */
void loom_gpt_memory_plan(const struct loom_config *cfg, int B, int T, int recompute,
			  struct loom_model_mem *m);

/* --- checkpoints (lib/train/loom_gpt_ckpt.c, on top of lib/train/loom_ckpt.h) ------ */
struct loom_ckpt_tensor;
struct loom_ckpt;
/* Fill out[g->n_tensors] with names/shapes and data = base + offset
 * (base: g->params, g->m or g->v). */
void loom_gpt_ckpt_tensors(const struct loom_gpt *g, float *base,
			   struct loom_ckpt_tensor *out);
/* HuggingFace GPT-2 config keys (config.json). */
struct loom_gpt_hf {
	int64_t n_layer, n_embd, n_head, n_positions, vocab_size;
	double layer_norm_epsilon;
	/* dropout probabilities (HF defaults 0.1 when a file has none) */
	double resid_pdrop, embd_pdrop, attn_pdrop;
};
/* The GPT-2 family for loom_ckpt (hf: struct loom_gpt_hf): config.json as
 * GPT2LMHeadModel's, the GPT-2 tensors its keys imply, "transformer."
 * optional (GPT2Model files), HF's attention buffers and a tied
 * lm_head.weight ignored. */
struct loom_ckpt_arch;
extern const struct loom_ckpt_arch loom_gpt_ckpt_arch;
/* The HuggingFace config.json keys of cfg (loom's dropout is both
 * resid_pdrop and embd_pdrop; attn_dropout is attn_pdrop). */
void loom_gpt_ckpt_hf(const struct loom_config *cfg, struct loom_gpt_hf *hf);
/* The config stored in a checkpoint: loom's own ("loom" object) if
 * present, else built from the HF keys over defaults.  Validated. */
int loom_gpt_ckpt_config(const struct loom_ckpt *ck, struct loom_config *cfg);
/* RigL state as the checkpoint side file "sparsity.safetensors": per
 * sparse weight NAME the U8 tensors NAME.mask and NAME.mask0 (current and
 * initial masks, [IC/bs, OC/bs]), and __metadata__ format "loom-rigl",
 * block_size, last_update, updates (formats/checkpoint.md). */
#define LOOM_GPT_SPARSITY_FILE "sparsity.safetensors"
struct loom_st_tensor;
struct loom_gpt_sidecar {
	struct loom_st_tensor *t;
	size_t n;
	char (*names)[80];
	char vals[3][32];
	const char *meta[9];
};
/* Fill sc from g->rigl (borrows g's masks; release before they change). */
int loom_gpt_ckpt_sparsity(const struct loom_gpt *g, struct loom_gpt_sidecar *sc);
void loom_gpt_sidecar_release(struct loom_gpt_sidecar *sc);
/* Load the masks and RigL state from ck's side file into g->rigl and
 * zero the dead blocks (loom_gpt_rigl_sync): 0 loaded, 1 the checkpoint
 * has none, negative on a bad file (message in g->err). */
int loom_gpt_ckpt_load_sparsity(struct loom_gpt *g, struct loom_ckpt *ck);
/* The same from an opened side file (every tensor, shape and value
 * checked; a partial load leaves earlier layers' masks set: the caller
 * refuses the model). */
struct loom_st;
int loom_gpt_sparsity_from_st(struct loom_gpt *g, const struct loom_st *st);

#endif
