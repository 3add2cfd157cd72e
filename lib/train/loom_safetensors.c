/* loom_safetensors.c - see loom_safetensors.h */
#include "loom_safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom_crc32c.h"
#include "loom_file.h"

static const struct {
	const char *name;
	size_t size;
} dtypes[LOOM_ST_NDTYPES] = {
	[LOOM_ST_BOOL] = {"BOOL", 1}, [LOOM_ST_U8] = {"U8", 1},
	[LOOM_ST_I8] = {"I8", 1}, [LOOM_ST_I16] = {"I16", 2},
	[LOOM_ST_U16] = {"U16", 2}, [LOOM_ST_F16] = {"F16", 2},
	[LOOM_ST_BF16] = {"BF16", 2}, [LOOM_ST_I32] = {"I32", 4},
	[LOOM_ST_U32] = {"U32", 4}, [LOOM_ST_F32] = {"F32", 4},
	[LOOM_ST_I64] = {"I64", 8}, [LOOM_ST_U64] = {"U64", 8},
	[LOOM_ST_F64] = {"F64", 8},
};

int loom_st_dtype_parse(const char *s)
{
	for (int i = 0; i < LOOM_ST_NDTYPES; i++)
		if (strcmp(s, dtypes[i].name) == 0)
			return i;
	return -1;
}

const char *loom_st_dtype_name(int dtype)
{
	return dtype >= 0 && dtype < LOOM_ST_NDTYPES ? dtypes[dtype].name : "?";
}

size_t loom_st_dtype_size(int dtype)
{
	return dtype >= 0 && dtype < LOOM_ST_NDTYPES ? dtypes[dtype].size : 0;
}

/* product(shape) * size, or LOOM_ERANGE on overflow. */
static int tensor_bytes(int dtype, int ndim, const uint64_t *shape, uint64_t *out)
{
	uint64_t n = loom_st_dtype_size(dtype);
	for (int i = 0; i < ndim; i++) {
		if (shape[i] && n > UINT64_MAX / shape[i])
			return LOOM_ERANGE;
		n *= shape[i];
	}
	*out = n;
	return 0;
}

static void put_u64le(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64le(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* --- writer --------------------------------------------------------------- */

int loom_st_header(const char *path, const struct loom_st_tensor *t, size_t n,
		   const char *const *meta, char **header, size_t *hlen, uint64_t *data_len,
		   struct loom_err *err)
{
	json_t *root = json_object();
	uint64_t off = 0;
	int rc = LOOM_ENOMEM;
	char *hdr = NULL;
	if (!root)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	if (meta && meta[0]) {
		json_t *m = json_object();
		if (!m || json_object_set_new(root, "__metadata__", m) < 0)
			goto oom;
		for (size_t i = 0; meta[i]; i += 2) {
			if (!meta[i + 1]) {
				rc = loom_err_set(err, LOOM_EINVAL,
						  "%s: metadata key '%s' has no value",
						  path, meta[i]);
				goto out;
			}
			if (json_object_set_new(m, meta[i], json_string(meta[i + 1])) < 0)
				goto oom;
		}
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t nb = 0;
		if (!t[i].name || !*t[i].name || strcmp(t[i].name, "__metadata__") == 0 ||
		    json_object_get(root, t[i].name)) {
			rc = loom_err_set(err, LOOM_EINVAL, "%s: bad or duplicate tensor name '%s'",
					  path, t[i].name ? t[i].name : "(null)");
			goto out;
		}
		if (loom_st_dtype_size(t[i].dtype) == 0 || t[i].ndim < 0 ||
		    t[i].ndim > LOOM_ST_MAX_DIMS ||
		    tensor_bytes(t[i].dtype, t[i].ndim, t[i].shape, &nb) < 0 ||
		    off + nb < off || off + nb > (uint64_t)INT64_MAX) {
			rc = loom_err_set(err, LOOM_EINVAL, "%s: tensor '%s': bad dtype or shape",
					  path, t[i].name);
			goto out;
		}
		json_t *shape = json_array();
		json_t *e = json_pack("{s:s, s:o, s:[I,I]}", "dtype",
				      loom_st_dtype_name(t[i].dtype), "shape", shape,
				      "data_offsets", (json_int_t)off, (json_int_t)(off + nb));
		if (!e)
			goto oom;
		for (int d = 0; d < t[i].ndim; d++)
			json_array_append_new(shape, json_integer((json_int_t)t[i].shape[d]));
		if (json_object_set_new(root, t[i].name, e) < 0)
			goto oom;
		off += nb;
	}
	hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!hdr)
		goto oom;
	size_t len = strlen(hdr);
	size_t padded = (len + 7) & ~(size_t)7;
	char *h2 = realloc(hdr, padded + 8);
	if (!h2)
		goto oom;
	hdr = h2;
	memmove(hdr + 8, hdr, len);
	memset(hdr + 8 + len, ' ', padded - len);
	put_u64le((unsigned char *)hdr, padded);
	*header = hdr;
	*hlen = padded + 8;
	*data_len = off;
	hdr = NULL;
	rc = 0;
	goto out;
oom:
	rc = loom_err_set(err, LOOM_ENOMEM, "%s: out of memory", path);
out:
	free(hdr);
	json_decref(root);
	return rc;
}

int loom_st_write(const char *path, const struct loom_st_tensor *t, size_t n,
		  const char *const *meta, struct loom_st_sum *sum, struct loom_err *err)
{
	char *hdr;
	size_t hlen;
	uint64_t dlen;
	int rc = loom_st_header(path, t, n, meta, &hdr, &hlen, &dlen, err);
	if (rc < 0)
		return rc;
	struct loom_outfile o;
	uint32_t crc = loom_crc32c(0, hdr, hlen);
	rc = loom_outfile_open(&o, path);
	if (rc == 0)
		rc = loom_outfile_write(&o, hdr, hlen);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		uint64_t nb = 0;
		tensor_bytes(t[i].dtype, t[i].ndim, t[i].shape, &nb);
		if (nb) {
			crc = loom_crc32c(crc, t[i].data, nb);
			rc = loom_outfile_write(&o, t[i].data, nb);
		}
	}
	if (rc == 0 && sum) {
		sum->bytes = o.bytes;
		sum->crc32c = crc;
	}
	rc = loom_outfile_finish(&o, rc, err);
	free(hdr);
	return rc;
}

/* --- reader --------------------------------------------------------------- */

struct loom_st {
	char *name;
	const unsigned char *buf;
	size_t len;
	void *map;		/* mmap'd region to unmap, or NULL */
	size_t map_len;
	json_t *root;		/* names and metadata point into it */
	struct loom_st_tensor *t;
	size_t n;
};

void loom_st_free(struct loom_st *st)
{
	if (!st)
		return;
	if (st->map)
		munmap(st->map, st->map_len);
	json_decref(st->root);
	free(st->t);
	free(st->name);
	free(st);
}

static int by_offset(const void *a, const void *b)
{
	const struct loom_st_tensor *x = a, *y = b;
	const unsigned char *p = x->data, *q = y->data;
	if (p != q)
		return p < q ? -1 : 1;
	return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int get_u64_json(json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return LOOM_EFORMAT;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int st_validate(struct loom_st *st, struct loom_err *err)
{
	const char *nm = st->name;
	if (st->len < 8)
		return loom_err_set(err, LOOM_ETRUNC,
				    "%s: truncated: %zu bytes, a safetensors file needs at least 8",
				    nm, st->len);
	uint64_t hlen = get_u64le(st->buf);
	if (hlen < 2 || hlen > LOOM_ST_MAX_HEADER)
		return loom_err_set(err, LOOM_EFORMAT,
				    "%s: header size %llu at byte 0 is not plausible "
				    "(not a safetensors file?)", nm, (unsigned long long)hlen);
	if (hlen > st->len - 8)
		return loom_err_set(err, LOOM_ETRUNC,
				    "%s: truncated: header of %llu bytes but the file has only "
				    "%zu bytes after byte 8", nm, (unsigned long long)hlen,
				    st->len - 8);
	json_error_t je;
	st->root = json_loadb((const char *)st->buf + 8, hlen,
			      JSON_REJECT_DUPLICATES, &je);
	if (!st->root)
		return loom_err_set(err, LOOM_EFORMAT, "%s: bad JSON header at byte %llu: %s",
				    nm, (unsigned long long)(8 + (je.position > 0 ? je.position - 1 : 0)),
				    loom_json_reason(je.text));
	if (!json_is_object(st->root))
		return loom_err_set(err, LOOM_EFORMAT, "%s: header is not a JSON object", nm);
	const unsigned char *data = st->buf + 8 + hlen;
	uint64_t dlen = st->len - 8 - hlen;
	size_t cap = json_object_size(st->root);
	st->t = calloc(cap ? cap : 1, sizeof *st->t);
	if (!st->t)
		return loom_err_set(err, LOOM_ENOMEM, "%s: out of memory", nm);
	const char *key;
	json_t *v;
	json_object_foreach(st->root, key, v) {
		if (strcmp(key, "__metadata__") == 0) {
			const char *k2;
			json_t *v2;
			if (!json_is_object(v))
				return loom_err_set(err, LOOM_EFORMAT,
						    "%s: __metadata__ is not an object", nm);
			json_object_foreach(v, k2, v2)
				if (!json_is_string(v2))
					return loom_err_set(err, LOOM_EFORMAT,
							    "%s: __metadata__ value '%s' is not a string",
							    nm, k2);
			continue;
		}
		struct loom_st_tensor *t = &st->t[st->n];
		json_t *dt = json_object_get(v, "dtype");
		json_t *shape = json_object_get(v, "shape");
		json_t *offs = json_object_get(v, "data_offsets");
		if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(shape) ||
		    !json_is_array(offs) || json_array_size(offs) != 2)
			return loom_err_set(err, LOOM_EFORMAT,
					    "%s: tensor '%s': needs dtype, shape and data_offsets [begin, end]",
					    nm, key);
		t->name = key;
		t->dtype = loom_st_dtype_parse(json_string_value(dt));
		if (t->dtype < 0)
			return loom_err_set(err, LOOM_EFORMAT, "%s: tensor '%s': unknown dtype '%s'",
					    nm, key, json_string_value(dt));
		if (json_array_size(shape) > LOOM_ST_MAX_DIMS)
			return loom_err_set(err, LOOM_EFORMAT,
					    "%s: tensor '%s': %zu dimensions (at most %d)", nm, key,
					    json_array_size(shape), LOOM_ST_MAX_DIMS);
		t->ndim = (int)json_array_size(shape);
		for (int d = 0; d < t->ndim; d++)
			if (get_u64_json(json_array_get(shape, (size_t)d), &t->shape[d]) < 0)
				return loom_err_set(err, LOOM_EFORMAT,
						    "%s: tensor '%s': shape[%d] is not a non-negative integer",
						    nm, key, d);
		uint64_t b, e, want = 0;
		if (get_u64_json(json_array_get(offs, 0), &b) < 0 ||
		    get_u64_json(json_array_get(offs, 1), &e) < 0 || e < b)
			return loom_err_set(err, LOOM_EFORMAT,
					    "%s: tensor '%s': data_offsets must be integers 0 <= begin <= end",
					    nm, key);
		if (e > dlen)
			return loom_err_set(err, LOOM_ETRUNC,
					    "%s: tensor '%s': data_offsets [%llu, %llu] end past the "
					    "data (%llu bytes, file truncated?)", nm, key,
					    (unsigned long long)b, (unsigned long long)e,
					    (unsigned long long)dlen);
		if (tensor_bytes(t->dtype, t->ndim, t->shape, &want) < 0)
			return loom_err_set(err, LOOM_EFORMAT,
					    "%s: tensor '%s': shape x %s overflows 64 bits", nm, key,
					    loom_st_dtype_name(t->dtype));
		if (want != e - b)
			return loom_err_set(err, LOOM_EFORMAT,
					    "%s: tensor '%s': %llu bytes at [%llu, %llu] but shape x %s "
					    "needs %llu", nm, key, (unsigned long long)(e - b),
					    (unsigned long long)b, (unsigned long long)e,
					    loom_st_dtype_name(t->dtype), (unsigned long long)want);
		t->data = data + b;
		t->nbytes = e - b;
		st->n++;
	}
	qsort(st->t, st->n, sizeof *st->t, by_offset);
	uint64_t at = 0;
	for (size_t i = 0; i < st->n; i++) {
		uint64_t b = (uint64_t)((const unsigned char *)st->t[i].data - data);
		if (b < at)
			return loom_err_set(err, LOOM_EFORMAT,
					    "%s: tensor '%s' at data offset %llu overlaps the previous one",
					    nm, st->t[i].name, (unsigned long long)b);
		if (b > at)
			return loom_err_set(err, LOOM_EFORMAT,
					    "%s: gap of %llu bytes before tensor '%s' at data offset %llu",
					    nm, (unsigned long long)(b - at), st->t[i].name,
					    (unsigned long long)b);
		at = b + st->t[i].nbytes;
	}
	if (at != dlen)
		return loom_err_set(err, LOOM_EFORMAT,
				    "%s: %llu bytes after the last tensor (at byte %llu)", nm,
				    (unsigned long long)(dlen - at),
				    (unsigned long long)(8 + hlen + at));
	return 0;
}

struct loom_st *loom_st_parse(const void *buf, size_t len, const char *name,
			      struct loom_err *err)
{
	struct loom_st *st = calloc(1, sizeof *st);
	if (!st || !(st->name = strdup(name ? name : "safetensors"))) {
		free(st);
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	st->buf = buf;
	st->len = len;
	if (st_validate(st, err) < 0) {
		loom_st_free(st);
		return NULL;
	}
	return st;
}

struct loom_st *loom_st_open(const char *path, struct loom_err *err)
{
	uint64_t size;
	int fd = loom_file_open_regular(path, SIZE_MAX, &size, err);
	if (fd < 0)
		return NULL;
	size_t len = (size_t)size;
	void *map = NULL;
	if (len > 0) {
		map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			loom_err_errno(err, LOOM_EIO, errno, "cannot map '%s'", path);
			close(fd);
			return NULL;
		}
	}
	close(fd);
	struct loom_st *st = calloc(1, sizeof *st);
	if (!st || !(st->name = strdup(path))) {
		free(st);
		if (map)
			munmap(map, len);
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	st->map = map;
	st->map_len = len;
	st->buf = map ? map : (const unsigned char *)"";
	st->len = len;
	if (st_validate(st, err) < 0) {
		loom_st_free(st);
		return NULL;
	}
	return st;
}

size_t loom_st_count(const struct loom_st *st)
{
	return st->n;
}

const struct loom_st_tensor *loom_st_get(const struct loom_st *st, size_t i)
{
	return i < st->n ? &st->t[i] : NULL;
}

const struct loom_st_tensor *loom_st_find(const struct loom_st *st, const char *name)
{
	for (size_t i = 0; i < st->n; i++)
		if (strcmp(st->t[i].name, name) == 0)
			return &st->t[i];
	return NULL;
}

const char *loom_st_meta(const struct loom_st *st, const char *key)
{
	json_t *m = json_object_get(st->root, "__metadata__");
	return json_string_value(json_object_get(m, key));
}

void loom_st_copy(const struct loom_st *st, const struct loom_st_tensor *t, uint64_t off,
		  void *dst, size_t n)
{
	enum { CHUNK = 16 << 20 };
	const unsigned char *src = (const unsigned char *)t->data + off;
	const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	while (n) {
		size_t k = n < CHUNK ? n : CHUNK;
		memcpy(dst, src, k);
		if (st->map) {	/* drop the pages just read (the page cache keeps them) */
			uintptr_t a = (uintptr_t)src & ~(page - 1), b = (uintptr_t)src + k;
			uintptr_t end = (uintptr_t)st->map + st->map_len;
			b = (b + page - 1) & ~(page - 1);
			madvise((void *)a, (b < end ? b : end) - a, MADV_DONTNEED);
		}
		dst = (unsigned char *)dst + k;
		src += k;
		n -= k;
	}
}

const char *loom_st_name(const struct loom_st *st)
{
	return st->name;
}
