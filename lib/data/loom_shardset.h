/*
 * loom_shardset.h - write pre-encoded TFRecord records as one committed
 * set: PREFIX-00000-of-0000N.tfrecord shards, an .index beside each and
 * PREFIX.manifest.json (the commit machinery of loom-shard, shared by
 * every tool that writes such a set: loom_shard, loom-squad prepare).
 *
 * Committing ("Committing a set" in formats/manifest.md): the manifest is
 * the commit point.  Each shard is written under a name of this run's own,
 * ".NAME.tmp-runXXXXXXXX" (its index: that name + ".index"), fsynced, and
 * a manifest naming those files is committed (written to a temporary
 * name, fsynced, renamed): from then on the new set is the output.  Then
 * the old set's files are removed, each new file is hard-linked to its
 * final name, a second manifest naming the final names replaces the
 * first and the run's names are removed.  Whenever the process dies the
 * manifest names a complete set, the old one or the new one.
 * loom_shardset_open() takes a lock on the prefix (DIR/.BASE.lock, until
 * _free; another run holding it: LOOM_EBUSY) and removes what killed runs left (temporaries, shard files the
 * manifest in place does not name); on any failure before the commit
 * point, nothing of the run is left and the old set stays.
 *
 * Records: record r goes to shard r mod N (`shards`), or to shard r / R
 * (`records_per_shard`).
 *
 * Ownership: _open returns an object freed with _free (accepts NULL;
 * before a commit it removes every file of the run); the prefix is
 * copied.  Errors: negative LOOM_E* with the message in the caller's
 * struct loom_err.  Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_SHARDSET_H
#define LOOM_SHARDSET_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "loom_common.h"

struct loom_shardset_opts {
	const char *prefix;          /* output prefix (its directory must exist) */
	const char *who;             /* names the writer in "another WHO is writing" */
	uint64_t shards;             /* N >= 1, or 0 to use records_per_shard */
	uint64_t records_per_shard;  /* R >= 1 when shards == 0 */
	size_t buffer;               /* bytes of buffer per shard writer */
	int no_sha256;               /* no sha256 of the shards (null in the manifest) */
	/* For tests: called just before each file-system step that removes
	 * leftovers or commits the set (what = "rename", "link" or "unlink";
	 * path = the name made or removed), so that a test can kill the
	 * process at every point (may be NULL). */
	void (*commit_step)(void *ctx, const char *what, const char *path);
	void *commit_step_ctx;
};

struct loom_shardset_result {
	uint64_t shards;
	uint64_t bytes;        /* bytes of all shards */
	char manifest[4096];   /* path of the manifest */
	char note[LOOM_ERR_MAX + 100]; /* a failure after the commit point (the
					  new set is in place), "" if none */
};

struct loom_shardset;

/* Lock the prefix, note the set in place, remove leftovers. */
struct loom_shardset *loom_shardset_open(const struct loom_shardset_opts *o,
					 struct loom_err *err);
/* Append one encoded record (a tf.train.Example) to the next shard. */
int loom_shardset_put(struct loom_shardset *s, const uint8_t *p, size_t n,
		      struct loom_err *err);
/* Records appended so far. */
uint64_t loom_shardset_records(const struct loom_shardset *s);
/* Write every shard and its index under this run's names, fsynced, ready
 * for the commit (loom_shardset_commit does it when it was not done): so
 * that two sets committed together (loom-shard's validation split) have
 * all their files in place before either manifest is.  On an error nothing
 * of the run is left. */
int loom_shardset_prepare(struct loom_shardset *s, struct loom_err *err);
/* Commit the set.  `manifest` (consumed) is the manifest's object: its
 * "shards" member is set to the list of shards (added at the end if the
 * object lacks it; a member of value null keeps its place).  Returns 0
 * once the set is committed (a failure after that is r->note), or an
 * error: then nothing of the run is left. */
int loom_shardset_commit(struct loom_shardset *s, json_t *manifest,
			 struct loom_shardset_result *r, struct loom_err *err);
void loom_shardset_free(struct loom_shardset *s);

#endif
