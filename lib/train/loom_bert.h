/*
 * loom_bert.h - BERT (HuggingFace's BertModel) with a question-answering
 * (SQuAD) or masked-LM head, in plain C over flat arrays, on the GPT's
 * kernels (lib/kernels/loom_kernels.h), matmul backend (fp32/bf16),
 * parameter table and AdamW (lib/train/loom_model.h).
 *
 * Model, as transformers' modeling_bert.py: embeddings = LayerNorm(word
 * [input_ids] + token_type[segment_ids] + position[t]) then dropout; L
 * post-LN layers: a = LayerNorm(x + drop(Wo attention(Wq x, Wk x, Wv x) + bo))
 * with bidirectional attention over the row's real tokens (padding keys
 * masked, attention dropout on the probabilities), y = LayerNorm(a +
 * drop(W2 gelu(W1 a + b1) + b2)); GELU with erf ("gelu"), LayerNorm eps
 * cfg.layer_norm_eps (1e-12).  No pooler (BertForQuestionAnswering and
 * BertForMaskedLM have none).
 *  - QA head (qa_outputs, C -> 2): start/end logits [B,T]; loss =
 *    (CE(start) + CE(end)) / 2, each the mean over the rows whose position
 *    is counted.  The softmax runs over the row's real positions only
 *    (input_mask 1): HuggingFace does not mask padding logits, so with
 *    padding the two losses differ (the logits are the same); positions
 *    outside 0..len-1 (e.g. -1) are ignored, as HF ignores clamped ones.
 *  - MLM head (cls.predictions): transform dense C -> C, GELU erf,
 *    LayerNorm, decoder tied to the word embeddings plus a bias [V];
 *    cross-entropy over the positions whose target is >= 0 (others, e.g.
 *    -100 as in HF, ignored), mean over them.  Only those M rows go
 *    through the head (its buffers, grown as needed, hold M x V logits:
 *    ~15% of B*T rows).
 *
 * Parameters: one float allocation (and grads, m, v), tensors named and
 * shaped as HuggingFace's state dict (nn.Linear weights [out, in]):
 *   bert.embeddings.{word_embeddings [V,C], position_embeddings [P,C],
 *   token_type_embeddings [types,C]}.weight, bert.embeddings.LayerNorm.*,
 *   bert.encoder.layer.{i}.attention.self.{query,key,value}.{weight [C,C],
 *   bias}, .attention.output.dense.*, .attention.output.LayerNorm.*,
 *   .intermediate.dense.{weight [I,C], bias}, .output.dense.{weight [C,I],
 *   bias}, .output.LayerNorm.*; qa_outputs.{weight [2,C], bias} or
 *   cls.predictions.transform.{dense,LayerNorm}.*, cls.predictions.bias
 *   (the decoder weight is the word embeddings, not stored).  In memory a
 *   layer's query, key and value weights are adjacent (one [3C,C] product
 *   making the q|k|v rows the attention kernel reads), as are their biases.
 *   Weight decay on all but biases and LayerNorms.
 *
 * Activations (one allocation for the (B, T) of the last forward): per
 * layer its q|k|v, attention output and log-sum-exp, the two residual sums
 * before each LayerNorm and their statistics, the first LayerNorm's output
 * and the intermediate pre-activation (GELU recomputed in backward), the
 * layer output; with cfg.recompute only the outputs are kept per layer and
 * each layer but the last (whose activations the slots still hold) is
 * recomputed during backward (bit-identical gradients).
 *
 * Data parallelism: grad_ready(ctx, l) is called as in struct loom_gpt
 * (layer L-1's call also covers the head, -1 after the embeddings).
 * sharding=weights (ZeRO-3, lib/train/loom_dist.h): the units are the
 * embeddings (-1) and each layer (the head's tensors with layer L-1's);
 * forward gathers the embeddings, then each layer, the masked-LM
 * decoder the embeddings again; backward the head's unit (and the
 * embeddings for the decoder), each layer down, the embeddings last; a
 * backward whose targets are all ignored runs too, with zero gradients
 * (its gathers are collective).  After each of a layer's four products
 * (forward, recomputed and backward) it calls tick, so that the gather
 * in flight moves while it computes.
 *
 * Tensor parallelism (loom_bert_new_tp, Megatron-LM's 1D splits, as the
 * GPT's; lib/train/loom_tp.h): rank r of tp holds the query, key and
 * value rows of heads r NH/tp .. (each weight [C/tp, C], the product's
 * columns), the attention output's input columns (dense.weight [C, C/tp],
 * the row-split product), the intermediate's rows ([I/tp, C], its bias
 * [I/tp]) and the output dense's input columns ([C, I/tp]); the word
 * embeddings by vocabulary rows ([V/tp, C]: ids r V/tp ..) and with them
 * the tied MLM decoder and its bias ([V/tp]), whose loss is the
 * vocabulary-parallel cross-entropy (no rank holds [M, V] logits).  The
 * position and token-type embeddings, every LayerNorm, the biases of the
 * row-split products, the MLM transform and the QA head (2 outputs) are
 * whole on every rank, their gradients the same on each.  The partial
 * [N,C] sums are added over the ranks (the reduce call of the connect
 * hook) after the embedding lookup and each row-split product in
 * forward, after each column-split product's input gradient (and the MLM
 * decoder's) in backward; dropout acts on whole activations, the same
 * mask on every rank.  Packed rows (cfg.padded 0) are packed alike on
 * every rank.  Each forward checks that the ranks got the same batch.
 *
 * Sequence parallelism (cfg.sequence_parallel with tp > 1, Megatron-LM's;
 * the token split of lib/train/loom_tp.h): the regions between the
 * products, the LayerNorms (the embeddings' too), dropout and residual
 * adds, hold only rank r's Nr = B T / tp tokens, rows r Nr .. of the
 * flattened [B T]: the residual stream, the LayerNorms' inputs, outputs
 * and statistics and the embedding sum take 1/tp of their memory.  The
 * input of each column-split product (the layer input before q|k|v, the
 * attention LayerNorm's output before the intermediate) is all-gathered,
 * the partial sums of each row-split product (and of the lookup) are
 * reduce-scattered instead of all-reduced; backward gathers the dropped
 * output gradient of each row-split product and again the inputs of the
 * column-split ones (not kept whole), and reduce-scatters their input
 * gradients.  The QA head computes its rank's rows' logits, all-gathered
 * ([N,2]: every rank the same loss), its weight gradient summed over the
 * ranks; the MLM head all-gathers the last layer's output and runs as
 * without (its M rows on every rank), the gradient of its rank's rows
 * kept.  Dropout draws row n's mask as the whole [B T, C]'s
 * (loom_k_dropout_at), so a run is one process's; the LayerNorm weight
 * gradients, partial over the tokens, are all-reduced after each layer's
 * backward (and the embeddings').  Rows are never packed under it (a
 * packed batch's token count varies, so would the split; Megatron-LM's
 * BERT runs padded too): it computes every padding position.
 *
 * Determinism: same parameters, data, dropout key and thread count give
 * bit-identical results.  Errors: 0 or negative LOOM_E*; message in
 * loom_bert_error().  Nothing prints.
 */
#ifndef LOOM_BERT_H
#define LOOM_BERT_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"
#include "loom_dist.h"
#include "loom_model.h"

enum loom_bert_task {
	LOOM_BERT_QA = 0,       /* qa_outputs: start/end logits */
	LOOM_BERT_MLM,          /* cls.predictions: masked LM */
};

/* Over which positions the QA head's softmax runs (loom-train(1)): */
enum loom_bert_qa_loss {
	LOOM_BERT_QA_LOSS_ALL = 0, /* every position of the row, padding included
				    * (HF BertForQuestionAnswering, run_squad.py) */
	LOOM_BERT_QA_LOSS_REAL,    /* the row's real tokens only; a target on
				    * padding is ignored */
};

struct loom_bert_config {
	int n_layer, hidden, n_head, intermediate;
	int vocab_size, max_positions, type_vocab_size;
	double layer_norm_eps;
	double dropout, attn_dropout;   /* hidden_dropout_prob, attention_probs_dropout_prob */
	double init_std;                /* initializer_range */
	int pad_token_id;               /* its word embedding starts 0, never trained (HF padding_idx) */
	int task;                       /* enum loom_bert_task */
	int qa_loss;                    /* enum loom_bert_qa_loss */
	int precision;                  /* LOOM_PREC_FP32 / _BF16 */
	int recompute;
	int sequence_parallel;          /* with loom_bert_new_tp's tp > 1: see above */
	/* 1: compute every padding position too (the reference), 0: each row
	 * at its real length, packed (see loom_bert_forward) */
	int padded;
	int sharding;                   /* enum loom_sharding (lib/train/loom_config.h):
					   weights: units for loom_dist's ZeRO-3 */
	struct loom_adamw adamw;
};

/* cfg = the model of share/presets/NAME.json (a model=bert preset:
 * bert-tiny, bert-base, bert-large, squad-base, ...; loom_config_apply_preset)
 * for `task`: 0, or LOOM_EINVAL for a name that is not a BERT preset. */
int loom_bert_preset(const char *name, int task, struct loom_bert_config *cfg);
/* The model of a loom-train configuration (model=bert,
 * lib/train/loom_config.h): its keys mapped one to one (n_embd -> hidden,
 * n_positions -> max_positions, layer_norm_epsilon, beta1/beta2/eps/
 * weight_decay/grad_clip -> adamw; intermediate 0 -> 4 n_embd), task=mlm
 * -> LOOM_BERT_MLM, else LOOM_BERT_QA; qa_loss. */
struct loom_config;
void loom_bert_config_from(const struct loom_config *c, struct loom_bert_config *b);
/* Floats of the activations of a forward at (B, T) (the MLM head's
 * buffers, which grow with the masked rows, aside). */
size_t loom_bert_act_floats(const struct loom_bert_config *cfg, int B, int T);
/* 0, or LOOM_EINVAL with a sentence in err. */
int loom_bert_config_check(const struct loom_bert_config *cfg, struct loom_err *err);

struct loom_bert_lacts {
	float *qkv;                     /* [N,3C] */
	float *atty;                    /* [N,C] */
	float *lse;                     /* [N*NH]: [B,NH,T] padded, packed rows' heads
					   (tensor parallelism: this rank's; so qkv
					   [N,3C/tp], atty [N,C/tp], fch [N,I/tp];
					   sequence parallelism: res1, h1, res2, out
					   [Nr,C] and the statistics [Nr]) */
	float *res1, *ln1_mean, *ln1_rstd, *h1;  /* x + attention, its LN stats, LN output */
	float *fch;                     /* [N,I] intermediate pre-activation */
	float *res2, *ln2_mean, *ln2_rstd;       /* h1 + MLP, its LN stats */
	float *out;                     /* [N,C] layer output */
};

struct loom_bert {
	struct loom_bert_config cfg;
	int L, C, NH, I, V, P;
	size_t n_params;
	float *params, *grads, *m, *v;
	int n_tensors;
	struct loom_tensor *tensors;
	/* activations for (B, T): N = B*T tokens padded, or the batch's real
	 * tokens packed row after row (off[B+1], at[N] the padded index b*T+t
	 * of packed token n, pos[N] its position t) */
	int B, T, N, cap_B, cap_T, packed;
	int32_t *off, *at, *pos;
	float *acts;
	struct loom_bert_lacts *layer;  /* [L] */
	float *emb, *emb_mean, *emb_rstd, *x0;  /* embedding sum, its LN stats, layer 0 input
						   (sequence parallelism: [Nr,C], [Nr]) */
	float *dres, *buf1, *buf2, *work;       /* [N,C] x3 (sequence parallelism: buf1
						   [Nr,C]; buf2 the gathered rows and partial
						   sums), [N, max(I/tp, 4C/tp)] */
	float *logits;                  /* QA: [N,2] */
	float *start_logits, *end_logits;       /* QA: [B,T] */
	float *dse;                     /* QA: d start|end logits [2,B,T] */
	int32_t *ids, *seg, *len;       /* copies of the batch: [N], [N], [B] */
	int32_t *start_pos, *end_pos;   /* QA targets [B] */
	/* MLM head over the M rows with a target */
	int M;
	size_t mlm_cap;                 /* rows allocated */
	float *mlm;                     /* one allocation for what follows */
	int32_t *mlm_row, *mlm_tgt;     /* [M] */
	float *mx, *mt, *mg, *mln, *md;  /* [M,C]: gathered rows, dense, gelu, LN, gradient */
	float *mmean, *mrstd, *mloss;   /* [M] */
	float *mlogits;                 /* [M,V] (tensor parallelism: [M,V/tp]) */
	float *mxent;                   /* tensor parallelism: the loss's [3M] scratch */
	int have_targets, train, nstart, nend;
	uint64_t key;
	float loss;
	/* The calls of data and tensor parallelism (lib/train/loom_dist.h),
	 * installed by the connect hook (loom_bert_dist_model), each called
	 * with dist.ctx; all NULL until then (one process): grad_ready (see
	 * Data parallelism above); sharding=weights: a unit's parameters (-1
	 * the embeddings, l layer l, the head's with layer L-1) are read only
	 * between need and done (LOOM_BERT_UNIT_NONE: need's `next` is no
	 * unit), tick (see Data parallelism above); tensor parallelism:
	 * reduce (sum or max over the tp ranks); sequence parallelism: gather
	 * and scatter */
	struct loom_dist_calls dist;
#define LOOM_BERT_UNIT_NONE (-2)
	/* tensor parallelism: rank tp_rank of tp (1: the whole model); its
	 * heads NHl, attention width Cl = C/tp, intermediate width Il = I/tp,
	 * vocabulary rows Vl = V/tp (ids tp_rank Vl ..), summed or maxed over
	 * the tp ranks by dist.reduce; mlm_hits: an MLM evaluation's argmax
	 * hits over the whole vocabulary */
	int tp, tp_rank, NHl, Cl, Il, Vl;
	/* sequence parallelism (seq 1): this rank's Nr tokens from r0 (seq 0:
	 * N, 0), sat[Nr] their indices (the dropout masks' rows), through
	 * dist.gather and dist.scatter; lnd [4C+2]: the replicated
	 * tensors' gradients of these tokens (a layer's LayerNorms, the
	 * embeddings' LayerNorm, the QA head), summed over the ranks */
	int seq, Nr, r0;
	int32_t *sat;
	float *lnd;
	int64_t mlm_hits;
	struct loom_mm *mm;
	int w16_ok;
	struct loom_err err;
};

/* A batch: input_ids, segment_ids (token types; NULL: all 0) and
 * input_mask (1 for real tokens then 0 for padding, at least one 1 per
 * row; NULL: no padding), each [B,T]; targets: QA start_positions and
 * end_positions [B] (positions outside the row's real tokens ignored), or
 * MLM labels [B,T] (< 0: not predicted).  Without targets, forward only
 * computes the outputs. */
struct loom_bert_batch {
	const int32_t *input_ids, *segment_ids, *input_mask;
	const int32_t *start_positions, *end_positions;
	const int32_t *mlm_labels;
};

struct loom_config;
struct loom_batch_hdr;
struct loom_batch_reader;
/* The frame (h, tok; r its reader, for the features) as the rows of *bb
 * (pointing into s, grown to hold them) at c's seq_len T.
 * task=squad: the frame's ids and its segment_ids, input_mask,
 * start_positions and end_positions (formats/squad-features.md), as
 * they are.
 * task=mlm: row r is [CLS], the first T-2 tokens of record r (up to its
 * padding), [SEP], then pad_token_id (input_mask 0); 15% of its tokens
 * but [CLS] and [SEP] (those the record holds between documents
 * included) masked 80/10/10 by loom_bert_mlm_mask, keyed by the seed and
 * the record's place in the stream (the frame's global batch number and
 * its row of that global batch): the same masks however the global batch
 * is split over ranks, and after a resume.
 * LOOM_EFORMAT (features missing or of the wrong shape) or LOOM_ENOMEM,
 * the message (without the frame's name) in err. */
int loom_bert_rows(const struct loom_config *c, const struct loom_batch_hdr *h,
		   const uint32_t *tok, struct loom_batch_reader *r, struct loom_model_scratch *s,
		   struct loom_bert_batch *bb, struct loom_err *err);
/* The model interface (lib/train/loom_model.h) of a struct loom_bert. */
extern const struct loom_model_ops loom_bert_ops;

/* The parameter table of a model of cfg (HF names, shapes, offsets, as
 * above) into t[loom_bert_n_tensors(cfg)]; returns the parameter count. */
int loom_bert_n_tensors(const struct loom_bert_config *cfg);
size_t loom_bert_table(const struct loom_bert_config *cfg, struct loom_tensor *t);

/* Model from a checked config; parameters zero until init_weights or a
 * load.  NULL on a bad config or ENOMEM. */
struct loom_bert *loom_bert_new(const struct loom_bert_config *cfg);
/* Rank `rank`'s slices of the model split over tp ranks (see Tensor
 * parallelism above; tp must divide n_head, intermediate and vocab_size:
 * loom_config_validate checks tensor_parallel); tp 1 is loom_bert_new.
 * It computes only once connected (loom_bert_dist_model). */
struct loom_bert *loom_bert_new_tp(const struct loom_bert_config *cfg, int rank, int tp);
/* Its tensor-parallel team (lib/train/loom_tp.h) into *t: slices, split
 * kinds, the reduce call; errors into b's. */
struct loom_tp;
void loom_bert_tp(const struct loom_bert *b, struct loom_tp *t);
/* Tensor parallelism: the payload bytes a rank sends per optimizer step
 * of `micro` micro-batches like the last forward (its token count N and
 * masked-LM rows M; packed rows: N varies by batch), by ring all-reduces
 * (2 (tp-1)/tp x the buffer): per micro-batch [N,C] after the lookup and
 * 2 a layer in forward, 2 a layer in backward and 2 more a layer
 * recomputed (all but the last); the MLM loss's 3 [M] and its decoder's
 * [M,C] input gradient; the 16-byte batch check; the norm's 8 bytes.
 * Sequence parallelism: ring all-gathers and reduce-scatters ((tp-1)/tp
 * x the buffer) of [N,C] instead, per micro-batch the lookup's, 4 a layer
 * in forward, 6 a layer in backward and 4 more a layer recomputed, the
 * embeddings' gradient, the MLM head's input or the QA logits [N,2]; the
 * all-reduces of the LayerNorm gradients (4C a layer, the embeddings' 2C,
 * the QA head's 2C+2), the MLM loss's, the batch check and the norm.  0
 * for tp 1. */
uint64_t loom_bert_tp_bytes(const struct loom_bert *b, int micro);
void loom_bert_free(struct loom_bert *b);
const char *loom_bert_error(const struct loom_bert *b);
/* HuggingFace's init: Linear and embedding weights N(0, init_std) (the
 * pad token's word embedding 0), biases 0, LayerNorm 1 and 0.  Counter-based; moments and gradients
 * zeroed. */
void loom_bert_init_weights(struct loom_bert *b, uint64_t seed);
/* Only the head's parameters (qa_outputs or cls.predictions: the table's
 * last tensors) as loom_bert_init_weights draws them from `seed` (under
 * tensor parallelism this rank's slices of the whole head's draws);
 * nothing else touched. */
void loom_bert_init_head(struct loom_bert *b, uint64_t seed);
/* Forward on a batch of B rows of T <= max_positions tokens; train != 0
 * applies dropout with key `key`.  With the task's targets computes the
 * loss into *loss (may be NULL) and keeps what backward needs.  QA:
 * loom_bert_start_logits()/end_logits() are [B,T] after any forward.
 *
 * Unless cfg.padded, each row is computed at its real length (its
 * input_mask count), the rows packed into one [sum of lengths, C]
 * activation (FlashAttention's varlen layout): the products, LayerNorm,
 * GELU, dropout and attention see real tokens only, and the start/end
 * logits of padding positions are -inf.  The numbers on real tokens are
 * the padded forward's (the padded positions never reach them: keys past
 * a row's length are masked, and the losses read real tokens only), up to
 * the products' rounding over another row count; dropout draws the same
 * mask elements.  A masked-LM label on a padding position makes that
 * batch run padded, and so do QA targets under qa_loss=all (its softmax
 * reads every position's logit, HF's; without targets, as in prediction,
 * the rows stay packed). */
int loom_bert_forward(struct loom_bert *b, const struct loom_bert_batch *x, int B, int T,
		      int train, uint64_t key, float *loss);
/* Adds the gradient of scale * loss to b->grads. */
int loom_bert_backward(struct loom_bert *b, float scale);
/* Global-norm clip, AdamW step t (1-based) at lr; gradients left zeroed. */
void loom_bert_step(struct loom_bert *b, float lr, int64_t t, float *norm);
/* Parameters changed outside step/init (a load, a data-parallel update). */
void loom_bert_weights_changed(struct loom_bert *b);
/* Data parallelism's view of b (lib/train/loom_dist.h) into *m: its
 * parameter store, layer tags, step, the connect hook that sets b->dist,
 * under tensor parallelism which tensors are whole, its units for
 * sharding=weights (cfg.sharding; see Data parallelism above); no masks.
 * Borrows b. */
void loom_bert_dist_model(struct loom_bert *b, struct loom_dist_model *m);
/* After a forward with targets and train 0: *nll the summed loss over *n
 * counted items and *correct those predicted right.  QA: n = the rows,
 * nll = their mean loss x rows, a row right when the argmax start and end
 * logits over its real tokens are its positions; MLM: n = the masked
 * tokens, right when the argmax of the vocabulary is the token.  All 0
 * without targets. */
void loom_bert_eval_counts(const struct loom_bert *b, double *nll, int64_t *n,
			   int64_t *correct);
const float *loom_bert_start_logits(const struct loom_bert *b);
const float *loom_bert_end_logits(const struct loom_bert *b);

/* Masked-LM inputs (BERT's recipe): each real token of ids[B,T] (the
 * first len tokens of a row by input_mask, NULL: all) other than cls_id
 * and sep_id is chosen with probability 15%; a chosen token's label is
 * its id, and its input becomes mask_id (80%), a random id in 0..V-1
 * (10%) or stays (10%); labels of the others are -100.  Counter-based
 * from key.  ids modified in place; returns the number chosen. */
int loom_bert_mlm_mask(int32_t *ids, int32_t *labels, const int32_t *input_mask, int B, int T,
		       int V, int32_t cls_id, int32_t sep_id, int32_t mask_id, uint64_t key);

/* --- checkpoints (lib/train/loom_bert_ckpt.c, on top of lib/train/loom_ckpt.h) -----
 *
 * config.json as HuggingFace's BertConfig writes it (model_type "bert",
 * architectures ["BertForQuestionAnswering"] or ["BertForMaskedLM"],
 * hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
 * hidden_act "gelu", max_position_embeddings, type_vocab_size, vocab_size,
 * layer_norm_eps, the dropouts, initializer_range, pad_token_id), the
 * tokenizer as BertTokenizer reads it (vocab.txt, tokenizer_config.json
 * with do_lower_case).  Read: a loom checkpoint or a HuggingFace BERT
 * directory (config.json + model.safetensors): tensors with or without
 * "bert." (BertModel files), LayerNorm gamma/beta (older files) for
 * weight/bias; a pooler, the NSP head (cls.seq_relationship), a tied
 * decoder (cls.predictions.decoder) and position_ids are ignored. */
struct loom_ckpt;
struct loom_ckpt_arch;
struct loom_ckpt_tensor;
struct loom_ckpt_vocab;
struct loom_wordpiece_opts;
/* The BERT family for loom_ckpt; its hf is a struct loom_bert_config
 * (the HF numbers; task: the architectures, -1 when they name no head
 * loom has, as BertModel; precision, recompute and adamw unused). */
extern const struct loom_ckpt_arch loom_bert_ckpt_arch;
/* Fill out[b->n_tensors] with names/shapes and data = base + offset
 * (base: b->params, b->m or b->v). */
void loom_bert_ckpt_tensors(const struct loom_bert *b, float *base, struct loom_ckpt_tensor *out);
/* The model config of the checkpoint for `task` (-1: the one its
 * architectures name; a file naming none needs one): its HF numbers,
 * fp32, AdamW defaults as the presets.  0 or LOOM_EFORMAT (err). */
int loom_bert_ckpt_config(const struct loom_ckpt *ck, int task, struct loom_bert_config *cfg,
			  struct loom_err *err);
/* --init-from ck: loom-train's architecture keys (n_layer, n_embd,
 * n_head, intermediate, vocab_size, n_positions, type_vocab_size,
 * layer_norm_epsilon) of c from the checkpoint's config.json
 * (num_hidden_layers, hidden_size, ...), the rest of c (the recipe)
 * untouched.  0, or LOOM_EINVAL in err when a key the command line set
 * (loom_config_cli_set) holds another value: one line naming the key and
 * both values. */
int loom_bert_ckpt_shape(const struct loom_ckpt *ck, struct loom_config *c, struct loom_err *err);
/* loom's configuration of a loom BERT checkpoint (config.json's "loom",
 * over loom_config_defaults): 1; 0 when it has none (a HuggingFace
 * directory: c holds the defaults); a negative code with the message in
 * c's error (loom_config_error). */
int loom_bert_ckpt_loom_config(const struct loom_ckpt *ck, struct loom_config *c);
/* loom_bert_ckpt_load flags: a checkpoint without the task's head (a
 * pretrained BertForMaskedLM, or a BertModel, loaded for QA) is taken,
 * the head initialised from `seed` and the other head's tensors ignored. */
#define LOOM_BERT_CKPT_NEW_HEAD 1u
/* Copy the checkpoint's weights into b (every tensor checked by name,
 * shape and value; loom_bert_weights_changed done): 0, or 1 when the head
 * was freshly initialised (LOOM_BERT_CKPT_NEW_HEAD), or a negative code
 * with one line in b's error (e.g. "ckpt/step-00000010/model.safetensors:
 * no question-answering head (qa_outputs.weight): a BertForMaskedLM
 * checkpoint"). */
int loom_bert_ckpt_load(struct loom_bert *b, struct loom_ckpt *ck, unsigned flags, uint64_t seed);
/* Its first half, for a caller that reads the weights itself (a rank of
 * a tensor-parallel or sharded run: only its slices): whether ck holds
 * b's head.  It does: returns b->n_tensors, the tensors to load.  It does
 * not, and flags has LOOM_BERT_CKPT_NEW_HEAD: the head initialised from
 * `seed` (loom_bert_init_head: the slices the whole model's draws give),
 * ck's loads told to leave the other head unread (loom_ckpt_skip, until
 * loom_ckpt_skip(ck, NULL)), and the count of the tensors before the
 * head returned: load those.  Else LOOM_EFORMAT with the line above. */
int loom_bert_ckpt_head(struct loom_bert *b, struct loom_ckpt *ck, unsigned flags, uint64_t seed);
/* The checkpoint's tokenizer: its vocab.txt path into path[n] and the
 * options of its tokenizer_config.json (do_lower_case, strip_accents,
 * tokenize_chinese_chars; bert-base-uncased's when absent): 2 when that
 * file says do_lower_case, else 1; 0 when the checkpoint has no
 * vocab.txt, or LOOM_EFORMAT (err). */
int loom_bert_ckpt_tokenizer(const struct loom_ckpt *ck, char *path, size_t n,
			     struct loom_wordpiece_opts *o, struct loom_err *err);
/* The tokenizer files to save (loom_ckpt_save.vocab): vocab.txt read
 * from vocab_path, tokenizer_config.json for BertTokenizer with
 * do_lower_case = lowercase; name is config.json's loom_vocab.  v owns
 * copies; loom_bert_ckpt_vocab_release frees them.  0 or a negative code. */
int loom_bert_ckpt_vocab(struct loom_ckpt_vocab *v, const char *name, const char *vocab_path,
			 int lowercase, struct loom_err *err);
void loom_bert_ckpt_vocab_release(struct loom_ckpt_vocab *v);

#endif
