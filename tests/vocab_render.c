/* loom_vocab_render_gpt2: GPT-2's vocabulary rendered back to vocab.json +
 * merges.txt gives the shipped files' tokens and merges, and loads to the
 * same ids; a tiktoken vocabulary is refused. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "loom_bpe.h"
#include "loom_file.h"
#include "loom_vocab.h"
#include "tap.h"

int main(void)
{
	struct loom_vocab *v = loom_vocab_new(), *w = loom_vocab_new();
	struct loom_err err = {0};
	char *json = NULL, *merges = NULL, *enc = NULL, *bpe = NULL;
	size_t jl = 0, ml = 0, el = 0, bl = 0;
	is_int(loom_vocab_load_gpt2(v, "share/vocab/gpt2/encoder.json", "share/vocab/gpt2/vocab.bpe"),
	       0, "load gpt2");
	is_int(loom_vocab_render_gpt2(v, &json, &jl, &merges, &ml), 0, "render: %s",
	       loom_vocab_error(v));
	ok(loom_read_file("share/vocab/gpt2/encoder.json", &enc, &el, &err) == 0 &&
	   loom_read_file("share/vocab/gpt2/vocab.bpe", &bpe, &bl, &err) == 0, "read the originals");
	json_t *a = json_loads(json ? json : "", 0, NULL), *b = json_loads(enc ? enc : "", 0, NULL);
	ok(a && b && json_equal(a, b), "vocab.json holds encoder.json's 50257 tokens and ids");
	is_int(ml, bl, "merges.txt is as long as vocab.bpe");
	ok(merges && bpe && ml == bl && memcmp(merges, bpe, ml) == 0,
	   "merges.txt is vocab.bpe byte for byte (same order)");
	json_decref(a);
	json_decref(b);

	is_int(loom_vocab_load_gpt2_mem(w, json, jl, "vocab.json", merges, ml, "merges.txt"), 0,
	       "the rendered files load");
	ok(w->n_ids == v->n_ids && w->n_merges == v->n_merges && w->eot == v->eot,
	   "same ids, merges and <|endoftext|>");
	struct loom_bpe *e1 = loom_bpe_new(v), *e2 = loom_bpe_new(w);
	struct loom_ids i1 = {0}, i2 = {0};
	const char *text = "The history of loom, 1801: Jacquard's punched cards.<|endoftext|>";
	ok(loom_bpe_encode(e1, (const uint8_t *)text, strlen(text), 1, &i1) == 0 &&
	   loom_bpe_encode(e2, (const uint8_t *)text, strlen(text), 1, &i2) == 0 &&
	   i1.n == i2.n && i1.n > 5 && memcmp(i1.v, i2.v, i1.n * sizeof *i1.v) == 0,
	   "both encode a text to the same ids");
	loom_ids_release(&i1);
	loom_ids_release(&i2);
	loom_bpe_free(e1);
	loom_bpe_free(e2);
	free(json);
	free(merges);
	free(enc);
	free(bpe);

	/* a tiktoken vocabulary: "abc" splits as ab+c and a+bc, both of rank
	 * 258: no order for merges.txt */
	struct loom_vocab *t = loom_vocab_new();
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char tk[256 * 12 + 64];
	size_t at = 0;
	for (int i = 0; i < 256; i++)
		at += (size_t)snprintf(tk + at, sizeof tk - at, "%c%c== %d\n", b64[i >> 2],
				       b64[(i & 3) << 4], i);
	at += (size_t)snprintf(tk + at, sizeof tk - at, "YWI= 256\nYmM= 257\nYWJj 258\n");
	is_int(loom_vocab_load_tiktoken_mem(t, tk, at, "t.tiktoken"), 0, "load a tiktoken file: %s",
	       loom_vocab_error(t));
	json = merges = NULL;
	is_int(loom_vocab_render_gpt2(t, &json, &jl, &merges, &ml), LOOM_EINVAL,
	       "tiktoken: refused");
	ok(strstr(loom_vocab_error(t), "cannot be written as merges.txt") != NULL, "says why: %s",
	   loom_vocab_error(t));
	free(json);
	free(merges);
	loom_vocab_free(t);
	loom_vocab_free(v);
	loom_vocab_free(w);
	return done_testing();
}
