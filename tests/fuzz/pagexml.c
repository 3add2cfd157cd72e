/* Fuzz target: the XML page reader (loom_pagexml), fed in two pieces as a
 * whole document and as a multistream stream (synthetic root); every page
 * it reports must have NUL-terminated fields of the stated lengths. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom_dump.h"

static int on_page(void *ctx, const struct loom_page *pg)
{
	size_t *n = ctx;
	if (strlen(pg->title) > pg->title_len || pg->text[pg->text_len] != '\0' ||
	    !pg->redirect_title)
		abort();
	(*n)++;
	return 0;
}

static void on_site(void *ctx, const struct loom_dump_site *s)
{
	(void)ctx;
	if (!s->url_prefix || !s->base || strlen(s->url_prefix) > strlen(s->base))
		abort();
	(void)loom_dump_ns_name(s, 6);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int modes[] = { LOOM_PAGEXML_END_DOC, LOOM_PAGEXML_END_STREAM,
				     LOOM_PAGEXML_END_OPEN };
	for (int m = 0; m < 3; m++) {
		size_t pages = 0, half = size / 2;
		struct loom_pagexml *px = loom_pagexml_new(m == 1, on_page, on_site, &pages);
		if (!px)
			abort();
		int r = loom_pagexml_feed(px, (const char *)data, half);
		if (!r)
			r = loom_pagexml_feed(px, (const char *)data + half, size - half);
		if (!r)
			r = loom_pagexml_finish(px, modes[m]);
		if (r && !loom_pagexml_error(px)[0])
			abort(); /* every failure has a message */
		if (pages != loom_pagexml_pages(px))
			abort();
		loom_pagexml_free(px);
	}
	return 0;
}
