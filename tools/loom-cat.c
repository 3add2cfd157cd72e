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
#include "loom_tfrecord.h"

static int ids_only;
static const char *feature = LOOM_EXAMPLE_IDS;

static struct loom_example_line line;

/* Print one payload; returns 0 or -1 after printing the error. */
static int print_record(const char *path, uint64_t idx, uint64_t off, const uint8_t *p,
			size_t len)
{
	const char *text;
	size_t n;
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

static int cat_stream(const char *path)
{
	struct loom_err e;
	struct loom_tfr_reader *r = loom_tfr_reader_open(path, 0, &e);
	if (!r) {
		cli_warn("%s", e.msg);
		return -1;
	}
	struct loom_tfr_record rec;
	uint64_t n = 0;
	int rc;
	while ((rc = loom_tfr_reader_next(r, &rec)) == 0) {
		if (print_record(path, rec.index, rec.offset, rec.data, rec.len) < 0) {
			loom_tfr_reader_free(r);
			return -1;
		}
		n++;
	}
	if (rc != LOOM_EOF)
		cli_warn("%s", loom_tfr_reader_error(r));
	else
		cli_info("%s: %" PRIu64 " records", strcmp(path, "-") ? path : "stdin", n);
	loom_tfr_reader_free(r);
	return rc == LOOM_EOF ? 0 : -1;
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
static int cat_range(char **files, int n)
{
	uint64_t a = range_a, b = range_b;
	uint64_t base = 0; /* global number of the file's first record */
	uint8_t *buf = NULL;
	size_t cap = 0;
	int failed = 0;
	for (int i = 0; i < n && !failed && base < b; i++) {
		struct loom_err e;
		if (!strcmp(files[i], "-"))
			cli_usage_error("--range needs files with an index, not stdin");
		struct loom_tfr_file *f = loom_tfr_file_open(files[i], NULL, &e);
		if (!f) {
			cli_warn("%s", e.msg);
			failed = 1;
			break;
		}
		uint64_t cnt = loom_tfr_file_count(f);
		uint64_t lo = a > base ? a - base : 0;
		uint64_t hi = b - base < cnt ? b - base : cnt;
		if (loom_tfr_file_max_payload(f) > cap) {
			free(buf);
			cap = loom_tfr_file_max_payload(f);
			buf = malloc(cap ? cap : 1);
			if (!buf)
				cli_die("out of memory");
		}
		for (uint64_t k = lo; k < hi && !failed; k++) {
			size_t len;
			if (loom_tfr_file_read(f, k, buf, cap, &len, &e) < 0) {
				cli_warn("%s", e.msg);
				failed = 1;
			} else {
				failed = print_record(files[i], k, loom_tfr_file_offset(f, k),
						      buf, len) < 0;
			}
		}
		if (!failed)
			cli_info("%s: %" PRIu64 " records, read %" PRIu64 " to %" PRIu64
				 " through its index", files[i], cnt, lo < hi ? lo : hi, hi);
		base += cnt;
		loom_tfr_file_free(f);
	}
	free(buf);
	return failed ? -1 : 0;
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
	int failed = 0;
	if (!ranged) {
		for (int i = optind; i < argc && !failed; i++)
			failed = cat_stream(argv[i]) < 0;
	} else {
		failed = cat_range(argv + optind, argc - optind) < 0;
	}
	loom_example_line_release(&line);
	return failed ? 1 : 0;
}
