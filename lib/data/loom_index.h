/*
 * loom_index.h - index (or check, or only verify) many TFRecord files, in
 * parallel: loom-index's engine.
 *
 * Purpose: each job is one file: scan it (loom_tfr_scan: every record's
 * CRCs; with opts.verify, every payload a tf.train.Example too), then
 * write its tfrecord2idx index to job.out (LOOM_INDEX_WRITE; "-" is
 * stdout), compare it with the index already at job.out, naming the first
 * line that differs (LOOM_INDEX_CHECK), or neither (LOOM_INDEX_SCAN).
 * loom_index_run shares the jobs among opts.threads threads (the calling
 * thread one of them); each job's result stays in the job, for the caller
 * to report in its own order.  Files are independent: a failed file does
 * not stop the others.
 *
 * loom_index_describe and loom_index_summary build loom-index's lines.
 *
 * Ownership: the caller's jobs and their strings; nothing is kept.
 * Errors: per job, rc 0 or negative LOOM_E* with a one-line message in
 * job.err.msg naming the file (and record, byte offset or index line).
 * Thread-safety: loom_index_run is one call on one thread; the progress
 * function is called from the worker threads (give it only with one
 * thread, or make it thread-safe).
 */
#ifndef LOOM_INDEX_H
#define LOOM_INDEX_H

#include <stdint.h>

#include "loom_common.h"
#include "loom_tfrecord.h"

enum { LOOM_INDEX_WRITE, LOOM_INDEX_CHECK, LOOM_INDEX_SCAN };

struct loom_index_job {
	const char *path;        /* the TFRecord file ("-": stdin) */
	const char *out;         /* its index ("-": stdout) */
	struct loom_tfr_scan st; /* records, bytes, payload sizes (offsets NULL) */
	int rc;
	struct loom_err err;
};

struct loom_index_opts {
	int mode;                /* LOOM_INDEX_* */
	int verify;              /* payloads must be Examples */
	int threads;             /* >= 1 */
	void (*progress)(void *ud, const char *path, uint64_t records, uint64_t bytes);
	void *progress_ud;       /* progress may be NULL */
};

/* One job; returns (and keeps in job->rc) 0 or a negative LOOM_E*. */
int loom_index_one(struct loom_index_job *job, const struct loom_index_opts *o);
/* All n jobs; returns how many failed. */
int loom_index_run(struct loom_index_job *jobs, int n, const struct loom_index_opts *o);

/* The lines of a job that succeeded, without newline, into buf[n]:
 * stats, --stats's (records, bytes, payload min, max and mean); detail,
 * -v's (records, bytes, what was done). */
void loom_index_describe(const struct loom_index_job *job, const struct loom_index_opts *o,
			 char *stats, char *detail, size_t n);
/* The summary of n jobs that all succeeded, taking `seconds`. */
void loom_index_summary(const struct loom_index_job *jobs, int n, const struct loom_index_opts *o,
			double seconds, char *buf, size_t len);

#endif
