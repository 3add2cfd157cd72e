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

int main(void)
{
	const char *dir = tap_tmpdir();
	char src[4200], url[4300], dst[4200], part[4300], sha[LOOM_HASH_HEX_MAX];
	struct loom_err err;
	size_t n = 1 << 20;
	unsigned char *data = malloc(n);
	struct loom_fetch_result res;

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

	struct loom_fetch_opts o;
	loom_fetch_opts_default(&o);
	o.retries = 0;
	o.progress = on_progress;
	struct loom_fetch *f = loom_fetch_new(&o);
	ok(f != NULL, "new");

	struct loom_fetch_expect exp = { (int64_t)n, sha, NULL, NULL };
	is_int(loom_fetch_file(f, url, dst, &exp, &res), 0, "file:// download");
	is_int(fsize(dst), (long)n, "size");
	ok(res.verified && !res.already && res.size == n && res.transferred == n, "result fields");
	is_str(res.algo, "sha1", "algo");
	is_str(res.hex, sha, "hex");
	ok(calls > 0 && last_done == n && last_total == n, "progress callback saw the whole file");
	ok(access(part, F_OK) != 0, "no .part after success");

	is_int(loom_fetch_file(f, url, dst, &exp, &res), 0, "second call");
	ok(res.already && res.transferred == 0 && res.attempts == 0, "already complete, nothing transferred");
	ok(res.cached && !strcmp(res.hex, sha), "trusted its verification record");
	struct loom_fetch_opts o2 = o;
	o2.recheck = 1;
	struct loom_fetch *f2 = loom_fetch_new(&o2);
	is_int(loom_fetch_file(f2, url, dst, &exp, &res), 0, "recheck");
	ok(res.already && !res.cached && res.verified && !strcmp(res.hex, sha), "rehashed");
	loom_fetch_free(f2);

	/* resume: a .part with the first 300000 bytes */
	unlink(dst);
	ok(loom_write_file_atomic(part, data, 300000, &err) == 0, "write a .part");
	is_int(loom_fetch_file(f, url, dst, &exp, &res), 0, "resume from .part");
	ok(res.resumed_from == 300000 && res.transferred == n - 300000, "only the rest transferred");
	char *buf;
	size_t len;
	ok(loom_read_file(dst, &buf, &len, &err) == 0 && len == n && !memcmp(buf, data, n),
	   "resumed file intact");
	free(buf);

	/* a .part longer than the file is discarded */
	unlink(dst);
	unsigned char *big = calloc(1, n + 10);
	ok(loom_write_file_atomic(part, big, n + 10, &err) == 0, "oversized .part");
	free(big);
	is_int(loom_fetch_file(f, url, dst, &exp, &res), 0, "oversized .part restarted");
	ok(res.resumed_from == 0 && fsize(dst) == (long)n, "restarted from 0");

	/* a corrupt .part: mismatch, then one fresh download */
	unlink(dst);
	unsigned char *zero = calloc(1, 4096);
	ok(loom_write_file_atomic(part, zero, 4096, &err) == 0, "corrupt .part");
	free(zero);
	is_int(loom_fetch_file(f, url, dst, &exp, &res), 0, "corrupt .part: refetched");
	ok(res.resumed_from == 0 && fsize(dst) == (long)n, "fresh download after mismatch");

	/* mismatches */
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

	/* missing file is permanent */
	char miss[4300];
	snprintf(miss, sizeof miss, "file://%s/none", dir);
	is_int(loom_fetch_file(f, miss, dst, NULL, &res), LOOM_EIO, "missing file:// is EIO");
	ok(access(part, F_OK) != 0, "no empty .part");

	/* memory fetch */
	is_int(loom_fetch_mem(f, url, n, &buf, &len), 0, "fetch into memory");
	ok(len == n && !memcmp(buf, data, n) && buf[n] == 0, "memory copy, NUL-terminated");
	free(buf);
	is_int(loom_fetch_mem(f, url, 1000, &buf, &len), LOOM_ERANGE, "max enforced");

	ok(strstr(loom_fetch_curl_version(), "libcurl/") != NULL, "curl version");
	loom_fetch_free(f);
	loom_fetch_free(NULL);
	free(data);
	return done_testing();
}
