/* loom-plot - training log (JSON lines, or a TensorBoard event file) -> SVG
 * chart + terminal sparkline (lib/train/loom_plotlog.h, loom_plot.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "loom_file.h"
#include "loom_plot.h"
#include "loom_plotlog.h"

#define MAX_SERIES 8
#define MAX_RUNS 16

/* Read a log into s[0..ns); returns its points, why none in why[n]. */
static size_t read_log(const char *path, struct loom_series *s, size_t ns, char *why, size_t n)
{
	struct loom_plotlog_read r;
	struct loom_err err;
	if (loom_plotlog_read(path, s, ns, &r, &err))
		cli_die("%s", err.msg);
	if (r.warn[0])
		cli_warn("%s", r.warn);
	const char *name = strcmp(path, "-") ? path : "stdin";
	if (r.kind == LOOM_PLOTLOG_EVENTS)
		cli_info("%s: TensorBoard events, %zu points", name, r.points);
	else if (r.kind == LOOM_PLOTLOG_JSON)
		cli_info("%s: %zu lines, %zu without the keys (skipped); points: %s", name, r.lines,
			 r.skipped, r.found);
	snprintf(why, n, "%s", r.why);
	return r.points;
}

static const char *output, *xkey = "step", *ykeys_arg = "loss,eval_loss";
static struct loom_plot_opts po = { .smooth = 0.6 };
static int panels;
static uint64_t spark = 60;

static const struct cli_opt opts[] = {
	OPT_STRING('o', "output", &output, "FILE", "write an SVG chart to FILE (atomically)"),
	OPT_STRING('x', "x", &xkey, "KEY", "x key (default: step)"),
	OPT_STRING('y', "y", &ykeys_arg, "KEY[,KEY...]",
		   "y keys, one series each (default: loss,eval_loss);\n"
		   "eval_* keys are drawn as points"),
	OPT_DOUBLE('s', "smooth", &po.smooth, "W", 0, 0.999,
		   "moving-average weight in [0, 1) drawn over the\n"
		   "faint raw curve (default: 0.6; 0 = raw only)"),
	OPT_BOOL('p', "panels", &panels, "add panels for lr and tokens_per_s"),
	OPT_STRING('t', "title", &po.title, "TEXT", "chart title"),
	OPT_STRING(0, "ylabel", &po.ylabel, "TEXT", "y axis label (default: the key and its unit)"),
	OPT_INT(0, "width", &po.width, "N", 100, 20000, "chart width in pixels (default: 800)"),
	OPT_INT(0, "height", &po.height, "N", 100, 20000,
		"chart height in pixels (default: 400, +150 a panel)"),
	OPT_BOOL(0, "logy", &po.logy, "logarithmic y axis"),
	OPT_U64('w', "spark", &spark, "N", 0, 1000, "sparkline width in cells (default: 60, 0 = none)"),
	OPT_VERBOSE("a line per log read on stderr: lines, lines without\n"
		    "the keys (skipped), points per series"),
	OPT_QUIET(NULL, "print no sparkline lines (same as --spark 0), no -v"),
	OPT_END()
};

static const struct cli_cmd cmd = {
	.prog = "loom-plot",
	.usage = "usage: loom-plot [options] [LOG.jsonl|EVENTS...]\n"
		 "Plot loom-train logs (one JSON object per line, or TensorBoard event files:\n"
		 "scalars by tag, train/loss as loss; stdin if no file, or -).\n"
		 "Each file is a run: several files are overlaid, one colour each.\n",
	.opts = opts,
	.footer = "Prints one line per series to stdout: [run,] key, first value, sparkline,\n"
		  "last value, min, points.  Lines without the keys are skipped; a line that\n"
		  "is not JSON is an error naming the file and line.\n",
	.version = cli_version_jansson,
};

int main(int argc, char **argv)
{
	cli_parse(&cmd, argc, argv);
	if (cli_quiet)
		spark = 0;
	char *ykeys = strdup(ykeys_arg);
	if (!ykeys)
		cli_die("out of memory");

	static const char *panel_keys[] = { "lr", "tokens_per_s" };
	const char *keys[MAX_SERIES];
	size_t nk = 0;
	for (char *save = NULL, *k = strtok_r(ykeys, ",", &save); k;
	     k = strtok_r(NULL, ",", &save)) {
		if (nk == MAX_SERIES)
			cli_usage_error("--y: at most %d keys", MAX_SERIES);
		keys[nk++] = k;
	}
	if (nk == 0)
		cli_usage_error("--y: no key given");
	char *stdin_only[] = { "-" };
	char **paths = optind < argc ? argv + optind : stdin_only;
	int nruns = optind < argc ? argc - optind : 1;
	if (nruns > MAX_RUNS)
		cli_usage_error("at most %d logs", MAX_RUNS);

	/* per run: the --y keys in the main panel, then one panel per rate */
	size_t per = nk + (panels ? 2 : 0), ns = per * (size_t)nruns;
	struct loom_series *s = calloc(ns, sizeof *s);
	char *names[MAX_RUNS];
	if (!s)
		cli_die("out of memory");
	for (int r = 0; r < nruns; r++) {
		names[r] = loom_plotlog_run_name(paths, nruns, r);
		if (!names[r])
			cli_die("out of memory");
		for (size_t k = 0; k < per; k++) {
			struct loom_series *sk = &s[(size_t)r * per + k];
			loom_series_init(sk, xkey, k < nk ? keys[k] : panel_keys[k - nk]);
			sk->run = names[r];
			sk->run_index = r;
			sk->panel = k < nk ? 0 : (int)(k - nk) + 1;
		}
		char why[1024];
		if (!read_log(paths[r], &s[(size_t)r * per], per, why, sizeof why)) {
			if (nruns == 1)
				cli_die("no points: %s", why);
			cli_warn("no points: %s", why);
		}
	}

	size_t total = 0;
	for (size_t k = 0; k < ns; k++)
		total += s[k].n;
	if (total == 0)
		cli_die("no points in any of the %d logs", nruns);

	char *lines = loom_plotlog_summary(s, ns, nruns, spark, xkey);
	if (!lines)
		cli_die("out of memory");
	fputs(lines, stdout);
	free(lines);

	if (output) {
		struct loom_err err;
		char *svg = loom_plot_svg(s, ns, &po);
		if (!svg)
			cli_die("out of memory");
		if (loom_write_file_atomic(output, svg, strlen(svg), &err) < 0)
			cli_die("%s", err.msg);
		free(svg);
	}
	for (size_t k = 0; k < ns; k++)
		loom_series_release(&s[k]);
	for (int r = 0; r < nruns; r++)
		free(names[r]);
	free(s);
	free(ykeys);
	if (fflush(stdout) != 0 && errno != EPIPE)
		cli_die("cannot write to stdout: %s", strerror(errno));
	return 0;
}
