/* loom_wikitext.c - see loom_wikitext.h
 *
 * Five passes, each linear, ping-ponging between two scratch buffers:
 *   1 sanitize UTF-8, drop \r, comments and extension tags (<ref> ...),
 *     escape <nowiki>/<pre> content as numeric entities (decoded in 5);
 *   2 templates: MediaWiki-style brace matching with a stack of brace
 *     runs ({{ and {{{ matched greedily), matched spans deleted;
 *   3 tables: line based, {| ... |} with a depth counter;
 *   4 links: [[ ]] matched with a stack, edits collected and sorted;
 *     external links [url text];
 *   5 lines: headings, lists, quotes, tags, entities, magic words,
 *     whitespace, paragraphs.
 * Searches that could be repeated from many start positions (a closing
 * tag, '>' or ']' on a line) are memoized so that each byte is scanned a
 * bounded number of times.
 */
#include "loom_wikitext.h"

#include <stdlib.h>
#include <string.h>

#include "loom_utf8.h"

/* ------------------------------------------------------------------ */
/* buffers */

int loom_wt_buf_reserve(struct loom_wt_buf *b, size_t extra)
{
	if (b->cap - b->len >= extra)
		return 0;
	size_t need = b->len + extra;
	if (need < b->len)
		return LOOM_ENOMEM;
	/* double (amortized appends), but a big request gets just what it
	 * asks: the cleaner's one-shot reservations stay a multiple of the page */
	size_t cap = b->cap > SIZE_MAX / 2 ? SIZE_MAX : 2 * b->cap;
	if (cap < 256)
		cap = 256;
	if (cap < need)
		cap = need;
	char *p = realloc(b->p, cap);
	if (!p)
		return LOOM_ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

int loom_wt_buf_add(struct loom_wt_buf *b, const void *p, size_t n)
{
	if (loom_wt_buf_reserve(b, n))
		return LOOM_ENOMEM;
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

void loom_wt_buf_free(struct loom_wt_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* Empty scratch buffer b with room for `need` bytes: allocated to the
 * size asked, not doubled (a pass's output is bounded up front), and
 * without copying what it held. */
static int scratch(struct loom_wt_buf *b, size_t need)
{
	b->len = 0;
	if (b->cap >= need)
		return 0;
	free(b->p);
	b->cap = 0;
	if (!(b->p = malloc(need)))
		return LOOM_ENOMEM;
	b->cap = need;
	return 0;
}

/* ------------------------------------------------------------------ */
/* UTF-8 */

static const char FFFD[3] = { (char)0xEF, (char)0xBF, (char)0xBD };

int64_t loom_utf8_sanitize(const char *src, size_t n, struct loom_wt_buf *out,
			   unsigned char carry[4], int *ncarry, int more)
{
	const unsigned char *s = (const unsigned char *)src;
	int64_t bad = 0;
	size_t i = 0;
	/* room for the rest of the input + 16 at the top of the loop: valid
	 * bytes are copied 1:1, bad bytes (3 bytes out) make room first; the
	 * carry (at most 12 bytes out) fits in the 32 */
	if (n > SIZE_MAX - 64 || loom_wt_buf_reserve(out, n + 32))
		return LOOM_ENOMEM;
	char *o = out->p + out->len;
	if (*ncarry) {
		unsigned char tmp[8];
		int k = *ncarry;
		size_t take = n < (size_t)(4 - k) ? n : (size_t)(4 - k);
		memcpy(tmp, carry, k);
		memcpy(tmp + k, s, take);
		int r = loom_utf8_seq(tmp, k + take);
		if (r > 0) {
			memcpy(o, tmp, r);
			o += r;
			i = r - k;
			*ncarry = 0;
		} else if (r < 0 && more) {
			memcpy(carry + k, s, take); /* take == n here */
			*ncarry = k + (int)take;
			out->len = o - out->p;
			return 0;
		} else {
			/* lead byte and its continuation bytes are all bad */
			size_t m = r < 0 ? k + take : (size_t)k;
			for (size_t j = 0; j < m; j++, o += 3)
				memcpy(o, FFFD, 3);
			bad += m;
			i = r < 0 ? take : 0;
			*ncarry = 0;
		}
	}
	while (i < n) {
		/* find the run of valid UTF-8 starting at i, copy it at once */
		int r;
		size_t j = i + loom_utf8_span(s + i, n - i, &r);
		memcpy(o, s + i, j - i);
		o += j - i;
		i = j;
		if (i >= n)
			break;
		if (r == 0 || !more) {
			/* one bad byte here, or up to 3 at the end */
			size_t need = r == 0 ? n - i + 18 : 3 * (n - i) + 18;
			if (out->cap - (size_t)(o - out->p) < need) {
				out->len = o - out->p;
				if (loom_wt_buf_reserve(out, need))
					return LOOM_ENOMEM;
				o = out->p + out->len;
			}
		}
		if (r == 0) {
			memcpy(o, FFFD, 3);
			o += 3;
			bad++;
			i++;
		} else if (more) {
			*ncarry = (int)(n - i);
			memcpy(carry, s + i, n - i);
			break;
		} else {
			for (; i < n; i++, o += 3, bad++)
				memcpy(o, FFFD, 3);
		}
	}
	out->len = o - out->p;
	return bad;
}

/* ------------------------------------------------------------------ */
/* object */

/* Positions in a page: loom_wikitext_clean refuses pages whose
 * intermediate text could pass 4 GB, so 32 bits hold them. */
struct span {
	uint32_t s, e;
};

struct vec {
	void *p;
	size_t n, cap, size;
};

static int vec_push(struct vec *v, const void *x)
{
	if (v->n == v->cap) {
		size_t cap = v->cap < 64 ? 64 : v->cap + v->cap / 2;
		void *p = realloc(v->p, cap * v->size);
		if (!p)
			return LOOM_ENOMEM;
		v->p = p;
		v->cap = cap;
	}
	memcpy((char *)v->p + v->n * v->size, x, v->size);
	v->n++;
	return 0;
}

struct prefix {
	char *s;
	size_t len;
};

struct loom_wikitext {
	struct loom_wikitext_opts opts;
	struct loom_wt_buf a, b;
	struct vec stack, dels;
	struct prefix *drop;
	size_t ndrop;
	struct prefix *dab;     /* more disambiguation template names */
	size_t ndab;
	struct loom_wikitext_info info;
	size_t peak;      /* scratch bytes held at once, this call */
	struct loom_err err;
};

/* Record the scratch memory held now (plus `extra` bytes about to be). */
static void note_peak(struct loom_wikitext *w, size_t extra)
{
	size_t held = w->a.cap + w->b.cap + (w->stack.cap + w->dels.cap) * sizeof(struct span) + extra;
	if (held > w->peak)
		w->peak = held;
}

const char *loom_wikitext_error(const struct loom_wikitext *w)
{
	return w->err.msg;
}

/* Append name[0..len) to the list *v of *n names. */
static int add_name(struct loom_wikitext *w, struct prefix **v, size_t *n, const char *name,
		    size_t len)
{
	if (!len)
		return 0;
	struct prefix *d = realloc(*v, (*n + 1) * sizeof *d);
	if (!d)
		return loom_err_set(&w->err, LOOM_ENOMEM, "out of memory");
	*v = d;
	d[*n].s = malloc(len);
	if (!d[*n].s)
		return loom_err_set(&w->err, LOOM_ENOMEM, "out of memory");
	memcpy(d[*n].s, name, len);
	d[*n].len = len;
	++*n;
	return 0;
}

int loom_wikitext_drop_prefix(struct loom_wikitext *w, const char *name, size_t len)
{
	return add_name(w, &w->drop, &w->ndrop, name, len);
}

int loom_wikitext_disambig_template(struct loom_wikitext *w, const char *name, size_t len)
{
	return add_name(w, &w->dab, &w->ndab, name, len);
}

struct loom_wikitext *loom_wikitext_new(const struct loom_wikitext_opts *opts)
{
	static const char *const defaults[] = {
		"File", "Image", "Category", "Media",
		"\xe3\x83\x95\xe3\x82\xa1\xe3\x82\xa4\xe3\x83\xab",	/* ファイル */
		"\xe7\x94\xbb\xe5\x83\x8f",				/* 画像 */
		"\xe3\x82\xab\xe3\x83\x86\xe3\x82\xb4\xe3\x83\xaa",	/* カテゴリ */
	};
	struct loom_wikitext *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	if (opts)
		w->opts = *opts;
	w->stack.size = sizeof(struct span);
	w->dels.size = sizeof(struct span);
	for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
		if (loom_wikitext_drop_prefix(w, defaults[i], strlen(defaults[i]))) {
			loom_wikitext_free(w);
			return NULL;
		}
	return w;
}

void loom_wikitext_free(struct loom_wikitext *w)
{
	if (!w)
		return;
	loom_wt_buf_free(&w->a);
	loom_wt_buf_free(&w->b);
	free(w->stack.p);
	free(w->dels.p);
	for (size_t i = 0; i < w->ndrop; i++)
		free(w->drop[i].s);
	free(w->drop);
	for (size_t i = 0; i < w->ndab; i++)
		free(w->dab[i].s);
	free(w->dab);
	free(w);
}

/* ------------------------------------------------------------------ */
/* helpers */

static int lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static int is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_alnum(int c)
{
	return is_alpha(c) || (c >= '0' && c <= '9');
}

static int ieq(const char *a, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
			return 0;
	return 1;
}

/* First position >= from of byte c1 (or c2), or n.  Memoized: for any
 * `from` inside the last scanned range the answer is known, so repeated
 * searches from increasing positions scan every byte at most once. */
struct memo {
	size_t from, at;
	int valid;
	uint64_t scanned; /* bytes examined, for loom_wikitext_info */
};

static size_t memo_find(struct memo *m, const char *s, size_t n, size_t from, char c1, char c2)
{
	if (m->valid && m->from <= from && from <= m->at)
		return m->at;
	size_t j = from;
	while (j < n && s[j] != c1 && s[j] != c2)
		j++;
	m->scanned += j - from;
	m->from = from;
	m->at = j;
	m->valid = 1;
	return j;
}

/* ------------------------------------------------------------------ */
/* pass 1: comments, extension tags, nowiki */

enum { TAG_DROP, TAG_LITERAL };
static const struct {
	const char *name;
	size_t len;
	int action;
} ext_tags[] = {
	{ "ref", 3, TAG_DROP }, { "references", 10, TAG_DROP }, { "math", 4, TAG_DROP },
	{ "chem", 4, TAG_DROP }, { "ce", 2, TAG_DROP }, { "gallery", 7, TAG_DROP },
	{ "timeline", 8, TAG_DROP }, { "syntaxhighlight", 15, TAG_DROP },
	{ "source", 6, TAG_DROP }, { "score", 5, TAG_DROP }, { "graph", 5, TAG_DROP },
	{ "mapframe", 8, TAG_DROP }, { "maplink", 7, TAG_DROP },
	{ "templatedata", 12, TAG_DROP }, { "templatestyles", 14, TAG_DROP },
	{ "imagemap", 8, TAG_DROP }, { "hiero", 5, TAG_DROP }, { "inputbox", 8, TAG_DROP },
	{ "categorytree", 12, TAG_DROP }, { "includeonly", 11, TAG_DROP },
	{ "indicator", 9, TAG_DROP }, { "charinsert", 10, TAG_DROP },
	{ "section", 7, TAG_DROP }, { "timedmedia", 10, TAG_DROP },
	{ "nowiki", 6, TAG_LITERAL }, { "pre", 3, TAG_LITERAL },
};
#define N_EXT (sizeof ext_tags / sizeof ext_tags[0])

struct close_memo {
	size_t from, at, end; /* first "</name" at or after from: [at, end) */
	int valid;
	uint64_t scanned;
};

/* Find the closing tag of ext_tags[k] at or after from. */
static size_t find_close(struct close_memo *m, int k, const char *s, size_t n,
			 size_t from, size_t *end)
{
	if (m->valid && m->from <= from && from <= m->at) {
		*end = m->end;
		return m->at;
	}
	const char *name = ext_tags[k].name;
	size_t len = ext_tags[k].len, j = from;
	size_t at = n, e = n;
	while (j + 2 <= n) {
		const char *p = memmem(s + j, n - j, "</", 2);
		if (!p)
			break;
		j = p - s;
		if (j + 2 + len <= n && ieq(s + j + 2, name, len) &&
		    (j + 2 + len == n || !is_alnum((unsigned char)s[j + 2 + len]))) {
			const char *g = memchr(s + j + 2 + len, '>', n - (j + 2 + len));
			at = j;
			e = g ? (size_t)(g - s) + 1 : n;
			break;
		}
		j += 2;
	}
	m->scanned += e - from;
	m->from = from;
	m->at = at;
	m->end = e;
	m->valid = 1;
	*end = e;
	return at;
}

static int ext_lookup(const char *name, size_t len)
{
	for (size_t k = 0; k < N_EXT; k++)
		if (ext_tags[k].len == len && ieq(name, ext_tags[k].name, len))
			return (int)k;
	return -1;
}

/* Literal text: markup characters become numeric entities that pass 5
 * decodes back, so no later pass sees them as markup. */
static void put_literal(char **op, const char *s, size_t n)
{
	char *o = *op;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		if (c == '[' || c == ']' || c == '{' || c == '}' || c == '|' ||
		    c == '\'' || c == '<' || c == '>' || c == '=' || c == '*' ||
		    c == '#' || c == ':' || c == ';' || c == '&' || c == '_' ||
		    c == '!' || c == '-') {
			*o++ = '&';
			*o++ = '#';
			*o++ = '0' + c / 100;
			*o++ = '0' + c / 10 % 10;
			*o++ = '0' + c % 10;
			*o++ = ';';
		} else if (c == '\r') {
			*o++ = '\n';
		} else {
			*o++ = c;
		}
	}
	*op = o;
}

static int pass_tags(struct loom_wikitext *w, const char *s, size_t n, struct loom_wt_buf *out)
{
	struct close_memo cm[N_EXT];
	struct memo gt = { 0 };
	memset(cm, 0, sizeof cm);
	/* only <nowiki>/<pre> content grows (6x, as entities): room for it
	 * is made when met, the rest never grows */
	if (n > SIZE_MAX - 16 || scratch(out, n + 16))
		return LOOM_ENOMEM;
	char *o = out->p;
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (j < n && s[j] != '<' && s[j] != '\r')
			j++;
		memcpy(o, s + i, j - i);
		o += j - i;
		i = j;
		if (i >= n)
			break;
		if (s[i] == '\r') {
			if (i + 1 < n && s[i + 1] == '\n')
				i++;
			else
				*o++ = '\n', i++;
			continue;
		}
		/* s[i] == '<' */
		if (i + 4 <= n && memcmp(s + i, "<!--", 4) == 0) {
			const char *e = memmem(s + i + 4, n - i - 4, "-->", 3);
			i = e ? (size_t)(e - s) + 3 : n;
			continue;
		}
		size_t k = i + 1;
		while (k < n && is_alnum((unsigned char)s[k]) && k - i <= 20)
			k++;
		int t = -1;
		if (k > i + 1 && k < n && (s[k] == ' ' || s[k] == '>' || s[k] == '/' ||
					   s[k] == '\t' || s[k] == '\n'))
			t = ext_lookup(s + i + 1, k - i - 1);
		if (t < 0) {
			*o++ = '<';
			i++;
			continue;
		}
		size_t g = memo_find(&gt, s, n, k, '>', '>');
		if (g >= n) {
			*o++ = '<';
			i++;
			continue;
		}
		if (s[g - 1] == '/') { /* <ref name=x/> */
			i = g + 1;
			continue;
		}
		size_t end;
		size_t c = find_close(&cm[t], t, s, n, g + 1, &end);
		if (c >= n) { /* unclosed: drop the opening tag only */
			i = g + 1;
			continue;
		}
		if (ext_tags[t].action == TAG_LITERAL) {
			out->len = o - out->p;
			if (c - g - 1 > (SIZE_MAX - n) / 6 ||
			    loom_wt_buf_reserve(out, 6 * (c - g - 1) + (n - end) + 16))
				return LOOM_ENOMEM;
			o = out->p + out->len;
			put_literal(&o, s + g + 1, c - g - 1);
		}
		i = end;
	}
	out->len = o - out->p;
	w->info.scanned += gt.scanned;
	for (size_t k = 0; k < N_EXT; k++)
		w->info.scanned += cm[k].scanned;
	return 0;
}

/* Copy s[0..n) to o without the deleted spans d[0..nd) (sorted by start,
 * possibly overlapping) and the unmatched openers u[0..nu) (sorted; each
 * `width` bytes long, or u.e bytes if width is 0).  Returns the end. */
static char *copy_kept(char *o, const char *s, size_t n, const struct span *d, size_t nd,
		       const struct span *u, size_t nu, size_t width)
{
	size_t a = 0, b = 0, cur = 0;
	while (a < nd || b < nu) {
		size_t s0, e0;
		if (b >= nu || (a < nd && d[a].s < u[b].s)) {
			s0 = d[a].s;
			e0 = d[a].e;
			a++;
		} else {
			s0 = u[b].s;
			e0 = s0 + (width ? width : u[b].e);
			b++;
		}
		if (s0 > cur) {
			memcpy(o, s + cur, s0 - cur);
			o += s0 - cur;
		}
		if (e0 > cur)
			cur = e0;
	}
	if (cur < n) {
		memcpy(o, s + cur, n - cur);
		o += n - cur;
	}
	return o;
}

/* ------------------------------------------------------------------ */
/* pass 2: templates */

static int same_prefix(const char *t, size_t n, const struct prefix *p);

static int is_disambig_name(const struct loom_wikitext *w, const char *s, size_t n)
{
	static const char *const names[] = {
		"disambiguation", "disambig", "dab", "disamb", "dbig", "hndis",
		"geodis", "aimai",
	};
	while (n && (s[0] == ' ' || s[0] == '_'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '_'))
		n--;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strlen(names[i]) == n && ieq(s, names[i], n))
			return 1;
	if (n > 15 && ieq(s + n - 15, " disambiguation", 15))
		return 1;
	for (size_t i = 0; i < w->ndab; i++)
		if (same_prefix(s, n, &w->dab[i]))
			return 1;
	/* 曖昧さ回避 anywhere in the name (人名の曖昧さ回避, ...) */
	if (memmem(s, n, "\xe6\x9b\x96\xe6\x98\xa7\xe3\x81\x95\xe5\x9b\x9e\xe9\x81\xbf", 15))
		return 1;
	return 0;
}

static int pass_templates(struct loom_wikitext *w, const char *s, size_t n, struct loom_wt_buf *out)
{
	struct vec *st = &w->stack, *dl = &w->dels;
	st->n = dl->n = 0;
	size_t i = 0;
	while (i < n) {
		char c = s[i];
		if (c != '{' && c != '}') {
			i++;
			continue;
		}
		size_t j = i;
		while (j < n && s[j] == c)
			j++;
		size_t m = j - i;
		if (c == '{') {
			if (m >= 2) {
				struct span e = { i, m }; /* s = run start, e = braces left */
				if (vec_push(st, &e))
					return LOOM_ENOMEM;
				if (m == 2) {
					size_t k = j, lim = j + 80 < n ? j + 80 : n;
					while (k < lim && s[k] != '|' && s[k] != '}' && s[k] != '{' &&
					       s[k] != '\n')
						k++;
					if (k < n && (s[k] == '|' || s[k] == '}' || s[k] == '\n') &&
					    is_disambig_name(w, s + j, k - j))
						w->info.disambiguation = 1;
				}
			}
			i = j;
			continue;
		}
		/* run of m closing braces at i */
		size_t p = i;
		while (m >= 2 && st->n) {
			struct span *top = (struct span *)st->p + st->n - 1;
			size_t take = (m >= 3 && top->e >= 3) ? 3 : 2;
			top->e -= take;
			p += take;
			m -= take;
			struct span d = { top->s + top->e, p };
			if (top->e < 2)
				st->n--;
			/* spans close inner-first: drop those this one contains */
			while (dl->n && ((struct span *)dl->p)[dl->n - 1].s >= d.s)
				dl->n--;
			if (vec_push(dl, &d))
				return LOOM_ENOMEM;
		}
		i = j;
	}
	note_peak(w, 0);
	/* output: skip matched spans (sorted, disjoint) and the braces of
	 * unmatched openers (stack, sorted, outside every matched span) */
	if (scratch(out, n + 1))
		return LOOM_ENOMEM;
	char *o = out->p;
	o = copy_kept(o, s, n, dl->p, dl->n, st->p, st->n, 0);
	out->len = o - out->p;
	return 0;
}

/* ------------------------------------------------------------------ */
/* pass 3: tables */

/* Is s only HTML attributes (colspan="2" style=x)?  What is left of a
 * cell whose content came from a removed template. */
static int only_attributes(const char *s, size_t n)
{
	size_t i = 0;
	int any = 0;
	while (i < n) {
		while (i < n && (s[i] == ' ' || s[i] == '\t'))
			i++;
		if (i == n)
			break;
		size_t k = i;
		while (k < n && (is_alpha((unsigned char)s[k]) || s[k] == '-'))
			k++;
		if (k == i || k == n || s[k] != '=')
			return 0;
		k++;
		if (k < n && (s[k] == '"' || s[k] == '\'')) {
			const char *q = memchr(s + k + 1, s[k], n - k - 1);
			if (!q)
				return 0;
			k = q - s + 1;
		} else {
			while (k < n && s[k] != ' ' && s[k] != '\t')
				k++;
		}
		i = k;
		any = 1;
	}
	return any;
}

/* Text of one table cell: after the attribute separator '|' if any. */
static void put_cell(char **op, const char *s, size_t n, int *ncell)
{
	size_t k = 0, depth = 0, bar = n;
	for (k = 0; k < n; k++) {
		if (s[k] == '[' && k + 1 < n && s[k + 1] == '[')
			depth++, k++;
		else if (s[k] == ']' && k + 1 < n && s[k + 1] == ']' && depth)
			depth--, k++;
		else if (s[k] == '|' && !depth) {
			bar = k;
			break;
		}
	}
	if (bar < n) {
		s += bar + 1;
		n -= bar + 1;
	}
	while (n && (s[0] == ' ' || s[0] == '\t'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	if (!n || only_attributes(s, n))
		return;
	char *o = *op;
	if ((*ncell)++) {
		memcpy(o, " | ", 3);
		o += 3;
	}
	memcpy(o, s, n);
	*op = o + n;
}

static int pass_tables(struct loom_wikitext *w, const char *s, size_t n, struct loom_wt_buf *out)
{
	int ncell = 0, keep = w->opts.keep_tables;
	/* without keep_tables nothing grows ("{|" lines become one '\n');
	 * with it a line's cells may (" | " for "||"): room is made per line */
	if (n > (SIZE_MAX - 16) / 3 || scratch(out, n + 16))
		return LOOM_ENOMEM;
	char *o = out->p;
	size_t depth = 0, i = 0;
	while (i < n) {
		const char *nl = memchr(s + i, '\n', n - i);
		size_t e = nl ? (size_t)(nl - s) : n, t = i;
		if (keep && depth && out->cap - (size_t)(o - out->p) < 3 * (e - i) + (n - e) + 16) {
			out->len = o - out->p;
			if (loom_wt_buf_reserve(out, 3 * (e - i) + (n - e) + 16))
				return LOOM_ENOMEM;
			o = out->p + out->len;
		}
		while (t < e && (s[t] == ' ' || s[t] == '\t'))
			t++;
		size_t len = e - t;
		const char *l = s + t;
		size_t c = t; /* ":{|" is an indented table */
		while (c < e && (s[c] == ':' || s[c] == ' ' || s[c] == '\t'))
			c++;
		if (c > t && e - c >= 2 && s[c] == '{' && s[c + 1] == '|') {
			l = s + c;
			len = e - c;
		}
		if (len >= 2 && l[0] == '{' && l[1] == '|') {
			if (depth++ == 0)
				*o++ = '\n'; /* a table ends the paragraph */
		} else if (len >= 2 && l[0] == '|' && l[1] == '}') {
			if (depth) {
				depth--;
				if (keep && ncell)
					*o++ = '\n', *o++ = '\n';
				ncell = 0;
			}
		} else if (!depth && len && l[0] == '|' &&
			   (len == 1 || l[1] == '-' || strspn(l + 1, " \t") == len - 1)) {
			/* a lone "|" or "|-": table markup of a table a removed
			 * template opened ({{multicol}} ... {{multicol-end}}) */
		} else if (!depth) {
			memcpy(o, s + i, e - i);
			o += e - i;
			*o++ = '\n';
		} else if (keep) {
			if (len >= 2 && l[0] == '|' && l[1] == '-') {
				if (ncell)
					*o++ = '\n', *o++ = '\n';
				ncell = 0;
			} else if (len >= 2 && l[0] == '|' && l[1] == '+') {
				if (ncell)
					*o++ = '\n', *o++ = '\n';
				ncell = 0;
				put_cell(&o, l + 2, len - 2, &ncell);
				*o++ = '\n';
				*o++ = '\n';
				ncell = 0;
			} else if (len && (l[0] == '|' || l[0] == '!')) {
				const char *sep = l[0] == '!' ? "!!" : "||";
				size_t a = 1;
				for (;;) {
					const char *x = memmem(l + a, len - a, sep, 2);
					if (!x && l[0] == '!')
						x = memmem(l + a, len - a, "||", 2);
					size_t b = x ? (size_t)(x - l) : len;
					put_cell(&o, l + a, b - a, &ncell);
					if (!x)
						break;
					a = b + 2;
				}
			} else if (len) {
				/* continuation of the previous cell */
				if (ncell) {
					*o++ = ' ';
				} else {
					ncell = 1;
				}
				memcpy(o, l, len);
				o += len;
			}
		}
		i = e + 1;
	}
	if (keep && ncell)
		*o++ = '\n';
	out->len = o - out->p;
	return 0;
}

/* ------------------------------------------------------------------ */
/* pass 4: links */

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	if (x->s != y->s)
		return x->s < y->s ? -1 : 1;
	return x->e < y->e ? 1 : x->e > y->e ? -1 : 0;
}

static int same_prefix(const char *t, size_t n, const struct prefix *p)
{
	if (n != p->len)
		return 0;
	for (size_t i = 0; i < n; i++) {
		int a = (unsigned char)t[i], b = (unsigned char)p->s[i];
		if (a == '_')
			a = ' ';
		if (b == '_')
			b = ' ';
		if (i == 0 || (a < 0x80 && b < 0x80)) {
			a = lower(a);
			b = lower(b);
		}
		if (a != b)
			return 0;
	}
	return 1;
}

/* Does the link target t (n bytes, before any '|') name a file, category
 * or interlanguage link? */
static int drop_target(struct loom_wikitext *w, const char *t, size_t n, int piped)
{
	if (n > 128)
		n = 128;
	const char *c = memchr(t, ':', n);
	if (!c)
		return 0;
	size_t pl = c - t;
	while (pl && (t[pl - 1] == ' ' || t[pl - 1] == '_'))
		pl--;
	if (!pl)
		return 0;
	for (size_t i = 0; i < w->ndrop; i++)
		if (same_prefix(t, pl, &w->drop[i]))
			return 1;
	if (piped || pl < 2 || pl > 12)
		return 0;
	for (size_t i = 0; i < pl; i++)
		if (!((t[i] >= 'a' && t[i] <= 'z') || t[i] == '-'))
			return 0;
	return 1;
}

static size_t url_scheme(const char *s, size_t n)
{
	static const char *const schemes[] = {
		"http://", "https://", "ftp://", "ftps://", "sftp://", "//",
		"mailto:", "news:", "irc://", "ircs://", "git://", "svn://",
		"gopher://", "telnet://", "urn:", "tel:", "geo:",
	};
	for (size_t k = 0; k < sizeof schemes / sizeof schemes[0]; k++) {
		size_t l = strlen(schemes[k]);
		if (n > l && ieq(s, schemes[k], l))
			return l;
	}
	return 0;
}

#define NOPIPE UINT32_MAX

static int add_del(struct vec *dl, size_t s, size_t e)
{
	struct span d = { s, e };
	return e > s ? vec_push(dl, &d) : 0;
}

static int pass_links(struct loom_wikitext *w, const char *s, size_t n, struct loom_wt_buf *out)
{
	struct vec *st = &w->stack, *dl = &w->dels;
	struct memo br = { 0 };
	st->n = dl->n = 0;
	size_t i = 0;
	while (i < n) {
		char c = s[i];
		if (c == '[') {
			if (i + 1 < n && s[i + 1] == '[') {
				struct span e = { i, NOPIPE };
				if (vec_push(st, &e))
					return LOOM_ENOMEM;
				i += 2;
				continue;
			}
			size_t sl = url_scheme(s + i + 1, n - i - 1);
			if (!sl) {
				i++;
				continue;
			}
			size_t k = memo_find(&br, s, n, i + 1, ']', '\n');
			if (k >= n || s[k] != ']') {
				i++;
				continue;
			}
			size_t sp = i + 1 + sl;
			while (sp < k && s[sp] != ' ' && s[sp] != '\t')
				sp++;
			size_t ls = sp;
			while (ls < k && (s[ls] == ' ' || s[ls] == '\t'))
				ls++;
			if (ls < k) {
				if (add_del(dl, i, ls) || add_del(dl, k, k + 1))
					return LOOM_ENOMEM;
				i = ls;
			} else {
				if (add_del(dl, i, k + 1))
					return LOOM_ENOMEM;
				i = k + 1;
			}
			continue;
		}
		if (c == '|' && st->n) {
			struct span *top = (struct span *)st->p + st->n - 1;
			if (top->e == NOPIPE)
				top->e = i;
			i++;
			continue;
		}
		if (c == ']' && i + 1 < n && s[i + 1] == ']') {
			if (!st->n) {
				if (add_del(dl, i, i + 2))
					return LOOM_ENOMEM;
				i += 2;
				continue;
			}
			struct span e = ((struct span *)st->p)[--st->n];
			size_t close = i, ts = e.s + 2, te = e.e != NOPIPE ? e.e : close;
			while (ts < te && (s[ts] == ' ' || s[ts] == '_'))
				ts++;
			int r = 0;
			if (ts < te && s[ts] == ':') {
				ts++;
			} else if (drop_target(w, s + ts, te - ts, e.e != NOPIPE)) {
				r = add_del(dl, e.s, close + 2);
				i += 2;
				if (r)
					return LOOM_ENOMEM;
				continue;
			}
			if (e.e != NOPIPE) {
				size_t l = e.e + 1;
				while (l < close && (s[l] == ' ' || s[l] == '\t'))
					l++;
				if (l == close) { /* pipe trick: [[ns:Target (x)|]] -> Target */
					size_t ds = ts, de = te, lim = te - ts > 128 ? ts + 128 : te;
					const char *colon = memchr(s + ts, ':', lim - ts);
					if (colon)
						ds = colon - s + 1;
					while (de > ds && (s[de - 1] == ' ' || s[de - 1] == '_'))
						de--;
					if (de > ds && s[de - 1] == ')') {
						size_t k = de - 1;
						while (k > ds && k + 128 > de && s[k] != '(')
							k--;
						if (s[k] == '(' && k > ds)
							de = k;
					}
					while (de > ds && (s[de - 1] == ' ' || s[de - 1] == '_'))
						de--;
					r = add_del(dl, e.s, ds) || add_del(dl, de, close + 2);
				} else
				{
					r = add_del(dl, e.s, e.e + 1) || add_del(dl, close, close + 2);
				}
			} else {
				r = add_del(dl, e.s, ts) || add_del(dl, close, close + 2);
			}
			if (r)
				return LOOM_ENOMEM;
			i += 2;
			continue;
		}
		i++;
	}
	w->info.scanned += br.scanned;
	note_peak(w, 0);
	/* deleted: the edits, and the "[[" of the openers left on the stack
	 * (unmatched; sorted, as the stack is) */
	if (scratch(out, n + 1))
		return LOOM_ENOMEM;
	char *o = out->p;
	const struct span *d = dl->p, *u = st->p;
	size_t nd = dl->n, nu = st->n, sorted = 1;
	for (size_t k = 1; k < nd && sorted; k++) /* links side by side: no nesting */
		sorted = d[k - 1].s <= d[k].s;
	if (!sorted && nd > 65536 && n < INT32_MAX) {
		/* very many edits (deeply nested links): a difference array
		 * keeps this linear where sorting would not be */
		if (st->cap > 2 * nu + 4096) { /* deep nesting: the stack emptied */
			struct span *p = realloc(st->p, (nu + 1) * sizeof *p);
			if (p) {
				st->p = p;
				st->cap = nu + 1;
				u = p;
			}
		}
		note_peak(w, (n + 1) * sizeof(int32_t));
		int32_t *cnt = calloc(n + 1, sizeof *cnt);
		if (!cnt)
			return LOOM_ENOMEM;
		for (size_t k = 0; k < nd; k++) {
			cnt[d[k].s]++;
			cnt[d[k].e]--;
		}
		for (size_t k = 0; k < nu; k++) {
			cnt[u[k].s]++;
			cnt[u[k].s + 2]--;
		}
		int32_t depth = 0;
		for (size_t k = 0; k < n; k++) {
			depth += cnt[k];
			if (!depth)
				*o++ = s[k];
		}
		free(cnt);
		out->len = o - out->p;
		return 0;
	}
	if (!sorted)
		qsort(dl->p, nd, sizeof(struct span), cmp_span);
	o = copy_kept(o, s, n, d, nd, u, nu, 2);
	out->len = o - out->p;
	return 0;
}

/* ------------------------------------------------------------------ */
/* pass 5: lines, inline markup, entities */

/* HTML 4 entities: Latin-1 (160..255) in order, then the rest. */
static const char *const latin1[96] = {
	"nbsp", "iexcl", "cent", "pound", "curren", "yen", "brvbar", "sect",
	"uml", "copy", "ordf", "laquo", "not", "shy", "reg", "macr", "deg",
	"plusmn", "sup2", "sup3", "acute", "micro", "para", "middot", "cedil",
	"sup1", "ordm", "raquo", "frac14", "frac12", "frac34", "iquest",
	"Agrave", "Aacute", "Acirc", "Atilde", "Auml", "Aring", "AElig",
	"Ccedil", "Egrave", "Eacute", "Ecirc", "Euml", "Igrave", "Iacute",
	"Icirc", "Iuml", "ETH", "Ntilde", "Ograve", "Oacute", "Ocirc", "Otilde",
	"Ouml", "times", "Oslash", "Ugrave", "Uacute", "Ucirc", "Uuml", "Yacute",
	"THORN", "szlig", "agrave", "aacute", "acirc", "atilde", "auml", "aring",
	"aelig", "ccedil", "egrave", "eacute", "ecirc", "euml", "igrave",
	"iacute", "icirc", "iuml", "eth", "ntilde", "ograve", "oacute", "ocirc",
	"otilde", "ouml", "divide", "oslash", "ugrave", "uacute", "ucirc", "uuml",
	"yacute", "thorn", "yuml",
};

static const struct {
	const char *name;
	uint32_t cp;
} entities[] = {
	{ "amp", '&' }, { "lt", '<' }, { "gt", '>' }, { "quot", '"' },
	{ "apos", '\'' }, { "OElig", 0x152 }, { "oelig", 0x153 },
	{ "Scaron", 0x160 }, { "scaron", 0x161 }, { "Yuml", 0x178 },
	{ "fnof", 0x192 }, { "circ", 0x2C6 }, { "tilde", 0x2DC },
	{ "ensp", 0x2002 }, { "emsp", 0x2003 }, { "thinsp", 0x2009 },
	{ "zwnj", 0x200C }, { "zwj", 0x200D }, { "lrm", 0x200E }, { "rlm", 0x200F },
	{ "ndash", 0x2013 }, { "mdash", 0x2014 }, { "lsquo", 0x2018 },
	{ "rsquo", 0x2019 }, { "sbquo", 0x201A }, { "ldquo", 0x201C },
	{ "rdquo", 0x201D }, { "bdquo", 0x201E }, { "dagger", 0x2020 },
	{ "Dagger", 0x2021 }, { "bull", 0x2022 }, { "hellip", 0x2026 },
	{ "permil", 0x2030 }, { "prime", 0x2032 }, { "Prime", 0x2033 },
	{ "lsaquo", 0x2039 }, { "rsaquo", 0x203A }, { "oline", 0x203E },
	{ "frasl", 0x2044 }, { "euro", 0x20AC }, { "trade", 0x2122 },
	{ "larr", 0x2190 }, { "uarr", 0x2191 }, { "rarr", 0x2192 },
	{ "darr", 0x2193 }, { "harr", 0x2194 }, { "lArr", 0x21D0 },
	{ "rArr", 0x21D2 }, { "hArr", 0x21D4 }, { "forall", 0x2200 },
	{ "part", 0x2202 }, { "exist", 0x2203 }, { "empty", 0x2205 },
	{ "nabla", 0x2207 }, { "isin", 0x2208 }, { "notin", 0x2209 },
	{ "ni", 0x220B }, { "prod", 0x220F }, { "sum", 0x2211 },
	{ "minus", 0x2212 }, { "lowast", 0x2217 }, { "radic", 0x221A },
	{ "prop", 0x221D }, { "infin", 0x221E }, { "ang", 0x2220 },
	{ "and", 0x2227 }, { "or", 0x2228 }, { "cap", 0x2229 }, { "cup", 0x222A },
	{ "int", 0x222B }, { "there4", 0x2234 }, { "sim", 0x223C },
	{ "cong", 0x2245 }, { "asymp", 0x2248 }, { "ne", 0x2260 },
	{ "equiv", 0x2261 }, { "le", 0x2264 }, { "ge", 0x2265 }, { "sub", 0x2282 },
	{ "sup", 0x2283 }, { "nsub", 0x2284 }, { "sube", 0x2286 },
	{ "supe", 0x2287 }, { "oplus", 0x2295 }, { "otimes", 0x2297 },
	{ "perp", 0x22A5 }, { "sdot", 0x22C5 }, { "loz", 0x25CA },
	{ "spades", 0x2660 }, { "clubs", 0x2663 }, { "hearts", 0x2665 },
	{ "diams", 0x2666 }, { "Alpha", 0x391 }, { "Beta", 0x392 },
	{ "Gamma", 0x393 }, { "Delta", 0x394 }, { "Epsilon", 0x395 },
	{ "Zeta", 0x396 }, { "Eta", 0x397 }, { "Theta", 0x398 }, { "Iota", 0x399 },
	{ "Kappa", 0x39A }, { "Lambda", 0x39B }, { "Mu", 0x39C }, { "Nu", 0x39D },
	{ "Xi", 0x39E }, { "Omicron", 0x39F }, { "Pi", 0x3A0 }, { "Rho", 0x3A1 },
	{ "Sigma", 0x3A3 }, { "Tau", 0x3A4 }, { "Upsilon", 0x3A5 },
	{ "Phi", 0x3A6 }, { "Chi", 0x3A7 }, { "Psi", 0x3A8 }, { "Omega", 0x3A9 },
	{ "alpha", 0x3B1 }, { "beta", 0x3B2 }, { "gamma", 0x3B3 },
	{ "delta", 0x3B4 }, { "epsilon", 0x3B5 }, { "zeta", 0x3B6 },
	{ "eta", 0x3B7 }, { "theta", 0x3B8 }, { "iota", 0x3B9 }, { "kappa", 0x3BA },
	{ "lambda", 0x3BB }, { "mu", 0x3BC }, { "nu", 0x3BD }, { "xi", 0x3BE },
	{ "omicron", 0x3BF }, { "pi", 0x3C0 }, { "rho", 0x3C1 },
	{ "sigmaf", 0x3C2 }, { "sigma", 0x3C3 }, { "tau", 0x3C4 },
	{ "upsilon", 0x3C5 }, { "phi", 0x3C6 }, { "chi", 0x3C7 }, { "psi", 0x3C8 },
	{ "omega", 0x3C9 }, { "thetasym", 0x3D1 }, { "upsih", 0x3D2 },
	{ "piv", 0x3D6 },
};

/* Decode the entity at s[0] == '&'; returns its length (0 if none). */
static size_t entity(const char *s, size_t n, uint32_t *cp)
{
	size_t k = 1;
	if (n > 2 && s[1] == '#') {
		uint32_t v = 0;
		int hex = s[2] == 'x' || s[2] == 'X', digits = 0;
		for (k = hex ? 3 : 2; k < n && k < 12; k++) {
			int c = (unsigned char)s[k], d;
			if (c >= '0' && c <= '9')
				d = c - '0';
			else if (hex && lower(c) >= 'a' && lower(c) <= 'f')
				d = lower(c) - 'a' + 10;
			else
				break;
			v = v * (hex ? 16 : 10) + d;
			digits++;
		}
		if (!digits || k >= n || s[k] != ';' || digits > 7)
			return 0;
		if (v == 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
			v = 0xFFFD;
		*cp = v;
		return k + 1;
	}
	while (k < n && k < 12 && is_alnum((unsigned char)s[k]))
		k++;
	if (k == 1 || k >= n || s[k] != ';')
		return 0;
	size_t len = k - 1;
	for (int i = 0; i < 96; i++)
		if (latin1[i][0] == s[1] && strncmp(latin1[i], s + 1, len) == 0 && !latin1[i][len]) {
			*cp = 160 + i;
			return k + 1;
		}
	for (size_t i = 0; i < sizeof entities / sizeof entities[0]; i++)
		if (entities[i].name[0] == s[1] && strncmp(entities[i].name, s + 1, len) == 0 &&
		    !entities[i].name[len]) {
			*cp = entities[i].cp;
			return k + 1;
		}
	return 0;
}

static char *put_cp(char *o, uint32_t c)
{
	return o + loom_utf8_encode((uint8_t *)o, c);
}

static const char *const block_tags[] = {
	"br", "p", "div", "li", "ul", "ol", "dl", "dd", "dt", "tr", "table",
	"blockquote", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "center",
};

/* Paragraph writer state for pass 5. */
struct para {
	char *o;
	char *start;     /* start of the output of this call */
	int has;         /* current paragraph has text */
	int space;       /* a space is pending */
};

static void para_break(struct para *p)
{
	if (p->has)
		*p->o++ = '\n';
	p->has = 0;
	p->space = 0;
}

static void para_text(struct para *p, const char *s, size_t n)
{
	if (!n)
		return;
	if (p->space && p->has)
		*p->o++ = ' ';
	p->space = 0;
	memcpy(p->o, s, n);
	p->o += n;
	p->has = 1;
}

/* Inline markup of one line (or heading/list item text). */
static void inline_text(struct para *p, const char *s, size_t n, struct memo *gt)
{
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (j < n && s[j] != '\'' && s[j] != '<' && s[j] != '&' && s[j] != ' ' &&
		       s[j] != '\t' && s[j] != '_')
			j++;
		para_text(p, s + i, j - i);
		i = j;
		if (i >= n)
			break;
		char c = s[i];
		if (c == ' ' || c == '\t') {
			p->space = 1;
			i++;
		} else if (c == '\'') {
			size_t k = i;
			while (k < n && s[k] == '\'')
				k++;
			size_t m = k - i;
			if (m == 1)
				para_text(p, "'", 1);
			else if (m == 4)
				para_text(p, "'", 1);
			else if (m > 5)
				para_text(p, s + i, m - 5);
			i = k;
		} else if (c == '_') {
			/* __MAGICWORD__ */
			size_t k = i + 2;
			if (i + 1 < n && s[i + 1] == '_') {
				while (k < n && k - i < 40 && s[k] >= 'A' && s[k] <= 'Z')
					k++;
				if (k > i + 2 && k + 1 < n && s[k] == '_' && s[k + 1] == '_') {
					i = k + 2;
					continue;
				}
			}
			para_text(p, "_", 1);
			i++;
		} else if (c == '&') {
			uint32_t cp;
			size_t l = entity(s + i, n - i, &cp);
			if (!l) {
				para_text(p, "&", 1);
				i++;
				continue;
			}
			i += l;
			if (cp == 0xA0 || cp == ' ' || cp == '\t') {
				p->space = 1;
			} else if (cp == '\n') {
				para_break(p);
			} else {
				char tmp[4];
				para_text(p, tmp, put_cp(tmp, cp) - tmp);
			}
		} else { /* '<' */
			size_t k = i + 1;
			if (k < n && s[k] == '/')
				k++;
			size_t ns = k;
			while (k < n && is_alnum((unsigned char)s[k]))
				k++;
			size_t g = n;
			if (k > ns && is_alpha((unsigned char)s[ns]) &&
			    (k == n || s[k] == ' ' || s[k] == '>' || s[k] == '/' || s[k] == '\t'))
				g = memo_find(gt, s, n, k, '>', '<');
			if (g >= n || s[g] != '>') {
				para_text(p, "<", 1);
				i++;
				continue;
			}
			int block = 0;
			for (size_t t = 0; t < sizeof block_tags / sizeof block_tags[0] && !block; t++)
				block = lower((unsigned char)s[ns]) == block_tags[t][0] &&
					k - ns == strlen(block_tags[t]) && ieq(s + ns, block_tags[t], k - ns);
			if (block)
				para_break(p); /* inline tags just vanish */
			i = g + 1;
		}
	}
}

static int pass_lines(struct loom_wikitext *w, const char *s, size_t n, struct loom_wt_buf *out)
{
	/* entities never grow; separators replace consumed bytes */
	if (n > (SIZE_MAX - 16) / 2 || loom_wt_buf_reserve(out, 2 * n + 16))
		return LOOM_ENOMEM;
	struct para p = { out->p + out->len, out->p + out->len, 0, 0 };
	struct memo gt = { 0 };
	size_t i = 0;
	while (i < n) {
		const char *nl = memchr(s + i, '\n', n - i);
		size_t e = nl ? (size_t)(nl - s) : n, a = i;
		while (a < e && (s[a] == ' ' || s[a] == '\t'))
			a++;
		size_t b = e;
		while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t'))
			b--;
		i = e + 1;
		if (a == b) {
			para_break(&p);
			continue;
		}
		const char *l = s + a;
		size_t len = b - a;
		if (l[0] == '=' && l[len - 1] == '=' && len >= 3) {
			size_t h = 0, t = 0;
			while (h < len && l[h] == '=')
				h++;
			while (t < len - h && l[len - 1 - t] == '=')
				t++;
			if (h < len) {
				size_t lv = h < t ? h : t;
				para_break(&p);
				if (w->opts.headings) {
					gt.valid = 0;
					inline_text(&p, l + lv, len - 2 * lv, &gt);
					para_break(&p);
				}
				gt.valid = 0;
				continue;
			}
		}
		if (len >= 4 && memcmp(l, "----", 4) == 0) {
			size_t k = 0;
			while (k < len && l[k] == '-')
				k++;
			para_break(&p);
			l += k;
			len -= k;
		}
		if (len && (l[0] == '*' || l[0] == '#' || l[0] == ':' || l[0] == ';')) {
			size_t k = 0;
			while (k < len && (l[k] == '*' || l[k] == '#' || l[k] == ':' ||
					   l[k] == ';' || l[k] == ' ' || l[k] == '\t'))
				k++;
			para_break(&p);
			gt.valid = 0;
			inline_text(&p, l + k, len - k, &gt);
			para_break(&p);
			gt.valid = 0;
			continue;
		}
		gt.valid = 0;
		p.space = 1;
		inline_text(&p, l, len, &gt);
		gt.valid = 0;
	}
	w->info.scanned += gt.scanned;
	char *o = p.o;
	while (o > p.start && o[-1] == '\n')
		o--;
	out->len = o - out->p;
	return 0;
}

/* ------------------------------------------------------------------ */
/* tidy: what removed templates leave behind, in place (only shrinks):
 * "by , and" -> "by, and", "x ()" / "x (; )" / "（、）" -> "x",
 * "(kana、)" -> "(kana)". */

static size_t close_paren(const char *s, size_t n)
{
	if (n >= 1 && s[0] == ')')
		return 1;
	if (n >= 3 && memcmp(s, "\xef\xbc\x89", 3) == 0) /* ） */
		return 3;
	return 0;
}

static size_t filler(const char *s, size_t n)
{
	if (n >= 1 && (s[0] == ' ' || s[0] == ',' || s[0] == ';'))
		return 1;
	if (n >= 3 && (memcmp(s, "\xe3\x80\x81", 3) == 0 ||   /* 、 */
		       memcmp(s, "\xef\xbc\x8c", 3) == 0))    /* ， */
		return 3;
	return 0;
}

static size_t tidy(char *s, size_t n)
{
	size_t r = 0, w = 0;
	while (r < n) {
		char c = s[r];
		unsigned char u = (unsigned char)c;
		if (u != '(' && u != ' ' && u != ',' && u != ';' && u != 0xE3 && u != 0xEF) {
			s[w++] = s[r++];
			continue;
		}
		size_t op = c == '(' ? 1 : (n - r >= 3 && memcmp(s + r, "\xef\xbc\x88", 3) == 0) ? 3 : 0;
		if (op) { /* an empty group: drop it and the space before */
			size_t k = r + op, f;
			while (k < n && k - r < 24 && (f = filler(s + k, n - k)))
				k += f;
			size_t cl = close_paren(s + k, n - k);
			if (cl) {
				if (w && s[w - 1] == ' ')
					w--;
				r = k + cl;
				continue;
			}
		}
		size_t f = filler(s + r, n - r);
		if (f && c != ' ') { /* "x、)" -> "x)" */
			size_t k = r;
			while (k < n && k - r < 24 && (f = filler(s + k, n - k)))
				k += f;
			if (close_paren(s + k, n - k)) {
				r = k;
				continue;
			}
		}
		if (c == ' ' && r + 1 < n && (s[r + 1] == ',' || s[r + 1] == '.' ||
					      s[r + 1] == ';' || s[r + 1] == ')')) {
			r++;
			continue;
		}
		s[w++] = s[r++];
	}
	return w;
}

/* ------------------------------------------------------------------ */

int loom_wikitext_clean(struct loom_wikitext *w, const char *in, size_t n,
			struct loom_wt_buf *out, struct loom_wikitext_info *info)
{
	unsigned char carry[4];
	int ncarry = 0, r;
	memset(&w->info, 0, sizeof w->info);
	w->peak = 0;
	if (n > (UINT32_MAX - 64) / 3)
		return loom_err_set(&w->err, LOOM_EINVAL,
				    "%zu bytes of wikitext: more than the cleaner handles (%u)", n,
				    (UINT32_MAX - 64) / 3);
	/* the magic word that marks a disambiguation page (Disambiguator) */
	if (memmem(in, n, "__DISAMBIG__", 12))
		w->info.disambiguation = 1;
	const char *src = in;
	size_t len = n;
	if (!w->opts.valid_utf8) {
		if (scratch(&w->a, n + 32))
			goto nomem;
		int64_t bad = loom_utf8_sanitize(in, n, &w->a, carry, &ncarry, 0);
		if (bad < 0)
			goto nomem;
		w->info.invalid_utf8 = bad;
		src = w->a.p;
		len = w->a.len;
	}
	if ((r = pass_tags(w, src, len, &w->b)) ||
	    (r = pass_templates(w, w->b.p, w->b.len, &w->a)) ||
	    (r = pass_tables(w, w->a.p, w->a.len, &w->b)) ||
	    (r = pass_links(w, w->b.p, w->b.len, &w->a)))
		goto nomem;
	size_t start = out->len;
	if ((r = pass_lines(w, w->a.p, w->a.len, out)))
		goto nomem;
	out->len = start + tidy(out->p + start, out->len - start);
	uint64_t chars = 0;
	for (size_t i = start; i < out->len; i++) {
		unsigned char c = out->p[i];
		chars += (c & 0xC0) != 0x80 && c != '\n';
	}
	w->info.chars = chars;
	note_peak(w, 0);
	w->info.scratch = w->peak;
	if (info)
		*info = w->info;
	return 0;
nomem:
	return loom_err_set(&w->err, LOOM_ENOMEM, "out of memory cleaning %zu bytes of wikitext", n);
}
