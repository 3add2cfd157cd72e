/*
 * loom_bert_squad.h - the official SQuAD v1.1 exact match and F1 of a BERT
 * question-answering model on a SQuAD file, as run_qa.py's --do_eval
 * reports them during training.
 *
 * The file's questions become features (lib/data/loom_squad.h: the
 * windows given, the tokenizer given) once, at loom_bert_squad_eval_new;
 * each loom_bert_squad_eval_run forwards every feature through the model
 * (no dropout, no targets), takes run_squad.py's best span of each
 * question (n-best 20, answers of at most 30 tokens) and scores the
 * answers as evaluate-v1.1.py does.
 *
 * Ownership: the evaluator owns the loaded file, the features and its
 * buffers; the model and the tokenizer stay the caller's (the tokenizer
 * is used only by _new).  loom_bert_squad_eval_free accepts NULL.
 * Errors: NULL / a negative LOOM_E* code with the sentence in *err.
 * Thread-safety: one evaluator per thread; the model's own rules apply.
 */
#ifndef LOOM_BERT_SQUAD_H
#define LOOM_BERT_SQUAD_H

#include "loom_common.h"

struct loom_bert;
struct loom_wordpiece;
struct loom_squad_feature_opts;
struct loom_bert_squad_eval;

struct loom_bert_squad_eval *loom_bert_squad_eval_new(const char *path,
						       struct loom_wordpiece *w,
						       const struct loom_squad_feature_opts *fo,
						       struct loom_err *err);
/* Questions and features of the file. */
size_t loom_bert_squad_eval_questions(const struct loom_bert_squad_eval *e);
size_t loom_bert_squad_eval_features(const struct loom_bert_squad_eval *e);
/* *em, *f1 in percent over every question (a question with no valid span
 * answers ""), features `batch` at a time. */
int loom_bert_squad_eval_run(struct loom_bert_squad_eval *e, struct loom_bert *b, int batch,
			     double *em, double *f1, struct loom_err *err);
void loom_bert_squad_eval_free(struct loom_bert_squad_eval *e);

#endif
