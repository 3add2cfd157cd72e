/* loom-bpe - byte-level BPE, exactly GPT-2's: encode | decode | train; the
 * subcommands are tools/bpe_encode.c, bpe_decode.c and bpe_train.c, what
 * they share is here (tools/bpe.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "bpe_train.h"
#include "cli.h"
#include "loom_bpe.h"
#include "loom_file.h"

static const char usage_main[] =
"usage: loom-bpe encode|decode|train [options] [FILE...]\n"
"Byte-level BPE tokenizer, exactly GPT-2's (tiktoken / HuggingFace ids).\n"
"  encode   text documents -> token ids       (loom-bpe encode --help)\n"
"  decode   token ids -> text                 (loom-bpe decode --help)\n"
"  train    learn a vocabulary from text      (loom-bpe train --help)\n"
"  -h, --help      this help;   -V, --version   versions\n";

/* ---- common ----------------------------------------------------------- */

struct loom_vocab *load_vocab(const char *spec)
{
	struct loom_vocab *v = loom_vocab_new();
	if (!v)
		cli_die("out of memory");
	if (loom_vocab_load_spec(v, spec))
		cli_die("%s", loom_vocab_error(v));
	if (cli_verbose) {
		char dir[4096];
		int shipped = !strcmp(spec, "gpt2") && !loom_share_path("vocab/gpt2", dir, sizeof dir);
		cli_info("vocabulary %s%s%s%s: %u tokens (ids 0..%u), %u merges, %u special%s", spec,
			 shipped ? " (" : "", shipped ? dir : "", shipped ? ")" : "", v->n_tokens,
			 v->n_ids - 1, v->n_merges, v->n_specials, v->n_specials == 1 ? "" : "s");
	}
	return v;
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
	/* cli_die exits: remove an unfinished output on any exit */
	atexit(loom_outfile_unlink_all);
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
	snprintf(extra, sizeof extra, "jansson %s, Unicode %s", JANSSON_VERSION, "15.0.0");
	return extra;
}

int main(int argc, char **argv)
{
	cli_init("loom-bpe", usage_main);
	if (argc < 2)
		cli_usage_error("missing command (encode, decode or train)");
	const char *cmd = argv[1];
	if (!strcmp(cmd, "encode"))
		return bpe_encode_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "decode"))
		return bpe_decode_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "train"))
		return bpe_train_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help"))
		cli_help();
	if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version"))
		cli_version(bpe_versions());
	cli_usage_error("unknown command '%s' (encode, decode or train)", cmd);
}
