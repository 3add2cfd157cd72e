/* loom-extract - MediaWiki XML dump -> clean article text (lines, text,
 * jsonl, doc), in dump order, with parallel workers. */
#include <archive.h>
#include <expat.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "loom_dump.h"
#include "loom_file.h"
#include "loom_wikitext.h"

enum { FMT_LINES, FMT_TEXT, FMT_JSONL, FMT_DOC };
enum { S_ARTICLES, S_REDIRECTS, S_NS, S_DAB, S_SHORT, S_NOTEXT, S_BYTES_OUT, S_KEPT_REDIRECTS,
       S_TOO_LARGE };

#define MAX_NS 64

struct worker {
	struct loom_wikitext *wt;
	struct loom_wt_buf text;
	const char *lang;       /* rows of this language apply (NULL: all) */
};

/* A row of share/wiki/disambiguation.tsv or namespaces.tsv. */
enum { ROW_TEMPLATE, ROW_TITLE, ROW_NS };
struct wiki_row {
	char *lang;
	int kind;
	char *text;
};

struct ctx {
	int format, nul, keep_redirects, skip_dab;
	uint64_t min_length;
	struct loom_wikitext_opts wopts;
	int64_t ns[MAX_NS];
	int nns;
	struct wiki_row *rows;  /* the share/wiki tables */
	size_t nrows;
	struct worker *w;
	struct loom_outfile out;
	struct loom_dump *dump;
	struct cli_progress prog;
	double t0;
};

static int keep_ns(const struct ctx *c, int64_t ns)
{
	for (int i = 0; i < c->nns; i++)
		if (c->ns[i] == ns)
			return 1;
	return 0;
}

/* Read share/wiki/NAME: "LANG<TAB>KIND<TAB>TEXT" lines (KIND: template or
 * title in disambiguation.tsv, a namespace number 6, 14 or -2 in
 * namespaces.tsv); '#' lines are comments. */
static void load_rows(struct ctx *c, const char *name, int ns_table)
{
	char rel[64], path[4096], *buf;
	size_t len;
	struct loom_err err;
	snprintf(rel, sizeof rel, "wiki/%s", name);
	if (loom_share_path(rel, path, sizeof path))
		cli_die("share/%s not found (set LOOM_SHARE)", rel);
	if (loom_file_read_bounded(path, LOOM_FILE_MAX_LIST, &buf, &len, &err))
		cli_die("%s", err.msg);
	size_t lineno = 0;
	for (char *line = buf, *next; line < buf + len; line = next) {
		char *nl = memchr(line, '\n', (size_t)(buf + len - line));
		next = nl ? nl + 1 : buf + len;
		if (nl)
			*nl = 0;
		lineno++;
		if (!*line || *line == '#')
			continue;
		char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		if (!t2 || !t2[1] || strchr(t2 + 1, '\t'))
			cli_die("%s line %zu: want LANG<TAB>%s<TAB>NAME", path, lineno,
				ns_table ? "NAMESPACE" : "template|title");
		*t1 = *t2 = 0;
		int kind = ROW_NS;
		if (!ns_table && !strcmp(t1 + 1, "template"))
			kind = ROW_TEMPLATE;
		else if (!ns_table && !strcmp(t1 + 1, "title"))
			kind = ROW_TITLE;
		else if (!ns_table || (strcmp(t1 + 1, "6") && strcmp(t1 + 1, "14") && strcmp(t1 + 1, "-2")))
			cli_die("%s line %zu: '%s' is not %s", path, lineno, t1 + 1,
				ns_table ? "a namespace 6, 14 or -2" : "template or title");
		struct wiki_row *r = realloc(c->rows, (c->nrows + 1) * sizeof *r);
		if (!r)
			cli_die("out of memory");
		c->rows = r;
		r += c->nrows++;
		r->kind = kind;
		r->lang = strdup(line);
		r->text = strdup(t2 + 1);
		if (!r->lang || !r->text)
			cli_die("out of memory");
	}
	free(buf);
}

/* The language of the rows that apply to a dump: its dbname without
 * "wiki" (dewiki -> de) when the tables have rows for it, else NULL (all
 * rows apply). */
static const char *dump_lang(const struct ctx *c, const struct loom_dump_site *site)
{
	const char *db = site && site->dbname ? site->dbname : "";
	size_t n = strlen(db);
	if (n <= 4 || strcmp(db + n - 4, "wiki"))
		return NULL;
	for (size_t i = 0; i < c->nrows; i++)
		if (strlen(c->rows[i].lang) == n - 4 && !memcmp(c->rows[i].lang, db, n - 4))
			return c->rows[i].lang;
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

static int emit(struct ctx *c, const struct loom_dump_site *site, const struct loom_page *pg,
		const char *text, size_t len, struct loom_dump_out *out)
{
	struct loom_wt_buf *b = &out->buf;
	size_t start = b->len;
	char id[24], revid[24];
	snprintf(id, sizeof id, "%llu", (unsigned long long)pg->id);
	snprintf(revid, sizeof revid, "%llu", (unsigned long long)pg->revid);
	const char *prefix = site && site->url_prefix ? site->url_prefix : "";
	switch (c->format) {
	case FMT_LINES:
		if (loom_wt_buf_reserve(b, len + 1))
			return LOOM_ENOMEM;
		for (size_t i = 0; i < len; i++)
			b->p[b->len + i] = text[i] == '\n' ? ' ' : text[i];
		b->len += len;
		b->p[b->len++] = c->nul ? '\0' : '\n';
		break;
	case FMT_TEXT:
		if (loom_wt_buf_add(b, text, len) ||
		    loom_wt_buf_add(b, c->nul ? "\0" : "\n\n", c->nul ? 1 : 2))
			return LOOM_ENOMEM;
		break;
	case FMT_JSONL: {
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
		if (!s || loom_wt_buf_add(b, s, strlen(s)) || loom_wt_buf_add(b, "\n", 1)) {
			free(s);
			return LOOM_ENOMEM;
		}
		free(s);
		break;
	}
	case FMT_DOC: {
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
		if (r)
			return LOOM_ENOMEM;
		break;
	}
	}
	out->stat[S_ARTICLES]++;
	out->stat[S_BYTES_OUT] += b->len - start;
	return 0;
}

static int page_fn(void *vc, int worker, const struct loom_dump_site *site,
		   const struct loom_page *pg, struct loom_dump_out *out)
{
	struct ctx *c = vc;
	struct worker *w = &c->w[worker];
	if (!keep_ns(c, pg->ns)) {
		out->stat[S_NS]++;
		cli_info("page %llu '%.*s': namespace %lld: skipped", (unsigned long long)pg->id,
			 (int)pg->title_len, pg->title, (long long)pg->ns);
		return 0;
	}
	if (pg->redirect) {
		out->stat[S_REDIRECTS]++;
		if (!c->keep_redirects) {
			cli_info("page %llu '%.*s': redirect to '%s': skipped",
				 (unsigned long long)pg->id, (int)pg->title_len, pg->title,
				 pg->redirect_title);
			return 0;
		}
		out->stat[S_KEPT_REDIRECTS]++;
		return emit(c, site, pg, pg->redirect_title, strlen(pg->redirect_title), out);
	}
	if (!pg->has_text) {
		out->stat[S_NOTEXT]++;
		cli_warn("page %llu '%.*s' (line %llu) has no <text>: skipped",
			 (unsigned long long)pg->id, (int)pg->title_len, pg->title,
			 (unsigned long long)pg->line);
		return 0;
	}
	if (pg->too_large) {
		char a[32];
		out->stat[S_TOO_LARGE]++;
		cli_warn("page %llu '%.*s' (line %llu): %s of wikitext, over --max-page-size: skipped",
			 (unsigned long long)pg->id, (int)pg->title_len, pg->title,
			 (unsigned long long)pg->line, cli_bytes(pg->text_size, a, sizeof a));
		return 0;
	}
	if (!w->wt) {
		w->wt = loom_wikitext_new(&c->wopts);
		if (!w->wt)
			return LOOM_ENOMEM;
		/* the dump's own names for File (6), Category (14), Media (-2),
		 * then the well-known ones of its language (namespaces.tsv) and
		 * its disambiguation templates (disambiguation.tsv) */
		static const int64_t drop_ns[] = { 6, 14, -2 };
		for (size_t i = 0; i < 3; i++) {
			const char *n = loom_dump_ns_name(site, drop_ns[i]);
			if (loom_wikitext_drop_prefix(w->wt, n, strlen(n)))
				return LOOM_ENOMEM;
		}
		w->lang = dump_lang(c, site);
		for (size_t i = 0; i < c->nrows; i++) {
			const struct wiki_row *r = &c->rows[i];
			if (!row_applies(r, w->lang))
				continue;
			if ((r->kind == ROW_NS &&
			     loom_wikitext_drop_prefix(w->wt, r->text, strlen(r->text))) ||
			    (r->kind == ROW_TEMPLATE &&
			     loom_wikitext_disambig_template(w->wt, r->text, strlen(r->text))))
				return LOOM_ENOMEM;
		}
	}
	struct loom_wikitext_info info;
	w->text.len = 0;
	if (loom_wikitext_clean(w->wt, pg->text, pg->text_len, &w->text, &info))
		return LOOM_ENOMEM;
	int dab = info.disambiguation;
	for (size_t i = 0; !dab && i < c->nrows; i++)
		dab = c->rows[i].kind == ROW_TITLE && row_applies(&c->rows[i], w->lang) &&
		      ends_with(pg->title, pg->title_len, c->rows[i].text);
	if (dab) {
		out->stat[S_DAB]++;
		if (c->skip_dab) {
			cli_info("page %llu '%.*s': disambiguation: skipped",
				 (unsigned long long)pg->id, (int)pg->title_len, pg->title);
			return 0;
		}
	}
	if (info.chars == 0 || info.chars < c->min_length) {
		out->stat[S_SHORT]++;
		if (info.chars == 0)
			cli_info("page %llu '%.*s': empty after cleaning: skipped",
				 (unsigned long long)pg->id, (int)pg->title_len, pg->title);
		else
			cli_info("page %llu '%.*s': %llu characters, under --min-length: skipped",
				 (unsigned long long)pg->id, (int)pg->title_len, pg->title,
				 (unsigned long long)info.chars);
		return 0;
	}
	return emit(c, site, pg, w->text.p, w->text.len, out);
}

static void show_progress(struct ctx *c, int force)
{
	if (!c->prog.enabled || (!force && !cli_progress_due(&c->prog)))
		return;
	struct loom_dump_stats st;
	char a[32], b[32];
	loom_dump_stats(c->dump, &st);
	double dt = loom_now() - c->t0, rate = dt > 0 ? st.bytes_in / dt : 0;
	char d[32], eta[40] = "";
	if (st.size_in && rate > 0 && st.bytes_in <= st.size_in)
		snprintf(eta, sizeof eta, ", ETA %s",
			 cli_duration((st.size_in - st.bytes_in) / rate, d, sizeof d));
	cli_progress_show(&c->prog, "%llu pages, %llu articles, %s of %s, %.1f MB/s%s",
			  (unsigned long long)st.pages, (unsigned long long)st.stat[S_ARTICLES],
			  cli_bytes(st.bytes_in, a, sizeof a),
			  st.size_in ? cli_bytes(st.size_in, b, sizeof b) : "?", rate / 1e6, eta);
}

static int write_fn(void *vc, const struct loom_dump_out *out)
{
	struct ctx *c = vc;
	if (out->buf.len && loom_outfile_write(&c->out, out->buf.p, out->buf.len))
		return LOOM_EIO;
	show_progress(c, 0);
	return 0;
}

static void parse_namespaces(struct ctx *c, const char *arg)
{
	char *s = strdup(arg), *save = NULL;
	c->nns = 0;
	for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		int neg = t[0] == '-';
		if (loom_parse_u64(t + neg, 0, 1u << 30, &v))
			cli_usage_error("--namespaces: '%s' is not a namespace number", t);
		if (c->nns == MAX_NS)
			cli_usage_error("--namespaces: at most %d", MAX_NS);
		c->ns[c->nns++] = neg ? -(int64_t)v : (int64_t)v;
	}
	free(s);
	if (!c->nns)
		cli_usage_error("--namespaces: empty list");
}

static struct ctx c = { .nns = 1, .wopts.valid_utf8 = 1 }; /* loom_dump repairs UTF-8 before expat */
static const char *output = "-";
static struct loom_dump_opts dopts = { .max_text = 8u << 20 };

static void on_format(const char *opt, const char *arg)
{
	(void)opt;
	if (!strcmp(arg, "lines")) c.format = FMT_LINES;
	else if (!strcmp(arg, "text")) c.format = FMT_TEXT;
	else if (!strcmp(arg, "jsonl")) c.format = FMT_JSONL;
	else if (!strcmp(arg, "doc")) c.format = FMT_DOC;
	else cli_usage_error("--format: '%s' is not lines, text, jsonl or doc", arg);
}

static void on_namespaces(const char *opt, const char *arg)
{
	(void)opt;
	parse_namespaces(&c, arg);
}

static void on_max_page_size(const char *opt, const char *arg)
{
	dopts.max_text = cli_size(opt, arg);
	if (dopts.max_text < 1024 || dopts.max_text > (1u << 30))
		cli_usage_error("--max-page-size: '%s' is not between 1K and 1G", arg);
}

static const struct cli_opt opts[] = {
	OPT_STRING('o', "output", &output, "FILE", "write to FILE atomically (default: stdout)"),
	OPT_ENUM_CALLBACK('f', "format", on_format, "FMT", "lines text jsonl doc",
			  "lines (one article per line, default), text\n"
			  "(paragraph lines, articles end with an empty\n"
			  "line), jsonl ({id,revid,url,title,text}), doc\n"
			  "(WikiExtractor's <doc id url title> ... </doc>)"),
	OPT_BOOL('z', "null", &c.nul, "lines/text: end each article with NUL instead"),
	OPT_CALLBACK('n', "namespaces", on_namespaces, "LIST", "namespaces to keep, e.g. 0,14 (default: 0)"),
	OPT_BOOL(0, "keep-redirects", &c.keep_redirects, "list redirects too (text = the target title)"),
	OPT_BOOL(0, "skip-disambiguation", &c.skip_dab, "drop disambiguation pages"),
	OPT_U64(0, "min-length", &c.min_length, "N", 0, UINT64_MAX, "drop articles shorter than N characters"),
	OPT_BOOL(0, "keep-tables", &c.wopts.keep_tables, "keep table cell text (a row per line)"),
	OPT_BOOL(0, "headings", &c.wopts.headings, "keep section headings as lines"),
	OPT_CALLBACK(0, "max-page-size", on_max_page_size, "SIZE",
		     "skip pages with more wikitext than SIZE\n"
		     "(default: 8M, 4x MediaWiki's 2 MiB limit on a\n"
		     "revision; at most 1G); counted as too large"),
	OPT_INT('j', "threads", &dopts.threads, "N", 1, 256, "worker threads (default: CPUs online)"),
	OPT_ALIAS(0, "jobs", "threads"),
	OPT_STRING(0, "index", &dopts.index, "FILE",
		   "multistream index (default: NAME-index.txt.bz2\n"
		   "beside NAME.xml.bz2 if it exists)"),
	OPT_BOOL(0, "no-index", &dopts.no_index, "read a multistream dump as one stream"),
	OPT_PROGRESS(NULL, "progress even when stderr is not a terminal"),
	OPT_VERBOSE("each page skipped, with its id, title and reason\n"
		    "(namespace, redirect, disambiguation, empty or\n"
		    "short; too large and no text are always told)"),
	OPT_QUIET(NULL, "no summary line (and no -v lines)"),
	OPT_END()
};

static const char *versions(void)
{
	static char ver[160];
	snprintf(ver, sizeof ver, "%s, expat %d.%d.%d, jansson %s", archive_version_string(),
		 XML_MAJOR_VERSION, XML_MINOR_VERSION, XML_MICRO_VERSION, JANSSON_VERSION);
	return ver;
}

static const struct cli_cmd cmd = {
	.prog = "loom-extract",
	.usage = "usage: loom-extract [options] [DUMP.xml.bz2|.xml.gz|.xml|-]\n"
		 "Extract clean article text from a MediaWiki XML dump (stdin if no file).\n",
	.opts = opts,
	.footer = "Templates are removed, not expanded.  A summary line goes to stderr.  A\n"
		  "truncated or corrupt dump: the articles before the damage are written\n"
		  "(with -o to FILE.incomplete, FILE is untouched) and the exit status is 1.\n",
	.version = versions,
};

/* Commit the output; after a dump error (r), as FILE.incomplete.  Returns
 * the exit status; *incomplete: the name written, or NULL. */
static int finish_output(int r, const struct loom_dump_stats *st, char **incomplete)
{
	*incomplete = NULL;
	if (!r) {
		if (loom_outfile_commit(&c.out))
			cli_die("%s", loom_outfile_error(&c.out));
		return 0;
	}
	if (r == LOOM_EIO && c.out.err.msg[0]) {
		cli_warn("%s", loom_outfile_error(&c.out));
		loom_outfile_abort(&c.out);
		return 1;
	}
	cli_warn("%s", loom_dump_error(c.dump));
	if (c.out.tmp) { /* a regular file: FILE.incomplete */
		if (asprintf(incomplete, "%s.incomplete", output) < 0)
			cli_die("out of memory");
		free(c.out.path);
		c.out.path = strdup(*incomplete);
	}
	if (loom_outfile_commit(&c.out))
		cli_warn("%s", loom_outfile_error(&c.out));
	cli_warn("output is INCOMPLETE: %llu articles before the error%s%s",
		 (unsigned long long)st->stat[S_ARTICLES],
		 *incomplete ? " written to " : "", *incomplete ? *incomplete : "");
	return 1;
}

static void print_summary(const struct loom_dump_stats *st, int r)
{
	char a[32], b[32], o[32];
	cli_summary(
		"%llu pages seen, %llu articles written, %llu redirects%s, "
		"%llu skipped by namespace, %llu disambiguation%s, %llu empty or short, "
		"%llu without text, %llu too large, %s in (%s XML), %s out, %llu invalid UTF-8, "
		"%.2f s%s%s",
		(unsigned long long)st->pages,
		(unsigned long long)st->stat[S_ARTICLES],
		(unsigned long long)st->stat[S_REDIRECTS], c.keep_redirects ? " (kept)" : "",
		(unsigned long long)st->stat[S_NS], (unsigned long long)st->stat[S_DAB],
		c.skip_dab ? " skipped" : "", (unsigned long long)st->stat[S_SHORT],
		(unsigned long long)st->stat[S_NOTEXT], (unsigned long long)st->stat[S_TOO_LARGE],
		cli_bytes(st->bytes_in, a, sizeof a),
		cli_bytes(st->bytes_xml, b, sizeof b),
		cli_bytes(st->stat[S_BYTES_OUT], o, sizeof o),
		(unsigned long long)st->invalid_utf8, loom_now() - c.t0,
		st->multistream ? ", multistream" : "", r ? ", INCOMPLETE" : "");
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	dopts.threads = ncpu < 1 ? 1 : ncpu > 64 ? 64 : (int)ncpu;
	cli_parse(&cmd, argc, argv);
	if (argc - optind > 1)
		cli_usage_error("one dump at a time (got %d)", argc - optind);
	if (c.nul && (c.format == FMT_JSONL || c.format == FMT_DOC))
		cli_usage_error("-z applies to --format lines and text only");
	const char *input = optind < argc ? argv[optind] : "-";
	if (!strcmp(input, "-") && isatty(0))
		cli_usage_error("no dump given and stdin is a terminal");

	load_rows(&c, "disambiguation.tsv", 0);
	load_rows(&c, "namespaces.tsv", 1);
	struct loom_err err = { 0 };
	c.dump = loom_dump_open(input, &dopts, &err);
	if (!c.dump)
		cli_die("%s", err.msg);
	c.w = calloc(dopts.threads, sizeof *c.w);
	if (!c.w)
		cli_die("out of memory");
	if (loom_outfile_open(&c.out, output))
		cli_die("%s", loom_outfile_error(&c.out));
	cli_progress_init(&c.prog, cli_force_progress);
	c.t0 = loom_now();

	int r = loom_dump_run(c.dump, page_fn, write_fn, &c);
	show_progress(&c, 1);
	cli_progress_done(&c.prog);
	struct loom_dump_stats st;
	loom_dump_stats(c.dump, &st);
	char *incomplete;
	int status = finish_output(r, &st, &incomplete);
	print_summary(&st, r);
	for (int i = 0; i < dopts.threads; i++) {
		loom_wikitext_free(c.w[i].wt);
		loom_wt_buf_free(&c.w[i].text);
	}
	for (size_t i = 0; i < c.nrows; i++) {
		free(c.rows[i].lang);
		free(c.rows[i].text);
	}
	free(c.rows);
	free(c.w);
	free(incomplete);
	loom_dump_free(c.dump);
	return status;
}
