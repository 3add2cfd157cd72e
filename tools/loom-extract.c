/* loom-extract - MediaWiki XML dump -> clean article text (lines, text, jsonl,
 * doc) in dump order: the options and messages around lib/wiki/loom_extract.h. */
#include <archive.h>
#include <expat.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "loom_dump.h"
#include "loom_extract.h"
#include "loom_file.h"

struct ctx {
	struct loom_extract_opts xo;
	struct loom_extract *x;
	struct loom_outfile out;
	struct loom_dump *dump;
	struct cli_progress prog;
	double t0;
};

/* Read share/wiki/NAME into the extractor's tables. */
static void load_table(struct ctx *c, const char *name, int kind)
{
	char rel[64], path[4096];
	struct loom_err err;
	snprintf(rel, sizeof rel, "wiki/%s", name);
	if (loom_share_path(rel, path, sizeof path))
		cli_die("share/%s not found (set LOOM_SHARE)", rel);
	if (loom_extract_load_table(c->x, path, kind, &err))
		cli_die("%s", err.msg);
}

static void tell_skip(void *ud, int level, const char *msg)
{
	(void)ud;
	if (level == LOOM_EXTRACT_WARN)
		cli_warn("%s", msg);
	else
		cli_info("%s", msg);
}

static void show_progress(struct ctx *c, int force)
{
	if (!c->prog.enabled || (!force && !cli_progress_due(&c->prog)))
		return;
	struct loom_dump_stats st;
	char a[32], b[32];
	loom_dump_stats(c->dump, &st);
	double dt = loom_now() - c->t0, rate = dt > 0 ? st.bytes_in / dt : 0;
	char d[32], eta[40] = "";
	if (st.size_in && rate > 0 && st.bytes_in <= st.size_in)
		snprintf(eta, sizeof eta, ", ETA %s",
			 cli_duration((st.size_in - st.bytes_in) / rate, d, sizeof d));
	cli_progress_show(&c->prog, "%llu pages, %llu articles, %s of %s, %.1f MB/s%s",
			  (unsigned long long)st.pages, (unsigned long long)st.stat[LOOM_EXTRACT_S_ARTICLES],
			  cli_bytes(st.bytes_in, a, sizeof a),
			  st.size_in ? cli_bytes(st.size_in, b, sizeof b) : "?", rate / 1e6, eta);
}

static int page_fn(void *vc, int worker, const struct loom_dump_site *site,
		   const struct loom_page *pg, struct loom_dump_out *out)
{
	return loom_extract_page(((struct ctx *)vc)->x, worker, site, pg, out);
}

static int write_fn(void *vc, const struct loom_dump_out *out)
{
	struct ctx *c = vc;
	if (out->buf.len && loom_outfile_write(&c->out, out->buf.p, out->buf.len))
		return LOOM_EIO;
	show_progress(c, 0);
	return 0;
}

static void parse_namespaces(struct ctx *c, const char *arg)
{
	char *s = strdup(arg), *save = NULL;
	c->xo.nns = 0;
	for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		int neg = t[0] == '-';
		if (loom_parse_u64(t + neg, 0, 1u << 30, &v))
			cli_usage_error("--namespaces: '%s' is not a namespace number", t);
		if (c->xo.nns == LOOM_EXTRACT_MAX_NS)
			cli_usage_error("--namespaces: at most %d", LOOM_EXTRACT_MAX_NS);
		c->xo.ns[c->xo.nns++] = neg ? -(int64_t)v : (int64_t)v;
	}
	free(s);
	if (!c->xo.nns)
		cli_usage_error("--namespaces: empty list");
}

static struct ctx c = { .xo.nns = 1, .xo.wopts.valid_utf8 = 1 }; /* loom_dump repairs UTF-8 before expat */
static const char *output = "-";
static struct loom_dump_opts dopts = { .max_text = 8u << 20 };

static void on_format(const char *opt, const char *arg)
{
	(void)opt;
	if (!strcmp(arg, "lines")) c.xo.format = LOOM_EXTRACT_LINES;
	else if (!strcmp(arg, "text")) c.xo.format = LOOM_EXTRACT_TEXT;
	else if (!strcmp(arg, "jsonl")) c.xo.format = LOOM_EXTRACT_JSONL;
	else if (!strcmp(arg, "doc")) c.xo.format = LOOM_EXTRACT_DOC;
	else cli_usage_error("--format: '%s' is not lines, text, jsonl or doc", arg);
}

static void on_namespaces(const char *opt, const char *arg)
{
	(void)opt;
	parse_namespaces(&c, arg);
}

static void on_max_page_size(const char *opt, const char *arg)
{
	dopts.max_text = cli_size(opt, arg);
	if (dopts.max_text < 1024 || dopts.max_text > (1u << 30))
		cli_usage_error("--max-page-size: '%s' is not between 1K and 1G", arg);
}

static const struct cli_opt opts[] = {
	OPT_STRING('o', "output", &output, "FILE", "write to FILE atomically (default: stdout)"),
	OPT_ENUM_CALLBACK('f', "format", on_format, "FMT", "lines text jsonl doc",
			  "lines (one article per line, default), text\n"
			  "(paragraph lines, articles end with an empty\n"
			  "line), jsonl ({id,revid,url,title,text}), doc\n"
			  "(WikiExtractor's <doc id url title> ... </doc>)"),
	OPT_BOOL('z', "null", &c.xo.nul, "lines/text: end each article with NUL instead"),
	OPT_CALLBACK('n', "namespaces", on_namespaces, "LIST", "namespaces to keep, e.g. 0,14 (default: 0)"),
	OPT_BOOL(0, "keep-redirects", &c.xo.keep_redirects, "list redirects too (text = the target title)"),
	OPT_BOOL(0, "skip-disambiguation", &c.xo.skip_dab, "drop disambiguation pages"),
	OPT_U64(0, "min-length", &c.xo.min_length, "N", 0, UINT64_MAX, "drop articles shorter than N characters"),
	OPT_BOOL(0, "keep-tables", &c.xo.wopts.keep_tables, "keep table cell text (a row per line)"),
	OPT_BOOL(0, "headings", &c.xo.wopts.headings, "keep section headings as lines"),
	OPT_CALLBACK(0, "max-page-size", on_max_page_size, "SIZE",
		     "skip pages with more wikitext than SIZE\n"
		     "(default: 8M, 4x MediaWiki's 2 MiB limit on a\n"
		     "revision; at most 1G); counted as too large"),
	OPT_INT('j', "threads", &dopts.threads, "N", 1, 256, "worker threads (default: CPUs online)"),
	OPT_ALIAS(0, "jobs", "threads"),
	OPT_STRING(0, "index", &dopts.index, "FILE",
		   "multistream index (default: NAME-index.txt.bz2\n"
		   "beside NAME.xml.bz2 if it exists)"),
	OPT_BOOL(0, "no-index", &dopts.no_index, "read a multistream dump as one stream"),
	OPT_PROGRESS(NULL, "progress even when stderr is not a terminal"),
	OPT_VERBOSE("each page skipped, with its id, title and reason\n"
		    "(namespace, redirect, disambiguation, empty or\n"
		    "short; too large and no text are always told)"),
	OPT_QUIET(NULL, "no summary line (and no -v lines)"),
	OPT_END()
};

static const char *versions(void)
{
	static char ver[160];
	snprintf(ver, sizeof ver, "%s, expat %d.%d.%d, jansson %s", archive_version_string(),
		 XML_MAJOR_VERSION, XML_MINOR_VERSION, XML_MICRO_VERSION, JANSSON_VERSION);
	return ver;
}

static const struct cli_cmd cmd = {
	.prog = "loom-extract",
	.usage = "usage: loom-extract [options] [DUMP.xml.bz2|.xml.gz|.xml|-]\n"
		 "Extract clean article text from a MediaWiki XML dump (stdin if no file).\n",
	.opts = opts,
	.footer = "Templates are removed, not expanded.  A summary line goes to stderr.  A\n"
		  "truncated or corrupt dump: the articles before the damage are written\n"
		  "(with -o to FILE.incomplete, FILE is untouched) and the exit status is 1.\n",
	.version = versions,
};

/* Commit the output; after a dump error (r), as FILE.incomplete.  Returns
 * the exit status; *incomplete: the name written, or NULL. */
static int finish_output(int r, const struct loom_dump_stats *st, char **incomplete)
{
	*incomplete = NULL;
	if (!r) {
		if (loom_outfile_commit(&c.out))
			cli_die("%s", loom_outfile_error(&c.out));
		return 0;
	}
	if (r == LOOM_EIO && c.out.err.msg[0]) {
		cli_warn("%s", loom_outfile_error(&c.out));
		loom_outfile_abort(&c.out);
		return 1;
	}
	cli_warn("%s", loom_dump_error(c.dump));
	if (loom_outfile_commit_suffix(&c.out, ".incomplete", incomplete))
		cli_warn("%s", loom_outfile_error(&c.out));
	cli_warn("output is INCOMPLETE: %llu articles before the error%s%s",
		 (unsigned long long)st->stat[LOOM_EXTRACT_S_ARTICLES],
		 *incomplete ? " written to " : "", *incomplete ? *incomplete : "");
	return 1;
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	dopts.threads = ncpu < 1 ? 1 : ncpu > 64 ? 64 : (int)ncpu;
	cli_parse(&cmd, argc, argv);
	if (argc - optind > 1)
		cli_usage_error("one dump at a time (got %d)", argc - optind);
	if (c.xo.nul && (c.xo.format == LOOM_EXTRACT_JSONL || c.xo.format == LOOM_EXTRACT_DOC))
		cli_usage_error("-z applies to --format lines and text only");
	const char *input = optind < argc ? argv[optind] : "-";
	if (!strcmp(input, "-") && isatty(0))
		cli_usage_error("no dump given and stdin is a terminal");

	c.xo.notes_info = cli_verbose;
	c.xo.note = tell_skip;
	if (!(c.x = loom_extract_new(&c.xo, dopts.threads)))
		cli_die("out of memory");
	load_table(&c, "disambiguation.tsv", LOOM_EXTRACT_DISAMBIGUATION);
	load_table(&c, "namespaces.tsv", LOOM_EXTRACT_NAMESPACES);
	struct loom_err err = { 0 };
	c.dump = loom_dump_open(input, &dopts, &err);
	if (!c.dump)
		cli_die("%s", err.msg);
	if (loom_outfile_open(&c.out, output))
		cli_die("%s", loom_outfile_error(&c.out));
	cli_progress_init(&c.prog, cli_force_progress);
	c.t0 = loom_now();

	int r = loom_dump_run(c.dump, page_fn, write_fn, &c);
	show_progress(&c, 1);
	cli_progress_done(&c.prog);
	struct loom_dump_stats st;
	loom_dump_stats(c.dump, &st);
	char *incomplete;
	int status = finish_output(r, &st, &incomplete);
	char line[1024];
	loom_extract_summary(&c.xo, &st, loom_now() - c.t0, r, line, sizeof line);
	cli_summary("%s", line);
	loom_extract_free(c.x);
	free(incomplete);
	loom_dump_free(c.dump);
	return status;
}
