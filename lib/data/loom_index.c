/* loom_index.c - index, check or verify TFRecord files in parallel
 * (loom_index.h). */
#include "loom_index.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_example.h"
#include "loom_file.h"

static int check_example(void *ctx, const uint8_t *payload, size_t len, struct loom_err *e)
{
	(void)ctx;
	return loom_example_check(payload, len, e);
}

struct scan_ctx {
	const struct loom_index_job *job;
	const struct loom_index_opts *o;
};

static void on_scan(void *ctx, uint64_t records, uint64_t bytes)
{
	const struct scan_ctx *c = ctx;
	if (c->o->progress)
		c->o->progress(c->o->progress_ud, c->job->path, records, bytes);
}

/* The index at job->out against the scan's offsets. */
static int compare_index(struct loom_index_job *job, const struct loom_tfr_scan *s)
{
	char *have = NULL, *want = NULL;
	size_t hl, wl;
	int rc = loom_file_read_bounded(job->out, loom_tfr_index_max(s->bytes), &have, &hl,
					&job->err);
	if (rc == 0)
		rc = loom_tfr_index_format(s->offsets, s->records, &want, &wl, &job->err);
	if (rc == 0 && (hl != wl || memcmp(have, want, wl))) {
		/* Name the first line that differs. */
		size_t line = 1, i = 0;
		while (i < hl && i < wl && have[i] == want[i])
			line += have[i++] == '\n';
		rc = loom_err_set(&job->err, LOOM_EFORMAT,
				  "%s: index disagrees with its file '%s' from line %zu on", job->out,
				  job->path, line);
	}
	free(have);
	free(want);
	return rc;
}

int loom_index_one(struct loom_index_job *job, const struct loom_index_opts *o)
{
	struct loom_tfr_scan s;
	struct scan_ctx c = { job, o };
	int rc = loom_tfr_scan(job->path, o->verify ? check_example : NULL, on_scan, &c, &s,
			       &job->err);
	if (rc < 0)
		return job->rc = rc;
	if (o->mode == LOOM_INDEX_CHECK)
		rc = compare_index(job, &s);
	else if (o->mode == LOOM_INDEX_WRITE)
		rc = loom_tfr_index_write(job->out, s.offsets, s.records, &job->err);
	free(s.offsets);
	s.offsets = NULL;
	if (rc == 0)
		job->st = s;
	return job->rc = rc < 0 ? rc : 0;
}

struct pool {
	struct loom_index_job *jobs;
	int n, next;
	const struct loom_index_opts *o;
	pthread_mutex_t lock;
};

static void *worker(void *arg)
{
	struct pool *p = arg;
	for (;;) {
		pthread_mutex_lock(&p->lock);
		int i = p->next++;
		pthread_mutex_unlock(&p->lock);
		if (i >= p->n)
			return NULL;
		loom_index_one(&p->jobs[i], p->o);
	}
}

int loom_index_run(struct loom_index_job *jobs, int n, const struct loom_index_opts *o)
{
	struct pool p = { jobs, n, 0, o, PTHREAD_MUTEX_INITIALIZER };
	int nthreads = o->threads < 1 ? 1 : o->threads, started = 0, failed = 0;
	pthread_t *tid = calloc((size_t)nthreads, sizeof *tid);
	for (int i = 1; tid && i < nthreads; i++)
		started += pthread_create(&tid[1 + started], NULL, worker, &p) == 0;
	worker(&p);
	for (int i = 1; i <= started; i++)
		pthread_join(tid[i], NULL);
	free(tid);
	for (int i = 0; i < n; i++)
		failed += jobs[i].rc < 0;
	return failed;
}

void loom_index_describe(const struct loom_index_job *job, const struct loom_index_opts *o,
			 char *stats, char *detail, size_t n)
{
	const struct loom_tfr_scan *s = &job->st;
	snprintf(stats, n, "%s: %" PRIu64 " records, %" PRIu64 " bytes, payload min %" PRIu64
		 " max %" PRIu64 " mean %.1f", job->path, s->records, s->bytes,
		 s->records ? s->pmin : 0, s->pmax,
		 s->records ? (double)s->psum / (double)s->records : 0.0);
	snprintf(detail, n, "%s: %" PRIu64 " records, %" PRIu64 " bytes%s%s%s",
		 strcmp(job->path, "-") ? job->path : "(stdin)", s->records, s->bytes,
		 o->verify ? ", verified" : "",
		 o->mode == LOOM_INDEX_CHECK ? ", index matches" :
		 o->mode == LOOM_INDEX_SCAN ? "" : ", index written to ",
		 o->mode != LOOM_INDEX_WRITE ? "" : strcmp(job->out, "-") ? job->out : "stdout");
}

void loom_index_summary(const struct loom_index_job *jobs, int n, const struct loom_index_opts *o,
			double seconds, char *buf, size_t len)
{
	uint64_t records = 0, bytes = 0;
	char b1[32], b2[32];
	for (int i = 0; i < n; i++) {
		records += jobs[i].st.records;
		bytes += jobs[i].st.bytes;
	}
	snprintf(buf, len, "%d file%s, %" PRIu64 " record%s, %s%s%s, %.2f s (%s/s)", n,
		 n == 1 ? "" : "s", records, records == 1 ? "" : "s",
		 loom_fmt_bytes((double)bytes, b1, sizeof b1),
		 o->verify ? ", CRCs and Examples verified" : "",
		 o->mode == LOOM_INDEX_CHECK ? ", indexes match" :
		 o->mode == LOOM_INDEX_SCAN ? "" : ", indexes written", seconds,
		 loom_fmt_bytes(seconds > 0 ? (double)bytes / seconds : 0, b2, sizeof b2));
}
