/*
 * loom_eval.h - held-out evaluation: the frames of a file or a loom-shard
 * manifest (read in stream order, one pass), for loom-train's --eval-data
 * (lib/train/loom_trainer.h); for loom-eval, a GPT checkpoint opened for evaluation or generation,
 * and the sparsity found in it.
 *
 * Ownership: loom_eval_open() / loom_eval_close() own the reader, the feed
 * and the descriptor.  Errors: a negative LOOM_E* code, the message in
 * the struct loom_err passed in.  Nothing prints.  Thread-safety: one
 * source per thread.
 */
#ifndef LOOM_EVAL_H
#define LOOM_EVAL_H

#include <stdint.h>

#include "loom_batch.h"
#include "loom_common.h"

#include "loom_config.h"
#include "loom_model.h"

struct loom_gpt;
struct loom_feed;
struct loom_ckpt;

/* Batch frames from a file, or a loom-shard manifest (told by content: a
 * JSON object) whose shards loom_feed reads in stream order, one pass,
 * its own sequence from 0, `batch` records of `rec` tokens a frame (a
 * last partial batch left out; features: a squad-features manifest, its
 * own record length); at most max_frames frames (0: all). */
struct loom_eval_src {
	const char *path;
	int fd;
	struct loom_batch_reader *r; /* frames: over fd; manifest: this frame */
	struct loom_feed *feed;
	uint64_t frames, max_frames;
	int features;
};

/* batch = 0: only open and check the manifest's shards */
int loom_eval_open(struct loom_eval_src *e, const char *path, uint32_t batch, uint32_t rec,
		   int features, uint64_t max_frames, struct loom_err *err);
/* Frames held in memory (buf[0..len), ending in an END frame; named
 * `name` in messages); buf must outlive e. */
int loom_eval_open_mem(struct loom_eval_src *e, const void *buf, size_t len, const char *name,
		       int features, struct loom_err *err);
/* The next frame: 1 (h, tok), 0 at the end (or max_frames), or an error. */
int loom_eval_next(struct loom_eval_src *e, struct loom_batch_hdr *h, const uint32_t **tok,
		   struct loom_err *err);
void loom_eval_close(struct loom_eval_src *e);
/* Check path once: every frame of a file read (a truncated or corrupt
 * file is found before training), or every shard of a manifest opened
 * and checked.  The records' length (T+1) into *rec. */
int loom_eval_check(const char *path, int features, int *rec, struct loom_err *err);

/* A GPT checkpoint opened for evaluation or generation (RigL: with its
 * masks the model runs sparse; without them, a side file removed or a
 * checkpoint converted elsewhere, dense, which computes the same function
 * on weights whose dead blocks are 0). */
struct loom_eval_model {
	struct loom_config cfg;
	struct loom_gpt *g;
	struct loom_ckpt *ck;
	double sparsity;        /* the checkpoint's sparsity key */
	int has_masks;          /* its sparsity.safetensors was loaded */
};
/* Open and check the checkpoint at path (verify: every file's checksum). */
int loom_eval_model_open(struct loom_eval_model *m, const char *path, int verify,
			 struct loom_err *err);
/* Its configuration (precision: NULL keeps the checkpoint's; a bad one is
 * LOOM_EINVAL with "--precision: ..."), the model and its weights. */
int loom_eval_model_load(struct loom_eval_model *m, const char *precision, struct loom_err *err);
void loom_eval_model_close(struct loom_eval_model *m);
/* The sparsity found in the checkpoint: per sparse weight (the
 * configuration's sparse_layers) the fraction of dead blocks, from the
 * masks, or else from the all-zero blocks of the weights; overall over
 * all their blocks.  NULL for a dense model (or on ENOMEM). */
struct json_t *loom_eval_sparsity_json(const struct loom_eval_model *m);

#endif
