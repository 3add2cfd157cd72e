/* loom_common.c - see loom_common.h */
#include "loom_common.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int loom_err_set(struct loom_err *e, int code, const char *fmt, ...)
{
	va_list ap;
	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	return code;
}

int loom_err_errno(struct loom_err *e, int code, int errnum, const char *fmt, ...)
{
	va_list ap;
	size_t n;
	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	n = strlen(e->msg);
	snprintf(e->msg + n, sizeof e->msg - n, ": %s", strerror(errnum));
	return code;
}

void loom_note(void (*fn)(void *ctx, const char *line), void *ctx, const char *fmt, ...)
{
	char line[4 * PATH_MAX + 256];
	va_list ap;
	if (!fn)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fn(ctx, line);
}

void loom_err_clear(struct loom_err *e)
{
	e->code = 0;
	e->msg[0] = '\0';
}

const char *loom_json_reason(const char *text)
{
	/* jansson: "\\u0000 is not allowed without JSON_ALLOW_NUL" */
	if (strstr(text, "JSON_ALLOW_NUL"))
		return "a string holds \\u0000 (a NUL character), which is not allowed here";
	return text;
}

const char *loom_strerror(int code)
{
	switch (code) {
	case LOOM_OK: return "success";
	case LOOM_EIO: return "I/O error";
	case LOOM_ENOMEM: return "out of memory";
	case LOOM_EFORMAT: return "malformed input";
	case LOOM_ETRUNC: return "truncated input";
	case LOOM_EINVAL: return "invalid argument";
	case LOOM_ERANGE: return "value out of range";
	case LOOM_ENET: return "temporary network failure";
	case LOOM_ECHECKSUM: return "checksum mismatch";
	case LOOM_EOF: return "end of input";
	case LOOM_EBUSY: return "locked by another process";
	}
	return "unknown error";
}

static double clock_seconds(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double loom_now(void)
{
	return clock_seconds(CLOCK_MONOTONIC);
}

double loom_cpu_now(void)
{
	return clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
}

const char *loom_version(void)
{
	return LOOM_VERSION;
}

int loom_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;
	if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
		return LOOM_EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (*end != '\0')
		return LOOM_EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return LOOM_ERANGE;
	*out = v;
	return 0;
}

int loom_parse_double(const char *s, double *out)
{
	char *end;
	double v;
	if (!s || !*s || isspace((unsigned char)*s))
		return LOOM_EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0' || errno == ERANGE || !isfinite(v))
		return LOOM_EINVAL;
	*out = v;
	return 0;
}

int loom_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	char buf[64];
	size_t n;
	uint64_t v, mul = 1;
	int rc;
	if (!s || (n = strlen(s)) == 0 || n >= sizeof buf)
		return LOOM_EINVAL;
	memcpy(buf, s, n + 1);
	/* the unit: X or XiB (powers of 1024), XB (powers of 1000) */
	int dec = n >= 2 && toupper((unsigned char)buf[n - 1]) == 'B' &&
		  !(n >= 3 && toupper((unsigned char)buf[n - 2]) == 'I');
	size_t u = dec ? n - 2 : n >= 3 && toupper((unsigned char)buf[n - 1]) == 'B' ? n - 3 : n - 1;
	const char *k = isalpha((unsigned char)buf[u]) ? strchr(units, toupper((unsigned char)buf[u]))
						       : NULL;
	if (k) {
		for (const char *p = units; p <= k; p++)
			mul *= dec ? 1000 : 1024;
		buf[u] = '\0';
	} else if (u != n - 1) {
		return LOOM_EINVAL; /* "iB" or "B" after no unit */
	}
	if ((rc = loom_parse_u64(buf, 0, UINT64_MAX / mul, &v)) < 0)
		return rc;
	*out = v * mul;
	return 0;
}

const char *loom_double_repr(double x, char *buf, size_t len)
{
	int p = 1;
	for (; p < 17; p++) {
		snprintf(buf, len, "%.*e", p - 1, x);
		if (strtod(buf, NULL) == x)
			break;
	}
	snprintf(buf, len, "%.*e", p - 1, x);
	const char *e = strchr(buf, 'e');
	int e10 = e ? atoi(e + 1) : 0;
	if (x != x || x == 0 || !e || e10 < -4 || e10 >= 16) {
		if (x == 0)
			snprintf(buf, len, "%s", signbit(x) ? "-0.0" : "0.0");
		return buf; /* Python's repr: 1e-05, 1.5e+16 */
	}
	int d = p - 1 - e10;
	snprintf(buf, len, "%.*f", d > 0 ? d : 0, x);
	if (d <= 0 && strlen(buf) + 3 <= len)
		strcat(buf, ".0");
	return buf;
}

/* A lazy block: [header of 64 bytes: the mapping's length][data] */
#define LAZY_HDR 64

void *loom_lazy_alloc(size_t n)
{
	if (n > SIZE_MAX - LAZY_HDR)
		return NULL;
	size_t len = n + LAZY_HDR;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	/* large blocks in 2 MB pages where the kernel allows (transparent
	 * huge pages): a block that is given back and written again a layer
	 * at a time (weight sharding) then faults 512x less often */
	if (len >= (size_t)4 << 20)
		madvise(m, len, MADV_HUGEPAGE);
	*(size_t *)m = len;
	return (char *)m + LAZY_HDR;
}

void loom_lazy_free(void *p)
{
	if (!p)
		return;
	char *m = (char *)p - LAZY_HDR;
	munmap(m, *(size_t *)m);
}

void loom_lazy_release(void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p, e = a + n, pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a1 = (a + pg - 1) / pg * pg, e1 = e / pg * pg;
	if (a1 >= e1) {
		memset(p, 0, n);
		return;
	}
	memset(p, 0, a1 - a);
	memset((void *)e1, 0, e - e1);
	if (madvise((void *)a1, e1 - a1, MADV_DONTNEED))
		memset((void *)a1, 0, e1 - a1); /* cannot fail on our own mapping; zero anyway */
}

const char *loom_fmt_bytes(double n, char *buf, size_t len)
{
	static const char *units[] = { "B", "kB", "MB", "GB", "TB" };
	int u = 0;
	while (n >= 1000 && u < 4) {
		n /= 1000;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", n, units[u]);
	return buf;
}

const char *loom_fmt_duration(double sec, char *buf, size_t len)
{
	unsigned long s = sec > 0 ? (unsigned long)(sec + 0.5) : 0;
	if (s >= 3600)
		snprintf(buf, len, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
	else
		snprintf(buf, len, "%lu:%02lu", s / 60, s % 60);
	return buf;
}
