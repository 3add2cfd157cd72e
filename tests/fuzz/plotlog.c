/* Fuzz target: loom_series_add_json (one line of a training log). */
#include <stdint.h>
#include <stdlib.h>

#include "loom_plot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loom_series s[2];
	char buf[64 * 3 + 1];
	loom_series_init(&s[0], "step", "loss");
	loom_series_init(&s[1], "step", "eval_loss");
	loom_series_add_json(s, 2, (const char *)data, size);
	loom_series_add_json(s, 2, (const char *)data, size);
	loom_sparkline(s[0].y, s[0].n, 64, buf, sizeof buf);
	char *svg = loom_plot_svg(s, 2, NULL);
	free(svg);
	loom_series_release(&s[0]);
	loom_series_release(&s[1]);
	return 0;
}
