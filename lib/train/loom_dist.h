/*
 * loom_dist.h - data-parallel training over MPI with ZeRO stage 1
 * (optimizer state sharded across ranks, like Graphcore's replicated
 * tensor sharding) or stage 3 (weights, gradients and optimizer state
 * sharded, a layer gathered at a time: Graphcore's phased execution).
 *
 * Purpose: N processes (ranks) each run the same model on a disjoint
 * slice of every global batch.  The flat parameter array is cut in
 * buckets (one per layer, the embeddings last; at most 2^26 floats), and
 * each rank owns the same 1/N chunk of every bucket.
 *
 * sharding=optimizer (ZeRO-1): after the last micro-batch's backward, the
 * gradients are reduce-scattered bucket by bucket, each started from the
 * model's grad_ready hook as soon as backward has finished that layer, so
 * communication overlaps the backward of the layers below.  Each rank
 * clips by the global gradient norm (one small allreduce), runs AdamW
 * (loom_k_adamw, no weight decay for norm/bias tensors) on its chunk of
 * the parameters with its chunk of the moments, and the parameters are
 * all-gathered.  Memory per rank for the AdamW moments falls by N.
 * Bytes sent per step follow a ring schedule: 2 (N-1)/N x parameter
 * bytes, plus a few control bytes.
 *
 * sharding=weights (ZeRO-3, a model with units: the need/done calls of
 * struct loom_dist_calls below): a rank keeps only its chunks of the
 * weights (in place in the model's full-size, lazily backed array: the
 * rest of it costs no memory), of the gradients
 * (a shard) and of the moments.  Before the model reads a unit (the
 * embeddings, a layer) its chunks are all-gathered from every rank, and
 * the unit the model names as next starts gathering at once, overlapping
 * the current unit's compute; when the model is done with a unit, all but
 * the rank's chunks are given back.  The embeddings stay from the
 * embedding to the LM head (tied to them).  Backward gathers each layer
 * again (recompute reuses that gather); each micro-batch's gradients of a
 * layer are reduce-scattered into the shard as soon as its backward ends,
 * and the full-size gradients given back.  The step clips and runs AdamW
 * on the shards; the next forward's embeddings start gathering as it
 * ends.  RigL scores and block norms (the model's mask hooks, struct
 * loom_dist_masks) are computed on each rank's chunks and combined.
 * Bytes per micro-batch: (3P - E)(N-1)/N x 4 for P parameters, E of them
 * the embeddings' (loom_dist_bytes_bound; a model gathering them more
 * often says so in emb_gathers).  The ranks must agree before
 * every micro-batch (loom-train syncs them).
 *
 * Checkpoints: sharding=optimizer gathers the moments on rank 0
 * (loom_dist_gather_moments); sharding=weights has every rank write its
 * chunks into the one checkpoint (loom_dist_save) and read only its chunks
 * back (loom_dist_load).  Either way the checkpoint holds whole tensors,
 * so it resumes on any number of ranks, sharded either way.
 *
 * Built with MPI (LOOM_HAVE_MPI, the Makefile compiles lib/train/loom_dist*.c
 * with mpicc's flags when OpenMPI is installed) and launched by mpirun, the
 * world is MPI_COMM_WORLD; otherwise every function works for a single
 * process (world 1: loom_dist_step is the model's own step, nothing is sharded).
 * The gradients are summed, and the buckets sharded, over the
 * data-parallel group: the whole world, or with tensor parallelism
 * (loom_dist_grid) the ranks of the other replicas that hold the same
 * slices (lib/train/loom_dist_impl.h).
 *
 * Tensor parallelism (Megatron-LM's 1D splits): loom_dist_grid(d, T) makes
 * the world a grid of world/T data-parallel replicas of T neighbouring
 * ranks (rank r is tensor-parallel rank r % T of replica r / T).  The
 * model splits each layer across a replica's T ranks and sums its partial
 * activations through the reduce call (struct loom_dist_calls); ZeRO-1
 * (or, sharding=weights, ZeRO-3) shards each rank's slices over the
 * replicas; the gradient norm counts the tensors every tensor-parallel
 * rank holds whole (struct loom_dist_model's replicated) once.
 * Checkpoints: replica 0's ranks (sharding=weights: every rank, its
 * chunks) each write their slices' runs into the one checkpoint
 * (loom_dist_save_runs); a resume reads only a rank's runs
 * (loom_ckpt_load_runs, loom_dist_load_runs): no rank holds the whole
 * model.
 *
 * Files: loom_dist.c the transport and roll call, loom_dist_zero.c the
 * buckets, ZeRO-1/3 and the step, loom_dist_ckpt.c the sharded
 * checkpoints; they share the private loom_dist_impl.h.
 *
 * A rank that stops answering (stopped, hung, its host unreachable) makes
 * the others fail within about 2 x the timeout (loom_dist_set_timeout),
 * never hang: every collective is finished by one wait that polls (briefly
 * spinning, then napping up to 1 ms: a waiting rank leaves its core to
 * others) and meanwhile answers the other ranks' roll calls on a
 * duplicate of the world communicator.  A rank that has waited `timeout`
 * seconds calls the roll: it pings every other rank and waits up to
 * `timeout` more for their answers.  When every rank answered (they are
 * all alive, one of them slow), it waits on; otherwise the function that
 * waited fails with "rank 1 has not answered for 6 s (stopped, hung or its
 * host unreachable): stopping all 2 ranks (dist_timeout=3, in the
 * allgather of step flags)", and the caller aborts the job.  A rank that
 * receives a ping leaves the report to the caller (the lowest-numbered of
 * several), so one line names the silent ranks.  A rank answers only while
 * it waits here or calls loom_dist_answer(): the timeout must exceed the
 * longest time a rank spends away from the others (rank 0 evaluating or
 * writing a checkpoint), and a rank that waits for something else (its
 * input) calls loom_dist_answer() meanwhile.
 *
 * Ownership: struct loom_dist owns its shards and MPI state; the model is
 * borrowed from loom_dist_attach() until the last step or gather (the
 * calls it connected keep pointing at d: free the model or clear them
 * before loom_dist_free(), which never touches the model).  With world >
 * 1, attach frees *m->m and *m->v (set to NULL): the moments live here.
 * Errors: 0 or negative LOOM_E*, message in loom_dist_error().  Nothing
 * prints or exits (except loom_dist_abort()).
 * Thread-safety: stricter than the default: MPI runs FUNNELED, so only
 * the thread that called loom_dist_new may call the functions here
 * (loom_dist_backend's first call included: it fills a static buffer).
 */
#ifndef LOOM_DIST_H
#define LOOM_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"
#include "loom_model.h"

struct loom_dist;

/* What loom_dist asks a model to call back, ctx first (installed by the
 * model's connect hook when the world is larger than 1):
 *  - grad_ready(ctx, l): layer l's gradients are final (l = n_layer-1 ..
 *    0, then -1 after the embeddings; see tag below);
 *  - sharding=weights only (NULL otherwise): the model reads unit u's
 *    parameters (-1: the embeddings; l: layer l) only between need(ctx, u,
 *    next, err) and done(ctx, u), `next` being the unit it reads after u
 *    (LOOM_DIST_UNIT_NONE: none); need returns 0 or an error (message in
 *    *err); tick(ctx) between two products lets the transfers move. */
#define LOOM_DIST_UNIT_NONE (-2)
struct loom_dist_calls {
	void *ctx;
	void (*grad_ready)(void *ctx, int l);
	int (*need)(void *ctx, int u, int next, struct loom_err *err);
	void (*done)(void *ctx, int u);
	void (*tick)(void *ctx);
	/* tensor parallelism (NULL without): buf[0..n) summed (op
	 * LOOM_DIST_SUM_F32/F64) or maxed (LOOM_DIST_MAX_F32/F64) over the
	 * replica's T ranks, in place, every rank of it calling with the same
	 * n; 0 or the error (message in *err) */
	int (*reduce)(void *ctx, void *buf, size_t n, int op, struct loom_err *err);
	/* sequence parallelism (with reduce): gather: buf[T n] holds this
	 * rank's n floats at buf[r n] (r its tensor-parallel rank), every
	 * rank's on return (an all-gather); scatter: in[T n] summed over the
	 * replica's T ranks, this rank's n floats of the sum (at r n) into
	 * out[n] (a reduce-scatter; out == in: at in[0..n)) */
	int (*gather)(void *ctx, float *buf, size_t n, struct loom_err *err);
	int (*scatter)(void *ctx, float *in, float *out, size_t n, struct loom_err *err);
};
enum { LOOM_DIST_SUM_F32, LOOM_DIST_MAX_F32, LOOM_DIST_SUM_F64, LOOM_DIST_MAX_F64 };

/* A model's block masks that change during training (RigL,
 * lib/train/loom_rigl.h), as the ranks need them to agree: every hook
 * takes the model (struct loom_dist_model's `model`).  A range [lo, hi)
 * is of the flat parameter array with its values at x[i - lo] (a rank
 * passes its chunks).  take_due NULL: the model has no such masks. */
struct loom_dist_masks {
	/* 1 when the step being taken updates the masks (the gradients were
	 * kept dense for it); the model forgets it (0 at the next call) */
	int (*take_due)(void *model);
	/* the blocks' scores from the summed gradient: reset, add a range,
	 * this rank's partial scores (*n of them), combine world ranks'
	 * partial scores all[world * n] (rank order) into the model's */
	void (*score_reset)(void *model);
	void (*score_range)(void *model, size_t lo, size_t hi, const float *g);
	const float *(*scores)(void *model, size_t *n);
	void (*score_combine)(void *model, const float *all, int world);
	/* x[i - lo] = 0 in the dead blocks */
	void (*mask_range)(void *model, size_t lo, size_t hi, float *x);
	/* update the masks at step t from the scores and the whole weights,
	 * the changed blocks zeroed in the weights (the model's own update) */
	void (*update)(void *model, int64_t t);
	/* weights sharded: the blocks' norms, as the scores, then the update
	 * at step t from world ranks' partial norms all[world * n] */
	void (*norm_reset)(void *model);
	void (*norm_range)(void *model, size_t lo, size_t hi, const float *w);
	const double *(*norms)(void *model, size_t *n);
	void (*update_norms)(void *model, const double *all, int world, int64_t t);
	/* x[i - lo] = 0 in the blocks the last update pruned or regrew */
	void (*zero_changed)(void *model, size_t lo, size_t hi, float *x);
	/* the masks changed and the caller zeroed the changed blocks of the
	 * weights: the model repacks what depends on them */
	void (*changed)(void *model);
};

/* What data parallelism needs of a model: its parameter store and hooks,
 * `model` the first argument of each.  loom_dist never names a model: the
 * model fills this (each model's own function, e.g. loom_gpt_dist_model()
 * or loom_bert_dist_model()). */
struct loom_dist_model {
	float *params, *grads;
	float **m, **v;                 /* the model's moments: attach (world > 1) frees
					   them and sets them NULL; the shards hold them */
	size_t n_params;
	const struct loom_tensor *tensors;
	int n_tensors, n_layer;
	struct loom_adamw adamw;
	int sharding;                   /* enum loom_sharding */
	void *model;
	/* the layer whose backward leaves tensor `name`'s gradient final
	 * (-1: the embeddings, last); each tag's tensors are contiguous */
	int (*tag)(const char *name, int n_layer);
	void (*step)(void *model, float lr, int64_t t, float *norm);  /* world 1 */
	void (*weights_changed)(void *model);
	/* install the calls (all but grad_ready may be NULL) */
	void (*connect)(void *model, const struct loom_dist_calls *c);
	int units;                      /* 1: the model calls need/done/tick, so
					   sharding=weights can shard it */
	int emb_gathers;                /* units: how often a training micro-batch
					   gathers the embeddings' unit (0: once) */
	/* tensor parallelism: 1 when tensor i is whole on every rank of a
	 * replica (its gradient the same on each: the norm counts it once);
	 * NULL: the model is not split */
	int (*replicated)(void *model, int i);
	struct loom_dist_masks masks;
};

/* Join the MPI job when launched by an MPI launcher (OMPI_COMM_WORLD_SIZE,
 * PMIX_RANK or PMI_SIZE in the environment), else a world of 1.  NULL on
 * failure with the reason in *err. */
struct loom_dist *loom_dist_new(int *argc, char ***argv, struct loom_err *err);
/* MPI_Finalize (if joined); accepts NULL. */
void loom_dist_free(struct loom_dist *d);
/* Make the job a grid of world/tp replicas x tp tensor-parallel ranks
 * (collective, before attach): LOOM_EINVAL when tp does not divide the
 * world.  tp 1: nothing. */
int loom_dist_grid(struct loom_dist *d, int tp);
/* This rank's replica and their number (without a grid: the rank and the
 * world), its tensor-parallel rank and their number (0 and 1). */
int loom_dist_replica(const struct loom_dist *d);
int loom_dist_replicas(const struct loom_dist *d);
int loom_dist_tp_rank(const struct loom_dist *d);
int loom_dist_tp_size(const struct loom_dist *d);
/* Payload bytes this rank sent in the tensor-parallel all-reduces (ring:
 * 2 (T-1)/T x the buffer each), all-gathers and reduce-scatters ((T-1)/T
 * x the whole buffer each), and the seconds it waited in them. */
uint64_t loom_dist_tp_bytes(const struct loom_dist *d);
double loom_dist_tp_wait_seconds(const struct loom_dist *d);
/* Kill every rank of the job now (MPI_Abort), exit code `code`. */
_Noreturn void loom_dist_abort(struct loom_dist *d, int code);
const char *loom_dist_error(const struct loom_dist *d);
int loom_dist_rank(const struct loom_dist *d);
int loom_dist_world(const struct loom_dist *d);
/* "Open MPI v4.1.4" or "no MPI (single process)": what this build has. */
const char *loom_dist_backend(void);

/* Take the model: parameters broadcast from rank 0, buckets laid out, the
 * moments sharded, the calls connected.  World 1: nothing.  sharding=weights
 * of a model without units: LOOM_EINVAL. */
int loom_dist_attach(struct loom_dist *d, const struct loom_dist_model *m);
/* Bytes of AdamW moments (m + v) this rank holds, and of its gradient
 * shard buffer. */
uint64_t loom_dist_moment_bytes(const struct loom_dist *d);
uint64_t loom_dist_gradshard_bytes(const struct loom_dist *d);
int loom_dist_buckets(const struct loom_dist *d);

/* The next backward is the last micro-batch of a step: start each bucket's
 * reduce-scatter as its layer finishes. */
void loom_dist_arm(struct loom_dist *d);

/* A micro-batch's backward is done: sharding=weights reduce-scatters the
 * gradients of every micro-batch into the shard (those not started yet,
 * e.g. of a backward without targets, are sent now, as zeros) and gives
 * the full-size gradients back.  Otherwise nothing. */
int loom_dist_micro_end(struct loom_dist *d);

/* Every rank contributes n int32 values; all[world * n] receives them in
 * rank order on every rank (a collective). */
int loom_dist_allgather_i32(struct loom_dist *d, const int32_t *mine, int n, int32_t *all);

/* Optimizer step t (1-based) at learning rate lr: finish the gradient
 * reduction, global-norm clip (cfg.grad_clip), AdamW on this rank's shard,
 * all-gather the parameters; leaves the gradients zeroed.  *norm gets the
 * norm of the averaged gradient; *lsum (this rank's loss sum) becomes the
 * mean over ranks.  World 1: the model's step hook. */
int loom_dist_step(struct loom_dist *d, float lr, int64_t t, float *norm, double *lsum);

/* sharding=optimizer, collective: the full AdamW moments on rank 0 (*m,
 * *v: n_params floats owned by d until loom_dist_gather_done()); NULL on
 * the other ranks (sharding=weights saves with loom_dist_save instead).
 * World 1: the model's own moments. */
int loom_dist_gather_moments(struct loom_dist *d, float **m, float **v);
void loom_dist_gather_done(struct loom_dist *d);

/* sharding=weights, collective: write the checkpoint s, each rank its
 * chunks of the weights and AdamW moments (lib/train/loom_ckpt.h's
 * write_begin on rank 0, write_slices everywhere, commit on rank 0).
 * Every rank passes the table of the model's tensors (data: the model's
 * parameters; moments: ignored, the shards are written), and rank 0 the
 * config, state and files.  The step directory into out[len] on every
 * rank; 0 or the error on every rank (a rank killed meanwhile leaves the
 * previous checkpoint as it was). */
struct loom_ckpt_save;
int loom_dist_save(struct loom_dist *d, const struct loom_ckpt_save *s, char *out, size_t len);

/* tensor parallelism, collective over replica 0's ranks (the others
 * return 0 at once): write the checkpoint s (the whole model's table:
 * names and whole shapes; its data and moments are not read), each rank
 * its runs r[0..n) (lib/train/loom_ckpt.h's struct loom_ckpt_run: of the
 * weights and moments; the runs of a replica's ranks tile every tensor),
 * as loom_dist_save: begun and committed by rank 0, the step directory
 * into out[len], 0 or the error on every rank that took part.
 * sharding=weights (after attach): a collective of every rank, each
 * writing the parts of its runs (r->w pointing into the model's
 * parameters) in its chunks, with the moments of its shards. */
struct loom_ckpt;
struct loom_ckpt_run;
struct loom_ckpt_tensor;
int loom_dist_save_runs(struct loom_dist *d, const struct loom_ckpt_save *s,
			const struct loom_ckpt_run *r, size_t n, char *out, size_t len);
/* tensor parallelism with sharding=weights, after attach: read the parts
 * of this rank's runs r[0..nr) in its chunks (the moments into its
 * shards) from ck, t[n] the whole model's table.  Not collective. */
int loom_dist_load_runs(struct loom_dist *d, struct loom_ckpt *ck, const struct loom_ckpt_tensor *t,
			size_t n, const struct loom_ckpt_run *r, size_t nr, int optimizer);

/* sharding=weights, after attach: read this rank's chunks of the weights
 * (t: the model's tensor table, data = its parameters) and, with
 * `optimizer`, of the AdamW moments from the checkpoint ck, only them
 * (a rank never holds the whole model).  Not collective. */
struct loom_ckpt;
struct loom_ckpt_tensor;
int loom_dist_load(struct loom_dist *d, struct loom_ckpt *ck, const struct loom_ckpt_tensor *t,
		   size_t n, int optimizer);

/* Payload bytes this rank sent in all steps. */
uint64_t loom_dist_bytes_total(const struct loom_dist *d);
/* Seconds a wait lasts before this rank calls the roll (see above);
 * 0 (the default) waits forever. */
void loom_dist_set_timeout(struct loom_dist *d, double seconds);
/* Answer the other ranks' roll calls: call it at least every second while
 * this rank waits outside this file (world 1: nothing). */
void loom_dist_answer(struct loom_dist *d);

/* Seconds this rank spent blocked in the step's collectives (the gradient
 * reduction left after backward, the norm allreduce, the all-gather). */
double loom_dist_wait_seconds(const struct loom_dist *d);
/* Of those, sharding=weights: waiting for a unit's weights to arrive. */
double loom_dist_gather_wait_seconds(const struct loom_dist *d);
int loom_dist_shards_weights(const struct loom_dist *d);
/* The payload bytes a rank must send per step of `micro` micro-batches
 * (ring schedules): sharding=optimizer 2 (N-1)/N x 4P (reduce-scatter of
 * the gradients, all-gather of the weights); sharding=weights per
 * micro-batch (3P - E) (N-1)/N x 4: the weights gathered for forward and
 * again for backward (recompute reuses that gather), except the
 * embeddings E, gathered once (the GPT's: kept from the embedding to the
 * LM head, tied to them), and the gradients reduce-scattered once; a
 * model that gathers the embeddings g = emb_gathers times, (3P + (g-2)E)
 * (N-1)/N x 4. */
uint64_t loom_dist_bytes_bound(const struct loom_dist *d, int micro);

#endif
