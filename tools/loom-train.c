/* loom-train - batches on stdin -> GPT or BERT training -> checkpoints.
 *
 *   loom-feed --batch 8 --seq 64 shards/s-0.tfrecord | loom-train --config small --save ckpt
 *   loom-feed --manifest sq.manifest.json | loom-train --config bert-tiny --save ckpt
 *
 * Reads binary batch frames (formats/batch.md, lib/data/loom_batch.h) and
 * trains with the engine of lib/train/loom_trainer.h (the GPT of
 * lib/train/loom_gpt.h, model=gpt, or the BERT of lib/train/loom_bert.h,
 * model=bert: task=squad on squad-features frames, task=mlm on token
 * frames, behind one model interface), AdamW, over the ranks of
 * train_dist.h under mpirun.  This file holds the options, the loop (as
 * llm.c's: read a step's frames, forward and backward, step, report),
 * logs, evaluation and sample reports, checkpoints at their times and
 * --keep-best's promotions (the engine's, told in a line);
 * --dry-run's printout is train_plan.c's.  SIGINT/SIGTERM finish the
 * current step, save and exit 0; --resume continues bit-exactly.
 */
#include <cblas.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "loom_batch.h"
#include "loom_bert_squad.h"
#include "loom_blas.h"
#include "loom_config.h"
#include "loom_file.h"
#include "loom_generate.h"
#include "loom_gpt.h"
#include "loom_kernels.h"
#include "loom_mm.h"
#include "loom_profile.h"
#include "loom_rigl.h"
#include "loom_tb.h"
#include "loom_trainer.h"
#include "loom_vocab.h"
#include "loom_wordpiece.h"
#include "train_dist.h"
#include "train_plan.h"

static volatile sig_atomic_t stop_sig;

/* Released at exit, after the data-parallel layer let go of its model. */
static struct loom_trainer trainer;

static void free_model(void)
{
	loom_trainer_release(&trainer);
}

/* The trainer's error: a usage error exits 2, the others 1. */
static void check(int rc)
{
	if (rc && trainer.usage)
		cli_exit(EXIT_USAGE, "%s", trainer.err.msg);
	if (rc)
		cli_die("%s", trainer.err.msg);
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

/* A scalar of this step: offered to --keep-best (loom_trainer_offer) and
 * for --tensorboard queued until tb_flush (at each log line); a write
 * error ends the run with one line naming the file. */
static struct loom_tb *tb;

static void scalar(struct loom_trainer *t, enum loom_tb_tag k, double v)
{
	loom_trainer_offer(t, loom_tb_tags[k].tag, v);
	if (tb && loom_tb_scalar(tb, (int64_t)t->step, loom_tb_tags[k].tag, v))
		cli_die("--tensorboard: %s", loom_tb_error(tb));
}

static void tb_flush(void)
{
	if (tb && loom_tb_flush(tb))
		cli_die("--tensorboard: %s", loom_tb_error(tb));
}

/* --save DIR, held for the run (loom_ckpt_dir_lock); released at exit. */
static struct loom_ckpt_dir_lock save_lock = { .fd = -1 };

static void unlock_save_dir(void)
{
	loom_ckpt_dir_unlock(&save_lock);
}

/* Held-out evaluation over every frame of `path`: the mean loss, for the
 * GPT (per token) with its perplexity, and the share predicted right
 * (GPT: next tokens; squad: rows whose start and end are both the argmax;
 * mlm: masked tokens). */
static uint64_t eval_batches, eval_train; /* --eval-batches (0: all), --eval-train */
static const char *eval_squad, *keep_best; /* --eval-squad: EM/F1; --keep-best METRIC */

/* --eval-squad: the official EM and F1 of the model's answers. */
static void squad_scores(struct loom_trainer *t, FILE *log)
{
	double t0 = loom_now(), em, f1;
	check(loom_trainer_squad_scores(t, &em, &f1));
	if (!t->o.quiet)
		cli_warn("eval step %llu: exact_match %.4f f1 %.4f (%zu questions, %zu features, %.1f s)",
			 (unsigned long long)t->step, em, f1, loom_bert_squad_eval_questions(t->squad_ev),
			 loom_bert_squad_eval_features(t->squad_ev), loom_now() - t0);
	if (log)
		log_line(log, "{\"step\":%llu,\"eval_exact_match\":%.9g,\"eval_f1\":%.9g}\n",
			 (unsigned long long)t->step, em, f1);
	scalar(t, LOOM_TB_EVAL_EM, em);
	scalar(t, LOOM_TB_EVAL_F1, f1);
}

static void evaluate(struct loom_trainer *t, const char *path, FILE *log)
{
	struct loom_eval_sums sum;
	double t0 = loom_now();
	check(loom_trainer_evaluate(t, path, eval_batches, &pool, &sum));
	double loss = sum.n ? sum.nll / sum.n : 0, acc = sum.n ? (double)sum.correct / sum.n : 0.0;
	int lm = t->cfg.model == LOOM_MODEL_GPT, sq = t->cfg.task == LOOM_TASK_SQUAD;
	const char *what = lm ? "tokens" : sq ? "features" : "masked tokens";
	char ppl[48] = "", ppl_j[48] = ""; /* a perplexity means nothing for squad */
	if (!sq) {
		snprintf(ppl, sizeof ppl, " ppl %.2f", exp(loss));
		snprintf(ppl_j, sizeof ppl_j, ",\"eval_ppl\":%.9g", exp(loss));
	}
	if (!t->o.quiet)
		cli_warn("eval step %llu: loss %.4f%s acc %.4f (%lld %s, %.1f s)",
			 (unsigned long long)t->step, loss, ppl, acc, (long long)sum.n, what,
			 loom_now() - t0);
	if (log)
		log_line(log, "{\"step\":%llu,\"eval_loss\":%.9g%s,\"eval_acc\":%.6f,\"eval_%s\":%lld}\n",
			 (unsigned long long)t->step, loss, ppl_j, acc,
			 lm ? "tokens" : sq ? "features" : "masked", (long long)sum.n);
	scalar(t, LOOM_TB_EVAL_LOSS, loss);
	if (!sq)
		scalar(t, LOOM_TB_EVAL_PPL, exp(loss));
	scalar(t, LOOM_TB_EVAL_ACC, acc);
	if (eval_squad)
		squad_scores(t, log);
	int held = loom_trainer_evaluate_held(t, &pool, &sum);
	check(held < 0 ? held : 0);
	if (held && sum.n && !t->o.quiet)
		cli_warn("eval step %llu: train sample loss %.4f (the first %llu micro-batches)",
			 (unsigned long long)t->step, sum.nll / sum.n, (unsigned long long)eval_train);
	if (held && sum.n && log)
		log_line(log, "{\"step\":%llu,\"eval_train_loss\":%.9g}\n",
			 (unsigned long long)t->step, sum.nll / sum.n);
	if (held && sum.n)
		scalar(t, LOOM_TB_EVAL_TRAIN_LOSS, sum.nll / sum.n);
	tb_flush();
}

/* --keep-best: after an evaluation, rank 0's decision on every rank (a
 * save is collective); an improvement is written as SAVE/best, said in a
 * line and a log line. */
static void promote(struct loom_trainer *t, FILE *log)
{
	struct loom_ckpt_best was;
	if (!train_dist_agree(loom_trainer_improves(t)))
		return;
	check(loom_trainer_save_best(t, &was));
	char before[96] = "the first";
	if (was.metric[0] && !strcmp(was.metric, keep_best))
		snprintf(before, sizeof before, "was %.6g at step %llu", was.value,
			 (unsigned long long)was.step);
	if (!t->o.quiet)
		cli_warn("best step %llu: %s %.6g (%s): saved %s/best -> %s",
			 (unsigned long long)t->step, keep_best, t->best.value, before, t->o.save_dir,
			 strrchr(t->best_path, '/') ? strrchr(t->best_path, '/') + 1 : t->best_path);
	if (log)
		log_line(log, "{\"step\":%llu,\"best_metric\":\"%s\",\"best_value\":%.9g}\n",
			 (unsigned long long)t->step, keep_best, t->best.value);
}

/* A RigL mask update happened at this step: a JSON line and, under -v,
 * a line on stderr. */
static void log_rigl(struct loom_trainer *t, FILE *log)
{
	struct loom_rigl_stats st;
	loom_rigl_stats(t->g->rigl, &st);
	double ratio = loom_config_prune_ratio(&t->cfg, (int64_t)t->step);
	if (log)
		log_line(log, "{\"step\":%llu,\"rigl_update\":%lld,\"prune_ratio\":%.6g,\"pruned\":%lld,\"regrown\":%lld,\"live_blocks\":%lld,\"blocks\":%lld,\"density\":%.9g,\"churn\":%.6g,\"churn_init\":%.6g}\n",
			 (unsigned long long)t->step, (long long)t->g->rigl->updates, ratio,
			 (long long)st.pruned, (long long)st.regrown, (long long)st.live,
			 (long long)st.blocks, st.density, st.churn_last, st.churn_init);
	scalar(t, LOOM_TB_DENSITY, st.density);
	scalar(t, LOOM_TB_CHURN, st.churn_last);
	tb_flush();
	if (t->o.verbose)
		cli_warn("step %llu: RigL update %lld: ratio %.4f, %lld blocks pruned, %lld regrown, density %.4f (%lld of %lld blocks), churn %.4f since the last update, %.4f since the start",
			 (unsigned long long)t->step, (long long)t->g->rigl->updates, ratio,
			 (long long)st.pruned, (long long)st.regrown, st.density, (long long)st.live,
			 (long long)st.blocks, st.churn_last, st.churn_init);
}

/* The command line */
static const char *config, *save, *resume, *init_from, *logpath, *eval_data, *vocab_spec,
	*tb_dir, *sample_prompt;
static char **sets;
static int nsets, print, dry, recompute, bench, have_steps, have_seed, threads, profile,
	allow_short;
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
	OPT_CALLBACK(0, "memory-per-rank", train_plan_on_memory, "SIZE",
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
	OPT_ENUM(0, "keep-best", &keep_best, "METRIC", LOOM_TRAINER_METRICS,
		 "after each evaluation that improves METRIC\n(eval/loss, eval/f1, ...), save SAVE/best"),
	OPT_U64(0, "eval-train", &eval_train, "N", 1, 4096,
		"at each evaluation also the loss over the run's first\n"
		"N training micro-batches, kept (default: none)"),
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
	OPT_INT('j', "threads", &threads, "N", 1, 1024, "the team's threads: every op and product (default:\n"
		"the cores other processes leave free, looked at\n"
		"every step)"),
	OPT_BOOL(0, "bench-sgemm", &bench, "measure the best product GFLOP/s and exit"),
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
	if (eval_train && !eval_data)
		cli_usage_error("--eval-train needs --eval-data (it reports beside its evaluations)");
	if (eval_squad && !eval_data)
		cli_usage_error("--eval-squad needs --eval-data (the file's features, loom-squad prepare)");
	if (keep_best && (!save || !eval_every))
		cli_usage_error("--keep-best needs --save DIR and --eval-every N (it promotes at "
				"evaluations)");
	if (resume && !strcmp(resume, "latest")) {
		if (!save)
			cli_usage_error("--resume latest needs --save DIR");
		resume = save;
	}
	if (save_every && !save)
		cli_usage_error("--save-every needs --save DIR");
	if (sample_prompt && !sample_every)
		cli_usage_error("--sample-prompt needs --sample-every N");
	if (train_plan_has_memory() && !dry)
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
	struct loom_err err;
	if (save && !print && !dry && !bench && train_dist_rank() == 0) {
		if (loom_ckpt_dir_lock(save, &save_lock, &err)) /* before --resume latest reads it */
			cli_die("--save %s", err.msg);
		atexit(unlock_save_dir);
	}
	loom_threads_init(&pool, threads);
	if (verbose && !print) {
		char d[96];
		cli_warn("OpenBLAS core '%s', %s", loom_blas_core(),
			 loom_threads_describe(&pool, d, sizeof d));
	}
	if (bench) {
		double gf = train_bench_sgemm(verbose);
		printf("sgemm_gflops %.2f threads %d core %s\n", gf, omp_get_max_threads(),
		       openblas_get_corename());
		free(sets);
		exit(0);
	}
}

/* The configuration (lib/train/loom_trainer.h) with what the process
 * adds: the ranks, bf16's library, --sample-every's limits. */
static void resolve_config(struct loom_trainer *t)
{
	struct loom_config *c = &t->cfg;
	check(loom_trainer_configure(t));
	if (!print && !dry)
		train_dist_config(c, sets, nsets);
	if (loom_config_validate(c)) /* the same on every rank: rank 0 says it */
		train_dist_agreed_exit(EXIT_USAGE, "%s", loom_config_error(c));
	char why[256];
	if (c->precision == LOOM_PREC_BF16 && !print && loom_mm_bf16_missing(why, sizeof why))
		cli_die("precision=bf16: %s", why);
	if (c->data_parallel * c->tensor_parallel != train_dist_world() && !print && !dry)
		cli_exit(EXIT_USAGE, "data_parallel: loom-train runs one rank; %d needs one process per rank",
			 c->data_parallel);
	if (loom_trainer_settle(t)) /* the same on every rank: rank 0 says it */
		train_dist_agreed_exit(t->usage ? EXIT_USAGE : EXIT_FAILURE, "%s", t->err.msg);
	if (loom_config_shards_weights(c) && sample_every)
		train_dist_agreed_exit(EXIT_USAGE, "--sample-every: not with sharding=weights over "
				       "%d ranks (every rank would sample with it); sample a "
				       "checkpoint with loom-eval generate", c->data_parallel);
	if (train_dist_replica() != 0) /* replica 0 samples (its tensor-parallel ranks */
		sample_every = 0;      /* together, rank 0 says it); it evaluates alone unless
				        * the weights are sharded (every rank takes part) */
	if (c->model != LOOM_MODEL_GPT && sample_every)
		cli_exit(EXIT_USAGE, "--sample-every: only a GPT samples (model is %s)",
			 loom_model_name(c->model));
	if (eval_squad && !vocab_spec && !resume)
		cli_usage_error("--eval-squad needs --vocab (its questions are tokenized with it)");
	if (c->model != LOOM_MODEL_BERT && cli_casing != LOOM_CASING_AUTO)
		cli_usage_error("--lowercase/--cased are for a WordPiece vocabulary (model=bert)");
	check(loom_trainer_load_vocab(t, vocab_spec));
}

/* A checkpoint (a line under -v). */
static void save_checkpoint(struct loom_trainer *t)
{
	double t0 = loom_now();
	check(loom_trainer_save(t));
	if (verbose)
		cli_warn("saved %s (%.2f s)", t->saved_path, loom_now() - t0);
}

/* --log: stdout, or FILE (appended to when resuming, cut at the step). */
static FILE *open_log(const struct loom_trainer *t)
{
	FILE *log = NULL;
	log_name = logpath;
	if (logpath && !strcmp(logpath, "-")) {
		log = stdout;
	} else if (logpath) {
		struct loom_err merr;
		if (loom_mkdir_parent(logpath, &merr) < 0)
			cli_die("%s", merr.msg);
		if (t->step && loom_trainer_trim_log(logpath, t->step, &merr))
			cli_die("%s", merr.msg);
		if (!(log = fopen(logpath, t->step ? "a" : "w")))
			cli_die("cannot open '%s': %s", logpath, strerror(errno));
	}
	return log;
}

/* --tensorboard DIR: a new event file (a resumed run adds one), the
 * configuration as its first text summary. */
static void open_tb(struct loom_trainer *t)
{
	struct loom_err err;
	if (!(tb = loom_tb_open(tb_dir, &err)))
		cli_die("--tensorboard: %s", err.msg);
	char *cj = loom_config_dump(&t->cfg), *md = NULL;
	if (!cj || asprintf(&md, "```\n%s```\n", cj) < 0)
		cli_die("out of memory");
	if (loom_tb_text(tb, (int64_t)t->step, "config", md))
		cli_die("--tensorboard: %s", loom_tb_error(tb));
	tb_flush();
	if (verbose)
		cli_warn("TensorBoard events: %s", loom_tb_path(tb));
	free(cj);
	free(md);
}

/* The training loop's state besides the trainer's. */
struct run {
	struct loom_trainer *t;
	struct loom_batch_reader *r;
	int B, T;               /* the batches' (until the first frame: the config's) */
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
	check(loom_trainer_fit_frame(u->t, (int)h->batch, (int)h->seq_len, frame));
	if (!quiet)
		train_print_model_line(u->t, pool.n);
	u->B = c->micro_batch;
	u->T = c->seq_len;
	int need = u->T + loom_config_record_extra(c);
	if (u->eval_rec && (u->eval_rec < need || (u->t->read_features && u->eval_rec != need)))
		cli_die("%s: seq_len: %d needs records of %d tokens, the batches have %d",
			eval_data, u->T, need, u->eval_rec);
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
	if (train_dist_wait_input(fd, limit, &stop_sig) < 0)
		train_dist_fail(u->t->step + 1, "stdin: no data for %g s (dist_timeout) after %llu frames: "
				"its loom-feed stopped sending (stopped, hung or waiting itself)",
				limit, (unsigned long long)loom_batch_reader_frames(u->r));
}

/* The micro-batches of one step, forward and backward; returns how many
 * were done (u->ended: the input ended first), their loss sum in *lsum. */
static int run_micro_batches(struct run *u, double *lsum)
{
	struct loom_trainer *t = u->t;
	struct loom_config *c = &t->cfg;
	struct loom_batch_hdr h;
	const uint32_t *tok;
	int micro, rc;
	for (micro = 0; micro < c->grad_accum; micro++) {
		int sync = train_dist_micro_begin(micro, micro == c->grad_accum - 1);
		if (micro == 0 && train_dist_world() == 1 && !train_dist_wait_input(STDIN_FILENO, 0, &stop_sig))
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
		check(loom_trainer_check_ids(t, &h, tok, frame));
		check(loom_trainer_hold(t, u->r, &h, tok));
		float l;
		struct loom_frame f = { .h = &h, .tok = tok, .r = u->r, .src = "stdin", .n = frame };
		check(loom_trainer_micro(t, &f, micro, &l));
		train_dist_micro_end();
		*lsum += l;
	}
	return micro;
}

/* After step t->step (begun at t0): the --log line, the progress or
 * --log-every line. */
static void report_step(struct run *u, float lr, uint64_t ntok, double t0)
{
	struct loom_trainer *t = u->t;
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
	scalar(t, LOOM_TB_LOSS, u->loss);
	scalar(t, LOOM_TB_LR, lr);
	scalar(t, LOOM_TB_GRAD_NORM, u->norm);
	scalar(t, LOOM_TB_TOKENS_PER_S, ntok / dt);
	tb_flush();
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

/* --sample-every: a short continuation of --sample-prompt (or of the first
 * token of this step's batch), greedy or sampled from the seed, decoded
 * with the run's vocabulary (ids without one; lib/train/loom_generate.h):
 * a line on stderr, a JSON line {"step":N,"sample":"..."} and a
 * TensorBoard text summary. */
static void sample(struct run *u)
{
	struct loom_trainer *t = u->t;
	int32_t in0 = t->scratch.buf[0]; /* the first input of the step's last micro-batch */
	uint32_t first = in0 >= 0 && in0 < t->cfg.vocab_size ? (uint32_t)in0 : 0;
	char *text = NULL;
	double t0 = loom_now();
	int rc = loom_trainer_sample(t, sample_prompt_ids.n ? sample_prompt_ids.v : &first,
				     sample_prompt_ids.n ? sample_prompt_ids.n : 1, sample_tokens,
				     (float)sample_temperature, &text);
	if (rc)
		cli_die("%s%s", rc == LOOM_ENOMEM ? "" : "--sample-every: ", t->err.msg);
	json_t *js = text ? json_string(text) : NULL;
	char *quoted = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
	if (!quoted)
		cli_die("out of memory");
	if (!t->o.quiet)
		cli_warn("sample step %llu (%.1f s): %s", (unsigned long long)t->step,
			 loom_now() - t0, quoted);
	if (u->log)
		log_line(u->log, "{\"step\":%llu,\"sample\":%s}\n", (unsigned long long)t->step,
			 quoted);
	if (tb) {
		if (loom_tb_text(tb, (int64_t)t->step, "samples", text))
			cli_die("--tensorboard: %s", loom_tb_error(tb));
		tb_flush();
	}
	free(quoted);
	json_decref(js);
	free(text);
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
	struct loom_trainer *t = u->t;
	struct loom_config *c = &t->cfg;
	struct loom_gpt *g = t->g; /* NULL but for model=gpt */
	while (t->step < (uint64_t)c->steps && !stop_sig && !u->ended) {
		double t0 = loom_now();
		double lsum = 0;
		char msg[160];
		loom_prof_step_begin();
		if (loom_threads_adapt(&pool, "step", t->step + 1, msg, sizeof msg) && t->o.verbose)
			cli_warn("%s", msg); /* -v: the thread count changed */
		/* gradients are zero here: the step leaves them so */
		loom_trainer_begin_step(t);
		int micro = run_micro_batches(u, &lsum);
		if (stop_sig && micro == 0)
			break;
		if (u->ended)
			train_dist_sync(t->step + 1, 1, &stop_sig);
		if (u->ended) {
			if (micro && t->step == u->start_step) /* nothing trained: no checkpoint */
				train_dist_trained_nothing(c->grad_accum, micro, resume != NULL);
			if (micro)
				cli_warn("input ended inside step %llu (%d of %d micro-batches); that step is dropped",
					 (unsigned long long)t->step + 1, micro, c->grad_accum);
			break;
		}
		float lr;
		loom_trainer_step(t, &lsum, &lr, &u->norm);
		u->loss = (float)(lsum / c->grad_accum);
		uint64_t ntok = (uint64_t)c->global_batch * u->T; /* all ranks */
		if (!isfinite(u->loss))
			cli_die("step %llu: loss is %f (diverged); lower lr or check the data",
				(unsigned long long)t->step, u->loss);
		report_step(u, lr, ntok, t0);
		if (profile)
			report_profile(u);
		if (g && g->rigl && g->rigl->last_update == (int64_t)t->step)
			log_rigl(t, u->log);
		if (eval_every && t->step % eval_every == 0 && /* replica 0's ranks split it */
		    (train_dist_replica() == 0 || loom_config_shards_weights(c)))
			evaluate(t, eval_data, u->log);
		if (keep_best && t->step % eval_every == 0)
			promote(t, u->log);
		if (sample_every && t->step % sample_every == 0)
			sample(u);
		if (save && save_every && t->step % save_every == 0 && t->step < (uint64_t)c->steps &&
		    !stop_sig)
			save_checkpoint(t);
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

	struct loom_trainer_opts o = {
		.config = config, .sets = sets, .nsets = nsets, .resume = resume,
		.init_from = init_from, .have_steps = have_steps, .have_seed = have_seed,
		.recompute = recompute, .steps = steps, .seed = seed, .save_dir = save,
		.keep = (unsigned)keep, .verbose = verbose, .quiet = quiet, .casing = cli_casing,
		.held = (unsigned)eval_train, .eval_squad = eval_squad, .keep_best = keep_best,
	};
	struct loom_trainer_hooks hk;
	train_dist_hooks(&hk, &trainer);
	loom_trainer_init(&trainer, &o, &hk);
	struct loom_trainer *t = &trainer;
	struct loom_config *c = &t->cfg;
	resolve_config(t);
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
		train_print_dry_run(c);
		free(sets);
		return 0;
	}
	if (isatty(STDIN_FILENO))
		cli_usage_error("stdin is a terminal: pipe batch frames in (loom-feed ... | loom-train)");

	check(loom_trainer_build(t));
	struct run u = { .t = t, .B = c->micro_batch, .T = c->seq_len, .first = 1,
			 .start_step = t->step };
	u.log = open_log(t);
	if (tb_dir)
		open_tb(t);
	train_dist_catch_stops(&stop_sig);
	if (!(u.r = loom_batch_reader_new(STDIN_FILENO, "stdin")))
		cli_die("out of memory");
	if (t->read_features)
		loom_batch_reader_accept_features(u.r);
	else
		loom_batch_reader_features_hint(u.r, "SQuAD features train task=squad, which needs a "
					       "BERT preset (-c squad-base, bert-base, bert-tiny)");
	if (train_dist_world() > 1)
		loom_batch_reader_on_wait(u.r, wait_frames, &u);
	struct loom_err err;
	if (eval_data && loom_eval_check(eval_data, t->read_features, &u.eval_rec, &err))
		cli_die("%s", err.msg);
	int rc = sample_prompt && sample_every
		 ? loom_generate_prompt(t->tok, sample_prompt, "--sample-prompt", t->cfg.vocab_size,
					&sample_prompt_ids, &err) : 0;
	if (rc)
		cli_exit(rc == LOOM_EINVAL ? EXIT_USAGE : EXIT_FAILURE, "%s", err.msg);
	u.t_start = loom_now();
	cli_progress_init(&u.prog, cli_force_progress);

	train_loop(&u);
	train_dist_tp_bound(t); /* tensor parallelism: the bytes its exit report expects */
	cli_progress_done(&u.prog);
	if (stop_sig && !quiet) {
		char from[96];
		cli_warn("%s: stopping after step %llu%s", strsignal(stop_sig),
			 (unsigned long long)t->step, train_dist_stop_from(from, sizeof from));
	}
	if (u.first && !stop_sig && t->step < (uint64_t)c->steps)
		cli_die("stdin: no batches (an empty stream)");
	/* ended before the steps the command line asked for: exit 1 */
	int short_run = !stop_sig && t->step < (uint64_t)c->steps && !allow_short &&
			(have_steps || loom_config_cli_set(c, "steps"));
	if (!stop_sig && (!quiet || short_run) && t->step < (uint64_t)c->steps)
		cli_warn("stdin: the input ended after step %llu of %lld (loom-feed --epochs N, or 0 "
			 "for no end, feeds more)%s", (unsigned long long)t->step, (long long)c->steps,
			 short_run ? ": exit 1 once saved (--allow-short: exit 0)" : "");
	if (save && t->saved != t->step + 1 && (t->step > u.start_step || !resume))
		save_checkpoint(t);
	double el = loom_now() - u.t_start;
	if (!quiet) {
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		char mb[32];
		cli_warn("done: %llu step%s, loss %.4f, %.1f s, %.0f tok/s, peak RSS %s",
			 (unsigned long long)t->step, t->step == 1 ? "" : "s", u.loss, el,
			 el > 0 ? (t->tokens - u.start_step * (uint64_t)c->global_batch * u.T) / el : 0.0,
			 cli_bytes(ru.ru_maxrss * 1024.0, mb, sizeof mb));
	}
	if (u.log && u.log != stdout && fclose(u.log))
		cli_die("--log %s: %s", logpath, strerror(errno));
	if (loom_tb_close(tb, &err))
		cli_die("--tensorboard: %s", err.msg);
	loom_batch_reader_free(u.r);
	free(sets);
	loom_ids_release(&sample_prompt_ids);
	return short_run;
}
