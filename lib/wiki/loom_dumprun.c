/* loom_dumprun.c - a dump run's listings and wanted files (loom_dumprun.h). */
#include "loom_dumprun.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_file.h"

int loom_dumprun_add_what(const char **suffix, int n, const char *what)
{
	static const struct { const char *name; const char *files[2]; } sets[] = {
		{ "articles-multistream", { "pages-articles-multistream.xml.bz2",
					    "pages-articles-multistream-index.txt.bz2" } },
		{ "articles", { "pages-articles.xml.bz2", NULL } },
		{ "meta-current", { "pages-meta-current.xml.bz2", NULL } },
		{ "abstract", { "abstract.xml.gz", NULL } },
	};
	for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
		if (strcmp(what, sets[i].name))
			continue;
		for (int k = 0; k < 2 && sets[i].files[k]; k++) {
			if (n >= LOOM_DUMPRUN_MAX_WHAT)
				return LOOM_ERANGE;
			suffix[n++] = sets[i].files[k];
		}
		return n;
	}
	if (!strchr(what, '.') || strchr(what, '/') || strstr(what, ".."))
		return LOOM_EINVAL;
	if (n >= LOOM_DUMPRUN_MAX_WHAT)
		return LOOM_ERANGE;
	suffix[n++] = what;
	return n;
}

#define note(r, ...) loom_note((r)->o.note, (r)->o.note_ud, __VA_ARGS__)

/* Fetch url into *buf, telling it. */
static int fetch_listing(struct loom_dumprun *r, struct loom_fetch *f, const char *url,
			 char **buf, size_t *len)
{
	note(r, "fetching %s", url);
	int rc = loom_fetch_mem(f, url, 64u << 20, buf, len);
	if (rc == 0)
		note(r, "%s: %zu bytes", url, *len);
	else
		loom_err_set(&r->err, rc, "%s", loom_fetch_error(f));
	return rc;
}

/* Whether each wanted file has a sha1 in what dumpstatus.json listed
 * (whose file names carry the date: with "latest", the one it lists). */
static int have_sums(struct loom_dumprun *r)
{
	char dt[9];
	const char *d = r->o.date;
	if (!strcmp(d, "latest")) {
		if (loom_dumpinfo_find_date(&r->di, r->o.wiki, r->o.suffix[0], dt))
			return 0;
		d = dt;
	}
	for (int i = 0; i < r->o.nsuf; i++) {
		char *name = NULL;
		if (asprintf(&name, "%s-%s-%s", r->o.wiki, d, r->o.suffix[i]) < 0)
			return 0;
		const struct loom_dumpfile *e = loom_dumpinfo_find(&r->di, name);
		free(name);
		if (!e || !e->sha1[0])
			return 0;
	}
	return 1;
}

/* dumpstatus.json, then the sha1sums listing if it is needed. */
static int load_listings(struct loom_dumprun *r, struct loom_fetch *f)
{
	char *buf, *url = NULL, status_err[LOOM_ERR_MAX] = "";
	size_t len;
	if (asprintf(&url, "%s/dumpstatus.json", r->dir_url) < 0)
		return loom_err_set(&r->err, LOOM_ENOMEM, "out of memory");
	int rc = fetch_listing(r, f, url, &buf, &len);
	if (rc == 0) {
		rc = loom_dumpinfo_parse_status(&r->di, buf, len, url);
		free(buf);
		free(url);
		if (rc < 0)
			return loom_err_set(&r->err, rc, "%s", loom_dumpinfo_error(&r->di));
		if (have_sums(r))
			return 0;
	} else {
		free(url);
		note(r, "%s", r->err.msg);
		if (rc == LOOM_ENET)
			return rc;
		snprintf(status_err, sizeof status_err, "%s", r->err.msg);
	}
	if (asprintf(&url, "%s/%s-%s-sha1sums.txt", r->dir_url, r->o.wiki, r->o.date) < 0)
		return loom_err_set(&r->err, LOOM_ENOMEM, "out of memory");
	rc = fetch_listing(r, f, url, &buf, &len);
	if (rc < 0) {
		snprintf(r->first, sizeof r->first, "%s", status_err);
		free(url);
		return rc;
	}
	rc = loom_dumpinfo_parse_sha1sums(&r->di, buf, len, url);
	free(buf);
	free(url);
	if (rc < 0)
		return loom_err_set(&r->err, rc, "%s", loom_dumpinfo_error(&r->di));
	return 0;
}

int loom_dumprun_open(struct loom_dumprun *r, struct loom_fetch *f,
		      const struct loom_dumprun_opts *o)
{
	memset(r, 0, sizeof *r);
	r->o = *o;
	loom_dumpinfo_init(&r->di);
	if (!(r->mirror = strdup(o->mirror)))
		return loom_err_set(&r->err, LOOM_ENOMEM, "out of memory");
	for (size_t l = strlen(r->mirror); l > 0 && r->mirror[l - 1] == '/'; l--)
		r->mirror[l - 1] = 0;
	if (asprintf(&r->dir_url, "%s/%s/%s", r->mirror, o->wiki, o->date) < 0) {
		r->dir_url = NULL;
		return loom_err_set(&r->err, LOOM_ENOMEM, "out of memory");
	}
	int rc = load_listings(r, f);
	if (rc)
		return rc;
	if (strcmp(o->date, "latest")) {
		memcpy(r->date, o->date, 9);
		return 0;
	}
	if (loom_dumpinfo_find_date(&r->di, o->wiki, o->suffix[0], r->date) < 0)
		return loom_err_set(&r->err, LOOM_EFORMAT, "%s: cannot resolve 'latest': %s",
				    r->dir_url, loom_dumpinfo_error(&r->di));
	return 0;
}

int loom_dumprun_file(struct loom_dumprun *r, int i, const char *outdir,
		      struct loom_dumprun_file *out)
{
	memset(out, 0, sizeof *out);
	if (asprintf(&out->name, "%s-%s-%s", r->o.wiki, r->date, r->o.suffix[i]) < 0) {
		out->name = NULL;
		return loom_err_set(&r->err, LOOM_ENOMEM, "out of memory");
	}
	const struct loom_dumpfile *e = loom_dumpinfo_find(&r->di, out->name);
	if (!e)
		return loom_err_set(&r->err, LOOM_EFORMAT, "%s: '%s' is not listed in the dump's checksums",
				    r->dir_url, out->name);
	if (e->status && strcmp(e->status, "done"))
		return loom_err_set(&r->err, LOOM_ENET, "%s: job %s is '%s', not done: try again later",
				    out->name, e->job, e->status);
	if (!e->sha1[0] && !e->md5[0])
		return loom_err_set(&r->err, LOOM_EFORMAT, "%s: no checksum is published for '%s'",
				    r->dir_url, out->name);
	out->exp = (struct loom_fetch_expect){ e->size, e->sha1[0] ? e->sha1 : NULL,
					       e->sha1[0] ? NULL : e->md5, NULL };
	if (asprintf(&out->url, "%s/%s/%s/%s", r->mirror, r->o.wiki, r->date, out->name) < 0)
		out->url = NULL;
	if (!out->url || !(out->path = loom_path_join(outdir, out->name)))
		return loom_err_set(&r->err, LOOM_ENOMEM, "out of memory");
	return 0;
}

void loom_dumprun_file_release(struct loom_dumprun_file *f)
{
	free(f->name);
	free(f->url);
	free(f->path);
	memset(f, 0, sizeof *f);
}

void loom_dumprun_release(struct loom_dumprun *r)
{
	loom_dumpinfo_release(&r->di);
	free(r->mirror);
	free(r->dir_url);
	r->mirror = r->dir_url = NULL;
}
