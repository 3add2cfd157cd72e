/* bpe_decode.c - `loom-bpe decode`: token ids -> text (tools/bpe.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpe.h"
#include "cli.h"
#include "loom_bpe.h"
#include "loom_file.h"
#include "loom_vocab.h"

static const char *vspec = "gpt2", *output, *eos_arg;
static int fmt = FMT_DEFAULT, docs = DOCS_WHOLE, skip_special;

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
	OPT_STRING(0, "vocab", &vspec, "V", "as for encode (default gpt2)"),
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
		   "(default <|endoftext|>; WordPiece: [SEP])"),
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

/* One decoding run: buffers, the output, the end-of-text id and counts. */
struct run {
	struct loom_bpe *e;
	struct loom_wordpiece *wp;
	struct out o;
	uint8_t *in, *ob;
	uint32_t *ids;
	size_t olen, ocap;
	uint32_t eos;
	uint8_t sepc;
	uint64_t pos, bytes_out;
};

/* The ids of in[0..n) (end: no more input follows) into u->ids; returns
 * how many, *used the bytes consumed.  A bad id: exit 1 naming it. */
static size_t parse_ids(struct run *u, const char *name, size_t n, int end, uint64_t fpos,
			size_t *used)
{
	const uint8_t *in = u->in;
	size_t nids = 0;
	if (fmt != FMT_TEXT) {
		size_t w = fmt == FMT_U16 ? 2 : 4;
		nids = n / w;
		for (size_t i = 0; i < nids; i++)
			u->ids[i] = w == 2 ? (uint32_t)in[2 * i] | (uint32_t)in[2 * i + 1] << 8
					   : (uint32_t)in[4 * i] | (uint32_t)in[4 * i + 1] << 8 |
						     (uint32_t)in[4 * i + 2] << 16 |
						     (uint32_t)in[4 * i + 3] << 24;
		*used = nids * w;
		if (end && *used != n) {
			loom_outfile_abort(&u->o.f);
			cli_die("%s: truncated: %zu trailing bytes after id %llu are not a whole %s id",
				name, n - *used, (unsigned long long)(fpos + nids),
				fmt == FMT_U16 ? "u16" : "u32");
		}
		return nids;
	}
	size_t i = 0;
	for (;;) {
		while (i < n && (in[i] == ' ' || in[i] == '\n' || in[i] == '\t' || in[i] == '\r'))
			i++;
		size_t st = i;
		uint64_t x = 0;
		while (i < n && in[i] >= '0' && in[i] <= '9' && i - st < 11)
			x = x * 10 + (in[i++] - '0');
		if (i == n && !end) {
			*used = st;
			return nids;
		}
		if (i == st && i == n) {
			*used = n;
			return nids;
		}
		if (i == st || (i < n && !(in[i] == ' ' || in[i] == '\n' || in[i] == '\t' ||
					   in[i] == '\r')) || x > UINT32_MAX) {
			loom_outfile_abort(&u->o.f);
			cli_die("%s: id %llu: not a decimal token id near \"%.12s\"", name,
				(unsigned long long)(fpos + nids), (const char *)in + st);
		}
		u->ids[nids++] = (uint32_t)x;
	}
}

/* Decode ids[0..nids) into u->ob, a separator for each end-of-text under
 * --docs lines|nul. */
static void decode_ids(struct run *u, const char *name, size_t nids, uint64_t fpos)
{
	u->olen = 0;
	size_t a = 0;
	for (size_t i = 0; i <= nids; i++) {
		if (i < nids && (docs == DOCS_WHOLE || u->ids[i] != u->eos))
			continue;
		if (u->wp ? loom_wordpiece_decode(u->wp, u->ids + a, i - a, fpos + a, skip_special, 1,
						  &u->ob, &u->olen, &u->ocap)
			  : loom_bpe_decode(u->e, u->ids + a, i - a, fpos + a, &u->ob, &u->olen,
					    &u->ocap)) {
			loom_outfile_abort(&u->o.f);
			cli_die("%s: %s", name, u->wp ? loom_wordpiece_error(u->wp) : loom_bpe_error(u->e));
		}
		/* WordPiece: the next document starts without a space */
		if (u->wp && i < nids)
			loom_wordpiece_decode(u->wp, NULL, 0, 0, 0, 1, &u->ob, &u->olen, &u->ocap);
		if (i < nids) {
			if (u->olen == u->ocap) {
				uint8_t *q = realloc(u->ob, u->ocap = u->ocap ? u->ocap * 2 : 4096);
				if (!q)
					cli_die("out of memory");
				u->ob = q;
			}
			u->ob[u->olen++] = u->sepc;
		}
		a = i + 1;
	}
}

static void decode_file(struct run *u, const char *file)
{
	const char *name = strcmp(file, "-") ? file : "(stdin)";
	int fd = strcmp(file, "-") ? open(file, O_RDONLY) : 0;
	size_t have = 0;       /* bytes carried (partial id / number) */
	uint64_t fpos = 0;     /* id index in this file */
	if (fd < 0)
		cli_die("cannot open '%s': %s", file, strerror(errno));
	for (;;) {
		ssize_t k = read(fd, u->in + have, CHUNK - have);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			cli_die("cannot read '%s': %s", name, strerror(errno));
		}
		size_t n = have + (size_t)k, used = 0;
		int end = k == 0;
		size_t nids = parse_ids(u, name, n, end, fpos, &used);
		decode_ids(u, name, nids, fpos);
		out_write(&u->o, u->ob, u->olen);
		u->bytes_out += u->olen;
		fpos += nids;
		u->pos += nids;
		memmove(u->in, u->in + used, n - used);
		have = n - used;
		if (end)
			break;
	}
	if (fd > 0)
		close(fd);
	cli_info("decode: %s: %llu ids", name, (unsigned long long)fpos);
}

int bpe_decode_main(int argc, char **argv)
{
	cli_parse(&cmd, argc, argv);
	struct tok t;
	load_tok(&t, vspec, CASE_ANY);
	if (fmt == FMT_DEFAULT)
		fmt = t.n_ids <= 65536 ? FMT_U16 : FMT_U32;
	struct run u = { .eos = t.eos };
	if (eos_arg)
		u.eos = (uint32_t)cli_u64("--eos", eos_arg, 0, UINT32_MAX);
	if (docs != DOCS_WHOLE && u.eos == LOOM_VOCAB_NONE)
		cli_usage_error("--docs %s: the vocabulary has no %s; give --eos ID",
				docs == DOCS_LINES ? "lines" : "nul", t.wp ? "[SEP]" : "<|endoftext|>");
	if (skip_special && !t.wp)
		cli_usage_error("--skip-special: vocabulary '%s' is byte-level BPE (it is for WordPiece)",
				vspec);
	u.sepc = docs == DOCS_NUL ? 0 : '\n';
	u.e = t.v ? loom_bpe_new(t.v) : NULL;
	u.wp = t.wp;
	if (!u.e && !u.wp)
		cli_die("out of memory");
	out_open(&u.o, output);
	static char *stdin_only[] = { "-" };
	char **files = argv + optind;
	int nfiles = argc - optind;
	if (!nfiles) {
		files = stdin_only;
		nfiles = 1;
	}
	u.in = malloc(CHUNK + 16);
	u.ids = malloc(CHUNK * sizeof *u.ids);
	double t0 = loom_now();
	if (!u.in || !u.ids)
		cli_die("out of memory");
	for (int fi = 0; fi < nfiles; fi++)
		decode_file(&u, files[fi]);
	out_commit(&u.o);
	double dt = loom_now() - t0;
	if (!cli_quiet)
		fprintf(stderr, "loom-bpe: decode: %llu tokens, %llu bytes, %.2f MB/s\n",
			(unsigned long long)u.pos, (unsigned long long)u.bytes_out,
			dt > 0 ? u.bytes_out / 1e6 / dt : 0.0);
	free(u.in);
	free(u.ids);
	free(u.ob);
	loom_bpe_free(u.e);
	tok_free(&t);
	return 0;
}
