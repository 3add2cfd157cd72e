/* loom-plot - training log (JSON lines) -> SVG chart + terminal sparkline. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "loom_file.h"
#include "loom_plot.h"

static const char usage[] =
	"usage: loom-plot [options] [LOG.jsonl...]\n"
	"Plot a loom-train log (one JSON object per line; stdin if no file).\n"
	"  -o, --output FILE     write an SVG chart to FILE (atomically)\n"
	"  -x, --x KEY           x key (default: step)\n"
	"  -y, --y KEY[,KEY...]  y keys, one series each (default: loss,eval_loss)\n"
	"  -t, --title TEXT      chart title\n"
	"      --width N         chart width in pixels (default 800)\n"
	"      --height N        chart height in pixels (default 400)\n"
	"      --logy            logarithmic y axis\n"
	"  -w, --spark N         sparkline width in cells (default 60, 0 = none)\n"
	"  -h, --help            this help\n"
	"  -V, --version         version\n"
	"Prints one line per series to stdout: key, first value, sparkline, last\n"
	"value, min, points.  Lines without the keys are skipped; a line that is\n"
	"not JSON is an error naming the file and line.\n";

#define MAX_SERIES 8

static void read_log(const char *path, struct loom_series *s, size_t ns)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t len;
	if (!f)
		cli_die("cannot open '%s': %s", path, strerror(errno));
	while ((len = getline(&line, &cap, f)) > 0) {
		lineno++;
		if (strspn(line, " \t\r\n") == (size_t)len)
			continue;
		int rc = loom_series_add_json(s, ns, line, (size_t)len);
		if (rc == LOOM_EFORMAT) {
			/* a log still being written may end mid-line */
			if (line[len - 1] != '\n' && feof(f)) {
				cli_warn("%s: line %zu: incomplete last line ignored", path, lineno);
				break;
			}
			cli_die("%s: line %zu: %s", path, lineno, s[0].err.msg);
		}
		if (rc < 0)
			cli_die("%s: %s", path, s[0].err.msg);
	}
	if (ferror(f))
		cli_die("cannot read '%s': %s", path, strerror(errno));
	free(line);
	if (f != stdin)
		fclose(f);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "x", required_argument, NULL, 'x' },
		{ "y", required_argument, NULL, 'y' },
		{ "title", required_argument, NULL, 't' },
		{ "width", required_argument, NULL, 1 },
		{ "height", required_argument, NULL, 2 },
		{ "logy", no_argument, NULL, 3 },
		{ "spark", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	const char *output = NULL, *xkey = "step";
	char *ykeys = strdup("loss,eval_loss");
	struct loom_plot_opts po = { 0 };
	size_t spark = 60;
	int c;

	cli_init("loom-plot", usage);
	while ((c = getopt_long(argc, argv, "o:x:y:t:w:hV", opts, NULL)) != -1) {
		switch (c) {
		case 'o': output = optarg; break;
		case 'x': xkey = optarg; break;
		case 'y': free(ykeys); ykeys = strdup(optarg); break;
		case 't': po.title = optarg; break;
		case 1: po.width = (int)cli_u64("--width", optarg, 100, 20000); break;
		case 2: po.height = (int)cli_u64("--height", optarg, 100, 20000); break;
		case 3: po.logy = 1; break;
		case 'w': spark = cli_u64("--spark", optarg, 0, 1000); break;
		case 'h': cli_help();
		case 'V': cli_version("jansson " JANSSON_VERSION);
		default: cli_bad_option();
		}
	}

	struct loom_series s[MAX_SERIES];
	size_t ns = 0;
	for (char *save = NULL, *k = strtok_r(ykeys, ",", &save); k;
	     k = strtok_r(NULL, ",", &save)) {
		if (ns == MAX_SERIES)
			cli_usage_error("--y: at most %d keys", MAX_SERIES);
		loom_series_init(&s[ns++], xkey, k);
	}
	if (ns == 0)
		cli_usage_error("--y: no key given");

	if (optind == argc)
		read_log("-", s, ns);
	for (int i = optind; i < argc; i++)
		read_log(argv[i], s, ns);

	size_t total = 0;
	for (size_t k = 0; k < ns; k++)
		total += s[k].n;
	if (total == 0)
		cli_die("no points: no line has both '%s' and one of the --y keys", xkey);

	char *buf = malloc(spark * 3 + 1);
	for (size_t k = 0; k < ns && spark; k++) {
		if (s[k].n == 0)
			continue;
		double mn = s[k].y[0];
		for (size_t i = 1; i < s[k].n; i++)
			mn = s[k].y[i] < mn ? s[k].y[i] : mn;
		loom_sparkline(s[k].y, s[k].n, spark, buf, spark * 3 + 1);
		printf("%-10s %8.4g %s %-8.4g min %.4g  (%zu points, %s %g..%g)\n",
		       s[k].ykey, s[k].y[0], buf, s[k].y[s[k].n - 1], mn, s[k].n, xkey,
		       s[k].x[0], s[k].x[s[k].n - 1]);
	}
	free(buf);

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
	free(ykeys);
	if (fflush(stdout) != 0 && errno != EPIPE)
		cli_die("cannot write to stdout: %s", strerror(errno));
	return 0;
}
