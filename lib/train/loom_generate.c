/* loom_generate.c - a prompt continued by a GPT, decoded (loom_generate.h). */
#include "loom_generate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_gpt.h"
#include "loom_utf8.h"
#include "loom_vocab.h"

int loom_generate_init(struct loom_generate *x, struct loom_gpt *g, const struct loom_vocab *v,
		       const uint32_t *prompt, size_t n, size_t max_new, float temperature,
		       int top_k, uint64_t seed)
{
	memset(x, 0, sizeof *x);
	x->g = g;
	x->v = v;
	if ((v && !(x->bpe = loom_bpe_new(v))) || loom_ids_reserve(&x->ids, n + max_new) ||
	    loom_sampler_init(&x->smp, g, v, temperature, top_k, seed)) {
		loom_generate_release(x);
		return loom_err_set(&x->err, LOOM_ENOMEM, "out of memory");
	}
	memcpy(x->ids.v, prompt, sizeof *prompt * n);
	x->ids.n = n;
	return 0;
}

int loom_generate_next(struct loom_generate *x)
{
	int t = loom_sampler_next(&x->smp, x->ids.v, x->ids.n);
	if (t < 0)
		return loom_err_set(&x->err, t, "%s", loom_gpt_error(x->g));
	if (loom_ids_reserve(&x->ids, 1))
		return loom_err_set(&x->err, LOOM_ENOMEM, "out of memory");
	x->ids.v[x->ids.n++] = (uint32_t)t;
	return t;
}

int loom_generate_decode(struct loom_generate *x, size_t from)
{
	x->len = 0;
	if (x->bpe) {
		if (loom_bpe_decode(x->bpe, x->ids.v + from, x->ids.n - from, from, &x->buf, &x->len,
				    &x->cap))
			return loom_err_set(&x->err, LOOM_EFORMAT, "%s", loom_bpe_error(x->bpe));
		return 0;
	}
	size_t need = (x->ids.n - from) * 11 + 1;
	if (need > x->cap) {
		uint8_t *b = realloc(x->buf, need);
		if (!b)
			return loom_err_set(&x->err, LOOM_ENOMEM, "out of memory");
		x->buf = b;
		x->cap = need;
	}
	for (size_t i = from; i < x->ids.n; i++)
		x->len += (size_t)snprintf((char *)x->buf + x->len, x->cap - x->len, "%s%u",
					   i > from ? " " : "", x->ids.v[i]);
	return 0;
}

char *loom_generate_valid_utf8(const uint8_t *p, size_t n)
{
	char *out = malloc(3 * n + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		int valid;
		size_t k = loom_utf8_decode(p + i, n - i, &cp, &valid);
		if (valid)
			memcpy(o, p + i, k), o += k;
		else
			memcpy(o, "\xef\xbf\xbd", 3), o += 3;
		i += k;
	}
	*o = 0;
	return out;
}

void loom_generate_release(struct loom_generate *x)
{
	loom_sampler_release(&x->smp);
	loom_bpe_free(x->bpe);
	loom_ids_release(&x->ids);
	free(x->buf);
	x->bpe = NULL;
	x->buf = NULL;
	x->len = x->cap = 0;
}

/* ids of text without a vocabulary: decimal ids separated by spaces */
static int parse_ids(const char *text, const char *what, int V, struct loom_ids *ids,
		     struct loom_err *err)
{
	for (const char *p = text; *p;) {
		char *end;
		p += strspn(p, " ");
		if (!*p)
			break;
		errno = 0;
		unsigned long long id = strtoull(p, &end, 10);
		if (end == p || (*end && *end != ' ') || errno || *p == '-')
			return loom_err_set(err, LOOM_EINVAL, "%s '%s': without --vocab, the prompt "
					    "is token ids separated by spaces", what, text);
		if (id >= (unsigned long long)V)
			return loom_err_set(err, LOOM_EINVAL, "%s: token %llu is outside the "
					    "vocabulary of %d ids", what, id, V);
		if (loom_ids_reserve(ids, 1))
			return loom_err_set(err, LOOM_ENOMEM, "out of memory");
		ids->v[ids->n++] = (uint32_t)id;
		p = end;
	}
	return 0;
}

int loom_generate_prompt(const struct loom_vocab *v, const char *text, const char *what, int V,
			 struct loom_ids *ids, struct loom_err *err)
{
	int rc = 0;
	if (v) {
		struct loom_bpe *e = loom_bpe_new(v);
		if (!e)
			return loom_err_set(err, LOOM_ENOMEM, "out of memory");
		if (loom_bpe_encode(e, (const uint8_t *)text, strlen(text), 1, ids))
			rc = loom_err_set(err, LOOM_EFORMAT, "%s: %s", what, loom_bpe_error(e));
		loom_bpe_free(e);
	} else {
		rc = parse_ids(text, what, V, ids, err);
	}
	if (rc)
		return rc;
	if (ids->n == 0)
		return loom_err_set(err, LOOM_EINVAL, "%s is empty", what);
	for (size_t i = 0; i < ids->n; i++)
		if (ids->v[i] >= (uint32_t)V)
			return loom_err_set(err, LOOM_EINVAL, "%s: token %u is outside the vocabulary "
					    "of %d ids", what, ids->v[i], V);
	return 0;
}
