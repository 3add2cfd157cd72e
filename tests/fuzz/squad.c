/* Fuzz target: the SQuAD reader and scorer.  The input is split at the
 * first "\n--\n" into a data set and a predictions file; a data set that
 * loads must have every answer inside its context, and scoring any
 * predictions never crashes and gives percentages in [0, 100]. */
#include <stdlib.h>
#include <string.h>

#include "loom_squad.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data, *sep = memmem(s, size, "\n--\n", 4);
	size_t dl = sep ? (size_t)(sep - s) : size;
	const char *p = sep ? sep + 4 : "{}";
	size_t pl = sep ? size - dl - 4 : 2;
	struct loom_squad *q = loom_squad_new();
	if (loom_squad_load_mem(q, s, dl, "dev.json") == 0) {
		for (size_t i = 0; i < q->n_qas; i++)
			for (uint32_t k = 0; k < q->qas[i].n_answers; k++) {
				const struct loom_squad_answer *a = &q->qas[i].answers[k];
				const struct loom_squad_para *para = &q->paras[q->qas[i].para];
				if (a->start + a->len > para->len ||
				    memcmp(para->context + a->start, a->text, a->len))
					abort();
			}
		struct loom_squad_score sc;
		if (loom_squad_score_mem(q, p, pl, "pred.json", &sc) == 0 &&
		    (sc.exact_match < 0 || sc.exact_match > 100 || sc.f1 < 0 || sc.f1 > 100.0000001))
			abort();
	}
	loom_squad_free(q);
	return 0;
}
