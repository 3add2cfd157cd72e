/*
 * loom_dumprun.h - the files of one Wikimedia dump run, ready to fetch.
 *
 * Purpose: what loom-fetch does before it downloads a dump.  From a mirror
 * root, a wiki and a date (YYYYMMDD or "latest"), loom_dumprun_open fetches
 * the run's listings from <mirror>/<wiki>/<date>/ (loom_fetch_mem):
 * dumpstatus.json first, then <wiki>-<date>-sha1sums.txt only when
 * dumpstatus.json is missing or lacks a sha1 for a wanted file; and it
 * resolves "latest" to the run's real date.  loom_dumprun_file then names
 * the i-th wanted file (name, URL, path in the output directory, expected
 * size and digest), refusing one that is not listed, whose job is not done
 * or that has no published checksum.  The wanted files are suffixes of
 * "<wiki>-<date>-", given as sets (loom_dumprun_add_what): articles-
 * multistream (the dump and its index), articles, meta-current, abstract,
 * or a plain suffix such as pages-articles.xml.bz2.
 * It never prints: each listing asked for, and what came of it, goes to
 * opts.note (loom-fetch's -v lines).
 *
 * Ownership: loom_dumprun_open/_release (release accepts a run whose open
 * failed); the strings of a struct loom_dumprun_file are the caller's to
 * release with loom_dumprun_file_release.  Errors: 0 or negative LOOM_E*:
 * LOOM_ENET a temporary failure (the network, or a job not yet done: try
 * again later), LOOM_EFORMAT a listing that is malformed or lacks the file
 * or its checksum, or the code of the failed fetch; the message in
 * r->err.msg, and in r->first a failure told before it ("" if none: the
 * failure of dumpstatus.json when the sha1sums listing failed too).
 * Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_DUMPRUN_H
#define LOOM_DUMPRUN_H

#include "loom_common.h"
#include "loom_dumpinfo.h"
#include "loom_fetch.h"

#define LOOM_DUMPRUN_MAX_WHAT 8

struct loom_dumprun_opts {
	const char *mirror;   /* URL of the root; trailing '/'s are dropped */
	const char *wiki;     /* enwiki */
	const char *date;     /* YYYYMMDD or latest */
	const char *const *suffix; /* the wanted files (suffix[0]: the dump) */
	int nsuf;
	void (*note)(void *ud, const char *msg); /* may be NULL */
	void *note_ud;
};

struct loom_dumprun {
	struct loom_dumprun_opts o;
	struct loom_dumpinfo di;
	char *mirror;         /* without trailing '/' */
	char *dir_url;        /* <mirror>/<wiki>/<date as given> */
	char date[9];         /* the run's date (latest resolved) */
	char first[LOOM_ERR_MAX];
	struct loom_err err;
};

struct loom_dumprun_file {
	char *name;           /* <wiki>-<date>-<suffix> */
	char *url;            /* <mirror>/<wiki>/<date>/<name> */
	char *path;           /* <outdir>/<name> */
	struct loom_fetch_expect exp; /* its digests point into the run */
};

/* Add the files of set `what` to suffix[0..n) (at most
 * LOOM_DUMPRUN_MAX_WHAT); returns the new count, LOOM_EINVAL when `what`
 * is neither a set nor a file suffix, LOOM_ERANGE when there are too many. */
int loom_dumprun_add_what(const char **suffix, int n, const char *what);

int loom_dumprun_open(struct loom_dumprun *r, struct loom_fetch *f,
		      const struct loom_dumprun_opts *o);
/* The i-th wanted file (0 <= i < nsuf), its path under outdir. */
int loom_dumprun_file(struct loom_dumprun *r, int i, const char *outdir,
		      struct loom_dumprun_file *out);
void loom_dumprun_file_release(struct loom_dumprun_file *f);
void loom_dumprun_release(struct loom_dumprun *r);

#endif
