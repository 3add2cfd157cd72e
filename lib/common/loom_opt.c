/* loom_opt.c - option tables without a terminal (loom_opt.h). */
#include "loom_opt.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "  -o, --output PATH" */
static int opt_lead(const struct loom_opt *o, char *buf, size_t len)
{
	char s[8] = "    ";
	if (o->short_name)
		snprintf(s, sizeof s, "-%c, ", o->short_name);
	return snprintf(buf, len, "  %s--%s%s%s", s, o->name, o->arg ? " " : "",
			o->arg ? o->arg : "");
}

char *loom_opt_help(const char *usage, const struct loom_opt *opts, const char *footer)
{
	char *text = NULL, lead[128];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int col = 20;
	if (!f)
		return NULL;
	for (const struct loom_opt *o = opts; o->kind != LOOM_OPT_END; o++) {
		int w = o->kind == LOOM_OPT_TEXT || o->kind == LOOM_OPT_ALIAS ? 0 :
			opt_lead(o, lead, sizeof lead) + 2;
		if (w > col)
			col = w;
	}
	fputs(usage, f);
	for (const struct loom_opt *o = opts; o->kind != LOOM_OPT_END; o++) {
		if (o->kind == LOOM_OPT_TEXT) {
			fprintf(f, "%s\n", o->help);
			continue;
		}
		if (o->kind == LOOM_OPT_ALIAS)
			continue;
		int w = opt_lead(o, lead, sizeof lead);
		fprintf(f, "%s%*s", lead, col - w, "");
		for (const char *h = o->help; *h; h++) {
			fputc(*h, f);
			if (*h == '\n')
				fprintf(f, "%*s", col, "");
		}
		fputc('\n', f);
	}
	if (footer)
		fputs(footer, f);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

char *loom_opt_list(const struct loom_opt *opts)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	for (const struct loom_opt *o = opts; o->kind != LOOM_OPT_END; o++) {
		if (o->kind == LOOM_OPT_TEXT || o->kind == LOOM_OPT_ALIAS)
			continue;
		if (o->short_name)
			fprintf(f, "-%c ", o->short_name);
		fprintf(f, "--%s%s%s\n", o->name, o->values ? " : " : "", o->values ? o->values : "");
	}
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

const struct loom_opt *loom_opt_target(const struct loom_opt *opts, const struct loom_opt *o)
{
	if (o->kind != LOOM_OPT_ALIAS)
		return o;
	for (const struct loom_opt *t = opts; t->kind != LOOM_OPT_END; t++)
		if (t->kind != LOOM_OPT_TEXT && t->kind != LOOM_OPT_ALIAS && !strcmp(t->name, o->help))
			return t;
	return NULL;
}

int loom_opt_getopt(const struct loom_opt *opts, size_t n, int list_code, struct option **lo,
		    char **shorts, struct loom_err *err)
{
	struct option *l = calloc(n + 2, sizeof *l);
	char *s = malloc(3 * n + 8), *sp = s;
	size_t k = 0;
	*lo = l;
	*shorts = s;
	if (!l || !s)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const struct loom_opt *o = &opts[i], *t = loom_opt_target(opts, o);
		if (o->kind == LOOM_OPT_TEXT)
			continue;
		if (!t)
			return loom_err_set(err, LOOM_EINVAL,
					    "internal error: alias of an option --%s that the table lacks",
					    o->help);
		if (o->name) /* an alias's long name returns its target's code */
			l[k++] = (struct option){ o->name, t->arg ? required_argument : no_argument,
						  NULL, t->short_name ? t->short_name :
						  256 + (int)(t - opts) };
		if (o->short_name) {
			*sp++ = (char)o->short_name;
			if (t->arg)
				*sp++ = ':';
		}
	}
	l[k] = (struct option){ "list-options", no_argument, NULL, list_code };
	*sp = 0;
	return 0;
}

int loom_opt_takes_next(const struct loom_opt *opts, const char *arg)
{
	const struct loom_opt *t;
	if (arg[1] == '-' && strchr(arg, '='))
		return 0;
	if (arg[1] == '-') {
		for (const struct loom_opt *o = opts; o->kind != LOOM_OPT_END; o++)
			if (o->kind != LOOM_OPT_TEXT && o->name &&
			    !strncmp(o->name, arg + 2, strlen(arg + 2)) &&
			    (t = loom_opt_target(opts, o)) && t->arg)
				return 1;
		return 0;
	}
	/* a cluster: the first letter that takes an argument takes the rest
	 * of the word, or the next one */
	for (const char *p = arg + 1; *p; p++)
		for (const struct loom_opt *o = opts; o->kind != LOOM_OPT_END; o++)
			if (o->kind != LOOM_OPT_TEXT && o->short_name == *p &&
			    (t = loom_opt_target(opts, o)) && t->arg)
				return p[1] == '\0';
	return 0;
}

int loom_opt_u64(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *v,
		 struct loom_err *err)
{
	int rc = loom_parse_u64(arg, min, max, v);
	if (rc == LOOM_ERANGE)
		return loom_err_set(err, rc, "%s: '%s' is out of range [%llu, %llu]", opt, arg,
				    (unsigned long long)min, (unsigned long long)max);
	if (rc < 0)
		return loom_err_set(err, LOOM_EINVAL, "%s: '%s' is not a whole number", opt, arg);
	return 0;
}

int loom_opt_double(const char *opt, const char *arg, double min, double max, double *v,
		    struct loom_err *err)
{
	if (loom_parse_double(arg, v) < 0)
		return loom_err_set(err, LOOM_EINVAL, "%s: '%s' is not a number", opt, arg);
	if (*v < min || *v > max)
		return loom_err_set(err, LOOM_ERANGE, "%s: '%s' is out of range [%g, %g]", opt, arg,
				    min, max);
	return 0;
}

int loom_opt_store(const struct loom_opt *o, const char *arg, struct loom_err *err)
{
	char opt[64];
	uint64_t u;
	int rc = 0;
	snprintf(opt, sizeof opt, "--%s", o->name);
	switch (o->kind) {
	case LOOM_OPT_SET: *o->var.i = o->value; break;
	case LOOM_OPT_STRING: *o->var.s = arg; break;
	case LOOM_OPT_INT:
		if (!(rc = loom_opt_u64(opt, arg, o->min, o->max, &u, err)))
			*o->var.i = (int)u;
		break;
	case LOOM_OPT_U64: rc = loom_opt_u64(opt, arg, o->min, o->max, o->var.u, err); break;
	case LOOM_OPT_DOUBLE: rc = loom_opt_double(opt, arg, o->dmin, o->dmax, o->var.d, err); break;
	default: rc = loom_err_set(err, LOOM_EINVAL, "%s: not a value of its own", opt);
	}
	return rc;
}

int loom_opt_key_word(const struct loom_opt *opts, int argc, char **argv,
		      int (*is_key)(const char *name), char name[64], const char **value)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (strncmp(argv[i], "--", 2) || !argv[i][2])
			continue;
		const char *a = argv[i] + 2, *eq = strchr(a, '=');
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		if (len >= 64)
			continue;
		memcpy(name, a, len);
		name[len] = 0;
		int opt = !strcmp(name, "help") || !strcmp(name, "version") ||
			  !strcmp(name, "list-options");
		for (const struct loom_opt *o = opts; !opt && o->kind != LOOM_OPT_END; o++)
			opt = o->name && !strncmp(o->name, name, len); /* getopt takes prefixes */
		if (opt || !is_key(name))
			continue;
		*value = eq ? eq + 1 : i + 1 < argc && argv[i + 1][0] != '-' ? argv[i + 1] : "V";
		return i;
	}
	return 0;
}

int loom_opt_range(const char *opt, const char *s, uint64_t *a, uint64_t *b, struct loom_err *err)
{
	const char *colon = strchr(s, ':');
	char left[32];
	int rc;
	if (!colon) {
		if ((rc = loom_opt_u64(opt, s, 0, UINT64_MAX - 1, a, err)))
			return rc;
		*b = *a + 1;
		return 0;
	}
	size_t ll = (size_t)(colon - s);
	if (ll >= sizeof left)
		return loom_err_set(err, LOOM_EINVAL, "%s: '%s' is not A:B", opt, s);
	memcpy(left, s, ll);
	left[ll] = 0;
	*a = 0;
	*b = UINT64_MAX;
	if ((ll && (rc = loom_opt_u64(opt, left, 0, UINT64_MAX, a, err))) ||
	    (colon[1] && (rc = loom_opt_u64(opt, colon + 1, 0, UINT64_MAX, b, err))))
		return rc;
	if (*b < *a)
		return loom_err_set(err, LOOM_ERANGE, "%s: end %" PRIu64 " is before start %" PRIu64,
				    opt, *b, *a);
	return 0;
}
