/* loom_example_line.c - an Example as a line of text (loom_example_line.h). */
#include "loom_example_line.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_example.h"

void loom_example_line_init(struct loom_example_line *l)
{
	memset(l, 0, sizeof *l);
}

void loom_example_line_release(struct loom_example_line *l)
{
	free(l->vals);
	free(l->renc);
	free(l->buf);
	memset(l, 0, sizeof *l);
}

static inline char *put_i64(char *p, int64_t v)
{
	char tmp[24];
	int n = 0;
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*p++ = '-';
	while (n)
		*p++ = tmp[--n];
	return p;
}

/* Grow *buf to hold need bytes (twice that, to grow seldom). */
static int reserve(void **buf, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	free(*buf);
	*cap = need * 2;
	*buf = malloc(*cap * size);
	if (!*buf)
		*cap = 0;
	return *buf ? 0 : LOOM_ENOMEM;
}

/* The values as "a b c\n" or "{"key":[a,b,c]}\n" into l->buf. */
static int ids_line(struct loom_example_line *l, const char *key, size_t n, int json)
{
	if (reserve((void **)&l->buf, &l->cap, n * 21 + strlen(key) + 16, 1))
		return loom_err_set(&l->err, LOOM_ENOMEM, "out of memory");
	char *p = l->buf;
	if (json)
		p += sprintf(p, "{\"%s\":[", key);
	for (size_t i = 0; i < n; i++) {
		if (i)
			*p++ = json ? ',' : ' ';
		p = put_i64(p, l->vals[i]);
	}
	if (json) {
		*p++ = ']';
		*p++ = '}';
	}
	*p++ = '\n';
	return (int)(p - l->buf); /* > 0 */
}

static int plain_key(const char *k)
{
	for (; *k; k++)
		if (*k == '"' || *k == '\\' || (unsigned char)*k < 0x20 || (unsigned char)*k >= 0x7f)
			return 0;
	return 1;
}

int loom_example_line(struct loom_example_line *l, const uint8_t *p, size_t len,
		      const char *key, int ids_only, const char **line, size_t *n)
{
	size_t nv = 0;
	int w;
	/* a payload of len bytes holds at most len values */
	if (reserve((void **)&l->vals, &l->vcap, len + 1, sizeof *l->vals))
		return loom_err_set(&l->err, LOOM_ENOMEM, "out of memory");
	int rc = loom_example_decode_i64(p, len, key, l->vals, l->vcap, &nv, &l->err);
	if (ids_only) {
		if (rc < 0)
			return rc;
		if ((w = ids_line(l, key, nv, 0)) < 0)
			return w;
		*line = l->buf;
		*n = (size_t)w;
		return 0;
	}
	/* JSON: fast path when the Example is exactly {feature: int64 list}. */
	if (rc == 0 && plain_key(key)) {
		if (reserve((void **)&l->renc, &l->rcap, loom_example_bound(strlen(key), nv), 1))
			return loom_err_set(&l->err, LOOM_ENOMEM, "out of memory");
		size_t el = loom_example_encode_i64(key, l->vals, nv, l->renc);
		if (el == len && memcmp(l->renc, p, len) == 0) {
			if ((w = ids_line(l, key, nv, 1)) < 0)
				return w;
			*line = l->buf;
			*n = (size_t)w;
			return 0;
		}
	}
	char *js;
	size_t jl;
	if ((rc = loom_example_to_json(p, len, &js, &jl, &l->err)) < 0)
		return rc;
	js[jl] = '\n';
	free(l->buf);
	l->buf = js;
	l->cap = jl + 1;
	*line = js;
	*n = jl + 1;
	return 0;
}
