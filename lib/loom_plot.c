/* loom_plot.c - see loom_plot.h */
#include "loom_plot.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		return loom_err_set(&s[0].err, LOOM_EFORMAT, "column %d: %s", je.column, je.text);
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

static void sb_escaped(struct sbuf *b, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': sb_printf(b, "&lt;"); break;
		case '>': sb_printf(b, "&gt;"); break;
		case '&': sb_printf(b, "&amp;"); break;
		case '"': sb_printf(b, "&quot;"); break;
		default: sb_printf(b, "%c", *s);
		}
	}
}

/* A "nice" tick step (1, 2 or 5 x 10^k) giving about `want` ticks. */
static double nice_step(double range, int want)
{
	double raw = range / want, mag = pow(10, floor(log10(raw)));
	double f = raw / mag;
	return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

char *loom_plot_svg(const struct loom_series *series, size_t n,
		    const struct loom_plot_opts *opts)
{
	static const char *colors[] = { "#1f77b4", "#d62728", "#2ca02c",
					"#ff7f0e", "#9467bd", "#8c564b" };
	int W = opts && opts->width > 0 ? opts->width : 800;
	int H = opts && opts->height > 0 ? opts->height : 400;
	int logy = opts && opts->logy;
	const double L = 70, R = 20, T = 40, Bm = 50;
	double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
	struct sbuf b = { malloc(4096), 0, 4096, 0 };
	if (!b.p)
		return NULL;

	for (size_t k = 0; k < n; k++)
		for (size_t i = 0; i < series[k].n; i++) {
			double y = series[k].y[i];
			if (logy && y <= 0)
				continue;
			y = logy ? log10(y) : y;
			x0 = fmin(x0, series[k].x[i]);
			x1 = fmax(x1, series[k].x[i]);
			y0 = fmin(y0, y);
			y1 = fmax(y1, y);
		}
	if (!isfinite(x0)) { /* no points at all */
		x0 = 0, x1 = 1, y0 = 0, y1 = 1;
	}
	/* a flat range gets a width that shows at its magnitude (1 next to
	 * 1.3e15 is below the spacing of doubles) */
	if (x1 == x0)
		x1 = x0 + fmax(1, fabs(x0) * 1e-6);
	if (y1 == y0) {
		double h = fmax(0.5, fabs(y0) * 1e-6);
		y0 -= h;
		y1 += h;
	}
	double pad = (y1 - y0) * 0.05;
	y0 -= pad;
	y1 += pad;
#define PX(v) (L + ((v) - x0) / (x1 - x0) * (W - L - R))
#define PY(v) (H - Bm - ((v) - y0) / (y1 - y0) * (H - T - Bm))

	sb_printf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		  "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
		  "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
		  "fill=\"white\"/>\n", W, H, W, H);
	if (opts && opts->title) {
		sb_printf(&b, "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" "
			  "font-size=\"16\">", W / 2);
		sb_escaped(&b, opts->title);
		sb_printf(&b, "</text>\n");
	}
	/* grid and tick labels */
	double ys = nice_step(y1 - y0, 6), xs = nice_step(x1 - x0, 8);
	/* ticks by index: v += step could stop moving at a large magnitude */
	for (int t = 0; t < 64; t++) {
		double v = (ceil(y0 / ys) + t) * ys;
		if (v > y1 + 1e-12)
			break;
		sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			  "stroke=\"#ddd\"/>\n", L, PY(v), W - R, PY(v));
		sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n",
			  L - 6, PY(v) + 4, logy ? pow(10, v) : v);
	}
	for (int t = 0; t < 64; t++) {
		double v = (ceil(x0 / xs) + t) * xs;
		if (v > x1 + 1e-12)
			break;
		sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			  "stroke=\"#eee\"/>\n", PX(v), T, PX(v), H - Bm);
		sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.6g</text>\n",
			  PX(v), H - Bm + 16, v);
	}
	sb_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
		  "fill=\"none\" stroke=\"#444\"/>\n", L, T, W - L - R, H - T - Bm);
	const char *xl = opts && opts->xlabel ? opts->xlabel
			 : n ? series[0].xkey : "";
	sb_printf(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", (L + W - R) / 2,
		  H - 12);
	sb_escaped(&b, xl ? xl : "");
	sb_printf(&b, "</text>\n");

	size_t shown = 0; /* series with points: only those get a line and a legend */
	for (size_t k = 0; k < n; k++) {
		if (series[k].n == 0)
			continue;
		const char *c = colors[shown % (sizeof colors / sizeof colors[0])];
		sb_printf(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
			  "points=\"", c);
		for (size_t i = 0; i < series[k].n; i++) {
			double y = series[k].y[i];
			if (logy && y <= 0)
				continue;
			sb_printf(&b, "%.1f,%.1f ", PX(series[k].x[i]),
				  PY(logy ? log10(y) : y));
		}
		sb_printf(&b, "\"/>\n");
		/* sparse series (e.g. periodic eval) also get point markers */
		for (size_t i = 0; series[k].n <= 40 && i < series[k].n; i++) {
			double y = series[k].y[i];
			if (logy && y <= 0)
				continue;
			sb_printf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
				  PX(series[k].x[i]), PY(logy ? log10(y) : y), c);
		}
		/* legend */
		double ly = T + 16 + 16.0 * shown++;
		sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			  "stroke=\"%s\" stroke-width=\"2\"/>\n", W - R - 150, ly - 4,
			  W - R - 130, ly - 4, c);
		sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\">", W - R - 124, ly);
		sb_escaped(&b, series[k].ykey ? series[k].ykey : "");
		sb_printf(&b, " (last %.4g)", series[k].y[series[k].n - 1]);
		sb_printf(&b, "</text>\n");
	}
	sb_printf(&b, "</svg>\n");
#undef PX
#undef PY
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
		lo = fmin(lo, y[i]);
		hi = fmax(hi, y[i]);
	}
	for (size_t c = 0; c < cells; c++) {
		/* mean of the points that fall in this cell */
		size_t a = c * n / cells, e = (c + 1) * n / cells;
		double sum = 0;
		for (size_t i = a; i < e; i++)
			sum += y[i];
		double v = sum / (double)(e - a);
		int level = hi > lo ? (int)((v - lo) / (hi - lo) * 7.999) : 3;
		if (w + 4 > outlen)
			break;
		memcpy(out + w, bars[level], 3);
		w += 3;
	}
	out[w] = '\0';
	return w;
}
