/*
 * loom_squad.h - SQuAD v1.1 data sets and their official EM/F1 scores.
 *
 * Purpose: read a SQuAD JSON file ({"version", "data": [{"title",
 * "paragraphs": [{"context", "qas": [{"id", "question", "answers":
 * [{"text", "answer_start"}]}]}]}]}) into flat arrays of paragraphs and
 * questions, and score a predictions file ({"id": "answer text", ...})
 * exactly as the official evaluate-v1.1.py does.
 *
 * Scoring (evaluate-v1.1.py to the last digit): each text is normalized
 * (lower-cased with Unicode's full mapping; ASCII punctuation removed; the
 * words "a", "an", "the" removed where Python's \b bounds them, a word
 * character being a letter, a number or "_"; split at Python's white
 * space), EM is 1 when a normalized gold answer equals the normalized
 * prediction, F1 the harmonic mean of token precision and recall over
 * the multiset of tokens (0 when no token is shared), each the maximum
 * over the gold answers; the totals are 100 * sum / questions, the sums
 * taken in file order in double precision as Python does.  A question
 * without a prediction scores 0 and is counted.  A capital sigma becomes
 * the final U+03C2 as in Python (Unicode's Final_Sigma condition, with
 * the Cased and Case_Ignorable properties of Unicode 15.0).
 *
 * Validation (LOOM_EFORMAT, one message naming the file and, where there
 * is one, the question id): not JSON (line, column), a missing or
 * mistyped member, an empty context, a question id that repeats, an
 * answer_start outside its context or not at its text (compared by code
 * points, as Python indexes strings), a prediction that is not a string.
 * answer_start counts code points; loom_squad_answer.start is the byte
 * offset in the context's UTF-8.
 *
 * Ownership: loom_squad_new/_free; the strings belong to the object.
 * Not thread-safe while loading; read-only use afterwards may be shared.
 * Errors: 0 or a negative LOOM_E* code, message in loom_squad_error().
 */
#ifndef LOOM_SQUAD_H
#define LOOM_SQUAD_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

struct loom_squad_answer {
	const char *text;
	size_t len;          /* bytes */
	size_t start;        /* byte offset in the context */
};

struct loom_squad_qa {
	const char *id, *question;
	uint32_t para;       /* index into paras */
	uint32_t n_answers;
	struct loom_squad_answer *answers;
};

struct loom_squad_para {
	const char *title;
	const char *context;
	size_t len;          /* bytes */
	uint32_t article, index; /* its place in the file, for messages */
};

struct loom_squad {
	struct loom_squad_para *paras;
	struct loom_squad_qa *qas;
	size_t n_paras, n_qas;
	char *version;       /* the file's "version", or NULL */
	void *root;          /* the parsed JSON (jansson), owning the strings */
	struct loom_err err;
};

struct loom_squad *loom_squad_new(void);
void loom_squad_free(struct loom_squad *s);
const char *loom_squad_error(const struct loom_squad *s);

/* The largest SQuAD or predictions file read: 2 GiB, far above any
 * (train: 30 MB). */
#define LOOM_SQUAD_MAX_FILE ((size_t)1 << 31)
/* Load a SQuAD file (path / memory; name is for messages). */
int loom_squad_load(struct loom_squad *s, const char *path);
int loom_squad_load_mem(struct loom_squad *s, const char *buf, size_t len, const char *name);

/* The official scores of the predictions file pred_path (or buffer)
 * against the loaded questions: exact_match and f1 in percent, and the
 * number of questions without a prediction. */
struct loom_squad_score {
	double exact_match, f1;
	size_t questions, unanswered;
};
int loom_squad_score_file(struct loom_squad *s, const char *pred_path,
			  struct loom_squad_score *out);
int loom_squad_score_mem(struct loom_squad *s, const char *buf, size_t len,
			 const char *name, struct loom_squad_score *out);

/* One prediction against its gold answers (EM 0/1 and F1 in [0, 1]);
 * 0, or LOOM_ENOMEM (the scores then are not to be used). */
int loom_squad_metrics(const char *pred, size_t pred_len,
		       const struct loom_squad_answer *gold, uint32_t n_gold,
		       double *em, double *f1);

/* --- features: question + context window, as BERT reads them ----------
 *
 * Each question becomes one or more features of seq tokens:
 *   [CLS] question [SEP] window of the context [SEP] [PAD]...
 * The question keeps its first max_query tokens; windows of at most
 * seq - 3 - (question tokens) context tokens start every `stride` tokens
 * (Google's run_squad.py doc_stride: 0, stride, 2 stride, ... until a
 * window reaches the end of the context).  segment_ids are 0 up to and
 * including the first [SEP], 1 for the window and its [SEP]; input_mask
 * is 1 on real tokens.  The answer (the first gold answer) is the tokens
 * from the last one starting at or before its first byte to the first one
 * ending at or after its last byte (HuggingFace run_qa.py), when the
 * window holds them all; otherwise start = end = 0, the [CLS] index. */
struct loom_wordpiece;

struct loom_squad_feature {
	uint32_t qa;          /* question (index into qas) */
	uint32_t window;      /* 0, 1, ... within its question */
	uint32_t n_tokens;    /* real tokens; the rest is [PAD] */
	uint32_t doc_start;   /* position of the window's first token */
	uint32_t ctx_first;   /* index of that token in the context's tokens */
	uint32_t ctx_len;     /* context tokens in the window */
	uint32_t start, end;  /* answer positions (0, 0: not in the window) */
};

struct loom_squad_features {
	uint32_t seq;
	size_t n;
	struct loom_squad_feature *f;
	uint32_t *input_ids;            /* n x seq */
	uint8_t *segment_ids;           /* n x seq */
	/* the context tokens of paragraph p: byte spans in its context,
	 * ctx_off[p] .. ctx_off[p + 1] into tok_start / tok_end */
	size_t *ctx_off;
	uint64_t *tok_start, *tok_end;
};

struct loom_squad_feature_opts {
	uint32_t seq;         /* 384 */
	uint32_t stride;      /* 128 */
	uint32_t max_query;   /* 64 */
};

/* Features of every question; fails (LOOM_EINVAL, naming the question)
 * when a question leaves no room for the context.  Free with
 * loom_squad_features_release. */
int loom_squad_features(struct loom_squad *s, struct loom_wordpiece *w,
			const struct loom_squad_feature_opts *o, struct loom_squad_features *out);
void loom_squad_features_release(struct loom_squad_features *f);

/* --- predictions: answers from the start/end logits of the features ----
 *
 * As Google's run_squad.py (write_predictions, SQuAD v1.1) and HF's
 * run_qa.py: for each feature the n_best start and the n_best end
 * positions by logit (over all seq positions, ties by position, as
 * Python's stable sort), and of their pairs the valid spans: start and end
 * context tokens of the window (not [CLS], the question, [SEP] or
 * padding), end >= start, end - start + 1 <= max_answer, and the start
 * token has its maximal context in this window (run_squad.py's
 * _check_is_max_context: of the question's windows holding the token, the
 * first with the largest min(tokens left of it, tokens right of it) +
 * 0.01 x window length).  A question's answer is its best valid span over
 * all its windows by start + end logit (in double; the first of equal
 * scores in feature, start, end order), mapped back to the exact bytes of
 * the context from the first byte of its first token to the last byte of
 * its last (HF's offsets); the empty string when no span is valid. */
struct loom_squad_post_opts {
	uint32_t n_best;      /* 20 */
	uint32_t max_answer;  /* 30 tokens */
};

struct loom_squad_prediction {
	size_t start, len;    /* the answer's bytes in its context (len 0: empty) */
	int64_t feature;      /* the feature it came from; -1: no valid span */
	uint32_t tok_start, tok_end;  /* its positions in that feature */
	double score;         /* start + end logit */
};

/* 1 if context token `pos` (a position of feature fi within its window)
 * has its maximal context in that window among its question's windows,
 * else 0 (also for a position outside the window). */
int loom_squad_max_context(const struct loom_squad_features *f, size_t fi, uint32_t pos);

/* out[s->n_qas] from start_logits and end_logits (each f->n x f->seq,
 * feature by feature); n_best above seq takes every position; LOOM_EINVAL
 * when n_best or max_answer is 0. */
int loom_squad_predict(struct loom_squad *s, const struct loom_squad_features *f,
		       const float *start_logits, const float *end_logits,
		       const struct loom_squad_post_opts *o, struct loom_squad_prediction *out);

/* Write the predictions file {"id": "answer", ...} (question order,
 * indented as run_squad.py's) atomically: temp name, fsync, rename. */
int loom_squad_write_predictions(struct loom_squad *s, const struct loom_squad_prediction *p,
				 const char *path);

#endif
