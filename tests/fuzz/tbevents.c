/* Fuzz target: loom_tb_read (loom-plot's reader of TensorBoard event
 * files) on the input as a file, and on the input framed as one record (so
 * that the Event decoder, not only the CRC checks, sees any bytes). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom_tb.h"
#include "loom_tfrecord.h"

static int count(void *ctx, const struct loom_tb_event *ev)
{
	size_t *n = ctx;
	*n += ev->kind + (ev->text ? ev->text_len : 0) + (ev->tag ? strlen(ev->tag) : 0);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loom_err err;
	size_t n = 0;
	loom_tfr_sniff(data, size);
	loom_tb_read(data, size, "fuzz", count, &n, &err);
	uint8_t *rec = malloc(size + LOOM_TFR_OVERHEAD);
	if (!rec)
		return 0;
	loom_tfr_frame(rec, data, size);
	loom_tb_read(rec, size + LOOM_TFR_OVERHEAD, "fuzz", count, &n, &err);
	free(rec);
	return 0;
}
