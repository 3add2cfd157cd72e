/* bpe_decode.c - `loom-bpe decode`: token ids -> text (tools/bpe.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpe.h"
#include "cli.h"
#include "loom_bpe.h"
#include "loom_decode.h"
#include "loom_file.h"
#include "loom_tokin.h"
#include "loom_vocab.h"

static const char *vspec = "gpt2", *output, *eos_arg;
#define IDS_PER_READ (1u << 20)

static int fmt = FMT_DEFAULT, docs = LOOM_DOCS_WHOLE, skip_special;

static void on_format(const char *opt, const char *arg)
{
	(void)opt;
	fmt = parse_format(arg);
}

static void on_docs(const char *opt, const char *arg)
{
	(void)opt;
	docs = parse_docs(arg, 0);
}

static const struct cli_opt opts[] = {
	OPT_STRING(0, "vocab", &vspec, "V", "as for encode (default: gpt2)"),
	OPT_ENUM_CALLBACK('f', "format", on_format, "F", "u16 u32 text",
			  "input ids: u16 (default; u32 if the vocabulary\n"
			  "has more than 65536 ids) | u32 | text (decimal ids\n"
			  "separated by white space)"),
	OPT_ENUM_CALLBACK('d', "docs", on_docs, "MODE", "whole lines nul",
			  "whole (default): the end-of-text token prints as its\n"
			  "text; lines / nul: it prints as a newline / NUL,\n"
			  "so that encode --docs lines | decode --docs lines\n"
			  "gives the input back"),
	OPT_STRING('e', "eos", &eos_arg, "ID",
		   "the end-of-text token for --docs lines|nul\n"
		   "(default: <|endoftext|>; WordPiece: [SEP])"),
	OPT_BOOL(0, "skip-special", &skip_special,
		 "WordPiece: drop [PAD] [UNK] [CLS] [SEP] [MASK]\n"
		 "(HuggingFace's skip_special_tokens)"),
	OPT_STRING('o', "output", &output, "FILE", "write FILE atomically instead of stdout"),
	OPT_VERBOSE("the vocabulary loaded (source, size) and each\n"
		    "input file read with its ids, on stderr"),
	OPT_QUIET(NULL, "no summary on stderr (and no -v lines)"),
	OPT_END()
};

static const struct cli_cmd cmd = {
	.prog = "loom-bpe",
	.usage = "usage: loom-bpe decode [options] [FILE...]\n"
		 "Decode token ids from FILEs (or stdin) back into text on stdout.\n",
	.opts = opts,
	.footer = "An id outside the vocabulary is an error naming the id and its position.\n",
	.version = bpe_versions,
};

/* One decoding run: buffers, the output, the tokenizer and counts. */
struct run {
	struct out o;
	uint8_t *ob;
	uint32_t *ids;
	size_t olen, ocap;
	struct loom_decode_opts d;
	uint64_t pos, bytes_out;
};

static void decode_file(struct run *u, const char *file)
{
	const char *name = strcmp(file, "-") ? file : "(stdin)";
	struct loom_err err = { 0 };
	struct loom_tokin *t = loom_tokin_open(file, (enum loom_tokfmt)fmt, &err);
	uint64_t fpos = 0;     /* id index in this file */
	if (!t)
		cli_die("%s", err.msg);
	if (u->d.wp) /* each file starts a text */
		loom_wordpiece_decode_reset(u->d.wp);
	ssize_t nids;
	while ((nids = loom_tokin_read(t, u->ids, IDS_PER_READ)) > 0) {
		u->olen = 0;
		if (loom_decode_docs(&u->d, u->ids, (size_t)nids, fpos, &u->ob, &u->olen, &u->ocap,
				     &err)) {
			loom_outfile_abort(&u->o.f);
			if (err.code == LOOM_ENOMEM)
				cli_die("out of memory");
			cli_die("%s: %s", name, err.msg);
		}
		out_write(&u->o, u->ob, u->olen);
		u->bytes_out += u->olen;
		fpos += (uint64_t)nids;
		u->pos += (uint64_t)nids;
	}
	if (nids < 0) {
		loom_outfile_abort(&u->o.f);
		cli_die("%s", loom_tokin_error(t));
	}
	loom_tokin_free(t);
	cli_info("decode: %s: %llu ids", name, (unsigned long long)fpos);
}

int bpe_decode_main(int argc, char **argv)
{
	cli_parse(&cmd, argc, argv);
	struct tok t;
	load_tok(&t, vspec, LOOM_CASING_NONE);
	if (fmt == FMT_DEFAULT)
		fmt = t.n_ids <= 65536 ? LOOM_TOK_U16 : LOOM_TOK_U32;
	struct run u = { .d.eos = t.eos, .d.skip_special = skip_special };
	if (eos_arg)
		u.d.eos = (uint32_t)cli_u64("--eos", eos_arg, 0, UINT32_MAX);
	if (docs != LOOM_DOCS_WHOLE && u.d.eos == LOOM_VOCAB_NONE)
		cli_usage_error("--docs %s: the vocabulary has no %s; give --eos ID",
				docs == LOOM_DOCS_LINES ? "lines" : "nul", t.wp ? "[SEP]" : "<|endoftext|>");
	if (skip_special && !t.wp)
		cli_usage_error("--skip-special: vocabulary '%s' is byte-level BPE (it is for WordPiece)",
				vspec);
	u.d.sep = docs == LOOM_DOCS_WHOLE ? -1 : docs == LOOM_DOCS_NUL ? 0 : '\n';
	u.d.bpe = t.v ? loom_bpe_new(t.v) : NULL;
	u.d.wp = t.wp;
	if (!u.d.bpe && !u.d.wp)
		cli_die("out of memory");
	out_open(&u.o, output);
	static char *stdin_only[] = { "-" };
	char **files = argv + optind;
	int nfiles = argc - optind;
	if (!nfiles) {
		files = stdin_only;
		nfiles = 1;
	}
	u.ids = malloc(IDS_PER_READ * sizeof *u.ids);
	double t0 = loom_now();
	if (!u.ids)
		cli_die("out of memory");
	for (int fi = 0; fi < nfiles; fi++)
		decode_file(&u, files[fi]);
	out_commit(&u.o);
	double dt = loom_now() - t0;
	cli_summary("decode: %llu token%s, %llu bytes, %.2f MB/s", (unsigned long long)u.pos,
		    u.pos == 1 ? "" : "s", (unsigned long long)u.bytes_out,
		    dt > 0 ? u.bytes_out / 1e6 / dt : 0.0);
	free(u.ids);
	free(u.ob);
	loom_bpe_free(u.d.bpe);
	tok_free(&t);
	return 0;
}
