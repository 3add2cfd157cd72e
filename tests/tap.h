/*
 * tap.h - a tiny TAP producer for loom's C unit tests (tests/NAME.c is
 * built to build/tests/NAME.t and run by prove).
 *
 *   ok(cond, "name %d", i);       is_int(got, want, "name");
 *   is_str(got, want, "name");    is_mem(got, want, n, "name");
 *   diag("...");                  skip_all("reason");
 *   return done_testing();        // prints the plan, returns exit status
 */
#ifndef LOOM_TAP_H
#define LOOM_TAP_H

#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hermetic.h"

static int tap_count, tap_failed;

static void tap_vreport(int pass, const char *file, int line, const char *fmt, va_list ap)
{
	tap_count++;
	printf("%sok %d - ", pass ? "" : "not ", tap_count);
	vprintf(fmt, ap);
	putchar('\n');
	if (!pass) {
		tap_failed++;
		printf("#   Failed test at %s line %d.\n", file, line);
	}
	fflush(stdout);
}

static __attribute__((format(printf, 4, 5), unused)) int
tap_ok(int pass, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tap_vreport(pass, file, line, fmt, ap);
	va_end(ap);
	return pass;
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...) do { \
	long long g_ = (long long)(got), w_ = (long long)(want); \
	if (!tap_ok(g_ == w_, __FILE__, __LINE__, __VA_ARGS__)) \
		printf("#          got: %lld\n#     expected: %lld\n", g_, w_); \
} while (0)

#define is_str(got, want, ...) do { \
	const char *g_ = (got), *w_ = (want); \
	int p_ = g_ && w_ ? strcmp(g_, w_) == 0 : g_ == w_; \
	if (!tap_ok(p_, __FILE__, __LINE__, __VA_ARGS__)) \
		printf("#          got: '%s'\n#     expected: '%s'\n", \
		       g_ ? g_ : "(null)", w_ ? w_ : "(null)"); \
} while (0)

#define is_mem(got, want, n, ...) \
	tap_ok(memcmp((got), (want), (n)) == 0, __FILE__, __LINE__, __VA_ARGS__)

static __attribute__((format(printf, 1, 2), unused)) void diag(const char *fmt, ...)
{
	va_list ap;
	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static __attribute__((unused, noreturn)) void skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	exit(0);
}

/* Entries of dir (not "." or "..") whose names start with prefix ("" for
 * all): temp-file debris checks.  0 if dir cannot be opened. */
static __attribute__((unused)) int tap_count_dir(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		     strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	if (d)
		closedir(d);
	return n;
}

static __attribute__((unused)) int done_testing(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? 1 : 0;
}

#endif
