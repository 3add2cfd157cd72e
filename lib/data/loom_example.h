/*
 * loom_example.h - tf.train.Example encode/decode (formats/tensorflow/).
 *
 * Purpose: the payload of every loom TFRecord is
 *   Example{features{feature{"input_ids": Feature{int64_list{value: [...]}}}}}
 * Two implementations of the same wire format live here:
 *  - a hand-written fast path for one int64 list feature (what loom-shard
 *    writes and loom-feed reads): encoding is byte-identical to protobuf-c's
 *    (and TensorFlow's) output for the same message (tests/example.c proves
 *    it on random inputs); decoding accepts any valid encoding (fields in any
 *    order, other features present, packed or unpacked values, repeated
 *    submessages merged as protobuf does; last map entry for a key wins).
 *  - protobuf-c generated code (tensorflow/example.pb-c.h) for strict
 *    validation and generic decoding of any feature type (bytes, float,
 *    int64) to JSON for loom-cat.
 * A payload that is not a well-formed Example (bad wire format, or fields
 * that Example, Features, Feature and the lists do not have) is rejected cleanly.
 *
 * Ownership: encoders write into caller buffers sized with
 * loom_example_bound(); JSON output is malloc'd (caller frees).  All
 * functions are thread-safe (no shared state).
 *
 * Errors: 0 on success or a negative LOOM_E* code with a message in `err`
 * (which may be NULL) that names the problem and its byte offset in the
 * payload but not the file: callers prefix file and record.  LOOM_EFORMAT
 * for a payload that is not an Example or lacks the feature, LOOM_ERANGE
 * for a value out of range or a too-small output buffer.
 */
#ifndef LOOM_EXAMPLE_H
#define LOOM_EXAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

#define LOOM_EXAMPLE_IDS "input_ids"

/* Upper bound of the encoded size of one int64 list feature of n values
 * under a key of keylen bytes. */
size_t loom_example_bound(size_t keylen, size_t n);

/* Fast path: encode Example{key: int64_list(v[0..n))} into out (room for
 * loom_example_bound(strlen(key), n) bytes: the encoder may scribble a few
 * bytes past the returned length, within that bound); returns the encoded
 * length. */
size_t loom_example_encode_u32(const char *key, const uint32_t *v, size_t n, uint8_t *out);
/* The same for 16-bit ids (e.g. raw u16 token arrays), same bytes. */
size_t loom_example_encode_u16(const char *key, const uint16_t *v, size_t n, uint8_t *out);
size_t loom_example_encode_i64(const char *key, const int64_t *v, size_t n, uint8_t *out);

/* Several int64 list features, in the order given (the bytes protobuf-c
 * writes for them in that order): Example{key[0]: v[0], key[1]: ...}.
 * out has room for loom_example_bound_i64s() bytes. */
struct loom_example_i64 {
	const char *key;
	const int64_t *v;
	size_t n;
};
size_t loom_example_bound_i64s(const struct loom_example_i64 *f, size_t nf);
size_t loom_example_encode_i64s(const struct loom_example_i64 *f, size_t nf, uint8_t *out);

/* Reference encoder through protobuf-c (same bytes, slower): *out malloc'd. */
int loom_example_encode_pbc(const char *key, const int64_t *v, size_t n, uint8_t **out,
			    size_t *len, struct loom_err *err);

/* Fast path: find int64 list feature `key` in the Example p[0..len) and
 * copy its values into out[0..cap).  *n receives the number of values;
 * if it exceeds cap, returns LOOM_ERANGE (with *n set, nothing else
 * guaranteed).  LOOM_EFORMAT if p is not an Example, the feature is missing
 * or is not an int64 list. */
int loom_example_decode_i64(const uint8_t *p, size_t len, const char *key, int64_t *out,
			    size_t cap, size_t *n, struct loom_err *err);
/* Same, for token ids: every value must be in [0, 2^32) (else LOOM_ERANGE). */
int loom_example_decode_u32(const uint8_t *p, size_t len, const char *key, uint32_t *out,
			    size_t cap, size_t *n, struct loom_err *err);

/* Strict validation through protobuf-c: p parses as an Example, has no
 * unknown fields at any level and its feature names are valid UTF-8
 * (proto3 strings). */
int loom_example_check(const uint8_t *p, size_t len, struct loom_err *err);

/* The same check done by protobuf-c's unpacker plus a walk for unknown
 * fields (slower; tests compare it with loom_example_check). */
int loom_example_check_pbc(const uint8_t *p, size_t len, struct loom_err *err);

/* Generic decode to one JSON object, features sorted by name:
 *   {"input_ids":[1,2,3],"score":[0.5],"text":["abc",{"base64":"/w=="}]}
 * int64 lists -> integers, float lists -> numbers (9 significant digits,
 * enough to round-trip a float; NaN/Inf as strings), bytes lists -> strings (valid UTF-8) or {"base64": ...}.
 * *json is malloc'd, NUL-terminated, without a trailing newline. */
int loom_example_to_json(const uint8_t *p, size_t len, char **json, size_t *jlen,
			 struct loom_err *err);

#endif
