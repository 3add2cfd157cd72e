/*
 * loom_tfrecord.h - TFRecord files: writer, streaming reader, index, and
 * random access through the index.
 *
 * Purpose: the container every loom shard uses (formats/tfrecord.md):
 *
 *   u64 LE length | u32 LE masked crc32c(length bytes) | payload | u32 LE masked crc32c(payload)
 *
 * and its index (formats/index.md, the `tfrecord` package's tfrecord2idx
 * format): one ASCII line "<offset> <record size incl. 16 framing bytes>\n"
 * per record.
 *
 *  - loom_tfr_writer: buffered (large writes) onto an atomic loom_outfile;
 *    collects the index entries and optionally the sha256 of the bytes as
 *    they are written, so that a shard, its index and its manifest entry
 *    need one pass.  Nothing appears under the final name before commit.
 *  - loom_tfr_reader: streaming, any fd (files, pipes, stdin); checks the
 *    length CRC always, the payload CRC unless told not to, and every length
 *    against the file size (regular files) or LOOM_TFR_MAX_RECORD (pipes).
 *  - loom_tfr_file: a shard plus its index for random access by record
 *    number with pread (thread-safe reads into caller buffers); the index is
 *    validated against the file on open (consecutive offsets, sizes >= 16,
 *    last record ending exactly at the file size) and each read checks the
 *    record's framing against the index and both CRCs.
 *
 * Ownership: _new/_open return objects freed with _free (accepts NULL).
 * Payload pointers returned by the reader stay valid until its next call.
 *
 * Errors: 0 (or a count) on success, negative LOOM_E* on failure, with a
 * one-line message naming the file, the record number and byte offset,
 * e.g. "shard-00001.tfrecord: record 17 at byte 88412: payload CRC mismatch",
 * from loom_tfr_*_error().  CRC failures are LOOM_ECHECKSUM; a record cut
 * short or a length running past the end of the file LOOM_ETRUNC; a bad
 * index, or an index that disagrees with its file, LOOM_EFORMAT; system
 * errors LOOM_EIO.  A clean end of a stream is LOOM_EOF.
 *
 * Thread-safety: the default (loom_common.h), except that a loom_tfr_file
 * may be read (loom_tfr_file_read) by several threads at once, and that
 * loom_tfr_versions() returns a static buffer (not thread-safe).  A writer
 * writes on a thread of its own, behind its calls.
 */
#ifndef LOOM_TFRECORD_H
#define LOOM_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

#define LOOM_TFR_HEADER 12    /* u64 length + u32 length CRC */
#define LOOM_TFR_FOOTER 4     /* u32 payload CRC */
#define LOOM_TFR_OVERHEAD 16  /* framing bytes per record */
/* Largest payload accepted where the file size is unknown (pipes): 1 GiB. */
#define LOOM_TFR_MAX_RECORD (1ull << 30)

/* "protobuf-c 1.4.1, jansson 2.14, CRC-32C SSE4.2": the libraries behind the
 * TFRecord tools, for their --version. */
const char *loom_tfr_versions(void);

/* ---- writer ------------------------------------------------------------ */

enum {
	LOOM_TFW_SHA256 = 1,  /* hash the bytes written (loom_tfr_writer_sha256) */
	LOOM_TFW_NO_INDEX = 2, /* do not collect index entries */
	LOOM_TFW_ASYNC = 4    /* hash and write full buffers on a background
				 thread (double buffering; 2 x bufsize memory) */
};

struct loom_tfr_writer;

/* Open `path` ("-" = stdout, not atomic) for writing through a buffer of
 * `bufsize` bytes (0 = default 4 MiB).  Returns NULL and sets *err on
 * failure. */
struct loom_tfr_writer *loom_tfr_writer_new(const char *path, size_t bufsize,
					    int flags, struct loom_err *err);
/* Append one record. */
int loom_tfr_writer_write(struct loom_tfr_writer *w, const void *payload, size_t n);
/* Zero-copy append: reserve room for a payload of at most `max` bytes and
 * return where to put it (NULL on failure: see the error), then call
 * loom_tfr_writer_finish() with the actual length (<= max). */
uint8_t *loom_tfr_writer_reserve(struct loom_tfr_writer *w, size_t max);
int loom_tfr_writer_finish(struct loom_tfr_writer *w, size_t n);
/* Change the final name before commit (same directory: the temporary
 * file stays where it is), e.g. once the number of shards is known. */
int loom_tfr_writer_rename(struct loom_tfr_writer *w, const char *path);
/* Flush, fsync and rename to the final name. */
int loom_tfr_writer_commit(struct loom_tfr_writer *w);
/* Write the index of what was written so far to `path` atomically. */
int loom_tfr_writer_write_index(struct loom_tfr_writer *w, const char *path);
/* After commit with LOOM_TFW_SHA256: lower-case hex sha256 of the file. */
const char *loom_tfr_writer_sha256(const struct loom_tfr_writer *w);
uint64_t loom_tfr_writer_records(const struct loom_tfr_writer *w);
uint64_t loom_tfr_writer_bytes(const struct loom_tfr_writer *w);
/* Frees; if not committed, removes the temporary file (final name untouched). */
void loom_tfr_writer_free(struct loom_tfr_writer *w);
const char *loom_tfr_writer_error(const struct loom_tfr_writer *w);

/* Frame one record into out[n + 16] (for tests and small writers). */
void loom_tfr_frame(uint8_t *out, const void *payload, size_t n);

/* ---- streaming reader -------------------------------------------------- */

enum {
	LOOM_TFR_NO_PAYLOAD_CRC = 1, /* skip payload CRCs (length CRCs still checked) */
	LOOM_TFR_SKIP_PAYLOAD = 2    /* do not even read payloads (seek over them;
					 regular files only, else read and drop) */
};

struct loom_tfr_record {
	const uint8_t *data;  /* payload (NULL with LOOM_TFR_SKIP_PAYLOAD) */
	size_t len;           /* payload length */
	uint64_t offset;      /* byte offset of the record's first framing byte */
	uint64_t index;       /* record number, from 0 */
};

struct loom_tfr_reader;

/* path "-" = stdin. */
struct loom_tfr_reader *loom_tfr_reader_open(const char *path, int flags,
					     struct loom_err *err);
/* Read from an open fd (not closed by _free); `name` is used in messages. */
struct loom_tfr_reader *loom_tfr_reader_fdopen(int fd, const char *name, int flags,
					       struct loom_err *err);
/* Next record: 0 and *rec filled, LOOM_EOF at a clean end, or an error. */
int loom_tfr_reader_next(struct loom_tfr_reader *r, struct loom_tfr_record *rec);
/* Bytes consumed so far (the offset of the next record). */
uint64_t loom_tfr_reader_offset(const struct loom_tfr_reader *r);
void loom_tfr_reader_free(struct loom_tfr_reader *r);
const char *loom_tfr_reader_error(const struct loom_tfr_reader *r);

/* ---- in memory ---------------------------------------------------------- */

/* 1 if buf[0..len) starts like a TFRecord file: 12 bytes or more, and the
 * first length's CRC checks. */
int loom_tfr_sniff(const void *buf, size_t len);
/* The record at byte *off of a whole TFRecord file held in buf[0..len)
 * (record number `index`; `name` for messages): both CRCs checked, its
 * payload in *rec (pointing into buf), *off moved past it.  Returns 0,
 * LOOM_EOF at the end of the buffer, LOOM_ETRUNC for a record cut short by
 * it, or LOOM_ECHECKSUM, with "NAME: record I at byte B: ..." in *err. */
int loom_tfr_buf_next(const void *buf, size_t len, uint64_t *off, uint64_t index,
		      const char *name, struct loom_tfr_record *rec, struct loom_err *err);

/* ---- index ------------------------------------------------------------- */

/* Parse index text into offsets[0..n] (n+1 entries: offsets[n] is the end of
 * the last record); record i spans [offsets[i], offsets[i+1]).  Rejects
 * malformed lines, gaps/overlaps and sizes < 16.  `name` is used in
 * messages.  *offsets is malloc'd (free it). */
int loom_tfr_index_parse(const char *text, size_t len, const char *name,
			 uint64_t **offsets, uint64_t *n, struct loom_err *err);
/* The most bytes a (generously spaced) index of a file of `file_bytes`
 * can hold: every record takes at least LOOM_TFR_OVERHEAD bytes.  Readers
 * bound an index's size with it. */
size_t loom_tfr_index_max(uint64_t file_bytes);
/* Format the index of records offsets[0..n] into a malloc'd buffer. */
int loom_tfr_index_format(const uint64_t *offsets, uint64_t n, char **text,
			  size_t *len, struct loom_err *err);
/* Write the index atomically to `path`. */
int loom_tfr_index_write(const char *path, const uint64_t *offsets, uint64_t n,
			 struct loom_err *err);

/* One pass over a whole TFRecord file (path, or "-": stdin): its index,
 * offsets[0..records] (the last one the end of the file, as
 * loom_tfr_index_format takes them; free() it), and payload sizes.  With a
 * check, every payload's CRC is checked and check() called on it; its
 * error stops the scan as "PATH: record N at byte B: <its message>".
 * progress, if not NULL, is called every 1024 records (records, bytes read).
 * Returns 0, or a negative LOOM_E* with the message in err (nothing to free). */
struct loom_tfr_scan {
	uint64_t *offsets;
	uint64_t records, bytes;    /* bytes: the file's */
	uint64_t pmin, pmax, psum;  /* payload sizes; pmin UINT64_MAX without records */
};
int loom_tfr_scan(const char *path,
		  int (*check)(void *ctx, const uint8_t *payload, size_t len, struct loom_err *e),
		  void (*progress)(void *ctx, uint64_t records, uint64_t bytes), void *ctx,
		  struct loom_tfr_scan *s, struct loom_err *err);

/* ---- random access ----------------------------------------------------- */

struct loom_tfr_file;

/* Open shard `path` with its index (`index_path` NULL = path + ".index");
 * validates the index against the file size.  Shard files (these and the
 * writers') keep their descriptors while they hold under half the soft
 * limit on open files; past that a file is opened for each read (and must
 * still be a regular file of its size) or each block written, so sets of
 * more shards than the limit are read and written. */
struct loom_tfr_file *loom_tfr_file_open(const char *path, const char *index_path,
					 struct loom_err *err);
/* The same for `fd`, shard `path` already opened with loom_file_open_regular
 * (its size in `size`): the object owns fd from here on, even on failure. */
struct loom_tfr_file *loom_tfr_file_open_fd(int fd, uint64_t size, const char *path,
					    const char *index_path, struct loom_err *err);
uint64_t loom_tfr_file_count(const struct loom_tfr_file *f);
/* Payload length of record i (from the index; i < count). */
size_t loom_tfr_file_payload_len(const struct loom_tfr_file *f, uint64_t i);
/* Largest payload length in the file. */
size_t loom_tfr_file_max_payload(const struct loom_tfr_file *f);
/* Byte offset of record i. */
uint64_t loom_tfr_file_offset(const struct loom_tfr_file *f, uint64_t i);
/* Read record i's payload into buf (cap >= its payload length) with one
 * preadv, checking the length field against the index and both CRCs.
 * Thread-safe: concurrent calls are fine; errors go to `err` when non-NULL
 * (recommended from threads), else to the object's own message. */
int loom_tfr_file_read(struct loom_tfr_file *f, uint64_t i, void *buf, size_t cap,
		       size_t *len, struct loom_err *err);
const char *loom_tfr_file_path(const struct loom_tfr_file *f);
void loom_tfr_file_free(struct loom_tfr_file *f);
const char *loom_tfr_file_error(const struct loom_tfr_file *f);

#endif
