/*
 * hermetic.h - a C test starts from a known environment, whatever the
 * caller exported (tests/lib.sh does the same for the shell tests): no
 * OpenBLAS, OpenMP, oneDNN or loom variables (but LOOM_BUILD, which the
 * Makefile passes on purpose) and LC_ALL=C.UTF-8.  OpenBLAS and libgomp read
 * theirs in their library constructors, before main: so a test whose
 * environment differs re-executes itself once with the clean one, from a
 * constructor (glibc passes it argc, argv and envp) that runs before any
 * other code of the test.  Included by tests/tap.h and tests/fuzz/replay.c.
 */
#ifndef LOOM_HERMETIC_H
#define LOOM_HERMETIC_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* unistd.h's, declared alone: its dup(), read() ... would clash with the
 * tests' own helpers of those names */
int execv(const char *path, char *const argv[]);

/* a variable the tests clear: "NAME=value" of environ */
static int hermetic_dirty(const char *kv)
{
	static const char *const prefix[] = { "OPENBLAS_", "GOTO", "OMP_", "GOMP_", "DNNL_",
					      "ONEDNN_", "LOOM_", "LC_" };
	static const char *const name[] = { "LANG=", "LANGUAGE=" };
	if (!strncmp(kv, "LOOM_BUILD=", 11) || !strcmp(kv, "LC_ALL=C.UTF-8"))
		return 0;
	for (size_t i = 0; i < sizeof prefix / sizeof *prefix; i++)
		if (!strncmp(kv, prefix[i], strlen(prefix[i])))
			return 1;
	for (size_t i = 0; i < sizeof name / sizeof *name; i++)
		if (!strncmp(kv, name[i], strlen(name[i])))
			return 1;
	return 0;
}

__attribute__((constructor)) static void hermetic_env(int argc, char **argv, char **envp)
{
	extern char **environ;
	int dirty = !getenv("LC_ALL");
	(void)argc;
	(void)envp;
	for (char **e = environ; *e;) {
		size_t n = strcspn(*e, "=");
		if ((*e)[n] == '=' && n < 256 && hermetic_dirty(*e)) {
			char name[256];
			snprintf(name, sizeof name, "%.*s", (int)n, *e);
			unsetenv(name); /* shifts environ down: look at *e again */
			dirty = 1;
		} else {
			e++;
		}
	}
	if (!dirty)
		return;
	setenv("LC_ALL", "C.UTF-8", 1);
	execv("/proc/self/exe", argv);
	/* no exec: run on with what could be cleaned */
}

#endif
