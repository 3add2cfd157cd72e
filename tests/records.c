/* Unit tests for loom_records (lib/data/loom_records.h): the records of
 * TFRecord files made here, streamed or by a range numbered across the
 * files (read through their indexes), each handed over with its file,
 * number and offset; what each file holds told when it is done; the
 * function's own failure stops the walk; stdin in a range, a missing file
 * and a damaged record are refused; no tool. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_index.h"
#include "loom_records.h"
#include "loom_tfrecord.h"
#include "tap.h"

/* A file of n records whose payloads are "<tag><i>", with its index. */
static char *make(const char *name, int n, char tag)
{
	char *p = strdup(tap_path(name)), out[4300];
	FILE *f = fopen(p, "w");
	for (int i = 0; i < n; i++) {
		char pay[16];
		uint8_t rec[32];
		int len = snprintf(pay, sizeof pay, "%c%d", tag, i);
		loom_tfr_frame(rec, pay, (size_t)len);
		fwrite(rec, 1, (size_t)len + 16, f);
	}
	fclose(f);
	snprintf(out, sizeof out, "%s.index", p);
	struct loom_index_job job = { .path = p, .out = out };
	struct loom_index_opts o = { LOOM_INDEX_WRITE, 0, 1, NULL, NULL };
	if (loom_index_one(&job, &o))
		diag("%s", job.err.msg);
	return p;
}

static char seen[4096];
static int stop_at = -1, calls;

static int fn(void *ctx, const char *path, uint64_t idx, uint64_t off, const uint8_t *p, size_t len)
{
	(void)ctx;
	(void)path;
	if (calls++ == stop_at)
		return LOOM_EIO;
	size_t at = strlen(seen);
	snprintf(seen + at, sizeof seen - at, "%.*s@%llu/%llu ", (int)len, (const char *)p,
		 (unsigned long long)idx, (unsigned long long)off);
	return 0;
}

static void done(void *ctx, const char *path, uint64_t count, uint64_t lo, uint64_t hi)
{
	(void)ctx;
	size_t at = strlen(seen);
	snprintf(seen + at, sizeof seen - at, "[%s %llu %llu-%llu] ", strrchr(path, '/') + 1,
		 (unsigned long long)count, (unsigned long long)lo, (unsigned long long)hi);
}

int main(void)
{
	ok(tap_tmpdir() != NULL, "scratch dir");
	char *files[] = { make("a.tfrecord", 3, 'a'), make("b.tfrecord", 2, 'b'), NULL };
	struct loom_records_fns f = { fn, done, NULL };
	struct loom_err err;
	is_int(loom_records_stream(files, 2, &f, &err), 0, "stream two files");
	is_str(seen, "a0@0/0 a1@1/18 a2@2/36 [a.tfrecord 3 0-3] b0@0/0 b1@1/18 [b.tfrecord 2 0-2] ",
	       "every record with its number and offset, then the file's count");
	seen[0] = 0;
	is_int(loom_records_range(files, 2, 2, 4, &f, &err), 0, "range 2:4 across the files");
	is_str(seen, "a2@2/36 [a.tfrecord 3 2-3] b0@0/0 [b.tfrecord 2 0-1] ", "through the indexes");
	seen[0] = 0;
	is_int(loom_records_range(files, 2, 1, 2, &f, &err), 0, "range 1:2");
	is_str(seen, "a1@1/18 [a.tfrecord 3 1-2] ", "stops once past the range");
	seen[0] = 0;
	is_int(loom_records_range(files, 2, 9, UINT64_MAX, &f, &err), 0, "a range past the end");
	is_str(seen, "[a.tfrecord 3 3-3] [b.tfrecord 2 2-2] ", "nothing read");

	seen[0] = 0;
	calls = 0;
	stop_at = 1;
	is_int(loom_records_stream(files, 2, &f, &err), LOOM_EIO, "the function fails: stop");
	ok(!err.msg[0] && !strcmp(seen, "a0@0/0 "), "no message of our own, no done");
	stop_at = -1;

	char *with_stdin[] = { files[0], "-", NULL };
	seen[0] = 0;
	is_int(loom_records_range(with_stdin, 2, 0, 10, &f, &err), LOOM_EINVAL, "stdin in a range");
	ok(strstr(seen, "[a.tfrecord 3 0-3]") != NULL, "after the files before it");
	is_int(loom_records_range(with_stdin, 2, 0, 2, &f, &err), 0, "a range that ends before stdin");
	char *missing[] = { "/nonexistent/x.tfrecord", NULL };
	ok(loom_records_stream(missing, 1, &f, &err) < 0 && strstr(err.msg, "/nonexistent/x.tfrecord"),
	   "a missing file: %s", err.msg);

	FILE *fp = fopen(files[1], "r+");
	fseek(fp, 20, SEEK_SET);
	fputc('X', fp);
	fclose(fp);
	ok(loom_records_stream(files + 1, 1, &f, &err) < 0 && strstr(err.msg, "record 1 at byte 18"),
	   "a damaged record, streamed: %s", err.msg);
	ok(loom_records_range(files, 2, 4, 5, &f, &err) < 0 && strstr(err.msg, "b.tfrecord"),
	   "... read through the index: %s", err.msg);
	free(files[0]);
	free(files[1]);
	return done_testing();
}
