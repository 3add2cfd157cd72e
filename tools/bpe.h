/*
 * bpe.h - what loom-bpe's subcommands share (tools/loom-bpe.c): the
 * vocabulary loader, the --docs and --format values, the output file and
 * the id formats.  Each subcommand is a file of its own, called by
 * loom-bpe's dispatcher with argv[0] == its name, parsing its own option
 * table: bpe_encode.c, bpe_decode.c, bpe_train.c.
 */
#ifndef LOOM_BPE_TOOL_H
#define LOOM_BPE_TOOL_H

#include <stddef.h>
#include <stdint.h>

#include "loom_file.h"
#include "loom_vocab.h"
#include "loom_wordpiece.h"

enum { DOCS_LINES, DOCS_NUL, DOCS_JSONL, DOCS_WHOLE };
enum { FMT_U16, FMT_U32, FMT_TEXT, FMT_DEFAULT };

#define CHUNK (1u << 20)

int bpe_encode_main(int argc, char **argv);
int bpe_decode_main(int argc, char **argv);
/* `loom-bpe train` learns byte-level BPE merges with libloom's
 * loom_bpe_train module and writes encoder.json, vocab.bpe and
 * tokenizer.json into the output directory.  Each returns the process exit
 * code (0 ok, 1 data/runtime failure, 2 usage) or exits through cli.h. */
int bpe_train_main(int argc, char **argv);

/* -V's second line */
const char *bpe_versions(void);

/* The tokenizer --vocab names: byte-level BPE (v) or WordPiece (wp). */
struct tok {
	struct loom_vocab *v;
	struct loom_wordpiece *wp;
	uint32_t n_ids;         /* ids 0 .. n_ids - 1 */
	uint32_t eos;           /* <|endoftext|> (BPE), [SEP] (WordPiece), or NONE */
};
/* Load --vocab SPEC, or exit 1 naming it; -v tells what was loaded.
 * WordPiece: bert-base-uncased (shipped), FILE.txt, a directory with
 * vocab.txt (and no encoder.json), a tokenizer.json whose model is
 * WordPiece, opened by cli_wordpiece_open with `casing` (encode: the
 * --lowercase/--cased given; decode: LOOM_CASING_NONE); anything else is
 * BPE (loom_vocab_load_spec), where a casing is a usage error. */
void load_tok(struct tok *t, const char *spec, int casing);
void tok_free(struct tok *t);
/* The text of id (a vocabulary entry; BPE: its bytes), for messages */
const uint8_t *tok_token(const struct tok *t, uint32_t id, size_t *n);
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
