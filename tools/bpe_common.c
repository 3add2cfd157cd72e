/* bpe_common.c - what loom-bpe's subcommands share (tools/bpe.h): the
 * vocabulary loader, the --docs and --format values, the output file and
 * the version line. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpe.h"
#include "cli.h"
#include "loom_file.h"
#include "loom_pretok.h"

/* A WordPiece spec: its vocab.txt into path, or the tokenizer.json
 * (*json set); 0 if spec is not WordPiece. */
static int wordpiece_spec(const char *spec, char *path, size_t n, int *json)
{
	struct stat st;
	size_t sl = strlen(spec);
	*json = 0;
	int bert = !strcmp(spec, "bert-base-uncased");
	if (!bert && strchr(spec, ','))
		return 0;
	if (bert || (sl > 4 && !strcmp(spec + sl - 4, ".txt"))) {
		if (loom_wordpiece_vocab_path(spec, path, n)) {
			if (bert)
				cli_die("vocabulary 'bert-base-uncased' not found in share/vocab/bert-base-uncased (set LOOM_SHARE)");
			cli_die("--vocab %.60s...: path too long", spec);
		}
		return 1;
	}
	if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) {
		char enc[4096];
		snprintf(enc, sizeof enc, "%s/encoder.json", spec);
		if (snprintf(path, n, "%s/vocab.txt", spec) >= (int)n)
			cli_die("--vocab '%s': path too long", spec);
		return access(enc, F_OK) != 0 && access(path, F_OK) == 0;
	}
	if (sl > 5 && !strcmp(spec + sl - 5, ".json") && stat(spec, &st) == 0 &&
	    S_ISREG(st.st_mode)) {
		/* a tokenizer.json: WordPiece when it says so anywhere (its
		 * loader then checks that the model is) */
		char *buf;
		size_t len;
		struct loom_err err = { 0 };
		if (loom_file_read_bounded(spec, LOOM_FILE_MAX_LIST, &buf, &len, &err))
			cli_die("%s", err.msg);
		*json = memmem(buf, len, "\"WordPiece\"", 11) != NULL;
		free(buf);
		snprintf(path, n, "%s", spec);
		return *json;
	}
	return 0;
}

void load_tok(struct tok *t, const char *spec, int lc)
{
	char path[4096];
	int json;
	memset(t, 0, sizeof *t);
	if (!wordpiece_spec(spec, path, sizeof path, &json)) {
		if (lc == CASE_LOWER || lc == CASE_CASED)
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
	struct loom_wordpiece_opts o;
	loom_wordpiece_opts_default(&o);
	if (!json) {
		if (lc == CASE_ANY) {
			lc = CASE_CASED;
		} else if (lc == CASE_AUTO) {
			const char *unc = strstr(path, "uncased");
			if (unc)
				lc = CASE_LOWER;
			else if (strstr(path, "cased") || access(path, F_OK) != 0)
				lc = CASE_CASED; /* (a missing file: its error first) */
			else
				cli_usage_error("--vocab %s: a vocab.txt does not say whether its model lower-cases: give --lowercase (as bert-base-uncased) or --cased",
						spec);
		}
		o.lowercase = lc == CASE_LOWER;
	} else if (lc == CASE_LOWER || lc == CASE_CASED) {
		cli_usage_error("--lowercase/--cased: the normalizer of tokenizer.json '%s' says whether it lower-cases",
				spec);
	}
	t->wp = loom_wordpiece_new();
	if (!t->wp)
		cli_die("out of memory");
	if (json ? loom_wordpiece_load_hf(t->wp, path) : loom_wordpiece_load(t->wp, path, &o))
		cli_die("%s", loom_wordpiece_error(t->wp));
	t->n_ids = loom_wordpiece_size(t->wp);
	t->eos = loom_wordpiece_id(t->wp, "[SEP]", 5);
	cli_info("vocabulary %s (%s): %u WordPiece tokens (ids 0..%u)%s", spec, path, t->n_ids,
		 t->n_ids - 1, json ? "" : o.lowercase ? ", lower-cased" : ", cased");
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
