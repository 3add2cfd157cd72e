/* Fuzz target: the TFRecord streaming reader, the index parser, and random
 * access through an index, cross-checked: whatever the streaming reader
 * accepts, the index it implies must open and read back the same payloads. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "loom_tfrecord.h"

static int memfd_with(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz", 0);
	if (fd < 0)
		return -1;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return -1;
	}
	lseek(fd, 0, SEEK_SET);
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loom_err e;
	uint64_t *off = NULL, n = 0;

	/* The input as index text. */
	if (loom_tfr_index_parse((const char *)data, size, "fuzz", &off, &n, &e) == 0) {
		for (uint64_t i = 0; i < n; i++)
			if (off[i + 1] < off[i] + LOOM_TFR_OVERHEAD)
				abort();
		free(off);
	}

	/* The input as a TFRecord file. */
	int fd = memfd_with(data, size);
	if (fd < 0)
		return 0;
	int flags = size ? data[size - 1] % 3 : 0; /* 0, NO_PAYLOAD_CRC, SKIP_PAYLOAD */
	struct loom_tfr_reader *r = loom_tfr_reader_fdopen(fd, "fuzz", flags, &e);
	if (!r) {
		close(fd);
		return 0;
	}
	size_t cap = 16;
	off = malloc(cap * sizeof *off);
	off[0] = 0;
	n = 0;
	struct loom_tfr_record rec;
	int rc;
	while ((rc = loom_tfr_reader_next(r, &rec)) == 0) {
		if (rec.offset != off[n] || rec.index != n)
			abort();
		if (rec.offset + rec.len + LOOM_TFR_OVERHEAD > size)
			abort();
		if (rec.data && memcmp(rec.data, data + rec.offset + LOOM_TFR_HEADER, rec.len))
			abort();
		if (n + 2 > cap) {
			cap *= 2;
			off = realloc(off, cap * sizeof *off);
		}
		off[++n] = rec.offset + rec.len + LOOM_TFR_OVERHEAD;
	}
	if (rc != LOOM_EOF && !loom_tfr_reader_error(r)[0])
		abort(); /* every error has a message */
	loom_tfr_reader_free(r);

	if (rc == LOOM_EOF && flags == 0) {
		/* Clean file: its index opens and random access agrees. */
		char *text;
		size_t tl;
		if (loom_tfr_index_format(off, n, &text, &tl, &e) == 0) {
			int ifd = memfd_with((const uint8_t *)text, tl);
			char path[64], ipath[64];
			snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
			snprintf(ipath, sizeof ipath, "/proc/self/fd/%d", ifd);
			struct loom_tfr_file *f = ifd >= 0 ? loom_tfr_file_open(path, ipath, &e) : NULL;
			if (ifd >= 0 && !f)
				abort();
			for (uint64_t i = 0; f && i < n; i++) {
				size_t len = loom_tfr_file_payload_len(f, i), got;
				uint8_t *buf = malloc(len + 1);
				if (loom_tfr_file_read(f, i, buf, len, &got, &e) != 0 || got != len ||
				    memcmp(buf, data + off[i] + LOOM_TFR_HEADER, len))
					abort();
				free(buf);
			}
			loom_tfr_file_free(f);
			if (ifd >= 0)
				close(ifd);
			free(text);
		}
	}
	free(off);
	close(fd);
	return 0;
}
