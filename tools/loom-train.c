/* loom-train - batches on stdin -> GPT or BERT training -> checkpoints.
 *
 *   loom-feed --batch 8 --seq 64 shards/s-0.tfrecord | loom-train --config small --save ckpt
 *   loom-feed --manifest sq.manifest.json | loom-train --config bert-tiny --save ckpt
 *
 * Reads binary batch frames (formats/batch.md, lib/data/loom_batch.h), trains
 * the GPT of lib/train/loom_gpt.h (model=gpt) or the BERT of
 * lib/train/loom_bert.h (model=bert: task=squad on squad-features frames,
 * task=mlm on token frames) with AdamW, logs, evaluates and checkpoints
 * (lib/train/loom_ckpt.h).  The loop reaches a model only through struct
 * model_ops.  SIGINT/SIGTERM finish the current step, save and
 * exit 0; --resume continues bit-exactly.
 */
/* before cblas.h: its complex.h defines I, a field of struct loom_bert */
#include "loom_bert.h"

#include <cblas.h>
#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fcntl.h>

#include "cli.h"
#include "loom_batch.h"
#include "loom_blas.h"
#include "loom_ckpt.h"
#include "loom_config.h"
#include "loom_dist.h"
#include "loom_feed.h"
#include "loom_file.h"
#include "loom_gpt.h"
#include "loom_kernels.h"
#include "loom_bpe.h"
#include "loom_vocab.h"
#include "loom_wordpiece.h"
#include "loom_bert_squad.h"
#include "loom_squad.h"
#include "loom_mm.h"
#include "loom_profile.h"
#include "loom_rigl.h"
#include "loom_sample.h"
#include "loom_utf8.h"
#include "loom_tb.h"
#include "loom_manifest.h"
#include "train_dist.h"

static volatile sig_atomic_t stop_sig;

/* Freed at exit, after the data-parallel layer let go of it. */
static struct loom_gpt *the_model;
static struct loom_bert *the_bert;

static void free_model(void)
{
	loom_gpt_free(the_model);
	the_model = NULL;
	loom_bert_free(the_bert);
	the_bert = NULL;
}

static void on_stop(int sig)
{
	if (stop_sig) { /* second signal: give up now */
		loom_outfile_unlink_all();
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	stop_sig = sig;
}

/* Wait until fd has data (or EOF), answering the other ranks' roll call
 * meanwhile (under mpirun); 0 if a stop signal came first, -1 if nothing
 * came for `limit` seconds (> 0). */
static int wait_input(int fd, double limit)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	double t0 = loom_now();
	while (!stop_sig) {
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

/* Re-execute once with the environment OpenBLAS and the OpenMP runtime
 * read when they load, before main (loom_blas_reexec): OPENBLAS_CORETYPE
 * from the CPU's flags when Debian's OpenBLAS picked its SSE3 "Prescott"
 * kernels (about 5x slower), OMP_WAIT_POLICY=passive unless set. */
static void fix_env(char **argv, int verbose)
{
	const char *core = loom_blas_better_core(), *was = getenv(LOOM_BLAS_DETECTED_ENV);
	if (core && verbose)
		cli_warn("OpenBLAS chose slow core '%s' for this CPU; re-executing with OPENBLAS_CORETYPE=%s",
			 loom_blas_core(), core);
	int rc = loom_blas_reexec(argv, core);
	if (rc < 0 && core)
		cli_warn("cannot re-execute with OPENBLAS_CORETYPE=%s (%s); continuing on OpenBLAS core '%s'",
			 core, strerror(-rc), loom_blas_core());
	else if (verbose && was)
		cli_warn("OpenBLAS detected core '%s'; re-executed with OPENBLAS_CORETYPE=%s", was,
			 getenv("OPENBLAS_CORETYPE"));
}

/* the threads, which follow the load unless set (loom_blas.h) */
static struct loom_threads pool;

static double bench_sgemm(int verbose)
{
	static const int sizes[] = { 1024, 2048 };
	double best = 0;
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		int n = sizes[s];
		float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n);
		float *c = malloc(sizeof(float) * n * n);
		if (!a || !b || !c)
			cli_die("out of memory");
		for (long i = 0; i < (long)n * n; i++) {
			a[i] = (float)(i % 17) * 0.01f;
			b[i] = (float)(i % 13) * 0.01f;
		}
		for (int r = 0; r < 4; r++) {
			double t0 = loom_now();
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b,
				    n, 0.0f, c, n);
			double dt = loom_now() - t0, gf = 2.0 * n * n * (double)n / dt / 1e9;
			if (r && gf > best) /* first run warms up */
				best = gf;
			if (verbose)
				cli_warn("sgemm %d: %.1f GFLOP/s", n, gf);
		}
		free(a);
		free(b);
		free(c);
	}
	return best;
}

/* "2h05m", "3m12s", "4.2s" */
static const char *duration(double s, char *buf, size_t n)
{
	if (!(s < 1e9))
		snprintf(buf, n, "?");
	else if (s < 60)
		snprintf(buf, n, "%.1fs", s);
	else if (s < 3600)
		snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
	else if (s < 86400 * 3)
		snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
	else
		snprintf(buf, n, "%.1fd", s / 86400);
	return buf;
}

/* The machine's matmul rate in the run's precision: best of a few
 * products of the model's MLP shape (B*T x C x 4C, capped at 2048 x 1024
 * x 4096 so the probe stays under a second on big models), in GFLOP/s. */
static double probe_matmul(const struct loom_config *c, int *M, int *K, int *N)
{
	struct loom_err err = { 0 };
	struct loom_mm *mm = loom_mm_new(c->precision, &err);
	if (!mm)
		cli_die("%s", err.msg);
	long rows = (long)c->micro_batch * c->seq_len;
	*M = rows < 2048 ? (int)rows : 2048;
	*K = c->n_embd < 1024 ? c->n_embd : 1024;
	*N = 4 * *K;
	size_t na = (size_t)*M * *K, nb = (size_t)*K * *N, nc = (size_t)*M * *N;
	float *a = malloc(sizeof(float) * na), *b = malloc(sizeof(float) * nb);
	float *o = malloc(sizeof(float) * nc);
	if (!a || !b || !o)
		cli_die("out of memory for the matmul probe");
	for (size_t i = 0; i < na; i++)
		a[i] = (float)(i % 17) * 0.01f;
	for (size_t i = 0; i < nb; i++)
		b[i] = (float)(i % 13) * 0.01f;
	if (loom_mm_weights(mm, b, nb))
		cli_die("out of memory for the matmul probe");
	double best = 0, flop = 2.0 * *M * (double)*K * *N, t_all = loom_now();
	for (int r = 0; r < 12 && (r < 4 || loom_now() - t_all < 0.5); r++) {
		double t0 = loom_now();
		loom_mm_gemm(mm, 0, 0, *M, *N, *K, a, b, 0, o);
		double dt = loom_now() - t0;
		if (r && flop / dt / 1e9 > best) /* the first run warms up */
			best = flop / dt / 1e9;
	}
	if (loom_mm_check(mm, &err))
		cli_die("%s", err.msg);
	loom_mm_free(mm);
	free(a);
	free(b);
	free(o);
	return best;
}

/* Model FLOP/s over the matmul probe rate of the same precision, the
 * dry-run estimate's assumption: measured by make bench
 * (tests/bench/train-bf16.sh) at gpt2 B=8,T=256 on 2 threads of an AMD
 * EPYC (Zen 4) shared with other work: fp32 0.52, bf16 0.31 (best step
 * over best probe).  A quiet machine does better, so the estimate leans
 * long. */
#define MFU_FP32 0.50
#define MFU_BF16 0.30

struct trainer;
struct run;

/* A frame as read: header, ids, the reader (its features) and where it
 * came from, for messages. */
struct frame {
	const struct loom_batch_hdr *h;
	const uint32_t *tok;
	struct loom_batch_reader *r;
	const char *src;        /* "stdin", --eval-data's path */
	uint64_t n;             /* frame number in src */
};

/* An evaluation's sums: loss x count, count (tokens, rows or masked
 * tokens) and the count predicted right. */
struct eval_sums {
	double nll;
	int64_t n, correct;
};

/* What the loop asks of a model (gpt_ops: lib/train/loom_gpt.h, bert_ops:
 * lib/train/loom_bert.h).  Each exits with one line on an error. */
struct model_ops {
	/* new model, weights from --resume's ck, --init-from or the seed,
	 * attached to the data-parallel layer (train_dist_step steps it) */
	void (*build)(struct trainer *t, struct loom_ckpt *ck);
	size_t (*n_params)(const struct trainer *t);
	/* memory plan (bytes) at the config's micro_batch x seq_len */
	void (*plan)(const struct loom_config *c, int recompute, struct loom_gpt_mem *m);
	void (*begin_step)(struct trainer *t);      /* before step t->step + 1 */
	/* forward + backward of scale x the frame's loss (*loss) */
	void (*micro)(struct run *u, const struct frame *f, uint64_t key, float scale, float *loss);
	/* forward of an evaluation frame, added to *s */
	void (*eval)(struct trainer *t, const struct frame *f, struct eval_sums *s);
	void (*save)(struct trainer *t);
};

/* A BERT batch made of a frame: task=squad the feature frame's columns,
 * task=mlm [CLS] record [SEP] rows and their masks. */
struct rows {
	size_t cap;             /* int32s allocated at ids */
	int32_t *ids, *seg, *mask, *start, *end, *labels;
};

static const struct model_ops gpt_ops, bert_ops;

static const char *sharding_name(const struct loom_config *c)
{
	return c->sharding == LOOM_SHARD_WEIGHTS ? "weights" : "optimizer";
}

/* The plan per rank of c on n ranks (c's sharding), with or without
 * recompute. */
static void plan_on(const struct loom_config *c, const struct model_ops *ops, int n,
		    int recompute, struct loom_gpt_mem *m)
{
	struct loom_config x = *c;
	x.data_parallel = n;
	ops->plan(&x, recompute, m);
}

/* The smallest rank count (up to 65536) on which c fits `mem` bytes per
 * rank, or 0; *m its plan (none fits: the plan on 65536 ranks). */
#define MAX_RANKS 65536
static int ranks_needed(const struct loom_config *c, const struct model_ops *ops, int recompute,
			uint64_t mem, struct loom_gpt_mem *m)
{
	for (int n = 1; n <= MAX_RANKS; n++) {
		plan_on(c, ops, n, recompute, m);
		if (m->total <= mem)
			return n;
	}
	return 0;
}

/* Of the GPT presets (share/presets/\*.json of model gpt), each as it is
 * but with c's sharding, precision and rank count: the one of the most
 * parameters that fits `mem` bytes per rank (*fit, its plan in *m) and
 * the one of the least memory (*small, its total in *small_total); ""
 * when there is none. */
static void best_preset(const struct loom_config *c, uint64_t mem, char *fit, char *small,
			size_t len, struct loom_gpt_mem *m, uint64_t *small_total)
{
	char dir[4096];
	uint64_t best = 0;
	*fit = *small = '\0';
	*small_total = UINT64_MAX;
	if (loom_share_path("presets", dir, sizeof dir))
		cli_die("no presets directory (share/presets): set LOOM_SHARE");
	DIR *d = opendir(dir);
	if (!d)
		cli_die("%s: %s", dir, strerror(errno));
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n <= 5 || n - 5 >= len || strcmp(e->d_name + n - 5, ".json"))
			continue;
		char name[256];
		snprintf(name, sizeof name, "%.*s", (int)(n - 5), e->d_name);
		struct loom_config p;
		loom_config_defaults(&p);
		if (loom_config_apply_preset(&p, name))
			cli_die("%s", loom_config_error(&p));
		if (p.model != LOOM_MODEL_GPT)
			continue;
		p.sharding = c->sharding;
		p.precision = c->precision;
		p.data_parallel = c->data_parallel;
		struct loom_gpt_mem pm;
		gpt_ops.plan(&p, p.recompute, &pm);
		uint64_t np = loom_config_n_params(&p);
		/* ties (none among the presets today) go to the first name */
		if (pm.total <= mem && (np > best || (np == best && strcmp(name, fit) < 0))) {
			best = np;
			*m = pm;
			snprintf(fit, len, "%s", name);
		}
		if (pm.total < *small_total || (pm.total == *small_total && strcmp(name, small) < 0)) {
			*small_total = pm.total;
			snprintf(small, len, "%s", name);
		}
	}
	closedir(d);
}

/* --memory-per-rank: the ranks c needs of `mem` bytes each (and with
 * recompute when c does not recompute), and the largest GPT preset that
 * fits c's rank count. */
static void print_fit(const struct loom_config *c, const struct model_ops *ops, uint64_t mem,
		      const char *mem_name)
{
	struct loom_gpt_mem m, mr;
	char b0[32], b1[32], b2[32], fit[256], small[256], rec[96] = "";
	const char *sh = sharding_name(c);
	int n = ranks_needed(c, ops, c->recompute, mem, &m), nr;
	if (!c->recompute && (nr = ranks_needed(c, ops, 1, mem, &mr)) && (!n || nr < n))
		snprintf(rec, sizeof rec, "; with recompute: %d rank%s, %s per rank", nr,
			 nr == 1 ? "" : "s", cli_bytes((double)mr.total, b1, sizeof b1));
	if (n)
		printf("%s needs %d rank%s of %s (sharding=%s%s): %s per rank%s\n", c->preset, n,
		       n == 1 ? "" : "s", mem_name, sh, c->recompute ? ", recompute" : "",
		       cli_bytes((double)m.total, b0, sizeof b0), rec);
	else if (c->sharding == LOOM_SHARD_WEIGHTS) /* what does not shrink with the ranks */
		printf("%s does not fit ranks of %s (sharding=weights%s): on %d ranks a rank still "
		       "needs %s, the gathered layer buffers (%s) and activations (%s)%s whole%s\n",
		       c->preset, mem_name, c->recompute ? ", recompute" : "", MAX_RANKS,
		       cli_bytes((double)m.total, b0, sizeof b0),
		       cli_bytes((double)m.gathered, b1, sizeof b1),
		       cli_bytes((double)m.acts, b2, sizeof b2), m.bf16 ? " and bf16 copies" : "",
		       rec);
	else
		printf("%s does not fit ranks of %s (sharding=optimizer%s): on %d ranks a rank still "
		       "needs %s, the weights (%s), gradients and activations (%s) whole%s%s\n",
		       c->preset, mem_name, c->recompute ? ", recompute" : "", MAX_RANKS,
		       cli_bytes((double)m.total, b0, sizeof b0),
		       cli_bytes((double)m.params, b1, sizeof b1),
		       cli_bytes((double)m.acts, b2, sizeof b2),
		       c->model == LOOM_MODEL_GPT ? "; sharding=weights shards the weights and "
						    "gradients" : "", rec);
	uint64_t small_total;
	int r = c->data_parallel;
	best_preset(c, mem, fit, small, sizeof fit, &m, &small_total);
	if (*fit)
		printf("largest GPT preset that fits %d rank%s of %s: %s (%s per rank; sharding=%s)\n",
		       r, r == 1 ? "" : "s", mem_name, fit, cli_bytes((double)m.total, b0, sizeof b0), sh);
	else if (*small)
		printf("no GPT preset fits %d rank%s of %s: the smallest, %s, needs %s per rank "
		       "(sharding=%s)\n", r, r == 1 ? "" : "s", mem_name, small,
		       cli_bytes((double)small_total, b0, sizeof b0), sh);
}

/* " (1/R of WHOLE)" after a row that R ranks share, else "" */
static const char *share(int R, uint64_t x, uint64_t whole, char *buf, size_t len)
{
	char w[32];
	if (R < 2 || x >= whole)
		return "";
	snprintf(buf, len, " (1/%d of %s)", R, cli_bytes((double)whole, w, sizeof w));
	return buf;
}

static void print_dry_run(const struct loom_config *c, const struct model_ops *ops, uint64_t mem,
			  const char *mem_name)
{
	struct loom_gpt_mem m0, m1;
	char b0[32], b1[48], b3[32], b4[32], kind[64] = "", per[96] = "";
	uint64_t np = loom_config_n_params(c);
	int R = c->data_parallel;
	ops->plan(c, 0, &m0);
	ops->plan(c, 1, &m1);
	if (c->model != LOOM_MODEL_GPT)
		snprintf(kind, sizeof kind, "%s task=%s, ", loom_model_name(c->model),
			 loom_task_name(c->task));
	if (R > 1)
		snprintf(per, sizeof per, " per rank of %d (sharding=%s)", R, sharding_name(c));
	printf("config: %s (%sn_layer %d, n_embd %d, n_head %d, vocab %d, seq_len %d)\n", c->preset,
	       kind, c->n_layer, c->n_embd, c->n_head, c->vocab_size, c->seq_len);
	printf("parameters: %llu (%.3fB)\n", (unsigned long long)np, np / 1e9);
	printf("memory plan%s at micro_batch %d x seq_len %d (%s):\n", per, c->micro_batch,
	       c->seq_len, c->precision == LOOM_PREC_BF16 ? "bf16 matmuls, fp32 state" : "fp32");
	printf("  parameters      %s%s\n", cli_bytes((double)m0.params, b0, sizeof b0),
	       share(R, m0.params, np * 4, b1, sizeof b1));
	printf("  gradients       %s%s\n", cli_bytes((double)m0.grads, b0, sizeof b0),
	       share(R, m0.grads, np * 4, b1, sizeof b1));
	printf("  AdamW m + v     %s%s\n", cli_bytes((double)m0.adam, b0, sizeof b0),
	       share(R, m0.adam, np * 8, b1, sizeof b1));
	if (m0.gshard)
		printf("  gradient shard  %s (the reduce-scattered 1/%d of the gradients)\n",
		       cli_bytes((double)m0.gshard, b0, sizeof b0), R);
	if (m0.gathered)
		printf("  gathered layers %s (full copies: %s)\n",
		       cli_bytes((double)m0.gathered, b0, sizeof b0),
		       m0.gathered_head ? "at the LM head, the embeddings' weights and gradients"
					: "the embeddings, 2 layers' weights and 2 layers' gradients");
	printf("  activations     %s (%s with recompute)\n", cli_bytes((double)m0.acts, b3, sizeof b3),
	       cli_bytes((double)m1.acts, b4, sizeof b4));
	if (m0.bf16)
		printf("  bf16 copies     %s (%s, matmul operands)\n",
		       cli_bytes((double)m0.bf16, b3, sizeof b3),
		       m0.gathered ? "gathered weights" : "weights");
	printf("  total           %s (%s with recompute)\n", cli_bytes((double)m0.total, b0, sizeof b0),
	       cli_bytes((double)m1.total, b1, sizeof b1));
	if (mem)
		print_fit(c, ops, mem, mem_name);
	if (c->sparsity > 0) {
		char sl[64];
		uint64_t w = loom_config_sparse_weights(c);
		printf("sparsity: %g of the blocks (%dx%d) of %s: %llu of their %llu weights live "
		       "(the FLOPs below count the live ones, and the dense weight gradient of "
		       "the mask-update steps)\n", c->sparsity, c->block_size,
		       c->block_size, loom_sparse_layers_str(c->sparse_layers, sl, sizeof sl),
		       (unsigned long long)llround((1 - c->sparsity) * (double)w), (unsigned long long)w);
	}
	printf("FLOPs per token: %.4g training (6N + 12 L T C), %.4g forward\n",
	       loom_config_flops_per_token(c), loom_config_fwd_flops_per_token(c));
	printf("tokens per step: %lld (global_batch %d x seq_len %d)\n",
	       (long long)c->global_batch * c->seq_len, c->global_batch, c->seq_len);
	double fps = loom_config_flops_per_token(c) * c->global_batch * (double)c->seq_len;
	printf("FLOPs per step: %.4g\n", fps);
	int M, K, N;
	double rate = probe_matmul(c, &M, &K, &N);
	double mfu = c->precision == LOOM_PREC_BF16 ? MFU_BF16 : MFU_FP32;
	double step = fps / (rate * 1e9 * mfu * R); /* the ranks share a step's FLOPs */
	char d0[32], d1[32], ranks[96] = "";
	if (R > 1)
		snprintf(ranks, sizeof ranks, "%d ranks at this machine's rate, communication not "
			 "counted; ", R);
	printf("matmul probe: %.1f GFLOP/s (%s, %dx%dx%d, %d thread%s)\n", rate,
	       c->precision == LOOM_PREC_BF16 ? "bf16" : "fp32", M, K, N, omp_get_max_threads(),
	       omp_get_max_threads() == 1 ? "" : "s");
	printf("time per step: %s (%sat MFU %.2f, assumed: measured by make bench for gpt2 B=8 T=256)\n",
	       duration(step, d0, sizeof d0), ranks, mfu);
	printf("time of the run: %s (%lld steps)\n", duration(step * (double)c->steps, d1, sizeof d1),
	       (long long)c->steps);
}

struct trainer {
	struct loom_config cfg;
	const struct model_ops *ops;
	struct loom_gpt *g;     /* model=gpt */
	struct loom_bert *b;    /* model=bert */
	struct rows rows;
	const char *save_dir;
	unsigned keep;
	uint64_t step;          /* optimizer steps done */
	uint64_t samples, tokens;
	uint64_t data_seq;      /* next frame seq to consume */
	uint64_t saved;         /* step of the last checkpoint written + 1 */
	uint32_t data_epoch;
	uint64_t data_seed;
	uint32_t data_batch, data_seq_len, data_world;
	struct loom_ckpt_vocab vocab;	/* files[0].name == NULL: none */
	struct loom_tb *tb;		/* --tensorboard, or NULL */
	struct loom_vocab *tok;		/* the vocabulary (--vocab or the checkpoint's), or NULL */
	int verbose, quiet;
};

/* A model's checkpoint tables: tensors named over its parameters, and
 * each tensor's AdamW moments (tensors[i] of params, m and v; free all
 * three). */
struct ckpt_tables {
	struct loom_ckpt_tensor *tp;
	float **mm, **vv;
	size_t n;
};

static void ckpt_tables(struct ckpt_tables *x, const struct loom_tensor *tensors, int n,
			float *m, float *v)
{
	x->n = (size_t)n;
	x->tp = calloc((size_t)n, sizeof *x->tp);
	x->mm = calloc((size_t)n, sizeof *x->mm);
	x->vv = calloc((size_t)n, sizeof *x->vv);
	if (!x->tp || !x->mm || !x->vv)
		cli_die("out of memory");
	for (int i = 0; m && v && i < n; i++) { /* none: the ranks hold them (sharding=weights) */
		x->mm[i] = m + tensors[i].offset;
		x->vv[i] = v + tensors[i].offset;
	}
}

static void ckpt_tables_free(struct ckpt_tables *x)
{
	free(x->tp);
	free(x->mm);
	free(x->vv);
}

static void gpt_tables(struct loom_gpt *g, struct ckpt_tables *x)
{
	ckpt_tables(x, g->tensors, g->n_tensors, g->m, g->v);
	loom_gpt_ckpt_tensors(g, g->params, x->tp);
}

static void bert_tables(struct loom_bert *b, struct ckpt_tables *x)
{
	ckpt_tables(x, b->tensors, b->n_tensors, b->m, b->v);
	loom_bert_ckpt_tensors(b, b->params, x->tp);
}

/* What every checkpoint holds besides the model's own: the tensors and
 * moments of x, the resolved config (*ctxt, to free), where training
 * stands, the tokenizer. */
static struct loom_ckpt_save ckpt_save_of(const struct trainer *t, const struct ckpt_tables *x,
					  char **ctxt)
{
	json_t *cj = loom_config_to_json(&t->cfg);
	*ctxt = cj ? json_dumps(cj, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
	json_decref(cj);
	if (!*ctxt)
		cli_die("out of memory");
	return (struct loom_ckpt_save){
		.dir = t->save_dir,
		.tensors = x->tp,
		.n_tensors = x->n,
		.adam_m = x->mm,
		.adam_v = x->vv,
		.loom_config_json = *ctxt,
		.state = {
			.step = t->step, .samples = t->samples, .tokens = t->tokens,
			.rng = { t->cfg.seed, 0, 0, 0 },
			.data_seq = t->data_seq, .data_epoch = t->data_epoch,
			.data_seed = t->data_seed, .data_batch = t->data_batch,
			.data_seq_len = t->data_seq_len, .data_world = t->data_world,
		},
		.keep = t->keep,
		.vocab = t->vocab.files[0].name ? &t->vocab : NULL,
	};
}

/* Write s (a line under -v). */
static void ckpt_write(struct trainer *t, const struct loom_ckpt_save *s)
{
	char path[4096];
	struct loom_err err = { 0 };
	double t0 = loom_now();
	if (train_dist_shards_weights()) /* every rank writes its part */
		train_dist_save(s, path, sizeof path);
	else if (loom_ckpt_write(s, path, sizeof path, &err))
		cli_die("%s", err.msg);
	t->saved = t->step + 1;
	if (t->verbose)
		cli_warn("saved %s (%.2f s)", path, loom_now() - t0);
}

static void gpt_save(struct trainer *t)
{
	struct loom_gpt *g = t->g;
	int all = train_dist_shards_weights(); /* every rank writes its part */
	if (!all && !train_dist_save_begin())
		return; /* ranks > 0: sent their moment shards to rank 0 */
	struct ckpt_tables x;
	char *ctxt;
	gpt_tables(g, &x);
	struct loom_ckpt_save s = ckpt_save_of(t, &x, &ctxt);
	struct loom_gpt_hf hf;
	loom_gpt_ckpt_hf(&t->cfg, &hf);
	s.arch = &loom_gpt_ckpt_arch;
	s.hf = &hf;
	struct loom_gpt_sidecar sc;
	if (loom_gpt_ckpt_sparsity(g, &sc))
		cli_die("out of memory");
	if (sc.n) {
		s.sidecar_name = LOOM_GPT_SPARSITY_FILE;
		s.sidecar = sc.t;
		s.n_sidecar = sc.n;
		s.sidecar_meta = sc.meta;
	}
	ckpt_write(t, &s);
	loom_gpt_sidecar_release(&sc);
	free(ctxt);
	ckpt_tables_free(&x);
	if (!all)
		train_dist_save_end();
}

static void bert_save(struct trainer *t)
{
	if (!train_dist_save_begin())
		return; /* ranks > 0: sent their moment shards to rank 0 */
	struct ckpt_tables x;
	char *ctxt;
	bert_tables(t->b, &x);
	struct loom_ckpt_save s = ckpt_save_of(t, &x, &ctxt);
	s.arch = &loom_bert_ckpt_arch;
	s.hf = &t->b->cfg;
	ckpt_write(t, &s);
	free(ctxt);
	ckpt_tables_free(&x);
	train_dist_save_end();
}

/* The model family of the checkpoint at path: config.json's model_type
 * "bert" is a BERT's, anything else (or no config.json: loom_ckpt_open
 * says what is wrong) the GPT's. */
static const struct loom_ckpt_arch *ckpt_arch(const char *path)
{
	char dir[4096], cfg[4200];
	struct loom_err err = { 0 };
	char *buf = NULL;
	size_t len;
	const struct loom_ckpt_arch *a = &loom_gpt_ckpt_arch;
	if (loom_ckpt_resolve(path, dir, sizeof dir, &err))
		return a;
	snprintf(cfg, sizeof cfg, "%s/config.json", dir);
	if (loom_file_read_bounded(cfg, LOOM_FILE_MAX_CONFIG, &buf, &len, &err))
		return a;
	json_t *j = json_loadb(buf, len, 0, NULL);
	const char *mt = json_string_value(json_object_get(j, "model_type"));
	if (mt && !strcmp(mt, loom_bert_ckpt_arch.model_type))
		a = &loom_bert_ckpt_arch;
	json_decref(j);
	free(buf);
	return a;
}

/* Open a checkpoint and check it (and its checksums). */
static struct loom_ckpt *open_ckpt(const char *path, int resume)
{
	struct loom_err err = { 0 };
	/* under mpirun rank 0 reads every file through for its checksum and
	 * stops the job on a mismatch; the others read only what they load */
	unsigned flags = train_dist_rank() ? LOOM_CKPT_NO_VERIFY : 0;
	struct loom_ckpt *ck = loom_ckpt_open(path, ckpt_arch(path), flags, &err);
	if (!ck)
		cli_die("%s", err.msg);
	if (resume && !loom_ckpt_has_state(ck))
		cli_die("%s: state.json is missing: nothing to resume (--init-from takes the weights only)",
			loom_ckpt_dir(ck));
	if (loom_ckpt_has_state(ck) && !loom_ckpt_has_checksums(ck) && !flags)
		cli_warn("%s: state.json records no checksums (written by an older loom): not verified",
			 loom_ckpt_dir(ck));
	return ck;
}

/* --resume: the checkpoint has AdamW moments */
static void need_optimizer(struct loom_ckpt *ck)
{
	if (!loom_ckpt_has_optimizer(ck))
		cli_die("%s: no optimizer state to resume from (use --init-from for weights only)",
			loom_ckpt_dir(ck));
}

/* the AdamW moments of x's tensors (need_optimizer first) */
static void load_optimizer(struct loom_ckpt *ck, const struct ckpt_tables *x)
{
	if (loom_ckpt_load_optimizer(ck, x->tp, x->n, x->mm, x->vv))
		cli_die("%s", loom_ckpt_error(ck));
}

static void load_weights(struct loom_gpt *g, struct loom_ckpt *ck, int with_optimizer)
{
	struct ckpt_tables x;
	gpt_tables(g, &x);
	if (with_optimizer)
		need_optimizer(ck);
	if (train_dist_shards_weights()) /* attached: only this rank's chunks */
		train_dist_load(ck, x.tp, x.n, with_optimizer);
	else if (loom_ckpt_load_model(ck, x.tp, x.n))
		cli_die("%s", loom_ckpt_error(ck));
	else if (with_optimizer)
		load_optimizer(ck, &x);
	/* RigL: the checkpoint's masks; --init-from a checkpoint without
	 * them keeps the masks drawn from the seed (its weights masked) */
	int rc = loom_gpt_ckpt_load_sparsity(g, ck);
	if (rc < 0)
		cli_die("%s", loom_gpt_error(g));
	if (rc == 1 && g->rigl && with_optimizer)
		cli_die("%s: sparsity is %g, but the checkpoint has no %s to resume from (--init-from starts new masks)",
			loom_ckpt_dir(ck), g->cfg.sparsity, LOOM_GPT_SPARSITY_FILE);
	if (rc == 1)
		loom_gpt_rigl_sync(g);
	ckpt_tables_free(&x);
}

/* Resuming at `step`: drop log lines of later steps (written by the run
 * that died after its last checkpoint), so the log reads as one run. */
static void trim_log(const char *path, uint64_t step)
{
	char *buf = NULL;
	size_t len = 0, o = 0;
	struct loom_err err = { 0 };
	struct stat st;
	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return; /* nothing yet, or a pipe or device: nothing to trim */
	if (loom_read_file(path, &buf, &len, &err))
		cli_die("%s", err.msg);
	char *keep = malloc(len + 1);
	if (!keep)
		cli_die("out of memory");
	for (char *line = buf, *nl; line < buf + len; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(buf + len - line));
		if (!nl)
			break; /* a torn last line is dropped */
		json_t *j = json_loadb(line, (size_t)(nl - line), 0, NULL);
		json_t *st = j ? json_object_get(j, "step") : NULL;
		if (st && json_is_integer(st) && (uint64_t)json_integer_value(st) <= step) {
			memcpy(keep + o, line, (size_t)(nl - line) + 1);
			o += (size_t)(nl - line) + 1;
		}
		json_decref(j);
	}
	if (o != len && loom_write_file_atomic(path, keep, o, &err))
		cli_die("%s", err.msg);
	free(keep);
	free(buf);
}

/* Where micro_batch, seq_len and vocab_size came from.  A value only a
 * preset (or the defaults) gave is replaced by the data's (micro_batch and
 * seq_len, from the first frame); one the user gave (--set, a config file,
 * the checkpoint) must agree with the data, and a refusal names where to
 * change it. */
enum { O_MB, O_SL, O_VS, N_ORIGIN };

struct origins {
	char src[N_ORIGIN][96];	/* "" = a preset or the defaults */
	char preset[96];	/* "preset 'tiny'", for messages */
	int saved[N_ORIGIN];
};

static int *origin_field(struct loom_config *c, int i)
{
	return i == O_MB ? &c->micro_batch : i == O_SL ? &c->seq_len : &c->vocab_size;
}

/* Before applying a layer the user wrote: remember the values, clear them. */
static void origins_hold(struct loom_config *c, struct origins *o)
{
	for (int i = 0; i < N_ORIGIN; i++) {
		o->saved[i] = *origin_field(c, i);
		*origin_field(c, i) = 0;
	}
}

/* After it: a key it set comes from `src`, the others get their values back. */
static void origins_settle(struct loom_config *c, struct origins *o, const char *src)
{
	for (int i = 0; i < N_ORIGIN; i++) {
		if (*origin_field(c, i))
			snprintf(o->src[i], sizeof o->src[i], "%s", src);
		else
			*origin_field(c, i) = o->saved[i];
	}
}

static const char *origin_name(const struct origins *o, int i)
{
	return o->src[i][0] ? o->src[i] : o->preset;
}

/* Defaults, then --config (preset or file); `o` says where the three keys
 * came from. */
static void build_config(struct loom_config *c, struct origins *o, const char *config)
{
	memset(o, 0, sizeof *o);
	loom_config_defaults(c);
	if (loom_config_names_file(config)) {
		snprintf(o->preset, sizeof o->preset, "the defaults");
		origins_hold(c, o);
		if (loom_config_apply_file(c, config))
			cli_exit(EXIT_USAGE, "%s", loom_config_error(c));
		char src[96];
		snprintf(src, sizeof src, "--config %s", config);
		origins_settle(c, o, src);
	} else {
		if (loom_config_apply_preset(c, config))
			cli_exit(EXIT_USAGE, "%s", loom_config_error(c));
		snprintf(o->preset, sizeof o->preset, "preset '%s'", config);
	}
}

static void apply_sets(struct loom_config *c, struct origins *o, char **sets, int nsets)
{
	origins_hold(c, o);
	for (int i = 0; i < nsets; i++)
		if (loom_config_apply_sets(c, sets[i]))
			cli_exit(EXIT_USAGE, "%s", loom_config_error(c));
	origins_settle(c, o, "--set");
}

/* --resume with --config: the configuration --config (with the same --set
 * and flags) gives must be the checkpoint's, key by key (but the preset's
 * name); micro_batch and seq_len only when the user set them (a preset's
 * are the data's). */
static void check_same_config(const struct loom_config *ckc, struct loom_config *named,
			      const struct origins *no, const char *config, const char *dir)
{
	if (loom_config_validate(named))
		cli_exit(EXIT_USAGE, "%s", loom_config_error(named));
	json_t *a = loom_config_to_json(ckc), *b = loom_config_to_json(named);
	const char *key;
	json_t *va;
	if (!a || !b)
		cli_die("out of memory");
	json_object_foreach(a, key, va) {
		json_t *vb = json_object_get(b, key);
		if (!strcmp(key, "preset") ||
		    (!no->src[O_MB][0] && (!strcmp(key, "micro_batch") || !strcmp(key, "global_batch"))) ||
		    (!no->src[O_SL][0] && !strcmp(key, "seq_len")) || json_equal(va, vb))
			continue;
		char *x = json_dumps(vb, JSON_ENCODE_ANY | JSON_REAL_PRECISION(12));
		char *y = json_dumps(va, JSON_ENCODE_ANY | JSON_REAL_PRECISION(12));
		char msg[1024];
		snprintf(msg, sizeof msg, "--resume: --config %s disagrees with the checkpoint %s on "
			 "%s: %s, the checkpoint has %s (drop --config to resume with the "
			 "checkpoint's configuration)", config, dir, key, x ? x : "?", y ? y : "?");
		free(x);
		free(y);
		json_decref(a);
		json_decref(b);
		cli_exit(EXIT_USAGE, "%s", msg);
	}
	json_decref(a);
	json_decref(b);
}

/* --resume --set: the RigL masks in the checkpoint's sparsity.safetensors
 * hold its sparsity, block size and sparse layers; another value would
 * train other masks than the ones resumed (--init-from starts new ones). */
static void check_resume_sparsity(const struct loom_config *ck, const struct loom_config *c,
				  const char *dir)
{
	char a[64], b[64];
	if (c->sparsity != ck->sparsity)
		cli_exit(EXIT_USAGE, "--resume: --set sparsity=%g, but the checkpoint %s has sparsity %g "
			 "(its masks hold that density; --init-from %s starts new masks)",
			 c->sparsity, dir, ck->sparsity, dir);
	if (ck->sparsity > 0 && c->block_size != ck->block_size)
		cli_exit(EXIT_USAGE, "--resume: --set block_size=%d, but the checkpoint %s has "
			 "block_size %d (its masks' blocks)", c->block_size, dir, ck->block_size);
	if (ck->sparsity > 0 && c->sparse_layers != ck->sparse_layers)
		cli_exit(EXIT_USAGE, "--resume: --set sparse_layers=%s, but the checkpoint %s has "
			 "sparse_layers %s (its masks' layers)",
			 loom_sparse_layers_str(c->sparse_layers, a, sizeof a), dir,
			 loom_sparse_layers_str(ck->sparse_layers, b, sizeof b));
}

/* The first frame's B and T+1 against the configuration: a micro_batch or
 * seq_len only a preset gave becomes the data's (seq_len at most
 * n_positions: records cut, said in a line unless quiet); one the user
 * gave must fit, else a line naming the flag. */
static void fit_first_frame(struct loom_config *c, const struct origins *o, int batch,
			    int rec, uint64_t frame, int verbose, int quiet)
{
	int extra = loom_config_record_extra(c), T = rec - extra;
	if (!o->src[O_MB][0] && batch != c->micro_batch) {
		if (verbose)
			cli_warn("micro_batch %d from the frames (%s says %d)", batch, o->preset,
				 c->micro_batch);
		c->micro_batch = batch;
		c->global_batch = 0; /* derived again */
	}
	if (!o->src[O_SL][0] && T != c->seq_len) {
		/* a squad feature is a row: never cut (too long: refused below) */
		int want = T < c->n_positions || !extra ? T : c->n_positions;
		if (want < T && !quiet)
			cli_warn("the frames' records have %d tokens, but n_positions is %d (%s): "
				 "training on the first %d of each record (--set n_positions=%d, or "
				 "loom-feed --seq %d, uses them whole)", rec, c->n_positions,
				 o->preset, want + extra, T, want + extra - 1);
		else if (verbose)
			cli_warn("seq_len %d from the frames' records of %d tokens (%s says %d)",
				 want, rec, o->preset, c->seq_len);
		c->seq_len = want;
	}
	if (loom_config_validate(c))
		cli_die("stdin: frame %llu: %s", (unsigned long long)frame, loom_config_error(c));
	if (loom_config_check_data(c, batch, rec)) {
		int sl = c->seq_len + extra > rec || (!extra && c->seq_len != rec);
		const char *key = sl ? "seq_len" : "micro_batch", *src = origin_name(o, sl ? O_SL : O_MB);
		char fix[160];
		if (!strcmp(src, "the checkpoint"))
			snprintf(fix, sizeof fix, "the checkpoint's: --set %s=%d overrides it", key,
				 sl ? T : batch);
		else
			snprintf(fix, sizeof fix, "from %s: change it to %d there", src, sl ? T : batch);
		cli_die("stdin: frame %llu: %s (%s is %s, or feed %s %s %d)",
			(unsigned long long)frame, loom_config_error(c), key, fix,
			sl && !extra ? "features of loom-squad prepare" : "loom-feed",
			sl ? "--seq" : "--batch", sl ? c->seq_len + extra - (extra != 0) : c->micro_batch);
	}
}

/* Every id of a frame must be in the vocabulary (padding aside). */
static void check_ids(const struct loom_config *c, const struct origins *o,
		      const struct loom_batch_hdr *h, const uint32_t *tok, uint64_t frame)
{
	size_t n = (size_t)h->batch * h->seq_len;
	size_t i = loom_batch_first_bad_id(h, tok, (uint64_t)c->vocab_size);
	if (i == n)
		return;
	uint32_t top = tok[i];
	for (size_t k = i; k < n; k++)
		if (tok[k] > top && !((h->flags & LOOM_BATCH_F_PAD) && tok[k] == h->pad_id))
			top = tok[k];
	if (top >= LOOM_CONFIG_MAX_VOCAB)
		cli_die("stdin: frame %llu: token %u (record %zu, position %zu) is outside the "
			"vocabulary: vocab_size is at most %d, so ids are 0..%d",
			(unsigned long long)frame, tok[i], i / h->seq_len, i % h->seq_len,
			LOOM_CONFIG_MAX_VOCAB, LOOM_CONFIG_MAX_VOCAB - 1);
	cli_die("stdin: frame %llu: token %u (record %zu, position %zu) is outside the "
		"vocabulary: vocab_size is %d (from %s); the data needs --set vocab_size=N "
		"with N the tokenizer's size, at least %u (gpt2: 50257)",
		(unsigned long long)frame, tok[i], i / h->seq_len, i % h->seq_len,
		c->vocab_size, origin_name(o, O_VS), top + 1);
}

/* task=squad reads frames with features (version 2); the others refuse them */
static int read_features;

/* r (NULL: out of memory) reading what the task reads. */
static struct loom_batch_reader *reader_for_task(struct loom_batch_reader *r)
{
	if (!r)
		cli_die("out of memory");
	if (read_features)
		loom_batch_reader_accept_features(r);
	else
		loom_batch_reader_features_hint(r, "SQuAD features train task=squad, which needs a "
					       "BERT preset (-c squad-base, bert-base, bert-tiny)");
	return r;
}

/* A frame reader over the file `path` (its descriptor in *fd). */
static struct loom_batch_reader *open_frames(const char *path, int *fd)
{
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		cli_die("cannot open '%s': %s", path, strerror(errno));
	return reader_for_task(loom_batch_reader_new(*fd, path));
}

/* --eval-data: batch frames from a file, or a loom-shard manifest (told by
 * content: a JSON object) whose shards loom_feed reads in stream order,
 * one pass, its own sequence from 0, micro_batch records of T+1 tokens a
 * frame (a last partial batch left out); at most --eval-batches frames. */
struct eval_src {
	const char *path;
	int fd;
	struct loom_batch_reader *r; /* frames: over fd; manifest: this frame */
	struct loom_feed *feed;
	uint64_t frames;
};
static uint64_t eval_batches;

static int is_manifest(const char *path)
{
	FILE *f = fopen(path, "rb");
	int c = ' ';
	if (!f)
		cli_die("cannot open '%s': %s", path, strerror(errno));
	while (c == ' ' || c == '\t' || c == '\n' || c == '\r')
		c = getc(f);
	fclose(f);
	return c == '{';
}

/* batch = 0: only open and check the manifest's shards */
static void eval_open(struct eval_src *e, const char *path, uint32_t batch, uint32_t rec)
{
	memset(e, 0, sizeof *e);
	e->path = path;
	e->fd = -1;
	if (!is_manifest(path)) {
		e->r = open_frames(path, &e->fd);
		return;
	}
	/* a squad-features manifest gives the record length itself */
	struct loom_feed_opts fo = { .manifest = path, .batch = batch ? batch : 1,
				     .seq_len = read_features ? 0 : rec, .epochs = 1,
				     .stream_order = 1, .threads = 1 };
	struct loom_err err;
	e->feed = loom_feed_new(&fo, &err);
	if (!e->feed)
		cli_die("--eval-data %s", err.msg);
	if (batch && loom_feed_start(e->feed, 0) < 0)
		cli_die("--eval-data %s", loom_feed_error(e->feed));
}

/* The next frame: 1 (h, tok), 0 at the end (or --eval-batches) */
static int eval_next(struct eval_src *e, struct loom_batch_hdr *h, const uint32_t **tok)
{
	int rc;
	if (eval_batches && e->frames == eval_batches)
		return 0;
	if (e->feed) {
		const void *buf;
		size_t len;
		loom_batch_reader_free(e->r);
		e->r = NULL;
		if ((rc = loom_feed_next(e->feed, &buf, &len)) < 0)
			cli_die("--eval-data %s", loom_feed_error(e->feed));
		if (rc == 0)
			return 0;
		e->r = reader_for_task(loom_batch_reader_new_mem(buf, len, e->path));
	}
	if ((rc = loom_batch_read(e->r, h, tok)) < 0)
		cli_die("%s", loom_batch_reader_error(e->r));
	e->frames += rc == 1;
	return rc;
}

static void eval_close(struct eval_src *e)
{
	loom_batch_reader_free(e->r);
	loom_feed_free(e->feed);
	if (e->fd >= 0)
		close(e->fd);
}

/* Check --eval-data once at start: every frame of a file read (a truncated
 * or corrupt file is found before training, not at the first evaluation),
 * or every shard of a manifest opened and checked.  Returns the records'
 * length (T+1). */
static int check_eval_data(const char *path)
{
	struct eval_src e;
	struct loom_batch_hdr h;
	const uint32_t *tok;
	int rec = 0;
	if (is_manifest(path)) {
		struct loom_manifest m;
		struct loom_err err;
		if (loom_manifest_read(path, &m, &err) < 0)
			cli_die("--eval-data %s", err.msg);
		rec = m.has_seq_len && m.seq_len > 0 && m.seq_len <= INT32_MAX ? (int)m.seq_len : 0;
		loom_manifest_release(&m);
		if (!rec)
			cli_die("--eval-data %s: no seq_len", path);
		eval_open(&e, path, 0, (uint32_t)rec);
		eval_close(&e);
		return rec;
	}
	eval_open(&e, path, 0, 0);
	while (eval_next(&e, &h, &tok) == 1)
		if (!rec || (int)h.seq_len < rec)
			rec = (int)h.seq_len;
	if (!rec)
		cli_die("%s: no batch frames to evaluate", path);
	eval_close(&e);
	return rec;
}

/* --vocab (or the resumed checkpoint's): rendered once as vocab.json +
 * merges.txt for every checkpoint; its ids must fit vocab_size. */
static void load_vocab(struct trainer *t, const char *spec, const char *name,
		       const struct origins *o)
{
	struct loom_vocab *v = loom_vocab_new();
	char *json, *merges;
	size_t jl, ml;
	if (!v)
		cli_die("out of memory");
	if (loom_vocab_load_spec(v, spec))
		cli_die("--vocab: %s", loom_vocab_error(v));
	if (v->n_ids > (uint32_t)t->cfg.vocab_size) {
		uint32_t n = v->n_ids;
		loom_vocab_free(v);
		cli_exit(EXIT_USAGE, "--vocab %s has %u ids, but vocab_size is %d (from %s): "
			 "--set vocab_size=%u", name ? name : spec, n, t->cfg.vocab_size,
			 origin_name(o, O_VS), n);
	}
	if (loom_vocab_render_gpt2(v, &json, &jl, &merges, &ml))
		cli_die("--vocab: %s", loom_vocab_error(v));
	char *nm = strdup(name ? name : spec);
	if (!nm)
		cli_die("out of memory");
	t->vocab = (struct loom_ckpt_vocab){
		.name = nm,
		.files = { { "vocab.json", json, jl }, { "merges.txt", merges, ml } },
		.eos_token_id = v->eot == LOOM_VOCAB_NONE ? -1 : (int64_t)v->eot,
	};
	t->tok = v; /* --sample-every decodes with it */
}

static const char *eval_squad; /* --eval-squad: EM/F1 at each evaluation */
static struct loom_wordpiece *squad_w;	/* its tokenizer, the run's vocabulary */
static struct loom_bert_squad_eval *squad_ev;

/* model=bert: --vocab, or the resumed checkpoint's vocab.txt, opened with
 * --lowercase/--cased by loom_wordpiece_open's rules: saved as vocab.txt +
 * tokenizer_config.json (do_lower_case: the casing used) in every
 * checkpoint; its ids must fit vocab_size. */
static void load_bert_vocab(struct trainer *t, const char *spec, struct loom_ckpt *ck,
			    const struct origins *o)
{
	char path[4096];
	struct loom_wordpiece_opts wo;
	struct loom_err err = { 0 };
	const char *name = spec;
	if (!spec) {
		int rc = ck ? loom_bert_ckpt_tokenizer(ck, path, sizeof path, &wo, &err) : 0;
		if (rc < 0)
			cli_die("%s", err.msg);
		if (rc == 0) {
			if (cli_casing != LOOM_CASING_AUTO)
				cli_usage_error("--lowercase/--cased: no vocabulary (--vocab V)");
			return; /* no tokenizer */
		}
		name = loom_ckpt_vocab_name(ck);
	}
	struct loom_wordpiece *w = cli_wordpiece_open(spec ? spec : loom_ckpt_dir(ck), cli_casing, NULL);
	if (loom_wordpiece_check_bert(w, loom_wordpiece_path(w)))
		cli_die("%s%s", spec ? "--vocab: " : "", loom_wordpiece_error(w));
	size_t pl = strlen(loom_wordpiece_path(w));
	if (pl > 5 && !strcmp(loom_wordpiece_path(w) + pl - 5, ".json"))
		cli_usage_error("--vocab %s: checkpoints keep a vocab.txt: give the one beside it", spec);
	uint32_t n = loom_wordpiece_size(w);
	if (n > (uint32_t)t->cfg.vocab_size)
		cli_exit(EXIT_USAGE, "--vocab %s has %u ids, but vocab_size is %d (from %s): "
			 "--set vocab_size=%u", name ? name : loom_wordpiece_path(w), n,
			 t->cfg.vocab_size, origin_name(o, O_VS), n);
	if (loom_bert_ckpt_vocab(&t->vocab, name, loom_wordpiece_path(w),
				 loom_wordpiece_lowercases(w), &err))
		cli_die("--vocab: %s", err.msg);
	if (eval_squad && !squad_w)
		squad_w = w; /* --eval-squad's features are made with it */
	else
		loom_wordpiece_free(w);
}

/* --log FILE (or "-"): each JSON line written, flushed and checked; a write
 * error ends the run with one line naming the file (never a log cut
 * mid-line behind an exit 0). */
static const char *log_name;

static void log_line(FILE *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(FILE *log, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int bad = vfprintf(log, fmt, ap) < 0;
	va_end(ap);
	int e = errno;
	if (fflush(log) != 0 || ferror(log))
		bad = 1, e = errno;
	if (bad)
		cli_die("--log %s: %s", log_name, strerror(e));
}

/* --tensorboard: a scalar of this step, queued until tb_flush (at each
 * log line); a write error ends the run with one line naming the file. */
static void tb_scalar(const struct trainer *t, enum loom_tb_tag k, double v)
{
	if (t->tb && loom_tb_scalar(t->tb, (int64_t)t->step, loom_tb_tags[k].tag, v))
		cli_die("--tensorboard: %s", loom_tb_error(t->tb));
}

static void tb_flush(const struct trainer *t)
{
	if (t->tb && loom_tb_flush(t->tb))
		cli_die("--tensorboard: %s", loom_tb_error(t->tb));
}

/* --save DIR is held for the run by DIR/.loom-train.lock (loom_lock_take):
 * two runs on one directory would each remove the other's temporaries as
 * debris.  The kernel drops the lock when the process dies; at exit the
 * file goes, and so does DIR if this run made it and left it empty. */
static char save_lock[4200];
static int save_lock_fd = -1;
static char save_made[4096];

static void unlock_save_dir(void)
{
	loom_lock_release(save_lock, &save_lock_fd);
	if (save_made[0])
		rmdir(save_made); /* fails, harmlessly, once a checkpoint is in it */
}

static void lock_save_dir(const char *dir)
{
	struct loom_err err = { 0 };
	struct stat st;
	if (strlen(dir) >= sizeof save_made)
		cli_die("--save %s: the path is too long", dir);
	if (stat(dir, &st) && errno == ENOENT)
		snprintf(save_made, sizeof save_made, "%s", dir);
	if (loom_mkdir_p(dir, &err))
		cli_die("--save: %s", err.msg);
	snprintf(save_lock, sizeof save_lock, "%s/.loom-train.lock", dir);
	atexit(unlock_save_dir);
	int rc = loom_lock_take(save_lock, &save_lock_fd, &err);
	if (rc == LOOM_EBUSY)
		cli_die("--save %s: another loom-train is writing checkpoints there (it holds '%s')",
			dir, save_lock);
	if (rc)
		cli_die("--save %s: %s", dir, err.msg);
}

/* Held-out evaluation over every frame of `path`: the mean loss, for the
 * GPT (per token) with its perplexity, and the share predicted right
 * (GPT: next tokens; squad: rows whose start and end are both the argmax;
 * mlm: masked tokens). */
/* --eval-squad: the official EM and F1 of the model's answers, features
 * made at the first evaluation with the run's windows and vocabulary. */
static void squad_scores(struct trainer *t, FILE *log)
{
	struct loom_err err = { 0 };
	double t0 = loom_now(), em, f1;
	if (!squad_w)
		cli_die("--eval-squad: the checkpoint resumed has no vocab.txt to tokenize %s with "
			"(--vocab V)", eval_squad);
	if (!squad_ev) {
		struct loom_squad_feature_opts fo = { (uint32_t)t->cfg.seq_len,
						      (uint32_t)t->cfg.doc_stride,
						      (uint32_t)t->cfg.max_query };
		if (!(squad_ev = loom_bert_squad_eval_new(eval_squad, squad_w, &fo, &err)))
			cli_die("--eval-squad %s", err.msg);
	}
	if (loom_bert_squad_eval_run(squad_ev, t->b, t->cfg.micro_batch, &em, &f1, &err))
		cli_die("--eval-squad %s: %s", eval_squad, err.msg);
	if (!t->quiet)
		cli_warn("eval step %llu: exact_match %.4f f1 %.4f (%zu questions, %zu features, %.1f s)",
			 (unsigned long long)t->step, em, f1, loom_bert_squad_eval_questions(squad_ev),
			 loom_bert_squad_eval_features(squad_ev), loom_now() - t0);
	if (log)
		log_line(log, "{\"step\":%llu,\"eval_exact_match\":%.9g,\"eval_f1\":%.9g}\n",
			 (unsigned long long)t->step, em, f1);
	tb_scalar(t, LOOM_TB_EVAL_EM, em);
	tb_scalar(t, LOOM_TB_EVAL_F1, f1);
}

static void evaluate(struct trainer *t, const char *path, FILE *log)
{
	struct eval_src e;
	struct loom_batch_hdr h;
	const uint32_t *tok;
	int T = t->cfg.seq_len, need = T + loom_config_record_extra(&t->cfg);
	eval_open(&e, path, (uint32_t)t->cfg.micro_batch, (uint32_t)need);
	struct eval_sums sum = { 0 };
	double t0 = loom_now();
	while (eval_next(&e, &h, &tok) == 1) {
		if ((int)h.seq_len < need)
			cli_die("%s: seq_len: %d needs records of %d tokens, the batches have %u", path,
				T, need, h.seq_len);
		size_t bad = loom_batch_first_bad_id(&h, tok, (uint64_t)t->cfg.vocab_size);
		if (bad < (size_t)h.batch * h.seq_len)
			cli_die("%s: frame %llu: token %u (record %zu, position %zu) is outside the "
				"vocabulary of %d ids", path,
				(unsigned long long)e.frames - 1, tok[bad],
				bad / h.seq_len, bad % h.seq_len, t->cfg.vocab_size);
		char msg[160];
		if (loom_threads_adapt(&pool, "eval frame", e.frames - 1, msg, sizeof msg) &&
		    t->verbose)
			cli_warn("%s", msg); /* -v: the thread count changed */
		struct frame f = { .h = &h, .tok = tok, .r = e.r, .src = path, .n = e.frames - 1 };
		t->ops->eval(t, &f, &sum);
	}
	eval_close(&e);
	double loss = sum.n ? sum.nll / sum.n : 0, acc = sum.n ? (double)sum.correct / sum.n : 0.0;
	int lm = t->cfg.model == LOOM_MODEL_GPT;
	const char *what = lm ? "tokens" : t->cfg.task == LOOM_TASK_SQUAD ? "features" : "masked tokens";
	int sq = t->cfg.task == LOOM_TASK_SQUAD; /* a perplexity means nothing there */
	char ppl[48] = "", ppl_j[48] = "";
	if (!sq) {
		snprintf(ppl, sizeof ppl, " ppl %.2f", exp(loss));
		snprintf(ppl_j, sizeof ppl_j, ",\"eval_ppl\":%.9g", exp(loss));
	}
	if (!t->quiet)
		cli_warn("eval step %llu: loss %.4f%s acc %.4f (%lld %s, %.1f s)",
			 (unsigned long long)t->step, loss, ppl, acc, (long long)sum.n, what,
			 loom_now() - t0);
	if (log)
		log_line(log, "{\"step\":%llu,\"eval_loss\":%.9g%s,\"eval_acc\":%.6f,\"eval_%s\":%lld}\n",
			 (unsigned long long)t->step, loss, ppl_j, acc,
			 lm ? "tokens" : sq ? "features" : "masked", (long long)sum.n);
	tb_scalar(t, LOOM_TB_EVAL_LOSS, loss);
	if (!sq)
		tb_scalar(t, LOOM_TB_EVAL_PPL, exp(loss));
	tb_scalar(t, LOOM_TB_EVAL_ACC, acc);
	if (eval_squad)
		squad_scores(t, log);
	tb_flush(t);
}

/* A RigL mask update happened at this step: a JSON line and, under -v,
 * a line on stderr. */
static void log_rigl(const struct trainer *t, FILE *log)
{
	struct loom_rigl_stats st;
	loom_rigl_stats(t->g->rigl, &st);
	double ratio = loom_config_prune_ratio(&t->cfg, (int64_t)t->step);
	if (log)
		log_line(log, "{\"step\":%llu,\"rigl_update\":%lld,\"prune_ratio\":%.6g,\"pruned\":%lld,\"regrown\":%lld,\"live_blocks\":%lld,\"blocks\":%lld,\"density\":%.9g,\"churn\":%.6g,\"churn_init\":%.6g}\n",
			 (unsigned long long)t->step, (long long)t->g->rigl->updates, ratio,
			 (long long)st.pruned, (long long)st.regrown, (long long)st.live,
			 (long long)st.blocks, st.density, st.churn_last, st.churn_init);
	tb_scalar(t, LOOM_TB_DENSITY, st.density);
	tb_scalar(t, LOOM_TB_CHURN, st.churn_last);
	tb_flush(t);
	if (t->verbose)
		cli_warn("step %llu: RigL update %lld: ratio %.4f, %lld blocks pruned, %lld regrown, density %.4f (%lld of %lld blocks), churn %.4f since the last update, %.4f since the start",
			 (unsigned long long)t->step, (long long)t->g->rigl->updates, ratio,
			 (long long)st.pruned, (long long)st.regrown, st.density, (long long)st.live,
			 (long long)st.blocks, st.churn_last, st.churn_init);
}

/* The input ended inside the run's first step (on every rank: they
 * agreed): an error, before any checkpoint is written. */
static _Noreturn void trained_nothing(const struct loom_config *c, int micro, int resumed)
{
	train_dist_agreed_die("stdin: input ended after %d micro-batch%s, but a step needs %d "
			      "(grad_accum): no step trained, nothing saved (%s)", micro,
			      micro == 1 ? "" : "es", c->grad_accum,
			      resumed ? "feed more data: the resumed run's steps keep their size"
				      : "feed more data, or --set grad_accum=N for smaller steps");
}

/* The command line */
static const char *config, *save, *resume, *init_from, *logpath, *eval_data, *vocab_spec,
	*tb_dir, *sample_prompt;
static char **sets;
static int nsets, print, dry, recompute, bench, have_steps, have_seed, threads, profile, allow_short;
static uint64_t mem_per_rank;	/* --memory-per-rank (0: none) */
static char mem_name[80];	/* as given, for the lines: "8 GB", "512 MiB" */
static uint64_t steps, seed, save_every, keep, log_every = 10, eval_every;
static uint64_t sample_every, sample_tokens = 32;
static double sample_temperature;
/* -v and -q, then off on the ranks other than 0 */
static int verbose, quiet;

static void on_set(const char *opt, const char *arg)
{
	(void)opt;
	char **s = realloc(sets, (size_t)(nsets + 1) * sizeof *sets);
	if (!s)
		cli_die("out of memory");
	sets = s;
	sets[nsets++] = (char *)arg; /* an argv string */
}

static void on_steps(const char *opt, const char *arg)
{
	steps = cli_u64(opt, arg, 0, 1ull << 50);
	have_steps = 1;
}

static void on_seed(const char *opt, const char *arg)
{
	seed = cli_u64(opt, arg, 0, INT64_MAX);
	have_seed = 1;
}

/* --memory-per-rank SIZE: 8GB (powers of 1000), 8G or 8GiB (of 1024) */
static void on_memory(const char *opt, const char *arg)
{
	mem_per_rank = cli_size(opt, arg);
	if (!mem_per_rank)
		cli_usage_error("%s: '%s': a rank needs some memory", opt, arg);
	/* the unit as loom_parse_size read it, spelt out: 8g -> 8 GiB, 8gb -> 8 GB */
	const char *u = arg + strcspn(arg, "KMGTkmgt");
	size_t ul = strlen(u);
	int c = toupper((unsigned char)*u);
	if (!ul)
		snprintf(mem_name, sizeof mem_name, "%s B", arg);
	else
		snprintf(mem_name, sizeof mem_name, "%.*s %c%s", (int)(u - arg), arg,
			 ul == 2 && c == 'K' ? 'k' : c, ul == 2 ? "B" : "iB");
}

static const struct cli_opt opts[] = {
	OPT_TEXT("configuration (applied in this order):"),
	OPT_STRING('c', "config", &config, "NAME|FILE",
		   "preset (share/presets/NAME.json) or JSON file\n(default: tiny)"),
	OPT_CALLBACK(0, "set", on_set, "K=V,...", "override keys (repeatable); see --print-config"),
	OPT_CALLBACK(0, "steps", on_steps, "N", "optimizer steps (= --set steps=N)"),
	OPT_BOOL(0, "allow-short", &allow_short,
		 "exit 0 when the input ends before the --steps asked\nfor (default: exit 1)"),
	OPT_CALLBACK(0, "seed", on_seed, "N", "seed for init and dropout (= --set seed=N)"),
	OPT_BOOL(0, "recompute", &recompute, "activation checkpointing (= --set recompute=true)"),
	OPT_BOOL(0, "print-config", &print, "print the resolved configuration as JSON and exit"),
	OPT_BOOL(0, "dry-run", &dry, "print parameters, memory plan, FLOPs, time estimate; exit"),
	OPT_CALLBACK(0, "memory-per-rank", on_memory, "SIZE",
		     "with --dry-run: the ranks of SIZE (8GB, 16GiB) the\n"
		     "model needs, the largest preset that fits"),
	OPT_TEXT("checkpoints:"),
	OPT_STRING(0, "save", &save, "DIR", "write DIR/step-NNNNNNNN and DIR/latest"),
	OPT_U64(0, "save-every", &save_every, "N", 1, 1ull << 50,
		"also every N steps (default: only at the end)"),
	OPT_U64(0, "keep", &keep, "N", 1, 1u << 30, "keep the newest N checkpoints (default: all)"),
	OPT_STRING(0, "resume", &resume, "DIR|latest",
		   "continue exactly from a checkpoint (latest: of --save)"),
	OPT_STRING(0, "init-from", &init_from, "DIR",
		   "start from a checkpoint's weights only (model=bert:\n"
		   "also a HuggingFace BERT directory)"),
	OPT_STRING(0, "vocab", &vocab_spec, "V",
		   "the data's tokenizer (gpt2, DIR, ENC.json,VOCAB.bpe;\n"
		   "BERT: bert-base-uncased, a vocab.txt): stored in\n"
		   "checkpoints"),
	OPT_CASING(),
	OPT_TEXT("logging and evaluation:"),
	OPT_STRING(0, "log", &logpath, "FILE", "one JSON line per step (- = stdout)"),
	OPT_STRING(0, "tensorboard", &tb_dir, "DIR",
		   "TensorBoard event file in DIR (scalars, config,\n"
		   "samples)"),
	OPT_U64(0, "log-every", &log_every, "N", 0, 1ull << 50,
		"human progress line on stderr every N steps\n(default: 10)"),
	OPT_U64(0, "eval-every", &eval_every, "N", 1, 1ull << 50,
		"evaluate on --eval-data every N steps"),
	OPT_STRING(0, "eval-data", &eval_data, "FILE",
		   "held-out batch frames, or a loom-shard manifest\n"
		   "(e.g. PREFIX.val.manifest.json: read in order)"),
	OPT_STRING(0, "eval-squad", &eval_squad, "FILE.json",
		   "task=squad: with --eval-data (its features), the\n"
		   "official EM and F1 on FILE's questions at each evaluation"),
	OPT_U64(0, "eval-batches", &eval_batches, "N", 1, 1ull << 50,
		"at most N batches per evaluation (default: all)"),
	OPT_U64(0, "sample-every", &sample_every, "N", 1, 1ull << 50,
		"generate a short sample every N steps (on stderr,\n"
		"in the log and the TensorBoard file)"),
	OPT_STRING(0, "sample-prompt", &sample_prompt, "TEXT",
		   "the samples' prompt (token ids without a vocabulary)\n"
		   "(default: the first token of the step's batch)"),
	OPT_U64(0, "sample-tokens", &sample_tokens, "N", 1, 4096, "tokens per sample (default: 32)"),
	OPT_DOUBLE(0, "sample-temperature", &sample_temperature, "T", 0, 100,
		   "0 = greedy; else sampled among the 200 most\n"
		   "likely, from the seed (default: 0)"),
	OPT_TEXT("other:"),
	OPT_INT('j', "threads", &threads, "N", 1, 1024, "threads for OpenMP and OpenBLAS (default: the\n"
		"cores other processes leave free, looked at\n"
		"every step)"),
	OPT_BOOL(0, "bench-sgemm", &bench, "measure the best sgemm GFLOP/s and exit"),
	OPT_BOOL(0, "profile", &profile, "each step's time per op, parallel and serial (stderr,\n"
		 "and --log as {\"step\":N,\"profile\":{...}})"),
	OPT_PROGRESS(NULL, "the progress line even when stderr is not a terminal"),
	OPT_VERBOSE("more detail on stderr"),
	OPT_QUIET(NULL, "no progress lines (and no -v lines)"),
	OPT_END()
};

static const char *versions(void)
{
	static char extra[256];
	snprintf(extra, sizeof extra, "OpenBLAS %s (%s), jansson %s", openblas_get_config(),
		 openblas_get_corename(), JANSSON_VERSION);
	snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", %s", train_dist_version());
	return extra;
}

static const struct cli_cmd cmd = {
	.prog = "loom-train",
	.usage = "usage: loom-train [options] < frames\n"
		 "Train a GPT, or a BERT (model=bert), on batch frames read from stdin\n"
		 "(loom-feed ... | loom-train).\n"
		 "\n",
	.opts = opts,
	.version = versions,
};

/* Option combinations that make no sense: usage errors. */
static void check_args(int argc, char **argv)
{
	if (optind < argc)
		cli_usage_error("unexpected argument '%s' (batches are read from stdin)", argv[optind]);
	if (resume && init_from)
		cli_usage_error("--resume and --init-from exclude each other");
	if (eval_every && !eval_data)
		cli_usage_error("--eval-every needs --eval-data");
	if (eval_squad && !eval_data)
		cli_usage_error("--eval-squad needs --eval-data (the file's features, loom-squad prepare)");
	if (resume && !strcmp(resume, "latest")) {
		if (!save)
			cli_usage_error("--resume latest needs --save DIR");
		resume = save;
	}
	if (save_every && !save)
		cli_usage_error("--save-every needs --save DIR");
	if (sample_prompt && !sample_every)
		cli_usage_error("--sample-prompt needs --sample-every N");
	if (mem_per_rank && !dry)
		cli_usage_error("--memory-per-rank needs --dry-run");
}

/* The environment OpenBLAS and OpenMP read, the ranks under mpirun, the
 * threads; --bench-sgemm runs here and exits. */
static void set_up_process(int *argc, char ***argv)
{
	if (!print)
		fix_env(*argv, verbose);
	const char *weak = loom_blas_weaker_core();
	if (weak && !quiet && !print)
		cli_warn("OPENBLAS_CORETYPE=%s holds OpenBLAS to weaker kernels than this CPU runs (%s: about 2x the sgemm rate); honoured, unset it for full speed",
			 getenv("OPENBLAS_CORETYPE"), weak);
	if (!print && !dry) {
		/* the model outlives train_dist's exit handler (registered next,
		 * so it runs before ours), which still looks at it */
		atexit(free_model);
		train_dist_init(argc, argv); /* mpirun: one process per rank */
		if (train_dist_rank() != 0) { /* rank 0 logs, evaluates and reports */
			logpath = NULL;
			tb_dir = NULL;
			quiet = 1;
			verbose = 0;
		}
	}
	if (save && !print && !dry && !bench && train_dist_rank() == 0)
		lock_save_dir(save); /* before --resume latest reads it */
	loom_threads_init(&pool, threads);
	if (verbose && !print) {
		char d[96];
		cli_warn("OpenBLAS core '%s', %s", loom_blas_core(),
			 loom_threads_describe(&pool, d, sizeof d));
	}
	if (bench) {
		double gf = bench_sgemm(verbose);
		printf("sgemm_gflops %.2f threads %d core %s\n", gf, omp_get_max_threads(),
		       openblas_get_corename());
		free(sets);
		exit(0);
	}
}

/* A loom BERT checkpoint's configuration: loom's, under config.json's
 * "loom" (a HuggingFace directory has none: --init-from takes it). */
static int bert_ckpt_config(const struct loom_ckpt *ck, struct loom_config *c)
{
	const char *txt = loom_ckpt_loom_config(ck);
	loom_config_defaults(c);
	if (!txt)
		return loom_err_set(&c->err, LOOM_EFORMAT, "%s/config.json: no loom configuration "
				    "to resume (a HuggingFace directory: --init-from it)",
				    loom_ckpt_dir(ck));
	json_t *o = json_loads(txt, 0, NULL);
	int rc = o ? loom_config_apply_json(c, o)
		   : loom_err_set(&c->err, LOOM_EFORMAT, "%s/config.json: loom: bad JSON",
				  loom_ckpt_dir(ck));
	json_decref(o);
	return rc;
}

/* The configuration: the checkpoint's (--resume) or --config's, then --set
 * and the shorthands; validated.  Returns the checkpoint to resume from. */
static struct loom_ckpt *resolve_config(struct trainer *t, struct origins *orig)
{
	struct loom_config *c = &t->cfg;
	struct loom_ckpt *ck = NULL;
	struct origins named_orig;
	struct loom_config named;
	if (resume) {
		ck = open_ckpt(resume, 1);
		if (ckpt_arch(resume) == &loom_bert_ckpt_arch ? bert_ckpt_config(ck, c)
							      : loom_gpt_ckpt_config(ck, c))
			cli_die("%s", loom_config_error(c));
		memset(orig, 0, sizeof *orig);
		for (int i = 0; i < N_ORIGIN; i++)
			snprintf(orig->src[i], sizeof orig->src[i], "the checkpoint");
		if (config) {
			build_config(&named, &named_orig, config);
			apply_sets(&named, &named_orig, sets, nsets);
		}
	} else {
		build_config(c, orig, config ? config : "tiny");
	}
	struct loom_config ckc = *c; /* --resume: the checkpoint's */
	apply_sets(c, orig, sets, nsets);
	if (init_from && c->model == LOOM_MODEL_BERT && ckpt_arch(init_from) == &loom_bert_ckpt_arch) {
		struct loom_err err = { 0 }; /* the shape is the directory's (read again to load) */
		struct loom_ckpt *ick = loom_ckpt_open(init_from, &loom_bert_ckpt_arch,
						       LOOM_CKPT_NO_VERIFY, &err);
		if (!ick)
			cli_die("%s", err.msg);
		if (loom_bert_ckpt_shape(ick, c, &err))
			cli_exit(EXIT_USAGE, "%s", err.msg);
		snprintf(orig->src[O_VS], sizeof orig->src[O_VS], "--init-from %.80s", init_from);
		loom_ckpt_free(ick);
	}
	if (resume)
		check_resume_sparsity(&ckc, c, loom_ckpt_dir(ck));
	for (struct loom_config *x = c; x; x = x == c && resume && config ? &named : NULL) {
		if (have_steps)
			x->steps = (int64_t)steps;
		if (have_seed)
			x->seed = seed;
		if (recompute)
			x->recompute = 1;
	}
	if (!print && !dry)
		train_dist_config(c, sets, nsets);
	if (loom_config_validate(c))
		cli_exit(EXIT_USAGE, "%s", loom_config_error(c));
	char why[256];
	if (c->precision == LOOM_PREC_BF16 && !print && loom_mm_bf16_missing(why, sizeof why))
		cli_die("precision=bf16: %s", why);
	if (c->data_parallel != train_dist_world() && !print && !dry)
		cli_exit(EXIT_USAGE, "data_parallel: loom-train runs one rank; %d needs one process per rank",
			 c->data_parallel);
	if (resume && config) {
		named.data_parallel = c->data_parallel;
		named.sharding = c->sharding;
		named.dist_timeout = c->dist_timeout;
		check_same_config(c, &named, &named_orig, config, loom_ckpt_dir(ck));
	}
	if (c->sharding == LOOM_SHARD_WEIGHTS && c->model != LOOM_MODEL_GPT)
		cli_exit(EXIT_USAGE, "sharding=weights: only a GPT shards its weights (model is %s); "
			 "sharding=optimizer shards its AdamW state", loom_model_name(c->model));
	if (loom_config_shards_weights(c) && sample_every)
		train_dist_agreed_exit(EXIT_USAGE, "--sample-every: not with sharding=weights over "
				       "%d ranks (every rank would sample with it); sample a "
				       "checkpoint with loom-eval generate", c->data_parallel);
	if (train_dist_rank() != 0) /* rank 0 samples; it evaluates alone unless */
		sample_every = 0;   /* the weights are sharded (every rank takes part) */
	t->ops = c->model == LOOM_MODEL_BERT ? &bert_ops : &gpt_ops;
	read_features = c->task == LOOM_TASK_SQUAD;
	if (eval_squad && (!read_features || loom_config_shards_weights(c)))
		cli_exit(EXIT_USAGE, "--eval-squad: task=squad%s", read_features ?
			 " without sharding=weights (score a checkpoint with loom-eval squad -c)" :
			 " only (the task is not)");
	if (eval_squad && !vocab_spec && !resume)
		cli_usage_error("--eval-squad needs --vocab (its questions are tokenized with it)");
	if (c->model != LOOM_MODEL_GPT && sample_every)
		cli_exit(EXIT_USAGE, "--sample-every: only a GPT samples (model is %s)",
			 loom_model_name(c->model));
	if (c->model != LOOM_MODEL_BERT && cli_casing != LOOM_CASING_AUTO)
		cli_usage_error("--lowercase/--cased are for a WordPiece vocabulary (model=bert)");
	if (c->model == LOOM_MODEL_BERT)
		load_bert_vocab(t, vocab_spec, ck, orig);
	else if (vocab_spec || (ck && loom_ckpt_vocab_spec(ck)))
		load_vocab(t, vocab_spec ? vocab_spec : loom_ckpt_vocab_spec(ck),
			   vocab_spec ? vocab_spec : loom_ckpt_vocab_name(ck), orig);
	return ck;
}

/* The model, its weights from the checkpoint ck (--resume), --init-from or
 * fresh, attached to the data-parallel layer. */
/* --resume: where training stands, from the checkpoint (freed) */
static void take_state(struct trainer *t, struct loom_ckpt *ck)
{
	const struct loom_ckpt_state *st = loom_ckpt_state(ck);
	t->step = st->step;
	t->samples = st->samples;
	t->tokens = st->tokens;
	t->data_seq = st->data_seq;
	if (verbose)
		cli_warn("resumed from %s at step %llu (next frame %llu)", loom_ckpt_dir(ck),
			 (unsigned long long)t->step, (unsigned long long)t->data_seq);
	loom_ckpt_free(ck);
}

static void gpt_build(struct trainer *t, struct loom_ckpt *ck)
{
	struct loom_config *c = &t->cfg;
	struct loom_gpt *g = the_model = loom_gpt_new(c);
	if (!g)
		cli_die("out of memory for %llu parameters", (unsigned long long)loom_config_n_params(c));
	t->g = g;
	struct loom_dist_model dm;
	loom_gpt_dist_model(g, &dm);
	int first = loom_config_shards_weights(c) && (resume || init_from);
	if (first) /* every rank then reads only its own chunks */
		train_dist_attach(&dm, t->cfg.grad_accum, quiet, verbose);
	if (resume) {
		load_weights(g, ck, 1);
		take_state(t, ck);
	} else if (init_from) {
		ck = open_ckpt(init_from, 0);
		load_weights(g, ck, 0);
		if (verbose)
			cli_warn("weights from %s", loom_ckpt_dir(ck));
		loom_ckpt_free(ck);
	} else {
		loom_gpt_init_weights(g, c->seed);
	}
	if (!first)
		train_dist_attach(&dm, t->cfg.grad_accum, quiet, verbose);
}

/* At the first frame (B and T are the data's): the model's size (and its
 * live weights when sparse), the preset and the key settings, one line. */
static void print_model_line(const struct trainer *t)
{
	const struct loom_config *c = &t->cfg;
	char live[96] = "";
	if (c->sparsity > 0) {
		uint64_t w = loom_config_sparse_weights(c);
		snprintf(live, sizeof live, " (%llu live at sparsity %g)",
			 (unsigned long long)(t->ops->n_params(t) - w +
					      (uint64_t)llround((1 - c->sparsity) * (double)w)),
			 c->sparsity);
	}
	cli_warn("%s: %llu parameters%s, %d thread%s, %s kernels, B=%d T=%d grad_accum %d, "
		 "%lld step%s, lr %g, %s", c->preset, (unsigned long long)t->ops->n_params(t), live,
		 pool.n, pool.n == 1 ? "" : "s", loom_k_isa(), c->micro_batch, c->seq_len, c->grad_accum,
		 (long long)c->steps, c->steps == 1 ? "" : "s", c->lr,
		 c->precision == LOOM_PREC_BF16 ? "bf16 matmuls (oneDNN)" : "fp32 matmuls (OpenBLAS)");
}

/* --log: stdout, or FILE (appended to when resuming, cut at the step). */
static FILE *open_log(const struct trainer *t)
{
	FILE *log = NULL;
	log_name = logpath;
	if (logpath && !strcmp(logpath, "-")) {
		log = stdout;
	} else if (logpath) {
		struct loom_err merr;
		if (loom_mkdir_parent(logpath, &merr) < 0)
			cli_die("%s", merr.msg);
		if (t->step)
			trim_log(logpath, t->step);
		if (!(log = fopen(logpath, t->step ? "a" : "w")))
			cli_die("cannot open '%s': %s", logpath, strerror(errno));
	}
	return log;
}

/* --tensorboard DIR: a new event file (a resumed run adds one), the
 * configuration as its first text summary. */
static void open_tb(struct trainer *t)
{
	struct loom_err err;
	if (!(t->tb = loom_tb_open(tb_dir, &err)))
		cli_die("--tensorboard: %s", err.msg);
	char *cj = loom_config_dump(&t->cfg), *md = NULL;
	if (!cj || asprintf(&md, "```\n%s```\n", cj) < 0)
		cli_die("out of memory");
	if (loom_tb_text(t->tb, (int64_t)t->step, "config", md))
		cli_die("--tensorboard: %s", loom_tb_error(t->tb));
	tb_flush(t);
	if (verbose)
		cli_warn("TensorBoard events: %s", loom_tb_path(t->tb));
	free(cj);
	free(md);
}

/* SIGINT, SIGTERM and SIGUSR1 finish the step, save and exit 0. */
static void catch_stop_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL); /* mpirun forwards SIGUSR1 to every rank */
}

/* The training loop's state besides the trainer's. */
struct run {
	struct trainer *t;
	struct origins *orig;
	struct loom_batch_reader *r;
	int B, T;               /* the batches' (until the first frame: the config's) */
	int32_t *in, *tg;
	int eval_rec;           /* --eval-data's record length */
	int first, ended;
	double t_start;
	uint64_t start_step;
	float loss, norm;
	struct cli_progress prog;
	FILE *log;
};

/* The first frame fixes B and T (and the buffers). */
static void take_first_frame(struct run *u, const struct loom_batch_hdr *h, uint64_t frame)
{
	struct loom_config *c = &u->t->cfg;
	fit_first_frame(c, u->orig, (int)h->batch, (int)h->seq_len, frame, verbose, quiet);
	if (!quiet)
		print_model_line(u->t);
	u->B = c->micro_batch;
	u->T = c->seq_len;
	int need = u->T + loom_config_record_extra(c);
	if (u->eval_rec && (u->eval_rec < need || (read_features && u->eval_rec != need)))
		cli_die("%s: seq_len: %d needs records of %d tokens, the batches have %d",
			eval_data, u->T, need, u->eval_rec);
	u->in = malloc(sizeof(int32_t) * u->B * u->T);
	u->tg = malloc(sizeof(int32_t) * u->B * u->T);
	if (!u->in || !u->tg)
		cli_die("out of memory");
	loom_batch_reader_expect(u->r, h->batch, h->seq_len);
	if (u->t->data_seq && h->seq != u->t->data_seq)
		cli_warn("resuming at frame seq %llu, but the stream starts at %llu: not an exact continuation",
			 (unsigned long long)u->t->data_seq, (unsigned long long)h->seq);
	u->first = 0;
}

/* Under mpirun, the wait before each read of stdin (the reader's
 * loom_batch_reader_on_wait): a feeder silent for dist_timeout seconds
 * fails this rank, which stops every rank with a line naming it. */
static void wait_frames(void *ctx, int fd)
{
	const struct run *u = ctx;
	double limit = u->t->cfg.dist_timeout;
	if (wait_input(fd, limit) < 0)
		train_dist_fail(u->t->step + 1, "stdin: no data for %g s (dist_timeout) after %llu frames: "
				"its loom-feed stopped sending (stopped, hung or waiting itself)",
				limit, (unsigned long long)loom_batch_reader_frames(u->r));
}

/* The micro-batches of one step, forward and backward; returns how many
 * were done (u->ended: the input ended first), their loss sum in *lsum. */
static int run_micro_batches(struct run *u, double *lsum)
{
	struct trainer *t = u->t;
	struct loom_config *c = &t->cfg;
	struct loom_batch_hdr h;
	const uint32_t *tok;
	int micro, rc;
	for (micro = 0; micro < c->grad_accum; micro++) {
		int sync = train_dist_micro_begin(micro, micro == c->grad_accum - 1);
		if (micro == 0 && train_dist_world() == 1 && !wait_input(STDIN_FILENO, 0))
			break; /* stop requested between steps */
		for (;;) {
			rc = loom_batch_read(u->r, &h, &tok);
			if (rc < 0)
				train_dist_fail(t->step + 1, "%s", loom_batch_reader_error(u->r));
			if (rc == 0 || h.seq >= t->data_seq)
				break;
			/* resuming: skip frames consumed before the checkpoint */
		}
		if (rc == 0) {
			u->ended = 1;
			break;
		}
		if (u->first)
			train_dist_check_frame(h.rank, h.world);
		if (sync) /* all ranks agree before the last backward (every forward
			   when it gathers the weights) */
			train_dist_sync(t->step + 1, 0, &stop_sig);
		uint64_t frame = loom_batch_reader_frames(u->r) - 1;
		if (u->first)
			take_first_frame(u, &h, frame);
		check_ids(c, u->orig, &h, tok, frame);
		/* dropout (and mlm's masks): independent per rank (rank 0 as a
		 * single process) */
		uint64_t key = loom_splitmix64(c->seed ^ loom_splitmix64((t->step + 1) * 65536 + (uint64_t)micro) ^
					     ((uint64_t)train_dist_rank() << 48));
		float l;
		struct frame f = { .h = &h, .tok = tok, .r = u->r, .src = "stdin", .n = frame };
		t->ops->micro(u, &f, key, 1.0f / c->grad_accum, &l);
		train_dist_micro_end();
		*lsum += l;
		t->data_seq = h.seq + 1;
		t->data_epoch = h.epoch;
		t->data_seed = h.seed;
		t->data_batch = h.batch;
		t->data_seq_len = h.seq_len;
		t->data_world = h.world;
	}
	return micro;
}

/* ---- the models behind struct model_ops --------------------------------- */

static size_t gpt_n_params(const struct trainer *t)
{
	return t->g->n_params;
}

static void gpt_plan(const struct loom_config *c, int recompute, struct loom_gpt_mem *m)
{
	loom_gpt_memory_plan(c, c->micro_batch, c->seq_len, recompute, m);
}

static void gpt_begin_step(struct trainer *t)
{
	loom_gpt_begin_step(t->g, (int64_t)t->step + 1);
}

/* records of T+1 tokens -> T inputs and their next-token targets */
static void gpt_split(const struct trainer *t, const struct frame *f, int32_t *in, int32_t *tg)
{
	int B = (int)f->h->batch, T = t->cfg.seq_len;
	loom_gpt_split_records(f->tok, B, (int)f->h->seq_len, T, in, tg);
	if (f->h->flags & LOOM_BATCH_F_PAD)
		loom_gpt_mask_pad(t->g, f->h->pad_id, in, tg, (size_t)B * T);
}

static void gpt_micro(struct run *u, const struct frame *f, uint64_t key, float scale, float *loss)
{
	struct trainer *t = u->t;
	gpt_split(t, f, u->in, u->tg);
	if (loom_gpt_train_micro(t->g, u->in, u->tg, u->B, u->T, key, scale, loss))
		cli_die("%s: frame %llu: %s", f->src, (unsigned long long)f->n, loom_gpt_error(t->g));
}


/* int32 buffers of n values, grown as needed */
static int32_t *ibuf(int32_t **p, size_t *cap, size_t n)
{
	if (n > *cap) {
		free(*p);
		if (!(*p = malloc(sizeof(int32_t) * n)))
			cli_die("out of memory");
		*cap = n;
	}
	return *p;
}

static void gpt_eval(struct trainer *t, const struct frame *f, struct eval_sums *s)
{
	static int32_t *in, *tg; /* grown as needed, reachable to the end */
	static size_t cin, ctg;
	size_t n = (size_t)f->h->batch * t->cfg.seq_len;
	gpt_split(t, f, ibuf(&in, &cin, n), ibuf(&tg, &ctg, n));
	if (loom_gpt_forward(t->g, in, tg, (int)f->h->batch, t->cfg.seq_len, 0, 0, NULL))
		cli_die("%s: frame %llu: %s", f->src, (unsigned long long)f->n, loom_gpt_error(t->g));
	double a;
	int64_t b, c;
	loom_gpt_eval_counts(t->g, &a, &b, &c);
	s->nll += a;
	s->n += b;
	s->correct += c;
}

static size_t bert_n_params(const struct trainer *t)
{
	return t->b->n_params;
}

static void bert_plan(const struct loom_config *c, int recompute, struct loom_gpt_mem *m)
{
	struct loom_bert_config bc;
	loom_bert_config_from(c, &bc);
	bc.recompute = recompute;
	uint64_t n = loom_config_n_params(c), R = c->data_parallel > 1 ? c->data_parallel : 1;
	uint64_t shard = (n + R - 1) / R; /* sharding=optimizer: a rank's slice of the moments */
	*m = (struct loom_gpt_mem){
		.params = 4 * n, .grads = 4 * n, .adam = 8 * shard, .gshard = R > 1 ? 4 * shard : 0,
		.acts = 4 * (uint64_t)loom_bert_act_floats(&bc, c->micro_batch, c->seq_len),
		.bf16 = c->precision == LOOM_PREC_BF16 ? 2 * n : 0,
	};
	m->total = m->params + m->grads + m->adam + m->gshard + m->acts + m->bf16;
}

static void bert_begin_step(struct trainer *t)
{
	(void)t; /* the gradients are zero: loom_bert_step leaves them so */
}

/* A frame as a BERT batch in t->rows.
 * task=squad: the frame's ids and its segment_ids, input_mask,
 * start_positions and end_positions (formats/squad-features.md), as
 * they are.
 * task=mlm: row r is [CLS], the first T-2 tokens of record r (up to its
 * padding), [SEP], then pad_token_id (input_mask 0); 15% of its tokens
 * but [CLS] and [SEP] (those the record holds between documents
 * included) masked 80/10/10 by loom_bert_mlm_mask, keyed by the seed and
 * the record's place in the stream (the frame's global batch number and
 * its row of that global batch): the same masks however the global batch
 * is split over ranks, and after a resume. */
static void bert_rows(struct trainer *t, const struct frame *f, struct loom_bert_batch *bb)
{
	const struct loom_config *c = &t->cfg;
	struct rows *x = &t->rows;
	int B = (int)f->h->batch, T = c->seq_len, rec = (int)f->h->seq_len;
	size_t N = (size_t)B * T;
	ibuf(&x->ids, &x->cap, 4 * N + 2 * (size_t)B);
	x->seg = x->ids + N;
	x->mask = x->seg + N;
	x->labels = x->mask + N;
	x->start = x->labels + N;
	x->end = x->start + B;
	*bb = (struct loom_bert_batch){ .input_ids = x->ids, .input_mask = x->mask };
	if (c->task == LOOM_TASK_MLM) {
		int n_in = T - 2, pad = (f->h->flags & LOOM_BATCH_F_PAD) != 0;
		for (int r = 0; r < B; r++) {
			const uint32_t *in = f->tok + (size_t)r * rec;
			int32_t *row = x->ids + (size_t)r * T, *m = x->mask + (size_t)r * T;
			int n = 0;
			while (n < n_in && !(pad && in[n] == f->h->pad_id))
				n++;
			row[0] = c->cls_id;
			for (int i = 0; i < n; i++)
				row[1 + i] = (int32_t)in[i];
			row[n + 1] = c->sep_id;
			for (int i = 0; i < T; i++) {
				m[i] = i < n + 2;
				if (i >= n + 2)
					row[i] = c->pad_token_id;
			}
		}
		for (int r = 0; r < B; r++) {
			uint64_t row = f->h->seq * ((uint64_t)B * f->h->world) +
				       (uint64_t)f->h->rank * B + (uint64_t)r;
			loom_bert_mlm_mask(x->ids + (size_t)r * T, x->labels + (size_t)r * T,
					   x->mask + (size_t)r * T, 1, T, c->vocab_size, c->cls_id,
					   c->sep_id, c->mask_id,
					   loom_splitmix64(c->seed ^ 0x6d6c6d6d61736bull ^
							   loom_splitmix64(row)));
		}
		bb->mlm_labels = x->labels;
		return;
	}
	static const char *const names[4] = { "segment_ids", "input_mask", "start_positions",
					      "end_positions" };
	int32_t *dst[4] = { x->seg, x->mask, x->start, x->end };
	const struct loom_batch_feature *ft;
	size_t nf;
	loom_batch_reader_features(f->r, &ft, &nf);
	if (!nf)
		cli_die("%s: frame %llu: token frames (version 1), but task=squad reads the "
			"features of loom-squad prepare (loom-feed --manifest PREFIX.manifest.json)",
			f->src, (unsigned long long)f->n);
	for (int k = 0; k < 4; k++) {
		size_t j = 0;
		while (j < nf && strcmp(ft[j].name, names[k]))
			j++;
		if (j == nf)
			cli_die("%s: frame %llu: no feature \"%s\": task=squad reads the features "
				"of loom-squad prepare", f->src, (unsigned long long)f->n, names[k]);
		int per_token = k < 2;
		if (ft[j].shape != (per_token ? LOOM_BATCH_PER_TOKEN : LOOM_BATCH_PER_RECORD) ||
		    (int)ft[j].length != (per_token ? rec : 1))
			cli_die("%s: frame %llu: feature \"%s\" is not %s", f->src,
				(unsigned long long)f->n, names[k],
				per_token ? "per-token" : "one value per record");
		const int64_t *v = loom_batch_reader_values(f->r, j);
		size_t n = per_token ? N : (size_t)B;
		for (size_t i = 0; i < n; i++) {
			if (v[i] < INT32_MIN || v[i] > INT32_MAX)
				cli_die("%s: frame %llu: feature \"%s\": value %lld (record %zu) is "
					"outside int32", f->src, (unsigned long long)f->n, names[k],
					(long long)v[i], per_token ? i / T : i);
			dst[k][i] = (int32_t)v[i];
		}
	}
	for (size_t i = 0; i < N; i++)
		x->ids[i] = (int32_t)f->tok[i];
	bb->segment_ids = x->seg;
	bb->start_positions = x->start;
	bb->end_positions = x->end;
}

static void bert_forward(struct trainer *t, const struct frame *f, int train, uint64_t key,
			 float *loss)
{
	struct loom_bert_batch bb;
	bert_rows(t, f, &bb);
	if (loom_bert_forward(t->b, &bb, (int)f->h->batch, t->cfg.seq_len, train, key, loss))
		cli_die("%s: frame %llu: %s", f->src, (unsigned long long)f->n,
			loom_bert_error(t->b));
}

static void bert_micro(struct run *u, const struct frame *f, uint64_t key, float scale, float *loss)
{
	struct trainer *t = u->t;
	bert_forward(t, f, 1, key, loss);
	if (loom_bert_backward(t->b, scale))
		cli_die("%s: frame %llu: %s", f->src, (unsigned long long)f->n,
			loom_bert_error(t->b));
}


/* squad: per feature; mlm: per masked token (the same masks at every
 * evaluation): loom_bert_eval_counts */
static void bert_eval(struct trainer *t, const struct frame *f, struct eval_sums *s)
{
	double a;
	int64_t n, c;
	bert_forward(t, f, 0, 0, NULL);
	loom_bert_eval_counts(t->b, &a, &n, &c);
	s->nll += a;
	s->n += n;
	s->correct += c;
}

/* The BERT's weights (and with_optimizer its moments) from ck; a
 * checkpoint without the task's head (a pretrained BertForMaskedLM or
 * BertModel) for --init-from: the head new from the seed, said in a line. */
static void bert_load(struct trainer *t, struct loom_ckpt *ck, int with_optimizer)
{
	int rc = loom_bert_ckpt_load(t->b, ck, with_optimizer ? 0 : LOOM_BERT_CKPT_NEW_HEAD,
				     t->cfg.seed);
	if (rc < 0)
		cli_die("%s", loom_bert_error(t->b));
	const char *head = t->cfg.task == LOOM_TASK_MLM ? "masked-LM (cls.predictions)"
							: "question-answering (qa_outputs)";
	const struct loom_config *c = &t->cfg;
	if (!with_optimizer && !quiet) { /* --init-from: what came from where, one line */
		char enc[160];
		snprintf(enc, sizeof enc, "the encoder (%d layers, %d wide, %d heads, vocab %d, %d "
			 "positions)", c->n_layer, c->n_embd, c->n_head, c->vocab_size, c->n_positions);
		if (rc == 1)
			cli_warn("--init-from: %s loaded; %s has no %s head: initialised from the seed",
				 enc, loom_ckpt_dir(ck), head);
		else
			cli_warn("--init-from: %s and its %s head loaded from %s", enc, head,
				 loom_ckpt_dir(ck));
	}
	if (with_optimizer) {
		struct ckpt_tables x;
		need_optimizer(ck);
		bert_tables(t->b, &x);
		load_optimizer(ck, &x);
		ckpt_tables_free(&x);
	}
}

static void bert_build(struct trainer *t, struct loom_ckpt *ck)
{
	struct loom_bert_config bc;
	loom_bert_config_from(&t->cfg, &bc);
	struct loom_err err = { 0 };
	if (loom_bert_config_check(&bc, &err))
		cli_exit(EXIT_USAGE, "%s", err.msg);
	struct loom_bert *b = the_bert = loom_bert_new(&bc);
	if (!b)
		cli_die("out of memory for %llu parameters",
			(unsigned long long)loom_config_n_params(&t->cfg));
	t->b = b;
	if (resume) {
		bert_load(t, ck, 1);
		take_state(t, ck);
	} else if (init_from) {
		ck = open_ckpt(init_from, 0);
		bert_load(t, ck, 0);
		loom_ckpt_free(ck);
	} else {
		loom_bert_init_weights(b, t->cfg.seed);
	}
	struct loom_dist_model dm;
	loom_bert_dist_model(b, &dm);
	train_dist_attach(&dm, t->cfg.grad_accum, quiet, verbose);
}

static const struct model_ops gpt_ops = {
	.build = gpt_build, .n_params = gpt_n_params, .plan = gpt_plan,
	.begin_step = gpt_begin_step, .micro = gpt_micro, .eval = gpt_eval,
	.save = gpt_save,
};

static const struct model_ops bert_ops = {
	.build = bert_build, .n_params = bert_n_params, .plan = bert_plan,
	.begin_step = bert_begin_step, .micro = bert_micro, .eval = bert_eval,
	.save = bert_save,
};

/* After step t->step (begun at t0): the --log line, the progress or
 * --log-every line. */
static void report_step(struct run *u, float lr, uint64_t ntok, double t0)
{
	struct trainer *t = u->t;
	const struct loom_config *c = &t->cfg;
	double now = loom_now(), dt = now - t0;
	/* ETA: this run's mean step time so far times the steps left */
	double eta = (now - u->t_start) / (double)(t->step - u->start_step) *
		     (double)((uint64_t)c->steps - t->step);
	char etab[32];
	cli_duration(eta, etab, sizeof etab);
	if (u->log)
		log_line(u->log, "{\"step\":%llu,\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,\"tokens\":%llu,\"tokens_per_s\":%.2f,\"seconds\":%.4f,\"eta_s\":%.1f}\n",
			 (unsigned long long)t->step, u->loss, lr, u->norm, (unsigned long long)t->tokens,
			 ntok / dt, dt, eta);
	tb_scalar(t, LOOM_TB_LOSS, u->loss);
	tb_scalar(t, LOOM_TB_LR, lr);
	tb_scalar(t, LOOM_TB_GRAD_NORM, u->norm);
	tb_scalar(t, LOOM_TB_TOKENS_PER_S, ntok / dt);
	tb_flush(t);
	if (!quiet && log_every && (t->step % log_every == 0 || t->step == (uint64_t)c->steps)) {
		cli_progress_done(&u->prog);
		cli_warn("step %llu/%lld loss %.4f lr %.3g norm %.3f %.0f tok/s ETA %s",
			 (unsigned long long)t->step, (long long)c->steps, u->loss, lr, u->norm,
			 ntok / dt, etab);
	} else if (!quiet && cli_progress_due(&u->prog)) {
		cli_progress_show(&u->prog, "step %llu/%lld loss %.4f %.0f tok/s ETA %s",
				  (unsigned long long)t->step, (long long)c->steps, u->loss, ntok / dt,
				  etab);
	}
}

/* --sample-prompt as ids: encoded with the vocabulary, or without one
 * space-separated token ids; each must be in the model's vocabulary. */
static struct loom_ids sample_prompt_ids;

static void encode_sample_prompt(const struct trainer *t)
{
	struct loom_ids *ids = &sample_prompt_ids;
	if (t->tok) {
		struct loom_bpe *e = loom_bpe_new(t->tok);
		if (!e)
			cli_die("out of memory");
		if (loom_bpe_encode(e, (const uint8_t *)sample_prompt, strlen(sample_prompt), 1, ids))
			cli_die("--sample-prompt: %s", loom_bpe_error(e));
		loom_bpe_free(e);
	} else {
		for (const char *p = sample_prompt; *p;) {
			char *end;
			p += strspn(p, " ");
			if (!*p)
				break;
			errno = 0;
			unsigned long long id = strtoull(p, &end, 10);
			if (end == p || (*end && *end != ' ') || errno || *p == '-')
				cli_exit(EXIT_USAGE, "--sample-prompt '%s': without --vocab, the prompt is token ids "
						"separated by spaces", sample_prompt);
			if (id >= (unsigned long long)t->cfg.vocab_size)
				cli_exit(EXIT_USAGE, "--sample-prompt: token %llu is outside the vocabulary of %d ids",
						id, t->cfg.vocab_size);
			if (loom_ids_reserve(ids, 1))
				cli_die("out of memory");
			ids->v[ids->n++] = (uint32_t)id;
			p = end;
		}
	}
	if (ids->n == 0)
		cli_exit(EXIT_USAGE, "--sample-prompt is empty");
	for (size_t i = 0; i < ids->n; i++)
		if (ids->v[i] >= (uint32_t)t->cfg.vocab_size)
			cli_exit(EXIT_USAGE, "--sample-prompt: token %u is outside the vocabulary of %d ids",
					ids->v[i], t->cfg.vocab_size);
}

/* p[0..n) as valid UTF-8 (U+FFFD for what is not), malloc'd. */
static char *valid_utf8(const uint8_t *p, size_t n)
{
	char *out = malloc(3 * n + 1), *o = out;
	if (!out)
		cli_die("out of memory");
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		int valid;
		size_t k = loom_utf8_decode(p + i, n - i, &cp, &valid);
		if (valid)
			memcpy(o, p + i, k), o += k;
		else
			memcpy(o, "\xef\xbf\xbd", 3), o += 3;
		i += k;
	}
	*o = 0;
	return out;
}

/* --sample-every: a short continuation of --sample-prompt (or of the first
 * token of this step's batch), greedy or sampled from the seed, decoded
 * with the run's vocabulary (ids without one): a line on stderr, a JSON
 * line {"step":N,"sample":"..."} and a TensorBoard text summary. */
static void sample(struct run *u)
{
	struct trainer *t = u->t;
	struct loom_ids ids = { 0 };
	struct loom_sampler smp;
	uint32_t eot = t->tok ? t->tok->eot : LOOM_VOCAB_NONE;
	if (loom_ids_reserve(&ids, sample_prompt_ids.n + 1 + sample_tokens))
		cli_die("out of memory");
	if (sample_prompt_ids.n) {
		memcpy(ids.v, sample_prompt_ids.v, sizeof *ids.v * sample_prompt_ids.n);
		ids.n = sample_prompt_ids.n;
	} else {
		int32_t first = u->in[0];
		ids.v[ids.n++] = first >= 0 && first < t->cfg.vocab_size ? (uint32_t)first : 0;
	}
	if (loom_sampler_init(&smp, t->g, t->tok, (float)sample_temperature, 200,
			      loom_splitmix64(t->cfg.seed ^ t->step)))
		cli_die("out of memory");
	double t0 = loom_now();
	for (uint64_t k = 0; k < sample_tokens; k++) {
		int next = loom_sampler_next(&smp, ids.v, ids.n);
		if (next < 0)
			cli_die("--sample-every: step %llu: %s", (unsigned long long)t->step,
				loom_gpt_error(t->g));
		if ((uint32_t)next == eot)
			break;
		ids.v[ids.n++] = (uint32_t)next;
	}
	loom_sampler_release(&smp);
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	if (t->tok) {
		struct loom_bpe *e = loom_bpe_new(t->tok);
		if (!e || loom_bpe_decode(e, ids.v, ids.n, 0, &buf, &len, &cap))
			cli_die("--sample-every: %s", e ? loom_bpe_error(e) : "out of memory");
		loom_bpe_free(e);
	} else {
		cap = ids.n * 11 + 1;
		if (!(buf = malloc(cap)))
			cli_die("out of memory");
		for (size_t i = 0; i < ids.n; i++)
			len += (size_t)snprintf((char *)buf + len, cap - len, "%s%u", i ? " " : "", ids.v[i]);
	}
	char *text = valid_utf8(buf, len);
	json_t *js = json_string(text);
	char *quoted = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
	if (!quoted)
		cli_die("out of memory");
	if (!t->quiet)
		cli_warn("sample step %llu (%.1f s): %s", (unsigned long long)t->step,
			 loom_now() - t0, quoted);
	if (u->log)
		log_line(u->log, "{\"step\":%llu,\"sample\":%s}\n", (unsigned long long)t->step,
			 quoted);
	if (t->tb) {
		if (loom_tb_text(t->tb, (int64_t)t->step, "samples", text))
			cli_die("--tensorboard: %s", loom_tb_error(t->tb));
		tb_flush(t);
	}
	free(quoted);
	json_decref(js);
	free(text);
	free(buf);
	loom_ids_release(&ids);
}

/* --profile: the step's time per op (loom_profile.h) on stderr and in the log */
static void report_profile(struct run *u)
{
	struct loom_prof p;
	char buf[1024];
	loom_prof_step_end(&p);
	if (u->log) {
		loom_prof_json(&p, buf, sizeof buf);
		log_line(u->log, "{\"step\":%llu,\"profile\":%s}\n",
			 (unsigned long long)u->t->step, buf);
	}
	if (!quiet) {
		loom_prof_text(&p, buf, sizeof buf);
		cli_progress_done(&u->prog);
		cli_warn("step %llu profile: %s", (unsigned long long)u->t->step, buf);
	}
}

/* Steps until --steps, the end of the input or a stop signal. */
static void train_loop(struct run *u)
{
	struct trainer *t = u->t;
	struct loom_config *c = &t->cfg;
	struct loom_gpt *g = t->g; /* NULL but for model=gpt */
	while (t->step < (uint64_t)c->steps && !stop_sig && !u->ended) {
		double t0 = loom_now();
		double lsum = 0;
		char msg[160];
		loom_prof_step_begin();
		if (loom_threads_adapt(&pool, "step", t->step + 1, msg, sizeof msg) && t->verbose)
			cli_warn("%s", msg); /* -v: the thread count changed */
		/* gradients are zero here: the step leaves them so */
		t->ops->begin_step(t);
		int micro = run_micro_batches(u, &lsum);
		if (stop_sig && micro == 0)
			break;
		if (u->ended)
			train_dist_sync(t->step + 1, 1, &stop_sig);
		if (u->ended) {
			if (micro && t->step == u->start_step) /* nothing trained: no checkpoint */
				trained_nothing(c, micro, resume != NULL);
			if (micro)
				cli_warn("input ended inside step %llu (%d of %d micro-batches); that step is dropped",
					 (unsigned long long)t->step + 1, micro, c->grad_accum);
			break;
		}
		t->step++;
		float lr = (float)loom_config_lr(c, (int64_t)t->step);
		train_dist_step(lr, (int64_t)t->step, &u->norm, &lsum); /* build attached the model */
		u->loss = (float)(lsum / c->grad_accum);
		uint64_t ntok = (uint64_t)c->global_batch * u->T; /* all ranks */
		t->samples += (uint64_t)c->global_batch;
		t->tokens += ntok;
		if (!isfinite(u->loss))
			cli_die("step %llu: loss is %f (diverged); lower lr or check the data",
				(unsigned long long)t->step, u->loss);
		report_step(u, lr, ntok, t0);
		if (profile)
			report_profile(u);
		if (g && g->rigl && g->rigl->last_update == (int64_t)t->step)
			log_rigl(t, u->log);
		if (eval_every && t->step % eval_every == 0 &&
		    (train_dist_rank() == 0 || loom_config_shards_weights(c)))
			evaluate(t, eval_data, u->log);
		if (sample_every && t->step % sample_every == 0)
			sample(u);
		if (save && save_every && t->step % save_every == 0 && t->step < (uint64_t)c->steps &&
		    !stop_sig)
			t->ops->save(t);
	}
}

int main(int argc, char **argv)
{
	cli_key_hint(&cmd, argc, argv, loom_config_is_key);
	cli_parse(&cmd, argc, argv);
	verbose = cli_verbose;
	quiet = cli_quiet;
	check_args(argc, argv);
	set_up_process(&argc, &argv);
	loom_prof_enable(profile);

	struct trainer t = { .verbose = verbose, .quiet = quiet, .save_dir = save,
			     .keep = (unsigned)keep };
	struct loom_config *c = &t.cfg;
	struct origins orig;
	struct loom_ckpt *ck = resolve_config(&t, &orig);
	if (print) {
		char *s = loom_config_dump(c);
		if (!s)
			cli_die("out of memory");
		fputs(s, stdout);
		free(s);
		free(sets);
		return 0; /* a write error: cli_init's check of stdout at exit */
	}
	if (dry) {
		print_dry_run(c, t.ops, mem_per_rank, mem_name);
		free(sets);
		return 0;
	}
	if (isatty(STDIN_FILENO))
		cli_usage_error("stdin is a terminal: pipe batch frames in (loom-feed ... | loom-train)");

	t.ops->build(&t, ck);
	struct run u = { .t = &t, .orig = &orig, .B = c->micro_batch, .T = c->seq_len,
			 .first = 1, .start_step = t.step };
	u.log = open_log(&t);
	if (tb_dir)
		open_tb(&t);
	catch_stop_signals();
	u.r = reader_for_task(loom_batch_reader_new(STDIN_FILENO, "stdin"));
	if (train_dist_world() > 1)
		loom_batch_reader_on_wait(u.r, wait_frames, &u);
	u.eval_rec = eval_data ? check_eval_data(eval_data) : 0;
	if (sample_prompt && sample_every)
		encode_sample_prompt(&t);
	u.t_start = loom_now();
	cli_progress_init(&u.prog, cli_force_progress);

	train_loop(&u);
	cli_progress_done(&u.prog);
	if (stop_sig && !quiet)
		cli_warn("%s: stopping after step %llu", strsignal(stop_sig),
			 (unsigned long long)t.step);
	if (u.first && !stop_sig && t.step < (uint64_t)c->steps)
		cli_die("stdin: no batches (an empty stream)");
	/* ended before the steps the command line asked for: exit 1 */
	int short_run = !stop_sig && t.step < (uint64_t)c->steps && !allow_short &&
			(have_steps || loom_config_cli_set(c, "steps"));
	if (!stop_sig && (!quiet || short_run) && t.step < (uint64_t)c->steps)
		cli_warn("stdin: the input ended after step %llu of %lld (loom-feed --epochs N, or 0 "
			 "for no end, feeds more)%s", (unsigned long long)t.step, (long long)c->steps,
			 short_run ? ": exit 1 once saved (--allow-short: exit 0)" : "");
	if (save && t.saved != t.step + 1 && (t.step > u.start_step || !resume))
		t.ops->save(&t);
	double el = loom_now() - u.t_start;
	if (!quiet) {
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		char mb[32];
		cli_warn("done: %llu step%s, loss %.4f, %.1f s, %.0f tok/s, peak RSS %s",
			 (unsigned long long)t.step, t.step == 1 ? "" : "s", u.loss, el,
			 el > 0 ? (t.tokens - u.start_step * (uint64_t)c->global_batch * u.T) / el : 0.0,
			 cli_bytes(ru.ru_maxrss * 1024.0, mb, sizeof mb));
	}
	if (u.log && u.log != stdout && fclose(u.log))
		cli_die("--log %s: %s", logpath, strerror(errno));
	struct loom_err err;
	if (loom_tb_close(t.tb, &err))
		cli_die("--tensorboard: %s", err.msg);
	loom_batch_reader_free(u.r);
	free(u.in);
	free(u.tg);
	free(t.rows.ids);
	free(sets);
	free((char *)t.vocab.name);
	free((char *)t.vocab.files[0].data);
	free((char *)t.vocab.files[1].data);
	loom_vocab_free(t.tok);
	loom_bert_squad_eval_free(squad_ev);
	loom_wordpiece_free(squad_w);
	loom_ids_release(&sample_prompt_ids);
	return short_run;
}
