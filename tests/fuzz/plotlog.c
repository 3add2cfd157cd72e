/* Fuzz target: loom_series_add_json (the lines of a training log) and the
 * chart of what it read: two runs, eval points, a panel, smoothing, log y,
 * and the input's first line (any bytes) as the title. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom_plot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *keys[3] = { "loss", "eval_loss", "lr" };
	struct loom_series s[6];
	char buf[64 * 3 + 1];
	for (int k = 0; k < 6; k++) {
		loom_series_init(&s[k], "step", keys[k % 3]);
		s[k].run = k < 3 ? "a" : "b";
		s[k].run_index = k / 3;
		s[k].panel = k % 3 == 2;
	}
	/* each line of the input, into run a; the whole input into run b */
	const char *p = (const char *)data, *end = p + size;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		loom_series_add_json(s, 3, p, len);
		p += len + 1;
	}
	loom_series_add_json(s + 3, 3, (const char *)data, size);
	loom_sparkline(s[0].y, s[0].n, 64, buf, sizeof buf);
	free(loom_plot_svg(s, 6, NULL));
	const char *nl = memchr(data, '\n', size);
	char *title = strndup((const char *)data, nl ? (size_t)(nl - (const char *)data) : size);
	struct loom_plot_opts o = { .title = title, .smooth = 0.6, .logy = 1, .width = 300 };
	free(loom_plot_svg(s, 6, &o));
	free(title);
	for (int k = 0; k < 6; k++)
		loom_series_release(&s[k]);
	return 0;
}
