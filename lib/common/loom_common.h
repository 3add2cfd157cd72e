/*
 * loom_common.h - error codes, per-object error messages, version.
 *
 * Purpose: the error contract shared by every libloom module.  Library
 * functions never print and never exit: they return 0 (or a non-negative
 * count) on success and a negative LOOM_E* code on failure, and leave a
 * one-line human message on the object they were called on, readable with
 * that module's loom_<x>_error(obj).  Modules embed a `struct loom_err` in
 * their objects and fill it with loom_err_set().
 *
 * Ownership: nothing here allocates.  A message is at most LOOM_ERR_MAX-1
 * bytes and is overwritten by the next failure on the same object.
 *
 * Thread-safety, the default for all of libloom: an object (anything made
 * by a _new/_open/_init and passed back in) may be used by one thread at a
 * time; distinct objects are independent, so threads may each use their
 * own; functions without an object are thread-safe unless noted.  A
 * module's header says where it differs (an object shared read-only, a
 * callback run on other threads, something to call before threads start).
 * Objects that start threads of their own (loom_dump, loom_shard, the
 * loom_tfr_writer, the OpenMP kernels) still present one caller thread.
 * Everything here is thread-safe.
 */
#ifndef LOOM_COMMON_H
#define LOOM_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define LOOM_VERSION "0.1.0"

enum {
	LOOM_OK = 0,
	LOOM_EIO = -1,      /* read/write/open failed (errno kept in message) */
	LOOM_ENOMEM = -2,   /* allocation failed */
	LOOM_EFORMAT = -3,  /* input is malformed: bad magic, CRC, syntax ... */
	LOOM_ETRUNC = -4,   /* input ends before a structure is complete */
	LOOM_EINVAL = -5,   /* caller passed an invalid argument or config */
	LOOM_ERANGE = -6,   /* a value does not fit its destination */
	LOOM_ENET = -7,     /* temporary network failure (worth retrying) */
	LOOM_ECHECKSUM = -8,/* data does not match its checksum */
	LOOM_EOF = -9,      /* clean end of input (not an error for readers) */
	LOOM_EBUSY = -10,   /* another process holds a lock (loom_lock_take) */
};

#define LOOM_ERR_MAX 512

struct loom_err {
	int code;
	char msg[LOOM_ERR_MAX];
};

/* Format a line for a caller's note callback fn(ctx, line) (a progress or
 * information line the library offers; fn NULL: nothing). */
void loom_note(void (*fn)(void *ctx, const char *line), void *ctx, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Record `code` and a printf-style message in `e`; returns `code` so that
 * callers can write `return loom_err_set(&o->err, LOOM_EIO, "...")`. */
int loom_err_set(struct loom_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Same, appending ": strerror(errnum)". */
int loom_err_errno(struct loom_err *e, int code, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void loom_err_clear(struct loom_err *e);

/* Short name of an error code ("I/O error", "malformed input", ...). */
const char *loom_strerror(int code);

/* A JSON parser's (jansson's) error text as a reader should see it: its
 * own option names (JSON_ALLOW_NUL) do not leak into a message; any other
 * text is returned as it is. */
const char *loom_json_reason(const char *text);

/* Monotonic clock in seconds (for rates, timeouts and progress). */
double loom_now(void);
/* CPU seconds of the whole process so far, all its threads. */
double loom_cpu_now(void);

/* Library version string, e.g. "0.1.0". */
const char *loom_version(void);

/* splitmix64's output function (Stafford's "mix13"): a bijection of the
 * 64-bit integers that mixes every input bit into every output bit. */
static inline uint64_t loom_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* splitmix64: the generator's output for state x (x + the golden gamma,
 * mixed), the basis of loom's counter-based randomness (initialisation,
 * dropout masks, sampling, RigL, loom-feed's shuffle). */
static inline uint64_t loom_splitmix64(uint64_t x)
{
	return loom_mix64(x + 0x9e3779b97f4a7c15ull);
}

/* Parse a whole decimal (or 0x hex) unsigned integer in [min, max].
 * Returns 0, or LOOM_EINVAL (not a number / trailing junk) or LOOM_ERANGE. */
int loom_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Parse a finite double.  Returns 0 or LOOM_EINVAL. */
int loom_parse_double(const char *s, double *out);
/* Parse a size in bytes with an optional unit, any case: K, M, G, T or
 * KiB .. TiB (powers of 1024), KB .. TB (powers of 1000): "512M", "16GiB",
 * "8GB".  LOOM_ERANGE when it overflows 64 bits. */
int loom_parse_size(const char *s, uint64_t *out);

/* A byte count for people, in powers of 1000: "512 B", "1.5 kB", "3.2 GB"
 * (up to TB) into buf (32 bytes are enough); returns buf. */
const char *loom_fmt_bytes(double n, char *buf, size_t len);
/* Seconds as M:SS, or H:MM:SS from an hour on, rounded; returns buf. */
const char *loom_fmt_duration(double sec, char *buf, size_t len);

/* A double as Python's repr() prints it: the shortest decimal that reads
 * back as the same double, ".0" on whole numbers (0.003, 100.0, 1e-05),
 * into buf (32 bytes are enough); returns buf. */
const char *loom_double_repr(double x, char *buf, size_t len);

/* Lazily backed memory: n zeroed bytes from mmap, 64-byte aligned, whose
 * pages the kernel provides only when first written (so a full-size array
 * of which a process touches only parts costs only those parts); NULL on
 * ENOMEM.  loom_lazy_free(p) (accepts NULL) unmaps it. */
void *loom_lazy_alloc(size_t n);
void loom_lazy_free(void *p);
/* Zero p[0..n) (bytes of a loom_lazy_alloc'd block) and give the pages
 * wholly inside it back to the kernel (madvise MADV_DONTNEED): they read
 * as zeros again and cost no memory until written. */
void loom_lazy_release(void *p, size_t n);

#endif
