/* loom_records.c - the records of TFRecord files, streamed or by range
 * (loom_records.h). */
#include "loom_records.h"

#include <stdlib.h>
#include <string.h>

#include "loom_tfrecord.h"

static int stream_one(const char *path, const struct loom_records_fns *f, struct loom_err *err)
{
	struct loom_tfr_reader *r = loom_tfr_reader_open(path, 0, err);
	if (!r)
		return err->code < 0 ? err->code : LOOM_EIO;
	struct loom_tfr_record rec;
	uint64_t n = 0;
	int rc, told = 0;
	while ((rc = loom_tfr_reader_next(r, &rec)) == 0) {
		if ((rc = f->fn(f->ctx, path, rec.index, rec.offset, rec.data, rec.len)) < 0) {
			told = 1;
			break;
		}
		n++;
	}
	if (told) {
		err->msg[0] = 0;
	} else if (rc == LOOM_EOF) {
		rc = 0;
		f->done(f->ctx, path, n, 0, n);
	} else {
		loom_err_set(err, rc, "%s", loom_tfr_reader_error(r));
	}
	loom_tfr_reader_free(r);
	return rc;
}

int loom_records_stream(char *const *files, int n, const struct loom_records_fns *f,
			struct loom_err *err)
{
	int rc = 0;
	for (int i = 0; i < n && !rc; i++)
		rc = stream_one(files[i], f, err);
	return rc;
}

int loom_records_range(char *const *files, int n, uint64_t a, uint64_t b,
		       const struct loom_records_fns *f, struct loom_err *err)
{
	uint64_t base = 0; /* global number of the file's first record */
	uint8_t *buf = NULL;
	size_t cap = 0;
	int rc = 0;
	for (int i = 0; i < n && !rc && base < b; i++) {
		if (!strcmp(files[i], "-")) {
			rc = loom_err_set(err, LOOM_EINVAL, "a range needs files with an index, not stdin");
			break;
		}
		struct loom_tfr_file *tf = loom_tfr_file_open(files[i], NULL, err);
		if (!tf) {
			rc = err->code < 0 ? err->code : LOOM_EIO;
			break;
		}
		uint64_t cnt = loom_tfr_file_count(tf);
		uint64_t lo = a > base ? a - base : 0;
		uint64_t hi = b - base < cnt ? b - base : cnt;
		if (loom_tfr_file_max_payload(tf) > cap) {
			free(buf);
			cap = loom_tfr_file_max_payload(tf);
			if (!(buf = malloc(cap ? cap : 1)))
				rc = loom_err_set(err, LOOM_ENOMEM, "out of memory");
		}
		for (uint64_t k = lo; k < hi && !rc; k++) {
			size_t len;
			if ((rc = loom_tfr_file_read(tf, k, buf, cap, &len, err)) >= 0 &&
			    (rc = f->fn(f->ctx, files[i], k, loom_tfr_file_offset(tf, k), buf, len)) < 0)
				err->msg[0] = 0; /* told */
		}
		if (!rc)
			f->done(f->ctx, files[i], cnt, lo < hi ? lo : hi, hi);
		base += cnt;
		loom_tfr_file_free(tf);
	}
	free(buf);
	return rc;
}
