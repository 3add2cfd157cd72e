/* bpe_train.c - `loom-bpe train`: learn byte-level BPE merges (see bpe.h) */
#include "bpe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "loom_bpe_train.h"
#include "loom_common.h"
#include "loom_reader.h"

struct train_ctx {
	struct loom_bpe_trainer *t;
	struct cli_progress prog;
	int docs;
	uint64_t read;
	size_t told;    /* merges last told under -v */
};

static void fail_trainer(struct train_ctx *c)
{
	cli_die("train: %s", loom_bpe_trainer_error(c->t));
}

static void read_input(struct train_ctx *c, const char *path)
{
	struct loom_reader rd;
	int fd = STDIN_FILENO, pending = 0;
	const char *name = path && strcmp(path, "-") ? path : "(stdin)";
	uint64_t before = c->read;

	if (path && strcmp(path, "-") && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		cli_die("cannot open '%s': %s", path, strerror(errno));
	if (loom_reader_init(&rd, fd, 1 << 20))
		cli_die("out of memory");
	for (;;) {
		struct loom_err e;
		ssize_t r = loom_reader_fill_err(&rd, 1, name, &e);
		if (r < 0)
			cli_die("%s", e.msg);
		if (r == 0)
			break;
		c->read += (uint64_t)r;
		if (loom_bpe_trainer_feed_docs(c->t, rd.buf + rd.start, (size_t)r,
					       c->docs == LOOM_DOCS_WHOLE ? -1 :
					       c->docs == LOOM_DOCS_NUL ? 0 : '\n', &pending) < 0)
			fail_trainer(c);
		rd.start = rd.end;
		if (cli_progress_due(&c->prog)) {
			struct loom_bpe_train_stats s;
			char b[32];
			loom_bpe_trainer_stats(c->t, &s);
			cli_progress_show(&c->prog, "train: counting %s, %llu distinct pre-tokens",
					  cli_bytes((double)c->read, b, sizeof b),
					  (unsigned long long)s.distinct);
		}
	}
	loom_reader_release(&rd);
	if (pending && loom_bpe_trainer_end_doc(c->t) < 0)
		fail_trainer(c);
	if (fd != STDIN_FILENO)
		close(fd);
	cli_info("train: read %s: %llu bytes", name, (unsigned long long)(c->read - before));
}

static void on_progress(void *ctx, size_t done, size_t target)
{
	struct train_ctx *c = ctx;
	if (done / 1000 > c->told / 1000) {
		cli_progress_done(&c->prog);
		cli_info("train: %zu merges of at most %zu", done, target);
		c->told = done;
	}
	if (cli_progress_due(&c->prog))
		cli_progress_show(&c->prog, "train: merges %zu/%zu", done, target);
}

static struct loom_bpe_train_opts o = { .min_frequency = 2 };
static struct train_ctx c = { .docs = LOOM_DOCS_LINES };
static const char **specials;
static size_t nspecials;
static int given_special;
static const char *outdir;

static void on_vocab_size(const char *opt, const char *arg)
{
	o.vocab_size = cli_u64(opt, arg, 1, 1u << 24);
}

static void on_special(const char *opt, const char *arg)
{
	(void)opt;
	given_special = 1;
	if (!*arg)
		return;
	specials = realloc(specials, (nspecials + 1) * sizeof *specials);
	if (!specials)
		cli_die("out of memory");
	specials[nspecials++] = arg;
}

static void on_docs(const char *opt, const char *arg)
{
	(void)opt;
	c.docs = parse_docs(arg, 0);
}

static const struct cli_opt opts[] = {
	OPT_CALLBACK('n', "vocab-size", on_vocab_size, "N",
		     "vocabulary size: 256 bytes + merges + specials"),
	OPT_U64('m', "min-frequency", &o.min_frequency, "N", 0, UINT64_MAX,
		"stop when the best pair occurs fewer than N times\n(default: 2)"),
	OPT_CALLBACK('s', "special", on_special, "TOKEN",
		     "special token, id after the merges; repeatable,\n"
		     "'' for none (default: <|endoftext|>)"),
	OPT_ENUM_CALLBACK('d', "docs", on_docs, "MODE", "lines nul whole",
			  "lines: one document per line (default); nul:\n"
			  "NUL-separated; whole: each input is one document"),
	OPT_STRING('o', "output", &outdir, "DIR", "output directory (created if missing)"),
	OPT_PROGRESS(NULL, "progress on stderr even when it is not a terminal"),
	OPT_VERBOSE("each input read, every 1000 merges, the files\n"
		    "written (on stderr)"),
	OPT_QUIET(NULL, "no summary on stderr (and no -v lines)"),
	OPT_END()
};

static const struct cli_cmd cmd = {
	.prog = "loom-bpe",
	.usage = "usage: loom-bpe train --vocab-size N -o DIR [options] [FILE...]\n"
		 "Learn byte-level BPE merges (GPT-2 pre-tokenization) from FILEs or stdin and\n"
		 "write DIR/encoder.json, DIR/vocab.bpe and DIR/tokenizer.json.\n",
	.opts = opts,
	.footer = "Ties between equally frequent pairs go to the smaller (left id, right id),\n"
		  "as in HuggingFace's BpeTrainer; see loom-bpe(1), TRAIN.\n",
	.version = cli_version_jansson,
};

static void print_summary(const struct loom_bpe_train_stats *s, double t0, double t1, double t2)
{
	struct rusage ru;
	char line[512];
	getrusage(RUSAGE_SELF, &ru);
	loom_bpe_train_summary(s, loom_now() - t0, t1 - t0, t2 - t1, (double)ru.ru_maxrss * 1024.0,
			       line, sizeof line);
	cli_warn("%s", line);
}

int bpe_train_main(int argc, char **argv)
{
	static const char *default_special[] = { "<|endoftext|>" };
	cli_parse(&cmd, argc, argv);
	if (!o.vocab_size)
		cli_usage_error("train: --vocab-size is required");
	if (!outdir || !*outdir)
		cli_usage_error("train: -o DIR is required");
	if (!given_special) {
		specials = default_special;
		nspecials = 1;
	}
	o.specials = specials;
	o.n_specials = nspecials;
	o.progress = on_progress;
	o.progress_ctx = &c;

	double t0 = loom_now();
	c.t = loom_bpe_trainer_new();
	if (!c.t)
		cli_die("out of memory");
	if (loom_bpe_trainer_check(c.t, &o) < 0)
		cli_usage_error("train: %s", loom_bpe_trainer_error(c.t));
	cli_progress_init(&c.prog, cli_force_progress);

	if (optind >= argc)
		read_input(&c, NULL);
	for (int i = optind; i < argc; i++)
		read_input(&c, argv[i]);
	double t1 = loom_now();
	if (loom_bpe_trainer_learn(c.t, &o) < 0) {
		cli_progress_done(&c.prog);
		fail_trainer(&c);
	}
	double t2 = loom_now();
	cli_progress_done(&c.prog);
	if (loom_bpe_trainer_write(c.t, outdir) < 0)
		fail_trainer(&c);

	struct loom_bpe_train_stats st;
	loom_bpe_trainer_stats(c.t, &st);
	cli_info("train: wrote %s/encoder.json, %s/vocab.bpe and %s/tokenizer.json: "
		 "%llu merges, vocabulary %llu", outdir, outdir, outdir,
		 (unsigned long long)st.merges, (unsigned long long)st.vocab);
	if (!cli_quiet && st.merges + 256 + nspecials < o.vocab_size)
		cli_warn("train: vocabulary is %llu, not %zu: no pair left that occurs at least "
			 "%llu times", (unsigned long long)st.vocab, o.vocab_size,
			 (unsigned long long)(o.min_frequency ? o.min_frequency : 1));
	if (!cli_quiet)
		print_summary(&st, t0, t1, t2);
	loom_bpe_trainer_free(c.t);
	if (given_special)
		free(specials);
	return 0;
}
