/*
 * loom_manifest.h - a set of TFRecord shards as its manifest describes it
 * (formats/manifest.md): the manifest reader (for loom_feed, loom-train,
 * and loom_shardset: the set a run replaces) and the shards' file names.
 *
 * Ownership: loom_manifest_read() fills a caller's struct, whose strings
 * point into the parsed JSON it keeps (m->priv) until
 * loom_manifest_release().  Errors: negative LOOM_E* with the message,
 * naming the file, in the caller's struct loom_err.  Thread-safety: the
 * default (loom_common.h).
 */
#ifndef LOOM_MANIFEST_H
#define LOOM_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

/* One entry of a manifest's "shards" list, as written: nothing is checked
 * against the files here (loom_feed does that). */
struct loom_manifest_shard {
	const char *file;     /* "file" ("path" if there is no "file"; the entry
				 itself if it is a bare string); NULL if none
				 or not a string */
	const char *index;    /* "index", NULL if absent or not a string */
	int bare;             /* the entry is a bare string, not an object */
	int has_records;      /* "records" is an integer ... */
	int64_t records;
	int has_bytes;        /* "bytes" is an integer ... */
	int64_t bytes;
	const char *sha256;   /* "sha256", NULL if absent, null or not a string */
};

/* One entry of a manifest's "features" list (sets with a kind). */
struct loom_manifest_feature {
	const char *name;
	int per_token;        /* "shape": "token" (1) or "record" (0) */
	int64_t length;       /* values per record */
};

/* A manifest (formats/manifest.md) as read by loom_manifest_read(). */
struct loom_manifest {
	const char *feature;  /* NULL if absent or not a string */
	const char *kind;     /* "kind" (e.g. "squad-features"); NULL if absent:
				 a set of token-stream samples */
	int has_seq_len;      /* "seq_len" is an integer ... */
	int64_t seq_len;
	size_t nfeatures;     /* "features" (0 if absent) */
	struct loom_manifest_feature *features;
	size_t nshards;       /* >= 1 */
	struct loom_manifest_shard *shards;
	void *priv;           /* the parsed JSON the strings point into */
};

/* Read manifest `path` ("-" = stdin) into *m (freed with
 * loom_manifest_release()).  Errors (in *err, naming the file): cannot be
 * read (LOOM_EIO), not JSON or a duplicate key ("PATH: line N: reason"),
 * no non-empty "shards" list, a "features" entry without a string
 * "name", a "shape" of "token" or "record" or a "length" >= 1
 * (LOOM_EFORMAT). */
int loom_manifest_read(const char *path, struct loom_manifest *m, struct loom_err *err);
/* Frees what loom_manifest_read() allocated; a zeroed *m is fine. */
void loom_manifest_release(struct loom_manifest *m);

/* Shard file name: PREFIX-%05d-of-%05d.tfrecord into out. */
void loom_shard_name(char *out, size_t n, const char *prefix, uint64_t i, uint64_t total);

#endif
