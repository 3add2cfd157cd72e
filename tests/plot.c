/* Unit tests for loom_plot: the sparkline and the chart of extreme values
 * (+-DBL_MAX, +-inf and NaN through loom_series_add, denormals, -0, one
 * point, all equal) stay within their bar table and print every coordinate
 * as a number; text the XML cannot hold is escaped or replaced. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom_plot.h"
#include "tap.h"

/* The sparkline of y[0..n), one cell a point. */
static const char *spark(const double *y, size_t n)
{
	static char out[3 * 16 + 1];
	loom_sparkline(y, n, 16, out, sizeof out);
	return out;
}

/* 1 if no attribute of svg (a coordinate) holds nan or inf (the legend's
 * text may: it shows the last value). */
static int coords_finite(const char *svg)
{
	for (const char *p = svg; (p = strpbrk(p, "ni")); p++)
		if ((!strncmp(p, "nan", 3) || !strncmp(p, "inf", 3)) && p - svg >= 2 &&
		    p[-1] != '>' && (p[-1] != '-' || p[-2] != '>'))
			return 0;
	return 1;
}

/* The chart of one series (x = 1..n), with the given options; 1 if every
 * coordinate in it is a number. */
static int chart_finite(const double *y, size_t n, const struct loom_plot_opts *o)
{
	struct loom_series s;
	loom_series_init(&s, "step", "loss");
	for (size_t i = 0; i < n; i++)
		loom_series_add(&s, (double)i + 1, y[i]);
	char *svg = loom_plot_svg(&s, 1, o);
	int fine = svg && coords_finite(svg);
	if (svg && !fine)
		diag("%s", svg);
	free(svg);
	loom_series_release(&s);
	return fine;
}

int main(void)
{
	const double big[] = { 1e308, -1e308 }, max[] = { DBL_MAX, -DBL_MAX, DBL_MAX };
	is_str(spark(big, 2), "█▁", "+-1e308: top and bottom bars (was INT_MIN: a crash)");
	is_str(spark(max, 3), "█▁█", "+-DBL_MAX");
	const double inf[] = { -INFINITY, 1, 2, INFINITY }, nan[] = { 1, NAN, 2 };
	is_str(spark(inf, 4), "▁▁██", "-inf at the bottom, +inf at the top");
	is_str(spark(nan, 3), "▁ █", "NaN: a blank cell");
	const double allnan[] = { NAN, NAN }, allinf[] = { INFINITY, -INFINITY };
	is_str(spark(allnan, 2), "  ", "only NaN");
	is_str(spark(allinf, 2), "▄▄", "only infinities: the middle bar");
	const double den[] = { 5e-324, 0, 1e-323 }, negz[] = { -0.0, 0.0 }, one[] = { 3 };
	is_str(spark(den, 3), "▄▁█", "denormals are a range like any other");
	is_str(spark(negz, 2), "▄▄", "-0 and 0 are equal");
	is_str(spark(one, 1), "▄", "a single point");
	const double eq[] = { 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2 };
	is_str(spark(eq, 20), "▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄", "all equal, resampled");
	const double up[] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	is_str(spark(up, 8), "▁▂▃▄▅▆▇█", "an ordinary ramp is unchanged");

	struct loom_plot_opts lin = { .smooth = 0.6 }, logy = { .smooth = 0.6, .logy = 1 },
			      raw = { .width = 100, .height = 100 };
	const struct loom_plot_opts *opts[] = { NULL, &lin, &logy, &raw };
	const struct {
		const double *y;
		size_t n;
		const char *what;
	} cases[] = { { big, 2, "+-1e308" }, { max, 3, "+-DBL_MAX" }, { inf, 4, "+-inf" },
		      { nan, 3, "NaN" }, { allnan, 2, "only NaN" }, { den, 3, "denormals" },
		      { negz, 2, "-0" }, { one, 1, "one point" }, { eq, 20, "all equal" } };
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		int fine = 1;
		for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
			fine &= chart_finite(cases[c].y, cases[c].n, opts[k]);
		ok(fine, "chart of %s: every coordinate a number (linear, smoothed, log y, small)",
		   cases[c].what);
	}

	/* x: steps at +-DBL_MAX */
	struct loom_series s;
	loom_series_init(&s, "step", "loss");
	loom_series_add(&s, -DBL_MAX, 1);
	loom_series_add(&s, DBL_MAX, 2);
	char *svg = loom_plot_svg(&s, 1, NULL);
	ok(svg && coords_finite(svg), "x from -DBL_MAX to DBL_MAX");
	free(svg);

	/* text the XML cannot hold */
	struct loom_plot_opts t = { .title = "a\x01<b>&\"c'\x7f]]>\xff\xed\xa0\x80\xef\xbf\xbe\tz\xc3\xa9" };
	svg = loom_plot_svg(&s, 1, &t);
	ok(svg && strstr(svg, ">a\xef\xbf\xbd&lt;b&gt;&amp;&quot;c'\x7f]]&gt;\xef\xbf\xbd"
			      "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\tz\xc3\xa9</text>"),
	   "title: specials as entities; controls, bad UTF-8, a surrogate, U+FFFE as U+FFFD");
	free(svg);
	loom_series_release(&s);
	return done_testing();
}
