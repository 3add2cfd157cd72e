/*
 * tap.h - a tiny TAP producer for loom's C unit tests (tests/NAME.c is
 * built to build/tests/NAME.t and run by prove), and the file-system
 * fixtures they share.
 *
 *   ok(cond, "name %d", i);       is_int(got, want, "name");
 *   is_str(got, want, "name");    is_mem(got, want, n, "name");
 *   diag("...");                  skip_all("reason");
 *   return done_testing();        // prints the plan, returns exit status
 *
 *   tap_tmpdir()                  the test's scratch directory, removed at exit
 *   tap_path("name")              tap_tmpdir()/name (a few rotating buffers)
 *   tap_slurp(&len, "%s/x", d)    a whole file, malloc'd, NUL-terminated
 *   tap_rm_rf(path)               recursive removal
 *   tap_count_dir(dir, "prefix")  entries of a directory (debris checks)
 *
 * The fixtures live here rather than in testlib.h because every C test
 * includes tap.h and some of them need files, while testlib.h is the
 * kernels' and the model's (it pulls in loom_gpt.h); tap.h stays
 * independent of libloom.  A long test is a set of named cases: static
 * functions called one after another from a short main.
 */
#ifndef LOOM_TAP_H
#define LOOM_TAP_H

#include <dirent.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
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

/* Entries of dir (not "." or "..") whose names start with s, or with
 * `anywhere` contain it.  0 if dir cannot be opened. */
static int tap_count_entries(const char *dir, const char *s, int anywhere)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		     (anywhere ? strstr(e->d_name, s) != NULL
			       : strncmp(e->d_name, s, strlen(s)) == 0);
	if (d)
		closedir(d);
	return n;
}

/* Entries of dir whose names start with prefix ("" for all): temp-file
 * debris checks. */
static __attribute__((unused)) int tap_count_dir(const char *dir, const char *prefix)
{
	return tap_count_entries(dir, prefix, 0);
}

/* Entries of dir whose names contain `part` anywhere. */
static __attribute__((unused)) int tap_count_dir_containing(const char *dir, const char *part)
{
	return tap_count_entries(dir, part, 1);
}

static int tap_rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

/* Remove path and everything under it (symlinks are not followed).
 * 0, or -1 if something could not be removed. */
static __attribute__((unused)) int tap_rm_rf(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return 0;
	return nftw(path, tap_rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

static char tap_dir[PATH_MAX];

static void tap_tmpdir_remove(void)
{
	if (!tap_dir[0])
		return;
	if (getenv("KEEP"))
		printf("# KEEP: scratch directory %s kept\n", tap_dir);
	else if (tap_rm_rf(tap_dir) != 0)
		printf("# cannot remove the scratch directory %s\n", tap_dir);
}

/* The test's scratch directory, made on first use under $TMPDIR (or
 * /tmp) and removed with everything in it at exit (KEEP=1 in the
 * environment keeps it).  Skips the whole test if it cannot be made. */
static __attribute__((unused)) const char *tap_tmpdir(void)
{
	if (!tap_dir[0]) {
		const char *t = getenv("TMPDIR");
		snprintf(tap_dir, sizeof tap_dir, "%s/loom-test.XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(tap_dir)) {
			tap_dir[0] = 0;
			skip_all("cannot make a scratch directory");
		}
		atexit(tap_tmpdir_remove);
	}
	return tap_dir;
}

/* tap_tmpdir()/name, in one of 8 rotating static buffers. */
static __attribute__((unused)) const char *tap_path(const char *name)
{
	static char buf[8][PATH_MAX];
	static int k;
	k = (k + 1) % 8;
	if (snprintf(buf[k], sizeof buf[k], "%s/%s", tap_tmpdir(), name) >= (int)sizeof buf[k])
		printf("# tap_path: '%s' too long\n", name);
	return buf[k];
}

/* The whole file at the printf-style path, malloc'd with a NUL after its
 * *len bytes; NULL if it cannot be read. */
static __attribute__((format(printf, 2, 3), unused)) char *tap_slurp(size_t *len, const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	int pn = vsnprintf(path, sizeof path, fmt, ap);
	va_end(ap);
	if (pn < 0 || pn >= (int)sizeof path)
		return NULL;
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0, k;
	char *b = malloc(cap);
	while (b && (k = fread(b + n, 1, cap - n - 1, f)) > 0) {
		n += k;
		if (cap - n < 2) {
			char *nb = realloc(b, cap * 2);
			if (!nb)
				free(b);
			b = nb;
			cap *= 2;
		}
	}
	if (b && ferror(f)) {
		free(b);
		b = NULL;
	}
	fclose(f);
	if (b) {
		b[n] = 0;
		*len = n;
	}
	return b;
}

static __attribute__((unused)) int done_testing(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? 1 : 0;
}

#endif
