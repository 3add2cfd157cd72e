/* bpe_common.c - what loom-bpe's subcommands share (tools/bpe.h): the
 * vocabulary loader, the --docs and --format values, the output file and
 * the version line. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "cli.h"
#include "loom_file.h"
#include "loom_pretok.h"

void load_tok(struct tok *t, const char *spec, int casing)
{
	struct loom_err err = { 0 };
	int wp = loom_wordpiece_spec(spec, &err);
	memset(t, 0, sizeof *t);
	if (wp < 0)
		cli_die("%s%s", wp == LOOM_ERANGE ? "--vocab " : "", err.msg);
	if (!wp) {
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
		return LOOM_DOCS_LINES;
	if (!strcmp(s, "nul"))
		return LOOM_DOCS_NUL;
	if (allow_jsonl && !strcmp(s, "jsonl"))
		return LOOM_DOCS_JSONL;
	if (!strcmp(s, "whole"))
		return LOOM_DOCS_WHOLE;
	cli_usage_error("--docs: '%s' is not lines, nul%s or whole", s, allow_jsonl ? ", jsonl" : "");
}

int parse_format(const char *s)
{
	enum loom_tokfmt f;
	if (!loom_tokfmt_parse(s, &f))
		return (int)f;
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

const char *bpe_versions(void)
{
	static char extra[128];
	snprintf(extra, sizeof extra, "jansson %s, Unicode %s", JANSSON_VERSION, loom_uc_version);
	return extra;
}
