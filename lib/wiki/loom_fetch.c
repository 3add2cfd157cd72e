/* loom_fetch.c - see loom_fetch.h */
#include "loom_fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "loom_file.h"
#include "loom_hash.h"

/* Internal: the attempt must be repeated at once from byte 0. */
#define RESTART 1

struct loom_fetch {
	struct loom_fetch_opts o;
	CURL *curl;
	struct loom_err err;
};

/* Digests computed while streaming: the expected ones plus sha1. */
enum { H_SHA256, H_SHA1, H_MD5, H_N };
static const char *const halgo[H_N] = { "sha256", "sha1", "md5" };

struct xfer {
	struct loom_fetch *f;
	const char *url;
	/* file mode */
	int fd;
	struct loom_hash *h[H_N];
	int64_t want_size;      /* -1 unknown */
	uint64_t start;         /* offset requested with Range */
	uint64_t written;       /* bytes in the .part */
	uint64_t received;      /* bytes received in this attempt */
	/* memory mode */
	int mem;
	char *buf;
	size_t len, cap, max;
	/* response */
	int checked;            /* first body byte seen and headers validated */
	int bad_range;          /* 206 with a range we did not ask for */
	int range_complete;     /* 416 saying the .part already is the file */
	int fail;               /* a LOOM_E* decided in a callback (message set) */
	char reason[64];        /* HTTP reason phrase */
	int have_cr;
	int64_t cr_start, cr_total; /* Content-Range, -1 unknown */
	double t0;
	uint64_t *total_received;
};

static void sleep_s(double s)
{
	if (s <= 0)
		return;
	struct timespec ts = { (time_t)s, (long)((s - floor(s)) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

void loom_fetch_opts_default(struct loom_fetch_opts *o)
{
	memset(o, 0, sizeof *o);
	o->retries = 5;
	o->retry_delay = 1;
	o->retry_delay_max = 60;
	o->connect_timeout = 30;
	o->stall_timeout = 60;
}

const char *loom_fetch_curl_version(void)
{
	return curl_version();
}

const char *loom_fetch_error(const struct loom_fetch *f)
{
	return f->err.msg;
}

struct loom_fetch *loom_fetch_new(const struct loom_fetch_opts *opts)
{
	static int global_done;
	if (!global_done) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return NULL;
		global_done = 1;
	}
	struct loom_fetch *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	if (opts)
		f->o = *opts;
	else
		loom_fetch_opts_default(&f->o);
	if (!(f->curl = curl_easy_init())) {
		free(f);
		return NULL;
	}
	return f;
}

void loom_fetch_free(struct loom_fetch *f)
{
	if (!f)
		return;
	curl_easy_cleanup(f->curl);
	free(f);
}

/* ---- callbacks ------------------------------------------------------- */

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n;
	if (len >= 5 && !strncmp(p, "HTTP/", 5)) {
		/* a new response (after a redirect or 100 Continue) */
		x->have_cr = 0;
		x->cr_start = x->cr_total = -1;
		x->reason[0] = 0;
		const char *sp = memchr(p, ' ', len);
		if (sp && (size_t)(sp - p) + 5 < len) {
			const char *r = sp + 5; /* past " NNN " */
			size_t rl = len - (size_t)(r - p);
			while (rl && (r[rl - 1] == '\r' || r[rl - 1] == '\n'))
				rl--;
			if (rl >= sizeof x->reason)
				rl = sizeof x->reason - 1;
			memcpy(x->reason, r, rl);
			x->reason[rl] = 0;
		}
	} else if (len > 14 && !strncasecmp(p, "Content-Range:", 14)) {
		char tmp[128];
		size_t tl = len - 14 < sizeof tmp - 1 ? len - 14 : sizeof tmp - 1;
		memcpy(tmp, p + 14, tl);
		tmp[tl] = 0;
		unsigned long long a, b, t;
		if (sscanf(tmp, " bytes %llu-%llu/%llu", &a, &b, &t) == 3 && a <= b && b < t) {
			x->have_cr = 1;
			x->cr_start = (int64_t)a;
			x->cr_total = (int64_t)t;
		} else if (sscanf(tmp, " bytes %llu-%llu/*", &a, &b) == 2 && a <= b) {
			x->have_cr = 1;
			x->cr_start = (int64_t)a;
		} else if (sscanf(tmp, " bytes */%llu", &t) == 1) {
			x->have_cr = 1;
			x->cr_total = (int64_t)t;
		}
	}
	return len;
}

static long response_code(struct xfer *x)
{
	long code = 0;
	curl_easy_getinfo(x->f->curl, CURLINFO_RESPONSE_CODE, &code);
	return code;
}

static int is_http(struct xfer *x)
{
	char *scheme = NULL;
	curl_easy_getinfo(x->f->curl, CURLINFO_SCHEME, &scheme);
	return scheme && !strncasecmp(scheme, "http", 4);
}

static void hashes_reset(struct xfer *x)
{
	char hex[LOOM_HASH_HEX_MAX];
	for (int i = 0; i < H_N; i++)
		if (x->h[i])
			loom_hash_final_hex(x->h[i], hex); /* restarts it */
}

static int hashes_update(struct xfer *x, const void *p, size_t n)
{
	for (int i = 0; i < H_N; i++)
		if (x->h[i] && loom_hash_update(x->h[i], p, n) < 0)
			return loom_err_set(&x->f->err, LOOM_EIO, "%s", loom_hash_error(x->h[i]));
	return 0;
}

/* First body bytes: is this the answer we asked for? 0 to go on, 1 to
 * abort the transfer (x->fail / x->bad_range say why). */
static int check_response(struct xfer *x)
{
	x->checked = 1;
	if (x->mem || !is_http(x))
		return 0; /* file:// seeks; errors are reported by curl */
	long code = response_code(x);
	if (code != 200 && code != 206)
		return 1; /* classified after the transfer from the code */
	if (x->start > 0 && code == 200) {
		/* the server ignored the Range: start over from byte 0 */
		if (ftruncate(x->fd, 0) < 0 || lseek(x->fd, 0, SEEK_SET) < 0) {
			x->fail = loom_err_errno(&x->f->err, LOOM_EIO, errno,
						 "cannot truncate the .part file");
			return 1;
		}
		hashes_reset(x);
		x->start = x->written = 0;
	} else if (code == 206 && (x->start == 0 || !x->have_cr ||
				   x->cr_start != (int64_t)x->start)) {
		x->bad_range = 1;
		return 1;
	}
	int64_t total = -1;
	if (code == 206) {
		total = x->cr_total;
	} else {
		curl_off_t cl = -1;
		curl_easy_getinfo(x->f->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
		if (cl >= 0)
			total = (int64_t)cl;
	}
	if (total >= 0 && x->want_size >= 0 && total != x->want_size) {
		x->fail = loom_err_set(&x->f->err, LOOM_ECHECKSUM,
				       "%s: the server sends %lld bytes, expected %lld",
				       x->url, (long long)total, (long long)x->want_size);
		return 1;
	}
	if (x->want_size < 0 && total >= 0)
		x->want_size = total; /* for progress; checked at the end too */
	return 0;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n;
	if (!x->checked && check_response(x))
		return 0;
	x->received += len;
	*x->total_received += len;
	if (x->mem) {
		if (x->len + len > x->max) {
			x->fail = loom_err_set(&x->f->err, LOOM_ERANGE,
					       "%s: larger than %zu bytes", x->url, x->max);
			return 0;
		}
		if (x->len + len + 1 > x->cap) {
			size_t cap = x->cap ? x->cap : 4096;
			while (cap < x->len + len + 1)
				cap *= 2;
			char *nb = realloc(x->buf, cap);
			if (!nb) {
				x->fail = loom_err_set(&x->f->err, LOOM_ENOMEM, "out of memory");
				return 0;
			}
			x->buf = nb;
			x->cap = cap;
		}
		memcpy(x->buf + x->len, p, len);
		x->len += len;
		return len;
	}
	if (x->want_size >= 0 && x->written + len > (uint64_t)x->want_size) {
		x->fail = loom_err_set(&x->f->err, LOOM_ECHECKSUM,
				       "%s: more data than the expected %lld bytes", x->url,
				       (long long)x->want_size);
		return 0;
	}
	if (hashes_update(x, p, len) < 0) {
		x->fail = LOOM_EIO;
		return 0;
	}
	int rc = loom_write_all(x->fd, p, len);
	if (rc < 0) {
		x->fail = loom_err_errno(&x->f->err, LOOM_EIO, -rc, "cannot write the .part file");
		return 0;
	}
	x->written += len;
	return len;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ult,
		       curl_off_t ulnow)
{
	struct xfer *x = ud;
	(void)dltotal, (void)dlnow, (void)ult, (void)ulnow;
	if (!x->f->o.progress || x->mem)
		return 0;
	struct loom_fetch_progress p;
	double dt = loom_now() - x->t0;
	p.url = x->url;
	p.done = x->written;
	p.total = x->want_size >= 0 ? (uint64_t)x->want_size : 0;
	p.resumed_from = x->start;
	p.rate = dt > 0 ? x->received / dt : 0;
	p.eta = (p.total && p.rate > 0 && p.total >= p.done) ? (p.total - p.done) / p.rate : -1;
	x->f->o.progress(x->f->o.progress_ud, &p);
	return 0;
}

/* ---- one attempt ----------------------------------------------------- */

static int temporary_curl(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_PARTIAL_FILE:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_AGAIN:
		return 1;
	default:
		return 0;
	}
}

/* Run the transfer; returns 0, RESTART, or a negative LOOM_E*. */
static int perform(struct xfer *x)
{
	struct loom_fetch *f = x->f;
	CURL *c = f->curl;
	char errbuf[CURL_ERROR_SIZE] = "";
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, x->url);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https,file");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
	curl_easy_setopt(c, CURLOPT_USERAGENT, "loom-fetch/" LOOM_VERSION " (libcurl)");
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, f->o.connect_timeout);
	if (f->o.stall_timeout > 0) {
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, f->o.stall_timeout);
	}
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	if (x->start > 0)
		curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)x->start);

	x->checked = x->bad_range = x->range_complete = x->fail = 0;
	x->have_cr = 0;
	x->cr_start = x->cr_total = -1;
	x->reason[0] = 0;
	x->received = 0;
	x->t0 = loom_now();
	CURLcode cr = curl_easy_perform(c);

	if (x->fail)
		return x->fail;
	if (x->bad_range)
		return RESTART;
	long code = is_http(x) ? response_code(x) : 0;
	if (code == 416 && x->start > 0) {
		/* the range starts at or past the end: complete .part, or junk */
		if (x->have_cr && x->cr_total == (int64_t)x->start) {
			x->range_complete = 1;
			return 0;
		}
		return RESTART;
	}
	if (code >= 300) {
		int tmp = code >= 500 || code == 408 || code == 429;
		return loom_err_set(&f->err, tmp ? LOOM_ENET : LOOM_EIO, "%s: HTTP %ld%s%s",
				    x->url, code, x->reason[0] ? " " : "", x->reason);
	}
	if (cr != CURLE_OK) {
		const char *why = errbuf[0] ? errbuf : curl_easy_strerror(cr);
		if ((cr == CURLE_RANGE_ERROR || cr == CURLE_BAD_DOWNLOAD_RESUME) && x->start > 0)
			return RESTART; /* server (or file://) cannot resume */
		return loom_err_set(&f->err, temporary_curl(cr) ? LOOM_ENET : LOOM_EIO,
				    "%s: %s", x->url, why);
	}
	if (!x->mem && !x->checked && x->start > 0 && code == 200) {
		/* an empty 200 answer to a range request: start over */
		return RESTART;
	}
	return 0;
}

/* Retry loop around perform(); `prepare` (re)opens the attempt state. */
static int with_retries(struct xfer *x, int (*prepare)(struct xfer *, int fresh),
			unsigned *attempts)
{
	struct loom_fetch *f = x->f;
	double delay = f->o.retry_delay;
	unsigned failures = 0, restarts = 0;
	int fresh = 0;
	for (;;) {
		int rc = prepare(x, fresh);
		if (rc < 0)
			return rc;
		if (rc == 1)
			return 0; /* nothing to transfer */
		(*attempts)++;
		rc = perform(x);
		if (rc == 0)
			return 0;
		if (rc == RESTART) {
			fresh = 1;
			if (++restarts > 3)
				return loom_err_set(&f->err, LOOM_EIO,
						    "%s: the server keeps answering the wrong byte range",
						    x->url);
			continue;
		}
		fresh = 0;
		if (rc != LOOM_ENET || failures >= f->o.retries) {
			if (rc == LOOM_ENET && failures > 0) {
				size_t l = strlen(f->err.msg);
				snprintf(f->err.msg + l, sizeof f->err.msg - l,
					 " (gave up after %u attempts)", failures + 1);
			}
			return rc;
		}
		failures++;
		sleep_s(delay);
		delay = delay * 2 > f->o.retry_delay_max ? f->o.retry_delay_max : delay * 2;
	}
}

/* ---- memory fetch ---------------------------------------------------- */

static int prepare_mem(struct xfer *x, int fresh)
{
	(void)fresh;
	x->len = 0;
	return 0;
}

int loom_fetch_mem(struct loom_fetch *f, const char *url, size_t max, char **buf,
		   size_t *len)
{
	struct xfer x;
	uint64_t total = 0;
	unsigned attempts = 0;
	memset(&x, 0, sizeof x);
	x.f = f;
	x.url = url;
	x.fd = -1;
	x.mem = 1;
	x.max = max;
	x.want_size = -1;
	x.total_received = &total;
	loom_err_clear(&f->err);
	int rc = with_retries(&x, prepare_mem, &attempts);
	if (rc < 0) {
		free(x.buf);
		return rc;
	}
	if (!x.buf && !(x.buf = malloc(1)))
		return loom_err_set(&f->err, LOOM_ENOMEM, "out of memory");
	x.buf[x.len] = 0;
	*buf = x.buf;
	*len = x.len;
	return 0;
}

/* ---- file fetch ------------------------------------------------------ */

struct filectx {
	struct xfer x;
	char *part;
	const struct loom_fetch_expect *exp;
};

/* Hash the first n bytes of fd into every active digest. */
static int hash_prefix(struct xfer *x, int fd, uint64_t n, const char *what)
{
	size_t bs = 1 << 20;
	char *b = malloc(bs);
	if (!b)
		return loom_err_set(&x->f->err, LOOM_ENOMEM, "out of memory");
	uint64_t off = 0;
	int rc = 0;
	while (off < n) {
		size_t k = n - off < bs ? (size_t)(n - off) : bs;
		ssize_t r = pread(fd, b, k, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r < 0 ? loom_err_errno(&x->f->err, LOOM_EIO, errno,
						    "cannot read '%s'", what)
				   : loom_err_set(&x->f->err, LOOM_ETRUNC,
						  "'%s' shrank while being read", what);
			break;
		}
		if ((rc = hashes_update(x, b, (size_t)r)) < 0)
			break;
		off += (uint64_t)r;
	}
	free(b);
	return rc;
}

/* Open the .part for an attempt and set x->start.  Returns 0 to transfer,
 * 1 when the .part already holds every expected byte. */
static int prepare_file(struct xfer *x, int fresh)
{
	struct filectx *fc = (struct filectx *)x;
	if (x->fd < 0) {
		x->fd = open(fc->part, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		if (x->fd < 0)
			return loom_err_errno(&x->f->err, LOOM_EIO, errno, "cannot open '%s'",
					      fc->part);
	}
	struct stat st;
	if (fstat(x->fd, &st) < 0)
		return loom_err_errno(&x->f->err, LOOM_EIO, errno, "cannot stat '%s'", fc->part);
	uint64_t have = (uint64_t)st.st_size;
	int64_t want = fc->exp ? fc->exp->size : -1;
	x->want_size = want;
	if (fresh || (want >= 0 && have > (uint64_t)want))
		have = 0;
	if (ftruncate(x->fd, (off_t)have) < 0 || lseek(x->fd, (off_t)have, SEEK_SET) < 0)
		return loom_err_errno(&x->f->err, LOOM_EIO, errno, "cannot truncate '%s'",
				      fc->part);
	hashes_reset(x);
	int rc = hash_prefix(x, x->fd, have, fc->part);
	if (rc < 0)
		return rc;
	x->start = x->written = have;
	if (want >= 0 && have == (uint64_t)want && have > 0)
		return 1;
	return 0;
}

static void hex_of(struct xfer *x, int i, char *out)
{
	loom_hash_final_hex(x->h[i], out);
}

/* Compare the digests of what was hashed with the expectations.  Fills
 * res->algo/hex; returns 0, or LOOM_ECHECKSUM with a message naming
 * `what`. */
static int verify(struct xfer *x, const struct loom_fetch_expect *exp, uint64_t size,
		  const char *what, struct loom_fetch_result *res)
{
	const char *want[H_N] = { exp ? exp->sha256 : NULL, exp ? exp->sha1 : NULL,
				  exp ? exp->md5 : NULL };
	char got[H_N][LOOM_HASH_HEX_MAX];
	int bad = -1, strongest = -1;
	for (int i = 0; i < H_N; i++) {
		got[i][0] = 0;
		if (!x->h[i])
			continue;
		hex_of(x, i, got[i]);
		if (want[i] && want[i][0]) {
			if (strongest < 0)
				strongest = i;
			if (bad < 0 && strcasecmp(want[i], got[i]))
				bad = i;
		}
	}
	int shown = strongest >= 0 ? strongest : H_SHA1;
	snprintf(res->algo, sizeof res->algo, "%s", halgo[shown]);
	snprintf(res->hex, sizeof res->hex, "%s", got[shown]);
	res->verified = 0;
	if (exp && exp->size >= 0 && size != (uint64_t)exp->size)
		return loom_err_set(&x->f->err, LOOM_ECHECKSUM,
				    "%s: size mismatch: expected %lld bytes, got %llu", what,
				    (long long)exp->size, (unsigned long long)size);
	if (bad >= 0)
		return loom_err_set(&x->f->err, LOOM_ECHECKSUM,
				    "%s: %s mismatch: expected %s, got %s", what, halgo[bad],
				    want[bad], got[bad]);
	res->verified = strongest >= 0; /* a digest, not only the size */
	return 0;
}

/* The verification record: "<algo> <hex> <size> <mtime s>.<ns>". */
#define VERIFIED_XATTR "user.loom.verified"

static int record_text(char *buf, size_t n, const char *algo, const char *hex,
		       const struct stat *st)
{
	int k = snprintf(buf, n, "%s %s %lld %lld.%09ld", algo, hex, (long long)st->st_size,
			 (long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec);
	for (char *p = buf; *p; p++)
		if (*p >= 'A' && *p <= 'F')
			*p = (char)(*p - 'A' + 'a');
	return k;
}

/* Best effort: a file system without user xattrs just rehashes later. */
static void record_verified(int fd, const char *algo, const char *hex)
{
	struct stat st;
	char v[256];
	if (fstat(fd, &st) == 0) {
		int k = record_text(v, sizeof v, algo, hex, &st);
		if (k > 0 && (size_t)k < sizeof v)
			(void)fsetxattr(fd, VERIFIED_XATTR, v, (size_t)k, 0);
	}
}

static int recorded_verified(const char *path, const struct stat *st, const char *algo,
			     const char *hex)
{
	char got[256], want[256];
	ssize_t n = getxattr(path, VERIFIED_XATTR, got, sizeof got - 1);
	if (n <= 0)
		return 0;
	got[n] = 0;
	record_text(want, sizeof want, algo, hex, st);
	return !strcmp(got, want);
}

static int valid_hex(const char *s, size_t n)
{
	return !s || loom_hex_is(s, n);
}

int loom_fetch_file(struct loom_fetch *f, const char *url, const char *path,
		    const struct loom_fetch_expect *exp, struct loom_fetch_result *res)
{
	struct filectx fc;
	struct xfer *x = &fc.x;
	int rc = 0;
	double t0 = loom_now();

	memset(res, 0, sizeof *res);
	memset(&fc, 0, sizeof fc);
	loom_err_clear(&f->err);
	if (exp && (!valid_hex(exp->sha1, 40) || !valid_hex(exp->md5, 32) ||
		    !valid_hex(exp->sha256, 64)))
		return loom_err_set(&f->err, LOOM_EINVAL, "%s: malformed expected digest", url);
	x->f = f;
	x->url = url;
	x->fd = -1;
	x->total_received = &res->transferred;
	fc.exp = exp;
	int any_digest = 0;
	for (int i = 0; i < H_N; i++) {
		const char *w = !exp ? NULL : i == H_SHA256 ? exp->sha256 : i == H_SHA1 ? exp->sha1
										       : exp->md5;
		if ((w && w[0]) || i == H_SHA1) {
			if (!(x->h[i] = loom_hash_new(halgo[i]))) {
				rc = loom_err_set(&f->err, LOOM_ENOMEM, "cannot set up %s", halgo[i]);
				goto out;
			}
			any_digest |= w && w[0];
		}
	}
	if (asprintf(&fc.part, "%s.part", path) < 0) {
		fc.part = NULL;
		rc = loom_err_set(&f->err, LOOM_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = loom_mkdir_parent(path, &f->err)) < 0)
		goto out;

	/* Already there and verified? */
	struct stat st;
	if (any_digest && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	    (exp->size < 0 || (uint64_t)st.st_size == (uint64_t)exp->size)) {
		int s = exp->sha256 && exp->sha256[0] ? H_SHA256
			: exp->sha1 && exp->sha1[0] ? H_SHA1 : H_MD5;
		const char *shex = s == H_SHA256 ? exp->sha256 : s == H_SHA1 ? exp->sha1
									  : exp->md5;
		if (!f->o.recheck && recorded_verified(path, &st, halgo[s], shex)) {
			res->already = res->cached = res->verified = 1;
			res->size = (uint64_t)st.st_size;
			snprintf(res->algo, sizeof res->algo, "%s", halgo[s]);
			for (size_t i = 0; shex[i] && i < sizeof res->hex - 1; i++)
				res->hex[i] = (char)(shex[i] >= 'A' && shex[i] <= 'F'
						     ? shex[i] - 'A' + 'a' : shex[i]);
			goto out;
		}
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = loom_err_errno(&f->err, LOOM_EIO, errno, "cannot open '%s'", path);
			goto out;
		}
		rc = hash_prefix(x, fd, (uint64_t)st.st_size, path);
		if (rc == 0 && verify(x, exp, (uint64_t)st.st_size, path, res) == 0) {
			record_verified(fd, res->algo, res->hex);
			close(fd);
			res->already = 1;
			res->size = (uint64_t)st.st_size;
			goto out;
		}
		close(fd);
		if (rc < 0)
			goto out;
		loom_err_clear(&f->err); /* present but different: fetch it anew */
	}

	for (int round = 0;; round++) {
		rc = with_retries(x, prepare_file, &res->attempts);
		if (rc < 0)
			goto out; /* the .part stays for a later resume */
		res->resumed_from = x->start;
		rc = verify(x, exp, x->written, url, res);
		if (rc == 0)
			break;
		/* bad data: drop the .part; if part of it came from an earlier
		 * attempt, that may be the culprit: fetch once more from 0 */
		close(x->fd);
		x->fd = -1;
		if (unlink(fc.part) < 0 && errno != ENOENT) {
			rc = loom_err_errno(&f->err, LOOM_EIO, errno, "cannot remove '%s'", fc.part);
			goto out;
		}
		if (res->resumed_from == 0 || round > 0) {
			size_t l = strlen(f->err.msg);
			snprintf(f->err.msg + l, sizeof f->err.msg - l, " (download removed)");
			rc = LOOM_ECHECKSUM;
			goto out;
		}
	}
	if (res->verified)
		record_verified(x->fd, res->algo, res->hex);
	if (fsync(x->fd) < 0) {
		rc = loom_err_errno(&f->err, LOOM_EIO, errno, "cannot fsync '%s'", fc.part);
		goto out;
	}
	if (close(x->fd) < 0) {
		x->fd = -1;
		rc = loom_err_errno(&f->err, LOOM_EIO, errno, "cannot close '%s'", fc.part);
		goto out;
	}
	x->fd = -1;
	if (rename(fc.part, path) < 0) {
		rc = loom_err_errno(&f->err, LOOM_EIO, errno, "cannot rename '%s' to '%s'",
				    fc.part, path);
		goto out;
	}
	rc = loom_fsync_dir_of(path, &f->err);
	res->size = x->written;
out:
	if (x->fd >= 0) {
		/* a failure before any byte arrived leaves no empty .part */
		struct stat pst;
		if (rc < 0 && fstat(x->fd, &pst) == 0 && pst.st_size == 0)
			unlink(fc.part);
		close(x->fd);
	}
	for (int i = 0; i < H_N; i++)
		loom_hash_free(x->h[i]);
	free(fc.part);
	res->seconds = loom_now() - t0;
	return rc;
}

void loom_fetch_describe(const struct loom_fetch_result *res, const char *url, const char *path,
			 const char *name, char *detail, char *summary, size_t n)
{
	char sz[32], at[32], resumed[64] = "";
	if (res->already)
		snprintf(detail, n, "%s: already present and %s: not fetched", path,
			 res->cached ? "recorded as verified" : "verified");
	else
		snprintf(detail, n, "%s: %llu bytes received in %u attempt%s, resumed at byte %llu", url,
			 (unsigned long long)res->transferred, res->attempts,
			 res->attempts == 1 ? "" : "s", (unsigned long long)res->resumed_from);
	loom_fmt_bytes((double)res->size, sz, sizeof sz);
	if (res->already) {
		snprintf(summary, n, "%s: already complete (%s, %s %s %s)", name, sz, res->algo,
			 res->hex, res->cached ? "verified earlier" : "verified");
		return;
	}
	double mbs = res->seconds > 0 ? res->transferred / res->seconds / 1e6 : 0;
	if (res->resumed_from)
		snprintf(resumed, sizeof resumed, " (resumed at %s)",
			 loom_fmt_bytes((double)res->resumed_from, at, sizeof at));
	snprintf(summary, n, "%s: %s%s, %s %s %s, %.1f s, %.1f MB/s", name, sz, resumed, res->algo,
		 res->hex, res->verified ? "verified" : "(not verified: no checksum given)",
		 res->seconds, mbs);
}
