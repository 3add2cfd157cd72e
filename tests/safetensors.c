/* Unit tests for loom_safetensors: write/read round trip, the exact byte
 * layout, and every structural refusal of the reader. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "loom_crc32c.h"
#include "loom_file.h"
#include "loom_safetensors.h"
#include "tap.h"

static const char *dir;
static char path[4200];	/* dir/t.safetensors */

/* Three tensors of three dtypes, and metadata: what the cases write. */
static float a[6] = {1, 2, 3, 4, 5, 6};
static int64_t b[2] = {-1, 1ll << 40};
static uint8_t c[3] = {7, 8, 9};
static struct loom_st_tensor t[3] = {
	{.name = "a", .dtype = LOOM_ST_F32, .ndim = 2, .shape = {2, 3}, .data = a},
	{.name = "b.weight", .dtype = LOOM_ST_I64, .ndim = 1, .shape = {2}, .data = b},
	{.name = "c", .dtype = LOOM_ST_U8, .ndim = 1, .shape = {3}, .data = c},
};
static const char *meta[] = {"format", "pt", "note", "hi", NULL};

/* Build a file from a header string and data bytes; parse it. */
static struct loom_st *parse_raw(const char *hdr, size_t dlen, struct loom_err *err)
{
	static unsigned char buf[4096];
	size_t h = strlen(hdr);
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)h >> (8 * i));
	memcpy(buf + 8, hdr, h);
	memset(buf + 8 + h, 0xab, dlen);
	return loom_st_parse(buf, 8 + h + dlen, "x.safetensors", err);
}

static void refuse(const char *name, const char *hdr, size_t dlen, int code, const char *want)
{
	struct loom_err err = {0};
	struct loom_st *st = parse_raw(hdr, dlen, &err);
	ok(st == NULL, "%s: refused", name);
	is_int(err.code, code, "%s: code", name);
	ok(strstr(err.msg, want) != NULL, "%s: '%s' has '%s'", name, err.msg, want);
	loom_st_free(st);
}

/* dtype names and sizes. */
static void case_dtypes(void)
{
	is_int(loom_st_dtype_parse("F32"), LOOM_ST_F32, "dtype F32");
	is_int(loom_st_dtype_parse("F33"), -1, "unknown dtype");
	is_int(loom_st_dtype_size(LOOM_ST_BF16), 2, "BF16 size");
}

/* The written file: header padding, size, CRC-32C, layout. */
static void case_write(void)
{
	struct loom_err err = {0};
	struct loom_st_sum sum = {0};
	is_int(loom_st_write(path, t, 3, meta, &sum, &err), 0, "write 3 tensors");

	char *raw;
	size_t len;
	is_int(loom_read_file(path, &raw, &len, &err), 0, "read back raw");
	uint64_t hl = 0;
	for (int i = 0; i < 8; i++)
		hl |= (uint64_t)(unsigned char)raw[i] << (8 * i);
	is_int(hl % 8, 0, "header padded to a multiple of 8");
	is_int(len, 8 + hl + 24 + 16 + 3, "file size = 8 + header + data");
	ok(sum.bytes == len && sum.crc32c == loom_crc32c(0, raw, len),
	   "size and CRC-32C computed while writing match the file");
	ok(memcmp(raw + 8 + hl, a, 24) == 0, "first tensor's bytes right after the header");
	ok(strstr(raw + 8, "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}") != NULL,
	   "header JSON of tensor a");
	free(raw);
}

/* Read back: tensors, metadata, order; -1 if the file does not open. */
static int case_read_back(void)
{
	struct loom_err err = {0};
	struct loom_st *st = loom_st_open(path, &err);
	ok(st != NULL, "open: %s", st ? "ok" : err.msg);
	if (!st)
		return -1;
	is_int(loom_st_count(st), 3, "3 tensors");
	const struct loom_st_tensor *x = loom_st_find(st, "a");
	ok(x && x->dtype == LOOM_ST_F32 && x->ndim == 2 && x->shape[0] == 2 && x->shape[1] == 3 &&
	   x->nbytes == 24 && memcmp(x->data, a, 24) == 0, "tensor a round-trips");
	x = loom_st_find(st, "b.weight");
	ok(x && x->dtype == LOOM_ST_I64 && memcmp(x->data, b, 16) == 0, "tensor b round-trips");
	x = loom_st_find(st, "c");
	ok(x && x->nbytes == 3 && memcmp(x->data, c, 3) == 0, "tensor c round-trips");
	ok(loom_st_find(st, "nope") == NULL, "absent tensor");
	is_str(loom_st_meta(st, "format"), "pt", "metadata format");
	is_str(loom_st_meta(st, "note"), "hi", "metadata note");
	ok(loom_st_meta(st, "zz") == NULL, "absent metadata");
	is_str(loom_st_get(st, 0)->name, "a", "sorted by offset");
	loom_st_free(st);
	return 0;
}

/* A scalar and an empty tensor are legal. */
static void case_scalar_and_empty(void)
{
	struct loom_err err = {0};
	float s = 3.5f;
	struct loom_st_tensor t2[2] = {
		{.name = "s", .dtype = LOOM_ST_F32, .ndim = 0, .data = &s},
		{.name = "e", .dtype = LOOM_ST_F32, .ndim = 2, .shape = {0, 4}, .data = NULL},
	};
	is_int(loom_st_write(path, t2, 2, NULL, NULL, &err), 0, "write scalar + empty");
	struct loom_st *st = loom_st_open(path, &err);
	ok(st && loom_st_find(st, "s")->nbytes == 4 && loom_st_find(st, "e")->nbytes == 0,
	   "scalar and empty tensor read back");
	loom_st_free(st);
}

/* Writer refusals. */
static void case_writer_refusals(void)
{
	struct loom_err err = {0};
	struct loom_st_tensor dup[2] = {t[0], t[0]};
	is_int(loom_st_write(path, dup, 2, NULL, NULL, &err), LOOM_EINVAL, "duplicate names refused");
	struct loom_st_tensor md = t[0];
	md.name = "__metadata__";
	is_int(loom_st_write(path, &md, 1, NULL, NULL, &err), LOOM_EINVAL, "__metadata__ name refused");
}

/* Reader refusals. */
static void case_reader_refusals(void)
{
	refuse("tiny file", "", 0, LOOM_EFORMAT, "header size 0");
	{
		struct loom_err e2;
		ok(loom_st_parse("abc", 3, "x.safetensors", &e2) == NULL &&
		   strstr(e2.msg, "truncated: 3 bytes") != NULL, "3-byte file: %s", e2.msg);
		unsigned char big[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0};
		ok(loom_st_parse(big, 16, "x.safetensors", &e2) == NULL &&
		   e2.code == LOOM_ETRUNC && strstr(e2.msg, "header of 65535 bytes") != NULL,
		   "header longer than the file: %s", e2.msg);
		unsigned char huge[16] = {0, 0, 0, 0, 0, 0, 0, 0x10};
		ok(loom_st_parse(huge, 16, "x.safetensors", &e2) == NULL &&
		   strstr(e2.msg, "not plausible") != NULL, "absurd header size: %s", e2.msg);
	}
	refuse("bad JSON", "{\"a\":", 0, LOOM_EFORMAT, "bad JSON header");
	refuse("not an object", "[1, 2]", 0, LOOM_EFORMAT, "not a JSON object");
	refuse("duplicate key",
	       "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
	       "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2,
	       LOOM_EFORMAT, "duplicate");
	refuse("unknown dtype", "{\"a\":{\"dtype\":\"Q8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
	       1, LOOM_EFORMAT, "unknown dtype 'Q8'");
	refuse("missing offsets", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, LOOM_EFORMAT,
	       "needs dtype, shape and data_offsets");
	refuse("negative dim", "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}",
	       1, LOOM_EFORMAT, "shape[0] is not a non-negative integer");
	refuse("end < begin", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,1]}}",
	       2, LOOM_EFORMAT, "0 <= begin <= end");
	refuse("offset past data",
	       "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8,
	       LOOM_ETRUNC, "end past the data (8 bytes, file truncated?)");
	refuse("shape/size mismatch",
	       "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
	       LOOM_EFORMAT, "8 bytes at [0, 8] but shape x F32 needs 12");
	refuse("shape overflow",
	       "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}",
	       8, LOOM_EFORMAT, "shape x F32 overflows 64 bits");
	refuse("overlap",
	       "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
	       "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", 6,
	       LOOM_EFORMAT, "overlaps");
	refuse("gap",
	       "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
	       "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[3,5]}}", 5,
	       LOOM_EFORMAT, "gap of 1 bytes before tensor 'b'");
	refuse("trailing bytes", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
	       5, LOOM_EFORMAT, "3 bytes after the last tensor");
	refuse("bad metadata", "{\"__metadata__\":{\"k\":1}}", 0, LOOM_EFORMAT,
	       "__metadata__ value 'k' is not a string");
	refuse("too many dims",
	       "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}",
	       1, LOOM_EFORMAT, "9 dimensions");
}

/* Truncated real file. */
static void case_truncated_file(void)
{
	struct loom_err err = {0};
	is_int(loom_st_write(path, t, 3, meta, NULL, &err), 0, "rewrite");
	ok(truncate(path, 60) == 0, "truncate file");
	struct loom_st *st = loom_st_open(path, &err);
	ok(st == NULL && err.code == LOOM_ETRUNC && strstr(err.msg, path) != NULL,
	   "truncated file refused naming it: %s", err.msg);
	loom_st_free(st);
	st = loom_st_open("/nonexistent/x.safetensors", &err);
	ok(st == NULL && strstr(err.msg, "No such file") != NULL, "missing file: %s", err.msg);
}

int main(void)
{
	ok((dir = tap_tmpdir()) != NULL, "scratch dir");
	snprintf(path, sizeof path, "%s/t.safetensors", dir);
	case_dtypes();
	case_write();
	if (case_read_back() < 0)
		return done_testing();
	case_scalar_and_empty();
	case_writer_refusals();
	case_reader_refusals();
	case_truncated_file();
	return done_testing();
}
