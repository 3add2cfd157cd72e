/*
 * loom_hash.h - streaming message digests (sha256, sha1, md5) as hex.
 *
 * Purpose: checksums for manifests (sha256 per shard), dump verification
 * (sha1/md5 as Wikimedia publishes them) and vocabulary fingerprints.  A
 * thin wrapper over OpenSSL's EVP interface, the well-kept library for it.
 *
 * Ownership: loom_hash_new/_free (free accepts NULL).  Errors: functions
 * return 0 or a negative LOOM_E* code, message in loom_hash_error(h) (or
 * in `err` for the one-shot helpers).  Thread-safety: the default
 * (loom_common.h).
 */
#ifndef LOOM_HASH_H
#define LOOM_HASH_H

#include <stddef.h>

#include "loom_common.h"

/* Large enough for the hex of any supported digest plus NUL. */
#define LOOM_HASH_HEX_MAX 129

struct loom_hash;

/* algo: "sha256", "sha1" or "md5".  NULL if unknown or out of memory. */
struct loom_hash *loom_hash_new(const char *algo);
void loom_hash_free(struct loom_hash *h);
int loom_hash_update(struct loom_hash *h, const void *data, size_t n);
/* Lower-case hex digest into hex[LOOM_HASH_HEX_MAX]; the object may then
 * be reused (it restarts). */
int loom_hash_final_hex(struct loom_hash *h, char *hex);
const char *loom_hash_error(const struct loom_hash *h);

/* One-shot helpers. */
int loom_hash_buf_hex(const char *algo, const void *data, size_t n, char *hex,
		      struct loom_err *err);
/* Hash a whole file (read with large buffers). */
int loom_hash_file_hex(const char *algo, const char *path, char *hex,
		       struct loom_err *err);

/* 1 if s is exactly n hex digits (either case), else 0. */
int loom_hex_is(const char *s, size_t n);

#endif
