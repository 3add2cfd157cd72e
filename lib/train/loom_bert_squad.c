/* loom_bert_squad.c - SQuAD EM/F1 of a BERT QA model; see loom_bert_squad.h. */
#include <stdlib.h>
#include <string.h>

#include "loom_bert.h"
#include "loom_bert_squad.h"
#include "loom_squad.h"

struct loom_bert_squad_eval {
	struct loom_squad *s;
	struct loom_squad_features fs;
	int have_fs;
	struct loom_squad_prediction *pred;     /* [questions] */
	float *sl, *el;                         /* [features, seq] logits */
};

void loom_bert_squad_eval_free(struct loom_bert_squad_eval *e)
{
	if (!e)
		return;
	if (e->have_fs)
		loom_squad_features_release(&e->fs);
	loom_squad_free(e->s);
	free(e->pred);
	free(e->sl);
	free(e->el);
	free(e);
}

struct loom_bert_squad_eval *loom_bert_squad_eval_new(const char *path,
						       struct loom_wordpiece *w,
						       const struct loom_squad_feature_opts *fo,
						       struct loom_err *err)
{
	struct loom_bert_squad_eval *e = calloc(1, sizeof *e);
	if (!e || !(e->s = loom_squad_new())) {
		loom_err_set(err, LOOM_ENOMEM, "%s: out of memory", path);
		goto fail;
	}
	if (loom_squad_load(e->s, path)) {
		loom_err_set(err, e->s->err.code, "%s", loom_squad_error(e->s));
		goto fail;
	}
	if (loom_squad_features(e->s, w, fo, &e->fs)) {
		loom_err_set(err, e->s->err.code, "%s: %s", path, loom_squad_error(e->s));
		goto fail;
	}
	e->have_fs = 1;
	size_t n = e->fs.n * e->fs.seq;
	e->pred = calloc(e->s->n_qas + 1, sizeof *e->pred);
	e->sl = malloc((n ? n : 1) * sizeof *e->sl);
	e->el = malloc((n ? n : 1) * sizeof *e->el);
	if (!e->pred || !e->sl || !e->el) {
		loom_err_set(err, LOOM_ENOMEM, "%s: out of memory for %zu features", path, e->fs.n);
		goto fail;
	}
	return e;
fail:
	loom_bert_squad_eval_free(e);
	return NULL;
}

size_t loom_bert_squad_eval_questions(const struct loom_bert_squad_eval *e)
{
	return e->s->n_qas;
}

size_t loom_bert_squad_eval_features(const struct loom_bert_squad_eval *e)
{
	return e->fs.n;
}

int loom_bert_squad_eval_run(struct loom_bert_squad_eval *e, struct loom_bert *b, int batch,
			     double *em, double *f1, struct loom_err *err)
{
	const size_t T = e->fs.seq, B = batch > 0 ? (size_t)batch : 1;
	int32_t *in = malloc(3 * B * T * sizeof *in), *seg = in + B * T, *mask = seg + B * T;
	if (!in)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	int rc = 0;
	for (size_t i = 0; i < e->fs.n && !rc; i += B) {
		size_t nb = e->fs.n - i < B ? e->fs.n - i : B;
		for (size_t r = 0; r < nb; r++)
			for (size_t k = 0; k < T; k++) {
				in[r * T + k] = (int32_t)e->fs.input_ids[(i + r) * T + k];
				seg[r * T + k] = e->fs.segment_ids[(i + r) * T + k];
				mask[r * T + k] = k < e->fs.f[i + r].n_tokens;
			}
		struct loom_bert_batch x = { in, seg, mask, NULL, NULL, NULL };
		if ((rc = loom_bert_forward(b, &x, (int)nb, (int)T, 0, 0, NULL)) < 0) {
			loom_err_set(err, rc, "feature %zu: %s", i, loom_bert_error(b));
			break;
		}
		memcpy(e->sl + i * T, loom_bert_start_logits(b), nb * T * sizeof *e->sl);
		memcpy(e->el + i * T, loom_bert_end_logits(b), nb * T * sizeof *e->el);
	}
	free(in);
	if (rc)
		return rc;
	struct loom_squad_post_opts po = { 20, 30 };
	struct loom_squad *s = e->s;
	if ((rc = loom_squad_predict(s, &e->fs, e->sl, e->el, &po, e->pred)))
		return loom_err_set(err, rc, "%s", loom_squad_error(s));
	double sem = 0, sf1 = 0;
	for (size_t q = 0; q < s->n_qas; q++) {
		const char *ctx = s->paras[s->qas[q].para].context;
		double a, c;
		if (loom_squad_metrics(ctx + e->pred[q].start, e->pred[q].len, s->qas[q].answers,
				       s->qas[q].n_answers, &a, &c))
			return loom_err_set(err, LOOM_ENOMEM, "out of memory");
		sem += a;
		sf1 += c;
	}
	*em = s->n_qas ? 100.0 * sem / (double)s->n_qas : 0;
	*f1 = s->n_qas ? 100.0 * sf1 / (double)s->n_qas : 0;
	return 0;
}
