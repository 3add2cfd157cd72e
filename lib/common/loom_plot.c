/* loom_plot.c - see loom_plot.h */
#include "loom_plot.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom_utf8.h"

void loom_series_init(struct loom_series *s, const char *xkey, const char *ykey)
{
	memset(s, 0, sizeof *s);
	s->xkey = xkey;
	s->ykey = ykey;
}

void loom_series_release(struct loom_series *s)
{
	free(s->x);
	free(s->y);
	s->x = s->y = NULL;
	s->n = s->cap = 0;
}

int loom_series_add(struct loom_series *s, double x, double y)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		double *nx = realloc(s->x, cap * sizeof *nx);
		if (!nx)
			return loom_err_set(&s->err, LOOM_ENOMEM, "out of memory");
		s->x = nx;
		double *ny = realloc(s->y, cap * sizeof *ny);
		if (!ny)
			return loom_err_set(&s->err, LOOM_ENOMEM, "out of memory");
		s->y = ny;
		s->cap = cap;
	}
	s->x[s->n] = x;
	s->y[s->n] = y;
	s->n++;
	return 0;
}

int loom_series_add_json(struct loom_series *s, size_t n, const char *line, size_t len)
{
	json_error_t je;
	json_t *o = json_loadb(line, len, 0, &je);
	int added = 0;
	if (!o)
		return loom_err_set(&s[0].err, LOOM_EFORMAT, "column %d: %s", je.column, loom_json_reason(je.text));
	if (!json_is_object(o)) {
		json_decref(o);
		return loom_err_set(&s[0].err, LOOM_EFORMAT, "not a JSON object");
	}
	for (size_t k = 0; k < n; k++) {
		json_t *x = json_object_get(o, s[k].xkey), *y = json_object_get(o, s[k].ykey);
		if (!json_is_number(x) || !json_is_number(y))
			continue;
		double xv = json_number_value(x), yv = json_number_value(y);
		if (!isfinite(xv) || !isfinite(yv))
			continue;
		if (loom_series_add(&s[k], xv, yv) < 0) {
			s[0].err = s[k].err;
			added = LOOM_ENOMEM;
			break;
		}
		added++;
	}
	json_decref(o);
	return added;
}

/* growable string for the SVG */
struct sbuf {
	char *p;
	size_t n, cap;
	int oom;
};

static __attribute__((format(printf, 2, 3))) void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		if (b->oom)
			return;
		va_start(ap, fmt);
		int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
		va_end(ap);
		if (k >= 0 && (size_t)k < b->cap - b->n) {
			b->n += (size_t)k;
			return;
		}
		size_t cap = b->cap * 2 + (size_t)(k > 0 ? k : 0) + 64;
		char *np = realloc(b->p, cap);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
}

/* Text for an attribute (in "") or an element: <, >, &, " as entities,
 * and U+FFFD for what XML 1.0 cannot hold (control characters but tab,
 * newline and return; invalid UTF-8; U+FFFE, U+FFFF), so that the SVG
 * parses whatever a title, a key or a file name holds. */
static void sb_escaped(struct sbuf *b, const char *s)
{
	const uint8_t *p = (const uint8_t *)s;
	size_t n = strlen(s);
	while (n) {
		uint32_t cp;
		int valid;
		size_t k = loom_utf8_decode(p, n, &cp, &valid);
		switch (cp) {
		case '<': sb_printf(b, "&lt;"); break;
		case '>': sb_printf(b, "&gt;"); break;
		case '&': sb_printf(b, "&amp;"); break;
		case '"': sb_printf(b, "&quot;"); break;
		default:
			if (!valid || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') ||
			    cp == 0xfffe || cp == 0xffff)
				sb_printf(b, "\uFFFD");
			else
				sb_printf(b, "%.*s", (int)k, (const char *)p);
		}
		p += k;
		n -= k;
	}
}

/* A "nice" tick step (1, 2 or 5 x 10^k) giving about `want` ticks over
 * [lo, hi] (also when hi - lo overflows: -1e308 to 1e308). */
static double nice_step(double lo, double hi, int want)
{
	double range = hi - lo;
	if (isinf(range) && isfinite(lo) && isfinite(hi))
		return 2 * nice_step(lo / 2, hi / 2, want);
	double raw = range / want, mag = pow(10, floor(log10(raw)));
	double f = raw / mag;
	return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

/* Where v falls in [lo, hi] (0 at lo, 1 at hi), also when hi - lo
 * overflows; within +-1e4 (a point that far out is clipped anyway), so that
 * a coordinate always prints as a number. */
static double frac(double v, double lo, double hi)
{
	double f = (v - lo) / (hi - lo);
	if (!isfinite(f))
		f = (v / 2 - lo / 2) / (hi / 2 - lo / 2);
	return isnan(f) ? 0 : fmax(-1e4, fmin(1e4, f));
}

/* Keep a range's ends finite (a range of values near DBL_MAX, padded). */
static void clamp_range(double *lo, double *hi)
{
	*lo = fmax(*lo, -DBL_MAX);
	*hi = fmin(*hi, DBL_MAX);
}

/* Widen an empty range [lo, lo] around its value. */
static void widen(double *lo, double *hi)
{
	if (*hi > *lo)
		return;
	double d = *lo != 0 ? fabs(*lo) * 0.1 : 0.5;
	*lo -= d;
	*hi += d;
	if (!(*hi > *lo)) { /* d underflowed */
		*lo -= 0.5;
		*hi += 0.5;
	}
	clamp_range(lo, hi);
}

/* Indices [*a, *b] of the multiples of step inside [lo, hi]; 0 when there
 * are none worth drawing (an extreme range: values near DBL_MAX). */
static int ticks(double lo, double hi, double step, long long *a, long long *b)
{
	if (!(step > 0) || !isfinite(step) || !(fabs(lo / step) < 1e15) ||
	    !(fabs(hi / step) < 1e15))
		return 0;
	*a = (long long)ceil(lo / step);
	*b = (long long)floor(hi / step + 1e-9);
	return *b - *a < 1000;
}

/* Tick label: 4 significant digits, thousands as k / M / G (12k, 1.5M). */
static const char *fmt_tick(double v, char *buf, size_t len)
{
	static const char *sfx[] = { "k", "M", "G" };
	double a = fabs(v);
	int u = -1;
	while (a >= 1000 && u < 2) {
		a /= 1000;
		v /= 1000;
		u++;
	}
	if (fabs(v) < 1e-12)
		v = 0;
	snprintf(buf, len, "%.4g%s", v, u >= 0 ? sfx[u] : "");
	return buf;
}

void loom_ema(const double *y, size_t n, double w, double *out)
{
	double last = 0;
	for (size_t i = 0; i < n; i++) {
		last = last * w + (1 - w) * y[i];
		/* debias: the average starts at 0, not at y[0] */
		out[i] = w > 0 ? last / (1 - pow(w, (double)(i + 1))) : y[i];
	}
}

/* Axis label for a key loom-train logs: the quantity and its unit. */
static const char *axis_label(const char *key)
{
	static const struct { const char *key, *label; } tab[] = {
		{ "loss", "loss (nats/token)" },
		{ "eval_loss", "loss (nats/token)" },
		{ "eval_ppl", "perplexity" },
		{ "eval_acc", "next-token accuracy" },
		{ "lr", "learning rate" },
		{ "tokens_per_s", "throughput (tokens/s)" },
		{ "grad_norm", "gradient norm" },
		{ "tokens", "tokens" },
		{ "seconds", "time (s)" },
		{ "step", "step" },
	};
	for (size_t i = 0; key && i < sizeof tab / sizeof tab[0]; i++)
		if (strcmp(key, tab[i].key) == 0)
			return tab[i].label;
	return key ? key : "";
}

static int is_eval(const struct loom_series *s)
{
	return s->ykey && strncmp(s->ykey, "eval_", 5) == 0;
}

/* One panel: a box on the page and its y range. */
struct panel {
	double l, t, w, h;
	double y0, y1;
	int logy;
};

static double yval(const struct panel *p, double y)
{
	return p->logy ? log10(y) : y;
}

static int y_ok(const struct panel *p, double y)
{
	return !isnan(y) && (!p->logy || y > 0);
}

/* Tick values (data units) for a panel's y axis, about `want` of them: nice
 * linear steps, on a log axis too unless it spans decades (then 1, 2, 5 x
 * 10^k, or powers of ten alone). */
static size_t yticks(const struct panel *p, int want, double *out, size_t max)
{
	size_t n = 0;
	long long a, b;
	if (p->logy && p->y1 - p->y0 > 1) {
		int mult = p->y1 - p->y0 < 3 ? 3 : 1;
		static const double m[3] = { 1, 2, 5 };
		if (!ticks(p->y0, p->y1, 1, &a, &b))
			return 0;
		for (long long k = a - 1; k <= b && n < max; k++)
			for (int i = 0; i < mult && n < max; i++) {
				double v = m[i] * pow(10, (double)k);
				if (log10(v) >= p->y0 && log10(v) <= p->y1)
					out[n++] = v;
			}
		return n;
	}
	double lo = p->logy ? pow(10, p->y0) : p->y0, hi = p->logy ? pow(10, p->y1) : p->y1;
	double step = nice_step(lo, hi, want);
	if (!ticks(lo, hi, step, &a, &b))
		return 0;
	for (long long j = a; j <= b && n < max; j++)
		if (!p->logy || j * step > 0)
			out[n++] = j * step;
	return n;
}

/* Page coordinates of a y value (in the panel's units) and of an x value. */
static double py(const struct panel *p, double v)
{
	return p->t + p->h - frac(v, p->y0, p->y1) * p->h;
}

static double px(const struct panel *p, double x, double x0, double x1)
{
	return p->l + frac(x, x0, x1) * p->w;
}

static void path_d(struct sbuf *b, const struct panel *p, const double *x,
		   const double *y, size_t n, double x0, double x1)
{
	int first = 1;
	for (size_t i = 0; i < n; i++) {
		if (!y_ok(p, y[i]))
			continue;
		sb_printf(b, "%s%.1f,%.1f", first ? "M" : "L",
			  px(p, x[i], x0, x1), py(p, yval(p, y[i])));
		first = 0;
	}
}

static void series_attrs(struct sbuf *b, const struct loom_series *s)
{
	sb_printf(b, " data-run=\"");
	sb_escaped(b, s->run ? s->run : "");
	sb_printf(b, "\" data-key=\"");
	sb_escaped(b, s->ykey ? s->ykey : "");
	sb_printf(b, "\"");
}

static void draw_series(struct sbuf *b, const struct panel *p, const struct loom_series *s,
			const char *c, double smooth, double x0, double x1, double *tmp)
{
	if (is_eval(s)) {
		/* evaluation: sparse points, joined by a thin dashed line */
		sb_printf(b, "<path class=\"eval\"");
		series_attrs(b, s);
		sb_printf(b, " fill=\"none\" stroke=\"%s\" stroke-width=\"1\" "
			  "stroke-dasharray=\"4 3\" d=\"", c);
		path_d(b, p, s->x, s->y, s->n, x0, x1);
		sb_printf(b, "\"/>\n");
		for (size_t i = 0; i < s->n; i++)
			if (y_ok(p, s->y[i]))
				sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" "
					  "fill=\"white\" stroke=\"%s\" stroke-width=\"2\"/>\n",
					  px(p, s->x[i], x0, x1), py(p, yval(p, s->y[i])), c);
		return;
	}
	/* a schedule (the learning rate) is what was set, not a noisy
	 * measurement: drawn raw */
	int schedule = s->ykey && (!strcmp(s->ykey, "lr") || !strncmp(s->ykey, "lr_", 3));
	int smoothed = smooth > 0 && s->n > 1 && !schedule;
	sb_printf(b, "<path class=\"raw\"");
	series_attrs(b, s);
	sb_printf(b, " fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s d=\"", c,
		  smoothed ? "1" : "1.5", smoothed ? " stroke-opacity=\"0.25\"" : "");
	path_d(b, p, s->x, s->y, s->n, x0, x1);
	sb_printf(b, "\"/>\n");
	if (smoothed) {
		loom_ema(s->y, s->n, smooth, tmp);
		sb_printf(b, "<path class=\"smooth\"");
		series_attrs(b, s);
		sb_printf(b, " fill=\"none\" stroke=\"%s\" stroke-width=\"2\" d=\"", c);
		path_d(b, p, s->x, tmp, s->n, x0, x1);
		sb_printf(b, "\"/>\n");
	}
	if (s->n == 1 && y_ok(p, s->y[0]))
		sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n",
			  px(p, s->x[0], x0, x1), py(p, yval(p, s->y[0])), c);
}

/* Legend text of a series: "run key" (the run only when there are several). */
static void legend_text(struct sbuf *b, const struct loom_series *s, int multirun)
{
	if (multirun && s->run) {
		sb_escaped(b, s->run);
		sb_printf(b, " ");
	}
	sb_escaped(b, s->ykey ? s->ykey : "");
}

/* Rough width of a legend entry in pixels (12px sans-serif). */
static double legend_width(const struct loom_series *s, int multirun)
{
	char v[32];
	size_t len = (multirun && s->run ? strlen(s->run) + 1 : 0) +
		     strlen(s->ykey ? s->ykey : "") + 1 +
		     (size_t)snprintf(v, sizeof v, "%.4g", s->y[s->n - 1]);
	return 28 + 6.2 * (double)len + 16;
}

char *loom_plot_svg(const struct loom_series *series, size_t n,
		    const struct loom_plot_opts *opts)
{
	/* TensorBoard-like run colours */
	static const char *colors[] = { "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
					"#9467bd", "#8c564b", "#e377c2", "#17becf" };
	const size_t ncolors = sizeof colors / sizeof colors[0];
	double smooth = opts && opts->smooth > 0 && opts->smooth < 1 ? opts->smooth : 0;
	const double L = 78, R = 24, Bm = 46, GAP = 26;
	double T = opts && opts->title ? 40 : 16;
	double x0 = INFINITY, x1 = -INFINITY;
	int maxpanel = 0, multirun = 0;
	size_t maxn = 0;
	char tb[32];

	/* which panels have points (they are laid out in order, empty ones
	 * dropped); the shared x range */
	int used[16] = { 0 };
	for (size_t k = 0; k < n; k++) {
		int pi = series[k].panel < 0 ? 0 : series[k].panel > 15 ? 15 : series[k].panel;
		if (series[k].run_index != series[0].run_index)
			multirun = 1;
		if (series[k].n > maxn)
			maxn = series[k].n;
		for (size_t i = 0; i < series[k].n; i++) {
			x0 = fmin(x0, series[k].x[i]);
			x1 = fmax(x1, series[k].x[i]);
			used[pi] = 1;
		}
		if (pi > maxpanel)
			maxpanel = pi;
	}
	if (!isfinite(x0))
		x0 = 0, x1 = 1;
	widen(&x0, &x1);
	int slot[16], nextra = 0;
	for (int pi = 1; pi <= maxpanel; pi++)
		slot[pi] = used[pi] ? ++nextra : 0;
	slot[0] = 0;

	int W = opts && opts->width > 0 ? opts->width : 800;
	/* the legend: a row of entries (the main panel's series) above it,
	 * wrapped to the chart's width, so that it never hides a curve */
	double legend_y = T, lx = L;
	int legend_rows = 0;
	for (size_t k = 0; k < n; k++) {
		if (series[k].panel != 0 || series[k].n == 0)
			continue;
		double w = legend_width(&series[k], multirun);
		if (legend_rows == 0 || (lx + w > W - R && lx > L)) {
			legend_rows++;
			lx = L;
		}
		lx += w;
	}
	T += 20.0 * legend_rows + (legend_rows ? 4 : 0);
	int H = opts && opts->height > 0 ? opts->height : 400 + 150 * nextra;
	double extra_h = 124, plot_h = H - T - Bm - nextra * (extra_h + GAP);
	if (plot_h < 60) { /* a small height: share it evenly */
		extra_h = (H - T - Bm - nextra * GAP) / (nextra + 1);
		plot_h = extra_h;
	}
	double *tmp = malloc((maxn ? maxn : 1) * sizeof *tmp);
	struct sbuf b = { malloc(4096), 0, 4096, 0 };
	if (!b.p || !tmp) {
		free(b.p);
		free(tmp);
		return NULL;
	}

	sb_printf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		  "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"Roboto, Helvetica, "
		  "Arial, sans-serif\" font-size=\"12\" fill=\"#333\">\n<rect width=\"100%%\" "
		  "height=\"100%%\" fill=\"white\"/>\n", W, H, W, H);
	if (opts && opts->title) {
		sb_printf(&b, "<text class=\"title\" x=\"%.1f\" y=\"26\" font-size=\"15\" "
			  "font-weight=\"bold\">", L);
		sb_escaped(&b, opts->title);
		sb_printf(&b, "</text>\n");
	}

	if (legend_rows) {
		size_t nth = 0;
		int row = 0;
		lx = L;
		sb_printf(&b, "<g class=\"legend\">\n");
		for (size_t k = 0; k < n; k++) {
			const struct loom_series *s = &series[k];
			if (s->panel != 0 || s->n == 0)
				continue;
			const char *c = colors[(multirun ? (size_t)s->run_index : nth) % ncolors];
			double w = legend_width(s, multirun);
			nth++;
			if (lx + w > W - R && lx > L) {
				row++;
				lx = L;
			}
			double ry = legend_y + 20.0 * row + 8;
			if (is_eval(s))
				sb_printf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"white\" "
					  "stroke=\"%s\" stroke-width=\"2\"/>\n", lx + 12, ry - 4, c);
			else
				sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
					  "stroke=\"%s\" stroke-width=\"2.5\"/>\n", lx + 2, ry - 4,
					  lx + 22, ry - 4, c);
			sb_printf(&b, "<text class=\"legend-entry\" x=\"%.1f\" y=\"%.1f\">", lx + 28, ry);
			legend_text(&b, s, multirun);
			sb_printf(&b, " <tspan fill=\"#888\">%.4g</tspan></text>\n", s->y[s->n - 1]);
			lx += w;
		}
		sb_printf(&b, "</g>\n");
	}

	double xs = nice_step(x0, x1, W > 500 ? 8 : 4);
	for (int pi = 0; pi <= maxpanel; pi++) {
		if (pi > 0 && !used[pi])
			continue;
		struct panel p = { L, T + (slot[pi] ? plot_h + GAP + (slot[pi] - 1) * (extra_h + GAP) : 0),
				   W - L - R, slot[pi] ? extra_h : plot_h, INFINITY, -INFINITY,
				   pi == 0 && opts && opts->logy };
		const char *firstkey = NULL;
		for (size_t k = 0; k < n; k++) {
			if (series[k].panel != pi)
				continue;
			for (size_t i = 0; i < series[k].n; i++) {
				if (!y_ok(&p, series[k].y[i]))
					continue;
				double y = yval(&p, series[k].y[i]);
				p.y0 = fmin(p.y0, y);
				p.y1 = fmax(p.y1, y);
				if (!firstkey)
					firstkey = series[k].ykey;
			}
		}
		if (!isfinite(p.y0))
			p.y0 = 0, p.y1 = 1;
		widen(&p.y0, &p.y1);
		double pad = (p.y1 - p.y0) * 0.05;
		if (!isfinite(pad)) /* a range wider than DBL_MAX */
			pad = p.y1 * 0.05 - p.y0 * 0.05;
		p.y0 -= pad;
		p.y1 += pad;
		clamp_range(&p.y0, &p.y1);
		if (pi > 0 && p.y0 < 0 && p.y0 + pad >= 0)
			p.y0 = 0; /* rates and speeds: start at zero */

		/* grid, ticks and the y label */
		double tv[64];
		size_t nt = yticks(&p, p.h > 200 ? 6 : 3, tv, sizeof tv / sizeof tv[0]);
		sb_printf(&b, "<g class=\"panel\" data-panel=\"%d\">\n", pi);
		for (size_t t = 0; t < nt; t++) {
			double ty = py(&p, yval(&p, tv[t]));
			sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
				  "stroke=\"#e4e4e4\"/>\n", p.l, ty, p.l + p.w, ty);
			sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#666\">%s</text>\n",
				  p.l - 6, ty + 4, fmt_tick(tv[t], tb, sizeof tb));
		}
		long long ja, jb;
		int bottom = slot[pi] == nextra;
		ja = 0, jb = -1;
		if (!ticks(x0, x1, xs, &ja, &jb))
			jb = ja - 1;
		for (long long j = ja; j <= jb; j++) {
			double tx = px(&p, j * xs, x0, x1);
			sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
				  "stroke=\"#f0f0f0\"/>\n", tx, p.t, tx, p.t + p.h);
			if (bottom)
				sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
					  "fill=\"#666\">%s</text>\n", tx, p.t + p.h + 16,
					  fmt_tick(j * xs, tb, sizeof tb));
		}
		sb_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			  "fill=\"none\" stroke=\"#bbb\"/>\n", p.l, p.t, p.w, p.h);
		const char *yl = pi == 0 && opts && opts->ylabel ? opts->ylabel : axis_label(firstkey);
		sb_printf(&b, "<text class=\"ylabel\" transform=\"translate(18,%.1f) rotate(-90)\" "
			  "text-anchor=\"middle\">", p.t + p.h / 2);
		sb_escaped(&b, yl);
		sb_printf(&b, "</text>\n");

		/* the curves, clipped to the panel */
		sb_printf(&b, "<clipPath id=\"clip%d\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
			  "height=\"%.1f\"/></clipPath>\n<g clip-path=\"url(#clip%d)\">\n",
			  pi, p.l, p.t - 4, p.w, p.h + 8, pi);
		size_t nth = 0;
		for (size_t k = 0; k < n; k++) {
			if (series[k].panel != pi || series[k].n == 0)
				continue;
			size_t ci = multirun ? (size_t)series[k].run_index : pi ? 0 : nth;
			nth++;
			draw_series(&b, &p, &series[k], colors[ci % ncolors], smooth, x0, x1, tmp);
		}
		sb_printf(&b, "</g>\n</g>\n");
	}
	const char *xl = opts && opts->xlabel ? opts->xlabel : n ? axis_label(series[0].xkey) : "";
	sb_printf(&b, "<text class=\"xlabel\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">",
		  L + (W - L - R) / 2, H - 10);
	sb_escaped(&b, xl);
	sb_printf(&b, "</text>\n</svg>\n");
	free(tmp);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

size_t loom_sparkline(const double *y, size_t n, size_t width, char *out,
		      size_t outlen)
{
	static const char *bars[] = { "\u2581", "\u2582", "\u2583", "\u2584",
				      "\u2585", "\u2586", "\u2587", "\u2588" };
	size_t cells = n < width ? n : width, w = 0;
	double lo = INFINITY, hi = -INFINITY;
	if (outlen == 0)
		return 0;
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (isfinite(y[i])) {
			lo = fmin(lo, y[i]);
			hi = fmax(hi, y[i]);
		}
	}
	for (size_t c = 0; c < cells; c++) {
		/* mean height of the points that fall in this cell: heights are
		 * in [0, 1], so that +-1e308 add up without overflow; NaN is
		 * left out, +-inf is at the top or the bottom */
		size_t a = c * n / cells, e = (c + 1) * n / cells, m = 0;
		double sum = 0;
		for (size_t i = a; i < e; i++) {
			if (isnan(y[i]))
				continue;
			sum += hi > lo ? fmax(0, fmin(1, frac(y[i], lo, hi))) : 0.5;
			m++;
		}
		if (w + 4 > outlen)
			break;
		if (m == 0) { /* only NaN here */
			out[w++] = ' ';
			continue;
		}
		memcpy(out + w, bars[(int)(sum / (double)m * 7.999)], 3);
		w += 3;
	}
	out[w] = '\0';
	return w;
}
