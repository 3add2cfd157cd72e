/* Fuzz target: the wikitext cleaner (loom_wikitext_clean), both option
 * sets; checks the output invariants: valid UTF-8 (sanitized), no empty
 * paragraph, no leading/trailing newline. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom_wikitext.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int mode = 0; mode < 2; mode++) {
		struct loom_wikitext_opts o = { mode, mode, 0 };
		struct loom_wikitext *w = loom_wikitext_new(&o);
		struct loom_wt_buf out = { 0 }, check = { 0 };
		struct loom_wikitext_info info;
		unsigned char carry[4];
		int nc = 0;
		if (!w)
			abort();
		if (loom_wikitext_clean(w, (const char *)data, size, &out, &info))
			abort();
		if (out.len && (out.p[0] == '\n' || out.p[out.len - 1] == '\n' ||
				memmem(out.p, out.len, "\n\n", 2)))
			abort();
		/* the output is valid UTF-8: sanitizing it changes nothing */
		if (loom_utf8_sanitize(out.p, out.len, &check, carry, &nc, 0) != 0 ||
		    check.len != out.len || (out.len && memcmp(check.p, out.p, out.len)))
			abort();
		loom_wt_buf_free(&out);
		loom_wt_buf_free(&check);
		loom_wikitext_free(w);
	}
	return 0;
}
