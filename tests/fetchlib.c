/* Unit tests for loom_fetch over file:// URLs (libcurl's FILE protocol;
 * the HTTP paths are tested against real servers in tests/fetch.t):
 * download + verify, resume from a .part, already-complete detection,
 * checksum and size mismatches, progress callback, loom_fetch_mem. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom_fetch.h"
#include "loom_file.h"
#include "loom_hash.h"
#include "tap.h"

static int calls;
static uint64_t last_done, last_total;

static void on_progress(void *ud, const struct loom_fetch_progress *p)
{
	(void)ud;
	calls++;
	last_done = p->done;
	last_total = p->total;
}

static long fsize(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

/* What the cases share: a 1 MiB source file of random bytes (data, its
 * sha1), its file:// URL, the destination and its .part, and the fetcher. */
static const char *dir;
static char src[4200], url[4300], dst[4200], part[4300], sha[LOOM_HASH_HEX_MAX];
static size_t n = 1 << 20;
static unsigned char *data;
static struct loom_fetch_opts o;
static struct loom_fetch *f;
static struct loom_fetch_expect expect;

/* A file:// download, verified, with progress. */
static void case_download(void)
{
	struct loom_fetch_result res;
	loom_fetch_opts_default(&o);
	o.retries = 0;
	o.progress = on_progress;
	f = loom_fetch_new(&o);
	ok(f != NULL, "new");

	expect = (struct loom_fetch_expect){ (int64_t)n, sha, NULL, NULL };
	is_int(loom_fetch_file(f, url, dst, &expect, &res), 0, "file:// download");
	is_int(fsize(dst), (long)n, "size");
	ok(res.verified && !res.already && res.size == n && res.transferred == n, "result fields");
	is_str(res.algo, "sha1", "algo");
	is_str(res.hex, sha, "hex");
	ok(calls > 0 && last_done == n && last_total == n, "progress callback saw the whole file");
	ok(access(part, F_OK) != 0, "no .part after success");
}

/* A second call finds the file complete; recheck rehashes it. */
static void case_already_complete(void)
{
	struct loom_fetch_result res;
	is_int(loom_fetch_file(f, url, dst, &expect, &res), 0, "second call");
	ok(res.already && res.transferred == 0 && res.attempts == 0, "already complete, nothing transferred");
	ok(res.cached && !strcmp(res.hex, sha), "trusted its verification record");
	struct loom_fetch_opts o2 = o;
	o2.recheck = 1;
	struct loom_fetch *f2 = loom_fetch_new(&o2);
	is_int(loom_fetch_file(f2, url, dst, &expect, &res), 0, "recheck");
	ok(res.already && !res.cached && res.verified && !strcmp(res.hex, sha), "rehashed");
	loom_fetch_free(f2);
}

/* Resume: a .part with the first 300000 bytes. */
static void case_resume(void)
{
	struct loom_err err;
	struct loom_fetch_result res;
	unlink(dst);
	ok(loom_write_file_atomic(part, data, 300000, &err) == 0, "write a .part");
	is_int(loom_fetch_file(f, url, dst, &expect, &res), 0, "resume from .part");
	ok(res.resumed_from == 300000 && res.transferred == n - 300000, "only the rest transferred");
	char *buf;
	size_t len;
	ok(loom_read_file(dst, &buf, &len, &err) == 0 && len == n && !memcmp(buf, data, n),
	   "resumed file intact");
	free(buf);
}

/* A .part longer than the file is discarded. */
static void case_oversized_part(void)
{
	struct loom_err err;
	struct loom_fetch_result res;
	unlink(dst);
	unsigned char *big = calloc(1, n + 10);
	ok(loom_write_file_atomic(part, big, n + 10, &err) == 0, "oversized .part");
	free(big);
	is_int(loom_fetch_file(f, url, dst, &expect, &res), 0, "oversized .part restarted");
	ok(res.resumed_from == 0 && fsize(dst) == (long)n, "restarted from 0");
}

/* A corrupt .part: mismatch, then one fresh download. */
static void case_corrupt_part(void)
{
	struct loom_err err;
	struct loom_fetch_result res;
	unlink(dst);
	unsigned char *zero = calloc(1, 4096);
	ok(loom_write_file_atomic(part, zero, 4096, &err) == 0, "corrupt .part");
	free(zero);
	is_int(loom_fetch_file(f, url, dst, &expect, &res), 0, "corrupt .part: refetched");
	ok(res.resumed_from == 0 && fsize(dst) == (long)n, "fresh download after mismatch");
}

/* Mismatches. */
static void case_mismatches(void)
{
	struct loom_fetch_result res;
	unlink(dst);
	struct loom_fetch_expect bad = { (int64_t)n, "0000000000000000000000000000000000000000",
					 NULL, NULL };
	is_int(loom_fetch_file(f, url, dst, &bad, &res), LOOM_ECHECKSUM, "sha1 mismatch");
	char want[400];
	snprintf(want, sizeof want,
		 "sha1 mismatch: expected 0000000000000000000000000000000000000000, got %s "
		 "(download removed)", sha);
	ok(strstr(loom_fetch_error(f), want) != NULL, "mismatch message");
	diag("%s", loom_fetch_error(f));
	ok(access(dst, F_OK) != 0 && access(part, F_OK) != 0, "nothing left after a mismatch");
	struct loom_fetch_expect badsize = { 5, NULL, NULL, NULL };
	is_int(loom_fetch_file(f, url, dst, &badsize, &res), LOOM_ECHECKSUM, "size mismatch");
	struct loom_fetch_expect badhex = { -1, "xyz", NULL, NULL };
	is_int(loom_fetch_file(f, url, dst, &badhex, &res), LOOM_EINVAL, "malformed digest");
}

/* Missing file is permanent. */
static void case_missing_file(void)
{
	struct loom_fetch_result res;
	char miss[4300];
	snprintf(miss, sizeof miss, "file://%s/none", dir);
	is_int(loom_fetch_file(f, miss, dst, NULL, &res), LOOM_EIO, "missing file:// is EIO");
	ok(access(part, F_OK) != 0, "no empty .part");
}

/* Memory fetch; the curl version. */
static void case_memory(void)
{
	/* memory fetch */
	char *buf;
	size_t len;
	is_int(loom_fetch_mem(f, url, n, &buf, &len), 0, "fetch into memory");
	ok(len == n && !memcmp(buf, data, n) && buf[n] == 0, "memory copy, NUL-terminated");
	free(buf);
	is_int(loom_fetch_mem(f, url, 1000, &buf, &len), LOOM_ERANGE, "max enforced");

	ok(strstr(loom_fetch_curl_version(), "libcurl/") != NULL, "curl version");
}

/* loom_fetch_describe: loom-fetch's -v line and summary of a result. */
static void case_describe(void)
{
	char d[512], sum[512];
	struct loom_fetch_result r = { .size = 300000, .transferred = 150000, .resumed_from = 150000,
				       .seconds = 1.5, .attempts = 2, .verified = 1, .algo = "sha1",
				       .hex = "ab12" };
	loom_fetch_describe(&r, "http://m/x.bz2", "d/x.bz2", "x.bz2", d, sum, sizeof d);
	is_str(d, "http://m/x.bz2: 150000 bytes received in 2 attempts, resumed at byte 150000",
	       "describe: bytes, attempts, resume offset");
	is_str(sum, "x.bz2: 300.0 kB (resumed at 150.0 kB), sha1 ab12 verified, 1.5 s, 0.1 MB/s",
	       "describe: the summary");
	r = (struct loom_fetch_result){ .size = 5, .already = 1, .cached = 1, .algo = "md5", .hex = "cd" };
	loom_fetch_describe(&r, "u", "p", "n", d, sum, sizeof d);
	ok(!strcmp(d, "p: already present and recorded as verified: not fetched") &&
	   !strcmp(sum, "n: already complete (5 B, md5 cd verified earlier)"), "describe: already there");
	r = (struct loom_fetch_result){ .size = 5, .attempts = 1, .algo = "sha1", .hex = "ef" };
	loom_fetch_describe(&r, "u", "p", "n", d, sum, sizeof d);
	ok(strstr(d, "in 1 attempt,") && strstr(sum, "sha1 ef (not verified: no checksum given), 0.0 s"),
	   "describe: unverified, one attempt");
}

int main(void)
{
	struct loom_err err;
	case_describe();
	dir = tap_tmpdir();
	data = malloc(n);
	if (!data)
		skip_all("no scratch dir");
	srand(7);
	for (size_t i = 0; i < n; i++)
		data[i] = (unsigned char)rand();
	snprintf(src, sizeof src, "%s/src.bin", dir);
	snprintf(url, sizeof url, "file://%s", src);
	snprintf(dst, sizeof dst, "%s/dst.bin", dir);
	snprintf(part, sizeof part, "%s.part", dst);
	ok(loom_write_file_atomic(src, data, n, &err) == 0, "source file");
	loom_hash_buf_hex("sha1", data, n, sha, &err);
	case_download();
	case_already_complete();
	case_resume();
	case_oversized_part();
	case_corrupt_part();
	case_mismatches();
	case_missing_file();
	case_memory();
	loom_fetch_free(f);
	loom_fetch_free(NULL);
	free(data);
	return done_testing();
}
