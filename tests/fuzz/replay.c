/*
 * replay.c - runs a libFuzzer-style target (LLVMFuzzerTestOneInput) over
 * every file of its corpus directory and reports TAP, so `make test` (and
 * `make asan`) replay each fuzz corpus without clang.  Built per target by
 * the Makefile with -DCORPUS_DIR="tests/fuzz/NAME".  Each input passes if
 * the target returns without crashing (sanitizers turn bugs into crashes).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_file.h"
#include "../hermetic.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : CORPUS_DIR;
	DIR *d = opendir(dir);
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	if (!d) {
		printf("1..0 # SKIP no corpus at %s\n", dir);
		return 0;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			names = realloc(names, cap * sizeof *names);
		}
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof *names, cmp);
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		char *buf;
		size_t len;
		struct loom_err err;
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		if (loom_read_file(path, &buf, &len, &err) < 0) {
			printf("not ok %zu - %s\n# %s\n", i + 1, names[i], err.msg);
			continue;
		}
		/* exact-size copy so ASan catches any read past the input */
		uint8_t *in = malloc(len ? len : 1);
		memcpy(in, buf, len);
		free(buf);
		LLVMFuzzerTestOneInput(in, len);
		free(in);
		printf("ok %zu - %s\n", i + 1, names[i]);
		free(names[i]);
	}
	free(names);
	printf("1..%zu\n", n);
	return 0;
}
