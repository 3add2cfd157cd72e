/* loom_vocab_render.c - a loaded vocabulary back to GPT-2's encoder.json +
 * vocab.bpe (HuggingFace's vocab.json + merges.txt); see loom_vocab.h. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "loom_vocab.h"

static int by_rank(const void *a, const void *b)
{
	const struct loom_vocab_pair *x = a, *y = b;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Token `id` printed GPT-2 style into out.  Special tokens too: their bytes
 * through bytes_to_unicode, so that any special token (an added token
 * "my special", one whose text holds a printed-byte character, not UTF-8)
 * reads back as the same bytes; "<|endoftext|>" prints as itself. */
static size_t print_token(const struct loom_vocab *v, uint32_t id, char *out)
{
	size_t n;
	const uint8_t *t = loom_vocab_token(v, id, &n);
	return loom_gpt2_bytes_to_str(t, n, out);
}

int loom_vocab_render_gpt2(struct loom_vocab *v, char **vocab_json, size_t *json_len,
			   char **merges, size_t *merges_len)
{
	size_t maxlen = 0;
	*vocab_json = *merges = NULL;
	for (uint32_t i = 0; i < v->n_ids; i++)
		if (v->present[i] && v->off[i + 1] - v->off[i] > maxlen)
			maxlen = v->off[i + 1] - v->off[i];
	/* tiktoken vocabularies: every split of a token is a merge of the
	 * token's rank, so ranks repeat */
	struct loom_vocab_pair *p = malloc(sizeof *p * ((size_t)v->n_merges + 1));
	char *tok = malloc(2 * maxlen + 2);
	json_t *o = json_object();
	if (!p || !tok || !o)
		goto oom;
	size_t np = 0;
	for (size_t h = 0; h <= v->pair_mask && v->pair; h++)
		if (v->pair[h].key && np < v->n_merges)
			p[np++] = v->pair[h];
	qsort(p, np, sizeof *p, by_rank);
	for (size_t i = 1; i < np; i++)
		if (p[i].rank == p[i - 1].rank) {
			free(p);
			free(tok);
			json_decref(o);
			return loom_err_set(&v->err, LOOM_EINVAL,
					    "%s: merges without an order of their own (a tiktoken "
					    "vocabulary) cannot be written as merges.txt",
					    v->name ? v->name : "vocabulary");
		}
	for (uint32_t i = 0; i < v->n_ids; i++) {
		if (!v->present[i])
			continue;
		size_t n = print_token(v, i, tok);
		tok[n] = 0;
		if (json_object_set_new(o, tok, json_integer(i)) < 0)
			goto oom;
	}
	*vocab_json = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	if (!*vocab_json)
		goto oom;
	*json_len = strlen(*vocab_json);
	size_t cap = 16 + np * (4 * maxlen + 6), at = 0;
	char *m = malloc(cap);
	if (!m)
		goto oom;
	at += (size_t)snprintf(m, cap, "#version: 0.2\n");
	for (size_t i = 0; i < np; i++) {
		uint64_t k = p[i].key - 1;
		at += print_token(v, (uint32_t)(k >> 32), m + at);
		m[at++] = ' ';
		at += print_token(v, (uint32_t)k, m + at);
		m[at++] = '\n';
	}
	m[at] = 0;
	*merges = m;
	*merges_len = at;
	free(p);
	free(tok);
	json_decref(o);
	return 0;
oom:
	free(*vocab_json);
	*vocab_json = NULL;
	free(p);
	free(tok);
	json_decref(o);
	return loom_err_set(&v->err, LOOM_ENOMEM, "out of memory");
}
