/* loom-shard - token stream -> TFRecord shards of tf.train.Example{"input_ids"}
 * with an index beside each shard and a JSON manifest (lib/data/loom_shard.h). */
#include <ctype.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "loom_tfrecord.h"
#include "loom_file.h"
#include "loom_shard.h"

static const char usage[] =
	"usage: loom-shard -o PREFIX [options] [TOKENS...]\n"
	"Cut a token stream (files in order, or stdin) into samples of --seq-len\n"
	"tokens and write them as TFRecord shards of tf.train.Example{\"input_ids\"}:\n"
	"PREFIX-00000-of-0000N.tfrecord, each with its .index, and PREFIX.manifest.json.\n"
	"  -o, --output PREFIX        output prefix (required)\n"
	"  -f, --input-format FMT     u16 | u32 (little-endian binary) | text\n"
	"                             (whitespace-separated ids); default u16\n"
	"  -L, --seq-len N            tokens per sample (default 2049: a model with\n"
	"                             context T needs T + 1, inputs plus shifted targets)\n"
	"  -s, --stride N             a sample starts every N tokens (default seq-len)\n"
	"      --keep-tail            keep a final shorter sample if >= seq-len/2 remain\n"
	"      --seed N               shuffle seed (default 0)\n"
	"      --no-shuffle           keep stream order\n"
	"  -m, --memory SIZE          memory for the shuffle, e.g. 512M, 4G (default:\n"
	"                             a quarter of RAM, at least 512M);\n"
	"                             beyond it samples spill to temporary files\n"
	"  -n, --shards N             N shards, sample r in shard r mod N (default 1)\n"
	"  -r, --records-per-shard R  R consecutive samples per shard instead\n"
	"      --vocab-size N         reject tokens >= N; recorded in the manifest\n"
	"      --vocab-sha256 HEX     vocabulary checksum recorded in the manifest\n"
	"      --feature NAME         feature name (default input_ids)\n"
	"  -j, --threads N            encoding threads (default: all CPUs; the\n"
	"                             output is the same for any N)\n"
	"      --tmpdir DIR           for spill files (default: the output directory)\n"
	"      --no-sha256            do not hash the shards (sha256 null in the\n"
	"                             manifest; SHA-256 is the costliest step)\n"
	"      --progress             show progress even when stderr is not a TTY\n"
	"  -v, --verbose              each input read (tokens) and each shard\n"
	"                             committed (name, records, bytes)\n"
	"  -q, --quiet                no summary line (and no -v lines)\n"
	"  -h, --help                 this help\n"
	"  -V, --version              version\n"
	"Same input and seed give byte-identical shards whatever the memory limit.\n"
	"The manifest is the commit point: it always names a complete set, the old\n"
	"one or the new one, even if the run is killed; on error nothing is left\n"
	"behind, and a killed run's leftovers are removed by the next run.\n";

static struct loom_shard *g_shard;
static uint32_t *tok; /* read buffer */

static _Noreturn void fail(const char *msg)
{
	char copy[LOOM_ERR_MAX + 300]; /* msg may live in g_shard */
	snprintf(copy, sizeof copy, "%s", msg);
	loom_shard_free(g_shard); /* removes every output of this run */
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

/* For tests only (tests/shard-kill.t): with LOOM_SHARD_TEST_KILL_AT=N the
 * process kills itself (SIGKILL, as kill -9) just before the N-th (from 0)
 * file-system step of removing leftovers and committing the output set. */
static void kill_at_step(void *ctx, const char *what, const char *path)
{
	static uint64_t step;
	(void)what;
	(void)path;
	if (step++ == *(uint64_t *)ctx)
		raise(SIGKILL);
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

static int is_hex64(const char *s)
{
	size_t n = strlen(s);
	if (n != 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdefABCDEF", s[i]))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "input-format", required_argument, NULL, 'f' },
		{ "seq-len", required_argument, NULL, 'L' },
		{ "stride", required_argument, NULL, 's' },
		{ "keep-tail", no_argument, NULL, 'T' },
		{ "seed", required_argument, NULL, 'S' },
		{ "no-shuffle", no_argument, NULL, 'N' },
		{ "memory", required_argument, NULL, 'm' },
		{ "shards", required_argument, NULL, 'n' },
		{ "records-per-shard", required_argument, NULL, 'r' },
		{ "vocab-size", required_argument, NULL, 'W' },
		{ "vocab-sha256", required_argument, NULL, 'H' },
		{ "feature", required_argument, NULL, 'F' },
		{ "tmpdir", required_argument, NULL, 't' },
		{ "no-sha256", no_argument, NULL, 'C' },
		{ "threads", required_argument, NULL, 'j' },
		{ "progress", no_argument, NULL, 'P' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	struct loom_shard_opts o = { .seq_len = 2049, .shuffle = 1 };
	enum loom_tokfmt fmt = LOOM_TOK_U16;
	int c, progress = 0, quiet = 0;
	uint64_t stride = 0;

	cli_init("loom-shard", usage);
	atexit(loom_outfile_unlink_all);
	while ((c = getopt_long(argc, argv, "o:f:L:s:m:n:r:j:vqhV", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			o.prefix = optarg;
			break;
		case 'f':
			if (loom_tokfmt_parse(optarg, &fmt) < 0)
				cli_usage_error("--input-format: '%s' is not u16, u32 or text",
						optarg);
			break;
		case 'L':
			o.seq_len = (uint32_t)cli_u64("--seq-len", optarg, 1, 1u << 24);
			break;
		case 's':
			stride = cli_u64("--stride", optarg, 1, 1u << 30);
			break;
		case 'T':
			o.keep_tail = 1;
			break;
		case 'S':
			o.seed = cli_u64("--seed", optarg, 0, INT64_MAX);
			break;
		case 'N':
			o.shuffle = 0;
			break;
		case 'm':
			o.memory = cli_size("--memory", optarg);
			if (o.memory < (1u << 20))
				cli_usage_error("--memory: at least 1M");
			break;
		case 'n':
			o.shards = cli_u64("--shards", optarg, 1, 99999);
			break;
		case 'r':
			o.records_per_shard = cli_u64("--records-per-shard", optarg, 1, UINT64_MAX);
			break;
		case 'W':
			o.vocab_size = cli_u64("--vocab-size", optarg, 1, 1ull << 32);
			break;
		case 'H':
			if (!is_hex64(optarg))
				cli_usage_error("--vocab-sha256: expected 64 hex digits");
			for (char *q = optarg; *q; q++)
				*q = (char)tolower((unsigned char)*q);
			o.vocab_sha256 = optarg;
			break;
		case 'F':
			if (!*optarg)
				cli_usage_error("--feature: empty name");
			o.feature = optarg;
			break;
		case 't':
			o.tmpdir = optarg;
			break;
		case 'C':
			o.no_sha256 = 1;
			break;
		case 'j':
			o.threads = (int)cli_u64("--threads", optarg, 1, 256);
			break;
		case 'P':
			progress = 1;
			break;
		case 'v':
			cli_verbose = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			cli_help();
		case 'V':
			cli_version(loom_tfr_versions());
		default:
			cli_bad_option();
		}
	}
	if (quiet)
		cli_verbose = 0;
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
	cli_progress_init(&pr, progress);
	o.progress = on_progress;
	o.progress_ctx = &pr;
	uint64_t kill_at;
	const char *ka = getenv("LOOM_SHARD_TEST_KILL_AT");
	if (ka && *ka) {
		kill_at = cli_u64("LOOM_SHARD_TEST_KILL_AT", ka, 0, UINT64_MAX);
		o.commit_step = kill_at_step;
		o.commit_step_ctx = &kill_at;
	}
	g_shard = loom_shard_new(&o, &err);
	if (!g_shard)
		cli_die("%s", err.msg);

	char *stdin_only[] = { "-" };
	char **inputs = optind < argc ? argv + optind : stdin_only;
	int ninputs = optind < argc ? argc - optind : 1;
	if (fmt != LOOM_TOK_TEXT)
		for (int i = 0; i < ninputs; i++)
			if (!strcmp(inputs[i], "-") && isatty(STDIN_FILENO))
				cli_usage_error("refusing to read binary tokens from a terminal");

	size_t cap = 1u << 18;
	tok = malloc(cap * sizeof *tok);
	if (!tok)
		fail("out of memory");
	double t0 = loom_now();
	uint64_t in_bytes = 0;
	for (int i = 0; i < ninputs; i++) {
		struct loom_tokin *in = loom_tokin_open(inputs[i], fmt, &err);
		if (!in)
			fail(err.msg);
		ssize_t n;
		while ((n = loom_tokin_read(in, tok, cap)) > 0) {
			if (loom_shard_tokens(g_shard, tok, (size_t)n) < 0) {
				char msg[LOOM_ERR_MAX + 300];
				snprintf(msg, sizeof msg, "%s: %s", strcmp(inputs[i], "-")
					 ? inputs[i] : "(stdin)", loom_shard_error(g_shard));
				loom_tokin_free(in);
				fail(msg);
			}
			if (cli_progress_due(&pr)) {
				char b1[32], b2[32];
				struct loom_shard_stats st;
				loom_shard_get_stats(g_shard, &st);
				uint64_t size = loom_tokin_size(in);
				if (size)
					cli_progress_show(&pr, "%s: %s of %s, %" PRIu64 " samples",
							  inputs[i],
							  cli_bytes((double)loom_tokin_bytes(in), b1, sizeof b1),
							  cli_bytes((double)size, b2, sizeof b2), st.samples);
				else
					cli_progress_show(&pr, "%s: %s, %" PRIu64 " samples",
							  inputs[i],
							  cli_bytes((double)loom_tokin_bytes(in), b1, sizeof b1),
							  st.samples);
			}
		}
		if (n < 0) {
			char msg[LOOM_ERR_MAX];
			snprintf(msg, sizeof msg, "%s", loom_tokin_error(in));
			loom_tokin_free(in);
			fail(msg);
		}
		in_bytes += loom_tokin_bytes(in);
		{
			struct loom_shard_stats st;
			loom_shard_get_stats(g_shard, &st);
			cli_info("%s: %" PRIu64 " bytes read, %" PRIu64 " tokens so far",
				 strcmp(inputs[i], "-") ? inputs[i] : "(stdin)",
				 loom_tokin_bytes(in), st.tokens);
		}
		loom_tokin_free(in);
	}
	free(tok);
	tok = NULL;
	if (pr.enabled)
		cli_progress_show(&pr, "writing shards...");
	int rc = loom_shard_finish(g_shard);
	cli_progress_done(&pr);
	if (rc < 0)
		fail(loom_shard_error(g_shard));
	struct loom_shard_stats st;
	loom_shard_get_stats(g_shard, &st);
	if (*st.note)
		cli_warn("warning: %s", st.note);
	if (cli_verbose)
		tell_shards(st.manifest);
	double dt = loom_now() - t0;
	if (o.shards && st.samples < o.shards)
		cli_warn("warning: %" PRIu64 " records for %" PRIu64 " shards: %" PRIu64
			 " shards are empty", st.samples, o.shards, o.shards - st.samples);
	if (!quiet) {
		char b1[32], b2[32], sp[64] = "";
		if (st.spilled)
			snprintf(sp, sizeof sp, ", spilled %s",
				 cli_bytes((double)st.spilled, b2, sizeof b2));
		fprintf(stderr,
			"loom-shard: %" PRIu64 " tokens -> %" PRIu64 " records (seq-len %u, stride %u%s)"
			" in %" PRIu64 " shard%s, %s, %s%s, %.2f s -> %s\n",
			st.tokens, st.samples, o.seq_len, o.stride ? o.stride : o.seq_len,
			st.tail_tokens ? ", 1 tail" : "", st.shards, st.shards == 1 ? "" : "s",
			cli_bytes((double)st.bytes, b1, sizeof b1),
			o.shuffle ? "shuffled" : "stream order", sp, dt, st.manifest);
	}
	(void)in_bytes;
	loom_shard_free(g_shard);
	return 0;
}
