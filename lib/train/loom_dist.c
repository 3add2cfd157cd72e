/* loom_dist.c - data parallelism over MPI, ZeRO-1; see loom_dist.h. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef LOOM_HAVE_MPI
#include <mpi.h>
#endif

#include "loom_bert.h"
#include "loom_ckpt.h"
#include "loom_dist.h"
#include "loom_gpt.h"
#include "loom_kernels.h"
#include "loom_rigl.h"

/* Largest bucket (floats): keeps every MPI count far below INT_MAX. */
#define MAX_BUCKET ((size_t)1 << 26)

struct bucket {
	int tag;                /* layer whose backward completes it; -1 embeddings */
	size_t b0, b1;          /* [b0, b1) of the flat parameter array */
	size_t c0, c1;          /* this rank's chunk of it */
	size_t soff;            /* where the chunk sits in the shard arrays */
	int *counts, *displs;   /* [world], relative to b0 */
	int started;
	int sent;               /* sharding=weights: started in this micro-batch */
	float *rb;              /* sharding=weights: the summed chunk received */
#ifdef LOOM_HAVE_MPI
	MPI_Request req, req2;  /* req2: the send of a two-rank exchange */
	MPI_Request greq, greq2; /* sharding=weights: the gather of its parameters */
#endif
};

/* sharding=weights: a unit's buckets [k0, k1) and whether its parameters
 * are here (see loom_gpt.h's need/done) */
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

struct loom_dist {
	int rank, world, joined;
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
	uint64_t bytes_step, bytes_last, bytes_total; /* since the last step, in it, in all */
	double gather_wait_s;   /* of wait_s: blocked waiting for a unit's parameters */
	double wait_s;           /* seconds blocked in communication */
	double timeout;          /* dist_timeout: seconds before a roll call; 0 = never */
	int call;                /* this rank's roll calls so far */
	struct peer *peer;       /* [world] */
#ifdef LOOM_HAVE_MPI
	MPI_Comm ctl;            /* a duplicate of the world for the roll call */
#endif
	struct loom_err err;
};

const char *loom_dist_error(const struct loom_dist *d)
{
	return d->err.msg;
}

int loom_dist_rank(const struct loom_dist *d)
{
	return d->rank;
}

int loom_dist_world(const struct loom_dist *d)
{
	return d->world;
}

int loom_dist_buckets(const struct loom_dist *d)
{
	return d->nb;
}

uint64_t loom_dist_moment_bytes(const struct loom_dist *d)
{
	if (d->world == 1)
		return (uint64_t)d->m.n_params * 8;
	return (uint64_t)d->shard_n * 8;
}

uint64_t loom_dist_gradshard_bytes(const struct loom_dist *d)
{
	return d->world == 1 ? 0 : (uint64_t)d->shard_n * 4;
}

uint64_t loom_dist_bytes_step(const struct loom_dist *d)
{
	return d->bytes_last;
}

uint64_t loom_dist_bytes_total(const struct loom_dist *d)
{
	return d->bytes_total;
}

double loom_dist_wait_seconds(const struct loom_dist *d)
{
	return d->wait_s;
}

double loom_dist_gather_wait_seconds(const struct loom_dist *d)
{
	return d->gather_wait_s;
}

int loom_dist_shards_weights(const struct loom_dist *d)
{
	return d->weights;
}

uint64_t loom_dist_bytes_bound(const struct loom_dist *d, int micro)
{
	double f = d->world > 1 ? (double)(d->world - 1) / d->world : 0, P = (double)d->m.n_params;
	if (!d->weights)
		return (uint64_t)(2 * f * P * 4);
	double E = 0; /* the embeddings' unit, gathered once per micro-batch */
	for (int k = d->u ? d->u[0].k0 : 0; d->u && k < d->u[0].k1; k++)
		E += (double)(d->b[k].b1 - d->b[k].b0);
	return (uint64_t)((3 * P - E) * f * 4 * micro);
}

void loom_dist_set_timeout(struct loom_dist *d, double seconds)
{
	d->timeout = seconds;
}


static int env_int(const char *name)
{
	const char *s = getenv(name);
	return s && *s ? atoi(s) : -1;
}

#ifdef LOOM_HAVE_MPI

const char *loom_dist_backend(void)
{
	static char buf[64];
	if (!buf[0]) {
		char v[MPI_MAX_LIBRARY_VERSION_STRING];
		int n = 0;
		if (MPI_Get_library_version(v, &n) != MPI_SUCCESS)
			snprintf(v, sizeof v, "MPI");
		v[strcspn(v, ",\n")] = 0;
		snprintf(buf, sizeof buf, "%.63s", v);
	}
	return buf;
}

static int mpi_fail(struct loom_dist *d, int rc, const char *what)
{
	char s[MPI_MAX_ERROR_STRING];
	int n = 0;
	if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS)
		snprintf(s, sizeof s, "error %d", rc);
	return loom_err_set(&d->err, LOOM_EIO, "rank %d: %s: %s", d->rank, what, s);
}

#define MPI_TRY(d, call, what) do { int rc_ = (call); \
	if (rc_ != MPI_SUCCESS) return mpi_fail(d, rc_, what); } while (0)

/* The roll call (dist_wait) on d->ctl: a ping carries the caller's
 * number, the pong sends it back. */
enum { TAG_PING = 1, TAG_PONG = 2 };
#define SPIN_S 5e-4     /* a wait polls this long before it naps */
#define NAP_MAX_NS 1000000L

/* Send v to rank p unless the last message of this slot is still in flight. */
static void ctl_send(struct loom_dist *d, int p, int tag, int v, int *buf, MPI_Request *req)
{
	int done = 1;
	if (*req != MPI_REQUEST_NULL)
		MPI_Test(req, &done, MPI_STATUS_IGNORE);
	if (!done)
		return;
	*buf = v;
	MPI_Isend(buf, 1, MPI_INT, p, tag, d->ctl, req);
}

/* Answer the pings that came, note the pongs to this rank's current roll
 * call; returns the lowest rank that pinged, or world. */
static int ctl_poll(struct loom_dist *d)
{
	int caller = d->world, flag, v;
	MPI_Status st;
	while (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, d->ctl, &flag, &st) == MPI_SUCCESS && flag &&
	       MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, d->ctl, MPI_STATUS_IGNORE) ==
		       MPI_SUCCESS) {
		struct peer *p = &d->peer[st.MPI_SOURCE];
		if (st.MPI_TAG == TAG_PONG) {
			p->answered |= v == d->call;
			continue;
		}
		ctl_send(d, st.MPI_SOURCE, TAG_PONG, v, &p->pong, &p->pong_req);
		caller = st.MPI_SOURCE < caller ? st.MPI_SOURCE : caller;
	}
	return caller;
}

void loom_dist_answer(struct loom_dist *d)
{
	if (d->world > 1)
		ctl_poll(d);
}

/* Ping every other rank: a new roll call. */
static void roll_call(struct loom_dist *d)
{
	d->call++;
	for (int p = 0; p < d->world; p++) {
		d->peer[p].answered = p == d->rank;
		if (p != d->rank)
			ctl_send(d, p, TAG_PING, d->call, &d->peer[p].ping, &d->peer[p].ping_req);
	}
}

/* Ranks that have not answered this rank's roll call. */
static int roll_missing(const struct loom_dist *d)
{
	int n = 0;
	for (int p = 0; p < d->world; p++)
		n += !d->peer[p].answered;
	return n;
}

/* The error naming the ranks that did not answer. */
static int roll_fail(struct loom_dist *d, double waited, const char *what)
{
	char names[256];
	size_t o = 0;
	int n = 0;
	for (int p = 0; p < d->world; p++)
		if (!d->peer[p].answered && o + 16 < sizeof names)
			o += (size_t)snprintf(names + o, sizeof names - o, "%s%d", n++ ? ", " : "", p);
	return loom_err_set(&d->err, LOOM_EIO,
			    "rank%s %s %s not answered for %.0f s (stopped, hung or %s host "
			    "unreachable): stopping all %d ranks (dist_timeout=%g, in the %s)",
			    n > 1 ? "s" : "", names, n > 1 ? "have" : "has", waited,
			    n > 1 ? "their" : "its", d->world, d->timeout, what);
}

/* Wait for one request: every collective of this file is started
 * non-blocking and finished here.  It polls for SPIN_S, then naps growing
 * to NAP_MAX_NS between polls, answering the other ranks' roll calls.
 * After d->timeout seconds this rank calls the roll; a rank that has not
 * answered within another d->timeout is named and the wait fails; when
 * every rank answered, the wait goes on.  A ping from another caller (of
 * a lower rank, if this one calls too) leaves the report to it: this
 * rank's own call waits 2 x d->timeout from then. */
static int dist_wait(struct loom_dist *d, MPI_Request *r, const char *what)
{
	double t0 = loom_now(), since = t0, called = 0;
	long nap = NAP_MAX_NS >> 5;
	for (;;) {
		int done = 0;
		MPI_TRY(d, MPI_Test(r, &done, MPI_STATUS_IGNORE), what);
		if (done)
			return 0;
		double now = loom_now();
		if (now - t0 < SPIN_S)
			continue;
		int caller = ctl_poll(d);
		if (caller < d->world && (!called || caller < d->rank))
			called = 0, since = now + d->timeout; /* the caller reports: a call
							       * of ours comes after its abort */
		if (called && !roll_missing(d))
			called = 0, since = now; /* every rank is alive: wait on */
		else if (called && now - called >= d->timeout)
			return roll_fail(d, now - t0, what);
		if (d->timeout > 0 && !called && now - since >= d->timeout) {
			roll_call(d);
			called = now;
		}
		nanosleep(&(struct timespec){ .tv_nsec = nap }, NULL);
		nap = nap * 2 < NAP_MAX_NS ? nap * 2 : NAP_MAX_NS;
	}
}

#define WAIT_TRY(d, r, what) do { int rc_ = dist_wait(d, r, what); \
	if (rc_) return rc_; } while (0)

/* Every rank's n values of type t (size bytes each) into all[world * n],
 * in rank order; the bytes sent are counted. */
static int allgather(struct loom_dist *d, const void *mine, size_t n, MPI_Datatype t, int size,
		     void *all, const char *what)
{
	if (n > INT_MAX)
		return loom_err_set(&d->err, LOOM_EINVAL, "rank %d: %s: too many values", d->rank, what);
	MPI_Request r;
	MPI_TRY(d, MPI_Iallgather(mine, (int)n, t, all, (int)n, t, MPI_COMM_WORLD, &r), what);
	WAIT_TRY(d, &r, what);
	d->bytes_step += (uint64_t)(d->world - 1) * n * (uint64_t)size;
	return 0;
}

struct loom_dist *loom_dist_new(int *argc, char ***argv, struct loom_err *err)
{
	struct loom_dist *d = calloc(1, sizeof *d);
	if (!d) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	d->world = 1;
	if (env_int("OMPI_COMM_WORLD_SIZE") < 0 && env_int("PMIX_RANK") < 0 &&
	    env_int("PMI_SIZE") < 0)
		return d; /* not launched by mpirun: one process, no MPI at all */
	int prov = 0;
	if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &prov) != MPI_SUCCESS) {
		loom_err_set(err, LOOM_EIO, "MPI_Init failed");
		free(d);
		return NULL;
	}
	d->joined = 1;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &d->world);
	d->peer = calloc(d->world, sizeof *d->peer);
	if (!d->peer || MPI_Comm_dup(MPI_COMM_WORLD, &d->ctl) != MPI_SUCCESS) {
		/* left joined: mpirun stops the job when this rank exits */
		loom_err_set(err, LOOM_ENOMEM, "rank %d: out of memory joining the MPI job", d->rank);
		free(d->peer);
		free(d);
		return NULL;
	}
	for (int p = 0; p < d->world; p++)
		d->peer[p].ping_req = d->peer[p].pong_req = MPI_REQUEST_NULL;
	return d;
}

void loom_dist_free(struct loom_dist *d)
{
	if (!d)
		return;
	/* d->m's model is not touched: it may already be freed at exit */
	for (int k = 0; d->joined && d->weights && k < d->nb; k++) {
		/* a gather started for a forward that did not come */
		MPI_Wait(&d->b[k].greq, MPI_STATUS_IGNORE);
		MPI_Wait(&d->b[k].greq2, MPI_STATUS_IGNORE);
	}
	for (int k = 0; k < d->nb; k++) {
		free(d->b[k].counts);
		free(d->b[k].displs);
		loom_lazy_free(d->b[k].rb);
	}
	free(d->b);
	free(d->u);
	loom_lazy_free(d->gs);
	loom_lazy_free(d->ms);
	loom_lazy_free(d->vs);
	loom_lazy_free(d->gm);
	loom_lazy_free(d->gv);
	for (int p = 0; d->joined && p < d->world; p++) {
		if (d->peer[p].ping_req != MPI_REQUEST_NULL)
			MPI_Request_free(&d->peer[p].ping_req);
		if (d->peer[p].pong_req != MPI_REQUEST_NULL)
			MPI_Request_free(&d->peer[p].pong_req);
	}
	if (d->joined) {
		MPI_Comm_free(&d->ctl);
		MPI_Finalize();
	}
	free(d->peer);
	free(d);
}

_Noreturn void loom_dist_abort(struct loom_dist *d, int code)
{
	if (d && d->joined)
		MPI_Abort(MPI_COMM_WORLD, code);
	exit(code);
}

int loom_dist_allgather_i32(struct loom_dist *d, const int32_t *mine, int n, int32_t *all)
{
	if (d->world == 1) {
		memcpy(all, mine, sizeof(int32_t) * n);
		return 0;
	}
	return allgather(d, mine, (size_t)n, MPI_INT32_T, 4, all, "allgather of step flags");
}

/* Start bucket b's reduce-scatter: its chunk of the sum over ranks lands
 * in the gradient shard (sharding=optimizer) or in b->rb, to be added to
 * it by bucket_finish (sharding=weights: every micro-batch). */
static int bucket_start(struct loom_dist *d, struct bucket *b)
{
	if (b->started || b->sent)
		return 0;
	b->started = 1;
	b->sent = d->weights;
	float *dst = d->gs + b->soff;
	if (d->weights) {
		if (!(b->rb = loom_model_falloc(b->c1 - b->c0))) /* mmap: given back when freed */
			return loom_err_set(&d->err, LOOM_ENOMEM, "rank %d: out of memory", d->rank);
		dst = b->rb;
	}
	d->bytes_step += (uint64_t)(b->b1 - b->b0 - (b->c1 - b->c0)) * 4;
	if (d->world == 2) {
		/* Two ranks: send the peer its half, receive ours (our own half
		 * is added when it is done).  Open MPI's MPI_Ireduce_scatter
		 * reduces on one rank and scatters: 1.5x these bytes. */
		int peer = 1 - d->rank, tag = (int)(b - d->b);
		MPI_TRY(d, MPI_Irecv(dst, b->counts[d->rank], MPI_FLOAT, peer, tag,
				     MPI_COMM_WORLD, &b->req), "receive of gradients");
		MPI_TRY(d, MPI_Isend(d->m.grads + b->b0 + b->displs[peer], b->counts[peer], MPI_FLOAT,
				     peer, tag, MPI_COMM_WORLD, &b->req2), "send of gradients");
		return 0;
	}
	MPI_TRY(d, MPI_Ireduce_scatter(d->m.grads + b->b0, dst, b->counts, MPI_FLOAT,
				       MPI_SUM, MPI_COMM_WORLD, &b->req),
		"reduce-scatter of gradients");
	return 0;
}

/* Wait for bucket b's reduce-scatter; two ranks: add our own half.
 * sharding=weights: add the chunk to the shard, and the bucket's
 * gradients (read by the peers now) are given back, zero again. */
static int bucket_finish(struct loom_dist *d, struct bucket *b)
{
	if (!b->started)
		return 0;
	WAIT_TRY(d, &b->req, "reduce-scatter of gradients");
	if (d->world == 2)
		WAIT_TRY(d, &b->req2, "send of gradients");
	b->started = 0;
	float *dst = d->gs + b->soff;
	const float *own = d->m.grads + b->c0, *in = d->weights ? b->rb : dst;
	size_t n = b->c1 - b->c0;
	int two = d->world == 2;
	if (d->weights || two) {
		#pragma omp parallel for simd schedule(static)
		for (size_t i = 0; i < n; i++)
			dst[i] = (d->weights ? dst[i] : 0.0f) + (two ? in[i] + own[i] : in[i]);
	}
	if (d->weights) {
		loom_lazy_free(b->rb);
		b->rb = NULL;
		loom_lazy_release(d->m.grads + b->b0, (b->b1 - b->b0) * sizeof(float));
	}
	return 0;
}

/* Let outstanding requests move (MPI progresses only inside MPI calls);
 * sharding=weights: finish the reduce-scatters that are done. */
static int progress(struct loom_dist *d)
{
	for (int k = 0; k < d->nb; k++) {
		struct bucket *b = &d->b[k];
		int f1 = 1, f2 = 1;
		if (b->started && b->req != MPI_REQUEST_NULL)
			MPI_Test(&b->req, &f1, MPI_STATUS_IGNORE);
		if (b->started && b->req2 != MPI_REQUEST_NULL)
			MPI_Test(&b->req2, &f2, MPI_STATUS_IGNORE);
		if (d->weights && b->started && f1 && f2) {
			int rc = bucket_finish(d, b);
			if (rc)
				return rc;
		}
		if (b->greq != MPI_REQUEST_NULL)
			MPI_Test(&b->greq, &f1, MPI_STATUS_IGNORE);
		if (b->greq2 != MPI_REQUEST_NULL)
			MPI_Test(&b->greq2, &f1, MPI_STATUS_IGNORE);
	}
	return 0;
}

static void on_grad_ready(void *ctx, int l)
{
	struct loom_dist *d = ctx;
	if (!d->armed)
		return;
	for (int k = 0; k < d->nb; k++)
		if (d->b[k].tag == l && bucket_start(d, &d->b[k]))
			return; /* reported again by loom_dist_step */
	progress(d);
}

/* ---- sharding=weights: a unit's parameters gathered when the model needs them */

static struct unit *unit_of(struct loom_dist *d, int u)
{
	return &d->u[u + 1];
}

/* Start gathering unit u's parameters: each rank's chunk of each bucket
 * (kept in place in the full-size array) to every rank. */
static int unit_gather(struct loom_dist *d, int u)
{
	struct unit *x = unit_of(d, u);
	if (x->state != U_AWAY)
		return 0;
	x->state = U_COMING;
	for (int k = x->k0; k < x->k1; k++) {
		struct bucket *b = &d->b[k];
		float *p = d->m.params + b->b0;
		d->bytes_step += (uint64_t)(b->c1 - b->c0) * 4 * (d->world - 1);
		if (d->world == 2) {
			int peer = 1 - d->rank, tag = 1 << 20 | k;
			MPI_TRY(d, MPI_Irecv(p + b->displs[peer], b->counts[peer], MPI_FLOAT, peer, tag,
					     MPI_COMM_WORLD, &b->greq), "all-gather of parameters");
			MPI_TRY(d, MPI_Isend(p + b->displs[d->rank], b->counts[d->rank], MPI_FLOAT,
					     peer, tag, MPI_COMM_WORLD, &b->greq2),
				"all-gather of parameters");
			continue;
		}
		MPI_TRY(d, MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, p, b->counts, b->displs,
					   MPI_FLOAT, MPI_COMM_WORLD, &b->greq),
			"all-gather of parameters");
	}
	return 0;
}

static int unit_wait(struct loom_dist *d, int u)
{
	struct unit *x = unit_of(d, u);
	if (x->state == U_HERE)
		return 0;
	int rc = unit_gather(d, u);
	if (rc)
		return rc;
	double t0 = loom_now();
	for (int k = x->k0; k < x->k1; k++) {
		WAIT_TRY(d, &d->b[k].greq, "all-gather of parameters");
		if (d->world == 2)
			WAIT_TRY(d, &d->b[k].greq2, "all-gather of parameters");
	}
	double w = loom_now() - t0;
	d->wait_s += w;
	d->gather_wait_s += w;
	x->state = U_HERE;
	return 0;
}

static int on_need(void *ctx, int u, int next, struct loom_err *err)
{
	struct loom_dist *d = ctx;
	int again = unit_of(d, u)->state == U_HERE;
	int rc = d->gather_failed ? d->err.code : unit_wait(d, u);
	/* the next unit's gather overlaps unit u's compute; but when the
	 * embeddings are needed again (the LM head, whose gradient they are
	 * about to hold too), it waits until they are gone */
	d->after_emb = u < 0 && again ? next : LOOM_GPT_UNIT_NONE;
	if (!rc && !(u < 0 && again) && next != LOOM_GPT_UNIT_NONE)
		rc = unit_gather(d, next);
	if (!rc)
		rc = progress(d);
	if (rc)
		*err = d->err;
	return rc;
}

/* Between two products of the model: let the gathers and reduce-scatters
 * in flight move (an error is reported by the next wait). */
static void on_tick(void *ctx)
{
	progress(ctx);
}

/* Unit u's parameters are no longer needed: give back all but our chunks. */
static void on_done(void *ctx, int u)
{
	struct loom_dist *d = ctx;
	struct unit *x = unit_of(d, u);
	for (int k = x->k0; k < x->k1; k++) {
		const struct bucket *b = &d->b[k];
		loom_lazy_release(d->m.params + b->b0, (b->c0 - b->b0) * sizeof(float));
		loom_lazy_release(d->m.params + b->c1, (b->b1 - b->c1) * sizeof(float));
	}
	x->state = U_AWAY;
	if (u < 0 && d->after_emb != LOOM_GPT_UNIT_NONE && unit_gather(d, d->after_emb))
		d->gather_failed = 1; /* reported by the next need */
	d->after_emb = LOOM_GPT_UNIT_NONE;
}

int loom_dist_micro_end(struct loom_dist *d)
{
	if (!d->weights)
		return 0;
	/* every bucket, also of a backward that had no target to learn from */
	double t0 = loom_now();
	for (int k = 0; k < d->nb; k++) {
		int rc = bucket_start(d, &d->b[k]);
		if (!rc)
			rc = bucket_finish(d, &d->b[k]);
		if (rc)
			return rc;
		d->b[k].sent = 0;
	}
	d->wait_s += loom_now() - t0;
	return 0;
}

/* RigL under sharding=weights: the block norms from every rank's chunks,
 * combined in rank order, then the same mask update on every rank; the
 * changed blocks zeroed in our chunks of the weights and moments. */
static int rigl_update_sharded(struct loom_dist *d, int64_t t)
{
	struct loom_gpt *g = d->m.gpt;
	struct loom_rigl *r = g->rigl;
	size_t n = r->n_scores;
	double *all = malloc(sizeof(double) * n * (size_t)d->world);
	if (!all)
		return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory for the block norms");
	loom_rigl_mag_reset(r);
	for (int k = 0; k < d->nb; k++)
		loom_rigl_mag_range(r, d->b[k].c0, d->b[k].c1, g->params + d->b[k].c0);
	int rc = allgather(d, r->mag, n, MPI_DOUBLE, 8, all, "allgather of the block norms");
	if (!rc) {
		loom_rigl_mag_combine(r, all, d->world);
		loom_rigl_update_mag(r, loom_config_prune_ratio(&g->cfg, t), t);
		for (int k = 0; k < d->nb; k++) {
			const struct bucket *b = &d->b[k];
			loom_rigl_zero_changed(r, b->c0, b->c1, g->params + b->c0);
		}
		loom_gpt_masks_changed(g);
	}
	free(all);
	return rc;
}

static int bcast_params(struct loom_dist *d)
{
	float *p = d->m.params;
	for (size_t o = 0; o < d->m.n_params; o += MAX_BUCKET) {
		size_t n = d->m.n_params - o < MAX_BUCKET ? d->m.n_params - o : MAX_BUCKET;
		MPI_Request r;
		MPI_TRY(d, MPI_Ibcast(p + o, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD, &r),
			"broadcast of the parameters");
		WAIT_TRY(d, &r, "broadcast of the parameters");
	}
	d->m.weights_changed(d->m.model);
	return 0;
}

/* AdamW on this rank's chunk of bucket b, tensor by tensor (decay flags). */
static void adamw_chunk(struct loom_dist *d, const struct bucket *b, float lr, int64_t t,
			float gscale)
{
	const struct loom_dist_model *g = &d->m;
	const struct loom_adamw *c = &g->adamw;
	for (int i = 0; i < g->n_tensors; i++) {
		const struct loom_tensor *tt = &g->tensors[i];
		size_t lo = tt->offset > b->c0 ? tt->offset : b->c0;
		size_t hi = tt->offset + tt->numel < b->c1 ? tt->offset + tt->numel : b->c1;
		if (lo >= hi)
			continue;
		size_t s = b->soff + (lo - b->c0);
		loom_k_adamw(g->params + lo, d->gs + s, d->ms + s, d->vs + s, hi - lo, lr,
			     (float)c->beta1, (float)c->beta2, (float)c->eps,
			     tt->decay ? (float)c->weight_decay : 0.0f, t, gscale);
	}
}

/* RigL update step: every rank scores the blocks on its shard of the
 * summed dense gradient, the partial scores are all-gathered and combined
 * in rank order (the same floats on every rank), then the shard is masked
 * to the live blocks. */
static int rigl_scores(struct loom_dist *d)
{
	struct loom_rigl *r = d->m.gpt->rigl;
	size_t n = r->n_scores;
	float *all = malloc(sizeof(float) * n * (size_t)d->world);
	if (!all)
		return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory for the block scores");
	loom_rigl_score_reset(r);
	for (int k = 0; k < d->nb; k++)
		loom_rigl_score_range(r, d->b[k].c0, d->b[k].c1, d->gs + d->b[k].soff);
	int rc = allgather(d, r->scores, n, MPI_FLOAT, 4, all, "allgather of the block scores");
	if (rc) {
		free(all);
		return rc;
	}
	loom_rigl_score_combine(r, all, d->world);
	free(all);
	for (int k = 0; k < d->nb; k++)
		loom_rigl_mask_range(r, d->b[k].c0, d->b[k].c1, d->gs + d->b[k].soff);
	return 0;
}

int loom_dist_step(struct loom_dist *d, float lr, int64_t t, float *norm, double *lsum)
{
	struct loom_dist_model *g = &d->m;
	if (d->world == 1) {
		g->step(g->model, lr, t, norm);
		return 0;
	}
	int rc;
	for (int k = 0; !d->weights && k < d->nb; k++) /* weights: done by micro_end */
		if ((rc = bucket_start(d, &d->b[k])))
			return rc;
	d->armed = d->weights;
	double t0 = loom_now();
	for (int k = 0; k < d->nb; k++)
		if ((rc = bucket_finish(d, &d->b[k])))
			return rc;
	if (!d->weights)
		memset(g->grads, 0, g->n_params * sizeof(float));
	int update = g->gpt && g->gpt->rigl_dense;
	if (update && (rc = rigl_scores(d)))
		return rc;
	double red[2] = { loom_k_sumsq(d->gs, d->shard_n), lsum ? *lsum : 0 };
	MPI_Request nr;
	MPI_TRY(d, MPI_Iallreduce(MPI_IN_PLACE, red, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &nr),
		"allreduce of the gradient norm");
	WAIT_TRY(d, &nr, "allreduce of the gradient norm");
	d->bytes_step += 16 * (uint64_t)(d->world - 1);
	d->wait_s += loom_now() - t0;
	/* the shards hold sums over ranks: the mean gradient is 1/world of it */
	float n = (float)(sqrt(red[0]) / d->world);
	if (norm)
		*norm = n;
	if (lsum)
		*lsum = red[1] / d->world;
	float gscale = 1.0f / (float)d->world;
	if (g->adamw.grad_clip > 0 && n > g->adamw.grad_clip)
		gscale = (float)(g->adamw.grad_clip / n) / (float)d->world;
	for (int k = 0; k < d->nb; k++) {
		struct bucket *b = &d->b[k];
		adamw_chunk(d, b, lr, t, gscale);
		if (d->weights) /* the next forward gathers the parameters */
			continue;
		MPI_TRY(d, MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g->params + b->b0,
					   b->counts, b->displs, MPI_FLOAT, MPI_COMM_WORLD, &b->req),
			"all-gather of parameters");
		d->bytes_step += (uint64_t)(b->b1 - b->b0 - (b->c1 - b->c0)) * 4;
		progress(d);
	}
	if (d->weights)
		memset(d->gs, 0, d->shard_n * sizeof(float));
	t0 = loom_now();
	for (int k = 0; !d->weights && k < d->nb; k++)
		WAIT_TRY(d, &d->b[k].req, "all-gather of parameters");
	g->weights_changed(g->model);
	if (update && d->weights && (rc = rigl_update_sharded(d, t)))
		return rc;
	if (update && !d->weights) /* every rank: the same weights, scores, so masks */
		loom_gpt_rigl_update(g->gpt, t);
	for (int k = 0; update && k < d->nb; k++) {
		const struct bucket *b = &d->b[k];
		loom_rigl_zero_changed(g->gpt->rigl, b->c0, b->c1, d->ms + b->soff);
		loom_rigl_zero_changed(g->gpt->rigl, b->c0, b->c1, d->vs + b->soff);
	}
	if (g->gpt)
		g->gpt->rigl_dense = 0;
	/* sharding=weights: the next forward starts with the embeddings, whose
	 * gather can start now that the step (and RigL) changed the weights */
	if (d->weights && (rc = unit_gather(d, -1)))
		return rc;
	d->wait_s += loom_now() - t0;
	d->bytes_last = d->bytes_step;
	d->bytes_total += d->bytes_step;
	d->bytes_step = 0;
	return 0;
}

/* Bytes: n from rank 0 to every rank. */
static int bcast_bytes(struct loom_dist *d, void *buf, size_t n, const char *what)
{
	MPI_Request r;
	MPI_TRY(d, MPI_Ibcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD, &r), what);
	WAIT_TRY(d, &r, what);
	return 0;
}

/* Bucket k's chunk of each of the nt tensors: elements [lo[i], hi[i]) of
 * tensor i (empty when they do not meet), and where its moments sit in
 * the shards: mp[i], vp[i] point so that element j (lo <= j < hi) of the
 * tensor is mp[i][j] (only used there; an empty slice points at the
 * shard's start). */
static void bucket_slices(const struct loom_dist *d, int k, size_t nt, uint64_t *lo,
			  uint64_t *hi, float **mp, float **vp)
{
	const struct bucket *b = &d->b[k];
	for (size_t i = 0; i < nt; i++) {
		const struct loom_tensor *t = &d->m.tensors[i];
		size_t a = t->offset > b->c0 ? t->offset : b->c0;
		size_t z = t->offset + t->numel < b->c1 ? t->offset + t->numel : b->c1;
		lo[i] = hi[i] = 0;
		mp[i] = d->ms;
		vp[i] = d->vs;
		if (a >= z)
			continue;
		lo[i] = a - t->offset;
		hi[i] = z - t->offset;
		/* the shard's soff + offset + j - c0 */
		uintptr_t o = ((uintptr_t)t->offset - (uintptr_t)b->c0) * sizeof(float);
		mp[i] = (float *)((uintptr_t)(d->ms + b->soff) + o);
		vp[i] = (float *)((uintptr_t)(d->vs + b->soff) + o);
	}
}

struct slices {
	uint64_t *lo, *hi;
	float **mp, **vp;
};

static int slices_new(struct slices *x, size_t nt, struct loom_err *e)
{
	x->lo = calloc(nt ? nt : 1, sizeof *x->lo);
	x->hi = calloc(nt ? nt : 1, sizeof *x->hi);
	x->mp = calloc(nt ? nt : 1, sizeof *x->mp);
	x->vp = calloc(nt ? nt : 1, sizeof *x->vp);
	return x->lo && x->hi && x->mp && x->vp ? 0 : loom_err_set(e, LOOM_ENOMEM, "out of memory");
}

static void slices_free(struct slices *x)
{
	free(x->lo);
	free(x->hi);
	free(x->mp);
	free(x->vp);
}

/* This rank's pieces of a checkpoint: per bucket, its chunk of each
 * tensor (the weights in place, the moments in the shards). */
static int save_slices(struct loom_dist *d, const char *dir, const struct loom_ckpt_save *s,
		       struct loom_ckpt_piece *pieces, size_t cap, size_t *np, struct loom_err *e)
{
	struct slices x;
	struct loom_ckpt_slices *w = NULL;
	int rc = slices_new(&x, s->n_tensors, e);
	struct loom_ckpt_save s2 = *s;
	s2.adam_m = x.mp;
	s2.adam_v = x.vp;
	*np = 0;
	if (!rc && d->nb > 0) { /* the moments' pointers set before the table is checked */
		bucket_slices(d, 0, s->n_tensors, x.lo, x.hi, x.mp, x.vp);
		rc = loom_ckpt_slices_open(dir, &s2, &w, e);
	}
	for (int k = 0; !rc && k < d->nb; k++) { /* the files opened and synced once */
		bucket_slices(d, k, s->n_tensors, x.lo, x.hi, x.mp, x.vp);
		size_t n = cap - *np;
		rc = loom_ckpt_slices_put(w, x.lo, x.hi, x.mp, x.vp, pieces + *np, &n, e);
		*np += n;
	}
	int rc2 = loom_ckpt_slices_finish(w, rc ? NULL : e);
	slices_free(&x);
	return rc ? rc : rc2;
}

int loom_dist_load(struct loom_dist *d, struct loom_ckpt *ck, const struct loom_ckpt_tensor *t,
		   size_t n, int optimizer)
{
	struct slices x;
	int rc = slices_new(&x, n, &d->err);
	for (int k = 0; !rc && k < d->nb; k++) {
		bucket_slices(d, k, n, x.lo, x.hi, x.mp, x.vp);
		rc = loom_ckpt_load_model_slices(ck, t, n, x.lo, x.hi);
		if (!rc && optimizer)
			rc = loom_ckpt_load_optimizer_slices(ck, t, n, x.mp, x.vp, x.lo, x.hi);
		if (rc)
			loom_err_set(&d->err, rc, "%s", loom_ckpt_error(ck));
	}
	slices_free(&x);
	return rc;
}

int loom_dist_save(struct loom_dist *d, const struct loom_ckpt_save *s, char *out, size_t len)
{
	if (!d->weights)
		return loom_err_set(&d->err, LOOM_EINVAL, "loom_dist_save: the weights are not sharded");
	struct loom_err e = { 0 };
	struct loom_ckpt_tx *tx = NULL;
	struct { int32_t rc; char dir[4096]; } hd = { 0, "" };
	if (d->rank == 0) { /* the moments' headers: begin reads no data */
		float **ph = malloc(sizeof *ph * (s->n_tensors ? s->n_tensors : 1));
		struct loom_ckpt_save s0 = *s;
		for (size_t i = 0; ph && i < s->n_tensors; i++)
			ph[i] = d->ms;
		s0.adam_m = s0.adam_v = ph;
		hd.rc = ph ? loom_ckpt_write_begin(&s0, &tx, &e)
			   : loom_err_set(&e, LOOM_ENOMEM, "out of memory");
		free(ph);
		if (!hd.rc)
			snprintf(hd.dir, sizeof hd.dir, "%s", loom_ckpt_tx_dir(tx));
	}
	int rc = bcast_bytes(d, &hd, sizeof hd, "broadcast of the checkpoint directory");
	if (rc || hd.rc) {
		loom_ckpt_tx_free(tx);
		return rc ? rc : d->rank == 0 ? loom_err_set(&d->err, hd.rc, "%s", e.msg)
			   : loom_err_set(&d->err, hd.rc, "rank 0 could not start the checkpoint");
	}
	size_t cap = LOOM_CKPT_MAX_PIECES(s->n_tensors) * (size_t)d->nb, np = 0;
	struct loom_ckpt_piece *mine = calloc(cap ? cap : 1, sizeof *mine), *all = NULL;
	int32_t cnt = -1, *cnts = d->rank == 0 ? calloc((size_t)d->world, sizeof *cnts) : NULL;
	int *bytes = d->rank == 0 ? calloc((size_t)d->world, sizeof *bytes) : NULL;
	int *displs = d->rank == 0 ? calloc((size_t)d->world, sizeof *displs) : NULL;
	if (!mine || (d->rank == 0 && (!cnts || !bytes || !displs)))
		loom_err_set(&e, LOOM_ENOMEM, "out of memory");
	else if (!save_slices(d, hd.dir, s, mine, cap, &np, &e))
		cnt = (int32_t)np; /* -1 tells rank 0 this rank failed */
	if (cnt < 0)
		loom_err_set(&d->err, e.code, "rank %d: %s", d->rank, e.msg);
	MPI_Request r;
	int total = 0, failed = 0;
	rc = MPI_Igather(&cnt, 1, MPI_INT32_T, cnts, 1, MPI_INT32_T, 0, MPI_COMM_WORLD, &r);
	rc = rc != MPI_SUCCESS ? mpi_fail(d, rc, "gather of the checkpoint pieces")
			       : dist_wait(d, &r, "gather of the checkpoint pieces");
	for (int i = 0; !rc && d->rank == 0 && i < d->world; i++) {
		failed |= cnts[i] < 0;
		bytes[i] = cnts[i] < 0 ? 0 : cnts[i] * (int)sizeof *mine;
		displs[i] = total;
		total += bytes[i];
	}
	if (!rc && d->rank == 0 && !(all = malloc(total ? (size_t)total : 1)))
		rc = loom_err_set(&d->err, LOOM_ENOMEM, "out of memory");
	if (!rc) {
		rc = MPI_Igatherv(mine, cnt < 0 ? 0 : cnt * (int)sizeof *mine, MPI_BYTE, all, bytes,
				  displs, MPI_BYTE, 0, MPI_COMM_WORLD, &r);
		rc = rc != MPI_SUCCESS ? mpi_fail(d, rc, "gather of the checkpoint pieces")
				       : dist_wait(d, &r, "gather of the checkpoint pieces");
	}
	int32_t res = rc ? rc : cnt < 0 ? e.code : 0;
	if (!rc && d->rank == 0 && !failed) {
		res = loom_ckpt_write_commit(tx, all, (size_t)total / sizeof *mine, out, len, &e);
		if (res)
			loom_err_set(&d->err, res, "%s", e.msg);
	} else if (!rc && d->rank == 0 && !res) {
		res = LOOM_EIO;
		loom_err_set(&d->err, res, "a rank could not write its part of the checkpoint (its message above); the previous checkpoint is unchanged");
	}
	loom_ckpt_tx_free(tx);
	free(mine);
	free(all);
	free(cnts);
	free(bytes);
	free(displs);
	if (rc)
		return rc;
	/* every rank learns how it ended */
	struct { int32_t rc; char dir[4096]; } ed = { res, "" };
	if (d->rank == 0 && !res)
		snprintf(ed.dir, sizeof ed.dir, "%s", out);
	if ((rc = bcast_bytes(d, &ed, sizeof ed, "broadcast of the checkpoint's end")))
		return rc;
	if (ed.rc && !d->err.code)
		loom_err_set(&d->err, ed.rc, "the checkpoint failed on another rank");
	if (!ed.rc && d->rank && out && len)
		snprintf(out, len, "%s", ed.dir);
	return ed.rc;
}

int loom_dist_gather_moments(struct loom_dist *d, float **m, float **v)
{
	const struct loom_dist_model *g = &d->m;
	*m = *v = NULL;
	if (d->world == 1) {
		*m = *g->m;
		*v = *g->v;
		return 0;
	}
	if (d->rank == 0) {
		loom_lazy_free(d->gm);
		loom_lazy_free(d->gv);
		d->gm = loom_model_falloc(g->n_params);
		d->gv = loom_model_falloc(g->n_params);
		if (!d->gm || !d->gv) /* the others still send: abort, not hang */
			return loom_err_set(&d->err, LOOM_ENOMEM,
					    "rank 0: out of memory gathering the optimizer state");
	}
	for (int k = 0; k < d->nb; k++) {
		struct bucket *b = &d->b[k];
		int cnt = (int)(b->c1 - b->c0);
		MPI_Request r[2];
		MPI_TRY(d, MPI_Igatherv(d->ms + b->soff, cnt, MPI_FLOAT, d->gm ? d->gm + b->b0 : NULL,
					b->counts, b->displs, MPI_FLOAT, 0, MPI_COMM_WORLD, &r[0]),
			"gather of the optimizer state");
		MPI_TRY(d, MPI_Igatherv(d->vs + b->soff, cnt, MPI_FLOAT, d->gv ? d->gv + b->b0 : NULL,
					b->counts, b->displs, MPI_FLOAT, 0, MPI_COMM_WORLD, &r[1]),
			"gather of the optimizer state");
		WAIT_TRY(d, &r[0], "gather of the optimizer state");
		WAIT_TRY(d, &r[1], "gather of the optimizer state");
	}
	*m = d->gm;
	*v = d->gv;
	return 0;
}

#else /* !LOOM_HAVE_MPI: a world of one */

const char *loom_dist_backend(void)
{
	return "no MPI (single process)";
}

struct loom_dist *loom_dist_new(int *argc, char ***argv, struct loom_err *err)
{
	(void)argc;
	(void)argv;
	int w = env_int("OMPI_COMM_WORLD_SIZE");
	if (w < 0)
		w = env_int("PMI_SIZE");
	if (w > 1) {
		loom_err_set(err, LOOM_EINVAL,
			     "launched as one of %d ranks, but this loom-train was built without MPI "
			     "(install libopenmpi-dev and rebuild)", w);
		return NULL;
	}
	struct loom_dist *d = calloc(1, sizeof *d);
	if (!d) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	d->world = 1;
	return d;
}

void loom_dist_free(struct loom_dist *d)
{
	free(d);
}

_Noreturn void loom_dist_abort(struct loom_dist *d, int code)
{
	(void)d;
	exit(code);
}

void loom_dist_answer(struct loom_dist *d)
{
	(void)d;
}

int loom_dist_allgather_i32(struct loom_dist *d, const int32_t *mine, int n, int32_t *all)
{
	(void)d;
	memcpy(all, mine, sizeof(int32_t) * n);
	return 0;
}

int loom_dist_step(struct loom_dist *d, float lr, int64_t t, float *norm, double *lsum)
{
	(void)lsum;
	d->bytes_step = 0;
	d->m.step(d->m.model, lr, t, norm);
	return 0;
}

int loom_dist_attach(struct loom_dist *d, const struct loom_dist_model *m)
{
	d->m = *m;
	return 0;
}

int loom_dist_micro_end(struct loom_dist *d)
{
	(void)d;
	return 0;
}

int loom_dist_load(struct loom_dist *d, struct loom_ckpt *ck, const struct loom_ckpt_tensor *t,
		   size_t n, int optimizer)
{
	(void)ck;
	(void)t;
	(void)n;
	(void)optimizer;
	return loom_err_set(&d->err, LOOM_EINVAL, "loom_dist_load: the weights are not sharded");
}

int loom_dist_save(struct loom_dist *d, const struct loom_ckpt_save *s, char *out, size_t len)
{
	(void)s;
	(void)out;
	(void)len;
	return loom_err_set(&d->err, LOOM_EINVAL, "loom_dist_save: the weights are not sharded");
}

int loom_dist_gather_moments(struct loom_dist *d, float **m, float **v)
{
	*m = *d->m.m;
	*v = *d->m.v;
	return 0;
}

#endif

void loom_dist_arm(struct loom_dist *d)
{
	if (d->world > 1)
		d->armed = 1;
}

void loom_dist_gather_done(struct loom_dist *d)
{
	loom_lazy_free(d->gm);
	loom_lazy_free(d->gv);
	d->gm = d->gv = NULL;
}

/* Layer index of a GPT tensor: transformer.h.{l}. -> l; ln_f -> L-1 (its
 * gradient is final before layer L-1's backward ends); embeddings -> -1. */
static int gpt_tag(const char *name, int L)
{
	int l;
	if (sscanf(name, "transformer.h.%d.", &l) == 1)
		return l;
	if (strstr(name, "ln_f"))
		return L - 1;
	return -1;
}

/* A BERT's: bert.encoder.layer.{l}. -> l; the head (qa_outputs, cls.*)
 * -> L-1 (its backward runs before layer L-1's ends); embeddings -> -1
 * (the MLM decoder's tied weight among them: final only after them). */
static int bert_tag(const char *name, int L)
{
	int l;
	if (sscanf(name, "bert.encoder.layer.%d.", &l) == 1)
		return l;
	if (!strncmp(name, "qa_outputs.", 11) || !strncmp(name, "cls.", 4))
		return L - 1;
	return -1;
}

static void gpt_step(void *model, float lr, int64_t t, float *norm)
{
	loom_gpt_step(model, lr, t, norm);
}

static void gpt_changed(void *model)
{
	loom_gpt_weights_changed(model);
}

static void bert_step(void *model, float lr, int64_t t, float *norm)
{
	loom_bert_step(model, lr, t, norm);
}

static void bert_changed(void *model)
{
	loom_bert_weights_changed(model);
}

void loom_dist_model_gpt(struct loom_dist_model *m, struct loom_gpt *g)
{
	const struct loom_config *c = &g->cfg;
	*m = (struct loom_dist_model){
		.params = g->params, .grads = g->grads, .m = &g->m, .v = &g->v,
		.n_params = g->n_params, .tensors = g->tensors, .n_tensors = g->n_tensors,
		.n_layer = g->L,
		.adamw = { c->beta1, c->beta2, c->eps, c->weight_decay, c->grad_clip },
		.tag = gpt_tag, .grad_ready = &g->grad_ready, .grad_ready_ctx = &g->grad_ready_ctx,
		.model = g, .step = gpt_step, .weights_changed = gpt_changed, .gpt = g,
		.need = &g->need, .done = &g->done, .tick = &g->tick, .sharding = c->sharding,
	};
}

void loom_dist_model_bert(struct loom_dist_model *m, struct loom_bert *b)
{
	*m = (struct loom_dist_model){
		.params = b->params, .grads = b->grads, .m = &b->m, .v = &b->v,
		.n_params = b->n_params, .tensors = b->tensors, .n_tensors = b->n_tensors,
		.n_layer = b->L, .adamw = b->cfg.adamw,
		.tag = bert_tag, .grad_ready = &b->grad_ready, .grad_ready_ctx = &b->grad_ready_ctx,
		.model = b, .step = bert_step, .weights_changed = bert_changed,
	};
}

#ifdef LOOM_HAVE_MPI

/* Buckets: per tag, the contiguous range of its tensors, split into pieces
 * of at most MAX_BUCKET floats; ordered L-1 .. 0, then -1. */
static int plan_buckets(struct loom_dist *d)
{
	const struct loom_dist_model *g = &d->m;
	int W = d->world, cap = 0;
	if (!(d->u = calloc((size_t)g->n_layer + 1, sizeof *d->u)))
		return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory");
	for (int tag = g->n_layer - 1; tag >= -1; tag--) {
		size_t lo = SIZE_MAX, hi = 0, sum = 0;
		for (int i = 0; i < g->n_tensors; i++) {
			const struct loom_tensor *t = &g->tensors[i];
			if (g->tag(t->name, g->n_layer) != tag)
				continue;
			lo = t->offset < lo ? t->offset : lo;
			hi = t->offset + t->numel > hi ? t->offset + t->numel : hi;
			sum += t->numel;
		}
		if (!sum)
			continue;
		if (sum != hi - lo)
			return loom_err_set(&d->err, LOOM_EINVAL,
					    "layer %d's tensors are not contiguous", tag);
		d->u[tag + 1].k0 = d->nb;
		for (size_t o = lo; o < hi; o += MAX_BUCKET) {
			if (d->nb == cap) {
				cap = cap ? cap * 2 : 16;
				struct bucket *nbk = realloc(d->b, sizeof *nbk * cap);
				if (!nbk)
					return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory");
				d->b = nbk;
			}
			struct bucket *b = &d->b[d->nb++];
			memset(b, 0, sizeof *b);
			b->tag = tag;
			b->b0 = o;
			b->b1 = hi - o < MAX_BUCKET ? hi : o + MAX_BUCKET;
			b->counts = calloc(W, sizeof(int));
			b->displs = calloc(W, sizeof(int));
			if (!b->counts || !b->displs)
				return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory");
			size_t n = b->b1 - b->b0;
			for (int r = 0; r < W; r++) {
				size_t s = n * r / W, e = n * (r + 1) / W;
				b->counts[r] = (int)(e - s);
				b->displs[r] = (int)s;
			}
			b->c0 = b->b0 + n * d->rank / W;
			b->c1 = b->b0 + n * (d->rank + 1) / W;
			b->soff = d->shard_n;
			d->shard_n += b->c1 - b->c0;
#ifdef LOOM_HAVE_MPI
			b->req = b->req2 = b->greq = b->greq2 = MPI_REQUEST_NULL;
#endif
		}
		d->u[tag + 1].k1 = d->nb;
	}
	return 0;
}

int loom_dist_attach(struct loom_dist *d, const struct loom_dist_model *g)
{
	int rc;
	d->m = *g;
	if (d->world == 1)
		return 0;
	d->weights = g->sharding == LOOM_SHARD_WEIGHTS;
	d->after_emb = LOOM_GPT_UNIT_NONE;
	if (d->weights && !g->need)
		return loom_err_set(&d->err, LOOM_EINVAL,
				    "sharding=weights: this model cannot have its weights sharded");
	/* sharding=weights: every rank made the same weights (the seed's or
	 * the checkpoint's): no broadcast, which would need them whole */
	if (!d->weights && (rc = bcast_params(d)))
		return rc;
	if ((rc = plan_buckets(d)))
		return rc;
	if (d->weights) { /* first keep only our chunks of the weights */
		for (int u = -1; u < g->n_layer; u++)
			on_done(d, u);
		loom_lazy_release(g->grads, g->n_params * sizeof(float));
	}
	d->gs = loom_model_falloc(d->shard_n);
	d->ms = loom_model_falloc(d->shard_n);
	d->vs = loom_model_falloc(d->shard_n);
	if (!d->gs || !d->ms || !d->vs)
		return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory for the optimizer shard");
	for (int k = 0; k < d->nb; k++) {
		const struct bucket *b = &d->b[k];
		memcpy(d->ms + b->soff, *g->m + b->c0, (b->c1 - b->c0) * sizeof(float));
		memcpy(d->vs + b->soff, *g->v + b->c0, (b->c1 - b->c0) * sizeof(float));
	}
	loom_lazy_free(*g->m);
	loom_lazy_free(*g->v);
	*g->m = *g->v = NULL;
	*g->grad_ready = on_grad_ready;
	*g->grad_ready_ctx = d;
	if (!d->weights)
		return 0;
	*g->need = on_need;
	*g->done = on_done;
	*g->tick = on_tick;
	d->armed = 1;
	return 0;
}
#endif
