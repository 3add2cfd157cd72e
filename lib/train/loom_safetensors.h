/*
 * loom_safetensors.h - the safetensors tensor file format (HuggingFace):
 *
 *   u64 LE  N = header size
 *   N bytes JSON object: {"__metadata__": {"k": "v", ...},
 *                         "name": {"dtype": "F32", "shape": [2, 3],
 *                                  "data_offsets": [begin, end]}, ...}
 *   data    raw little-endian tensor bytes; offsets are relative to the
 *           first byte after the header
 *
 * See formats/checkpoint.md.  The writer lays tensors out in the order
 * given, contiguous, and pads the header with spaces to a multiple of 8 so
 * that data starts aligned.  The reader trusts nothing: the header size
 * against the file size, the JSON (duplicate keys refused), every dtype,
 * shape and offset pair, (end - begin) == product(shape) x dtype size
 * (overflow-checked), and the tensors must tile the data area exactly: no
 * overlaps, no gaps, nothing after the last tensor.
 *
 * Ownership: a reader maps (or borrows) the file; tensor names and data
 * pointers it hands out live as long as the reader.  The writer never
 * keeps caller pointers.
 * Errors: 0 or a negative LOOM_E* code; the message names the file (and
 * the tensor or byte offset) and is kept on the reader, or in `err`.
 * Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_SAFETENSORS_H
#define LOOM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

#define LOOM_ST_MAX_DIMS 8
/* Largest header a reader accepts (the reference implementation: 100 MB). */
#define LOOM_ST_MAX_HEADER (100u << 20)

enum loom_st_dtype {
	LOOM_ST_BOOL, LOOM_ST_U8, LOOM_ST_I8, LOOM_ST_I16, LOOM_ST_U16,
	LOOM_ST_F16, LOOM_ST_BF16, LOOM_ST_I32, LOOM_ST_U32, LOOM_ST_F32,
	LOOM_ST_I64, LOOM_ST_U64, LOOM_ST_F64,
	LOOM_ST_NDTYPES
};

/* "F32" -> LOOM_ST_F32; -1 if unknown. */
int loom_st_dtype_parse(const char *s);
const char *loom_st_dtype_name(int dtype);
size_t loom_st_dtype_size(int dtype);

struct loom_st_tensor {
	const char *name;
	int dtype;		/* enum loom_st_dtype */
	int ndim;		/* 0 (a scalar) .. LOOM_ST_MAX_DIMS */
	uint64_t shape[LOOM_ST_MAX_DIMS];
	const void *data;	/* write: the source bytes (LE); read: in file */
	uint64_t nbytes;	/* read: end - begin; write: computed */
};

/* Size and CRC-32C of a written file, computed from the bytes as they are
 * written (no second read). */
struct loom_st_sum {
	uint64_t bytes;
	uint32_t crc32c;
};

/* Write tensors (in the order given) to `path` atomically (temp name,
 * fsync, rename, fsync dir: lib/common/loom_file.h).  `meta` is NULL or a
 * NULL-terminated list of key, value, key, value ... strings for
 * __metadata__.  Tensor names must be unique and not "__metadata__".
 * `sum` (may be NULL) receives the file's size and CRC-32C. */
int loom_st_write(const char *path, const struct loom_st_tensor *t, size_t n,
		  const char *const *meta, struct loom_st_sum *sum, struct loom_err *err);

/* The bytes loom_st_write puts before the data: the u64 N and N bytes of
 * JSON padded with spaces, as a malloc'd buffer in *header (*hlen = 8 + N
 * bytes); *data_len: the bytes of data that follow (the tensors in the
 * order given, contiguous: tensor i at data offset sum of the sizes
 * before it).  For writers that lay the data out themselves
 * (loom_ckpt_write_slices); the checks and errors are loom_st_write's. */
int loom_st_header(const char *path, const struct loom_st_tensor *t, size_t n,
		   const char *const *meta, char **header, size_t *hlen, uint64_t *data_len,
		   struct loom_err *err);

struct loom_st;

/* Open and validate a file (mmap).  On failure returns NULL with the
 * message in err. */
struct loom_st *loom_st_open(const char *path, struct loom_err *err);
/* Validate a buffer already in memory (borrowed, must outlive the reader);
 * `name` is used in messages.  For tests and the fuzz target. */
struct loom_st *loom_st_parse(const void *buf, size_t len, const char *name,
			      struct loom_err *err);
void loom_st_free(struct loom_st *st);

/* Tensors sorted by data offset. */
size_t loom_st_count(const struct loom_st *st);
const struct loom_st_tensor *loom_st_get(const struct loom_st *st, size_t i);
/* NULL if absent. */
const struct loom_st_tensor *loom_st_find(const struct loom_st *st, const char *name);
/* __metadata__ value for key, NULL if absent. */
const char *loom_st_meta(const struct loom_st *st, const char *key);
/* Copy bytes [off, off + n) of the data of t (one of this reader's
 * tensors; the caller checked the range) to dst.  Of a mapped file the
 * pages read are then dropped from the process's memory (madvise: they
 * stay in the page cache, and a later read maps them again), so that a
 * reader copying its tensors out never holds a file's bytes twice, and a
 * process copying a slice holds only that slice's pages, a few MB at a
 * time. */
void loom_st_copy(const struct loom_st *st, const struct loom_st_tensor *t, uint64_t off,
		  void *dst, size_t n);
/* The file name given to open/parse. */
const char *loom_st_name(const struct loom_st *st);

#endif
