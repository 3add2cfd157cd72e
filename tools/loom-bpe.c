/* loom-bpe - byte-level BPE, exactly GPT-2's: encode | decode | train; the
 * subcommands are tools/bpe_encode.c, bpe_decode.c and bpe_train.c, what
 * they share is here (tools/bpe.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpe.h"
#include "cli.h"
#include "loom_bpe.h"
#include "loom_file.h"
#include "loom_pretok.h"

static const char usage_main[] =
"usage: loom-bpe encode|decode|train [options] [FILE...]\n"
"Byte-level BPE tokenizer, exactly GPT-2's (tiktoken / HuggingFace ids),\n"
"and BERT's WordPiece (HuggingFace's BertTokenizerFast ids) to encode and decode.\n"
"  encode   text documents -> token ids       (loom-bpe encode --help)\n"
"  decode   token ids -> text                 (loom-bpe decode --help)\n"
"  train    learn a vocabulary from text      (loom-bpe train --help)\n"
"  -h, --help      this help;   -V, --version   versions\n";

/* ---- common ----------------------------------------------------------- */

/* Is spec WordPiece: bert-base-uncased, FILE.txt, a directory with
 * vocab.txt and no encoder.json, or a tokenizer.json that says WordPiece
 * anywhere (its loader then checks that the model is)? */
static int wordpiece_spec(const char *spec)
{
	struct stat st;
	size_t sl = strlen(spec);
	if (!strcmp(spec, "bert-base-uncased"))
		return 1;
	if (strchr(spec, ','))
		return 0;
	if (sl > 4 && !strcmp(spec + sl - 4, ".txt"))
		return 1;
	if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) {
		char enc[4096], txt[4096];
		if (snprintf(enc, sizeof enc, "%s/encoder.json", spec) >= (int)sizeof enc ||
		    snprintf(txt, sizeof txt, "%s/vocab.txt", spec) >= (int)sizeof txt)
			cli_die("--vocab '%.60s...': path too long", spec);
		return access(enc, F_OK) != 0 && access(txt, F_OK) == 0;
	}
	if (sl > 5 && !strcmp(spec + sl - 5, ".json") && stat(spec, &st) == 0 &&
	    S_ISREG(st.st_mode)) {
		char *buf;
		size_t len;
		struct loom_err err = { 0 };
		if (loom_file_read_bounded(spec, LOOM_FILE_MAX_LIST, &buf, &len, &err))
			cli_die("%s", err.msg);
		int wp = memmem(buf, len, "\"WordPiece\"", 11) != NULL;
		free(buf);
		return wp;
	}
	return 0;
}

void load_tok(struct tok *t, const char *spec, int casing)
{
	memset(t, 0, sizeof *t);
	if (!wordpiece_spec(spec)) {
		if (casing == LOOM_CASING_LOWER || casing == LOOM_CASING_CASED)
			cli_usage_error("--lowercase/--cased: '%s' is a byte-level BPE vocabulary (they are for WordPiece)",
					spec);
		t->v = loom_vocab_new();
		if (!t->v)
			cli_die("out of memory");
		if (loom_vocab_load_spec(t->v, spec))
			cli_die("%s", loom_vocab_error(t->v));
		t->n_ids = t->v->n_ids;
		t->eos = t->v->eot;
		if (cli_verbose) {
			char dir[4096];
			int shipped = !strcmp(spec, "gpt2") &&
				      !loom_share_path("vocab/gpt2", dir, sizeof dir);
			cli_info("vocabulary %s%s%s%s: %u tokens (ids 0..%u), %u merges, %u special%s",
				 spec, shipped ? " (" : "", shipped ? dir : "", shipped ? ")" : "",
				 t->v->n_tokens, t->v->n_ids - 1, t->v->n_merges, t->v->n_specials,
				 t->v->n_specials == 1 ? "" : "s");
		}
		return;
	}
	t->wp = cli_wordpiece_open(spec, casing, NULL);
	t->n_ids = loom_wordpiece_size(t->wp);
	t->eos = loom_wordpiece_id(t->wp, "[SEP]", 5);
}

void tok_free(struct tok *t)
{
	loom_vocab_free(t->v);
	loom_wordpiece_free(t->wp);
}

const uint8_t *tok_token(const struct tok *t, uint32_t id, size_t *n)
{
	if (t->wp)
		return (const uint8_t *)loom_wordpiece_token(t->wp, id, n);
	return loom_vocab_token(t->v, id, n);
}

int parse_docs(const char *s, int allow_jsonl)
{
	if (!strcmp(s, "lines"))
		return DOCS_LINES;
	if (!strcmp(s, "nul"))
		return DOCS_NUL;
	if (allow_jsonl && !strcmp(s, "jsonl"))
		return DOCS_JSONL;
	if (!strcmp(s, "whole"))
		return DOCS_WHOLE;
	cli_usage_error("--docs: '%s' is not lines, nul%s or whole", s, allow_jsonl ? ", jsonl" : "");
}

int parse_format(const char *s)
{
	if (!strcmp(s, "u16"))
		return FMT_U16;
	if (!strcmp(s, "u32"))
		return FMT_U32;
	if (!strcmp(s, "text"))
		return FMT_TEXT;
	cli_usage_error("--format: '%s' is not u16, u32 or text", s);
}

void out_open(struct out *o, const char *path)
{
	o->to_stdout = !path || !strcmp(path, "-");
	if (loom_outfile_open(&o->f, o->to_stdout ? "-" : path))
		cli_die("%s", loom_outfile_error(&o->f));
}

void out_write(struct out *o, const void *p, size_t n)
{
	if (!n)
		return;
	if (loom_outfile_write(&o->f, p, n)) {
		if (o->to_stdout && errno == EPIPE)
			exit(0); /* reader went away (| head) */
		const char *m = loom_outfile_error(&o->f);
		loom_outfile_abort(&o->f);
		cli_die("%s", m);
	}
}

void out_commit(struct out *o)
{
	if (loom_outfile_commit(&o->f))
		cli_die("%s", loom_outfile_error(&o->f));
}

/* ---- id formatting ---------------------------------------------------- */

/* Room for extra more bytes; b->p is never NULL after it (memcpy of 0
 * bytes to NULL is undefined: a carry of 0 bytes after a 1 MB line). */
void buf_need(struct buf *b, size_t extra)
{
	if (b->p && b->cap - b->n >= extra)
		return;
	size_t c = b->cap ? b->cap : 65536;
	while (c - b->n < extra)
		c *= 2;
	uint8_t *p = realloc(b->p, c);
	if (!p)
		cli_die("out of memory");
	b->p = p;
	b->cap = c;
}

void fmt_ids(struct buf *b, int fmt, const uint32_t *ids, size_t n, int *sp)
{
	if (fmt == FMT_U16) {
		buf_need(b, 2 * n);
		uint8_t *p = b->p + b->n;
		for (size_t i = 0; i < n; i++) {
			p[2 * i] = (uint8_t)ids[i];
			p[2 * i + 1] = (uint8_t)(ids[i] >> 8);
		}
		b->n += 2 * n;
	} else if (fmt == FMT_U32) {
		buf_need(b, 4 * n);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		memcpy(b->p + b->n, ids, 4 * n);
		b->n += 4 * n;
#else
		for (size_t i = 0; i < n; i++) {
			uint32_t x = ids[i];
			b->p[b->n++] = (uint8_t)x;
			b->p[b->n++] = (uint8_t)(x >> 8);
			b->p[b->n++] = (uint8_t)(x >> 16);
			b->p[b->n++] = (uint8_t)(x >> 24);
		}
#endif
	} else {
		buf_need(b, 11 * n);
		for (size_t i = 0; i < n; i++) {
			char t[10];
			int k = 0;
			uint32_t x = ids[i];
			if (*sp)
				b->p[b->n++] = ' ';
			*sp = 1;
			do {
				t[k++] = (char)('0' + x % 10);
				x /= 10;
			} while (x);
			while (k)
				b->p[b->n++] = (uint8_t)t[--k];
		}
	}
}
const char *bpe_versions(void)
{
	static char extra[128];
	snprintf(extra, sizeof extra, "jansson %s, Unicode %s", JANSSON_VERSION, loom_uc_version);
	return extra;
}

int main(int argc, char **argv)
{
	static const struct cli_subcmd cmds[] = {
		{ "encode", NULL, bpe_encode_main },
		{ "decode", NULL, bpe_decode_main },
		{ "train", NULL, bpe_train_main },
		{ NULL, NULL, NULL },
	};
	static const struct cli_cmds t = { "loom-bpe", usage_main, cmds, NULL, bpe_versions };
	return cli_dispatch(&t, argc, argv);
}
