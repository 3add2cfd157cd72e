/* loom_dump.c - see loom_dump.h */
#include "loom_dump.h"

#include <archive.h>
#include <errno.h>
#include <expat.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom_file.h"

#define READ_BLOCK (1u << 20)

/* ==================================================================== */
/* site info */

static void site_release(struct loom_dump_site *s)
{
	free(s->sitename);
	free(s->dbname);
	free(s->base);
	free(s->url_prefix);
	for (size_t i = 0; i < s->nns; i++)
		free(s->ns[i].name);
	free(s->ns);
	memset(s, 0, sizeof *s);
}

static int site_copy(struct loom_dump_site *dst, const struct loom_dump_site *src)
{
	memset(dst, 0, sizeof *dst);
	dst->sitename = strdup(src->sitename ? src->sitename : "");
	dst->dbname = strdup(src->dbname ? src->dbname : "");
	dst->base = strdup(src->base ? src->base : "");
	dst->url_prefix = strdup(src->url_prefix ? src->url_prefix : "");
	dst->ns = calloc(src->nns + 1, sizeof *dst->ns);
	if (!dst->sitename || !dst->dbname || !dst->base || !dst->url_prefix || !dst->ns)
		return LOOM_ENOMEM;
	for (size_t i = 0; i < src->nns; i++) {
		dst->ns[i].key = src->ns[i].key;
		dst->ns[i].name = strdup(src->ns[i].name);
		if (!dst->ns[i].name)
			return LOOM_ENOMEM;
		dst->nns++;
	}
	return 0;
}

const char *loom_dump_ns_name(const struct loom_dump_site *s, int64_t key)
{
	for (size_t i = 0; s && i < s->nns; i++)
		if (s->ns[i].key == key)
			return s->ns[i].name;
	return "";
}

/* ==================================================================== */
/* page parser */

enum field {
	F_NONE, F_TITLE, F_NS, F_ID, F_REVID, F_TEXT,
	F_SITENAME, F_DBNAME, F_BASE, F_NSNAME,
};

struct loom_pagexml {
	XML_Parser xp;
	int synthetic, started, done;
	int depth, page_depth, in_rev, in_site, site_done;
	enum field field;
	struct loom_wt_buf cur;        /* character data of the field */
	struct loom_wt_buf title, text, rtitle;
	struct loom_page pg;
	int64_t ns_key;
	struct loom_dump_site site;
	loom_pagexml_fn page_fn;
	loom_siteinfo_fn site_fn;
	void *ctx;
	int cb_err;                    /* error returned by a callback */
	size_t max_text;               /* 0: no limit */
	uint64_t pages;
	struct loom_err err;
};

static int parse_u64(const char *s, size_t n, uint64_t *v)
{
	while (n && (*s == ' ' || *s == '\n' || *s == '\t'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t'))
		n--;
	if (!n || n > 19)
		return LOOM_EFORMAT;
	uint64_t x = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return LOOM_EFORMAT;
		x = x * 10 + (s[i] - '0');
	}
	*v = x;
	return 0;
}

static void px_fail(struct loom_pagexml *px, int code)
{
	if (!px->cb_err)
		px->cb_err = code;
	XML_StopParser(px->xp, XML_FALSE);
}

static void XMLCALL px_start(void *u, const XML_Char *name, const XML_Char **attr)
{
	struct loom_pagexml *px = u;
	int d = ++px->depth;
	if (px->page_depth) {
		int rel = d - px->page_depth;
		if (rel == 1) {
			if (!strcmp(name, "title"))
				px->field = F_TITLE;
			else if (!strcmp(name, "ns"))
				px->field = F_NS;
			else if (!strcmp(name, "id"))
				px->field = F_ID;
			else if (!strcmp(name, "revision"))
				px->in_rev = 1;
			else if (!strcmp(name, "redirect")) {
				px->pg.redirect = 1;
				px->rtitle.len = 0;
				for (int i = 0; attr[i]; i += 2)
					if (!strcmp(attr[i], "title") &&
					    loom_wt_buf_add(&px->rtitle, attr[i + 1], strlen(attr[i + 1])))
						px_fail(px, LOOM_ENOMEM);
			}
		} else if (rel == 2 && px->in_rev) {
			if (!strcmp(name, "id"))
				px->field = F_REVID;
			else if (!strcmp(name, "text")) {
				px->field = F_TEXT;
				px->pg.has_text = 1;
				px->text.len = 0; /* last revision wins */
				px->pg.text_size = 0;
				px->pg.too_large = 0;
			}
		}
		px->cur.len = 0;
		return;
	}
	if (!strcmp(name, "page")) {
		px->page_depth = d;
		memset(&px->pg, 0, sizeof px->pg);
		px->pg.line = XML_GetCurrentLineNumber(px->xp);
		px->title.len = px->text.len = px->rtitle.len = 0;
		px->in_rev = 0;
	} else if (!strcmp(name, "siteinfo") && !px->site_done) {
		px->in_site = d;
	} else if (px->in_site) {
		px->cur.len = 0;
		if (d == px->in_site + 1) {
			if (!strcmp(name, "sitename"))
				px->field = F_SITENAME;
			else if (!strcmp(name, "dbname"))
				px->field = F_DBNAME;
			else if (!strcmp(name, "base"))
				px->field = F_BASE;
		} else if (d == px->in_site + 2 && !strcmp(name, "namespace")) {
			px->field = F_NSNAME;
			px->ns_key = 0;
			for (int i = 0; attr[i]; i += 2)
				if (!strcmp(attr[i], "key"))
					px->ns_key = strtoll(attr[i + 1], NULL, 10);
		}
	}
}

static char *dup_buf(const struct loom_wt_buf *b)
{
	char *s = malloc(b->len + 1);
	if (s) {
		if (b->len) /* an empty element leaves b->p NULL */
			memcpy(s, b->p, b->len);
		s[b->len] = 0;
	}
	return s;
}

static void site_end(struct loom_pagexml *px)
{
	struct loom_dump_site *s = &px->site;
	if (!s->sitename)
		s->sitename = strdup("");
	if (!s->dbname)
		s->dbname = strdup("");
	if (!s->base)
		s->base = strdup("");
	if (!s->sitename || !s->dbname || !s->base)
		return px_fail(px, LOOM_ENOMEM);
	const char *slash = strrchr(s->base, '/');
	size_t n = slash && slash > s->base && slash[-1] != '/' ? (size_t)(slash - s->base) : 0;
	s->url_prefix = strndup(s->base, n);
	if (!s->url_prefix)
		return px_fail(px, LOOM_ENOMEM);
	px->site_done = 1;
	if (px->site_fn)
		px->site_fn(px->ctx, s);
}

static void XMLCALL px_end(void *u, const XML_Char *name)
{
	struct loom_pagexml *px = u;
	int d = px->depth--;
	enum field f = px->field;
	px->field = F_NONE;
	if (px->page_depth) {
		int rel = d - px->page_depth;
		if (rel == 0) {
			struct loom_page *pg = &px->pg;
			if (loom_wt_buf_reserve(&px->title, 1) || loom_wt_buf_reserve(&px->rtitle, 1) ||
			    loom_wt_buf_reserve(&px->text, 1))
				return px_fail(px, LOOM_ENOMEM);
			px->title.p[px->title.len] = 0;
			px->rtitle.p[px->rtitle.len] = 0;
			px->text.p[px->text.len] = 0;
			pg->title = px->title.p;
			pg->title_len = px->title.len;
			pg->redirect_title = px->rtitle.p;
			pg->text = px->text.p;
			pg->text_len = px->text.len;
			px->page_depth = 0;
			px->pages++;
			int r = px->page_fn ? px->page_fn(px->ctx, pg) : 0;
			if (r)
				px_fail(px, r);
			return;
		}
		if (rel == 1 && !strcmp(name, "revision"))
			px->in_rev = 0;
		uint64_t v;
		switch (f) {
		case F_TITLE:
			if (loom_wt_buf_add(&px->title, px->cur.p, px->cur.len))
				px_fail(px, LOOM_ENOMEM);
			break;
		case F_NS:
			if (!parse_u64(px->cur.p, px->cur.len, &v)) {
				px->pg.ns = (int64_t)v;
				px->pg.has_ns = 1;
			} else if (px->cur.len > 1 && px->cur.p[0] == '-' &&
				   !parse_u64(px->cur.p + 1, px->cur.len - 1, &v)) {
				px->pg.ns = -(int64_t)v;
				px->pg.has_ns = 1;
			}
			break;
		case F_ID:
			if (!parse_u64(px->cur.p, px->cur.len, &v))
				px->pg.id = v, px->pg.has_id = 1;
			break;
		case F_REVID:
			if (!parse_u64(px->cur.p, px->cur.len, &v))
				px->pg.revid = v;
			break;
		default:
			break;
		}
		return;
	}
	if (px->in_site) {
		struct loom_dump_site *s = &px->site;
		char **dst = f == F_SITENAME ? &s->sitename : f == F_DBNAME ? &s->dbname :
			     f == F_BASE ? &s->base : NULL;
		if (dst) {
			free(*dst);
			if (!(*dst = dup_buf(&px->cur)))
				px_fail(px, LOOM_ENOMEM);
		} else if (f == F_NSNAME) {
			struct loom_dump_ns *ns = realloc(s->ns, (s->nns + 1) * sizeof *ns);
			if (!ns)
				return px_fail(px, LOOM_ENOMEM);
			s->ns = ns;
			ns[s->nns].key = px->ns_key;
			if (!(ns[s->nns].name = dup_buf(&px->cur)))
				return px_fail(px, LOOM_ENOMEM);
			s->nns++;
		}
		if (d == px->in_site) {
			px->in_site = 0;
			site_end(px);
		}
	}
}

void loom_pagexml_set_max_text(struct loom_pagexml *px, size_t max)
{
	px->max_text = max;
}

static void XMLCALL px_chars(void *u, const XML_Char *s, int len)
{
	struct loom_pagexml *px = u;
	struct loom_wt_buf *b;
	if (px->field == F_NONE)
		return;
	b = px->field == F_TEXT ? &px->text : &px->cur;
	if (px->field != F_TEXT && b->len + len > (1u << 20))
		return; /* a title or an id is never that long */
	if (px->field == F_TEXT) {
		px->pg.text_size += len;
		if (px->max_text && px->pg.text_size > px->max_text) {
			px->pg.too_large = 1;
			px->text.len = 0;
			return;
		}
	}
	if (loom_wt_buf_add(b, s, len))
		px_fail(px, LOOM_ENOMEM);
}

struct loom_pagexml *loom_pagexml_new(int synthetic_root, loom_pagexml_fn page,
				      loom_siteinfo_fn site, void *ctx)
{
	struct loom_pagexml *px = calloc(1, sizeof *px);
	if (!px)
		return NULL;
	px->xp = XML_ParserCreate("UTF-8");
	if (!px->xp) {
		free(px);
		return NULL;
	}
	XML_SetUserData(px->xp, px);
	XML_SetElementHandler(px->xp, px_start, px_end);
	XML_SetCharacterDataHandler(px->xp, px_chars);
	px->synthetic = synthetic_root;
	px->page_fn = page;
	px->site_fn = site;
	px->ctx = ctx;
	return px;
}

void loom_pagexml_free(struct loom_pagexml *px)
{
	if (!px)
		return;
	XML_ParserFree(px->xp);
	loom_wt_buf_free(&px->cur);
	loom_wt_buf_free(&px->title);
	loom_wt_buf_free(&px->text);
	loom_wt_buf_free(&px->rtitle);
	site_release(&px->site);
	free(px);
}

const char *loom_pagexml_error(const struct loom_pagexml *px)
{
	return px->err.msg;
}

uint64_t loom_pagexml_pages(const struct loom_pagexml *px)
{
	return px->pages;
}

static int px_parse(struct loom_pagexml *px, const char *buf, size_t n, int final)
{
	if (px->done)
		return px->err.code ? px->err.code : LOOM_EINVAL;
	while (n || final) {
		int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
		int last = final && (size_t)chunk == n;
		if (XML_Parse(px->xp, buf, chunk, last) != XML_STATUS_OK) {
			px->done = 1;
			if (px->cb_err) {
				if (px->cb_err == LOOM_ENOMEM)
					return loom_err_set(&px->err, LOOM_ENOMEM, "out of memory");
				return loom_err_set(&px->err, px->cb_err, "stopped by the page function");
			}
			return loom_err_set(&px->err, LOOM_EFORMAT, "malformed XML at line %lu, column %lu: %s",
					    (unsigned long)XML_GetCurrentLineNumber(px->xp),
					    (unsigned long)XML_GetCurrentColumnNumber(px->xp) + 1,
					    XML_ErrorString(XML_GetErrorCode(px->xp)));
		}
		buf += chunk;
		n -= chunk;
		if (last)
			break;
	}
	return 0;
}

int loom_pagexml_feed(struct loom_pagexml *px, const char *buf, size_t n)
{
	if (!px->started) {
		px->started = 1;
		if (px->synthetic) {
			int r = px_parse(px, "<mediawiki>", 11, 0);
			if (r)
				return r;
		}
	}
	return px_parse(px, buf, n, 0);
}

int loom_pagexml_finish(struct loom_pagexml *px, int mode)
{
	int open_root_ok = mode == LOOM_PAGEXML_END_OPEN;
	int r = loom_pagexml_feed(px, "", 0);
	if (r)
		return r;
	if (px->page_depth)
		return loom_err_set(&px->err, LOOM_ETRUNC,
				    "XML ends inside a <page> (line %lu)",
				    (unsigned long)XML_GetCurrentLineNumber(px->xp));
	if (px->depth == 1 && (open_root_ok || px->synthetic)) {
		if (open_root_ok)
			return 0;
		if (mode == LOOM_PAGEXML_END_DOC)
			return loom_err_set(&px->err, LOOM_ETRUNC,
					    "the dump ends without </mediawiki> (truncated?)");
		return px_parse(px, "</mediawiki>", 12, 1);
	}
	return px_parse(px, "", 0, 1);
}

/* ==================================================================== */
/* engine */

struct job {
	uint64_t seq;
	/* single stream: a batch of pages */
	struct loom_wt_buf data;      /* titles, texts */
	struct prec *recs;
	size_t nrec, caprec;
	/* multistream: a bz2 stream */
	uint64_t off, end;
	struct block *xb_head, *xb_tail; /* decompressed blocks not parsed yet */
	int state;                    /* J_DECOMP, J_READY (decompressed) */
	int parsing;                  /* a worker parses it (maybe while the
				       * decompression is still running) */
	int last;                     /* the final job: nothing after it */
	int done;
	int err;                      /* error of this job (or of the input) */
	char *msg;
	struct loom_dump_out out;
	uint64_t pages, bytes_xml, invalid;
	struct job *next;
};

enum { J_DECOMP, J_READY };

struct prec {
	struct loom_page pg;
	size_t title, rtitle, text;   /* offsets in data */
};

struct block {
	struct loom_wt_buf b;
	int final;                    /* last block of the input */
	int err;                      /* error reading the input */
	char *msg;
	struct block *next;
};

struct loom_dump {
	char *path, *index;
	int fd;
	uint64_t size;                /* input file size (0 if unknown) */
	struct loom_dump_opts opts;
	struct loom_dump_site site;
	int have_site;
	uint64_t *offs;               /* multistream offsets */
	size_t noffs;
	uint64_t far_off, far_line; /* the least offset >= size, its index line */

	pthread_mutex_t mu;
	pthread_cond_t cv;            /* any state change */
	int stop;                     /* writer failed: everyone stops */
	/* jobs */
	struct job *todo_head, *todo_tail; /* single stream: parsed batches */
	struct job **slots;           /* window of jobs by seq % window */
	size_t window;
	uint64_t next_write, next_take, njobs_created, total_jobs;
	/* single stream blocks */
	struct block *bq_head, *bq_tail;
	size_t bq_len;
	/* callbacks */
	loom_dump_page_fn page_fn;
	loom_dump_write_fn write_fn;
	void *ctx;
	/* stats */
	struct loom_dump_stats st;
	struct loom_err err;
};

const char *loom_dump_error(const struct loom_dump *d)
{
	return d->err.msg;
}

void loom_dump_stats(struct loom_dump *d, struct loom_dump_stats *st)
{
	pthread_mutex_lock(&d->mu);
	*st = d->st;
	pthread_mutex_unlock(&d->mu);
}

static void job_free(struct job *j)
{
	if (!j)
		return;
	loom_wt_buf_free(&j->data);
	free(j->recs);
	free(j->msg);
	loom_wt_buf_free(&j->out.buf);
	while (j->xb_head) {
		struct block *b = j->xb_head;
		j->xb_head = b->next;
		loom_wt_buf_free(&b->b);
		free(b);
	}
	free(j);
}

static void block_free(struct block *b)
{
	if (!b)
		return;
	loom_wt_buf_free(&b->b);
	free(b->msg);
	free(b);
}

/* Open libarchive on the dump file as a raw stream through any filter. */
static struct archive *raw_reader(void)
{
	struct archive *a = archive_read_new();
	if (!a)
		return NULL;
	archive_read_support_filter_all(a);
	archive_read_support_format_raw(a);
	return a;
}

/* --- multistream index --------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int load_index(struct loom_dump *d, struct loom_err *err)
{
	struct archive *a = raw_reader();
	struct archive_entry *ent;
	struct loom_wt_buf line = { 0 };
	size_t cap = 0;
	uint64_t lineno = 0;
	int r = LOOM_EFORMAT;
	if (!a)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	if (archive_read_open_filename(a, d->index, 1 << 16) != ARCHIVE_OK ||
	    archive_read_next_header(a, &ent) != ARCHIVE_OK) {
		r = loom_err_set(err, LOOM_EIO, "cannot read index '%s': %s", d->index,
				 archive_error_string(a));
		goto out;
	}
	for (;;) {
		char buf[65536];
		la_ssize_t n = archive_read_data(a, buf, sizeof buf);
		if (n < 0) {
			r = loom_err_set(err, LOOM_EFORMAT, "index '%s': %s", d->index,
					 archive_error_string(a));
			goto out;
		}
		for (la_ssize_t i = 0; i <= n; i++) {
			if (i < n && buf[i] != '\n') {
				if (line.len < 64 && loom_wt_buf_add(&line, buf + i, 1)) {
					r = loom_err_set(err, LOOM_ENOMEM, "out of memory");
					goto out;
				}
				continue;
			}
			if (i == n && n > 0)
				break;
			/* a complete line (or the end with a partial one) */
			if (line.len) {
				uint64_t off = 0;
				size_t k = 0;
				lineno++;
				while (k < line.len && line.p[k] >= '0' && line.p[k] <= '9' && k < 19)
					off = off * 10 + (line.p[k++] - '0');
				if (!k || k >= line.len || line.p[k] != ':') {
					r = loom_err_set(err, LOOM_EFORMAT,
							 "index '%s', line %llu: not 'offset:id:title'",
							 d->index, (unsigned long long)lineno);
					goto out;
				}
				if (off >= d->size && off < d->far_off) {
					d->far_off = off; /* for the message of a truncated file */
					d->far_line = lineno;
				}
				if (!d->noffs || d->offs[d->noffs - 1] != off) {
					if (d->noffs == cap) {
						cap = cap ? cap * 2 : 1024;
						uint64_t *p = realloc(d->offs, cap * sizeof *p);
						if (!p) {
							r = loom_err_set(err, LOOM_ENOMEM, "out of memory");
							goto out;
						}
						d->offs = p;
					}
					d->offs[d->noffs++] = off;
				}
			}
			line.len = 0;
		}
		if (n == 0)
			break;
	}
	qsort(d->offs, d->noffs, sizeof *d->offs, cmp_u64);
	size_t k = 0;
	for (size_t i = 0; i < d->noffs; i++)
		if (!k || d->offs[k - 1] != d->offs[i])
			d->offs[k++] = d->offs[i];
	d->noffs = k;
	if (!k) {
		r = loom_err_set(err, LOOM_EFORMAT, "index '%s' lists no streams", d->index);
		goto out;
	}
	if (d->offs[0] == 0) {
		r = loom_err_set(err, LOOM_EFORMAT,
				 "index '%s': a page stream at offset 0 (no <siteinfo> stream)", d->index);
		goto out;
	}
	r = 0;
out:
	archive_read_free(a);
	loom_wt_buf_free(&line);
	return r;
}

struct loom_dump *loom_dump_open(const char *path, const struct loom_dump_opts *opts,
				 struct loom_err *err)
{
	struct loom_dump *d = calloc(1, sizeof *d);
	if (!d) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->fd = -1;
	if (opts)
		d->opts = *opts;
	if (d->opts.threads < 1)
		d->opts.threads = 1;
	if (!d->opts.batch_bytes)
		d->opts.batch_bytes = 1u << 20;
	d->path = strdup(path);
	if (!d->path)
		goto nomem;
	if (strcmp(path, "-") == 0) {
		d->fd = 0;
	} else {
		d->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (d->fd < 0) {
			loom_err_errno(err, LOOM_EIO, errno, "cannot open '%s'", path);
			goto fail;
		}
	}
	struct stat sb;
	if (fstat(d->fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		loom_err_errno(err, LOOM_EIO, EISDIR, "cannot read '%s'", path);
		goto fail;
	}
	if (fstat(d->fd, &sb) == 0 && S_ISREG(sb.st_mode))
		d->size = sb.st_size;
	d->st.size_in = d->size;
	if (!d->opts.no_index && d->size) {
		if (d->opts.index) {
			d->index = strdup(d->opts.index);
		} else {
			size_t n = strlen(path);
			if (n > 8 && !strcmp(path + n - 8, ".xml.bz2")) {
				if (asprintf(&d->index, "%.*s-index.txt.bz2", (int)(n - 8), path) < 0)
					d->index = NULL;
				else if (access(d->index, R_OK) != 0) {
					free(d->index);
					d->index = strdup("");
				}
			}
		}
		if (d->index && d->index[0]) {
			d->far_off = UINT64_MAX;
			if (load_index(d, err))
				goto fail;
			d->st.multistream = 1;
			d->st.streams = d->noffs;
		}
	}
	return d;
nomem:
	loom_err_set(err, LOOM_ENOMEM, "out of memory");
fail:
	loom_dump_free(d);
	return NULL;
}

void loom_dump_free(struct loom_dump *d)
{
	if (!d)
		return;
	if (d->fd > 0)
		close(d->fd);
	free(d->path);
	free(d->index);
	free(d->offs);
	site_release(&d->site);
	while (d->bq_head) {
		struct block *b = d->bq_head;
		d->bq_head = b->next;
		block_free(b);
	}
	while (d->todo_head) {
		struct job *j = d->todo_head;
		d->todo_head = j->next;
		job_free(j);
	}
	if (d->slots)
		for (size_t i = 0; i < d->window; i++)
			job_free(d->slots[i]);
	free(d->slots);
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	free(d);
}

/* ctx of the parser callbacks starts with the dump pointer */
static void set_site(void *ctx, const struct loom_dump_site *site)
{
	struct loom_dump *d = *(struct loom_dump **)ctx;
	if (d->have_site)
		return;
	pthread_mutex_lock(&d->mu);
	site_release(&d->site);
	if (site_copy(&d->site, site) == 0)
		d->have_site = 1;
	pthread_mutex_unlock(&d->mu);
}

/* Run the page function over a page and account for it. */
static int do_page(struct loom_dump *d, int worker, const struct loom_page *pg, struct job *j)
{
	j->pages++;
	return d->page_fn(d->ctx, worker, &d->site, pg, &j->out);
}

/* --- single stream: reader thread ----------------------------------- */

static void bq_push(struct loom_dump *d, struct block *b)
{
	pthread_mutex_lock(&d->mu);
	while (d->bq_len >= 4 && !d->stop)
		pthread_cond_wait(&d->cv, &d->mu);
	if (d->bq_tail)
		d->bq_tail->next = b;
	else
		d->bq_head = b;
	d->bq_tail = b;
	d->bq_len++;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

static void *reader_main(void *arg)
{
	struct loom_dump *d = arg;
	struct archive *a = raw_reader();
	struct archive_entry *ent;
	unsigned char carry[4];
	int ncarry = 0;
	char *raw = malloc(READ_BLOCK);
	struct block *b = NULL;
	if (!a || !raw)
		goto nomem;
	if (archive_read_open_fd(a, d->fd, 1 << 20) != ARCHIVE_OK ||
	    archive_read_next_header(a, &ent) != ARCHIVE_OK) {
		b = calloc(1, sizeof *b);
		if (!b)
			goto nomem;
		b->err = LOOM_EFORMAT;
		b->final = 1;
		/* libarchive has dropped its filters: where the file offset
		 * stands is how far it read before it gave up */
		off_t at = lseek(d->fd, 0, SEEK_CUR);
		const char *why = archive_error_string(a);
		if ((at >= 0 ? asprintf(&b->msg, "cannot read '%s' (within its first %llu bytes): %s",
					d->path, (unsigned long long)at, why ? why : "read error")
			     : asprintf(&b->msg, "cannot read '%s': %s", d->path,
					why ? why : "read error")) < 0)
			b->msg = NULL;
		goto done;
	}
	for (;;) {
		la_ssize_t n = archive_read_data(a, raw, READ_BLOCK);
		int stop;
		pthread_mutex_lock(&d->mu);
		stop = d->stop;
		d->st.bytes_in = archive_filter_bytes(a, -1);
		pthread_mutex_unlock(&d->mu);
		if (stop)
			break;
		b = calloc(1, sizeof *b);
		if (!b)
			goto nomem;
		if (n < 0) {
			/* truncated or corrupt: report where */
			b->err = LOOM_ETRUNC;
			b->final = 1;
			const char *why = archive_error_string(a);
			if (asprintf(&b->msg, "'%s': compressed data ends or is corrupt at byte %llu: %s",
				     d->path, (unsigned long long)archive_filter_bytes(a, -1),
				     why ? why : "read error") < 0)
				b->msg = NULL;
			goto done;
		}
		int64_t bad = loom_utf8_sanitize(raw, n, &b->b, carry, &ncarry, n > 0);
		if (bad < 0)
			goto nomem;
		pthread_mutex_lock(&d->mu);
		d->st.bytes_xml += n;
		d->st.invalid_utf8 += bad;
		pthread_mutex_unlock(&d->mu);
		if (n == 0) {
			b->final = 1;
			goto done;
		}
		bq_push(d, b);
		b = NULL;
	}
	goto out;
nomem:
	if (!b)
		b = calloc(1, sizeof *b);
	if (b) {
		b->err = LOOM_ENOMEM;
		b->final = 1;
		b->msg = strdup("out of memory");
	}
done:
	if (b)
		bq_push(d, b);
out:
	free(raw);
	if (a)
		archive_read_free(a);
	return NULL;
}

/* --- single stream: parser thread ----------------------------------- */

struct parser_ctx {
	struct loom_dump *d;
	struct job *cur;
};

static struct job *job_new(void)
{
	return calloc(1, sizeof(struct job));
}

/* Hand a job to the workers (blocks while the window is full). */
static void submit(struct loom_dump *d, struct job *j)
{
	pthread_mutex_lock(&d->mu);
	j->seq = d->njobs_created++;
	while (j->seq >= d->next_write + d->window && !d->stop)
		pthread_cond_wait(&d->cv, &d->mu);
	if (d->todo_tail)
		d->todo_tail->next = j;
	else
		d->todo_head = j;
	d->todo_tail = j;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

static int collect_page(void *ctx, const struct loom_page *pg)
{
	struct parser_ctx *pc = ctx;
	struct job *j = pc->cur;
	if (!j && !(j = pc->cur = job_new()))
		return LOOM_ENOMEM;
	if (j->nrec == j->caprec) {
		size_t cap = j->caprec ? j->caprec * 2 : 64;
		struct prec *r = realloc(j->recs, cap * sizeof *r);
		if (!r)
			return LOOM_ENOMEM;
		j->recs = r;
		j->caprec = cap;
	}
	struct prec *r = &j->recs[j->nrec];
	r->pg = *pg;
	r->title = j->data.len;
	if (loom_wt_buf_add(&j->data, pg->title, pg->title_len + 1))
		return LOOM_ENOMEM;
	r->rtitle = j->data.len;
	if (loom_wt_buf_add(&j->data, pg->redirect_title, strlen(pg->redirect_title) + 1))
		return LOOM_ENOMEM;
	r->text = j->data.len;
	if (loom_wt_buf_add(&j->data, pg->text, pg->text_len + 1))
		return LOOM_ENOMEM;
	j->nrec++;
	if (j->data.len >= pc->d->opts.batch_bytes || j->nrec >= 4096) {
		submit(pc->d, j);
		pc->cur = NULL;
	}
	return 0;
}

static void *parser_main(void *arg)
{
	struct loom_dump *d = arg;
	struct parser_ctx pc = { d, NULL };
	struct loom_pagexml *px = loom_pagexml_new(0, collect_page, set_site, &pc);
	int err = px ? 0 : LOOM_ENOMEM;
	if (px)
		loom_pagexml_set_max_text(px, d->opts.max_text);
	char *msg = NULL;
	for (;;) {
		struct block *b;
		pthread_mutex_lock(&d->mu);
		while (!d->bq_head && !d->stop)
			pthread_cond_wait(&d->cv, &d->mu);
		if (d->stop) {
			pthread_mutex_unlock(&d->mu);
			break;
		}
		b = d->bq_head;
		d->bq_head = b->next;
		if (!d->bq_head)
			d->bq_tail = NULL;
		d->bq_len--;
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
		if (!err && b->b.len) {
			err = loom_pagexml_feed(px, b->b.p, b->b.len);
			if (err && asprintf(&msg, "'%s': %s", d->path, loom_pagexml_error(px)) < 0)
				msg = NULL;
		}
		if (b->final) {
			if (!err && b->err) {
				err = b->err;
				msg = b->msg;
				b->msg = NULL;
			} else if (!err) {
				err = loom_pagexml_finish(px, LOOM_PAGEXML_END_DOC);
				if (err && asprintf(&msg, "'%s': %s", d->path, loom_pagexml_error(px)) < 0)
					msg = NULL;
			}
			block_free(b);
			break;
		}
		block_free(b);
		if (err)
			break;
	}
	/* the final job carries the pages left and the outcome */
	struct job *j = pc.cur ? pc.cur : job_new();
	if (j) {
		j->last = 1;
		j->err = err;
		j->msg = msg;
		submit(d, j);
	} else {
		free(msg);
		pthread_mutex_lock(&d->mu);
		d->stop = 1;
		if (!d->err.code)
			loom_err_set(&d->err, LOOM_ENOMEM, "out of memory");
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
	}
	loom_pagexml_free(px);
	return NULL;
}

/* --- multistream: one bz2 stream per job ---------------------------- */

struct stream_ctx {
	struct loom_dump *d;
	struct job *j;
	int worker;
};

static int stream_page(void *ctx, const struct loom_page *pg)
{
	struct stream_ctx *sc = ctx;
	return do_page(sc->d, sc->worker, pg, sc->j);
}

/* Decompress bz2 stream j (bytes off..end) into blocks appended to j's
 * list (UTF-8 repaired), which a parser may consume at the same time.  On
 * failure j->err/msg are set; the blocks before the failure stay.  Sets
 * j->state = J_READY under the lock at the end and then never touches j. */
static int stream_decompress(struct loom_dump *d, struct job *j)
{
	struct archive *a = raw_reader();
	struct archive_entry *ent;
	unsigned char carry[4];
	int ncarry = 0, r = 0;
	size_t len = j->end - j->off;
	char *comp = NULL, *raw = NULL;
	char *msg = NULL;
	uint64_t bytes = 0, invalid = 0;
	if (j->end > d->size || j->off >= d->size) {
		/* then an offset >= size was read: d->far_line is set */
		r = LOOM_ETRUNC;
		if (asprintf(&msg, "'%s' ends at byte %llu, but index '%s', line %llu has a stream at byte %llu (a truncated file, or not its index)",
			     d->path, (unsigned long long)d->size, d->index,
			     (unsigned long long)d->far_line, (unsigned long long)d->far_off) < 0)
			msg = NULL;
		goto out;
	}
	comp = malloc(len ? len : 1);
	raw = malloc(READ_BLOCK);
	if (!a || !comp || !raw) {
		r = LOOM_ENOMEM;
		goto out;
	}
	int pr = loom_pread_all(d->fd, comp, len, j->off);
	if (pr) {
		r = pr == LOOM_ETRUNC ? LOOM_ETRUNC : LOOM_EIO;
		if (asprintf(&msg, "'%s': cannot read bytes %llu..%llu: %s", d->path,
			     (unsigned long long)j->off, (unsigned long long)j->end,
			     pr == LOOM_ETRUNC ? "file is truncated" : strerror(errno)) < 0)
			msg = NULL;
		goto out;
	}
	if (archive_read_open_memory(a, comp, len) != ARCHIVE_OK ||
	    archive_read_next_header(a, &ent) != ARCHIVE_OK) {
		r = LOOM_EFORMAT;
		if (asprintf(&msg, "'%s': bz2 stream at byte %llu: %s", d->path,
			     (unsigned long long)j->off, archive_error_string(a)) < 0)
			msg = NULL;
		goto out;
	}
	for (;;) {
		la_ssize_t n = archive_read_data(a, raw, READ_BLOCK);
		if (n < 0) {
			r = LOOM_ETRUNC;
			if (asprintf(&msg, "'%s': compressed data ends or is corrupt at byte %llu: %s",
				     d->path,
				     (unsigned long long)(j->off + archive_filter_bytes(a, -1)),
				     archive_error_string(a)) < 0)
				msg = NULL;
			goto out;
		}
		struct block *b = calloc(1, sizeof *b);
		int64_t bad = b ? loom_utf8_sanitize(raw, n, &b->b, carry, &ncarry, n > 0) : -1;
		if (bad < 0) {
			if (b)
				loom_wt_buf_free(&b->b);
			free(b);
			r = LOOM_ENOMEM;
			goto out;
		}
		invalid += bad;
		bytes += n;
		if (b->b.len) {
			pthread_mutex_lock(&d->mu);
			if (j->xb_tail)
				j->xb_tail->next = b;
			else
				j->xb_head = b;
			j->xb_tail = b;
			pthread_cond_broadcast(&d->cv);
			pthread_mutex_unlock(&d->mu);
		} else {
			loom_wt_buf_free(&b->b);
			free(b);
		}
		if (!n)
			break;
	}
out:
	if (r && !msg)
		msg = strdup("out of memory");
	if (a)
		archive_read_free(a);
	free(comp);
	free(raw);
	pthread_mutex_lock(&d->mu);
	j->err = r;
	j->msg = msg;
	j->bytes_xml = bytes;
	j->invalid = invalid;
	j->state = J_READY;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	return r;
}

/* Parse the blocks of stream j as they come and run the page function.
 * Returns once the decompression has finished too. */
static int stream_parse(struct loom_dump *d, struct job *j, int worker, int first)
{
	struct stream_ctx sc = { d, j, worker };
	struct loom_pagexml *px = loom_pagexml_new(!first, stream_page, first ? set_site : NULL, &sc);
	int r = px ? 0 : LOOM_ENOMEM;
	if (px)
		loom_pagexml_set_max_text(px, d->opts.max_text);
	for (;;) {
		pthread_mutex_lock(&d->mu);
		while (!j->xb_head && j->state != J_READY)
			pthread_cond_wait(&d->cv, &d->mu);
		struct block *b = j->xb_head;
		if (b) {
			j->xb_head = b->next;
			if (!j->xb_head)
				j->xb_tail = NULL;
		}
		pthread_mutex_unlock(&d->mu);
		if (!b)
			break; /* decompressed and all parsed */
		if (!r)
			r = loom_pagexml_feed(px, b->b.p, b->b.len);
		loom_wt_buf_free(&b->b);
		free(b);
	}
	/* j->err is the decompression's outcome (final now) */
	if (!r && !j->err) /* after a decompression error: keep the whole pages only */
		r = loom_pagexml_finish(px, first ? LOOM_PAGEXML_END_OPEN :
					j->last ? LOOM_PAGEXML_END_DOC : LOOM_PAGEXML_END_STREAM);
	if (r && !j->err) {
		free(j->msg);
		j->msg = NULL;
		if (px && asprintf(&j->msg, "'%s': bz2 stream at byte %llu: %s", d->path,
				   (unsigned long long)j->off, loom_pagexml_error(px)) < 0)
			j->msg = NULL;
		if (!j->msg)
			j->msg = strdup("out of memory");
		j->err = r;
	}
	loom_pagexml_free(px);
	return j->err;
}

static int run_stream(struct loom_dump *d, struct job *j, int worker, int first)
{
	stream_decompress(d, j);
	return stream_parse(d, j, worker, first);
}

/* --- workers --------------------------------------------------------- */

struct worker_arg {
	struct loom_dump *d;
	int id;
};

/* Multistream: tasks are "decompress stream k" and "parse + clean a
 * decompressed stream".  Decompression (the long pole) goes first while
 * the window of in-flight streams allows; streams are parsed independently
 * of each other, so the tail of the dump keeps both threads busy. */
static void multistream_worker(struct loom_dump *d, int id)
{
	for (;;) {
		struct job *j = NULL;
		int parse = 0;
		pthread_mutex_lock(&d->mu);
		for (;;) {
			if (d->stop)
				break;
			if (d->next_take < d->total_jobs && d->next_take < d->next_write + d->window) {
				j = job_new();
				if (!j) {
					d->stop = 1;
					loom_err_set(&d->err, LOOM_ENOMEM, "out of memory");
					pthread_cond_broadcast(&d->cv);
					break;
				}
				uint64_t k = d->next_take++;
				j->seq = k;
				j->off = d->offs[k];
				j->end = k + 1 < d->noffs ? d->offs[k + 1] : d->size;
				if (j->end < j->off)
					j->end = j->off;
				j->last = k + 1 == d->total_jobs;
				j->state = J_DECOMP;
				d->slots[k % d->window] = j;
				break;
			}
			/* parse: a decompressed stream first, else one still being
			 * decompressed (its blocks are parsed as they come) */
			for (int pass = 0; pass < 2 && !j; pass++)
				for (uint64_t s = d->next_write; s < d->next_take; s++) {
					struct job *c = d->slots[s % d->window];
					if (c && c->seq == s && !c->parsing &&
					    (pass || c->state == J_READY)) {
						j = c;
						break;
					}
				}
			if (j) {
				j->parsing = 1;
				parse = 1;
				break;
			}
			if (d->next_take >= d->total_jobs)
				break; /* every stream taken and being parsed */
			pthread_cond_wait(&d->cv, &d->mu);
		}
		pthread_mutex_unlock(&d->mu);
		if (!j)
			return;
		if (!parse) {
			stream_decompress(d, j); /* sets J_READY, then j is not ours */
			continue;
		}
		stream_parse(d, j, id, 0);
		pthread_mutex_lock(&d->mu);
		j->done = 1;
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
	}
}

static void *worker_main(void *arg)
{
	struct worker_arg *wa = arg;
	struct loom_dump *d = wa->d;
	if (d->noffs) {
		multistream_worker(d, wa->id);
		return NULL;
	}
	for (;;) {
		struct job *j = NULL;
		pthread_mutex_lock(&d->mu);
		while (!d->stop && !d->todo_head)
			pthread_cond_wait(&d->cv, &d->mu);
		if (!d->stop) {
			j = d->todo_head;
			d->todo_head = j->next;
			if (!d->todo_head)
				d->todo_tail = NULL;
			j->next = NULL;
		}
		pthread_mutex_unlock(&d->mu);
		if (!j)
			break;
		for (size_t i = 0; i < j->nrec; i++) {
			struct prec *r = &j->recs[i];
			struct loom_page pg = r->pg;
			pg.title = j->data.p + r->title;
			pg.redirect_title = j->data.p + r->rtitle;
			pg.text = j->data.p + r->text;
			int e = do_page(d, wa->id, &pg, j);
			if (e) {
				if (!j->err) {
					j->err = e;
					free(j->msg);
					j->msg = NULL;
				}
				break;
			}
		}
		loom_wt_buf_free(&j->data);
		free(j->recs);
		j->recs = NULL;
		pthread_mutex_lock(&d->mu);
		j->done = 1;
		d->slots[j->seq % d->window] = j;
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
	}
	return NULL;
}

/* Write finished jobs in order; returns when the last one is written or
 * the run fails. */
static int writer_loop(struct loom_dump *d)
{
	int ret = 0;
	for (;;) {
		struct job *j;
		pthread_mutex_lock(&d->mu);
		for (;;) {
			j = d->slots[d->next_write % d->window];
			if (j && j->seq == d->next_write && j->done)
				break;
			j = NULL;
			if (d->stop)
				break;
			if (d->noffs && d->next_write >= d->total_jobs)
				break;
			pthread_cond_wait(&d->cv, &d->mu);
		}
		if (!j) {
			ret = d->err.code ? d->err.code : 0;
			pthread_mutex_unlock(&d->mu);
			return ret;
		}
		d->slots[d->next_write % d->window] = NULL;
		if (d->noffs) {
			d->st.bytes_in += (j->end < d->size ? j->end : d->size) -
					  (j->off < d->size ? j->off : d->size);
			d->st.bytes_xml += j->bytes_xml;
			d->st.invalid_utf8 += j->invalid;
		}
		d->st.pages += j->pages;
		for (int k = 0; k < LOOM_DUMP_NSTAT; k++)
			d->st.stat[k] += j->out.stat[k];
		pthread_mutex_unlock(&d->mu);
		int w = d->write_fn(d->ctx, &j->out);
		pthread_mutex_lock(&d->mu);
		d->next_write++;
		if (w && !j->err) {
			j->err = w;
			free(j->msg);
			j->msg = NULL;
			if (!d->err.code)
				loom_err_set(&d->err, w, "stopped by the output");
		}
		if (j->err) {
			if (!d->err.code || j->msg)
				loom_err_set(&d->err, j->err, "%s",
					     j->msg ? j->msg : loom_strerror(j->err));
			ret = j->err;
			d->stop = 1;
		}
		int last = j->last;
		if (last)
			d->stop = 1; /* let every thread finish */
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
		job_free(j);
		if (ret || last)
			return ret;
	}
}

int loom_dump_run(struct loom_dump *d, loom_dump_page_fn page, loom_dump_write_fn write,
		  void *ctx)
{
	int n = d->opts.threads, ret = 0;
	pthread_t th[n + 2];
	struct worker_arg wa[n];
	int nth = 0;
	d->page_fn = page;
	d->write_fn = write;
	d->ctx = ctx;
	d->window = 2 * (size_t)n + 2;
	d->slots = calloc(d->window, sizeof *d->slots);
	if (!d->slots)
		return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory");
	if (d->noffs) {
		/* stream 0: <mediawiki> + <siteinfo>, read here first */
		struct job *j0 = job_new();
		if (!j0)
			return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory");
		j0->off = 0;
		j0->end = d->offs[0];
		int r = run_stream(d, j0, 0, 1);
		if (!r && j0->out.buf.len)
			r = write(ctx, &j0->out);
		d->st.bytes_in += j0->end < d->size ? j0->end : d->size;
		d->st.bytes_xml += j0->bytes_xml;
		d->st.invalid_utf8 += j0->invalid;
		d->st.pages += j0->pages;
		for (int k = 0; k < LOOM_DUMP_NSTAT; k++)
			d->st.stat[k] += j0->out.stat[k];
		if (r) {
			loom_err_set(&d->err, r, "%s", j0->msg ? j0->msg : "stopped by the output");
			job_free(j0);
			return r;
		}
		job_free(j0);
		d->total_jobs = d->noffs;
	} else {
		if (pthread_create(&th[nth], NULL, reader_main, d) == 0)
			nth++;
		else
			return loom_err_set(&d->err, LOOM_ENOMEM, "cannot start a thread");
		if (pthread_create(&th[nth], NULL, parser_main, d) == 0) {
			nth++;
		} else {
			pthread_mutex_lock(&d->mu);
			d->stop = 1;
			pthread_cond_broadcast(&d->cv);
			pthread_mutex_unlock(&d->mu);
			pthread_join(th[0], NULL);
			return loom_err_set(&d->err, LOOM_ENOMEM, "cannot start a thread");
		}
	}
	int nw = 0;
	for (int i = 0; i < n; i++) {
		wa[i].d = d;
		wa[i].id = i;
		if (pthread_create(&th[nth], NULL, worker_main, &wa[i]) == 0)
			nth++, nw++;
	}
	if (!nw) {
		pthread_mutex_lock(&d->mu);
		d->stop = 1;
		loom_err_set(&d->err, LOOM_ENOMEM, "cannot start a thread");
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
		ret = LOOM_ENOMEM;
	} else {
		ret = writer_loop(d);
	}
	pthread_mutex_lock(&d->mu);
	d->stop = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	return ret;
}
