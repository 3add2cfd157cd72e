/* Unit tests for loom_decode_docs (lib/token/loom_decode.h): ids back to
 * text through a tiny byte-level BPE (a tiktoken rank file) and a tiny
 * WordPiece vocabulary, both made here: the end-of-text id kept as text
 * or turned into a separator, WordPiece documents starting without a
 * space, [SEP] dropped with skip_special, an unknown id named with its
 * position in the stream; no tool. */
#include <stdlib.h>
#include <string.h>

#include "loom_decode.h"
#include "loom_vocab.h"
#include "tap.h"

static const char *run(const struct loom_decode_opts *o, const uint32_t *ids, size_t n, int *rc)
{
	static char out[1024];
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	struct loom_err err;
	*rc = loom_decode_docs(o, ids, n, 100, &buf, &len, &cap, &err);
	snprintf(out, sizeof out, "%s%.*s", *rc ? err.msg : "", (int)len, buf ? (char *)buf : "");
	free(buf);
	return out;
}

int main(void)
{
	int rc;
	/* ranks: byte b is b, then 256 "ab"; 300 is unknown */
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char tk[256 * 12 + 16], *p = tk;
	for (int b = 0; b < 256; b++)
		p += sprintf(p, "%c%c== %d\n", b64[b >> 2], b64[(b & 3) << 4], b);
	p += sprintf(p, "YWI= 256\n");
	struct loom_vocab *v = loom_vocab_new();
	if (loom_vocab_load_tiktoken_mem(v, tk, (size_t)(p - tk), "t.tiktoken"))
		diag("%s", loom_vocab_error(v));
	struct loom_decode_opts o = { .bpe = loom_bpe_new(v), .eos = ' ', .sep = -1 };
	uint32_t ids[] = { 256, 'a', ' ', 'b', ' ', 256 };
	const char *s;
	is_str(run(&o, ids, 6, &rc), "aba b ab", "BPE, no separator: the eos id is text");
	o.sep = '\n';
	is_str(run(&o, ids, 6, &rc), "aba\nb\nab", "BPE, lines: each eos a newline");
	uint32_t bad[] = { 'a', ' ', 300 };
	s = run(&o, bad, 3, &rc);
	ok(rc < 0 && !strncmp(s, "id 300 at position 102 is not in the vocabulary", 47),
	   "an unknown id, with its position in the stream: %s", s);
	loom_bpe_free(o.bpe);
	loom_vocab_free(v);

	struct loom_wordpiece_opts wo;
	loom_wordpiece_opts_default(&wo);
	struct loom_wordpiece *w = loom_wordpiece_new();
	static const char vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n##s\n";
	if (loom_wordpiece_load_mem(w, vocab, sizeof vocab - 1, "vocab.txt", &wo))
		diag("%s", loom_wordpiece_error(w));
	o = (struct loom_decode_opts){ .wp = w, .eos = 3, .sep = '\n' };
	uint32_t wids[] = { 5, 6, 7, 3, 6, 5, 3 };
	is_str(run(&o, wids, 7, &rc), "hello worlds\nworld hello\n",
	       "WordPiece, lines: no space after a separator");
	o.sep = -1;
	o.skip_special = 1;
	loom_wordpiece_decode_reset(w);
	is_str(run(&o, wids, 7, &rc), "hello worlds world hello", "WordPiece, whole, skip_special: [SEP] dropped");
	loom_wordpiece_free(w);
	return done_testing();
}
