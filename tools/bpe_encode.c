/* bpe_encode.c - `loom-bpe encode`: text documents -> token ids, in input
 * order, on one thread or several: options and reporting around libloom's
 * loom_encode_mt (tools/bpe.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bpe.h"
#include "cli.h"
#include "loom_encode_mt.h"
#include "loom_vocab.h"

static const char *vspec = "gpt2", *eos_arg, *output;
static int docs = LOOM_DOCS_LINES, fmt = FMT_DEFAULT, allow_special, threads = 1, force;
static uint64_t min_tokens = 1;
static const char *field = "text";
static uint32_t eos;

static void on_docs(const char *opt, const char *arg)
{
	(void)opt;
	docs = parse_docs(arg, 1);
}

static void on_format(const char *opt, const char *arg)
{
	(void)opt;
	fmt = parse_format(arg);
}

static const struct cli_opt opts[] = {
	OPT_STRING(0, "vocab", &vspec, "V",
		   "gpt2 (default, shipped), a directory with\n"
		   "encoder.json + vocab.bpe, ENCODER.json,VOCAB.bpe,\n"
		   "a HuggingFace tokenizer.json (FILE.json; byte-level\n"
		   "BPE, its ids) or a tiktoken rank file NAME.tiktoken;\n"
		   "WordPiece: bert-base-uncased (shipped), a vocab.txt\n"
		   "(FILE.txt or a directory holding it) or a\n"
		   "tokenizer.json with a WordPiece model"),
	OPT_CASING(),
	OPT_ENUM_CALLBACK('d', "docs", on_docs, "MODE", "lines nul jsonl whole",
			  "lines: one document per line (default); nul:\n"
			  "NUL-separated (keeps newlines); jsonl: one JSON\n"
			  "object per line, text in --field; whole: each\n"
			  "input file is one document"),
	OPT_STRING(0, "field", &field, "NAME", "the JSON field with the text (default: text)"),
	OPT_STRING('e', "eos", &eos_arg, "ID|none",
		   "token appended after each document (default: the\n"
		   "vocabulary's <|endoftext|>; WordPiece: [SEP])"),
	OPT_U64('m', "min-tokens", &min_tokens, "N", 0, UINT32_MAX,
		"drop documents with fewer than N tokens (default: 1;\n"
		"empty documents are dropped)"),
	OPT_ENUM_CALLBACK('f', "format", on_format, "F", "u16 u32 text",
			  "u16 | u32 (little-endian) | text (one document per\n"
			  "line); default: u16 (u32 if the vocabulary has more\n"
			  "than 65536 ids), text when stdout is a terminal"),
	OPT_BOOL(0, "allow-special", &allow_special,
		 "recognise special tokens (<|endoftext|>) in the\n"
		 "text; by default they are plain text (BPE only)"),
	OPT_INT('j', "threads", &threads, "N", 1, 256,
		"encoding threads (default: 1); output order is kept"),
	OPT_STRING('o', "output", &output, "FILE", "write FILE atomically instead of stdout"),
	OPT_BOOL(0, "force", &force, "write binary ids to a terminal"),
	OPT_PROGRESS(NULL, "progress on stderr even when it is not a terminal"),
	OPT_VERBOSE("the vocabulary loaded (source, size) and each\n"
		    "input file read, on stderr"),
	OPT_QUIET(NULL, "no summary on stderr (and no -v lines)"),
	OPT_END()
};

static const struct cli_cmd cmd = {
	.prog = "loom-bpe",
	.usage = "usage: loom-bpe encode [options] [FILE...]\n"
		 "Encode documents from FILEs (or stdin) into token ids on stdout.\n",
	.opts = opts,
	.footer = "Summary on stderr: documents, tokens, bytes, tokens per byte, MB/s.\n",
	.version = bpe_versions,
};

/* --eos and --format against the vocabulary (usage errors) */
static void settle_eos_format(const struct tok *t)
{
	eos = t->eos;
	if (t->wp && allow_special)
		cli_usage_error("--allow-special: vocabulary '%s' is WordPiece, whose [CLS] [SEP] ... "
				"are not looked for in the text", vspec);
	if (eos_arg) {
		if (!strcmp(eos_arg, "none"))
			eos = LOOM_VOCAB_NONE;
		else
			eos = (uint32_t)cli_u64("--eos", eos_arg, 0, UINT32_MAX);
		if (eos != LOOM_VOCAB_NONE &&
		    (eos >= t->n_ids || (t->v && !t->v->present[eos])))
			cli_usage_error("--eos %s: not a token of vocabulary '%s' (%u ids)", eos_arg,
					vspec, t->n_ids);
	} else if (eos == LOOM_VOCAB_NONE) { /* the default is missing: not dropped silently */
		cli_usage_error("vocabulary '%s' has no %s, the default end-of-document token: give "
				"--eos ID, or --eos none for documents without one", vspec,
				t->wp ? "[SEP]" : "<|endoftext|>");
	}
	int tty = !output && isatty(1);
	if (fmt == FMT_DEFAULT)
		fmt = tty ? LOOM_TOK_TEXT : t->n_ids <= 65536 ? LOOM_TOK_U16 : LOOM_TOK_U32;
	if (fmt == LOOM_TOK_U16 && t->n_ids > 65536) {
		uint32_t big = 65536;
		while (t->v && !t->v->present[big])
			big++;
		size_t tl;
		const uint8_t *tb = tok_token(t, big, &tl);
		char name[130];
		tl = tl > 60 ? 60 : tl;
		if (t->v)
			tl = loom_gpt2_bytes_to_str(tb, tl, name);
		else
			memcpy(name, tb, tl);
		name[tl] = 0;
		cli_die("--format u16: vocabulary '%s': entry \"%s\" has id %u, beyond 65535; use --format u32",
			vspec, name, big);
	}
	if (fmt != LOOM_TOK_TEXT && !output)
		cli_no_binary_tty(1, force);
}

/* The output and the progress line, for loom_encode_mt's callbacks. */
struct run {
	struct out o;
	struct cli_progress prog;
};

static int write_ids(void *ctx, const void *p, size_t n)
{
	out_write(&((struct run *)ctx)->o, p, n); /* exits on a failure */
	return 0;
}

static void on_file(void *ctx, const char *name)
{
	(void)ctx;
	cli_info("encode: reading %s", name);
}

static void show_progress(void *ctx, const struct loom_encode_mt_stats *st)
{
	struct run *u = ctx;
	if (cli_progress_due(&u->prog))
		cli_progress_show(&u->prog, "encode: %llu documents, %.1f MB",
				  (unsigned long long)st->docs, st->bytes / 1e6);
}

int bpe_encode_main(int argc, char **argv)
{
	cli_parse(&cmd, argc, argv);
	static struct tok t;
	load_tok(&t, vspec, cli_casing);
	settle_eos_format(&t);

	static struct run u;
	struct loom_encode_mt_opts eo = {
		.vocab = t.v, .wp = t.wp, .docs = (enum loom_docs)docs,
		.fmt = (enum loom_tokfmt)fmt, .allow_special = allow_special, .eos = eos,
		.min_tokens = min_tokens, .field = field, .threads = threads,
		.write = write_ids, .on_file = on_file, .progress = show_progress, .ctx = &u,
	};
	struct loom_err err = { 0 };
	struct loom_encode_mt *m = loom_encode_mt_new(&eo, &err);
	if (!m)
		cli_die("%s", err.msg);
	static const char *stdin_only[] = { "-" };
	int nfiles = argc - optind;
	const char *const *files = nfiles ? (const char *const *)argv + optind : stdin_only;
	out_open(&u.o, output);
	cli_progress_init(&u.prog, cli_force_progress);
	double t0 = loom_now();
	if (loom_encode_mt_run(m, files, nfiles ? (size_t)nfiles : 1)) {
		loom_outfile_abort(&u.o.f);
		cli_die("%s", loom_encode_mt_error(m));
	}
	out_commit(&u.o);
	cli_progress_done(&u.prog);
	double dt = loom_now() - t0;
	struct loom_encode_mt_stats st;
	loom_encode_mt_get_stats(m, &st);
	cli_summary("encode: %llu document%s (%llu dropped), %llu tokens, %llu bytes, "
		    "%.4f tokens/byte, %.2f MB/s",
		    (unsigned long long)st.docs, st.docs == 1 ? "" : "s",
		    (unsigned long long)st.dropped,
		    (unsigned long long)st.tokens, (unsigned long long)st.bytes,
		    st.bytes ? (double)st.tokens / (double)st.bytes : 0.0,
		    dt > 0 ? st.bytes / 1e6 / dt : 0.0);
	loom_encode_mt_free(m);
	tok_free(&t);
	return 0;
}
