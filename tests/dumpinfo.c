/* Unit tests for loom_dumpinfo: dumpstatus.json and sha1sums.txt parsing,
 * validation messages, merging, and "latest" date resolution. */
#include <string.h>

#include "loom_dumpinfo.h"
#include "tap.h"

#define W "enwiki-20250801-"
#define DUMP W "pages-articles-multistream.xml.bz2"
#define SHA "0123456789abcdef0123456789abcdef01234567"
#define SHA2 "1123456789abcdef0123456789abcdef01234567"

static int parse_json(struct loom_dumpinfo *d, const char *s)
{
	return loom_dumpinfo_parse_status(d, s, strlen(s), "ds.json");
}

static int parse_sums(struct loom_dumpinfo *d, const char *s)
{
	return loom_dumpinfo_parse_sha1sums(d, s, strlen(s), "sums.txt");
}

/* Parse one bad JSON document, check the code and the message. */
static void bad_json(const char *json, const char *msg, const char *name)
{
	struct loom_dumpinfo d;
	loom_dumpinfo_init(&d);
	is_int(parse_json(&d, json), LOOM_EFORMAT, "%s: rejected", name);
	is_str(loom_dumpinfo_error(&d), msg, "%s: message", name);
	loom_dumpinfo_release(&d);
}

/* The table case_status fills and case_sha1sums extends. */
static struct loom_dumpinfo listed;

/* A dumpstatus.json: files, sizes, digests, jobs; the date of a dump. */
static void case_status(void)
{
	char date[9];
	const struct loom_dumpfile *f;
	loom_dumpinfo_init(&listed);
	is_int(parse_json(&listed,
		"{\"version\": \"0.8\", \"jobs\": {"
		"\"articlesmultistreamdump\": {\"status\": \"done\", \"updated\": \"x\", \"files\": {"
		"\"" DUMP "\": {\"size\": 24621031584, \"url\": \"/enwiki/20250801/" DUMP "\","
		" \"md5\": \"0123456789ABCDEF0123456789abcdef\", \"sha1\": \"" SHA "\"},"
		"\"" W "pages-articles-multistream-index.txt.bz2\": {\"size\": 5}}},"
		"\"metahistory7zdump\": {\"status\": \"waiting\"},"
		"\"xmlstubsdump\": {\"status\": \"in-progress\", \"files\": {"
		"\"" W "stub-articles.xml.gz\": {}}}}}"), 0, "parse a dumpstatus.json");
	is_int((int)listed.n, 3, "three files listed");
	f = loom_dumpinfo_find(&listed, DUMP);
	ok(f != NULL, "dump listed");
	if (f) {
		ok(f->size == 24621031584LL, "size beyond 32 bits");
		is_str(f->sha1, SHA, "sha1");
		is_str(f->md5, "0123456789abcdef0123456789abcdef", "md5 lower-cased");
		is_str(f->job, "articlesmultistreamdump", "job");
		is_str(f->status, "done", "status");
	}
	f = loom_dumpinfo_find(&listed, W "stub-articles.xml.gz");
	ok(f && f->size == -1 && !f->sha1[0] && !strcmp(f->status, "in-progress"),
	   "file of a running job: no size, no digest, status kept");
	is_int(loom_dumpinfo_find_date(&listed, "enwiki", "pages-articles-multistream.xml.bz2", date),
	       0, "find the date");
	is_str(date, "20250801", "date");
	is_int(loom_dumpinfo_find_date(&listed, "dewiki", "pages-articles-multistream.xml.bz2", date),
	       LOOM_EINVAL, "no file of another wiki");
	is_str(loom_dumpinfo_error(&listed),
	       "no file named dewiki-YYYYMMDD-pages-articles-multistream.xml.bz2 is listed",
	       "no-date message");
}

/* sha1sums merge into the same table. */
static void case_sha1sums(void)
{
	char date[9];
	const struct loom_dumpfile *f;
	is_int(parse_sums(&listed, SHA "  " DUMP "\n\n"
			  "fedcba9876543210fedcba9876543210fedcba98 *" W "abstract.xml.gz\r\n"),
	       0, "parse sha1sums (blank line, '*' marker, CRLF)");
	f = loom_dumpinfo_find(&listed, W "abstract.xml.gz");
	ok(f && !strcmp(f->sha1, "fedcba9876543210fedcba9876543210fedcba98") && !f->job,
	   "new file from sha1sums");
	is_int(parse_sums(&listed, "1123456789abcdef0123456789abcdef01234567  " DUMP "\n"),
	       LOOM_EFORMAT, "conflicting sha1 rejected");
	is_str(loom_dumpinfo_error(&listed),
	       "sums.txt: line 1: sha1 of '" DUMP "' is 1123456789abcdef0123456789abcdef01234567,"
	       " but another listing says " SHA, "conflict message");
	is_int(parse_sums(&listed, SHA "  enwiki-20250901-pages-articles-multistream.xml.bz2\n"), 0,
	       "a second run's file");
	is_int(loom_dumpinfo_find_date(&listed, "enwiki", "pages-articles-multistream.xml.bz2", date),
	       LOOM_EINVAL, "two dates are ambiguous");
	loom_dumpinfo_release(&listed);
}

/* sha1sums.txt refusals: a path, not a hash, a NUL in a name. */
static void case_bad_sha1sums(void)
{
	struct loom_dumpinfo d;
	loom_dumpinfo_init(&d);
	is_int(parse_sums(&d, SHA "  ok\n" SHA "  a/b\n"), LOOM_EFORMAT, "path in sha1sums");
	is_str(loom_dumpinfo_error(&d), "sums.txt: line 2: not a plain file name", "path message");
	is_int(parse_sums(&d, "xyz  file\n"), LOOM_EFORMAT, "not a hash");
	is_str(loom_dumpinfo_error(&d),
	       "sums.txt: line 1: expected '<40 hex digits>  <file name>'", "not-a-hash message");
	is_int(loom_dumpinfo_parse_sha1sums(&d, SHA "  a\0b\n", 45, "n"), LOOM_EFORMAT,
	       "NUL in a name");
	loom_dumpinfo_release(&d);
}

/* dumpstatus.json refusals, each with its message. */
static void case_bad_status(void)
{
	bad_json("{\"jobs\": {", "ds.json: line 1, column 10: string or '}' expected near end of file",
		 "truncated");
	bad_json("[]", "ds.json: no \"jobs\" object at the top level", "no jobs");
	bad_json("{\"jobs\": {\"a\": {\"files\": {}}}}",
		 "ds.json: jobs.a.status: missing or not a short string", "no status");
	bad_json("{\"jobs\": {\"a\": {\"status\": \"done\", \"files\": []}}}",
		 "ds.json: jobs.a.files: not an object", "files not an object");
	bad_json("{\"jobs\": {\"a\": {\"status\": \"done\", \"files\": {\"x\": {\"size\": 1.5}}}}}",
		 "ds.json: jobs.a.files.x.size: not a non-negative integer", "fractional size");
	bad_json("{\"jobs\": {\"a\": {\"status\": \"done\", \"files\": {\"x\": {\"size\": -3}}}}}",
		 "ds.json: jobs.a.files.x.size: not a non-negative integer", "negative size");
	bad_json("{\"jobs\": {\"a\": {\"status\": \"done\", \"files\": {\"x\": {\"sha1\": \"abc\"}}}}}",
		 "ds.json: jobs.a.files.x.sha1: not 40 hex digits", "short sha1");
	bad_json("{\"jobs\": {\"a\": {\"status\": \"done\", \"files\": {\"x\": {\"md5\": 5}}}}}",
		 "ds.json: jobs.a.files.x.md5: not 32 hex digits", "md5 not a string");
	bad_json("{\"jobs\": {\"a\": {\"status\": \"done\", \"files\": {\"..\": {}}}}}",
		 "ds.json: jobs.a.files: '..' is not a plain file name", "dot-dot name");
	bad_json("{\"jobs\": {\"a\": {\"status\": \"done\", \"files\": {\"x\": {\"url\": \"/w/d/y\"}}}}}",
		 "ds.json: jobs.a.files.x.url: not a path ending in '/x'", "url for another file");
	bad_json("{\"jobs\": {\"a\": {\"status\": \"done\", \"files\": {\"x\": {\"sha1\": \"" SHA "\"}}},"
		 " \"b\": {\"status\": \"done\", \"files\": {\"x\": {\"sha1\": \"" SHA2 "\"}}}}}",
		 "ds.json: sha1 of 'x' is " SHA2 ", but another listing says " SHA,
		 "two jobs, two digests");
}

/* A file several jobs list, null fields, a duplicate key. */
static void case_jobs_and_nulls(void)
{
	struct loom_dumpinfo d;
	const struct loom_dumpfile *f;
	loom_dumpinfo_init(&d);
	is_int(parse_json(&d, "{\"jobs\": {\"a\": {\"status\": \"in-progress\", \"files\": {\"x\": {}}},"
			  " \"b\": {\"status\": \"done\", \"files\": {\"x\": {\"size\": 3}}},"
			  " \"c\": {\"status\": \"failed\", \"files\": {\"x\": {}}}}}"), 0,
	       "a file listed by three jobs");
	f = loom_dumpinfo_find(&d, "x");
	ok(f && !strcmp(f->job, "b") && !strcmp(f->status, "done") && f->size == 3,
	   "it keeps the job that is done");
	loom_dumpinfo_release(&d);
	loom_dumpinfo_init(&d);
	is_int(parse_json(&d, "{\"jobs\": {\"a\": {\"status\": \"in-progress\", \"files\": {\"x\":"
			  " {\"size\": null, \"md5\": \"\", \"sha1\": null, \"url\": null}}},"
			  " \"b\": {\"status\": \"waiting\", \"files\": null}}}"), 0,
	       "null (or empty digest) fields mean unknown");
	f = loom_dumpinfo_find(&d, "x");
	ok(f && f->size == -1 && !f->sha1[0] && !f->md5[0], "null fields left unknown");
	loom_dumpinfo_release(&d);
	bad_json("{\"jobs\": {}, \"jobs\": {}}",
		 "ds.json: line 1, column 19: duplicate object key near '\"jobs\"'", "duplicate key");
}

/* Wiki names and dump dates. */
static void case_names_and_dates(void)
{
	ok(loom_dumpinfo_valid_wiki("enwiki") && loom_dumpinfo_valid_wiki("zh_min_nanwiki"),
	   "valid wiki names");
	ok(!loom_dumpinfo_valid_wiki("EnWiki") && !loom_dumpinfo_valid_wiki("en/wiki") &&
	   !loom_dumpinfo_valid_wiki(""), "invalid wiki names");
	ok(loom_dumpinfo_valid_date("20250801") && !loom_dumpinfo_valid_date("20251301") &&
	   !loom_dumpinfo_valid_date("2025080") && !loom_dumpinfo_valid_date("2025-8-1"),
	   "date validation");
}

int main(void)
{
	case_status();
	case_sha1sums();
	case_bad_sha1sums();
	case_bad_status();
	case_jobs_and_nulls();
	case_names_and_dates();
	return done_testing();
}
