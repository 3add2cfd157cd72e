/* loom_plotlog.c - training logs into series (loom_plotlog.h). */
#include "loom_plotlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_file.h"
#include "loom_tb.h"
#include "loom_tfrecord.h"

struct tb_ctx {
	struct loom_series *s;
	size_t ns, points, scalars;
};

static int tb_point(void *ctx, const struct loom_tb_event *ev)
{
	struct tb_ctx *c = ctx;
	if (ev->kind != LOOM_TB_SCALAR)
		return 0;
	c->scalars++;
	const char *alias = loom_tb_log_key(ev->tag);
	for (size_t k = 0; k < c->ns; k++) {
		struct loom_series *sk = &c->s[k];
		double x;
		if (!strcmp(sk->xkey, "step"))
			x = (double)ev->step;
		else if (!strcmp(sk->xkey, "wall_time"))
			x = ev->wall_time;
		else
			continue;
		if (strcmp(sk->ykey, ev->tag) && !(alias && !strcmp(sk->ykey, alias)))
			continue;
		if (loom_series_add(sk, x, ev->value))
			return LOOM_ENOMEM;
		c->points++;
	}
	return 0;
}

/* Why a log gave no point: the file named, in the words of its kind. */
static void no_points(struct loom_plotlog_read *r, const char *name,
		      const struct loom_series *s, size_t ns, const char *what)
{
	char keys[256] = "";
	size_t at = 0;
	for (size_t k = 0; k < ns && at < sizeof keys; k++)
		at += (size_t)snprintf(keys + at, sizeof keys - at, "%s'%s'", k ? ", " : "",
				       s[k].ykey);
	snprintf(r->why, sizeof r->why, "%s: %s (--y %s, -x '%s')", name, what, keys, s[0].xkey);
}

static int read_events(const char *name, const char *buf, size_t len, struct loom_series *s,
		       size_t ns, struct loom_plotlog_read *r, struct loom_err *err)
{
	struct tb_ctx c = { s, ns, 0, 0 };
	long n = loom_tb_read(buf, len, name, tb_point, &c, err);
	r->kind = LOOM_PLOTLOG_EVENTS;
	if (n == LOOM_ETRUNC) /* a run still writing, or killed by a full disk */
		snprintf(r->warn, sizeof r->warn, "%s; incomplete last record ignored", err->msg);
	else if (n == LOOM_ENOMEM)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	else if (n < 0)
		return (int)n;
	r->points = c.points;
	if (!c.points)
		no_points(r, name, s, ns,
			  c.scalars ? "a TensorBoard event file with no scalar of these keys"
				    : "a TensorBoard event file without scalars");
	return 0;
}

static int read_lines(const char *path, FILE *f, struct loom_series *s, size_t ns,
		      struct loom_plotlog_read *r, struct loom_err *err)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = 0;
	while (!rc && (len = getline(&line, &cap, f)) > 0) {
		r->lines++;
		if (strspn(line, " \t\r\n") == (size_t)len)
			continue;
		rc = loom_series_add_json(s, ns, line, (size_t)len);
		if (rc == LOOM_EFORMAT && line[len - 1] != '\n' && feof(f)) {
			/* a log still being written may end mid-line */
			snprintf(r->warn, sizeof r->warn, "%s: line %zu: incomplete last line ignored",
				 path, r->lines);
			rc = 0;
			break;
		}
		if (rc == LOOM_EFORMAT)
			loom_err_set(err, rc, "%s: line %zu: %s", path, r->lines, s[0].err.msg);
		else if (rc < 0)
			loom_err_set(err, rc, "%s: %s", path, s[0].err.msg);
		r->skipped += rc == 0;
		rc = rc < 0 ? rc : 0;
	}
	free(line);
	return rc;
}

int loom_plotlog_read(const char *path, struct loom_series *s, size_t ns,
		      struct loom_plotlog_read *r, struct loom_err *err)
{
	const char *name = strcmp(path, "-") ? path : "stdin";
	char *buf;
	size_t blen;
	memset(r, 0, sizeof *r);
	int rc = loom_read_file(path, &buf, &blen, err);
	if (rc)
		return rc;
	if (blen == 0) {
		free(buf);
		no_points(r, name, s, ns, "empty: neither a JSON log nor a TensorBoard event file");
		return 0;
	}
	if (loom_tfr_sniff(buf, blen)) {
		rc = read_events(name, buf, blen, s, ns, r, err);
		free(buf);
		return rc;
	}
	r->kind = LOOM_PLOTLOG_JSON;
	FILE *f = fmemopen(buf, blen, "r");
	if (!f) {
		free(buf);
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	}
	rc = read_lines(path, f, s, ns, r, err);
	fclose(f);
	free(buf);
	if (rc)
		return rc;
	size_t at = 0;
	for (size_t k = 0; k < ns; k++) {
		r->points += s[k].n;
		if (at < sizeof r->found)
			at += (size_t)snprintf(r->found + at, sizeof r->found - at, "%s%s %zu",
					       k ? ", " : "", s[k].ykey, s[k].n);
	}
	if (!r->points) {
		char what[96];
		snprintf(what, sizeof what, "%zu JSON log line%s, none with the x key and a --y key",
			 r->lines, r->lines == 1 ? "" : "s");
		no_points(r, name, s, ns, r->lines ? what : "only white space");
	}
	return 0;
}

char *loom_plotlog_run_name(char *const *paths, int n, int i)
{
	const char *p = strcmp(paths[i], "-") == 0 ? "stdin" : paths[i];
	const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
	for (int j = 0; j < n; j++) {
		const char *q = paths[j], *qb = strrchr(q, '/') ? strrchr(q, '/') + 1 : q;
		if (j != i && strcmp(qb, base) == 0)
			base = p;
	}
	size_t len = strlen(base);
	if (len > 6 && strcmp(base + len - 6, ".jsonl") == 0)
		len -= 6;
	return strndup(base, len);
}

char *loom_plotlog_summary(const struct loom_series *s, size_t ns, int nruns, size_t width,
			   const char *xkey)
{
	char *text = NULL, *buf = malloc(width * 3 + 1);
	size_t len = 0;
	FILE *f = buf ? open_memstream(&text, &len) : NULL;
	if (!f) {
		free(buf);
		return NULL;
	}
	/* columns: the widest run name and key */
	int rw = 0, kw = 10;
	for (size_t k = 0; k < ns; k++) {
		if (s[k].n && (int)strlen(s[k].run) > rw)
			rw = (int)strlen(s[k].run);
		if (s[k].n && (int)strlen(s[k].ykey) > kw)
			kw = (int)strlen(s[k].ykey);
	}
	for (size_t k = 0; k < ns && width; k++) {
		if (s[k].n == 0)
			continue;
		double mn = s[k].y[0];
		for (size_t i = 1; i < s[k].n; i++)
			mn = s[k].y[i] < mn ? s[k].y[i] : mn;
		loom_sparkline(s[k].y, s[k].n, width, buf, width * 3 + 1);
		if (nruns > 1)
			fprintf(f, "%-*s ", rw, s[k].run);
		fprintf(f, "%-*s %8.4g %s %-8.4g min %.4g  (%zu points, %s %g..%g)\n",
			kw, s[k].ykey, s[k].y[0], buf, s[k].y[s[k].n - 1], mn, s[k].n, xkey,
			s[k].x[0], s[k].x[s[k].n - 1]);
	}
	free(buf);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}
