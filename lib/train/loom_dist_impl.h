/*
 * loom_dist_impl.h - private to lib/train/loom_dist*.c: the state of a
 * struct loom_dist and the transport the ZeRO and checkpoint files share.
 *
 * Purpose: loom_dist.c holds the transport (MPI start-up, the roll call,
 * dist_wait, the collectives' helpers), loom_dist_zero.c the gradient
 * buckets, ZeRO-1 and ZeRO-3 and the step, loom_dist_ckpt.c the sharded
 * checkpoints; they meet here, and only here: nothing outside
 * lib/train/loom_dist*.c includes this header.
 *
 * Groups: every collective names the group of ranks it runs over (struct
 * dist_group).  d->job is the whole job (MPI_COMM_WORLD: step flags, the
 * roll call, aborts); d->dp is the data-parallel group, the ranks that hold
 * replicas of the same parameters and sum their gradients (ZeRO buckets,
 * unit gathers, sharded checkpoints).  With tensor parallelism
 * (loom_dist_grid) the job is a grid of job/T replicas x T ranks: d->tp is
 * this rank's T neighbours in rank order, which split every layer and sum
 * their partial activations (dist_tp_reduce), and d->dp the ranks of the
 * other replicas that hold the same slices (MPI_Comm_split both ways);
 * without it d->dp is the whole job and d->tp this rank alone.
 *
 * Ownership, errors: as lib/train/loom_dist.h; the functions here return
 * 0 or a negative LOOM_E* with the message in d->err.
 * Thread-safety: as lib/train/loom_dist.h (the MPI thread only).
 */
#ifndef LOOM_DIST_IMPL_H
#define LOOM_DIST_IMPL_H

#include <stddef.h>
#include <stdint.h>

#ifdef LOOM_HAVE_MPI
#include <mpi.h>
#endif

#include "loom_common.h"
#include "loom_dist.h"

/* Largest bucket (floats): keeps every MPI count far below INT_MAX. */
#define MAX_BUCKET ((size_t)1 << 26)

struct bucket {
	int tag;                /* layer whose backward completes it; -1 embeddings */
	size_t b0, b1;          /* [b0, b1) of the flat parameter array */
	size_t c0, c1;          /* this rank's chunk of it */
	size_t soff;            /* where the chunk sits in the shard arrays */
	int *counts, *displs;   /* [dp.size], relative to b0 */
	int started;
	int sent;               /* sharding=weights: started in this micro-batch */
	float *rb;              /* sharding=weights: the summed chunk received */
#ifdef LOOM_HAVE_MPI
	MPI_Request req, req2;  /* req2: the send of a two-rank exchange */
	MPI_Request greq, greq2; /* sharding=weights: the gather of its parameters */
#endif
};

/* sharding=weights: a unit's buckets [k0, k1) and whether its parameters
 * are here (see struct loom_dist_calls' need/done) */
enum { U_AWAY, U_COMING, U_HERE };
struct unit {
	int k0, k1, state;
};

/* The roll call's state for one other rank (see dist_wait). */
struct peer {
	int ping, pong;         /* the messages in flight: a roll call's number */
	int answered;           /* to this rank's current roll call */
#ifdef LOOM_HAVE_MPI
	MPI_Request ping_req, pong_req;
#endif
};

/* A group of ranks a collective runs over: this rank's place in it. */
struct dist_group {
	int rank, size;
#ifdef LOOM_HAVE_MPI
	MPI_Comm comm;
#endif
};

struct loom_dist {
	struct dist_group job;  /* every rank of the job */
	struct dist_group dp;   /* the data-parallel group: the replicas */
	struct dist_group tp;   /* the tensor-parallel group: this rank's replica */
	int joined, split;      /* split: dp and tp are communicators of their own */
	uint64_t tp_bytes;      /* payload bytes of the tensor-parallel collectives */
	double tp_wait_s;       /* seconds blocked in them */
	struct loom_dist_model m;       /* the model's view (m.params == NULL: none yet) */
	int nb;
	struct bucket *b;       /* in the order backward completes them */
	size_t shard_n;
	float *gs, *ms, *vs;    /* gradient and moment shards [shard_n] */
	float *gm, *gv;         /* gathered moments (rank 0, during a save) */
	int armed;
	int weights;            /* sharding=weights: parameters and gradients sharded too */
	struct unit *u;         /* [n_layer + 1]: u[0] the embeddings, u[l + 1] layer l */
	int after_emb;          /* the unit to gather once the embeddings are done */
	int gather_failed;      /* that gather could not start (error in err) */
	uint64_t bytes_step, bytes_total; /* since the last step, in all */
	double gather_wait_s;   /* of wait_s: blocked waiting for a unit's parameters */
	double wait_s;           /* seconds blocked in communication */
	double timeout;          /* dist_timeout: seconds before a roll call; 0 = never */
	int call;                /* this rank's roll calls so far */
	struct peer *peer;       /* [job.size] */
#ifdef LOOM_HAVE_MPI
	MPI_Comm ctl;            /* a duplicate of the job's communicator for the roll call */
#endif
	struct loom_err err;
};

#ifdef LOOM_HAVE_MPI

/* LOOM_EIO with "rank R: WHAT: MPI's message" in d->err. */
int dist_mpi_fail(struct loom_dist *d, int rc, const char *what);

#define MPI_TRY(d, call, what) do { int rc_ = (call); \
	if (rc_ != MPI_SUCCESS) return dist_mpi_fail(d, rc_, what); } while (0)

/* Finish request r, answering the roll call meanwhile (loom_dist.h): 0,
 * or the error naming the silent ranks, `what` the collective waited on. */
int dist_wait(struct loom_dist *d, MPI_Request *r, const char *what);

#define WAIT_TRY(d, r, what) do { int rc_ = dist_wait(d, r, what); \
	if (rc_) return rc_; } while (0)

/* Every rank of group g: its n values of type t (size bytes each) into
 * all[g->size * n], in rank order; the bytes sent are counted. */
int dist_allgather(struct loom_dist *d, const struct dist_group *g, const void *mine, size_t n,
		   MPI_Datatype t, int size, void *all, const char *what);
/* The model's reduce call (struct loom_dist_calls): buf[0..n) summed or
 * maxed over d->tp, in place (ctx is d). */
int dist_tp_reduce(void *ctx, void *buf, size_t n, int op, struct loom_err *err);
/* Its gather and scatter calls (sequence parallelism) over d->tp. */
int dist_tp_gather(void *ctx, float *buf, size_t n, struct loom_err *err);
int dist_tp_scatter(void *ctx, float *in, float *out, size_t n, struct loom_err *err);
/* n bytes from group g's rank 0 to every rank of it. */
int dist_bcast_bytes(struct loom_dist *d, const struct dist_group *g, void *buf, size_t n,
		     const char *what);

#endif
#endif
