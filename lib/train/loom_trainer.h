/*
 * loom_trainer.h - the training engine of loom-train: a GPT (lib/train/
 * loom_gpt.h) or a BERT (lib/train/loom_bert.h) behind one model
 * interface, its configuration layered from presets, files, a checkpoint
 * and --set with the provenance of the keys the data decides, the
 * build/--resume/--init-from ladder, a micro-batch's forward and backward
 * on a batch frame (through the model interface, struct loom_model_ops of
 * lib/train/loom_model.h), the optimizer step, held-out evaluation
 * (lib/train/loom_eval.h), samples (lib/train/loom_generate.h) and
 * checkpoints (lib/train/loom_ckpt.h) with where the stream stands.
 *
 * The loop itself (reading frames, the data-parallel agreement, the
 * reporting) is the caller's, as in llm.c's train_gpt2.c: tools/
 * loom-train.c calls loom_trainer_begin_step(), loom_trainer_micro() for
 * each micro-batch and loom_trainer_step(); the data-parallel layer is
 * the caller's too, handed to the trainer as hooks (struct
 * loom_trainer_hooks) for attaching the model, the step over the ranks
 * and gathering or sharding checkpoints (tests/trainer.c runs one
 * process without any).
 *
 * Ownership: loom_trainer_init() / loom_trainer_release() own the model,
 * the vocabulary and the buffers; checkpoints passed in are the caller's
 * unless said.  Errors: a negative LOOM_E* code, the message in t->err
 * (t->usage set when it is a usage error: a configuration the caller
 * gave that cannot work).  Nothing prints: lines for people go through
 * hooks.say.  Thread-safety: one trainer per thread.
 */
#ifndef LOOM_TRAINER_H
#define LOOM_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "loom_batch.h"
#include "loom_ckpt.h"
#include "loom_common.h"
#include "loom_config.h"
#include "loom_eval.h"
#include "loom_gpt.h"
#include "loom_model.h"

struct loom_bert;
struct loom_bert_squad_eval;
struct loom_vocab;
struct loom_wordpiece;
struct loom_trainer;
struct loom_threads;

/* The data-parallel layer as the caller runs it (every member may be
 * NULL/0: one process).  The hooks report their own failures (they stop
 * the job); say prints a line for people. */
struct loom_trainer_hooks {
	void *ctx;
	int rank;               /* this process's rank */
	/* 1 under sharding=weights over several ranks */
	int (*shards_weights)(void *ctx);
	/* share the model (the trainer's g or b) with the other ranks,
	 * before the first step */
	void (*attach)(void *ctx);
	/* around a save: 1 on the rank that writes (the moments gathered) */
	int (*save_begin)(void *ctx);
	void (*save_end)(void *ctx);
	/* shards_weights: every rank writes its part of s; its directory in path */
	void (*save_part)(void *ctx, const struct loom_ckpt_save *s, char *path, size_t n);
	/* shards_weights: this rank's chunks of the weights (and moments) */
	void (*load_part)(void *ctx, struct loom_ckpt *ck, const struct loom_ckpt_tensor *tp,
			  size_t n, int optimizer);
	/* the optimizer step over the ranks; *lsum becomes the mean over ranks */
	void (*step)(void *ctx, float lr, int64_t t, float *norm, double *lsum);
	void (*say)(void *ctx, const char *line);
	/* tensor parallelism (NULL without): this rank's replica and its rank
	 * in the replica (asked once the grid is made); replica 0's ranks
	 * each write their runs r[0..n) of the checkpoint s, its directory
	 * in path (a collective of replica 0: the others return at once;
	 * with shards_weights, of every rank, each its chunks' parts) */
	int (*replica)(void *ctx);
	int (*tp_rank)(void *ctx);
	void (*save_runs)(void *ctx, const struct loom_ckpt_save *s, const struct loom_ckpt_run *r,
			  size_t n, char *path, size_t len);
	/* with shards_weights: the parts of this rank's runs in its chunks */
	void (*load_runs)(void *ctx, struct loom_ckpt *ck, const struct loom_ckpt_tensor *t,
			  size_t n, const struct loom_ckpt_run *r, size_t nr, int optimizer);
};

/* Where micro_batch, seq_len and vocab_size came from.  A value only a
 * preset (or the defaults) gave is replaced by the data's (micro_batch and
 * seq_len, from the first frame); one the user gave (--set, a config file,
 * the checkpoint) must agree with the data, and a refusal names where to
 * change it. */
enum { LOOM_O_MB, LOOM_O_SL, LOOM_O_VS, LOOM_N_ORIGIN };
struct loom_origins {
	char src[LOOM_N_ORIGIN][96];	/* "" = a preset or the defaults */
	char preset[96];		/* "preset 'tiny'", for messages */
	int saved[LOOM_N_ORIGIN];
};

/* What the caller asked for: the configuration layers and the checkpoints. */
struct loom_trainer_opts {
	const char *config;     /* preset or JSON file (NULL: tiny, or --resume's) */
	char **sets;            /* --set K=V,... in order */
	int nsets;
	const char *resume, *init_from;
	int have_steps, have_seed, recompute;
	uint64_t steps, seed;
	const char *save_dir;   /* NULL: save nothing */
	unsigned keep;
	int verbose, quiet;
	unsigned held;          /* --eval-train: training frames kept for evaluation */
	const char *eval_squad; /* --eval-squad: a SQuAD v1.1 file scored at evaluations */
	const char *keep_best;  /* --keep-best: the metric (loom_trainer_metric) or NULL */
	int casing;             /* --lowercase/--cased: LOOM_CASING_* (loom_wordpiece.h) */
};

struct loom_trainer {
	struct loom_config cfg;
	const struct loom_model_ops *ops; /* loom_gpt_ops or loom_bert_ops */
	void *model;            /* g or b */
	struct loom_gpt *g;     /* model=gpt */
	struct loom_bert *b;    /* model=bert */
	struct loom_origins orig;
	struct loom_trainer_opts o;
	struct loom_trainer_hooks hk;
	uint64_t step;          /* optimizer steps done */
	uint64_t samples, tokens;
	uint64_t data_seq;      /* next frame seq to consume */
	uint64_t saved;         /* step of the last checkpoint written + 1 */
	uint64_t best_saved;    /* step of the last SAVE/best written + 1 */
	uint32_t data_epoch;
	uint64_t data_seed;
	uint32_t data_batch, data_seq_len, data_world;
	int read_features;      /* task=squad reads frames with features */
	struct loom_ckpt_vocab vocab;	/* files[0].name == NULL: none */
	struct loom_vocab *tok;		/* the vocabulary (--vocab or the checkpoint's), or NULL */
	struct loom_wordpiece *wp;	/* model=bert: its WordPiece tokenizer, or NULL */
	/* o.held: the first training frames again (with an END frame once
	 * o.held are kept), the held-in sample loom_trainer_evaluate_held reads */
	uint8_t *held;
	size_t held_len, held_cap;
	unsigned held_frames;
	/* the model's buffers for the micro-batches (the GPT's: the inputs of
	 * the last one first) and for evaluation frames */
	struct loom_model_scratch scratch, escratch;
	char saved_path[4096];  /* the last checkpoint written */
	/* o.eval_squad's questions and features (made at the first evaluation) */
	struct loom_bert_squad_eval *squad_ev;
	/* o.keep_best: the best evaluation so far (in every checkpoint's
	 * state; resumed), this evaluation's value (offered: 1 once given),
	 * and the directory SAVE/best names */
	struct loom_ckpt_best best;
	double offer;
	int offered;
	char best_path[4096];
	/* set up by loom_trainer_configure for loom_trainer_settle */
	struct loom_ckpt *ck;   /* --resume's */
	struct loom_config named;
	struct loom_origins named_orig;
	int usage;              /* the error is a usage error */
	struct loom_err err;
};

/* t zeroed, o and hk copied (their strings borrowed). */
void loom_trainer_init(struct loom_trainer *t, const struct loom_trainer_opts *o,
		       const struct loom_trainer_hooks *hk);
void loom_trainer_release(struct loom_trainer *t);

/* The configuration: the checkpoint's (--resume, opened and kept) or
 * --config's (defaults then preset or file), then --set and the
 * shorthands (not validated). */
int loom_trainer_configure(struct loom_trainer *t);
/* Validated; --resume with --config: the same as the checkpoint's; the
 * model interface chosen. */
int loom_trainer_settle(struct loom_trainer *t);
/* --vocab spec (NULL: the resumed checkpoint's, if any): stored in every
 * checkpoint; its ids must fit vocab_size. */
int loom_trainer_load_vocab(struct loom_trainer *t, const char *spec);
/* The model, its weights from --resume (the state too), --init-from or
 * the seed, attached to the data-parallel layer. */
int loom_trainer_build(struct loom_trainer *t);

/* The first frame's B and T+1 against the configuration (frame: its
 * number in stdin): see struct loom_origins. */
int loom_trainer_fit_frame(struct loom_trainer *t, int batch, int rec, uint64_t frame);
/* Every id of a frame must be in the vocabulary (padding aside). */
int loom_trainer_check_ids(struct loom_trainer *t, const struct loom_batch_hdr *h,
			   const uint32_t *tok, uint64_t frame);
/* Before step t->step + 1 (its micro-batches). */
void loom_trainer_begin_step(struct loom_trainer *t);
/* Forward and backward of micro-batch `micro` of step t->step + 1 (scaled
 * by 1/grad_accum, dropout keyed per rank), its loss in *loss; the
 * stream position advances past f. */
int loom_trainer_micro(struct loom_trainer *t, const struct loom_frame *f, int micro,
		       float *loss);
/* The optimizer step t->step + 1 after the step's micro-batches (their
 * loss sum *lsum, the mean over the ranks after it): the learning rate
 * of the schedule into *lr, the gradient norm into *norm; samples and
 * tokens counted over the global batch. */
void loom_trainer_step(struct loom_trainer *t, double *lsum, float *lr, float *norm);
/* Write a checkpoint (every rank calls it under data parallelism). */
int loom_trainer_save(struct loom_trainer *t);

/* Keep frame h (tok, and the reader's features) of the training stream
 * while fewer than o.held are kept; 0, LOOM_ENOMEM, or the encoder's
 * error for a frame it cannot write again. */
struct loom_batch_reader;
int loom_trainer_hold(struct loom_trainer *t, const struct loom_batch_reader *r,
		      const struct loom_batch_hdr *h, const uint32_t *tok);
/* loom_trainer_evaluate over the held training frames (nanoGPT's
 * estimate_loss on a fixed sample): 1 with *sum, 0 while none are kept
 * yet, or an error. */
int loom_trainer_evaluate_held(struct loom_trainer *t, struct loom_threads *pool,
			       struct loom_eval_sums *sum);
/* Held-out evaluation over every frame of `path` (at most max_frames, 0:
 * all): the sums of the model's loss and accuracy (GPT: next tokens;
 * squad: rows whose start and end are both the argmax; mlm: masked
 * tokens) into *sum; pool (may be NULL) adapts the threads per frame. */
int loom_trainer_evaluate(struct loom_trainer *t, const char *path, uint64_t max_frames,
			  struct loom_threads *pool, struct loom_eval_sums *sum);

/* --eval-squad (o.eval_squad): the official exact match and F1 of the
 * model's answers to its questions, the features made at the first call
 * with the run's windows (seq_len, doc_stride, max_query) and vocabulary;
 * an error naming the file. */
int loom_trainer_squad_scores(struct loom_trainer *t, double *em, double *f1);

/* Promotion by a metric (o.keep_best, as HuggingFace Trainer's
 * metric_for_best_model): after each evaluation that improves on the best
 * so far, the checkpoint is written as o.save_dir/best (a symlink to
 * best-NNNNNNNN, switched atomically: loom_ckpt_save.as), the metric, value
 * and step recorded in its state.json ("best") and in every later
 * checkpoint's.  A resumed run keeps the best so far (the better of the
 * checkpoint's record and SAVE/best's, of the same metric), so a worse
 * evaluation never replaces SAVE/best; a new run (not --resume) starts
 * without one.
 *
 * The metrics, by their TensorBoard tags: eval/loss, eval/perplexity,
 * eval/accuracy (of --eval-data), eval/exact_match, eval/f1 (of
 * --eval-squad).  0 with *higher (1: larger is better), or LOOM_EINVAL. */
int loom_trainer_metric(const char *name, int *higher);
#define LOOM_TRAINER_METRICS "eval/loss eval/perplexity eval/accuracy eval/exact_match eval/f1"
/* A scalar of this evaluation, by its tag: kept as the offer when it is
 * o.keep_best's (loom_trainer_evaluate clears the last one). */
void loom_trainer_offer(struct loom_trainer *t, const char *tag, double v);
/* 1 when this evaluation's offer (finite) improves on t->best (or there
 * is none yet), else 0. */
int loom_trainer_improves(const struct loom_trainer *t);
/* Write the checkpoint as o.save_dir/best, t->best becoming the offer
 * at t->step (the one it replaces into *was; metric[0] 0: none), its
 * directory in t->best_path.  Every rank calls it under data parallelism,
 * as loom_trainer_save; `latest` and t->saved are left as they are. */
int loom_trainer_save_best(struct loom_trainer *t, struct loom_ckpt_best *was);

/* A GPT's sample (lib/train/loom_generate.h): prompt[0..n) continued by
 * up to max_new tokens (up to the vocabulary's end of text), greedy
 * (temperature 0) or among the 200 most likely, drawn from the seed and
 * the step; decoded with the vocabulary (token ids without one) into
 * *text, valid UTF-8 (malloc'd).  LOOM_ENOMEM ("out of memory"), or the
 * model's or decoder's error. */
int loom_trainer_sample(struct loom_trainer *t, const uint32_t *prompt, size_t n, size_t max_new,
			float temperature, char **text);

/* --log's JSON lines at `path` when resuming at `step`: the lines of
 * later steps (written by the run that died after its last checkpoint)
 * dropped, so the log reads as one run (a pipe or device, or no file:
 * nothing to do). */
int loom_trainer_trim_log(const char *path, uint64_t step, struct loom_err *err);

/* The memory plan of c (model-neutral, per rank of data_parallel). */
void loom_trainer_plan(const struct loom_config *c, int recompute, struct loom_model_mem *m);

#endif
