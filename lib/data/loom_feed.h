/*
 * loom_feed.h - TFRecord shards -> shuffled micro-batches as binary frames
 * (formats/batch.md): the engine of loom-feed.
 *
 * Purpose: open the shards a loom-shard manifest lists (formats/manifest.md,
 * read with loom_manifest_read(); each checked against its recorded size,
 * record count and, on request, sha256) or shard files given by name, and
 * deliver frames of B records of T+1 tokens in a seeded shuffle over all
 * their records, epoch after epoch, in sequence order.
 *
 * Order: records are drawn through each shard's .index (random access,
 * pread) in a seeded permutation per epoch across all shards.  The
 * permutation is a keyed Feistel network over [0, N) with cycle walking:
 * O(1) memory, random access, the same for every rank.  Global batch s
 * (s counts across epochs) is positions [i*G, (i+1)*G) of epoch s / K's
 * permutation, where G = B x world, K = floor(N / G) and i = s % K; rank r
 * gets positions [i*G + r*B, i*G + (r+1)*B).  So rank r's frame s,
 * concatenated over ranks, is exactly the world=1 frame s with batch G.
 * Records longer than T+1 are cut; shorter ones are padded with pad_id
 * when asked, else an error.
 *
 * Features: the manifest of a squad-features set (formats/squad-features.md)
 * gives the record length (no seq_len in the options) and its features;
 * each frame then carries, besides the ids ("input_ids"), every other
 * feature of the manifest, per-token or per-record, in a version-2 frame
 * (formats/batch.md), each feature in the narrowest of u8, i32, i64 that
 * holds its values in that frame; with `text`, after the ids of a row,
 * " | NAME values..." for each.
 *
 * Threads: loom_feed_start() starts `threads` workers that fill a ring of
 * encoded frames ahead of the caller, who takes them in sequence order
 * with loom_feed_next(): the output does not depend on the thread count.
 * The object itself is for one thread at a time (the workers are its
 * own); the `note` callback is called from that thread only.
 *
 * Ownership: loom_feed_new() returns an object freed with loom_feed_free()
 * (accepts NULL; stops and joins the workers).  The options' strings are
 * used only during loom_feed_new().  A frame returned by loom_feed_next()
 * stays valid until the next call or free.
 *
 * Errors: negative LOOM_E* codes.  loom_feed_new() fills the caller's
 * struct loom_err; later calls keep their message on the object,
 * loom_feed_error().  Each is one line naming the manifest, the shard, the
 * record and the reason, e.g. "d.manifest.json: shard 'd-00001-of-00002.tfrecord'
 * is 1000 bytes, the manifest says 1001", "s.tfrecord: record 3 has 5
 * tokens but --seq 8 needs 9 (use --pad ID or a smaller --seq)".  After a
 * failed loom_feed_next() the object only reports that error again.
 */
#ifndef LOOM_FEED_H
#define LOOM_FEED_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

struct loom_feed_opts {
	/* Input: a manifest (shard names relative to its directory) or files. */
	const char *manifest;
	const char *const *shards;  /* nshards files (index: path + ".index") */
	size_t nshards;
	int verify;                 /* also each shard's sha256 (manifest only) */
	/* Shape and order. */
	uint32_t batch;             /* B >= 1: records per frame (per rank) */
	uint32_t seq_len;           /* T+1 >= 1: tokens per record in a frame; 0
				       with the manifest of a squad-features set,
				       which gives it */
	uint64_t seed;              /* same seed, same bytes */
	int stream_order;           /* no shuffle: the records in shard order
				       (as the manifest lists them), every epoch
				       (an evaluation set) */
	uint64_t epochs;            /* passes over the data; 0 = endless */
	uint32_t bucket;            /* 0: off; N: the records of each window of N
				       global batches (in the shuffled order)
				       sorted by size, cut into batches of
				       similar records, the batches in a shuffled
				       order of the window (see loom-feed(1)) */
	uint32_t rank, world;       /* rank < world <= 65535 (world 0 = 1) */
	int pad;                    /* pad short records with pad_id */
	uint32_t pad_id;
	int dtype;                  /* 0 = u16 when every id of a frame fits, else
				       u32; LOOM_BATCH_U16 or LOOM_BATCH_U32 */
	int text;                   /* "SEQ EPOCH ROW: ids..." lines instead of
				       frames (and no END frame) */
	unsigned threads;           /* read-ahead workers (0 = 1) */
	/* Each shard opened (its records and index) and each epoch started or
	 * resumed (its batches and seed), as one line without a newline (may
	 * be NULL). */
	void (*note)(void *ctx, const char *line);
	void *note_ctx;
};

struct loom_feed_stats {
	uint64_t records;      /* N: records in all shards */
	uint64_t shards;
	uint64_t per_epoch;    /* K: global batches per epoch */
	uint64_t frames;       /* data frames delivered */
	uint64_t bytes;        /* bytes delivered (with the END frame's) */
	uint64_t seq;          /* sequence number of the last frame delivered */
	uint32_t epoch;        /* its epoch (before any: the first frame's seq
				  and epoch) */
	uint32_t seq_len;      /* tokens per record in a frame */
	size_t features;       /* features carried besides the ids (version-2
				  frames; 0: version 1) */
};

struct loom_feed;

/* Open and check every shard; LOOM_EINVAL when the records are fewer than
 * one global batch (B x world) or the options are inconsistent. */
struct loom_feed *loom_feed_new(const struct loom_feed_opts *o, struct loom_err *err);
/* Start the workers at global batch `seq` (a resumed run's next batch; 0
 * for the first).  Once, before loom_feed_next(). */
int loom_feed_start(struct loom_feed *f, uint64_t seq);
/* The next data frame (with `text`, its lines): 1 with *buf and *len, 0
 * after the last one of the last epoch, or an error. */
int loom_feed_next(struct loom_feed *f, const void **buf, size_t *len);
/* After loom_feed_next() returned 0: the END frame that closes the stream
 * (LOOM_BATCH_HEADER_SIZE bytes into out; its seq is the next batch's,
 * 0 for an endless feed).  Returns its size, 0 with `text`. */
size_t loom_feed_end_frame(struct loom_feed *f, void *out);
void loom_feed_get_stats(const struct loom_feed *f, struct loom_feed_stats *st);
/* loom-feed's summary line (no newline) into buf[n]: batches, their shape
 * and features, the rank, records, shards, batches an epoch, bytes, and
 * the rates over `seconds`. */
void loom_feed_summary(const struct loom_feed_opts *o, const struct loom_feed_stats *st,
		       double seconds, char *buf, size_t n);
const char *loom_feed_error(const struct loom_feed *f);
void loom_feed_free(struct loom_feed *f);

#endif
