/* Unit tests for loom_dumprun over a file:// mirror made here: the sets of
 * --what, the listings (dumpstatus.json, else the sha1sums listing),
 * "latest" resolved to the run's date, each wanted file's URL, path and
 * digest, and the refusals (not listed, job not done, no checksum, no
 * listing at all) with their codes and messages; no tool. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loom_dumprun.h"
#include "loom_file.h"
#include "tap.h"

static char root[4200], mirror[4300], told[8192]; /* the mirror: its path, its URL */
static struct loom_fetch *f;

static void tell(void *ud, const char *msg)
{
	(void)ud;
	strncat(told, msg, sizeof told - strlen(told) - 2);
	strcat(told, "\n");
}

static void put(const char *rel, const char *text)
{
	char p[4400];
	struct loom_err e;
	snprintf(p, sizeof p, "%s/%s", root, rel);
	char *slash = strrchr(p, '/');
	*slash = 0;
	loom_mkdir_p(p, &e);
	*slash = '/';
	FILE *fp = fopen(p, "w");
	fputs(text, fp);
	fclose(fp);
}

static const char *sets[LOOM_DUMPRUN_MAX_WHAT];

static void case_what(void)
{
	int n = loom_dumprun_add_what(sets, 0, "articles-multistream");
	ok(n == 2 && !strcmp(sets[0], "pages-articles-multistream.xml.bz2") &&
	   !strcmp(sets[1], "pages-articles-multistream-index.txt.bz2"), "articles-multistream: two files");
	is_int(loom_dumprun_add_what(sets, n, "abstract"), 3, "abstract: one more");
	is_str(sets[2], "abstract.xml.gz", "its file");
	is_int(loom_dumprun_add_what(sets, 3, "x.txt"), 4, "a suffix of its own");
	is_int(loom_dumprun_add_what(sets, 4, "pages"), LOOM_EINVAL, "no '.': not a suffix");
	is_int(loom_dumprun_add_what(sets, 4, "a/b.txt"), LOOM_EINVAL, "a '/': refused");
	is_int(loom_dumprun_add_what(sets, 4, "a..b"), LOOM_EINVAL, "'..': refused");
	is_int(loom_dumprun_add_what(sets, 8, "x.txt"), LOOM_ERANGE, "at most 8");
	is_int(loom_dumprun_add_what(sets, 7, "articles-multistream"), LOOM_ERANGE, "a set past 8");
}

#define SHA_A "0123456789abcdef0123456789abcdef01234567"
#define SHA_B "89abcdef0123456789abcdef0123456789abcdef"

static void case_latest_from_sums(void)
{
	static const char *want[] = { "pages-articles-multistream.xml.bz2",
				      "pages-articles-multistream-index.txt.bz2" };
	put("w/latest/w-latest-sha1sums.txt",
	    SHA_A "  w-20260101-pages-articles-multistream.xml.bz2\n"
	    SHA_B "  w-20260101-pages-articles-multistream-index.txt.bz2\n");
	char slashes[4400];
	snprintf(slashes, sizeof slashes, "%s//", mirror);
	struct loom_dumprun_opts o = { slashes, "w", "latest", want, 2, tell, NULL };
	struct loom_dumprun r;
	struct loom_dumprun_file file;
	told[0] = 0;
	is_int(loom_dumprun_open(&r, f, &o), 0, "latest, from the sha1sums listing");
	is_str(r.date, "20260101", "latest resolved");
	ok(strstr(told, "/w/latest/dumpstatus.json: Couldn't open file") &&
	   strstr(told, "fetching file://") && strstr(told, "w-latest-sha1sums.txt: 182 bytes"),
	   "each listing told");
	is_int(loom_dumprun_file(&r, 1, "dumps/", &file), 0, "the index");
	is_str(file.path, "dumps/w-20260101-pages-articles-multistream-index.txt.bz2", "its path");
	ok(!strncmp(file.url, "file://", 7) &&
	   strstr(file.url, "/mirror/w/20260101/w-20260101-pages-articles-multistream-index.txt.bz2") &&
	   !strstr(file.url, "mirror//"), "its URL (the mirror's trailing '/'s dropped)");
	ok(file.exp.sha1 && !strcmp(file.exp.sha1, SHA_B) && !file.exp.md5 && file.exp.size == -1,
	   "its sha1");
	loom_dumprun_file_release(&file);
	loom_dumprun_release(&r);
}

static void case_status(void)
{
	static const char *want[] = { "a.xml", "b.xml", "c.xml" };
	put("w/20260202/dumpstatus.json",
	    "{\"jobs\": {\"one\": {\"status\": \"done\", \"files\": {"
	    "\"w-20260202-a.xml\": {\"size\": 5, \"md5\": \"0123456789abcdef0123456789abcdef\"}}},"
	    "\"two\": {\"status\": \"waiting\", \"files\": {\"w-20260202-b.xml\": {\"size\": 6, "
	    "\"sha1\": \"" SHA_A "\"}}}}}");
	put("w/20260202/w-20260202-sha1sums.txt", SHA_B "  w-20260202-z.xml\n");
	struct loom_dumprun_opts o = { mirror, "w", "20260202", want, 3, tell, NULL };
	struct loom_dumprun r;
	struct loom_dumprun_file file;
	is_int(loom_dumprun_open(&r, f, &o), 0, "dumpstatus.json, then the sums (a lacks a sha1)");
	is_int(loom_dumprun_file(&r, 0, NULL, &file), 0, "a: listed with an md5");
	ok(file.exp.md5 && !file.exp.sha1 && file.exp.size == 5 && !strcmp(file.path, "w-20260202-a.xml"),
	   "a: md5, size; no outdir: the bare name");
	loom_dumprun_file_release(&file);
	is_int(loom_dumprun_file(&r, 1, "d", &file), LOOM_ENET, "b: its job is not done");
	is_str(r.err.msg, "w-20260202-b.xml: job two is 'waiting', not done: try again later", "b: why");
	loom_dumprun_file_release(&file);
	is_int(loom_dumprun_file(&r, 2, "d", &file), LOOM_EFORMAT, "c: not listed");
	ok(strstr(r.err.msg, "/w/20260202: 'w-20260202-c.xml' is not listed in the dump's checksums") != NULL,
	   "%s", r.err.msg);
	loom_dumprun_file_release(&file);
	loom_dumprun_release(&r);

	put("w/20260303/dumpstatus.json", "{\"jobs\": 3");
	o.date = "20260303";
	is_int(loom_dumprun_open(&r, f, &o), LOOM_EFORMAT, "a malformed dumpstatus.json");
	ok(strstr(r.err.msg, "20260303/dumpstatus.json: line") != NULL, "%s", r.err.msg);
	loom_dumprun_release(&r);

	o.date = "20260404";
	is_int(loom_dumprun_open(&r, f, &o), LOOM_EIO, "no listing at all");
	ok(strstr(r.first, "20260404/dumpstatus.json: Couldn't open") &&
	   strstr(r.err.msg, "20260404/w-20260404-sha1sums.txt: Couldn't open"),
	   "both failures kept: first, then err");
	loom_dumprun_release(&r);

	put("w/latest/dumpstatus.json", "{\"jobs\": {}}");
	put("w/latest/w-latest-sha1sums.txt", SHA_A "  w-20260101-x.xml\n");
	o.date = "latest";
	is_int(loom_dumprun_open(&r, f, &o), LOOM_EFORMAT, "latest with no dated file of the dump");
	ok(strstr(r.err.msg, "/w/latest: cannot resolve 'latest': ") != NULL, "%s", r.err.msg);
	loom_dumprun_release(&r);
}

int main(void)
{
	struct loom_fetch_opts fo;
	ok(tap_tmpdir() != NULL, "scratch dir");
	snprintf(root, sizeof root, "%s/mirror", tap_tmpdir());
	snprintf(mirror, sizeof mirror, "file://%s", root);
	loom_fetch_opts_default(&fo);
	fo.retries = 0;
	f = loom_fetch_new(&fo);
	case_what();
	case_latest_from_sums();
	case_status();
	loom_fetch_free(f);
	return done_testing();
}
