/* loom-feed - TFRecord shards -> shuffled micro-batches as binary frames on
 * stdout (formats/batch.md).  The engine (the permutation, the worker ring,
 * the manifest checks) is lib/data/loom_feed.h; here: the options, --resume,
 * writing the frames, progress and the summary line.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "loom_batch.h"
#include "loom_ckpt.h"
#include "loom_feed.h"
#include "loom_file.h"

struct args {
	struct loom_feed_opts o;
	const char *resume;
	uint64_t skip;
	int force;
};

/* The options' values (-q and --progress: cli_quiet, cli_force_progress) */
static struct args args = { .o = { .epochs = 1, .threads = 2, .world = 1 } };
static uint64_t bucket; /* --bucket N: args.o.bucket */
static int have_b, have_t, have_s, have_skip;

static void on_batch(const char *opt, const char *arg)
{
	args.o.batch = (uint32_t)cli_u64(opt, arg, 1, 1u << 20);
	have_b = 1;
}

static void on_seq(const char *opt, const char *arg)
{
	args.o.seq_len = (uint32_t)cli_u64(opt, arg, 1, 1u << 24) + 1;
	have_t = 1;
}

static void on_seed(const char *opt, const char *arg)
{
	args.o.seed = cli_u64(opt, arg, 0, UINT64_MAX);
	have_s = 1;
}

static void on_rank(const char *opt, const char *arg)
{
	args.o.rank = (uint32_t)cli_u64(opt, arg, 0, 65534);
}

static void on_world(const char *opt, const char *arg)
{
	args.o.world = (uint32_t)cli_u64(opt, arg, 1, 65535);
}

static void on_skip(const char *opt, const char *arg)
{
	args.skip = cli_u64(opt, arg, 0, UINT64_MAX / 2);
	have_skip = 1;
}

static void on_pad(const char *opt, const char *arg)
{
	args.o.pad_id = (uint32_t)cli_u64(opt, arg, 0, UINT32_MAX);
	args.o.pad = 1;
}

static void on_dtype(const char *opt, const char *arg)
{
	(void)opt;
	if (strcmp(arg, "auto") == 0)
		args.o.dtype = 0;
	else if (strcmp(arg, "u16") == 0)
		args.o.dtype = LOOM_BATCH_U16;
	else if (strcmp(arg, "u32") == 0)
		args.o.dtype = LOOM_BATCH_U32;
	else
		cli_usage_error("--dtype: '%s' is not auto, u16 or u32", arg);
}

static void on_threads(const char *opt, const char *arg)
{
	args.o.threads = (unsigned)cli_u64(opt, arg, 1, 64);
}

static const struct cli_opt opts[] = {
	OPT_STRING('m', "manifest", &args.o.manifest, "FILE",
		   "shards listed in loom-shard's manifest (paths relative to it);\n"
		   "each shard must have the size the manifest records;\n"
		   "loom-squad's: the features too, no --seq"),
	OPT_BOOL(0, "verify", &args.o.verify, "also check each shard's sha256 against the manifest"),
	OPT_CALLBACK('b', "batch", on_batch, "B", "records per frame (per rank)"),
	OPT_CALLBACK(0, "seq", on_seq, "T", "sequence length T; each record gives T+1 tokens"),
	OPT_ALIAS('t', NULL, "seq"),
	OPT_CALLBACK('s', "seed", on_seed, "S", "shuffle seed (same seed = same bytes)"),
	OPT_U64('e', "epochs", &args.o.epochs, "E", 0, UINT32_MAX,
		"passes over the data (default: 1; 0 = endless)"),
	OPT_U64(0, "bucket", &bucket, "N", 0, 4096,
		"records of similar size in a batch: each window of N\n"
		"global batches sorted by size (default: 0, off)"),
	OPT_CALLBACK(0, "rank", on_rank, "R", "this rank's slice of each global batch (default: 0)"),
	OPT_CALLBACK(0, "world", on_world, "W", "number of ranks (default: 1); global batch = B x W"),
	OPT_CALLBACK(0, "skip-batches", on_skip, "N", "start at global batch N (sequence number N)"),
	OPT_STRING(0, "resume", &args.resume, "CKPT", "start where checkpoint CKPT's training stopped"),
	OPT_CALLBACK(0, "pad", on_pad, "ID", "pad records shorter than T+1 with ID (else an error)"),
	OPT_ENUM_CALLBACK(0, "dtype", on_dtype, "D", "auto u16 u32",
			  "auto (u16 when every id fits, per frame), u16 or u32"),
	OPT_CALLBACK('j', "threads", on_threads, "N", "read-ahead threads (default: 2)"),
	OPT_BOOL(0, "text", &args.o.text, "write \"SEQ EPOCH ROW: ids...\" lines instead of frames"),
	OPT_BOOL('f', "force", &args.force, "write binary frames even to a terminal"),
	OPT_PROGRESS(NULL, "progress on stderr even when it is not a terminal\n"
		     "or stdout is a pipe (then loom-train's line shows)"),
	OPT_VERBOSE("each shard opened (records, index) and each epoch\n"
		    "started (its batches and seed), on stderr"),
	OPT_QUIET(NULL, "no summary line (and no -v lines)"),
	OPT_END()
};

static const struct cli_cmd cmd = {
	.prog = "loom-feed",
	.usage = "usage: loom-feed [options] (--manifest M | SHARD.tfrecord...) --batch B --seq T --seed S\n"
		 "Write shuffled micro-batches of B records of T+1 tokens as binary frames\n"
		 "(formats/batch.md) on stdout, for loom-train and loom-eval.\n",
	.opts = opts,
	.footer = "Records longer than T+1 are cut.  Each epoch yields floor(N / (B x W)) global\n"
		  "batches (the remainder is dropped).  The stream ends with an end-of-stream\n"
		  "frame; a closed pipe (| head) ends loom-feed quietly with status 0.\n"
		  "The manifest of a squad-features set (loom-squad prepare) gives the record\n"
		  "length and its features: frames of version 2 carry them all.\n",
	.version = cli_version_jansson,
};

static void parse_args(int argc, char **argv)
{
	struct loom_feed_opts *o = &args.o;
	cli_parse(&cmd, argc, argv);
	o->bucket = (uint32_t)bucket;
	if (!have_b || (!have_t && !o->manifest) || !have_s)
		cli_usage_error("--batch, --seq and --seed are required (--seq: but with the "
				"--manifest of a set that gives it)");
	if (o->manifest && optind < argc)
		cli_usage_error("give --manifest or shard files, not both");
	if (!o->manifest && optind == argc)
		cli_usage_error("no input: give --manifest M or shard files");
	if (o->rank >= o->world)
		cli_usage_error("--rank %u must be less than --world %u", o->rank, o->world);
	if (o->verify && !o->manifest)
		cli_usage_error("--verify needs --manifest");
	if (have_skip && args.resume)
		cli_usage_error("--skip-batches and --resume exclude each other");
	if ((uint64_t)o->batch * o->seq_len > LOOM_BATCH_MAX_TOKENS)
		cli_usage_error("--batch x (--seq + 1) is larger than a frame may be (%u tokens)",
				LOOM_BATCH_MAX_TOKENS);
	if (o->dtype == LOOM_BATCH_U16 && o->pad && o->pad_id > 0xffff)
		cli_usage_error("--pad %u does not fit --dtype u16", o->pad_id);
	o->shards = (const char *const *)(argv + optind);
	o->nshards = (size_t)(argc - optind);
}

/* --resume CKPT: the checkpoint's next batch, after checking that it was
 * trained on this seed, global batch and sequence length, and that its
 * state agrees with itself: the frames up to data.next_seq hold at least
 * the samples it trained on, and data.epoch is the epoch of the batch
 * before data.next_seq or of that one (K batches an epoch of this
 * manifest). */
static void tell(void *ctx, const char *line)
{
	(void)ctx;
	cli_info("%s", line);
}

static void write_out(const void *buf, size_t len)
{
	int rc = loom_write_all(STDOUT_FILENO, buf, len);
	if (rc == -EPIPE)
		_exit(0);	/* | head: the reader is gone; that is not an error */
	if (rc < 0)
		cli_die("cannot write to stdout: %s", strerror(-rc));
}

int main(int argc, char **argv)
{
	const struct loom_feed_opts *o = &args.o;
	struct loom_err err;
	parse_args(argc, argv);
	if (!o->text)
		cli_no_binary_tty(STDOUT_FILENO, args.force);
	args.o.note = tell;
	struct loom_feed *f = loom_feed_new(o, &err);
	if (!f && err.code == LOOM_EINVAL && !have_t)
		cli_usage_error("%s", err.msg); /* --seq missing */
	if (!f)
		cli_die("%s", err.msg);
	uint64_t skip = args.skip;
	if (args.resume && loom_ckpt_feed_resume(args.resume, o, f, &skip, &err) < 0)
		cli_die("--resume: %s", err.msg);
	signal(SIGPIPE, SIG_IGN);
	if (loom_feed_start(f, skip) < 0)
		cli_die("%s", loom_feed_error(f));

	struct cli_progress pr;
	struct loom_feed_stats st;
	const void *buf;
	size_t len;
	int rc;
	cli_progress_init_upstream(&pr, cli_force_progress);
	double t0 = loom_now();
	while ((rc = loom_feed_next(f, &buf, &len)) > 0) {
		write_out(buf, len);
		if (cli_progress_due(&pr)) {
			double dt = loom_now() - t0;
			loom_feed_get_stats(f, &st);
			cli_progress_show(&pr, "batch %llu, epoch %u, %.0f records/s",
					  (unsigned long long)st.seq, st.epoch,
					  dt > 0 ? (double)st.frames * o->batch / dt : 0);
		}
	}
	cli_progress_done(&pr);
	if (rc < 0)
		cli_die("%s", loom_feed_error(f));
	unsigned char end[LOOM_BATCH_HEADER_SIZE];
	if ((len = loom_feed_end_frame(f, end)))
		write_out(end, len);
	loom_feed_get_stats(f, &st);
	char line[512];
	loom_feed_summary(o, &st, loom_now() - t0, line, sizeof line);
	cli_summary("%s", line);
	loom_feed_free(f);
	return 0;
}
