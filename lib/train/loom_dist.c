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
#ifdef LOOM_HAVE_MPI
	MPI_Request req, req2;  /* req2: the send of a two-rank exchange */
#endif
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
	uint64_t bytes_step, bytes_total;
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
	return d->bytes_step;
}

uint64_t loom_dist_bytes_total(const struct loom_dist *d)
{
	return d->bytes_total;
}

double loom_dist_wait_seconds(const struct loom_dist *d)
{
	return d->wait_s;
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
	for (int k = 0; k < d->nb; k++) {
		free(d->b[k].counts);
		free(d->b[k].displs);
	}
	free(d->b);
	free(d->gs);
	free(d->ms);
	free(d->vs);
	free(d->gm);
	free(d->gv);
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
	MPI_Request r;
	MPI_TRY(d, MPI_Iallgather(mine, n, MPI_INT32_T, all, n, MPI_INT32_T, MPI_COMM_WORLD, &r),
		"allgather of step flags");
	WAIT_TRY(d, &r, "allgather of step flags");
	d->bytes_step += (uint64_t)(d->world - 1) * n * 4;
	return 0;
}

static int bucket_start(struct loom_dist *d, struct bucket *b)
{
	if (b->started)
		return 0;
	b->started = 1;
	if (d->world == 2) {
		/* Two ranks: send the peer its half, receive ours (the sum is
		 * finished in loom_dist_step).  Open MPI's MPI_Ireduce_scatter
		 * reduces on one rank and scatters: 1.5x these bytes. */
		int peer = 1 - d->rank, tag = (int)(b - d->b);
		MPI_TRY(d, MPI_Irecv(d->gs + b->soff, b->counts[d->rank], MPI_FLOAT, peer, tag,
				     MPI_COMM_WORLD, &b->req), "receive of gradients");
		MPI_TRY(d, MPI_Isend(d->m.grads + b->b0 + b->displs[peer], b->counts[peer], MPI_FLOAT,
				     peer, tag, MPI_COMM_WORLD, &b->req2), "send of gradients");
		return 0;
	}
	MPI_TRY(d, MPI_Ireduce_scatter(d->m.grads + b->b0, d->gs + b->soff, b->counts, MPI_FLOAT,
				       MPI_SUM, MPI_COMM_WORLD, &b->req),
		"reduce-scatter of gradients");
	return 0;
}

/* Let outstanding requests move (MPI progresses only inside MPI calls). */
static void progress(struct loom_dist *d)
{
	for (int k = 0; k < d->nb; k++) {
		int flag = 0;
		if (d->b[k].started && d->b[k].req != MPI_REQUEST_NULL)
			MPI_Test(&d->b[k].req, &flag, MPI_STATUS_IGNORE);
		if (d->b[k].started && d->b[k].req2 != MPI_REQUEST_NULL)
			MPI_Test(&d->b[k].req2, &flag, MPI_STATUS_IGNORE);
	}
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
	if (n > INT_MAX)
		return loom_err_set(&d->err, LOOM_EINVAL, "too many sparse blocks to exchange");
	float *all = malloc(sizeof(float) * n * (size_t)d->world);
	if (!all)
		return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory for the block scores");
	loom_rigl_score_reset(r);
	for (int k = 0; k < d->nb; k++)
		loom_rigl_score_range(r, d->b[k].c0, d->b[k].c1, d->gs + d->b[k].soff);
	MPI_Request req;
	int rc = MPI_Iallgather(r->scores, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, MPI_COMM_WORLD,
				&req);
	rc = rc != MPI_SUCCESS ? mpi_fail(d, rc, "allgather of the block scores")
			       : dist_wait(d, &req, "allgather of the block scores");
	if (rc) {
		free(all);
		return rc;
	}
	d->bytes_step += (uint64_t)(d->world - 1) * n * 4;
	loom_rigl_score_combine(r, all, d->world);
	free(all);
	for (int k = 0; k < d->nb; k++)
		loom_rigl_mask_range(r, d->b[k].c0, d->b[k].c1, d->gs + d->b[k].soff);
	return 0;
}

int loom_dist_step(struct loom_dist *d, float lr, int64_t t, float *norm, double *lsum)
{
	struct loom_dist_model *g = &d->m;
	d->bytes_step = 0;
	if (d->world == 1) {
		g->step(g->model, lr, t, norm);
		return 0;
	}
	int rc;
	for (int k = 0; k < d->nb; k++)
		if ((rc = bucket_start(d, &d->b[k])))
			return rc;
	d->armed = 0;
	double t0 = loom_now();
	for (int k = 0; k < d->nb; k++) {
		struct bucket *b = &d->b[k];
		WAIT_TRY(d, &b->req, "reduce-scatter of gradients");
		if (d->world == 2) { /* add our own half to the peer's */
			WAIT_TRY(d, &b->req2, "send of gradients");
			float *dst = d->gs + b->soff;
			const float *own = g->grads + b->c0;
			size_t n = b->c1 - b->c0;
			#pragma omp parallel for simd schedule(static)
			for (size_t i = 0; i < n; i++)
				dst[i] += own[i];
		}
		d->b[k].started = 0;
		d->bytes_step += (uint64_t)(d->b[k].b1 - d->b[k].b0 - (d->b[k].c1 - d->b[k].c0)) * 4;
	}
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
		MPI_TRY(d, MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g->params + b->b0,
					   b->counts, b->displs, MPI_FLOAT, MPI_COMM_WORLD, &b->req),
			"all-gather of parameters");
		d->bytes_step += (uint64_t)(b->b1 - b->b0 - (b->c1 - b->c0)) * 4;
		progress(d);
	}
	t0 = loom_now();
	for (int k = 0; k < d->nb; k++)
		WAIT_TRY(d, &d->b[k].req, "all-gather of parameters");
	g->weights_changed(g->model);
	if (update) { /* every rank: the same weights, scores, so masks */
		loom_gpt_rigl_update(g->gpt, t);
		for (int k = 0; k < d->nb; k++) {
			const struct bucket *b = &d->b[k];
			loom_rigl_zero_changed(g->gpt->rigl, b->c0, b->c1, d->ms + b->soff);
			loom_rigl_zero_changed(g->gpt->rigl, b->c0, b->c1, d->vs + b->soff);
		}
	}
	if (g->gpt)
		g->gpt->rigl_dense = 0;
	d->wait_s += loom_now() - t0;
	d->bytes_total += d->bytes_step;
	return 0;
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
		free(d->gm);
		free(d->gv);
		d->gm = malloc(g->n_params * sizeof(float));
		d->gv = malloc(g->n_params * sizeof(float));
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
	free(d->gm);
	free(d->gv);
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
			b->req = b->req2 = MPI_REQUEST_NULL;
#endif
		}
	}
	return 0;
}

static float *shard_alloc(size_t n)
{
	float *p = NULL;
	if (posix_memalign((void **)&p, 64, (n ? n : 1) * sizeof(float)))
		return NULL;
	memset(p, 0, (n ? n : 1) * sizeof(float));
	return p;
}

int loom_dist_attach(struct loom_dist *d, const struct loom_dist_model *g)
{
	int rc;
	d->m = *g;
	if (d->world == 1)
		return 0;
	if ((rc = bcast_params(d)))
		return rc;
	if ((rc = plan_buckets(d)))
		return rc;
	d->gs = shard_alloc(d->shard_n);
	d->ms = shard_alloc(d->shard_n);
	d->vs = shard_alloc(d->shard_n);
	if (!d->gs || !d->ms || !d->vs)
		return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory for the optimizer shard");
	for (int k = 0; k < d->nb; k++) {
		const struct bucket *b = &d->b[k];
		memcpy(d->ms + b->soff, *g->m + b->c0, (b->c1 - b->c0) * sizeof(float));
		memcpy(d->vs + b->soff, *g->v + b->c0, (b->c1 - b->c0) * sizeof(float));
	}
	free(*g->m);
	free(*g->v);
	*g->m = *g->v = NULL;
	*g->grad_ready = on_grad_ready;
	*g->grad_ready_ctx = d;
	return 0;
}
#endif
