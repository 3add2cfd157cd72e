/*
 * loom-fetch - download a Wikipedia dump (or any URL), resumable and verified
 * against the published checksums (lib/wiki/loom_dumprun.h, loom_fetch.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "loom_common.h"
#include "loom_dumpinfo.h"
#include "loom_dumprun.h"
#include "loom_fetch.h"
#include "loom_file.h"
#include "loom_hash.h"

#define DEFAULT_MIRROR "https://dumps.wikimedia.org"

static struct {
	struct cli_progress prog;
	const char *name;
} g;

static int exit_code(int rc)
{
	return rc == LOOM_ENET ? EXIT_TEMPFAIL : 1;
}

static void show_progress(void *ud, const struct loom_fetch_progress *p)
{
	char a[32], b[32], r[32], d[32], eta[40] = "";
	(void)ud;
	if (!cli_progress_due(&g.prog))
		return;
	if (p->eta >= 0)
		snprintf(eta, sizeof eta, "  ETA %s", cli_duration(p->eta, d, sizeof d));
	if (p->total)
		cli_progress_show(&g.prog, "%s  %s / %s (%.0f%%)  %s/s%s", g.name,
				  cli_bytes((double)p->done, a, sizeof a),
				  cli_bytes((double)p->total, b, sizeof b),
				  100.0 * (double)p->done / (double)p->total,
				  cli_bytes(p->rate, r, sizeof r), eta);
	else
		cli_progress_show(&g.prog, "%s  %s  %s/s", g.name,
				  cli_bytes((double)p->done, a, sizeof a),
				  cli_bytes(p->rate, r, sizeof r));
}

/* Fetch one file, print its summary, return 0 or the exit code. */
static int fetch_one(struct loom_fetch *f, const char *url, const char *path,
		     const struct loom_fetch_expect *exp)
{
	struct loom_fetch_result res;
	g.name = loom_basename(path);
	cli_info("fetching %s to %s", url, path);
	int rc = loom_fetch_file(f, url, path, exp, &res);
	cli_progress_done(&g.prog);
	if (rc < 0) {
		cli_warn("%s", loom_fetch_error(f));
		return exit_code(rc);
	}
	char detail[8400], summary[8400];
	loom_fetch_describe(&res, url, path, g.name, detail, summary, sizeof detail);
	cli_info("%s", detail);
	cli_summary("%s", summary);
	printf("%s\n", path);
	if (fflush(stdout) != 0 && errno != EPIPE)
		cli_die("cannot write to stdout: %s", strerror(errno));
	return 0;
}

static void tell(void *ud, const char *msg)
{
	(void)ud;
	cli_info("%s", msg);
}

/* The files of the dump of --wiki at --date from mirror into outdir. */
static int fetch_dump(struct loom_fetch *f, const struct loom_dumprun_opts *o, const char *outdir)
{
	struct loom_dumprun r;
	struct loom_dumprun_file file = { 0 };
	struct loom_err merr;
	int status = 0, rc = loom_dumprun_open(&r, f, o);
	if (!rc && !strcmp(o->date, "latest"))
		cli_summary("%s latest is %s", o->wiki, r.date);
	if (!rc && loom_mkdir_p(outdir, &merr) < 0)
		cli_die("%s", merr.msg);
	for (int i = 0; !rc && !status && i < o->nsuf; i++) {
		if (!(rc = loom_dumprun_file(&r, i, outdir, &file)))
			status = fetch_one(f, file.url, file.path, &file.exp);
		loom_dumprun_file_release(&file);
	}
	if (r.first[0])
		cli_warn("%s", r.first);
	if (rc)
		cli_warn("%s", r.err.msg);
	loom_dumprun_release(&r);
	return rc ? exit_code(rc) : status;
}

static const char *mirror, *wiki, *date, *out, *sha1, *md5, *sha256;
static const char *suffix[LOOM_DUMPRUN_MAX_WHAT];
static int nsuf;
static int64_t size = -1;
static struct loom_fetch_opts fo;

static void on_what(const char *opt, const char *arg)
{
	(void)opt;
	int n = loom_dumprun_add_what(suffix, nsuf, arg);
	if (n == LOOM_ERANGE)
		cli_usage_error("--what: too many files");
	if (n < 0)
		cli_usage_error("--what: '%s' is not articles-multistream, articles, "
				"meta-current, abstract, or a file suffix like "
				"pages-articles.xml.bz2", arg);
	nsuf = n;
}

static void on_size(const char *opt, const char *arg)
{
	size = (int64_t)cli_u64(opt, arg, 0, INT64_MAX);
}

static void on_retries(const char *opt, const char *arg)
{
	fo.retries = (unsigned)cli_u64(opt, arg, 0, 1000);
}

static void on_timeout(const char *opt, const char *arg)
{
	fo.connect_timeout = (long)cli_u64(opt, arg, 1, 86400);
	fo.stall_timeout = 2 * fo.connect_timeout;
}

static const struct cli_opt opts[] = {
	OPT_STRING(0, "mirror", &mirror, "URL",
		   "mirror root (default: $LOOM_MIRROR, else " DEFAULT_MIRROR ");\n"
		   "http://, https:// or file:// with /<wiki>/<date>/ layout"),
	OPT_STRING(0, "wiki", &wiki, "NAME", "wiki database name (default: enwiki)"),
	OPT_STRING(0, "date", &date, "D", "latest (default) or YYYYMMDD"),
	OPT_CALLBACK(0, "what", on_what, "SET",
		     "articles-multistream (default: dump + its index),\n"
		     "articles, meta-current, abstract, or a file suffix\n"
		     "such as pages-articles-multistream.xml.bz2 (repeatable)"),
	OPT_STRING('o', "output", &out, "PATH",
		   "output directory (dump) or file (URL; default: the\n"
		   "URL's file name; a directory keeps that name)"),
	OPT_TEXT("One URL:"),
	OPT_STRING(0, "sha1", &sha1, "X", "expected SHA-1 digest"),
	OPT_STRING(0, "md5", &md5, "X", "expected MD5 digest"),
	OPT_STRING(0, "sha256", &sha256, "X", "expected SHA-256 digest"),
	OPT_CALLBACK(0, "size", on_size, "N", "expected size in bytes"),
	OPT_TEXT("Transfer:"),
	OPT_CALLBACK(0, "retries", on_retries, "N", "retries after a temporary failure (default: 5)"),
	OPT_DOUBLE(0, "retry-delay", &fo.retry_delay, "S", 0, 3600,
		   "first wait before a retry, doubled each time up to\n"
		   "60 s (default: 1)"),
	OPT_CALLBACK(0, "timeout", on_timeout, "S",
		     "connect timeout (default: 30); a transfer without\n"
		     "data for twice as long counts as failed"),
	OPT_BOOL(0, "recheck", &fo.recheck,
		 "rehash files already present even when they are\n"
		 "recorded as verified (xattr user.loom.verified)"),
	OPT_PROGRESS(NULL, "show progress even when stderr is not a terminal"),
	OPT_VERBOSE("each URL requested, and what came of it (bytes,\n"
		    "attempts, resume offset)"),
	OPT_QUIET(NULL, "no progress, no summary lines (and no -v lines)"),
	OPT_END()
};

static const struct cli_cmd cmd = {
	.prog = "loom-fetch",
	.usage = "usage: loom-fetch [options] -o DIR          download a Wikipedia dump into DIR\n"
		 "       loom-fetch [options] URL [-o FILE]   download one URL\n"
		 "\n"
		 "Dump (the files of one run, verified against its dumpstatus.json or\n"
		 "<wiki>-<date>-sha1sums.txt; names on disk carry the real date):\n",
	.opts = opts,
	.footer = "\n"
		  "An interrupted download resumes from FILE.part; a file already present\n"
		  "and verified is not fetched again.  stdout lists the verified files.\n"
		  "Exit: 0 ok, 1 checksum mismatch or permanent failure (404...), 2 usage,\n"
		  "75 temporary failure (network down, server error, dump not finished).\n",
	.version = loom_fetch_curl_version,
};

/* One URL to out (a file, or a directory that gets the URL's file name, or
 * NULL: the URL's file name here). */
static int fetch_url(struct loom_fetch *f, const char *url)
{
	const char *bn = loom_basename(url);
	char *name = strndup(bn, strcspn(bn, "?#"));
	char *path;
	struct stat st;
	if (!name)
		cli_die("out of memory");
	if (out && !*out)
		cli_usage_error("-o: empty file name");
	if (out && !(stat(out, &st) == 0 && S_ISDIR(st.st_mode))) {
		path = strdup(out);
	} else {
		if (!name[0] || !strcmp(name, ".") || !strcmp(name, ".."))
			cli_usage_error("cannot name the output after '%s': use -o FILE", url);
		path = loom_path_join(out, name);
	}
	if (!path)
		cli_die("out of memory");
	struct loom_fetch_expect exp = { size, sha1, md5, sha256 };
	int rc = fetch_one(f, url, path, &exp);
	free(path);
	free(name);
	return rc;
}

/* The dump of --wiki at --date from --mirror into the directory out. */
static int fetch_wiki(struct loom_fetch *f)
{
	if (sha1 || md5 || sha256 || size >= 0)
		cli_usage_error("--sha1/--md5/--sha256/--size need a URL");
	if (!out || !*out)
		cli_usage_error("missing -o DIR");
	if (!mirror || !*mirror)
		mirror = DEFAULT_MIRROR;
	if (!strstr(mirror, "://"))
		cli_usage_error("--mirror: '%s' is not a URL (http://, https://, file://)", mirror);
	if (!loom_dumpinfo_valid_wiki(wiki))
		cli_usage_error("--wiki: '%s' is not a wiki name like enwiki", wiki);
	if (strcmp(date, "latest") && !loom_dumpinfo_valid_date(date))
		cli_usage_error("--date: '%s' is not 'latest' or YYYYMMDD", date);
	if (nsuf == 0)
		nsuf = loom_dumprun_add_what(suffix, 0, "articles-multistream");
	struct loom_dumprun_opts o = { mirror, wiki, date, suffix, nsuf, tell, NULL };
	return fetch_dump(f, &o, out);
}

int main(int argc, char **argv)
{
	loom_fetch_opts_default(&fo);
	cli_parse(&cmd, argc, argv);
	int dump_opt = mirror || wiki || date || nsuf;
	if (!mirror)
		mirror = getenv("LOOM_MIRROR");
	if (!wiki)
		wiki = "enwiki";
	if (!date)
		date = "latest";
	if (fo.retry_delay_max < fo.retry_delay)
		fo.retry_delay_max = fo.retry_delay;
	cli_progress_init(&g.prog, cli_force_progress);
	if (cli_quiet)
		g.prog.enabled = 0;
	fo.progress = show_progress;

	const char *url = NULL;
	if (optind < argc)
		url = argv[optind++];
	if (optind < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
	static const struct { const char *opt; size_t n; } dg[] = {
		{ "--sha1", 40 }, { "--md5", 32 }, { "--sha256", 64 } };
	const char *dv[3] = { sha1, md5, sha256 };
	for (int i = 0; i < 3; i++) {
		if (!dv[i])
			continue;
		if (!loom_hex_is(dv[i], dg[i].n))
			cli_usage_error("%s: '%s' is not %zu hex digits", dg[i].opt, dv[i], dg[i].n);
	}
	if (url && dump_opt)
		cli_usage_error("--mirror/--wiki/--date/--what do not apply to a single URL");

	/* file scope: still reachable (not a leak) when a check below exits */
	static struct loom_fetch *f;
	if (!(f = loom_fetch_new(&fo)))
		cli_die("cannot initialise libcurl");
	int rc = url ? fetch_url(f, url) : fetch_wiki(f);
	loom_fetch_free(f);
	return rc;
}
