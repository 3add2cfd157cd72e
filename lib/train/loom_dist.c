/* loom_dist.c - data parallelism's transport: joining the MPI job, the
 * roll call and the wait every collective ends in (see loom_dist.h and
 * loom_dist_impl.h); ZeRO in loom_dist_zero.c, checkpoints in
 * loom_dist_ckpt.c. */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom_dist_impl.h"

const char *loom_dist_error(const struct loom_dist *d)
{
	return d->err.msg;
}

int loom_dist_rank(const struct loom_dist *d)
{
	return d->job.rank;
}

int loom_dist_world(const struct loom_dist *d)
{
	return d->job.size;
}

int loom_dist_buckets(const struct loom_dist *d)
{
	return d->nb;
}

uint64_t loom_dist_moment_bytes(const struct loom_dist *d)
{
	if (d->dp.size == 1)
		return (uint64_t)d->m.n_params * 8;
	return (uint64_t)d->shard_n * 8;
}

uint64_t loom_dist_gradshard_bytes(const struct loom_dist *d)
{
	return d->dp.size == 1 ? 0 : (uint64_t)d->shard_n * 4;
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

void loom_dist_set_timeout(struct loom_dist *d, double seconds)
{
	d->timeout = seconds;
}

int loom_dist_replica(const struct loom_dist *d)
{
	return d->dp.rank;
}

int loom_dist_replicas(const struct loom_dist *d)
{
	return d->dp.size;
}

int loom_dist_tp_rank(const struct loom_dist *d)
{
	return d->tp.rank;
}

int loom_dist_tp_size(const struct loom_dist *d)
{
	return d->tp.size;
}

uint64_t loom_dist_tp_bytes(const struct loom_dist *d)
{
	return d->tp_bytes;
}

double loom_dist_tp_wait_seconds(const struct loom_dist *d)
{
	return d->tp_wait_s;
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

int dist_mpi_fail(struct loom_dist *d, int rc, const char *what)
{
	char s[MPI_MAX_ERROR_STRING];
	int n = 0;
	if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS)
		snprintf(s, sizeof s, "error %d", rc);
	return loom_err_set(&d->err, LOOM_EIO, "rank %d: %s: %s", d->job.rank, what, s);
}


/* The roll call (dist_wait) on d->ctl: a ping carries the caller's
 * number, the pong sends it back. */
enum { TAG_PING = 1, TAG_PONG = 2 };
#define SPIN_S 5e-4     /* a wait polls this long before it naps */
#define NAP_MAX_NS 1000000L
#define TP_SPIN_S 1e-2  /* a tensor-parallel collective's wait yields this long
			 * before it naps: its rank waits inside a layer, with nothing else to
			 * do, and a nap would delay each round of the collective */

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
	int caller = d->job.size, flag, v;
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
	if (d->job.size > 1)
		ctl_poll(d);
}

/* Ping every other rank: a new roll call. */
static void roll_call(struct loom_dist *d)
{
	d->call++;
	for (int p = 0; p < d->job.size; p++) {
		d->peer[p].answered = p == d->job.rank;
		if (p != d->job.rank)
			ctl_send(d, p, TAG_PING, d->call, &d->peer[p].ping, &d->peer[p].ping_req);
	}
}

/* Ranks that have not answered this rank's roll call. */
static int roll_missing(const struct loom_dist *d)
{
	int n = 0;
	for (int p = 0; p < d->job.size; p++)
		n += !d->peer[p].answered;
	return n;
}

/* The error naming the ranks that did not answer. */
static int roll_fail(struct loom_dist *d, double waited, const char *what)
{
	char names[256];
	size_t o = 0;
	int n = 0;
	for (int p = 0; p < d->job.size; p++)
		if (!d->peer[p].answered && o + 16 < sizeof names)
			o += (size_t)snprintf(names + o, sizeof names - o, "%s%d", n++ ? ", " : "", p);
	return loom_err_set(&d->err, LOOM_EIO,
			    "rank%s %s %s not answered for %.0f s (stopped, hung or %s host "
			    "unreachable): stopping all %d ranks (dist_timeout=%g, in the %s)",
			    n > 1 ? "s" : "", names, n > 1 ? "have" : "has", waited,
			    n > 1 ? "their" : "its", d->job.size, d->timeout, what);
}

/* Wait for one request: every collective of this file is started
 * non-blocking and finished here.  It polls for SPIN_S (then, up to
 * `spin` seconds, yielding the core between polls), then naps growing to
 * NAP_MAX_NS between polls, answering the other ranks' roll calls.
 * After d->timeout seconds this rank calls the roll; a rank that has not
 * answered within another d->timeout is named and the wait fails; when
 * every rank answered, the wait goes on.  A ping from another caller (of
 * a lower rank, if this one calls too) leaves the report to it: this
 * rank's own call waits 2 x d->timeout from then. */
static int wait_spin(struct loom_dist *d, MPI_Request *r, const char *what, double spin)
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
		if (now - t0 < spin) {
			sched_yield();
			continue;
		}
		int caller = ctl_poll(d);
		if (caller < d->job.size && (!called || caller < d->job.rank))
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

int dist_wait(struct loom_dist *d, MPI_Request *r, const char *what)
{
	return wait_spin(d, r, what, SPIN_S);
}


int dist_allgather(struct loom_dist *d, const struct dist_group *g, const void *mine, size_t n,
		   MPI_Datatype t, int size, void *all, const char *what)
{
	if (n > INT_MAX)
		return loom_err_set(&d->err, LOOM_EINVAL, "rank %d: %s: too many values", d->job.rank, what);
	MPI_Request r;
	MPI_TRY(d, MPI_Iallgather(mine, (int)n, t, all, (int)n, t, g->comm, &r), what);
	WAIT_TRY(d, &r, what);
	d->bytes_step += (uint64_t)(g->size - 1) * n * (uint64_t)size;
	return 0;
}

struct loom_dist *loom_dist_new(int *argc, char ***argv, struct loom_err *err)
{
	struct loom_dist *d = calloc(1, sizeof *d);
	if (!d) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	d->job.size = d->dp.size = d->tp.size = 1;
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
	MPI_Comm_rank(MPI_COMM_WORLD, &d->job.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &d->job.size);
	d->peer = calloc(d->job.size, sizeof *d->peer);
	if (!d->peer || MPI_Comm_dup(MPI_COMM_WORLD, &d->ctl) != MPI_SUCCESS) {
		/* left joined: mpirun stops the job when this rank exits */
		loom_err_set(err, LOOM_ENOMEM, "rank %d: out of memory joining the MPI job", d->job.rank);
		free(d->peer);
		free(d);
		return NULL;
	}
	for (int p = 0; p < d->job.size; p++)
		d->peer[p].ping_req = d->peer[p].pong_req = MPI_REQUEST_NULL;
	d->job.comm = MPI_COMM_WORLD;
	d->dp = d->job; /* loom_dist_grid may split it */
	d->tp = (struct dist_group){ .rank = 0, .size = 1, .comm = MPI_COMM_SELF };
	return d;
}

int loom_dist_grid(struct loom_dist *d, int tp)
{
	if (tp == 1)
		return 0;
	if (tp < 1 || d->job.size % tp)
		return loom_err_set(&d->err, LOOM_EINVAL, "tensor_parallel: %d does not divide the "
				    "%d rank%s (mpirun -np): the grid is replicas x %d ranks", tp,
				    d->job.size, d->job.size == 1 ? "" : "s", tp);
	int r = d->job.rank;
	/* tp: the T neighbours r - r % T ..; dp: the ranks with the same r % T */
	MPI_TRY(d, MPI_Comm_split(d->job.comm, r / tp, r, &d->tp.comm), "split of the tensor-parallel groups");
	MPI_TRY(d, MPI_Comm_split(d->job.comm, r % tp, r, &d->dp.comm), "split of the data-parallel groups");
	d->split = 1;
	MPI_Comm_rank(d->tp.comm, &d->tp.rank);
	MPI_Comm_size(d->tp.comm, &d->tp.size);
	MPI_Comm_rank(d->dp.comm, &d->dp.rank);
	MPI_Comm_size(d->dp.comm, &d->dp.size);
	return 0;
}

int dist_tp_reduce(void *ctx, void *buf, size_t n, int op, struct loom_err *err)
{
	struct loom_dist *d = ctx;
	int f64 = op == LOOM_DIST_SUM_F64 || op == LOOM_DIST_MAX_F64, size = f64 ? 8 : 4;
	MPI_Op o = op == LOOM_DIST_SUM_F32 || op == LOOM_DIST_SUM_F64 ? MPI_SUM : MPI_MAX;
	double t0 = loom_now();
	for (size_t i = 0; i < n; i += MAX_BUCKET) { /* counts far below INT_MAX */
		int k = (int)(n - i < MAX_BUCKET ? n - i : MAX_BUCKET), rc;
		MPI_Request r;
		rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + i * size, k, f64 ? MPI_DOUBLE : MPI_FLOAT,
				    o, d->tp.comm, &r);
		if (rc != MPI_SUCCESS)
			rc = dist_mpi_fail(d, rc, "tensor-parallel all-reduce");
		else
			rc = wait_spin(d, &r, "tensor-parallel all-reduce", TP_SPIN_S);
		if (rc) {
			*err = d->err;
			return rc;
		}
		d->tp_bytes += (uint64_t)k * size * 2 * (d->tp.size - 1) / d->tp.size;
	}
	d->tp_wait_s += loom_now() - t0;
	return 0;
}

/* One all-gather (in place, buf[T n]) or reduce-scatter (in[T n] into
 * out[n], in place when out == in) of n floats a rank over d->tp; the
 * bytes each rank sends in a ring ((T-1) n x 4) and the wait counted. */
static int tp_half(struct loom_dist *d, float *in, float *out, size_t n, int scatter,
		   struct loom_err *err)
{
	const char *what = scatter ? "tensor-parallel reduce-scatter" : "tensor-parallel all-gather";
	double t0 = loom_now();
	MPI_Request q;
	int rc;
	if (n > INT_MAX)
		rc = loom_err_set(&d->err, LOOM_EINVAL, "rank %d: %s of %zu floats a rank: too many",
				  d->job.rank, what, n);
	else if (scatter)
		rc = MPI_Ireduce_scatter_block(out == in ? MPI_IN_PLACE : in, out, (int)n, MPI_FLOAT,
					       MPI_SUM, d->tp.comm, &q);
	else
		rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, in, (int)n, MPI_FLOAT,
				    d->tp.comm, &q);
	if (rc > 0)
		rc = dist_mpi_fail(d, rc, what);
	else if (!rc)
		rc = wait_spin(d, &q, what, TP_SPIN_S);
	if (rc) {
		*err = d->err;
		return rc;
	}
	d->tp_bytes += (uint64_t)n * 4 * (uint64_t)(d->tp.size - 1);
	d->tp_wait_s += loom_now() - t0;
	return 0;
}

int dist_tp_gather(void *ctx, float *buf, size_t n, struct loom_err *err)
{
	return tp_half(ctx, buf, buf, n, 0, err);
}

int dist_tp_scatter(void *ctx, float *in, float *out, size_t n, struct loom_err *err)
{
	return tp_half(ctx, in, out, n, 1, err);
}

int loom_dist_tp_gather(struct loom_dist *d, const float *mine, size_t n, float *all)
{
	if (d->dp.rank != 0)
		return 0;
	if (d->tp.size == 1) {
		memcpy(all, mine, n * sizeof(float));
		return 0;
	}
	for (size_t i = 0; i < n; i += MAX_BUCKET) {
		int k = (int)(n - i < MAX_BUCKET ? n - i : MAX_BUCKET);
		float *tmp = d->tp.rank ? NULL : malloc(sizeof(float) * (size_t)k * d->tp.size);
		if (!d->tp.rank && !tmp) /* the others still send: abort, not hang */
			return loom_err_set(&d->err, LOOM_ENOMEM, "rank 0: out of memory gathering "
					    "the tensor-parallel slices");
		MPI_Request r;
		int rc = MPI_Igather(mine + i, k, MPI_FLOAT, tmp, k, MPI_FLOAT, 0, d->tp.comm, &r);
		if (rc != MPI_SUCCESS || (rc = dist_wait(d, &r, "gather of the tensor-parallel slices"))) {
			free(tmp);
			return rc > 0 ? dist_mpi_fail(d, rc, "gather of the tensor-parallel slices") : rc;
		}
		for (int p = 0; tmp && p < d->tp.size; p++)
			memcpy(all + (size_t)p * n + i, tmp + (size_t)p * k, sizeof(float) * k);
		free(tmp);
	}
	return 0;
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
	for (int p = 0; d->joined && p < d->job.size; p++) {
		if (d->peer[p].ping_req != MPI_REQUEST_NULL)
			MPI_Request_free(&d->peer[p].ping_req);
		if (d->peer[p].pong_req != MPI_REQUEST_NULL)
			MPI_Request_free(&d->peer[p].pong_req);
	}
	if (d->split) {
		MPI_Comm_free(&d->tp.comm);
		MPI_Comm_free(&d->dp.comm);
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
	if (d->job.size == 1) {
		memcpy(all, mine, sizeof(int32_t) * n);
		return 0;
	}
	return dist_allgather(d, &d->job, mine, (size_t)n, MPI_INT32_T, 4, all,
			      "allgather of step flags");
}

int dist_bcast_bytes(struct loom_dist *d, const struct dist_group *g, void *buf, size_t n,
		     const char *what)
{
	MPI_Request r;
	MPI_TRY(d, MPI_Ibcast(buf, (int)n, MPI_BYTE, 0, g->comm, &r), what);
	WAIT_TRY(d, &r, what);
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
	d->job.size = d->dp.size = d->tp.size = 1;
	return d;
}

void loom_dist_free(struct loom_dist *d)
{
	free(d);
}

int loom_dist_grid(struct loom_dist *d, int tp)
{
	if (tp == 1)
		return 0;
	return loom_err_set(&d->err, LOOM_EINVAL, "tensor_parallel: %d does not divide the 1 rank "
			    "of this loom-train (built without MPI)", tp);
}

int loom_dist_tp_gather(struct loom_dist *d, const float *mine, size_t n, float *all)
{
	(void)d;
	memcpy(all, mine, n * sizeof(float));
	return 0;
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
#endif
