/*
 * loom_plotlog.h - read a training log into series: loom-train's JSON
 * lines or a TensorBoard event file, told apart by the first bytes.
 *
 * Purpose: what loom-plot does with each log it is given.  A JSON log adds
 * a point to each series (loom_plot.h) whose x and y keys a line holds
 * (loom_series_add_json); blank lines are passed over.  An event file's
 * scalars go to the series whose y key is the tag, or the tag's JSON log
 * key (train/loss for loss, loom_tb_log_key), at x = the step (x key
 * "step") or the wall time ("wall_time").  A log still being written may
 * end inside its last line or record: that part is ignored and told in
 * r->warn.  A log that gives no point says why in r->why, in the words of
 * its kind (empty, white space only, lines without the keys, an event file
 * without scalars or without these tags), naming the file and the keys.
 *
 * loom_plotlog_run_name and loom_plotlog_summary give the legend's run
 * names and loom-plot's sparkline lines.
 *
 * Ownership: the caller's series receive the points; nothing else is kept;
 * the strings returned are malloc'd, the caller frees them.
 * Errors: 0 or negative LOOM_E* with a one-line message in *err naming the
 * file (and the line of a JSON line that is not an object); LOOM_ENOMEM.
 * Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_PLOTLOG_H
#define LOOM_PLOTLOG_H

#include <stddef.h>

#include "loom_common.h"
#include "loom_plot.h"

enum { LOOM_PLOTLOG_EMPTY, LOOM_PLOTLOG_EVENTS, LOOM_PLOTLOG_JSON };

struct loom_plotlog_read {
	int kind;               /* LOOM_PLOTLOG_* */
	size_t points;          /* added, all series together */
	size_t lines, skipped;  /* JSON: lines read, lines without the keys */
	char found[512];        /* JSON: "loss 3, eval_loss 1" (points a series) */
	char warn[LOOM_ERR_MAX + 64]; /* an incomplete end ignored, or "" */
	char why[1024];         /* no point: why, or "" */
};

/* Read path ("-": stdin, named so) into the ns series s. */
int loom_plotlog_read(const char *path, struct loom_series *s, size_t ns,
		      struct loom_plotlog_read *r, struct loom_err *err);

/* The legend's name of run i of paths[0..n): its file name without
 * .jsonl, or its path without it when two runs share a file name
 * (run1/log, run2/log); "-" is stdin.  malloc'd; NULL: out of memory. */
char *loom_plotlog_run_name(char *const *paths, int n, int i);

/* The summary of the series with points, a line each: [run (with several
 * runs),] key, first value, a sparkline of `width` cells, last value,
 * min, the points and the x range under xkey.  malloc'd ("" when width is
 * 0); NULL: out of memory. */
char *loom_plotlog_summary(const struct loom_series *s, size_t ns, int nruns, size_t width,
			   const char *xkey);

#endif
