/* wordpiece - encode text with loom_wordpiece, one line at a time, for the
 * WordPiece bench (tests/bench/wordpiece.sh) and for comparing ids with
 * HuggingFace's BertTokenizerFast on any text.
 *
 *   wordpiece VOCAB.txt [cased] < lines   one line of ids per input line
 *   wordpiece VOCAB.txt [cased] -t FILE   encode FILE line by line, print
 *                                         "tokens N bytes N seconds S"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom_wordpiece.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: wordpiece VOCAB.txt [cased] [-t FILE]\n");
		return 2;
	}
	struct loom_wordpiece_opts o;
	loom_wordpiece_opts_default(&o);
	const char *timed = NULL;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "cased"))
			o.lowercase = 0;
		else if (!strcmp(argv[i], "-t") && i + 1 < argc)
			timed = argv[++i];
	}
	struct loom_wordpiece *w = loom_wordpiece_new();
	if (!w || loom_wordpiece_load(w, argv[1], &o)) {
		fprintf(stderr, "wordpiece: %s\n", w ? loom_wordpiece_error(w) : "out of memory");
		return 1;
	}
	FILE *in = timed ? fopen(timed, "rb") : stdin;
	if (!in) {
		perror(timed);
		return 1;
	}
	struct loom_ids ids = { 0 };
	char *line = NULL;
	size_t cap = 0, bytes = 0, tokens = 0;
	ssize_t n;
	double t0 = now();
	while ((n = getline(&line, &cap, in)) > 0) {
		size_t len = (size_t)n - (line[n - 1] == '\n');
		ids.n = 0;
		if (loom_wordpiece_encode(w, (const uint8_t *)line, len, &ids, NULL, 0)) {
			fprintf(stderr, "wordpiece: %s\n", loom_wordpiece_error(w));
			return 1;
		}
		bytes += (size_t)n;
		tokens += ids.n;
		if (timed)
			continue;
		for (size_t i = 0; i < ids.n; i++)
			printf(i ? " %u" : "%u", ids.v[i]);
		putchar('\n');
	}
	if (timed)
		printf("tokens %zu bytes %zu seconds %.6f\n", tokens, bytes, now() - t0);
	free(line);
	loom_ids_release(&ids);
	loom_wordpiece_free(w);
	return 0;
}
