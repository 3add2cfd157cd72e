/* loom_extract.c - loom-extract's page filters and output formats
 * (loom_extract.h). */
#include "loom_extract.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_file.h"

enum { ROW_TEMPLATE, ROW_TITLE, ROW_NS };

/* A row of share/wiki/disambiguation.tsv or namespaces.tsv. */
struct wiki_row {
	char *lang;
	int kind;
	char *text;
};

struct worker {
	struct loom_wikitext *wt;
	struct loom_wt_buf text;
	const char *lang;       /* rows of this language apply (NULL: all) */
};

struct loom_extract {
	struct loom_extract_opts o;
	struct wiki_row *rows;
	size_t nrows;
	struct worker *w;
	int threads;
};

struct loom_extract *loom_extract_new(const struct loom_extract_opts *o, int threads)
{
	struct loom_extract *x = calloc(1, sizeof *x);
	if (!x || !(x->w = calloc(threads, sizeof *x->w))) {
		free(x);
		return NULL;
	}
	x->o = *o;
	x->threads = threads;
	return x;
}

void loom_extract_free(struct loom_extract *x)
{
	if (!x)
		return;
	for (int i = 0; i < x->threads; i++) {
		loom_wikitext_free(x->w[i].wt);
		loom_wt_buf_free(&x->w[i].text);
	}
	for (size_t i = 0; i < x->nrows; i++) {
		free(x->rows[i].lang);
		free(x->rows[i].text);
	}
	free(x->rows);
	free(x->w);
	free(x);
}

/* KIND: template or title in disambiguation.tsv, a namespace number 6, 14
 * or -2 in namespaces.tsv. */
int loom_extract_load_table(struct loom_extract *x, const char *path, int kind,
			    struct loom_err *err)
{
	char *buf;
	size_t len;
	int ns_table = kind == LOOM_EXTRACT_NAMESPACES, rc = 0;
	if ((rc = loom_file_read_bounded(path, LOOM_FILE_MAX_LIST, &buf, &len, err)))
		return rc;
	size_t lineno = 0;
	for (char *line = buf, *next; line < buf + len && !rc; line = next) {
		char *nl = memchr(line, '\n', (size_t)(buf + len - line));
		next = nl ? nl + 1 : buf + len;
		if (nl)
			*nl = 0;
		lineno++;
		if (!*line || *line == '#')
			continue;
		char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		if (!t2 || !t2[1] || strchr(t2 + 1, '\t')) {
			rc = loom_err_set(err, LOOM_EFORMAT, "%s line %zu: want LANG<TAB>%s<TAB>NAME",
					  path, lineno, ns_table ? "NAMESPACE" : "template|title");
			break;
		}
		*t1 = *t2 = 0;
		int k = ROW_NS;
		if (!ns_table && !strcmp(t1 + 1, "template"))
			k = ROW_TEMPLATE;
		else if (!ns_table && !strcmp(t1 + 1, "title"))
			k = ROW_TITLE;
		else if (!ns_table || (strcmp(t1 + 1, "6") && strcmp(t1 + 1, "14") && strcmp(t1 + 1, "-2"))) {
			rc = loom_err_set(err, LOOM_EFORMAT, "%s line %zu: '%s' is not %s", path, lineno,
					  t1 + 1, ns_table ? "a namespace 6, 14 or -2" : "template or title");
			break;
		}
		struct wiki_row *r = realloc(x->rows, (x->nrows + 1) * sizeof *r);
		if (!r) {
			rc = loom_err_set(err, LOOM_ENOMEM, "out of memory");
			break;
		}
		x->rows = r;
		r += x->nrows++;
		r->kind = k;
		r->lang = strdup(line);
		r->text = strdup(t2 + 1);
		if (!r->lang || !r->text)
			rc = loom_err_set(err, LOOM_ENOMEM, "out of memory");
	}
	free(buf);
	return rc;
}

static int keep_ns(const struct loom_extract *x, int64_t ns)
{
	for (int i = 0; i < x->o.nns; i++)
		if (x->o.ns[i] == ns)
			return 1;
	return 0;
}

/* The language of the rows that apply to a dump: its dbname without
 * "wiki" (dewiki -> de) when the tables have rows for it, else NULL (all
 * rows apply). */
static const char *dump_lang(const struct loom_extract *x, const struct loom_dump_site *site)
{
	const char *db = site && site->dbname ? site->dbname : "";
	size_t n = strlen(db);
	if (n <= 4 || strcmp(db + n - 4, "wiki"))
		return NULL;
	for (size_t i = 0; i < x->nrows; i++)
		if (strlen(x->rows[i].lang) == n - 4 && !memcmp(x->rows[i].lang, db, n - 4))
			return x->rows[i].lang;
	return NULL;
}

static int row_applies(const struct wiki_row *r, const char *lang)
{
	return !lang || !strcmp(r->lang, "*") || !strcmp(r->lang, lang);
}

static int ends_with(const char *s, size_t n, const char *suf)
{
	size_t k = strlen(suf);
	return n >= k && memcmp(s + n - k, suf, k) == 0;
}

/* XML attribute / text escaping for the doc format. */
static int put_escaped(struct loom_wt_buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *e = NULL;
		switch (s[i]) {
		case '&': e = "&amp;"; break;
		case '<': e = "&lt;"; break;
		case '>': e = "&gt;"; break;
		case '"': e = "&quot;"; break;
		}
		if (e ? loom_wt_buf_add(b, e, strlen(e)) : loom_wt_buf_add(b, s + i, 1))
			return LOOM_ENOMEM;
	}
	return 0;
}

static int emit_jsonl(struct loom_wt_buf *b, const char *prefix, const char *id,
		      const char *revid, const struct loom_page *pg, const char *text, size_t len)
{
	char *url = NULL;
	if (asprintf(&url, "%s?curid=%s", prefix, id) < 0)
		return LOOM_ENOMEM;
	json_t *o = json_object();
	json_object_set_new(o, "id", json_string(id));
	json_object_set_new(o, "revid", json_string(revid));
	json_object_set_new(o, "url", json_string(url));
	json_object_set_new(o, "title", json_stringn(pg->title, pg->title_len));
	json_object_set_new(o, "text", json_stringn(text, len));
	if (pg->redirect)
		json_object_set_new(o, "redirect", json_string(pg->redirect_title));
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	free(url);
	int r = !s || loom_wt_buf_add(b, s, strlen(s)) || loom_wt_buf_add(b, "\n", 1);
	free(s);
	return r ? LOOM_ENOMEM : 0;
}

static int emit_doc(struct loom_wt_buf *b, const char *prefix, const char *id,
		    const struct loom_page *pg, const char *text, size_t len)
{
	char head[128];
	int r = 0;
	snprintf(head, sizeof head, "<doc id=\"%s\" url=\"", id);
	r |= loom_wt_buf_add(b, head, strlen(head));
	r |= put_escaped(b, prefix, strlen(prefix));
	snprintf(head, sizeof head, "?curid=%s\" title=\"", id);
	r |= loom_wt_buf_add(b, head, strlen(head));
	r |= put_escaped(b, pg->title, pg->title_len);
	if (pg->redirect) {
		r |= loom_wt_buf_add(b, "\" redirect=\"", 12);
		r |= put_escaped(b, pg->redirect_title, strlen(pg->redirect_title));
	}
	r |= loom_wt_buf_add(b, "\">\n", 3);
	r |= loom_wt_buf_add(b, pg->title, pg->title_len);
	r |= loom_wt_buf_add(b, "\n\n", 2);
	r |= loom_wt_buf_add(b, text, len);
	r |= loom_wt_buf_add(b, "\n</doc>\n", 8);
	return r ? LOOM_ENOMEM : 0;
}

static int emit(const struct loom_extract *x, const struct loom_dump_site *site,
		const struct loom_page *pg, const char *text, size_t len, struct loom_dump_out *out)
{
	struct loom_wt_buf *b = &out->buf;
	size_t start = b->len;
	char id[24], revid[24];
	snprintf(id, sizeof id, "%llu", (unsigned long long)pg->id);
	snprintf(revid, sizeof revid, "%llu", (unsigned long long)pg->revid);
	const char *prefix = site && site->url_prefix ? site->url_prefix : "";
	int nul = x->o.nul;
	switch (x->o.format) {
	case LOOM_EXTRACT_LINES:
		if (loom_wt_buf_reserve(b, len + 1))
			return LOOM_ENOMEM;
		for (size_t i = 0; i < len; i++)
			b->p[b->len + i] = text[i] == '\n' ? ' ' : text[i];
		b->len += len;
		b->p[b->len++] = nul ? '\0' : '\n';
		break;
	case LOOM_EXTRACT_TEXT:
		if (loom_wt_buf_add(b, text, len) ||
		    loom_wt_buf_add(b, nul ? "\0" : "\n\n", nul ? 1 : 2))
			return LOOM_ENOMEM;
		break;
	case LOOM_EXTRACT_JSONL:
		if (emit_jsonl(b, prefix, id, revid, pg, text, len))
			return LOOM_ENOMEM;
		break;
	case LOOM_EXTRACT_DOC:
		if (emit_doc(b, prefix, id, pg, text, len))
			return LOOM_ENOMEM;
		break;
	}
	out->stat[LOOM_EXTRACT_S_ARTICLES]++;
	out->stat[LOOM_EXTRACT_S_BYTES_OUT] += b->len - start;
	return 0;
}

/* Tell a skipped page: "page ID 'TITLE'" and the rest of fmt. */
static void note(const struct loom_extract *x, int level, const struct loom_page *pg,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void note(const struct loom_extract *x, int level, const struct loom_page *pg,
		 const char *fmt, ...)
{
	char *rest = NULL, *msg = NULL;
	va_list ap;
	if (!x->o.note || (level == LOOM_EXTRACT_INFO && !x->o.notes_info))
		return;
	va_start(ap, fmt);
	int n = vasprintf(&rest, fmt, ap);
	va_end(ap);
	if (n >= 0 && asprintf(&msg, "page %llu '%.*s'%s", (unsigned long long)pg->id,
			       (int)pg->title_len, pg->title, rest) >= 0)
		x->o.note(x->o.note_ud, level, msg);
	free(rest);
	free(msg);
}

/* The worker's cleaner, made on its first page: the dump's own names for
 * File (6), Category (14), Media (-2), then the well-known ones of its
 * language (namespaces.tsv) and its disambiguation templates
 * (disambiguation.tsv). */
static int worker_setup(const struct loom_extract *x, struct worker *w,
			const struct loom_dump_site *site)
{
	w->wt = loom_wikitext_new(&x->o.wopts);
	if (!w->wt)
		return LOOM_ENOMEM;
	static const int64_t drop_ns[] = { 6, 14, -2 };
	for (size_t i = 0; i < 3; i++) {
		const char *n = loom_dump_ns_name(site, drop_ns[i]);
		if (loom_wikitext_drop_prefix(w->wt, n, strlen(n)))
			return LOOM_ENOMEM;
	}
	w->lang = dump_lang(x, site);
	for (size_t i = 0; i < x->nrows; i++) {
		const struct wiki_row *r = &x->rows[i];
		if (!row_applies(r, w->lang))
			continue;
		if ((r->kind == ROW_NS && loom_wikitext_drop_prefix(w->wt, r->text, strlen(r->text))) ||
		    (r->kind == ROW_TEMPLATE &&
		     loom_wikitext_disambig_template(w->wt, r->text, strlen(r->text))))
			return LOOM_ENOMEM;
	}
	return 0;
}

/* Whether the page is told and counted away before cleaning. */
static int skip_raw(const struct loom_extract *x, const struct loom_page *pg,
		    struct loom_dump_out *out)
{
	if (!keep_ns(x, pg->ns)) {
		out->stat[LOOM_EXTRACT_S_NS]++;
		note(x, LOOM_EXTRACT_INFO, pg, ": namespace %lld: skipped", (long long)pg->ns);
		return 1;
	}
	if (pg->redirect) {
		out->stat[LOOM_EXTRACT_S_REDIRECTS]++;
		if (!x->o.keep_redirects) {
			note(x, LOOM_EXTRACT_INFO, pg, ": redirect to '%s': skipped", pg->redirect_title);
			return 1;
		}
		out->stat[LOOM_EXTRACT_S_KEPT_REDIRECTS]++;
		return 0;
	}
	if (!pg->has_text) {
		out->stat[LOOM_EXTRACT_S_NOTEXT]++;
		note(x, LOOM_EXTRACT_WARN, pg, " (line %llu) has no <text>: skipped",
		     (unsigned long long)pg->line);
		return 1;
	}
	if (pg->too_large) {
		char a[32];
		out->stat[LOOM_EXTRACT_S_TOO_LARGE]++;
		note(x, LOOM_EXTRACT_WARN, pg,
		     " (line %llu): %s of wikitext, over --max-page-size: skipped",
		     (unsigned long long)pg->line, loom_fmt_bytes(pg->text_size, a, sizeof a));
		return 1;
	}
	return 0;
}

int loom_extract_page(void *ctx, int worker, const struct loom_dump_site *site,
		      const struct loom_page *pg, struct loom_dump_out *out)
{
	struct loom_extract *x = ctx;
	struct worker *w = &x->w[worker];
	if (skip_raw(x, pg, out))
		return 0;
	if (pg->redirect)
		return emit(x, site, pg, pg->redirect_title, strlen(pg->redirect_title), out);
	if (!w->wt && worker_setup(x, w, site))
		return LOOM_ENOMEM;
	struct loom_wikitext_info info;
	w->text.len = 0;
	if (loom_wikitext_clean(w->wt, pg->text, pg->text_len, &w->text, &info))
		return LOOM_ENOMEM;
	int dab = info.disambiguation;
	for (size_t i = 0; !dab && i < x->nrows; i++)
		dab = x->rows[i].kind == ROW_TITLE && row_applies(&x->rows[i], w->lang) &&
		      ends_with(pg->title, pg->title_len, x->rows[i].text);
	if (dab) {
		out->stat[LOOM_EXTRACT_S_DAB]++;
		if (x->o.skip_dab) {
			note(x, LOOM_EXTRACT_INFO, pg, ": disambiguation: skipped");
			return 0;
		}
	}
	if (info.chars == 0 || info.chars < x->o.min_length) {
		out->stat[LOOM_EXTRACT_S_SHORT]++;
		if (info.chars == 0)
			note(x, LOOM_EXTRACT_INFO, pg, ": empty after cleaning: skipped");
		else
			note(x, LOOM_EXTRACT_INFO, pg, ": %llu characters, under --min-length: skipped",
			     (unsigned long long)info.chars);
		return 0;
	}
	return emit(x, site, pg, w->text.p, w->text.len, out);
}

void loom_extract_summary(const struct loom_extract_opts *o, const struct loom_dump_stats *st,
			  double seconds, int incomplete, char *buf, size_t n)
{
	char a[32], b[32], c[32];
	const uint64_t *s = st->stat;
	snprintf(buf, n,
		 "%llu pages seen, %llu articles written, %llu redirects%s, "
		 "%llu skipped by namespace, %llu disambiguation%s, %llu empty or short, "
		 "%llu without text, %llu too large, %s in (%s XML), %s out, %llu invalid UTF-8, "
		 "%.2f s%s%s",
		 (unsigned long long)st->pages, (unsigned long long)s[LOOM_EXTRACT_S_ARTICLES],
		 (unsigned long long)s[LOOM_EXTRACT_S_REDIRECTS], o->keep_redirects ? " (kept)" : "",
		 (unsigned long long)s[LOOM_EXTRACT_S_NS], (unsigned long long)s[LOOM_EXTRACT_S_DAB],
		 o->skip_dab ? " skipped" : "", (unsigned long long)s[LOOM_EXTRACT_S_SHORT],
		 (unsigned long long)s[LOOM_EXTRACT_S_NOTEXT],
		 (unsigned long long)s[LOOM_EXTRACT_S_TOO_LARGE],
		 loom_fmt_bytes(st->bytes_in, a, sizeof a), loom_fmt_bytes(st->bytes_xml, b, sizeof b),
		 loom_fmt_bytes(s[LOOM_EXTRACT_S_BYTES_OUT], c, sizeof c),
		 (unsigned long long)st->invalid_utf8, seconds,
		 st->multistream ? ", multistream" : "", incomplete ? ", INCOMPLETE" : "");
}
