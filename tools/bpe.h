/*
 * bpe.h - what loom-bpe's subcommands share (tools/loom-bpe.c): the
 * vocabulary loader, the --docs and --format values, the output file and
 * the id formats.  Each subcommand is a file of its own, called by
 * loom-bpe's dispatcher with argv[0] == its name, parsing its own option
 * table: bpe_encode.c, bpe_decode.c, bpe_train.c (bpe_train.h).
 */
#ifndef LOOM_BPE_TOOL_H
#define LOOM_BPE_TOOL_H

#include <stddef.h>
#include <stdint.h>

#include "loom_file.h"
#include "loom_vocab.h"

enum { DOCS_LINES, DOCS_NUL, DOCS_JSONL, DOCS_WHOLE };
enum { FMT_U16, FMT_U32, FMT_TEXT, FMT_DEFAULT };

#define CHUNK (1u << 20)

int bpe_encode_main(int argc, char **argv);
int bpe_decode_main(int argc, char **argv);

/* -V's second line */
const char *bpe_versions(void);

/* --vocab SPEC, or exit 1 naming it; -v tells what was loaded */
struct loom_vocab *load_vocab(const char *spec);
/* --docs and --format values, or a usage error (exit 2) */
int parse_docs(const char *s, int allow_jsonl);
int parse_format(const char *s);

/* The output: a file written atomically, or stdout (EPIPE: exit 0). */
struct out {
	struct loom_outfile f;
	int to_stdout;
};
void out_open(struct out *o, const char *path);
void out_write(struct out *o, const void *p, size_t n);
void out_commit(struct out *o);

/* A growing byte buffer (exit 1 when out of memory). */
struct buf {
	uint8_t *p;
	size_t n, cap;
};
void buf_need(struct buf *b, size_t extra);
/* Append ids in format fmt; for text, *sp says a space is due first. */
void fmt_ids(struct buf *b, int fmt, const uint32_t *ids, size_t n, int *sp);

#endif
