/* Unit tests for loom_plotlog: a JSON log and a TensorBoard event file
 * (written here with loom_tb) read into series, told apart by their first
 * bytes; an incomplete last line or record ignored and told; why a log
 * gives no point; a line that is not JSON refused naming the file and
 * line; no tool. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_plotlog.h"
#include "loom_tb.h"
#include "tap.h"

static struct loom_series s[2];

static int rd(const char *path, struct loom_plotlog_read *r, struct loom_err *err)
{
	for (int k = 0; k < 2; k++) {
		loom_series_release(&s[k]);
		loom_series_init(&s[k], "step", k ? "eval_loss" : "loss");
	}
	return loom_plotlog_read(path, s, 2, r, err);
}

static const char *put(const char *name, const char *text, size_t n)
{
	const char *p = tap_path(name);
	FILE *f = fopen(p, "w");
	fwrite(text, 1, n, f);
	fclose(f);
	return p;
}

static void case_json(void)
{
	struct loom_plotlog_read r;
	struct loom_err err;
	static const char log[] = "{\"step\":1,\"loss\":4.5}\n\n{\"step\":2,\"loss\":4.0,\"eval_loss\":4.2}\n"
				  "{\"lr\":0.1}\n{\"step\":3,\"lo";
	const char *p = put("log.jsonl", log, sizeof log - 1);
	is_int(rd(p, &r, &err), 0, "a JSON log");
	ok(r.kind == LOOM_PLOTLOG_JSON && r.points == 3 && r.lines == 5 && r.skipped == 1,
	   "3 points, 5 lines, 1 without the keys");
	is_str(r.found, "loss 2, eval_loss 1", "points a series");
	ok(s[0].n == 2 && s[0].x[1] == 2 && s[0].y[1] == 4.0, "loss at steps 1 and 2");
	ok(strstr(r.warn, "log.jsonl: line 5: incomplete last line ignored") != NULL, "%s", r.warn);
	ok(!r.why[0], "no why");

	p = put("bad.jsonl", "{\"step\":1,\"loss\":1}\nnot json\n{}\n", 30);
	is_int(rd(p, &r, &err), LOOM_EFORMAT, "a line that is not JSON");
	ok(strstr(err.msg, "bad.jsonl: line 2: column") != NULL, "%s", err.msg);

	p = put("nokeys", "{\"a\":1}\n", 8);
	is_int(rd(p, &r, &err), 0, "no line with the keys");
	ok(r.points == 0 && strstr(r.why, "nokeys: 1 JSON log line, none with the x key and a --y key "
					  "(--y 'loss', 'eval_loss', -x 'step')"), "%s", r.why);
	p = put("ws", " \n\n", 3);
	rd(p, &r, &err);
	ok(strstr(r.why, "ws: 2 JSON log lines, none with the x key") != NULL, "blank lines: %s", r.why);
	p = put("empty", "", 0);
	rd(p, &r, &err);
	ok(r.kind == LOOM_PLOTLOG_EMPTY &&
	   strstr(r.why, "empty: empty: neither a JSON log nor a TensorBoard event file"), "%s", r.why);
	ok(rd(tap_path("none"), &r, &err) < 0 && strstr(err.msg, "none"), "a missing file: %s", err.msg);
}

static void case_events(void)
{
	struct loom_plotlog_read r;
	struct loom_err err;
	struct loom_tb *tb = loom_tb_open(tap_path("tb"), &err);
	ok(tb != NULL, "an event file");
	loom_tb_scalar(tb, 1, "train/loss", 3.5);
	loom_tb_scalar(tb, 2, "train/loss", 3.25);
	loom_tb_scalar(tb, 2, "eval_loss", 3.0);
	loom_tb_scalar(tb, 2, "train/lr", 0.5);
	char path[4200];
	snprintf(path, sizeof path, "%s", loom_tb_path(tb));
	is_int(loom_tb_close(tb, &err), 0, "closed");
	is_int(rd(path, &r, &err), 0, "read");
	ok(r.kind == LOOM_PLOTLOG_EVENTS && r.points == 3 && s[0].n == 2 && s[1].n == 1,
	   "train/loss as loss, eval_loss by its tag; lr to no series");
	ok(s[0].x[1] == 2 && s[0].y[1] == 3.25, "x: the step");

	size_t len;
	char *buf = tap_slurp(&len, "%s", path);
	const char *cut = put("cut", buf, len - 5); /* into the lr record */
	is_int(rd(cut, &r, &err), 0, "an event file cut short");
	ok(r.points == 3 && strstr(r.warn, "; incomplete last record ignored"), "%s", r.warn);
	free(buf);

	loom_series_release(&s[0]);
	loom_series_init(&s[0], "step", "perplexity");
	loom_series_release(&s[1]);
	loom_series_init(&s[1], "step", "x");
	is_int(loom_plotlog_read(path, s, 2, &r, &err), 0, "keys no tag has");
	ok(!r.points && strstr(r.why, "a TensorBoard event file with no scalar of these keys "
					"(--y 'perplexity', 'x', -x 'step')"), "%s", r.why);
}

static void case_names_and_summary(void)
{
	char *paths[] = { "run1/log.jsonl", "run2/log.jsonl", "-", "a/b.jsonl" };
	char *n0 = loom_plotlog_run_name(paths, 4, 0), *n2 = loom_plotlog_run_name(paths, 4, 2),
	     *n3 = loom_plotlog_run_name(paths, 4, 3), *n1 = loom_plotlog_run_name(paths + 1, 1, 0);
	ok(!strcmp(n0, "run1/log") && !strcmp(n2, "stdin") && !strcmp(n3, "b") && !strcmp(n1, "log"),
	   "run names: the file name less .jsonl, the path when two share it");
	free(n0);
	free(n1);
	free(n2);
	free(n3);

	struct loom_series t[2];
	loom_series_init(&t[0], "step", "loss");
	loom_series_init(&t[1], "step", "eval_loss");
	t[0].run = t[1].run = "r";
	for (int i = 1; i <= 4; i++)
		loom_series_add(&t[0], i, 5 - i);
	char *text = loom_plotlog_summary(t, 2, 1, 4, "step");
	is_str(text, "loss              4 █▆▃▁ 1        min 1  (4 points, step 1..4)\n",
	       "summary: a line a series with points");
	free(text);
	text = loom_plotlog_summary(t, 2, 2, 4, "step");
	ok(!strncmp(text, "r loss ", 7), "several runs: the run first: %s", text);
	free(text);
	text = loom_plotlog_summary(t, 2, 1, 0, "step");
	is_str(text, "", "width 0: nothing");
	free(text);
	loom_series_release(&t[0]);
	loom_series_release(&t[1]);
}

int main(void)
{
	ok(tap_tmpdir() != NULL, "scratch dir");
	case_json();
	case_events();
	case_names_and_summary();
	loom_series_release(&s[0]);
	loom_series_release(&s[1]);
	return done_testing();
}
