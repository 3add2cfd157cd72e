/* Fuzz target: loom_series_add_json (one line of a training log). */
#include <stdint.h>
#include <stdlib.h>

#include "loom_plot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loom_series s;
	char buf[64 * 3 + 1];
	loom_series_init(&s, "step", "loss");
	loom_series_add_json(&s, (const char *)data, size);
	loom_series_add_json(&s, (const char *)data, size);
	loom_sparkline(s.y, s.n, 64, buf, sizeof buf);
	char *svg = loom_plot_svg(&s, 1, NULL);
	free(svg);
	loom_series_release(&s);
	return 0;
}
