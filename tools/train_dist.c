/* train_dist.c - loom-train's side of data parallelism; see train_dist.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "loom_bert.h"
#include "loom_config.h"
#include "loom_dist.h"
#include "loom_file.h"
#include "loom_gpt.h"
#include "loom_trainer.h"
#include "train_dist.h"

static struct loom_dist *dist;
static int d_rank, d_world = 1, d_quiet;
static int agreed_exit;                 /* every rank exits 1 together */
static uint64_t synced_step = UINT64_MAX, steps_done;
static int d_micro = 1;                 /* micro-batches per step */
static int point, synced_point;         /* its micro-batch (else 0) */
static int synced_result;
static sigset_t stop_set;
/* The first stop signal: where it is kept, who sent it (pid 0: the kernel,
 * e.g. a terminal's ^C), that process's name, and the rank it reached. */
static volatile sig_atomic_t *stop_flag, stop_pid;
static char stop_comm[16];
static int stop_rank = -1;
static struct loom_dist_model model; /* attached */
static uint64_t tp_bound;               /* the model's count of the all-reduces' bytes per step */
static int d_sp;                        /* sequence_parallel: gathers and scatters too */

/* A collective of loom_dist failed (rc != 0): say why, stop every rank. */
static void or_abort(int rc)
{
	if (!rc)
		return;
	cli_warn("%s", loom_dist_error(dist));
	loom_dist_abort(dist, 1);
}

int train_dist_rank(void)
{
	return d_rank;
}

int train_dist_world(void)
{
	return d_world;
}

const char *train_dist_version(void)
{
	static char buf[96];
	if (!strncmp(loom_dist_backend(), "no MPI", 6))
		return loom_dist_backend();
	snprintf(buf, sizeof buf, "%s (data-parallel)", loom_dist_backend());
	return buf;
}

/* Leave MPI the way the exit demands: finalize when every rank ends the
 * same way, abort the whole job when this rank fails alone (mpirun then
 * stops the others at once instead of leaving them in a collective). */
static void on_exit_dist(int status, void *arg)
{
	(void)arg;
	if (!dist)
		return;
	if (status == 0 && d_rank == 0 && loom_dist_tp_size(dist) > 1 && !d_quiet && steps_done) {
		char a[32];
		char b[32];
		double per = (double)loom_dist_tp_bytes(dist) / steps_done;
		cli_warn("tensor parallel: %d ranks per replica; %.3f s per step blocked in their %s; %s sent per step per rank in them (%s: %s; %.4fx)",
			 loom_dist_tp_size(dist), loom_dist_tp_wait_seconds(dist) / steps_done,
			 d_sp ? "collectives" : "all-reduces", cli_bytes(per, a, sizeof a),
			 d_sp ? "sequence parallel: ring all-gathers and reduce-scatters of [B,T,C], 4 a layer forward and 6 backward, the embeddings' and the head's; all-reduces of the LayerNorm gradients and the loss's"
			      : "ring all-reduces of 4 [B,T,C] a layer, the embeddings', the head's and the loss's",
			 cli_bytes((double)tp_bound, b, sizeof b), tp_bound ? per / tp_bound : 0.0);
	}
	if (status == 0 && d_rank == 0 && loom_dist_replicas(dist) > 1 && !d_quiet && steps_done) {
		char a[32], b[32];
		uint64_t bound = loom_dist_bytes_bound(dist, d_micro);
		uint64_t per = loom_dist_bytes_total(dist) / steps_done;
		/* the embeddings gathered g times a micro-batch: (3P + (g-2)E) */
		int g = model.emb_gathers > 0 ? model.emb_gathers : 1;
		char emb[32], f[32];
		snprintf(emb, sizeof emb, g == 1 ? "once" : g == 2 ? "twice" : "%d times", g);
		if (g == 2)
			snprintf(f, sizeof f, "3P");
		else if (g == 1 || g == 3)
			snprintf(f, sizeof f, "(3P %c E)", g == 1 ? '-' : '+');
		else
			snprintf(f, sizeof f, "(3P + %dE)", g - 2);
		if (loom_dist_shards_weights(dist))
			cli_warn("data parallel (sharding=weights): %.3f s per step blocked in communication (%.3f s of it waiting for weights); %s sent per step per rank (ring lower bound of %d micro-batch%s: weights gathered for forward and backward, the embeddings %s, gradients reduce-scattered, %s(N-1)/N x 4 bytes each = %s; %.4fx)",
				 loom_dist_wait_seconds(dist) / steps_done,
				 loom_dist_gather_wait_seconds(dist) / steps_done,
				 cli_bytes((double)per, a, sizeof a), d_micro, d_micro == 1 ? "" : "es",
				 emb, f,
				 cli_bytes((double)bound, b, sizeof b), bound ? (double)per / bound : 0.0);
		else
			cli_warn("data parallel: %.3f s per step blocked in communication; %s sent per step per rank (ring all-reduce lower bound 2(N-1)/N x parameter bytes = %s; %.4fx)",
				 loom_dist_wait_seconds(dist) / steps_done,
				 cli_bytes((double)per, a, sizeof a), cli_bytes((double)bound, b, sizeof b),
				 bound ? (double)per / bound : 0.0);
	}
	if (status == 0 || agreed_exit || d_world == 1) {
		loom_dist_free(dist);
		dist = NULL;
		return;
	}
	loom_dist_abort(dist, status);
}

/* Note the first stop signal in *flag: its sender (pid, and its name read
 * now, while it likely still runs) and this rank.  Async-signal-safe (open,
 * read and close are): the handler calls it. */
static void note_stop(volatile sig_atomic_t *flag, int sig, const siginfo_t *si)
{
	if (si->si_code <= 0 && si->si_pid > 0) { /* sent by a process (kill, sigqueue) */
		char path[32] = "/proc/", digits[12];
		int n = 0, k = 6;
		for (pid_t p = si->si_pid; p && n < 11; p /= 10)
			digits[n++] = (char)('0' + p % 10);
		while (n)
			path[k++] = digits[--n];
		memcpy(path + k, "/comm", 6);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t got = fd < 0 ? 0 : read(fd, stop_comm, sizeof stop_comm - 1);
		if (fd >= 0)
			close(fd);
		stop_comm[got > 0 ? got - (stop_comm[got - 1] == '\n') : 0] = 0;
		stop_pid = si->si_pid;
	}
	stop_rank = d_rank;
	*flag = sig;
}

/* One process: a stop signal finishes the step, saves and exits 0; a
 * second gives up at once.  (Under mpirun they stay blocked and
 * train_dist_sync takes them.) */
static void on_stop(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (*stop_flag) {
		loom_outfile_unlink_all();
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	note_stop(stop_flag, sig, si);
}

void train_dist_catch_stops(volatile sig_atomic_t *stop)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_stop;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	stop_flag = stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL); /* mpirun forwards SIGUSR1 to every rank */
}

const char *train_dist_stop_from(char *buf, size_t n)
{
	char by[48] = "", to[24] = "";
	if (stop_pid)
		snprintf(by, sizeof by, "sent by pid %d%s%s", (int)stop_pid, stop_comm[0] ? ", " : "",
			 stop_comm);
	if (d_world > 1 && stop_rank >= 0)
		snprintf(to, sizeof to, "%sto rank %d", by[0] ? ", " : "", stop_rank);
	snprintf(buf, n, by[0] || to[0] ? " (%s%s)" : "", by, to);
	return buf;
}

void train_dist_init(int *argc, char ***argv)
{
	struct loom_err err = { 0 };
	/* Stop signals are taken only at train_dist_sync(), on every rank
	 * alike.  Block them before MPI_Init: the threads MPI (and later
	 * OpenMP) start inherit the mask, so no thread takes one in between. */
	sigemptyset(&stop_set);
	sigaddset(&stop_set, SIGINT);
	sigaddset(&stop_set, SIGTERM);
	sigaddset(&stop_set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &stop_set, NULL);
	dist = loom_dist_new(argc, argv, &err);
	if (!dist)
		cli_die("%s", err.msg);
	d_rank = loom_dist_rank(dist);
	d_world = loom_dist_world(dist);
	on_exit(on_exit_dist, NULL);
	if (d_world == 1) {
		sigprocmask(SIG_UNBLOCK, &stop_set, NULL);
		return;
	}
	static char prog[64];
	snprintf(prog, sizeof prog, "%s: rank %d", cli_prog, d_rank);
	cli_prog = prog;
}

void train_dist_config(struct loom_config *c, char **sets, int nsets)
{
	int T = c->tensor_parallel;
	if (loom_dist_grid(dist, T)) /* the same on every rank: rank 0 says it */
		train_dist_agreed_exit(EXIT_USAGE, "%s", loom_dist_error(dist));
	for (int i = 0; i < nsets; i++)
		if (strstr(sets[i], "data_parallel") && c->data_parallel != d_world / T)
			cli_exit(EXIT_USAGE,
				 "data_parallel: %d, but loom-train runs as %d rank%s (set by mpirun -np)",
				 c->data_parallel, d_world, d_world == 1 ? "" : "s");
	c->data_parallel = d_world / T;
	d_sp = c->sequence_parallel;
	loom_dist_set_timeout(dist, c->dist_timeout);
}

void train_dist_answer(void)
{
	loom_dist_answer(dist); /* one rank: nothing to answer */
}

void train_dist_attach(const struct loom_dist_model *m, int micro, int quiet, int verbose)
{
	d_quiet = quiet;
	model = *m;
	d_micro = micro;
	if (loom_dist_attach(dist, m))
		cli_die("%s", loom_dist_error(dist));
	if (quiet || d_rank != 0 || (d_world == 1 && !verbose))
		return;
	int D = loom_dist_replicas(dist), T = loom_dist_tp_size(dist);
	if (T > 1)
		cli_warn("tensor parallel: %d replica%s x %d ranks (%s), each layer split across a replica's ranks; %llu parameters per rank",
			 D, D == 1 ? "" : "s", T, loom_dist_backend(), (unsigned long long)m->n_params);
	if (T > 1 && D == 1)
		return;
	char a[32], b[32], c[32];
	if (loom_dist_shards_weights(dist)) {
		cli_warn("data parallel: %d ranks (%s), sharding=weights: weights, gradients and AdamW state per rank %s (1/%d of %s), gathered a layer at a time",
			 D, loom_dist_backend(),
			 cli_bytes((double)loom_dist_moment_bytes(dist) * 2, a, sizeof a), D,
			 cli_bytes((double)m->n_params * 16, b, sizeof b));
		return;
	}
	cli_warn("data parallel: %d rank%s (%s); AdamW state per rank %s (1/%d of %s), gradient shard %s, %d buckets",
		 D, D == 1 ? "" : "s", loom_dist_backend(),
		 cli_bytes((double)loom_dist_moment_bytes(dist), a, sizeof a), D,
		 cli_bytes((double)m->n_params * 8, b, sizeof b),
		 cli_bytes((double)loom_dist_gradshard_bytes(dist), c, sizeof c),
		 loom_dist_buckets(dist));
}

void train_dist_check_frame(unsigned rank, unsigned world)
{
	int R = loom_dist_replica(dist), D = loom_dist_replicas(dist), T = loom_dist_tp_size(dist);
	if (d_world == 1 || (rank == (unsigned)R && world == (unsigned)D))
		return;
	if (T == 1)
		train_dist_fail(synced_step == UINT64_MAX ? 1 : synced_step + 1,
				"stdin: frames from loom-feed --rank %u --world %u, but this is rank %d of %d",
				rank, world, d_rank, d_world);
	train_dist_fail(synced_step == UINT64_MAX ? 1 : synced_step + 1,
			"stdin: frames from loom-feed --rank %u --world %u, but this rank reads replica "
			"%d of %d (tensor_parallel=%d: loom-feed --rank %d --world %d)",
			rank, world, R, D, T, R, D);
}

void train_dist_tp_bound(const struct loom_trainer *t)
{
	int micro = t->cfg.grad_accum;
	tp_bound = t->g ? loom_gpt_tp_bytes(t->g, micro) : loom_bert_tp_bytes(t->b, micro);
}

int train_dist_replica(void)
{
	return dist ? loom_dist_replica(dist) : 0;
}

int train_dist_agree(int v)
{
	if (d_world == 1)
		return v;
	int32_t mine = v, *all = calloc((size_t)d_world, sizeof *all);
	if (!all)
		cli_die("out of memory");
	or_abort(loom_dist_allgather_i32(dist, &mine, 1, all));
	v = all[0];
	free(all);
	return v;
}

int train_dist_tp_rank(void)
{
	return dist ? loom_dist_tp_rank(dist) : 0;
}

void train_dist_load_runs(struct loom_ckpt *ck, const struct loom_ckpt_tensor *t, size_t n,
			  const struct loom_ckpt_run *r, size_t nr, int optimizer)
{
	or_abort(loom_dist_load_runs(dist, ck, t, n, r, nr, optimizer));
}

void train_dist_save_runs(const struct loom_ckpt_save *s, const struct loom_ckpt_run *r,
			  size_t n, char *path, size_t len)
{
	or_abort(loom_dist_save_runs(dist, s, r, n, path, len));
}

static void list_ranks(char *buf, size_t len, const int32_t *all, int stride, int want)
{
	size_t o = 0;
	int n = 0;
	buf[0] = 0;
	for (int r = 0; r < d_world && o + 16 < len; r++)
		if (all[stride * r] == want)
			o += (size_t)snprintf(buf + o, len - o, "%s%d", n++ ? ", " : "", r);
}

int train_dist_sync(uint64_t step, int status, volatile sig_atomic_t *stop)
{
	if (d_world == 1)
		return status == 1;
	if (step == synced_step && point == synced_point)
		return synced_result;
	/* take the pending stop signals, here and only here.  One request may
	 * come twice (mpirun signals a rank's process group, and
	 * train-mpi.sh passes it on to loom-train too): the first counts. */
	siginfo_t si;
	int got;
	while ((got = sigtimedwait(&stop_set, &si, &(struct timespec){ 0, 0 })) > 0)
		if (!*stop)
			note_stop(stop, got, &si);
	/* status, stop signal, step, and the stop's sender: pid, name */
	enum { K = 3 + 1 + sizeof stop_comm / 4 };
	int32_t mine[K] = { status, *stop, (int32_t)(step & 0x7fffffff), stop_pid };
	memcpy(mine + 4, stop_comm, sizeof stop_comm);
	int32_t *all = calloc((size_t)d_world * K, sizeof *all);
	if (!all)
		cli_die("out of memory");
	or_abort(loom_dist_allgather_i32(dist, mine, K, all));
	int nend = 0, nfail = 0, sig = 0, other = -1, from = -1;
	for (int r = 0; r < d_world; r++) {
		nend += all[K * r] == 1;
		nfail += all[K * r] == 2;
		if (all[K * r + 1] && !sig) {
			sig = all[K * r + 1];
			from = r;
		}
		if (all[K * r + 2] != all[2] && other < 0)
			other = r;
	}
	if (other >= 0) { /* e.g. ranks resumed from different checkpoints */
		agreed_exit = 1;
		cli_prog = "loom-train";
		if (d_rank == 0)
			cli_warn("ranks disagree on the step: rank 0 is at step %d, rank %d at step %d (resumed from different checkpoints?)",
				 all[2], other, all[K * other + 2]);
		free(all);
		exit(1);
	}
	if (sig) { /* every rank names the first rank's (rank 0 reports it) */
		if (!*stop)
			*stop = sig;
		stop_rank = from;
		stop_pid = all[K * from + 3];
		memcpy(stop_comm, all + K * from + 4, sizeof stop_comm);
		stop_comm[sizeof stop_comm - 1] = 0;
	}
	synced_step = step;
	synced_point = point;
	synced_result = nend == d_world;
	if (nfail || (nend && nend < d_world)) {
		agreed_exit = 1;
		if (d_rank == 0) {
			char fl[256], en[256];
			list_ranks(fl, sizeof fl, all, K, 2);
			list_ranks(en, sizeof en, all, K, 1);
			cli_prog = "loom-train";
			if (nfail)
				cli_warn("stopping all %d ranks at step %llu: rank%s %s failed (message above)%s%s%s",
					 d_world, (unsigned long long)step, nfail > 1 ? "s" : "", fl,
					 nend ? "; input ended early on rank " : "", en,
					 nend ? " (its feeder closed the pipe)" : "");
			else
				cli_warn("stopping all %d ranks at step %llu: the input of rank%s %s ended early (its loom-feed closed the pipe) while the others still had data; the last checkpoint is unchanged",
					 d_world, (unsigned long long)step, nend > 1 ? "s" : "", en);
		}
		free(all);
		exit(1);
	}
	free(all);
	if (!synced_result && status == 0)
		loom_dist_arm(dist);
	return synced_result;
}

_Noreturn void train_dist_fail(uint64_t step, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cli_warn("%s", msg);
	if (d_world == 1)
		exit(1);
	volatile sig_atomic_t dummy = 0;
	train_dist_sync(step, 2, &dummy);
	exit(1); /* not reached: a failure always stops every rank */
}

static _Noreturn void agreed_exit_v(int code, const char *fmt, va_list ap)
{
	char msg[1024];
	agreed_exit = 1;
	if (d_rank != 0)
		exit(code);
	vsnprintf(msg, sizeof msg, fmt, ap);
	cli_prog = "loom-train";
	cli_exit(code, "%s", msg);
}

_Noreturn void train_dist_agreed_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	agreed_exit_v(1, fmt, ap);
}

_Noreturn void train_dist_agreed_exit(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	agreed_exit_v(code, fmt, ap);
}

void train_dist_step(float lr, int64_t t, float *norm, double *lsum)
{
	or_abort(loom_dist_step(dist, lr, t, norm, lsum));
	steps_done++;
}

int train_dist_micro_begin(int micro, int last)
{
	point = loom_dist_shards_weights(dist) ? micro : 0;
	return last || loom_dist_shards_weights(dist);
}

void train_dist_micro_end(void)
{
	or_abort(loom_dist_micro_end(dist));
}

int train_dist_shards_weights(void)
{
	return loom_dist_shards_weights(dist);
}

void train_dist_save(const struct loom_ckpt_save *s, char *path, size_t n)
{
	or_abort(loom_dist_save(dist, s, path, n));
}

void train_dist_load(struct loom_ckpt *ck, const struct loom_ckpt_tensor *t, size_t n,
		     int optimizer)
{
	or_abort(loom_dist_load(dist, ck, t, n, optimizer));
}

int train_dist_save_begin(void)
{
	float *m, *v;
	if (d_world == 1)
		return 1;
	or_abort(loom_dist_gather_moments(dist, &m, &v));
	if (loom_dist_replica(dist) != 0) /* tensor parallelism: replica 0's ranks */
		return 0;
	*model.m = m;
	*model.v = v;
	return 1;
}

void train_dist_save_end(void)
{
	if (loom_dist_replicas(dist) == 1) /* the model kept its own moments */
		return;
	*model.m = *model.v = NULL;
	loom_dist_gather_done(dist);
}

/* ---- the trainer's hooks (lib/train/loom_trainer.h) ----------------------- */

static void hk_attach(void *ctx)
{
	const struct loom_trainer *t = ctx;
	struct loom_dist_model dm;
	if (t->g)
		loom_gpt_dist_model(t->g, &dm);
	else
		loom_bert_dist_model(t->b, &dm);
	train_dist_attach(&dm, t->cfg.grad_accum, t->o.quiet, t->o.verbose);
}

static int hk_shards_weights(void *ctx)
{
	(void)ctx;
	return train_dist_shards_weights();
}

static int hk_save_begin(void *ctx)
{
	(void)ctx;
	return train_dist_save_begin();
}

static void hk_save_end(void *ctx)
{
	(void)ctx;
	train_dist_save_end();
}

static void hk_save_part(void *ctx, const struct loom_ckpt_save *s, char *path, size_t n)
{
	(void)ctx;
	train_dist_save(s, path, n);
}

static void hk_load_part(void *ctx, struct loom_ckpt *ck, const struct loom_ckpt_tensor *tp,
			 size_t n, int optimizer)
{
	(void)ctx;
	train_dist_load(ck, tp, n, optimizer);
}

static void hk_step(void *ctx, float lr, int64_t t, float *norm, double *lsum)
{
	(void)ctx;
	train_dist_step(lr, t, norm, lsum);
}

static void hk_say(void *ctx, const char *line)
{
	(void)ctx;
	cli_warn("%s", line);
}

static void hk_load_runs(void *ctx, struct loom_ckpt *ck, const struct loom_ckpt_tensor *t,
			 size_t n, const struct loom_ckpt_run *r, size_t nr, int optimizer)
{
	(void)ctx;
	train_dist_load_runs(ck, t, n, r, nr, optimizer);
}

static int hk_replica(void *ctx)
{
	(void)ctx;
	return train_dist_replica();
}

static int hk_tp_rank(void *ctx)
{
	(void)ctx;
	return train_dist_tp_rank();
}

static void hk_save_runs(void *ctx, const struct loom_ckpt_save *s, const struct loom_ckpt_run *r,
			 size_t n, char *path, size_t len)
{
	(void)ctx;
	train_dist_save_runs(s, r, n, path, len);
}

void train_dist_hooks(struct loom_trainer_hooks *hk, struct loom_trainer *t)
{
	*hk = (struct loom_trainer_hooks){
		.ctx = t, .rank = d_rank, .attach = hk_attach, .shards_weights = hk_shards_weights,
		.save_begin = hk_save_begin, .save_end = hk_save_end, .save_part = hk_save_part,
		.load_part = hk_load_part, .step = hk_step, .say = hk_say, .replica = hk_replica,
		.tp_rank = hk_tp_rank, .save_runs = hk_save_runs,
		.load_runs = hk_load_runs,
	};
}

/* Wait until fd has data (or EOF), answering the other ranks' roll call
 * meanwhile (under mpirun); 0 if a stop signal came first (*stop set), -1 if nothing
 * came for `limit` seconds (> 0). */
int train_dist_wait_input(int fd, double limit, volatile sig_atomic_t *stop)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	double t0 = loom_now();
	while (!*stop) {
		int n = poll(&p, 1, 250);
		if (n > 0)
			return 1;
		if (n < 0 && errno != EINTR)
			return 1; /* let the read report it */
		train_dist_answer();
		if (limit > 0 && loom_now() - t0 >= limit)
			return -1;
	}
	return 0;
}

/* The input ended inside the run's first step (on every rank: they
 * agreed): an error, before any checkpoint is written. */
_Noreturn void train_dist_trained_nothing(int grad_accum, int micro, int resumed)
{
	train_dist_agreed_die("stdin: input ended after %d micro-batch%s, but a step needs %d "
			      "(grad_accum): no step trained, nothing saved (%s)", micro,
			      micro == 1 ? "" : "es", grad_accum,
			      resumed ? "feed more data: the resumed run's steps keep their size"
				      : "feed more data, or --set grad_accum=N for smaller steps");
}
