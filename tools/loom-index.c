/* loom-index - tfrecord2idx-compatible index files, CRC + Example verification,
 * statistics, files in parallel (lib/data/loom_index.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "loom_index.h"
#include "loom_tfrecord.h"

static int verify, check, do_stats, no_write;
static struct cli_progress pr;

static void show_scan(void *ud, const char *path, uint64_t records, uint64_t bytes)
{
	(void)ud;
	if (cli_progress_due(&pr)) {
		char b[32];
		cli_progress_show(&pr, "%s: %" PRIu64 " records, %s", path, records,
				  cli_bytes((double)bytes, b, sizeof b));
	}
}

static const char *output;
static int threads;

static const struct cli_opt opts[] = {
	OPT_STRING('o', "output", &output, "PATH", "index path (one FILE only; - = stdout)"),
	OPT_BOOL(0, "verify", &verify, "check both CRCs of every record and that every\n"
		 "payload is a tf.train.Example"),
	OPT_BOOL(0, "check", &check, "compare with the existing index instead of writing"),
	OPT_ALIAS('c', NULL, "check"),
	OPT_BOOL(0, "stats", &do_stats, "print records, bytes and payload min/max/mean (stdout)"),
	OPT_BOOL('n', "no-write", &no_write, "write no index (with --verify / --stats)"),
	OPT_INT('j', "threads", &threads, "N", 1, 1024, "files verified in parallel (default: CPU count)"),
	OPT_ALIAS(0, "jobs", "threads"),
	OPT_PROGRESS(NULL, "show progress even when stderr is not a TTY"),
	OPT_VERBOSE("a line per FILE: records, bytes, what was done"),
	OPT_QUIET(NULL, "no summary line (and no -v lines)"),
	OPT_END()
};

static const struct cli_cmd cmd = {
	.prog = "loom-index",
	.usage = "usage: loom-index [options] FILE...\n"
		 "Write FILE.index for each TFRecord FILE, byte-identical to the `tfrecord`\n"
		 "package's tfrecord2idx: one line \"<offset> <record size>\\n\" per record.\n",
	.opts = opts,
	.footer = "Errors name the file, record and byte offset; a file with an error gets no\n"
		  "index, and the exit status is 1.\n",
	.version = loom_tfr_versions,
};

int main(int argc, char **argv)
{
	cli_parse(&cmd, argc, argv);
	int nfiles = argc - optind;
	if (nfiles < 1)
		cli_usage_error("no input file");
	if (output && nfiles != 1)
		cli_usage_error("-o works with one FILE only");
	if (check && no_write)
		cli_usage_error("--check and --no-write exclude each other");
	cli_progress_init(&pr, cli_force_progress);
	int failed = 0, stdin_used = 0;
	double t0 = loom_now();
	struct loom_index_job *jobs = calloc((size_t)nfiles, sizeof *jobs);
	char (*outs)[4200] = calloc((size_t)nfiles, sizeof *outs);
	if (!jobs || !outs)
		cli_die("out of memory");
	for (int i = 0; i < nfiles; i++) {
		const char *a = argv[optind + i];
		jobs[i].path = a;
		jobs[i].out = outs[i];
		if (output)
			snprintf(outs[i], sizeof outs[i], "%s", output);
		else if (!strcmp(a, "-"))
			snprintf(outs[i], sizeof outs[i], "-");
		else
			snprintf(outs[i], sizeof outs[i], "%s.index", a);
		stdin_used |= !strcmp(a, "-") || !strcmp(outs[i], "-");
	}
	/* Files are independent: verify them in parallel (one thread each up to
	 * the CPU count), print the results in argument order. */
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int nthreads = threads ? threads : ncpu > 0 ? (int)ncpu : 1;
	if (nthreads > nfiles || stdin_used)
		nthreads = stdin_used ? 1 : nfiles;
	struct loom_index_opts io = { check ? LOOM_INDEX_CHECK : no_write ? LOOM_INDEX_SCAN
								   : LOOM_INDEX_WRITE,
				      verify, nthreads, nthreads == 1 ? show_scan : NULL, NULL };
	failed = loom_index_run(jobs, nfiles, &io);
	cli_progress_done(&pr);
	char stats[9000], detail[9000];
	for (int i = 0; i < nfiles; i++) {
		if (jobs[i].rc < 0) {
			cli_warn("%s", jobs[i].err.msg);
			continue;
		}
		loom_index_describe(&jobs[i], &io, stats, detail, sizeof stats);
		if (do_stats)
			printf("%s\n", stats);
		cli_info("%s", detail);
	}
	double dt = loom_now() - t0;
	if (!failed) {
		loom_index_summary(jobs, nfiles, &io, dt, stats, sizeof stats);
		cli_summary("%s", stats);
	}
	free(outs);
	free(jobs);
	return failed ? 1 : 0;
}
