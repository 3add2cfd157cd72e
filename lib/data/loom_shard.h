/*
 * loom_shard.h - token streams -> windowed, shuffled TFRecord shards with
 * indexes and a JSON manifest (the engine of loom-shard).
 *
 * Purpose: loom_shard cuts samples of seq_len tokens every stride tokens
 *    (Graphcore write_into_tfrecord.py semantics: windows start at
 *    0, S, 2S, ... while start < n - L; with keep_tail one final shorter
 *    sample of the tokens from the next start on, when at least L/2
 *    remain), encode each as Example{"input_ids": int64 list}, order them
 *    and write the shards, their .index files and PREFIX.manifest.json.
 * The token stream it is fed is read with loom_tokin.h; the set it writes
 * is read back with loom_manifest.h.
 *
 * Order: with shuffle, sample i gets the 64-bit key splitmix64(seed, i) and
 * the output is the samples sorted by (key, i): a uniform permutation that
 * depends only on the input and the seed - not on the memory limit, the
 * thread count, or whether the data fit in memory.  Samples are kept as
 * raw token arrays (2 bytes a token when the ids are known to fit: u16
 * input or a vocabulary of at most 2^16; else 4), not encoded: in memory
 * up to about memory/2 bytes; beyond that they go to 256 anonymous
 * (already unlinked) bucket files by the key's top byte, written in large
 * sequential blocks, and a second pass reads each bucket once, sorts it by
 * key and encodes its samples (in parallel batches) into the shards; a
 * bucket still larger than the limit is split again by the next key bits.
 * Without shuffle, samples go straight to the writers in stream order.
 * Sample r goes to shard r mod N with `shards`, or to shard r / R with
 * `records_per_shard`.
 *
 * Outputs: PREFIX-00000-of-0000N.tfrecord (+ ".index" beside each) and
 * PREFIX.manifest.json (formats/manifest.md), committed as one set: the
 * manifest is the commit point, so whenever the process dies it names the
 * old set or the new one, complete ("Committing a set" in the spec;
 * the machinery is loom_shardset.h, shared with loom-squad prepare).
 * loom_shard_new() locks the prefix (.PREFIX.lock, until _free; another
 * run holding it: LOOM_EBUSY) and
 * removes what killed runs left; on any failure before the commit point
 * nothing of the run is left and the old set stays.  A validation split
 * (val_key / val_records) is a second loom_shard on PREFIX.val over the
 * same stream, committed with the first through _prepare/_commit.
 *
 * Ownership: _new/_open return objects freed with _free (accepts NULL);
 * strings in the options are copied.  Errors: negative LOOM_E* with the
 * message from loom_shard_error().  Thread-safety: the default
 * (loom_common.h); a loom_shard encodes and writes on threads of its own,
 * behind its calls.
 */
#ifndef LOOM_SHARD_H
#define LOOM_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loom_common.h"

/* ---- sharder ------------------------------------------------------------- */

struct loom_shard_opts {
	const char *prefix;          /* output prefix (its directory is created) */
	uint32_t seq_len;            /* L >= 1 */
	uint32_t stride;             /* S >= 1 (0 = L) */
	int keep_tail;
	int shuffle;
	uint64_t seed;
	uint64_t shards;             /* N >= 1, or 0 to use records_per_shard */
	uint64_t records_per_shard;  /* R >= 1 when shards == 0 */
	uint64_t memory;             /* byte budget for samples and buffers
					(0 = loom_shard_default_memory()) */
	const char *tmpdir;          /* for bucket files (NULL = prefix's dir) */
	const char *feature;         /* NULL = "input_ids" */
	int threads;                 /* encoding threads (pthreads; 0 = the
					online CPUs, _SC_NPROCESSORS_ONLN; at
					most 64); the output is the same for
					any count */
	/* Manifest only: */
	uint64_t vocab_size;         /* 0 = unknown; else every token must be < it */
	const char *vocab_sha256;    /* NULL = unknown */
	const char *input_format;    /* "u16", ... (NULL = not recorded) */
	int no_sha256;               /* skip the shards' sha256 (null in the manifest) */
	/* A validation split (both 0 = none): the samples whose shuffle key
	 * (loom_shard_key, with or without shuffle) is below val_key, or the
	 * first val_records samples of the output order, are the validation
	 * set; `val` = 1 writes them, 0 writes the other samples.  Two sharders
	 * with the same options but `val` (loom-shard's PREFIX and PREFIX.val)
	 * write disjoint sets whose union is the set of one without a split. */
	uint64_t val_key;
	uint64_t val_records;
	int val;
	int argc;                    /* command line that made the shards */
	char **argv;
	/* Called now and then while loom_shard_finish() writes the shards:
	 * `done` of `total` records written (may be NULL). */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
	/* For tests: called just before each file-system step that removes
	 * leftovers or commits the output set (what = "rename", "link" or
	 * "unlink"; path = the name made or removed), so that a test can kill
	 * the process at every point (may be NULL). */
	void (*commit_step)(void *ctx, const char *what, const char *path);
	void *commit_step_ctx;
};

struct loom_shard_stats {
	uint64_t tokens;       /* tokens consumed */
	uint64_t samples;      /* records written (incl. a tail) */
	uint64_t tail_tokens;  /* length of the tail sample, 0 if none */
	uint64_t shards;
	uint64_t bytes;        /* bytes of all shards */
	uint64_t spilled;      /* bytes written to bucket files (0 = in memory) */
	char manifest[4096];   /* path of the manifest */
	char note[LOOM_ERR_MAX + 100]; /* a failure after the commit point (the
					  new set is in place), "" if none */
};

struct loom_shard;

struct loom_shard *loom_shard_new(const struct loom_shard_opts *o, struct loom_err *err);
/* Feed the next n tokens of the stream. */
int loom_shard_tokens(struct loom_shard *s, const uint32_t *tok, size_t n);
/* End of stream: write the tail, the second pass, commit every output.
 * LOOM_EFORMAT if the stream yields no sample at all (or none for this
 * side of a validation split).  loom_shard_finish() is _prepare() then
 * _commit(); a pair of sets committed together (a validation split) calls
 * _prepare() on both, then _commit() on both: _prepare writes every shard
 * and index under this run's names, _commit writes the manifest (the commit
 * point) and gives the files their final names.  Once _prepare() returned
 * 0 on both, a _commit() fails only on an I/O error. */
int loom_shard_finish(struct loom_shard *s);
int loom_shard_prepare(struct loom_shard *s);
int loom_shard_commit(struct loom_shard *s);
void loom_shard_get_stats(const struct loom_shard *s, struct loom_shard_stats *st);
/* Frees; before a successful finish, removes every output of the run. */
void loom_shard_free(struct loom_shard *s);
const char *loom_shard_error(const struct loom_shard *s);
/* loom-shard's summary line (no newline) into buf[n]: tokens, records,
 * the sample length and stride of o, shards, bytes, order, spill, seconds,
 * the manifest; and val's records and manifest when there is one. */
void loom_shard_summary(const struct loom_shard_opts *o, const struct loom_shard_stats *st,
			const struct loom_shard_stats *val, double seconds, char *buf, size_t n);

/* Number of samples a stream of n tokens yields (same rule as above), and
 * the tail length (0 if none) in *tail. */
uint64_t loom_shard_count(uint64_t n, uint32_t seq_len, uint32_t stride, int keep_tail,
			  uint64_t *tail);
/* Default --memory: a quarter of physical RAM, at least 512 MiB. */
uint64_t loom_shard_default_memory(void);
/* The shuffle key of sample i. */
uint64_t loom_shard_key(uint64_t seed, uint64_t i);

#endif
