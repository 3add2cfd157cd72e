/*
 * loom_dumpinfo.h - what a Wikimedia dump run publishes about its files.
 *
 * Purpose: parse the two checksum listings of a dump directory on
 * dumps.wikimedia.org (and its mirrors) so loom-fetch can verify what it
 * downloads and resolve "latest" to a real date:
 *
 *   /<wiki>/<date>/dumpstatus.json          {"jobs": {"<job>": {"status":
 *       "done", "updated": "...", "files": {"<name>": {"size": N, "url":
 *       "/<wiki>/<date>/<name>", "md5": "<32 hex>", "sha1": "<40 hex>"}}}}}
 *   /<wiki>/<date>/<wiki>-<date>-sha1sums.txt   "<sha1>  <name>" lines
 *   /<wiki>/latest/dumpstatus.json and <wiki>-latest-sha1sums.txt: the same
 *       for the newest complete run, listing the DATED file names.
 *
 * Both parsers merge into one table of files (name, size, md5, sha1, job,
 * job status).  Every field is validated: a file name must be a plain
 * name (no '/', no "..", no control bytes), sizes non-negative integers,
 * digests the right number of hex digits; unknown keys are ignored.  The
 * same file listed with different digests (by two jobs or in the two
 * sources) is an error; listed by two jobs, it keeps the job that is done.
 *
 * Ownership: loom_dumpinfo_init/_release; the table owns its strings.
 * Errors: 0 or negative LOOM_E* (LOOM_EFORMAT for malformed input), with a
 * message naming the source (as given by the caller), the line or JSON
 * path, and the problem in d->err / loom_dumpinfo_error(d).
 * Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_DUMPINFO_H
#define LOOM_DUMPINFO_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

struct loom_dumpfile {
	char *name;         /* e.g. enwiki-20250801-pages-articles-multistream.xml.bz2 */
	char *job;          /* job listing it in dumpstatus.json, or NULL */
	char *status;       /* that job's status ("done", "in-progress"...) or NULL */
	int64_t size;       /* bytes, -1 if unknown */
	char md5[33];       /* lower-case hex, "" if unknown */
	char sha1[41];      /* lower-case hex, "" if unknown */
};

struct loom_dumpinfo {
	struct loom_dumpfile *files;
	size_t n, cap;
	struct loom_err err;
};

void loom_dumpinfo_init(struct loom_dumpinfo *d);
void loom_dumpinfo_release(struct loom_dumpinfo *d);

/* Parse dumpstatus.json text; `src` names it in messages. */
int loom_dumpinfo_parse_status(struct loom_dumpinfo *d, const char *json, size_t len,
			       const char *src);
/* Parse a "<sha1>  <name>" listing (sha1sum output; '*' binary marker and
 * blank lines accepted); `src` names it in messages. */
int loom_dumpinfo_parse_sha1sums(struct loom_dumpinfo *d, const char *txt, size_t len,
				 const char *src);

/* The entry named `name`, or NULL. */
const struct loom_dumpfile *loom_dumpinfo_find(const struct loom_dumpinfo *d,
					       const char *name);

/* Find the run date: the YYYYMMDD of a listed file named
 * "<wiki>-YYYYMMDD-<suffix>".  Returns 0 and fills date[9], or LOOM_EINVAL
 * (message set) when no file matches or two dates do. */
int loom_dumpinfo_find_date(struct loom_dumpinfo *d, const char *wiki,
			    const char *suffix, char date[9]);

/* 1 if s is a plausible wiki name ([a-z0-9_-]+, at most 64 bytes). */
int loom_dumpinfo_valid_wiki(const char *s);
/* 1 if s is 8 digits forming a plausible date YYYYMMDD. */
int loom_dumpinfo_valid_date(const char *s);

const char *loom_dumpinfo_error(const struct loom_dumpinfo *d);

#endif
