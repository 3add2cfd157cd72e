/* Unit tests for loom_index (lib/data/loom_index.h): TFRecord files made
 * here indexed by several threads, each job's result in its job whatever
 * the others do; the index written byte-identical to tfrecord2idx's lines;
 * --check's comparison naming the first line that differs; --verify's
 * Example check; a damaged file refused with its record and offset; the
 * progress callback; no tool. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom_example.h"
#include "loom_index.h"
#include "tap.h"

/* A file of n records, record i an Example of i%60+1 ids (or, with junk,
 * record 1 a payload that is not an Example). */
static const char *make(const char *name, int n, int junk)
{
	const char *p = tap_path(name);
	FILE *f = fopen(p, "w");
	for (int i = 0; i < n; i++) {
		int64_t v[64];
		uint8_t pay[1024], rec[1100];
		for (int k = 0; k <= i % 60; k++)
			v[k] = k * 7;
		size_t len = loom_example_encode_i64("input_ids", v, (size_t)(i % 60) + 1, pay);
		if (junk && i == 1)
			len = (size_t)sprintf((char *)pay, "not an Example");
		loom_tfr_frame(rec, pay, len);
		fwrite(rec, 1, len + 16, f);
	}
	fclose(f);
	return p;
}

static int calls;
static void progress(void *ud, const char *path, uint64_t records, uint64_t bytes)
{
	(void)path;
	(void)bytes;
	if (records != 1024)
		return;
	(*(int *)ud)++;
	calls++;
}

int main(void)
{
	ok(tap_tmpdir() != NULL, "scratch dir");
	char outs[8][4300];
	struct loom_index_job jobs[8] = { 0 };
	for (int i = 0; i < 8; i++) {
		char name[32];
		snprintf(name, sizeof name, "f%d.tfrecord", i);
		jobs[i].path = strdup(make(name, i + 2, 0));
		snprintf(outs[i], sizeof outs[i], "%s.index", jobs[i].path);
		jobs[i].out = outs[i];
	}
	struct loom_index_opts o = { LOOM_INDEX_WRITE, 1, 3, NULL, NULL };
	is_int(loom_index_run(jobs, 8, &o), 0, "8 files, 3 threads: none failed");
	size_t len;
	char *idx = tap_slurp(&len, "%s", outs[1]);
	/* records of 1, 2, 3 ids: payloads 22, 23, 24 bytes, framed +16 */
	is_str(idx, "0 38\n38 39\n77 40\n", "tfrecord2idx's lines");
	free(idx);
	ok(jobs[7].st.records == 9 && jobs[7].st.pmin == 22 && jobs[7].st.offsets == NULL,
	   "the scan's counts kept, its offsets not");

	o.mode = LOOM_INDEX_CHECK;
	is_int(loom_index_run(jobs, 8, &o), 0, "--check: all match");
	FILE *f = fopen(outs[2], "w");
	fputs("0 38\n38 99\n", f);
	fclose(f);
	is_int(loom_index_run(jobs, 8, &o), 1, "--check: one index changed");
	is_int(jobs[2].rc, LOOM_EFORMAT, "that job failed");
	ok(strstr(jobs[2].err.msg, "f2.tfrecord.index: index disagrees with its file") &&
	   strstr(jobs[2].err.msg, "f2.tfrecord' from line 2 on"), "%s", jobs[2].err.msg);
	ok(jobs[1].rc == 0 && jobs[3].rc == 0, "its neighbours did not");

	struct loom_index_job bad = { .path = make("junk.tfrecord", 3, 1), .out = tap_path("junk.idx") };
	o = (struct loom_index_opts){ LOOM_INDEX_WRITE, 1, 1, progress, &calls };
	ok(loom_index_one(&bad, &o) < 0 && strstr(bad.err.msg, "record 1 at byte 38: "),
	   "--verify: a payload that is not an Example: %s", bad.err.msg);
	ok(access(tap_path("junk.idx"), F_OK) != 0, "no index for it");
	o.verify = 0;
	o.mode = LOOM_INDEX_SCAN;
	int mine = 0;
	o.progress_ud = &mine;
	is_int(loom_index_one(&bad, &o), 0, "without --verify: CRCs only, fine");
	ok(access(tap_path("junk.idx"), F_OK) != 0 && bad.st.records == 3, "scan only: no index");
	struct loom_index_job big = { .path = make("big.tfrecord", 1100, 0), .out = "-" };
	is_int(loom_index_one(&big, &o), 0, "1100 records");
	ok(mine == 1 && calls == 1, "progress told every 1024 records, to its ud");

	f = fopen(bad.path, "r+");
	fseek(f, 40, SEEK_SET);
	fputc('X', f);
	fclose(f);
	ok(loom_index_one(&bad, &o) < 0 && strstr(bad.err.msg, "junk.tfrecord: record 1 at byte 38"),
	   "a damaged record: %s", bad.err.msg);

	struct loom_index_job two[2] = { { .path = "a.tfrecord", .out = "-" }, { .path = "-", .out = "b.idx" } };
	two[0].st = (struct loom_tfr_scan){ .records = 3, .bytes = 120, .pmin = 20, .pmax = 30, .psum = 75 };
	two[1].st = (struct loom_tfr_scan){ .records = 1, .bytes = 2000, .pmin = 9, .pmax = 9, .psum = 9 };
	char stats[300], detail[300];
	o = (struct loom_index_opts){ LOOM_INDEX_WRITE, 1, 1, NULL, NULL };
	loom_index_describe(&two[0], &o, stats, detail, sizeof stats);
	is_str(stats, "a.tfrecord: 3 records, 120 bytes, payload min 20 max 30 mean 25.0", "--stats line");
	is_str(detail, "a.tfrecord: 3 records, 120 bytes, verified, index written to stdout", "-v line");
	o.mode = LOOM_INDEX_CHECK;
	loom_index_describe(&two[1], &o, stats, detail, sizeof stats);
	is_str(detail, "(stdin): 1 records, 2000 bytes, verified, index matches", "-v line, --check, stdin");
	loom_index_summary(two, 2, &o, 0.5, stats, sizeof stats);
	is_str(stats, "2 files, 4 records, 2.1 kB, CRCs and Examples verified, indexes match, 0.50 s (4.2 kB/s)",
	       "summary");
	o = (struct loom_index_opts){ LOOM_INDEX_SCAN, 0, 1, NULL, NULL };
	loom_index_summary(two + 1, 1, &o, 0, stats, sizeof stats);
	is_str(stats, "1 file, 1 record, 2.0 kB, 0.00 s (0 B/s)", "summary: scan only, no time");
	for (int i = 0; i < 8; i++)
		free((char *)jobs[i].path);
	return done_testing();
}
