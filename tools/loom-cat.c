/* loom-cat - print TFRecord records of tf.train.Example as JSON lines or bare
 * ids (lib/data/loom_example_line.h), streaming or by range through the index. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "loom_example.h"
#include "loom_example_line.h"
#include "loom_records.h"
#include "loom_tfrecord.h"

static int ids_only;
static const char *feature = LOOM_EXAMPLE_IDS;

static struct loom_example_line line;

/* Print one payload; returns 0 or -1 after printing the error. */
static int print_record(void *ctx, const char *path, uint64_t idx, uint64_t off,
			const uint8_t *p, size_t len)
{
	const char *text;
	size_t n;
	(void)ctx;
	int rc = loom_example_line(&line, p, len, feature, ids_only, &text, &n);
	if (rc == LOOM_ENOMEM)
		cli_die("out of memory");
	if (rc < 0) {
		cli_warn("%s: record %" PRIu64 " at byte %" PRIu64 ": %s", path, idx, off,
			 line.err.msg);
		return -1;
	}
	if (fwrite(text, 1, n, stdout) != n) {
		if (errno == EPIPE)
			exit(0); /* the reader went away (| head): not an error */
		cli_die("cannot write to stdout: %s", strerror(errno));
	}
	return 0;
}

static int ranged;
static uint64_t range_a, range_b = UINT64_MAX;

static void parse_range(const char *opt, const char *s)
{
	struct loom_err err;
	(void)opt;
	ranged = 1;
	if (loom_opt_range("--range", s, &range_a, &range_b, &err))
		cli_usage_error("%s", err.msg);
}

static const struct cli_opt opts[] = {
	OPT_BOOL(0, "ids", &ids_only, "bare ids of the int64 feature (see --feature)"),
	OPT_STRING(0, "feature", &feature, "NAME", "feature for --ids (default: input_ids)"),
	OPT_CALLBACK('r', "range", parse_range, "A:B",
		     "records A (inclusive) to B (exclusive), numbered\n"
		     "across all FILEs, read through FILE.index; A: and :B\n"
		     "are open ends, A alone is one record"),
	OPT_VERBOSE("each FILE read, with its record count, on stderr"),
	OPT_END()
};

static const struct cli_cmd cmd = {
	.prog = "loom-cat",
	.usage = "usage: loom-cat [options] [FILE...]\n"
		 "Print the records of TFRecord files of tf.train.Example, one per line:\n"
		 "as JSON ({\"input_ids\":[...]}, any feature types) or, with --ids, as bare\n"
		 "space-separated ids.  No FILE, or FILE -, reads stdin.\n",
	.opts = opts,
	.footer = "Every record's CRCs are checked; errors name the file, record and byte\n"
		  "offset.  Records in a file: `loom-index --stats FILE`.\n",
	.version = loom_tfr_versions,
};

/* Records range_a to range_b of files[0..n) through their indexes: 0, or
 * -1 after an error message. */
static void tell_file(void *ctx, const char *path, uint64_t count, uint64_t lo, uint64_t hi)
{
	(void)ctx;
	if (ranged)
		cli_info("%s: %" PRIu64 " records, read %" PRIu64 " to %" PRIu64 " through its index",
			 path, count, lo, hi);
	else
		cli_info("%s: %" PRIu64 " records", strcmp(path, "-") ? path : "stdin", count);
}

int main(int argc, char **argv)
{
	cli_parse(&cmd, argc, argv);
	char *stdin_only[] = { argv[0], "-" };
	if (optind >= argc) {
		if (isatty(STDIN_FILENO))
			cli_usage_error("no input file, and stdin is a terminal");
		argv = stdin_only;
		argc = 2;
		optind = 1;
	}
	static char obuf[1 << 20];
	setvbuf(stdout, obuf, _IOFBF, sizeof obuf);
	struct loom_records_fns fns = { print_record, tell_file, NULL };
	struct loom_err err = { 0 };
	int rc = ranged ? loom_records_range(argv + optind, argc - optind, range_a, range_b, &fns,
					     &err)
			: loom_records_stream(argv + optind, argc - optind, &fns, &err);
	if (rc == LOOM_EINVAL)
		cli_usage_error("--range needs files with an index, not stdin");
	if (rc < 0 && err.msg[0])
		cli_warn("%s", err.msg);
	loom_example_line_release(&line);
	return rc < 0 ? 1 : 0;
}
