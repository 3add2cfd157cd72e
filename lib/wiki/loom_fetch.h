/*
 * loom_fetch.h - resumable, verified downloads over libcurl.
 *
 * Purpose: fetch a URL (http, https, file, whatever libcurl speaks) to a
 * file the way cron jobs and makefiles need it:
 *   - bytes go to "<path>.part"; an interrupted download is resumed from
 *     it with a Range request.  The answer must be 206 with a
 *     Content-Range starting exactly at the .part size; a server that
 *     ignores the range (200) or answers another range restarts the file
 *     cleanly from byte 0.
 *   - transient failures (connection refused/reset, timeouts, a dropped
 *     connection, HTTP 5xx/408/429) are retried `retries` times with
 *     exponential backoff; each retry resumes from the .part.  When they
 *     are exhausted the call fails with LOOM_ENET and the .part is kept.
 *     Permanent failures (404, 403, other 4xx, unreadable file:// path)
 *     fail at once with LOOM_EIO naming the URL and the status.
 *   - the data is hashed while it streams (and the .part prefix when
 *     resuming) with each digest the caller expects (sha1/md5/sha256) and
 *     its size checked; only when all match is the .part fsynced and renamed
 *     to `path` (the directory fsynced too).  A mismatch removes the .part
 *     and fails with LOOM_ECHECKSUM; if the bad data came partly from an
 *     earlier .part, the file is fetched once more from scratch first.
 *   - if `path` already exists and matches every expected digest (at
 *     least one must be given), nothing is fetched (res->already = 1).
 *     Verified files carry a record of it (extended attribute
 *     user.loom.verified: digest, size, mtime); a present file whose record
 *     matches the expected digest, its size and mtime is trusted without
 *     rehashing (res->cached = 1) unless opts.recheck is set.  Where the
 *     file system has no extended attributes the file is always rehashed.
 * It never prints: progress goes to an optional callback.
 *
 * Ownership: loom_fetch_new/_free (free accepts NULL).  Errors: 0 or
 * negative LOOM_E*, one-line message (naming the URL or file) in
 * loom_fetch_error(f).  Thread-safety: the default (loom_common.h), one
 * object per thread, except that the first loom_fetch_new of the process
 * (it runs curl_global_init) must not race another.
 */
#ifndef LOOM_FETCH_H
#define LOOM_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

struct loom_fetch_progress {
	const char *url;
	uint64_t done;        /* bytes in the .part so far (incl. resumed part) */
	uint64_t total;       /* expected final size, 0 if unknown */
	uint64_t resumed_from;/* bytes already present when this attempt began */
	double rate;          /* bytes/s over this attempt */
	double eta;           /* seconds left, < 0 if unknown */
};

typedef void (*loom_fetch_progress_fn)(void *ud, const struct loom_fetch_progress *p);

struct loom_fetch_opts {
	unsigned retries;       /* extra attempts after a temporary failure (5) */
	double retry_delay;     /* first backoff in seconds, doubled each time (1) */
	double retry_delay_max; /* backoff cap in seconds (60) */
	long connect_timeout;   /* seconds to connect (30) */
	long stall_timeout;     /* abort an attempt after this many seconds
				 * without data (60) */
	int recheck;            /* rehash present files even if recorded verified */
	loom_fetch_progress_fn progress; /* may be NULL */
	void *progress_ud;
};

/* Defaults as noted above. */
void loom_fetch_opts_default(struct loom_fetch_opts *o);

/* What the finished file must be; NULL / -1 for "unknown". */
struct loom_fetch_expect {
	int64_t size;
	const char *sha1;
	const char *md5;
	const char *sha256;
};

struct loom_fetch_result {
	uint64_t size;        /* final file size */
	uint64_t transferred; /* bytes received over the network by this call */
	uint64_t resumed_from;/* .part bytes reused by the successful attempt */
	double seconds;       /* wall time of the call */
	unsigned attempts;    /* transfer attempts made (0 if already) */
	int already;          /* 1: `path` was present and verified */
	int cached;           /* 1: ... by its verification record, not rehashed */
	int verified;         /* 1: every expected digest and size matched */
	char algo[8];         /* strongest expected digest; "sha1" if none given */
	char hex[129];        /* its value (computed, also when unverified) */
};

struct loom_fetch;

struct loom_fetch *loom_fetch_new(const struct loom_fetch_opts *opts);
void loom_fetch_free(struct loom_fetch *f);

/* Download `url` to `path` as described above (missing parent directories
 * are created, as mkdir -p).  `exp` may be NULL. */
int loom_fetch_file(struct loom_fetch *f, const char *url, const char *path,
		    const struct loom_fetch_expect *exp, struct loom_fetch_result *res);

/* Fetch a small document (listing, JSON) into a malloc'd NUL-terminated
 * buffer, with the same retry and error rules; larger than `max` bytes is
 * LOOM_ERANGE. */
int loom_fetch_mem(struct loom_fetch *f, const char *url, size_t max, char **buf,
		   size_t *len);

const char *loom_fetch_error(const struct loom_fetch *f);

/* What came of one loom_fetch_file of url to path, as lines (no newline)
 * into buf[n]: detail, -v's (present and verified, or bytes received,
 * attempts and resume offset); summary, the file's (size, resume offset,
 * digest, verified or not, seconds and rate), named name. */
void loom_fetch_describe(const struct loom_fetch_result *res, const char *url, const char *path,
			 const char *name, char *detail, char *summary, size_t n);

/* "libcurl/7.88.1 OpenSSL/3.0.x ..." */
const char *loom_fetch_curl_version(void);

#endif
