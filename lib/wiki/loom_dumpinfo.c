/* loom_dumpinfo.c - see loom_dumpinfo.h */
#include "loom_dumpinfo.h"

#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

void loom_dumpinfo_init(struct loom_dumpinfo *d)
{
	memset(d, 0, sizeof *d);
}

void loom_dumpinfo_release(struct loom_dumpinfo *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->files[i].name);
		free(d->files[i].job);
		free(d->files[i].status);
	}
	free(d->files);
	d->files = NULL;
	d->n = d->cap = 0;
}

const char *loom_dumpinfo_error(const struct loom_dumpinfo *d)
{
	return d->err.msg;
}

const struct loom_dumpfile *loom_dumpinfo_find(const struct loom_dumpinfo *d,
					       const char *name)
{
	for (size_t i = 0; i < d->n; i++)
		if (!strcmp(d->files[i].name, name))
			return &d->files[i];
	return NULL;
}

/* Find or add the entry for `name` (already validated). */
static struct loom_dumpfile *entry(struct loom_dumpinfo *d, const char *name)
{
	struct loom_dumpfile *f = (struct loom_dumpfile *)loom_dumpinfo_find(d, name);
	if (f)
		return f;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 16;
		struct loom_dumpfile *nf = realloc(d->files, cap * sizeof *nf);
		if (!nf)
			return NULL;
		d->files = nf;
		d->cap = cap;
	}
	f = &d->files[d->n];
	memset(f, 0, sizeof *f);
	f->size = -1;
	if (!(f->name = strdup(name)))
		return NULL;
	d->n++;
	return f;
}

/* A plain file name: 1..255 bytes, no '/', no control bytes, not . or .. */
static int valid_name(const char *s, size_t n)
{
	if (n == 0 || n > 255)
		return 0;
	if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f || c == '/' || c == '\\')
			return 0;
	}
	return 1;
}

/* Copy n hex digits (any case) to lower-case out[n+1]; 0 if not hex. */
static int hex_digits(const char *s, size_t len, size_t n, char *out)
{
	if (len != n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!isxdigit((unsigned char)s[i]))
			return 0;
		out[i] = (char)tolower((unsigned char)s[i]);
	}
	out[n] = 0;
	return 1;
}

/* Store a digest, refusing a conflict with one already known. */
static int set_digest(struct loom_dumpinfo *d, char *dst, const char *val,
		      const char *what, const char *name, const char *src)
{
	if (dst[0] && strcmp(dst, val))
		return loom_err_set(&d->err, LOOM_EFORMAT,
				    "%s: %s of '%s' is %s, but another listing says %s",
				    src, what, name, val, dst);
	strcpy(dst, val);
	return 0;
}

int loom_dumpinfo_valid_wiki(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) ||
		      s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

int loom_dumpinfo_valid_date(const char *s)
{
	if (strlen(s) != 8)
		return 0;
	for (int i = 0; i < 8; i++)
		if (!isdigit((unsigned char)s[i]))
			return 0;
	int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
	int m = (s[4] - '0') * 10 + (s[5] - '0');
	int dd = (s[6] - '0') * 10 + (s[7] - '0');
	return y >= 2000 && m >= 1 && m <= 12 && dd >= 1 && dd <= 31;
}

static int parse_file(struct loom_dumpinfo *d, const char *src, const char *jobname,
		      const char *status, const char *name, json_t *fo)
{
	if (!valid_name(name, strlen(name)))
		return loom_err_set(&d->err, LOOM_EFORMAT,
				    "%s: jobs.%s.files: '%.80s' is not a plain file name",
				    src, jobname, name);
	if (!json_is_object(fo))
		return loom_err_set(&d->err, LOOM_EFORMAT,
				    "%s: jobs.%s.files.%s: not an object", src, jobname, name);
	struct loom_dumpfile *f = entry(d, name);
	if (!f)
		return loom_err_set(&d->err, LOOM_ENOMEM, "%s: out of memory", src);
	/* A file listed by two jobs (a job and its "recombine" twin, say)
	 * keeps the job that is done, else the first one; digests listed by
	 * both must agree (checked below). */
	if (!f->job || (strcmp(f->status, "done") && !strcmp(status, "done"))) {
		free(f->job);
		free(f->status);
		f->job = strdup(jobname);
		f->status = strdup(status);
		if (!f->job || !f->status)
			return loom_err_set(&d->err, LOOM_ENOMEM, "%s: out of memory", src);
	}

	/* absent or null: unknown (files of jobs still running) */
	json_t *v = json_object_get(fo, "size");
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return loom_err_set(&d->err, LOOM_EFORMAT,
					    "%s: jobs.%s.files.%s.size: not a non-negative integer",
					    src, jobname, name);
		f->size = (int64_t)json_integer_value(v);
	}
	static const struct { const char *key; size_t n; } dg[] = { { "md5", 32 }, { "sha1", 40 } };
	for (int k = 0; k < 2; k++) {
		char hex[41];
		v = json_object_get(fo, dg[k].key);
		if (!v || json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0))
			continue; /* not computed yet */
		if (!json_is_string(v) ||
		    !hex_digits(json_string_value(v), json_string_length(v), dg[k].n, hex))
			return loom_err_set(&d->err, LOOM_EFORMAT,
					    "%s: jobs.%s.files.%s.%s: not %zu hex digits", src,
					    jobname, name, dg[k].key, dg[k].n);
		int rc = set_digest(d, k ? f->sha1 : f->md5, hex, dg[k].key, name, src);
		if (rc < 0)
			return rc;
	}
	v = json_object_get(fo, "url");
	if (v && !json_is_null(v)) {
		/* "/<wiki>/<date>/<name>": must at least end in "/<name>" */
		const char *u = json_is_string(v) ? json_string_value(v) : NULL;
		size_t ul = u ? json_string_length(v) : 0, nl = strlen(name);
		if (!u || ul < nl + 1 || strlen(u) != ul || u[ul - nl - 1] != '/' ||
		    strcmp(u + ul - nl, name))
			return loom_err_set(&d->err, LOOM_EFORMAT,
					    "%s: jobs.%s.files.%s.url: not a path ending in '/%s'",
					    src, jobname, name, name);
	}
	return 0;
}

int loom_dumpinfo_parse_status(struct loom_dumpinfo *d, const char *json, size_t len,
			       const char *src)
{
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	int rc = 0;
	if (!root)
		return loom_err_set(&d->err, LOOM_EFORMAT, "%s: line %d, column %d: %s", src,
				    je.line, je.column, loom_json_reason(je.text));
	json_t *jobs = json_is_object(root) ? json_object_get(root, "jobs") : NULL;
	if (!json_is_object(jobs)) {
		rc = loom_err_set(&d->err, LOOM_EFORMAT, "%s: no \"jobs\" object at the top level",
				  src);
		goto out;
	}
	const char *jobname;
	json_t *job;
	json_object_foreach(jobs, jobname, job) {
		if (!valid_name(jobname, strlen(jobname))) {
			rc = loom_err_set(&d->err, LOOM_EFORMAT, "%s: jobs: bad job name '%.80s'",
					  src, jobname);
			goto out;
		}
		if (!json_is_object(job)) {
			rc = loom_err_set(&d->err, LOOM_EFORMAT, "%s: jobs.%s: not an object", src,
					  jobname);
			goto out;
		}
		json_t *st = json_object_get(job, "status");
		if (!json_is_string(st) || json_string_length(st) == 0 ||
		    json_string_length(st) > 64 ||
		    strlen(json_string_value(st)) != json_string_length(st)) {
			rc = loom_err_set(&d->err, LOOM_EFORMAT,
					  "%s: jobs.%s.status: missing or not a short string", src,
					  jobname);
			goto out;
		}
		json_t *files = json_object_get(job, "files");
		if (!files || json_is_null(files))
			continue; /* jobs that have not run yet list no files */
		if (!json_is_object(files)) {
			rc = loom_err_set(&d->err, LOOM_EFORMAT, "%s: jobs.%s.files: not an object",
					  src, jobname);
			goto out;
		}
		const char *fname;
		json_t *fo;
		json_object_foreach(files, fname, fo) {
			rc = parse_file(d, src, jobname, json_string_value(st), fname, fo);
			if (rc < 0)
				goto out;
		}
	}
out:
	json_decref(root);
	return rc;
}

int loom_dumpinfo_parse_sha1sums(struct loom_dumpinfo *d, const char *txt, size_t len,
				 const char *src)
{
	size_t pos = 0;
	unsigned long line = 0;
	while (pos < len) {
		const char *s = txt + pos;
		const char *nl = memchr(s, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - s) : len - pos;
		pos += n + (nl ? 1 : 0);
		line++;
		if (n && s[n - 1] == '\r')
			n--;
		if (n == 0)
			continue;
		char hex[41];
		if (n < 43 || !hex_digits(s, 40, 40, hex) || s[40] != ' ' ||
		    (s[41] != ' ' && s[41] != '*'))
			return loom_err_set(&d->err, LOOM_EFORMAT,
					    "%s: line %lu: expected '<40 hex digits>  <file name>'",
					    src, line);
		const char *name = s + 42;
		size_t nn = n - 42;
		if (!valid_name(name, nn))
			return loom_err_set(&d->err, LOOM_EFORMAT,
					    "%s: line %lu: not a plain file name", src, line);
		char buf[256];
		memcpy(buf, name, nn);
		buf[nn] = 0;
		struct loom_dumpfile *f = entry(d, buf);
		if (!f)
			return loom_err_set(&d->err, LOOM_ENOMEM, "%s: out of memory", src);
		if (f->sha1[0] && strcmp(f->sha1, hex))
			return loom_err_set(&d->err, LOOM_EFORMAT,
					    "%s: line %lu: sha1 of '%s' is %s, but another listing says %s",
					    src, line, buf, hex, f->sha1);
		strcpy(f->sha1, hex);
	}
	return 0;
}

int loom_dumpinfo_find_date(struct loom_dumpinfo *d, const char *wiki,
			    const char *suffix, char date[9])
{
	size_t wl = strlen(wiki), sl = strlen(suffix);
	int found = 0;
	for (size_t i = 0; i < d->n; i++) {
		const char *nm = d->files[i].name;
		size_t nl = strlen(nm);
		/* <wiki>-YYYYMMDD-<suffix> */
		if (nl != wl + 10 + sl || strncmp(nm, wiki, wl) || nm[wl] != '-' ||
		    nm[wl + 9] != '-' || strcmp(nm + wl + 10, suffix))
			continue;
		char dt[9];
		memcpy(dt, nm + wl + 1, 8);
		dt[8] = 0;
		if (!loom_dumpinfo_valid_date(dt))
			continue;
		if (found && strcmp(dt, date))
			return loom_err_set(&d->err, LOOM_EINVAL,
					    "two runs list %s-*-%s: %s and %s", wiki, suffix,
					    date, dt);
		memcpy(date, dt, 9);
		found = 1;
	}
	if (!found)
		return loom_err_set(&d->err, LOOM_EINVAL, "no file named %s-YYYYMMDD-%s is listed",
				    wiki, suffix);
	return 0;
}
