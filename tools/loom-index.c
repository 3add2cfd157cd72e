/* loom-index - tfrecord2idx-compatible index files, CRC + Example verification,
 * statistics (lib/data/loom_tfrecord.h, lib/data/loom_example.h). */
#include <pthread.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "loom_example.h"
#include "loom_file.h"
#include "loom_tfrecord.h"

static int verify, check, do_stats, no_write, show_progress;
static struct cli_progress pr;

/* One input file: its results are printed in argument order by main. */
struct job {
	const char *path;
	char out[4200];          /* index path */
	struct loom_tfr_scan st; /* without its offsets */
	int failed;
	char msg[LOOM_ERR_MAX + 8800]; /* the error line */
	char statline[4400];
};

/* The job's error line, printed by main in argument order. */
static void job_err(struct job *jb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void job_err(struct job *jb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(jb->msg, sizeof jb->msg, fmt, ap);
	va_end(ap);
}

static int check_example(void *ctx, const uint8_t *payload, size_t len, struct loom_err *e)
{
	(void)ctx;
	return loom_example_check(payload, len, e);
}

static void show_scan(void *ctx, uint64_t records, uint64_t bytes)
{
	const struct job *jb = ctx;
	if (show_progress && cli_progress_due(&pr)) {
		char b[32];
		cli_progress_show(&pr, "%s: %" PRIu64 " records, %s", jb->path, records,
				  cli_bytes((double)bytes, b, sizeof b));
	}
}

/* --check: the index at jb->out against offsets[0..n]; 0 or -1. */
static int compare_index(struct job *jb, const struct loom_tfr_scan *s)
{
	const uint64_t *off = s->offsets;
	uint64_t n = s->records;
	struct loom_err e;
	char *have = NULL, *want = NULL;
	size_t hl, wl;
	int rc = loom_file_read_bounded(jb->out, loom_tfr_index_max(s->bytes), &have, &hl, &e);
	if (rc == 0)
		rc = loom_tfr_index_format(off, n, &want, &wl, &e);
	if (rc < 0) {
		job_err(jb, "%s", e.msg);
	} else if (hl != wl || memcmp(have, want, wl)) {
		/* Name the first line that differs. */
		size_t line = 1, i = 0;
		while (i < hl && i < wl && have[i] == want[i])
			line += have[i++] == '\n';
		job_err(jb, "%s: index disagrees with its file '%s' from line %zu on", jb->out,
			 jb->path, line);
		rc = -1;
	}
	free(have);
	free(want);
	return rc < 0 ? -1 : 0;
}

/* Index (and verify) one file; 0, or -1 with the error in jb->msg. */
static int do_file(struct job *jb)
{
	struct loom_err e;
	struct loom_tfr_scan s;
	if (loom_tfr_scan(jb->path, verify ? check_example : NULL, show_scan, jb, &s, &e) < 0) {
		job_err(jb, "%s", e.msg);
		return -1;
	}
	int rc = 0;
	if (check) {
		rc = compare_index(jb, &s);
	} else if (!no_write && loom_tfr_index_write(jb->out, s.offsets, s.records, &e) < 0) {
		job_err(jb, "%s", e.msg);
		rc = -1;
	}
	free(s.offsets);
	s.offsets = NULL;
	if (rc < 0)
		return -1;
	if (do_stats)
		snprintf(jb->statline, sizeof jb->statline,
			 "%s: %" PRIu64 " records, %" PRIu64 " bytes, payload min %" PRIu64
			 " max %" PRIu64 " mean %.1f\n", jb->path, s.records, s.bytes,
			 s.records ? s.pmin : 0, s.pmax,
			 s.records ? (double)s.psum / (double)s.records : 0.0);
	jb->st = s;
	return 0;
}

static struct job *jobs;
static int njobs;
static int next_job;
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&job_lock);
		int i = next_job++;
		pthread_mutex_unlock(&job_lock);
		if (i >= njobs)
			return NULL;
		jobs[i].failed = do_file(&jobs[i]) < 0;
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
	struct loom_tfr_scan tot = { .pmin = UINT64_MAX };
	int failed = 0, stdin_used = 0;
	double t0 = loom_now();
	njobs = nfiles;
	jobs = calloc((size_t)nfiles, sizeof *jobs);
	if (!jobs)
		cli_die("out of memory");
	for (int i = 0; i < nfiles; i++) {
		const char *a = argv[optind + i];
		jobs[i].path = a;
		if (output)
			snprintf(jobs[i].out, sizeof jobs[i].out, "%s", output);
		else if (!strcmp(a, "-"))
			snprintf(jobs[i].out, sizeof jobs[i].out, "-");
		else
			snprintf(jobs[i].out, sizeof jobs[i].out, "%s.index", a);
		stdin_used |= !strcmp(a, "-") || !strcmp(jobs[i].out, "-");
	}
	/* Files are independent: verify them in parallel (one thread each up to
	 * the CPU count), print the results in argument order. */
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int nthreads = threads ? threads : ncpu > 0 ? (int)ncpu : 1;
	if (nthreads > nfiles || stdin_used)
		nthreads = stdin_used ? 1 : nfiles;
	show_progress = nthreads == 1;
	pthread_t *tid = calloc((size_t)nthreads, sizeof *tid);
	int started = 0;
	for (int i = 1; tid && i < nthreads; i++)
		started += pthread_create(&tid[i], NULL, worker, NULL) == 0;
	worker(NULL);
	for (int i = 1; i <= started; i++)
		pthread_join(tid[i], NULL);
	free(tid);
	cli_progress_done(&pr);
	for (int i = 0; i < nfiles; i++) {
		struct job *jb = &jobs[i];
		if (jb->failed) {
			failed++;
			cli_warn("%s", jb->msg);
			continue;
		}
		fputs(jb->statline, stdout);
		cli_info("%s: %" PRIu64 " records, %" PRIu64 " bytes%s%s%s",
			 strcmp(jb->path, "-") ? jb->path : "(stdin)", jb->st.records,
			 jb->st.bytes, verify ? ", verified" : "",
			 check ? ", index matches" : no_write ? "" : ", index written to ",
			 check || no_write ? "" : strcmp(jb->out, "-") ? jb->out : "stdout");
		tot.records += jb->st.records;
		tot.bytes += jb->st.bytes;
		tot.psum += jb->st.psum;
		if (jb->st.records && jb->st.pmin < tot.pmin)
			tot.pmin = jb->st.pmin;
		if (jb->st.pmax > tot.pmax)
			tot.pmax = jb->st.pmax;
	}
	free(jobs);
	double dt = loom_now() - t0;
	if (!cli_quiet && !failed) {
		char b1[32], b2[32];
		cli_summary("%d file%s, %" PRIu64 " record%s, %s%s%s, %.2f s (%s/s)",
			nfiles - failed, nfiles - failed == 1 ? "" : "s", tot.records,
			tot.records == 1 ? "" : "s",
			cli_bytes((double)tot.bytes, b1, sizeof b1),
			verify ? ", CRCs and Examples verified" : "",
			check ? ", indexes match" : no_write ? "" : ", indexes written", dt,
			cli_bytes(dt > 0 ? (double)tot.bytes / dt : 0, b2, sizeof b2));
	}
	return failed ? 1 : 0;
}
