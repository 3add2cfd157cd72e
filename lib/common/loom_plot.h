/*
 * loom_plot.h - turn a training log into a chart: series from JSON lines,
 * an SVG line chart, and a compact Unicode sparkline.
 *
 * Purpose: `loom-plot` (and `make demo`) show the loss curve of a run from
 * the JSON-lines log loom-train writes (`{"step":1,"loss":4.1,...}`).
 * A series collects (x, y) points for one key of one run (one log file);
 * lines lacking the key, or with a non-numeric value, are skipped for that
 * series (eval lines carry other keys than step lines).  The chart draws
 * every series of every run on shared x axes: the main panel (loss) and
 * optional small panels below it (learning rate, tokens/s); a training
 * series as a faint raw curve under its exponential moving average (as
 * TensorBoard does; a schedule, `lr` or `lr_*`, raw only), an `eval_*`
 * series as markers; one colour per run
 * (per key when there is a single run), and a legend.
 *
 * Ownership: loom_series_init/_release; loom_plot_svg returns a malloc'd
 * string the caller frees.  Errors: 0 or a negative LOOM_E* code with the
 * message in the series' err (a malformed line is LOOM_EFORMAT).
 * Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_PLOT_H
#define LOOM_PLOT_H

#include <stddef.h>

#include "loom_common.h"

struct loom_series {
	const char *xkey, *ykey;   /* borrowed: JSON keys for x and y */
	const char *run;           /* borrowed: run name for the legend, or NULL */
	int run_index;             /* series of one run share it (and a colour) */
	int panel;                 /* 0 = main panel, 1.. = small panels below */
	double *x, *y;
	size_t n, cap;
	struct loom_err err;
};

void loom_series_init(struct loom_series *s, const char *xkey, const char *ykey);
void loom_series_release(struct loom_series *s);
int loom_series_add(struct loom_series *s, double x, double y);
/* Parse one JSON-object line once and add a point to each of the n series
 * whose two keys hold numbers there.  Returns the number of points added,
 * or LOOM_EFORMAT if the line is not a JSON object (message in s[0].err,
 * with the column) or LOOM_ENOMEM. */
int loom_series_add_json(struct loom_series *s, size_t n, const char *line, size_t len);

struct loom_plot_opts {
	const char *title;      /* may be NULL */
	const char *xlabel;     /* may be NULL: the first series' xkey */
	const char *ylabel;     /* main panel; NULL: first key and its unit */
	int width, height;      /* pixels; 0 = 800 x 400, +150 per extra panel */
	int logy;               /* log-scale y axis of the main panel */
	double smooth;          /* EMA weight in [0, 1); 0 draws raw curves only */
};

/* TensorBoard's smoothing: out[i] = debiased exponential moving average of
 * y[0..i] with weight w in [0, 1) (w = 0 copies y).  out may be y. */
void loom_ema(const double *y, size_t n, double w, double *out);

/* SVG chart of n series (see above); NULL on allocation failure.  Every
 * coordinate is a number whatever the values (NaN points are left out); text
 * is escaped, with U+FFFD for what XML 1.0 cannot hold. */
char *loom_plot_svg(const struct loom_series *series, size_t n,
		    const struct loom_plot_opts *opts);

/* Sparkline of y[0..n) resampled to at most `width` cells, as UTF-8 block
 * characters (3 bytes each) into out; returns the bytes written (excluding
 * the NUL), always NUL-terminating when outlen > 0.  Any doubles: the finite
 * ones set the scale (+-DBL_MAX too), +-inf is at the top or the bottom,
 * NaN is left out (a cell of NaN only is a space). */
size_t loom_sparkline(const double *y, size_t n, size_t width, char *out,
		      size_t outlen);

#endif
