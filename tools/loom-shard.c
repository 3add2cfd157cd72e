/* loom-shard - token stream -> TFRecord shards of tf.train.Example{"input_ids"}
 * with an index beside each shard and a JSON manifest (lib/data/loom_shard.h). */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "loom_tfrecord.h"
#include "loom_file.h"
#include "loom_hash.h"
#include "loom_manifest.h"
#include "loom_shard.h"
#include "loom_tokin.h"

static struct loom_shard *g_shard, *g_val; /* the training set, the validation split */
static uint32_t *tok; /* read buffer */

static _Noreturn void fail(const char *msg)
{
	char copy[LOOM_ERR_MAX + 300]; /* msg may live in g_shard */
	snprintf(copy, sizeof copy, "%s", msg);
	loom_shard_free(g_shard); /* removes every output of this run */
	loom_shard_free(g_val);
	free(tok);
	cli_die("%s", copy);
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct cli_progress *pr = ctx;
	if (cli_progress_due(pr))
		cli_progress_show(pr, "writing shards: %" PRIu64 " of %" PRIu64 " records (%.0f%%)",
				  done, total, total ? 100.0 * (double)done / (double)total : 0.0);
}

/* -v: the committed set as the manifest records it, a line per shard. */
static void tell_shards(const char *manifest)
{
	struct loom_manifest m;
	struct loom_err err;
	if (loom_manifest_read(manifest, &m, &err) < 0) {
		cli_warn("%s", err.msg);
		return;
	}
	for (size_t i = 0; i < m.nshards; i++)
		cli_info("shard %s: %lld records, %lld bytes", m.shards[i].file,
			 (long long)m.shards[i].records, (long long)m.shards[i].bytes);
	loom_manifest_release(&m);
}

static struct loom_shard_opts o = { .seq_len = 2049, .shuffle = 1 };
static enum loom_tokfmt fmt = LOOM_TOK_U16;
static uint64_t stride;
static double val_fraction;
static uint64_t val_records;

static void on_format(const char *opt, const char *arg)
{
	(void)opt;
	if (loom_tokfmt_parse(arg, &fmt) < 0)
		cli_usage_error("--input-format: '%s' is not u16, u32 or text", arg);
}

static void on_seq_len(const char *opt, const char *arg)
{
	o.seq_len = (uint32_t)cli_u64(opt, arg, 1, 1u << 24);
}

static void on_memory(const char *opt, const char *arg)
{
	o.memory = cli_size(opt, arg);
	if (o.memory < (1u << 20))
		cli_usage_error("--memory: at least 1M");
}

static void on_vocab_sha256(const char *opt, const char *arg)
{
	(void)opt;
	if (!loom_hex_is(arg, 64))
		cli_usage_error("--vocab-sha256: expected 64 hex digits");
	for (char *q = (char *)arg; *q; q++) /* an argv string: ours to change */
		*q = (char)tolower((unsigned char)*q);
	o.vocab_sha256 = arg;
}

static void on_feature(const char *opt, const char *arg)
{
	(void)opt;
	if (!*arg)
		cli_usage_error("--feature: empty name");
	o.feature = arg;
}

static const struct cli_opt opts[] = {
	OPT_STRING('o', "output", &o.prefix, "PREFIX", "output prefix (required)"),
	OPT_ENUM_CALLBACK('f', "input-format", on_format, "FMT", "u16 u32 text",
			  "u16 | u32 (little-endian binary) | text\n"
			  "(whitespace-separated ids) (default: u16)"),
	OPT_CALLBACK(0, "seq", on_seq_len, "N",
		     "tokens per sample (default: 2049; a model with\n"
		     "context T needs T + 1, inputs plus shifted targets)"),
	OPT_ALIAS('L', "seq-len", "seq"),
	OPT_U64('s', "stride", &stride, "N", 1, 1u << 30, "a sample starts every N tokens (default: --seq)"),
	OPT_BOOL(0, "keep-tail", &o.keep_tail, "keep a final shorter sample if >= N/2 remain"),
	OPT_U64(0, "seed", &o.seed, "N", 0, INT64_MAX, "shuffle seed (default: 0)"),
	OPT_SET_INT(0, "no-shuffle", &o.shuffle, 0, "keep stream order"),
	OPT_CALLBACK('m', "memory", on_memory, "SIZE",
		     "memory for the shuffle, e.g. 512M, 4G (default:\n"
		     "a quarter of RAM, at least 512M);\n"
		     "beyond it samples spill to temporary files"),
	OPT_U64('n', "shards", &o.shards, "N", 1, 99999, "N shards, sample r in shard r mod N (default: 1)"),
	OPT_U64('r', "records-per-shard", &o.records_per_shard, "R", 1, UINT64_MAX,
		"R consecutive samples per shard instead"),
	OPT_DOUBLE(0, "val-fraction", &val_fraction, "F", 0, 1,
		   "also write a validation split, PREFIX.val-*:\n"
		   "the samples whose shuffle key is in the first F\n"
		   "of the key space (about F of them), by --seed"),
	OPT_U64(0, "val-records", &val_records, "N", 1, UINT64_MAX,
		"the validation split: the first N samples of the\n"
		"order (the shuffle's, or the stream's) instead"),
	OPT_U64(0, "vocab-size", &o.vocab_size, "N", 1, 1ull << 32,
		"reject tokens >= N; recorded in the manifest"),
	OPT_CALLBACK(0, "vocab-sha256", on_vocab_sha256, "HEX",
		     "vocabulary checksum recorded in the manifest"),
	OPT_CALLBACK(0, "feature", on_feature, "NAME", "feature name (default: input_ids)"),
	OPT_INT('j', "threads", &o.threads, "N", 1, 256,
		"encoding threads (default: all CPUs; the\n"
		"output is the same for any N)"),
	OPT_STRING(0, "tmpdir", &o.tmpdir, "DIR", "for spill files (default: the output directory)"),
	OPT_BOOL(0, "no-sha256", &o.no_sha256,
		 "do not hash the shards (sha256 null in the\n"
		 "manifest; SHA-256 is the costliest step)"),
	OPT_PROGRESS(NULL, "show progress even when stderr is not a TTY"),
	OPT_VERBOSE("each input read (tokens) and each shard\n"
		    "committed (name, records, bytes)"),
	OPT_QUIET(NULL, "no summary line (and no -v lines)"),
	OPT_END()
};

static const struct cli_cmd cmd = {
	.prog = "loom-shard",
	.usage = "usage: loom-shard -o PREFIX [options] [TOKENS...]\n"
		 "Cut a token stream (files in order, or stdin) into samples of --seq\n"
		 "tokens and write them as TFRecord shards of tf.train.Example{\"input_ids\"}:\n"
		 "PREFIX-00000-of-0000N.tfrecord, each with its .index, and PREFIX.manifest.json.\n",
	.opts = opts,
	.footer = "Same input and seed give byte-identical shards whatever the memory limit.\n"
		  "The manifest is the commit point: it always names a complete set, the old\n"
		  "one or the new one, even if the run is killed; on error nothing is left\n"
		  "behind, and a killed run's leftovers are removed by the next run.\n",
	.version = loom_tfr_versions,
};

static void show_input_progress(struct cli_progress *pr, const char *name, struct loom_tokin *in)
{
	char b1[32], b2[32];
	struct loom_shard_stats st;
	loom_shard_get_stats(g_shard, &st);
	uint64_t size = loom_tokin_size(in);
	if (size)
		cli_progress_show(pr, "%s: %s of %s, %" PRIu64 " samples", name,
				  cli_bytes((double)loom_tokin_bytes(in), b1, sizeof b1),
				  cli_bytes((double)size, b2, sizeof b2), st.samples);
	else
		cli_progress_show(pr, "%s: %s, %" PRIu64 " samples", name,
				  cli_bytes((double)loom_tokin_bytes(in), b1, sizeof b1), st.samples);
}

/* Feed one input's tokens to g_shard (fail() on an error). */
static void read_input(const char *name, struct cli_progress *pr)
{
	struct loom_err err;
	size_t cap = 1u << 18;
	struct loom_tokin *in = loom_tokin_open(name, fmt, &err);
	if (!in)
		fail(err.msg);
	ssize_t n;
	while ((n = loom_tokin_read(in, tok, cap)) > 0) {
		struct loom_shard *bad = loom_shard_tokens(g_shard, tok, (size_t)n) < 0 ? g_shard
				       : g_val && loom_shard_tokens(g_val, tok, (size_t)n) < 0 ? g_val
				       : NULL;
		if (bad) {
			char msg[LOOM_ERR_MAX + 300];
			snprintf(msg, sizeof msg, "%s: %s", strcmp(name, "-") ? name : "(stdin)",
				 loom_shard_error(bad));
			loom_tokin_free(in);
			fail(msg);
		}
		if (cli_progress_due(pr))
			show_input_progress(pr, name, in);
	}
	if (n < 0) {
		char msg[LOOM_ERR_MAX];
		snprintf(msg, sizeof msg, "%s", loom_tokin_error(in));
		loom_tokin_free(in);
		fail(msg);
	}
	struct loom_shard_stats st;
	loom_shard_get_stats(g_shard, &st);
	cli_info("%s: %" PRIu64 " bytes read, %" PRIu64 " tokens so far",
		 strcmp(name, "-") ? name : "(stdin)", loom_tokin_bytes(in), st.tokens);
	loom_tokin_free(in);
}

/* --val-fraction / --val-records: the sharder of PREFIX.val, the same
 * samples' other side (one shard), each sharder with half the memory */
static struct loom_shard *open_val(void)
{
	if (val_fraction > 0 && val_records)
		cli_usage_error("--val-fraction and --val-records exclude each other");
	if (val_fraction >= 1)
		cli_usage_error("--val-fraction: '%g' leaves nothing for training", val_fraction);
	if (val_fraction <= 0 && !val_records)
		return NULL;
	double k = ldexp(val_fraction, 64);
	o.val_key = val_fraction > 0 ? (k >= 0x1p64 ? UINT64_MAX : k < 1 ? 1 : (uint64_t)k) : 0;
	o.val_records = val_records;
	if (!o.memory)
		o.memory = loom_shard_default_memory();
	o.memory /= 2;
	struct loom_shard_opts v = o;
	size_t n = strlen(o.prefix) + 5;
	char *prefix = malloc(n);
	if (!prefix)
		cli_die("out of memory");
	snprintf(prefix, n, "%s.val", o.prefix);
	v.prefix = prefix;
	v.val = 1;
	v.shards = 1;
	v.records_per_shard = 0;
	v.progress = NULL;
	struct loom_err err;
	struct loom_shard *s = loom_shard_new(&v, &err);
	free(prefix); /* copied */
	if (!s)
		cli_die("%s", err.msg);
	return s;
}

/* Both sets' shards under this run's names, then the validation manifest,
 * then the training one (formats/manifest.md, "A validation split"). */
static void finish_all(void)
{
	struct loom_shard *sets[2] = { g_val, g_shard };
	for (int i = 0; i < 2; i++)
		if (sets[i] && loom_shard_prepare(sets[i]) < 0)
			fail(loom_shard_error(sets[i]));
	for (int i = 0; i < 2; i++)
		if (sets[i] && loom_shard_commit(sets[i]) < 0)
			fail(loom_shard_error(sets[i]));
}

int main(int argc, char **argv)
{
	cli_parse(&cmd, argc, argv);
	if (!o.prefix)
		cli_usage_error("-o PREFIX is required");
	if (o.shards && o.records_per_shard)
		cli_usage_error("--shards and --records-per-shard exclude each other");
	if (!o.shards && !o.records_per_shard)
		o.shards = 1;
	o.stride = (uint32_t)stride;
	o.input_format = loom_tokfmt_name(fmt);
	o.argc = argc;
	o.argv = argv;

	struct loom_err err;
	struct cli_progress pr;
	cli_progress_init(&pr, cli_force_progress);
	o.progress = on_progress;
	o.progress_ctx = &pr;
	o.commit_step = cli_test_kill_hook(&o.commit_step_ctx);
	g_val = open_val();
	g_shard = loom_shard_new(&o, &err);
	if (!g_shard) {
		loom_shard_free(g_val);
		cli_die("%s", err.msg);
	}

	char *stdin_only[] = { "-" };
	char **inputs = optind < argc ? argv + optind : stdin_only;
	int ninputs = optind < argc ? argc - optind : 1;
	if (fmt != LOOM_TOK_TEXT)
		for (int i = 0; i < ninputs; i++)
			if (!strcmp(inputs[i], "-") && isatty(STDIN_FILENO))
				cli_usage_error("refusing to read binary tokens from a terminal");

	tok = malloc((1u << 18) * sizeof *tok);
	if (!tok)
		fail("out of memory");
	double t0 = loom_now();
	for (int i = 0; i < ninputs; i++)
		read_input(inputs[i], &pr);
	free(tok);
	tok = NULL;
	if (pr.enabled)
		cli_progress_show(&pr, "writing shards...");
	finish_all();
	cli_progress_done(&pr);
	struct loom_shard_stats st, vst;
	loom_shard_get_stats(g_shard, &st);
	if (g_val)
		loom_shard_get_stats(g_val, &vst);
	if (*st.note)
		cli_warn("warning: %s", st.note);
	if (g_val && *vst.note)
		cli_warn("warning: %s", vst.note);
	if (cli_verbose) {
		tell_shards(st.manifest);
		if (g_val)
			tell_shards(vst.manifest);
	}
	double dt = loom_now() - t0;
	if (o.shards && st.samples < o.shards)
		cli_warn("warning: %" PRIu64 " records for %" PRIu64 " shards: %" PRIu64
			 " shards are empty", st.samples, o.shards, o.shards - st.samples);
	char line[LOOM_ERR_MAX + 8800];
	loom_shard_summary(&o, &st, g_val ? &vst : NULL, dt, line, sizeof line);
	cli_summary("%s", line);
	loom_shard_free(g_shard);
	loom_shard_free(g_val);
	return 0;
}
