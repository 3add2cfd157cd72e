/*
 * loom_squad.c - SQuAD v1.1 reader and official scores; see loom_squad.h.
 */
#include "loom_squad.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_file.h"
#include "loom_pretok.h"
#include "loom_tfrecord.h"
#include "loom_utf8.h"
#include "loom_wordpiece.h"
#include "loom_wordpiece_tab.h"


struct loom_squad *loom_squad_new(void)
{
	return calloc(1, sizeof(struct loom_squad));
}

static void squad_clear(struct loom_squad *s)
{
	for (size_t i = 0; i < s->n_qas; i++)
		free(s->qas[i].answers);
	free(s->qas);
	free(s->paras);
	free(s->version);
	if (s->root)
		json_decref(s->root);
	s->qas = NULL;
	s->paras = NULL;
	s->version = NULL;
	s->root = NULL;
	s->n_qas = s->n_paras = 0;
}

void loom_squad_free(struct loom_squad *s)
{
	if (!s)
		return;
	squad_clear(s);
	free(s);
}

const char *loom_squad_error(const struct loom_squad *s)
{
	return s->err.msg;
}

/* Byte offset of code point `chars` in s[0..n), or -1 past the end. */
static long long char_to_byte(const char *s, size_t n, long long chars)
{
	size_t i = 0;
	for (long long c = 0; c < chars; c++) {
		if (i >= n)
			return -1;
		uint32_t cp;
		int valid;
		i += loom_utf8_decode((const uint8_t *)s + i, n - i, &cp, &valid);
	}
	return (long long)i;
}

static const char *str_member(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

int loom_squad_load_mem(struct loom_squad *s, const char *buf, size_t len, const char *name)
{
	squad_clear(s);
	json_error_t je;
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!root && loom_tfr_sniff(buf, len))
		return loom_err_set(&s->err, LOOM_EFORMAT,
				    "%s is a TFRecord file (prepared features?), not a SQuAD file: "
				    "give the SQuAD v1.1 JSON (as train-v1.1.json)", name);
	if (!root)
		return loom_err_set(&s->err, LOOM_EFORMAT, "%s:%d:%d: %s", name, je.line, je.column,
				    loom_json_reason(je.text));
	s->root = root;
	json_t *data = json_object_get(root, "data");
	if (!json_is_object(root) || !json_is_array(data))
		return loom_err_set(&s->err, LOOM_EFORMAT, "%s: no \"data\" array: not a SQuAD file",
				    name);
	const char *ver = str_member(root, "version");
	if (ver && !(s->version = strdup(ver)))
		return loom_err_set(&s->err, LOOM_ENOMEM, "out of memory");
	/* count first, then fill */
	size_t np = 0, nq = 0, ai, pi, qi;
	json_t *art, *para, *qa;
	json_array_foreach(data, ai, art) {
		json_t *ps = json_object_get(art, "paragraphs");
		if (!json_is_array(ps))
			return loom_err_set(&s->err, LOOM_EFORMAT,
					    "%s: article %zu has no \"paragraphs\" array", name, ai);
		json_array_foreach(ps, pi, para) {
			json_t *qs = json_object_get(para, "qas");
			if (!json_is_array(qs))
				return loom_err_set(&s->err, LOOM_EFORMAT,
						    "%s: article %zu paragraph %zu has no \"qas\" array",
						    name, ai, pi);
			np++;
			nq += json_array_size(qs);
		}
	}
	s->paras = calloc(np ? np : 1, sizeof *s->paras);
	s->qas = calloc(nq ? nq : 1, sizeof *s->qas);
	if (!s->paras || !s->qas)
		return loom_err_set(&s->err, LOOM_ENOMEM, "%s: out of memory", name);
	json_t *seen = json_object();
	if (!seen)
		return loom_err_set(&s->err, LOOM_ENOMEM, "%s: out of memory", name);
	int rc = 0;
	json_array_foreach(data, ai, art) {
		const char *title = str_member(art, "title");
		json_array_foreach(json_object_get(art, "paragraphs"), pi, para) {
			struct loom_squad_para *p = &s->paras[s->n_paras];
			json_t *ctx = json_object_get(para, "context");
			if (!json_is_string(ctx) || !json_string_length(ctx)) {
				rc = loom_err_set(&s->err, LOOM_EFORMAT,
						  "%s: article %zu paragraph %zu: %s context", name, ai,
						  pi, json_is_string(ctx) ? "empty" : "no");
				goto out;
			}
			p->title = title ? title : "";
			p->context = json_string_value(ctx);
			p->len = json_string_length(ctx);
			p->article = (uint32_t)ai;
			p->index = (uint32_t)pi;
			json_array_foreach(json_object_get(para, "qas"), qi, qa) {
				struct loom_squad_qa *q = &s->qas[s->n_qas];
				q->id = str_member(qa, "id");
				q->question = str_member(qa, "question");
				json_t *ans = json_object_get(qa, "answers");
				if (!q->id) {
					rc = loom_err_set(&s->err, LOOM_EFORMAT,
							  "%s: article %zu paragraph %zu question %zu: no \"id\" string",
							  name, ai, pi, qi);
					goto out;
				}
				if (json_object_get(seen, q->id)) {
					rc = loom_err_set(&s->err, LOOM_EFORMAT,
							  "%s: question %s: the id repeats", name, q->id);
					goto out;
				}
				json_object_set_new(seen, q->id, json_true());
				if (!q->question || !json_is_array(ans)) {
					rc = loom_err_set(&s->err, LOOM_EFORMAT,
							  "%s: question %s: no \"%s\"", name, q->id,
							  q->question ? "answers\" array" : "question\" string");
					goto out;
				}
				/* SQuAD 2.0's unanswerable questions: loom reads v1.1 */
				json_t *imp = json_object_get(qa, "is_impossible");
				if (json_is_true(imp) || !json_array_size(ans)) {
					rc = loom_err_set(&s->err, LOOM_EFORMAT,
							  "%s: question %s: %s: a SQuAD 2.0 question without an answer; loom reads SQuAD v1.1 (every question answered)",
							  name, q->id,
							  json_is_true(imp) ? "\"is_impossible\": true"
									    : "empty \"answers\"");
					goto out;
				}
				q->para = (uint32_t)s->n_paras;
				s->n_qas++; /* from here on squad_clear frees its answers */
				size_t na = json_array_size(ans), k;
				json_t *a;
				q->answers = calloc(na ? na : 1, sizeof *q->answers);
				if (!q->answers) {
					rc = loom_err_set(&s->err, LOOM_ENOMEM, "out of memory");
					goto out;
				}
				json_array_foreach(ans, k, a) {
					json_t *t = json_object_get(a, "text");
					json_t *st = json_object_get(a, "answer_start");
					if (!json_is_string(t) || !json_is_integer(st)) {
						rc = loom_err_set(&s->err, LOOM_EFORMAT,
								  "%s: question %s: answer %zu has no \"%s\"",
								  name, q->id, k,
								  json_is_string(t) ? "answer_start\" integer"
										    : "text\" string");
						goto out;
					}
					struct loom_squad_answer *g = &q->answers[q->n_answers++];
					g->text = json_string_value(t);
					g->len = json_string_length(t);
					long long b = json_integer_value(st) < 0
							      ? -1
							      : char_to_byte(p->context, p->len,
									     json_integer_value(st));
					if (b < 0 || (size_t)b + g->len > p->len ||
					    memcmp(p->context + b, g->text, g->len)) {
						rc = loom_err_set(&s->err, LOOM_EFORMAT,
								  "%s: question %s: answer %zu: answer_start %lld is %s",
								  name, q->id, k,
								  (long long)json_integer_value(st),
								  b < 0 || (size_t)b > p->len
									  ? "outside the context"
									  : "not where its text is in the context");
						goto out;
					}
					g->start = (size_t)b;
				}
			}
			s->n_paras++;
		}
	}
out:
	json_decref(seen);
	return rc;
}

int loom_squad_load(struct loom_squad *s, const char *path)
{
	char *buf;
	size_t len;
	int rc = loom_file_read_input(path, LOOM_SQUAD_MAX_FILE, &buf, &len, &s->err);
	if (rc)
		return rc;
	rc = loom_squad_load_mem(s, buf, len, path);
	free(buf);
	return rc;
}

/* --- the official normalization ----------------------------------------- */

/* Python's str.isspace(). */
static int py_space(uint32_t c)
{
	return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
	       c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
	       c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Python's \w in a str pattern: a letter, a number or "_". */
static int py_word(uint32_t c)
{
	int k = loom_uclass(c);
	return c == '_' || k == LOOM_UC_L || k == LOOM_UC_N;
}

/* Normalized tokens of s: code points in *cp, token i = cp[tok[2i] ..
 * tok[2i+1]).  Returns the number of tokens, -1 when out of memory. */
struct norm {
	uint32_t *cp;
	size_t *tok;
	size_t ntok;
};

/* Python's str.lower() of a capital sigma at s[i]: final (U+03C2) when a
 * cased character comes before it and none after it, skipping
 * case-ignorable ones (Unicode's Final_Sigma condition). */
static int final_sigma(const uint32_t *s, size_t n, size_t i)
{
	size_t j = i;
	while (j > 0 && (loom_wp_flags(s[j - 1]) & LOOM_WP_CASE_IGNORABLE))
		j--;
	if (j == 0 || !(loom_wp_flags(s[j - 1]) & LOOM_WP_CASED))
		return 0;
	for (j = i + 1; j < n && (loom_wp_flags(s[j]) & LOOM_WP_CASE_IGNORABLE); j++)
		;
	return j == n || !(loom_wp_flags(s[j]) & LOOM_WP_CASED);
}

static long normalize(const char *s, size_t n, struct norm *out)
{
	/* at most 2 code points per input code point after lower-casing
	 * (U+0130 -> i + U+0307; no lower-case mapping is longer) */
	uint32_t *a = malloc((2 * n + 1) * sizeof *a), *src = malloc((n + 1) * sizeof *src);
	if (!a || !src) {
		free(a);
		free(src);
		return LOOM_ENOMEM;
	}
	size_t m = 0, ns = 0;
	for (size_t i = 0; i < n;) {
		int valid;
		i += loom_utf8_decode((const uint8_t *)s + i, n - i, &src[ns++], &valid);
	}
	for (size_t si = 0; si < ns; si++) {
		uint32_t c = src[si];
		if (c == 0x3A3 && final_sigma(src, ns, si)) {
			a[m++] = 0x3C2;
			continue;
		}
		const struct loom_wp_map *lm = NULL;
		if (c >= 'A' && c <= 'Z')
			c += 32;
		else if (c >= 0x80 && (loom_wp_flags(c) & LOOM_WP_LOWER))
			lm = loom_wp_map_find(loom_wp_lower, loom_wp_lower_n, c);
		uint32_t outc[4];
		int k = 0;
		if (lm)
			for (int j = 0; j < lm->n; j++)
				outc[k++] = loom_wp_lower_pool[lm->off + j];
		else
			outc[k++] = c;
		/* string.punctuation is exactly the ASCII characters flagged PUNCT */
		for (int j = 0; j < k; j++)
			if (!(outc[j] < 128 && (loom_wp_flags(outc[j]) & LOOM_WP_PUNCT)))
				a[m++] = outc[j];
	}
	free(src);
	/* remove \b(a|an|the)\b, replaced by a space: one pass, reading at r
	 * and writing at w <= r; `word` is whether the character before r in
	 * the text the pattern sees (before any replacement) is a \w */
	size_t w = 0;
	int word = 0;
	for (size_t r = 0; r < m;) {
		size_t len = 0;
		if (!word && a[r] == 'a')
			len = r + 1 < m && a[r + 1] == 'n' && !(r + 2 < m && py_word(a[r + 2])) ? 2
			      : !(r + 1 < m && py_word(a[r + 1]))			       ? 1
											       : 0;
		else if (!word && a[r] == 't' && r + 2 < m && a[r + 1] == 'h' && a[r + 2] == 'e' &&
			 !(r + 3 < m && py_word(a[r + 3])))
			len = 3;
		if (len) {
			a[w++] = ' ';
			r += len;
			word = 1; /* the article's last letter */
		} else {
			word = py_word(a[r]);
			a[w++] = a[r++];
		}
	}
	m = w;
	size_t *tok = malloc((m + 1) * sizeof *tok);
	if (!tok) {
		free(a);
		return LOOM_ENOMEM;
	}
	size_t nt = 0;
	for (size_t i = 0; i < m;) {
		while (i < m && py_space(a[i]))
			i++;
		if (i == m)
			break;
		size_t j = i;
		while (j < m && !py_space(a[j]))
			j++;
		tok[2 * nt] = i;
		tok[2 * nt + 1] = j;
		nt++;
		i = j;
	}
	out->cp = a;
	out->tok = tok;
	out->ntok = nt;
	return (long)nt;
}

static int tok_cmp3(const struct norm *x, size_t i, const struct norm *y, size_t j)
{
	size_t a0 = x->tok[2 * i], a1 = x->tok[2 * i + 1];
	size_t b0 = y->tok[2 * j], b1 = y->tok[2 * j + 1];
	for (; a0 < a1 && b0 < b1; a0++, b0++)
		if (x->cp[a0] != y->cp[b0])
			return x->cp[a0] < y->cp[b0] ? -1 : 1;
	return (a0 < a1) - (b0 < b1);
}

static int sort_cmp(const void *pa, const void *pb, void *x)
{
	return tok_cmp3(x, *(const size_t *)pa, x, *(const size_t *)pb);
}

/* Token indices of x in sorted order. */
static size_t *sorted(const struct norm *x)
{
	size_t *o = malloc((x->ntok + 1) * sizeof *o);
	if (!o)
		return NULL;
	for (size_t i = 0; i < x->ntok; i++)
		o[i] = i;
	qsort_r(o, x->ntok, sizeof *o, sort_cmp, (void *)x);
	return o;
}

/* Tokens x and y have in common, counted as a multiset, into *same;
 * LOOM_ENOMEM when out of memory. */
static int overlap(const struct norm *x, const struct norm *y, size_t *same)
{
	size_t *ox = sorted(x), *oy = sorted(y), i = 0, j = 0;
	int rc = ox && oy ? 0 : LOOM_ENOMEM;
	*same = 0;
	if (!rc)
		while (i < x->ntok && j < y->ntok) {
			int c = tok_cmp3(x, ox[i], y, oy[j]);
			if (c == 0) {
				++*same;
				i++;
				j++;
			} else if (c < 0) {
				i++;
			} else {
				j++;
			}
		}
	free(ox);
	free(oy);
	return rc;
}

static int same_tokens(const struct norm *x, const struct norm *y)
{
	if (x->ntok != y->ntok)
		return 0;
	for (size_t i = 0; i < x->ntok; i++)
		if (tok_cmp3(x, i, y, i))
			return 0;
	return 1;
}

int loom_squad_metrics(const char *pred, size_t pred_len,
		       const struct loom_squad_answer *gold, uint32_t n_gold,
		       double *em, double *f1)
{
	struct norm p = { 0 };
	int rc = 0;
	*em = 0;
	*f1 = 0;
	if (normalize(pred, pred_len, &p) < 0)
		return LOOM_ENOMEM;
	for (uint32_t g = 0; g < n_gold && !rc; g++) {
		struct norm t = { 0 };
		size_t same;
		if (normalize(gold[g].text, gold[g].len, &t) < 0) {
			rc = LOOM_ENOMEM;
			break;
		}
		if (same_tokens(&p, &t))
			*em = 1;
		rc = overlap(&p, &t, &same);
		if (!rc && same) {
			double precision = (double)same / (double)p.ntok;
			double recall = (double)same / (double)t.ntok;
			double f = (2 * precision * recall) / (precision + recall);
			if (f > *f1)
				*f1 = f;
		}
		free(t.cp);
		free(t.tok);
	}
	free(p.cp);
	free(p.tok);
	return rc;
}

int loom_squad_score_mem(struct loom_squad *s, const char *buf, size_t len, const char *name,
			 struct loom_squad_score *out)
{
	json_error_t je;
	json_t *pred = json_loadb(buf, len, 0, &je);
	if (!pred)
		return loom_err_set(&s->err, LOOM_EFORMAT, "%s:%d:%d: %s", name, je.line, je.column,
				    loom_json_reason(je.text));
	if (!json_is_object(pred)) {
		json_decref(pred);
		return loom_err_set(&s->err, LOOM_EFORMAT,
				    "%s: not a JSON object of question id -> answer text", name);
	}
	if (!s->n_qas) {
		json_decref(pred);
		return loom_err_set(&s->err, LOOM_EINVAL, "%s: the data set has no questions", name);
	}
	/* the official script sums EM as an integer and F1 as a double */
	long long em = 0;
	double f1 = 0;
	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < s->n_qas; i++) {
		const struct loom_squad_qa *q = &s->qas[i];
		json_t *v = json_object_get(pred, q->id);
		out->questions++;
		if (!v) {
			out->unanswered++;
			continue;
		}
		if (!json_is_string(v)) {
			json_decref(pred);
			return loom_err_set(&s->err, LOOM_EFORMAT,
					    "%s: question %s: the prediction is not a string", name,
					    q->id);
		}
		if (!q->n_answers) {
			json_decref(pred);
			return loom_err_set(&s->err, LOOM_EFORMAT,
					    "%s: question %s has no gold answer to score against",
					    name, q->id);
		}
		double e, f;
		if (loom_squad_metrics(json_string_value(v), json_string_length(v), q->answers,
				       q->n_answers, &e, &f)) {
			json_decref(pred);
			return loom_err_set(&s->err, LOOM_ENOMEM, "%s: question %s: out of memory",
					    name, q->id);
		}
		em += e > 0;
		f1 += f;
	}
	json_decref(pred);
	out->exact_match = 100.0 * (double)em / (double)out->questions;
	out->f1 = 100.0 * f1 / (double)out->questions;
	return 0;
}

int loom_squad_score_file(struct loom_squad *s, const char *pred_path,
			  struct loom_squad_score *out)
{
	char *buf;
	size_t len;
	int rc = loom_file_read_input(pred_path, LOOM_SQUAD_MAX_FILE, &buf, &len, &s->err);
	if (rc)
		return rc;
	rc = loom_squad_score_mem(s, buf, len, pred_path, out);
	free(buf);
	return rc;
}

/* --- features ------------------------------------------------------------ */

void loom_squad_features_release(struct loom_squad_features *f)
{
	free(f->f);
	free(f->input_ids);
	free(f->segment_ids);
	free(f->ctx_off);
	free(f->tok_start);
	free(f->tok_end);
	memset(f, 0, sizeof *f);
}

static int feature_push(struct loom_squad_features *out, size_t *cap)
{
	if (out->n < *cap)
		return 0;
	size_t c = *cap ? 2 * *cap : 1024, seq = out->seq;
	struct loom_squad_feature *f = realloc(out->f, c * sizeof *f);
	if (!f)
		return LOOM_ENOMEM;
	out->f = f;
	uint32_t *ids = realloc(out->input_ids, c * seq * sizeof *ids);
	if (!ids)
		return LOOM_ENOMEM;
	out->input_ids = ids;
	uint8_t *seg = realloc(out->segment_ids, c * seq);
	if (!seg)
		return LOOM_ENOMEM;
	out->segment_ids = seg;
	*cap = c;
	return 0;
}

/* Answer positions of gold answer g in the window of feature f. */
static void answer_positions(const struct loom_squad_features *out,
			     struct loom_squad_feature *f, size_t para,
			     const struct loom_squad_answer *g)
{
	f->start = f->end = 0;
	if (!g || !f->ctx_len)
		return;
	const uint64_t *ts = out->tok_start + out->ctx_off[para] + f->ctx_first;
	const uint64_t *te = out->tok_end + out->ctx_off[para] + f->ctx_first;
	uint64_t a = g->start, b = g->start + g->len;
	if (!(ts[0] <= a && te[f->ctx_len - 1] >= b))
		return;
	uint32_t s = 0, e = f->ctx_len - 1;
	while (s + 1 < f->ctx_len && ts[s + 1] <= a)
		s++;
	while (e > 0 && te[e - 1] >= b)
		e--;
	if (e < s)
		return;
	f->start = f->doc_start + s;
	f->end = f->doc_start + e;
}

int loom_squad_features(struct loom_squad *s, struct loom_wordpiece *w,
			const struct loom_squad_feature_opts *o, struct loom_squad_features *out)
{
	memset(out, 0, sizeof *out);
	out->seq = o->seq;
	uint32_t cls = loom_wordpiece_id(w, "[CLS]", 5), sep = loom_wordpiece_id(w, "[SEP]", 5);
	uint32_t pad = loom_wordpiece_id(w, "[PAD]", 5);
	if (cls == LOOM_VOCAB_NONE || sep == LOOM_VOCAB_NONE || pad == LOOM_VOCAB_NONE)
		return loom_err_set(&s->err, LOOM_EINVAL, "the vocabulary lacks %s",
				    cls == LOOM_VOCAB_NONE ? "[CLS]"
				    : sep == LOOM_VOCAB_NONE ? "[SEP]" : "[PAD]");
	if (o->seq < 4 || !o->stride)
		return loom_err_set(&s->err, LOOM_EINVAL, "seq %u, stride %u: need seq >= 4, stride >= 1",
				    o->seq, o->stride);
	struct loom_ids ids = { 0 }, q = { 0 };
	struct loom_offsets offs = { 0 };
	int rc = 0;
	out->ctx_off = malloc((s->n_paras + 1) * sizeof *out->ctx_off);
	if (!out->ctx_off) {
		rc = loom_err_set(&s->err, LOOM_ENOMEM, "out of memory");
		goto fail;
	}
	/* every context once, with the byte span of each token */
	for (size_t p = 0; p < s->n_paras; p++) {
		out->ctx_off[p] = ids.n;
		if ((rc = loom_wordpiece_encode(w, (const uint8_t *)s->paras[p].context,
						s->paras[p].len, &ids, &offs, 0))) {
			rc = loom_err_set(&s->err, rc, "%s", loom_wordpiece_error(w));
			goto fail;
		}
	}
	out->ctx_off[s->n_paras] = ids.n;
	for (size_t p = 0; p < s->n_paras; p++)
		if (out->ctx_off[p + 1] == out->ctx_off[p]) {
			rc = loom_err_set(&s->err, LOOM_EFORMAT,
					  "article %u paragraph %u: a context of no tokens (only white "
					  "space or control characters)",
					  s->paras[p].article, s->paras[p].index);
			goto fail;
		}
	out->tok_start = offs.start;
	out->tok_end = offs.end;
	offs.start = offs.end = NULL;
	size_t cap = 0;
	for (size_t i = 0; i < s->n_qas; i++) {
		const struct loom_squad_qa *qa = &s->qas[i];
		q.n = 0;
		if ((rc = loom_wordpiece_encode(w, (const uint8_t *)qa->question,
						strlen(qa->question), &q, NULL, 0))) {
			rc = loom_err_set(&s->err, rc, "%s", loom_wordpiece_error(w));
			goto fail;
		}
		size_t qlen = q.n < o->max_query ? q.n : o->max_query;
		if (qlen + 3 >= o->seq) {
			rc = loom_err_set(&s->err, LOOM_EINVAL,
					  "question %s: %zu question tokens leave no room for the context in %u (raise --seq or lower --max-query)",
					  qa->id, qlen, o->seq);
			goto fail;
		}
		size_t room = o->seq - 3 - qlen, para = qa->para;
		size_t nctx = out->ctx_off[para + 1] - out->ctx_off[para];
		const uint32_t *ctx = ids.v + out->ctx_off[para];
		for (size_t start = 0, win = 0;; win++) {
			size_t len = nctx - start < room ? nctx - start : room;
			if ((rc = feature_push(out, &cap))) {
				rc = loom_err_set(&s->err, rc, "out of memory");
				goto fail;
			}
			struct loom_squad_feature *f = &out->f[out->n];
			uint32_t *in = out->input_ids + out->n * o->seq;
			uint8_t *seg = out->segment_ids + out->n * o->seq;
			size_t k = 0;
			in[k++] = cls;
			memcpy(in + k, q.v, qlen * sizeof *in);
			k += qlen;
			in[k++] = sep;
			memset(seg, 0, k);
			memcpy(in + k, ctx + start, len * sizeof *in);
			k += len;
			in[k++] = sep;
			memset(seg + qlen + 2, 1, len + 1);
			f->qa = (uint32_t)i;
			f->window = (uint32_t)win;
			f->n_tokens = (uint32_t)k;
			f->doc_start = (uint32_t)(qlen + 2);
			f->ctx_first = (uint32_t)start;
			f->ctx_len = (uint32_t)len;
			for (; k < o->seq; k++) {
				in[k] = pad;
				seg[k] = 0;
			}
			answer_positions(out, f, para, qa->n_answers ? &qa->answers[0] : NULL);
			out->n++;
			if (start + len >= nctx)
				break;
			start += len < o->stride ? len : o->stride;
		}
	}
	loom_ids_release(&ids);
	loom_ids_release(&q);
	return 0;
fail:
	loom_ids_release(&ids);
	loom_ids_release(&q);
	loom_offsets_release(&offs);
	loom_squad_features_release(out);
	return rc;
}

/* --- predictions --------------------------------------------------------- */

int loom_squad_max_context(const struct loom_squad_features *f, size_t fi, uint32_t pos)
{
	const struct loom_squad_feature *x = &f->f[fi];
	if (pos < x->doc_start || pos - x->doc_start >= x->ctx_len)
		return 0;
	const uint64_t tok = (uint64_t)x->ctx_first + (pos - x->doc_start);
	size_t first = fi, best = SIZE_MAX;
	while (first > 0 && f->f[first - 1].qa == x->qa)
		first--;
	double best_score = 0;
	for (size_t k = first; k < f->n && f->f[k].qa == x->qa; k++) {
		const struct loom_squad_feature *w = &f->f[k];
		if (tok < w->ctx_first || tok >= (uint64_t)w->ctx_first + w->ctx_len)
			continue;
		uint64_t left = tok - w->ctx_first, right = w->ctx_first + w->ctx_len - 1 - tok;
		double score = (double)(left < right ? left : right) + 0.01 * w->ctx_len;
		if (best == SIZE_MAX || score > best_score) {
			best = k;
			best_score = score;
		}
	}
	return best == fi;
}

/* The n highest of x[0..seq) into idx[n], highest first, ties by position. */
static void n_best(const float *x, uint32_t seq, uint32_t n, uint32_t *idx)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < seq; i++) {
		/* insert i after every kept entry >= it (stable) */
		uint32_t at = k < n ? k : n;
		while (at > 0 && x[idx[at - 1]] < x[i])
			at--;
		if (at >= n)
			continue;
		uint32_t last = k < n ? k : n - 1;
		memmove(idx + at + 1, idx + at, (last - at) * sizeof *idx);
		idx[at] = i;
		if (k < n)
			k++;
	}
}

int loom_squad_predict(struct loom_squad *s, const struct loom_squad_features *f,
		       const float *start_logits, const float *end_logits,
		       const struct loom_squad_post_opts *o, struct loom_squad_prediction *out)
{
	if (!o->n_best || !o->max_answer)
		return loom_err_set(&s->err, LOOM_EINVAL, "n_best %u, max_answer %u: need both >= 1",
				    o->n_best, o->max_answer);
	const uint32_t nb = o->n_best < f->seq ? o->n_best : f->seq;
	uint32_t *si = malloc(2 * (size_t)nb * sizeof *si), *ei = si + nb;
	if (!si)
		return loom_err_set(&s->err, LOOM_ENOMEM, "out of memory");
	for (size_t q = 0; q < s->n_qas; q++)
		out[q] = (struct loom_squad_prediction){ .feature = -1 };
	for (size_t fi = 0; fi < f->n; fi++) {
		const struct loom_squad_feature *x = &f->f[fi];
		const float *sl = start_logits + fi * f->seq, *el = end_logits + fi * f->seq;
		struct loom_squad_prediction *p = &out[x->qa];
		n_best(sl, f->seq, nb, si);
		n_best(el, f->seq, nb, ei);
		for (uint32_t a = 0; a < nb; a++) {
			const uint32_t st = si[a];
			if (st < x->doc_start || st - x->doc_start >= x->ctx_len ||
			    !loom_squad_max_context(f, fi, st))
				continue;
			for (uint32_t b = 0; b < nb; b++) {
				const uint32_t en = ei[b];
				if (en < st || en - x->doc_start >= x->ctx_len ||
				    en - st + 1 > o->max_answer)
					continue;
				double score = (double)sl[st] + (double)el[en];
				if (p->feature >= 0 && !(score > p->score))
					continue;
				p->feature = (int64_t)fi;
				p->tok_start = st;
				p->tok_end = en;
				p->score = score;
			}
		}
	}
	free(si);
	for (size_t q = 0; q < s->n_qas; q++) {
		struct loom_squad_prediction *p = &out[q];
		if (p->feature < 0)
			continue;
		const struct loom_squad_feature *x = &f->f[p->feature];
		size_t base = f->ctx_off[s->qas[q].para] + x->ctx_first - x->doc_start;
		p->start = f->tok_start[base + p->tok_start];
		p->len = f->tok_end[base + p->tok_end] - p->start;
	}
	return 0;
}

int loom_squad_write_predictions(struct loom_squad *s, const struct loom_squad_prediction *p,
				 const char *path)
{
	json_t *j = json_object();
	int rc = j ? 0 : -1;
	for (size_t q = 0; rc == 0 && q < s->n_qas; q++) {
		const char *ctx = s->paras[s->qas[q].para].context;
		json_t *v = json_stringn(ctx + p[q].start, p[q].len);
		rc = v ? json_object_set_new(j, s->qas[q].id, v) : -1;
	}
	char *txt = rc == 0 ? json_dumps(j, JSON_INDENT(4) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(j);
	if (!txt)
		return loom_err_set(&s->err, LOOM_ENOMEM, "%s: out of memory", path);
	size_t n = strlen(txt);
	txt[n] = '\n';	/* json_dumps leaves room: its NUL becomes the newline */
	rc = loom_write_file_atomic(path, txt, n + 1, &s->err);
	free(txt);
	return rc;
}
