/*
 * loom_tb.h - TensorBoard event files: a writer of scalar and text
 * summaries, and a reader of the scalars and texts of any event file.
 *
 * Purpose: `loom-train --tensorboard DIR` lets a running TensorBoard
 * (`tensorboard --logdir DIR`) follow the run, and `loom-plot` charts an
 * event file as it charts a JSON log.  The file (formats/tensorboard.md) is
 * DIR/events.out.tfevents.<unix time>.<host>: TFRecord framing
 * (formats/tfrecord.md) of tensorflow.Event protos (formats/tensorflow/
 * event.proto), the first one file_version "brain.Event:2", then one Event
 * per value: a scalar as Summary.Value.simple_value, a text as a DT_STRING
 * tensor under the "text" plugin.
 *
 * Records collect in memory and go out whole at loom_tb_flush() (one
 * write(2)), so the file always ends at a record boundary: a killed run
 * leaves a readable file.  The file is not written under a temporary name
 * (TensorBoard reads it while it grows).
 *
 * Ownership: loom_tb_open returns an object loom_tb_close frees (NULL is
 * accepted).  Errors: 0 or a negative LOOM_E* code with the message
 * (naming the file) from loom_tb_error(); the reader's in *err, naming the
 * record and its byte offset.  Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_TB_H
#define LOOM_TB_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

#define LOOM_TB_FILE_VERSION "brain.Event:2"

struct loom_tb;

/* Create DIR (and its parents), then DIR/events.out.tfevents.<time>.<host>
 * (".<pid>" appended if that name is taken), and write the file_version
 * event.  NULL and *err on failure. */
struct loom_tb *loom_tb_open(const char *dir, struct loom_err *err);
/* The file's path. */
const char *loom_tb_path(const struct loom_tb *tb);
/* Queue one Event with a scalar (simple_value) or a text summary. */
int loom_tb_scalar(struct loom_tb *tb, int64_t step, const char *tag, double value);
int loom_tb_text(struct loom_tb *tb, int64_t step, const char *tag, const char *text);
/* Write the queued records (each whole). */
int loom_tb_flush(struct loom_tb *tb);
/* Flush, fsync and close; returns the first error of the file, if any (its
 * message in *err when err is not NULL); frees tb. */
int loom_tb_close(struct loom_tb *tb, struct loom_err *err);
const char *loom_tb_error(const struct loom_tb *tb);

/* The scalars loom-train writes (formats/tensorboard.md): each one's
 * TensorBoard tag and the key of loom-train's JSON log that holds the
 * same value, loom_tb_tags[LOOM_TB_EVAL_PPL] = { "eval/perplexity",
 * "eval_ppl" }. */
enum loom_tb_tag {
	LOOM_TB_LOSS, LOOM_TB_LR, LOOM_TB_GRAD_NORM, LOOM_TB_TOKENS_PER_S, LOOM_TB_EVAL_LOSS,
	LOOM_TB_EVAL_PPL, LOOM_TB_EVAL_ACC, LOOM_TB_DENSITY, LOOM_TB_CHURN, LOOM_TB_EVAL_EM,
	LOOM_TB_EVAL_F1, LOOM_TB_EVAL_TRAIN_LOSS, LOOM_TB_N_TAGS
};
extern const struct loom_tb_tag_name {
	const char *tag, *log_key;
} loom_tb_tags[LOOM_TB_N_TAGS];

/* The log key of `tag` ("train/loss" -> "loss"), or NULL. */
const char *loom_tb_log_key(const char *tag);

/* ---- reading ---------------------------------------------------------- */

enum { LOOM_TB_VERSION, LOOM_TB_SCALAR, LOOM_TB_TEXT };

struct loom_tb_event {
	int kind;              /* LOOM_TB_* */
	double wall_time;
	int64_t step;
	const char *tag;       /* NULL for LOOM_TB_VERSION */
	double value;          /* LOOM_TB_SCALAR */
	const char *text;      /* LOOM_TB_VERSION: the file_version; LOOM_TB_TEXT */
	size_t text_len;
};

/* Every record of the event file in buf[0..len) (`name` for messages;
 * loom_tfr_sniff tells an event file from text): each CRC checked
 * (loom_tfr_buf_next), each Event decoded; cb is called for its file_version, and
 * for each scalar (simple_value, or a DT_FLOAT/DT_DOUBLE tensor of one
 * value) and text (a DT_STRING tensor) of its summary; other values and
 * events are skipped.  A non-zero return of cb stops the walk and is
 * returned.  Returns the number of records, LOOM_ETRUNC if the last record
 * is cut short (the ones before it were all passed to cb), or another
 * negative LOOM_E*, with the message in *err. */
long loom_tb_read(const void *buf, size_t len, const char *name,
		  int (*cb)(void *ctx, const struct loom_tb_event *ev), void *ctx,
		  struct loom_err *err);

#endif
