/* loom_decode.c - ids back to text, a document at a time (loom_decode.h). */
#include "loom_decode.h"

#include "loom_buf.h"

int loom_decode_docs(const struct loom_decode_opts *o, const uint32_t *ids, size_t n,
		     uint64_t first, uint8_t **buf, size_t *len, size_t *cap, struct loom_err *err)
{
	uint8_t sepc = (uint8_t)o->sep;
	size_t a = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && (o->sep < 0 || ids[i] != o->eos))
			continue;
		int rc = o->wp ? loom_wordpiece_decode(o->wp, ids + a, i - a, first + a,
						       o->skip_special, 1, buf, len, cap)
			       : loom_bpe_decode(o->bpe, ids + a, i - a, first + a, buf, len, cap);
		if (rc < 0)
			return loom_err_set(err, rc, "%s", o->wp ? loom_wordpiece_error(o->wp)
								 : loom_bpe_error(o->bpe));
		if (i == n)
			break;
		/* WordPiece: the next document starts without a space */
		if (o->wp)
			loom_wordpiece_decode_reset(o->wp);
		if (loom_buf_put(buf, len, cap, &sepc, 1))
			return loom_err_set(err, LOOM_ENOMEM, "out of memory");
		a = i + 1;
	}
	return 0;
}
