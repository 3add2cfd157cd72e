/*
 * loom_file.h - atomic output files and small file helpers.
 *
 * Purpose: every file loom writes goes through loom_outfile: it is created
 * under a temporary name in the destination directory (".NAME.tmp-XXXXXX"),
 * written, fsynced, and renamed to its final name only by
 * loom_outfile_commit(), after which the directory is fsynced too.  Missing
 * parent directories are created first (as mkdir -p).  Until
 * then the final name is untouched, so a crash, a full disk or bad input
 * never leaves a half-written output.  The path "-" means stdout, and an
 * existing non-regular file (/dev/null, a FIFO) is written in place: no
 * atomicity, no fsync, nothing renamed over it.
 *
 * Live temporary names are kept in a small process-wide table so that a
 * tool's fatal-signal handler can remove them: loom_outfile_unlink_all()
 * is async-signal-safe.
 *
 * Ownership: the caller owns the struct; open allocates the names, commit
 * and abort release everything (both are safe to call on a closed object).
 * Errors: functions return 0 or a negative LOOM_E* code and leave a
 * message (naming the file) in o->err / loom_outfile_error(o).
 * Thread-safety: the default (loom_common.h); the table of temporary names
 * is shared by all outfiles and locked, so threads may each commit their
 * own (loom-shard does).  loom_share_path reads LOOM_SHARE: no setenv
 * concurrently.
 */
#ifndef LOOM_FILE_H
#define LOOM_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loom_common.h"

struct loom_outfile {
	char *path;         /* final name ("-" for stdout) */
	char *tmp;          /* temporary name, NULL for stdout */
	int fd;             /* -1 when closed */
	uint64_t bytes;     /* bytes written so far */
	struct loom_err err;
};

/* Start writing `path` (mode 0666 & ~umask). */
int loom_outfile_open(struct loom_outfile *o, const char *path);
/* Write all of buf (retrying short writes and EINTR). */
int loom_outfile_write(struct loom_outfile *o, const void *buf, size_t n);
/* Close a temporary file's descriptor until the next write or the commit
 * (which open it again, appending): for writers of many files at once,
 * more than the limit on open files.  Nothing for stdout or a file written
 * in place. */
int loom_outfile_park(struct loom_outfile *o);
/* fsync, close, rename to the final name, fsync the directory. */
int loom_outfile_commit(struct loom_outfile *o);
/* Commit a temporary file under its final name + suffix instead (a
 * partial result, FILE.incomplete, beside an untouched FILE); *name: that
 * name (malloc'd), NULL for stdout or a file written in place, committed
 * as loom_outfile_commit does. */
int loom_outfile_commit_suffix(struct loom_outfile *o, const char *suffix, char **name);
/* Close and remove the temporary file; the final name is untouched. */
void loom_outfile_abort(struct loom_outfile *o);
/* The end of writing o, whose steps so far returned rc: commit it if rc
 * is 0; if rc (or the commit) failed, copy o's message to err and abort.
 * Returns rc or the commit's code. */
int loom_outfile_finish(struct loom_outfile *o, int rc, struct loom_err *err);
const char *loom_outfile_error(const struct loom_outfile *o);

/* Remove every live temporary file (async-signal-safe). */
void loom_outfile_unlink_all(void);

/* write(2) all of buf, retrying short writes and EINTR: 0 or -errno. */
int loom_write_all(int fd, const void *buf, size_t n);
/* pwrite(2) all of buf at off >= 0 (short writes and EINTR retried; a
 * write of more than 2 GB takes several): 0 or -errno. */
int loom_pwrite_all(int fd, const void *buf, size_t n, off_t off);
/* pread(2) exactly n bytes at off: 0, LOOM_ETRUNC (short), or LOOM_EIO
 * (errno set). */
int loom_pread_all(int fd, void *buf, size_t n, off_t off);
/* fsync the directory containing `path` (or `path` itself if a dir). */
int loom_fsync_dir_of(const char *path, struct loom_err *err);
/* The last component of a path ("a/b/c.txt" -> "c.txt"); never modifies
 * its argument, returns a pointer into it. */
const char *loom_basename(const char *path);
/* dir + "/" + name as a new string (free()), tidied: repeated slashes are
 * one, "." components dropped, a trailing slash removed ("dumps/" + "x" is
 * "dumps/x", not "dumps//x"; "./a/" + "b" is "a/b").  ".." stays (its
 * meaning depends on symbolic links).  An empty dir or NULL gives name
 * alone; an absolute name ignores dir.  NULL when out of memory. */
char *loom_path_join(const char *dir, const char *name);
/* mkdir -p: create `path` and its missing parents (mode 0777 & ~umask);
 * an existing directory is fine, an existing non-directory is an error. */
int loom_mkdir_p(const char *path, struct loom_err *err);
/* mkdir -p of the directory that holds `path` ("a/b/c.txt" -> "a/b"); a
 * path without a directory part is fine.  Each directory created is made
 * durable (its parent is fsynced). */
int loom_mkdir_parent(const char *path, struct loom_err *err);
/* Hold an exclusive flock(2) on the lock file `path` (created if missing,
 * mode 0666 & ~umask) until loom_lock_release() or the process ends: the
 * kernel drops the lock when the process dies, even by SIGKILL, so a lock
 * is never stale (the file may stay behind, unlocked: the next taker takes
 * it).  Another holder: LOOM_EBUSY (callers word the refusal).  Since
 * release removes the file, a taker checks that the name still leads to
 * the file it locked.  On success *fd holds the lock. */
int loom_lock_take(const char *path, int *fd, struct loom_err *err);
/* Remove the lock file and drop the lock (*fd = -1); nothing if *fd < 0. */
void loom_lock_release(const char *path, int *fd);
/* Read a whole file ("-" = stdin) into a malloc'd, NUL-terminated buffer. */
int loom_read_file(const char *path, char **buf, size_t *len, struct loom_err *err);
/* Files loom opens by name itself (a checkpoint's files, a manifest and
 * the shards and indexes it names, config files, vocabularies) must be
 * regular files of bounded size: a symlink to /dev/zero or a FIFO there
 * would hang a reader or exhaust memory.  (Data inputs a user names, which
 * may be pipes, go through loom_read_file or the stream readers instead.)
 * loom_file_open_regular opens `path` read-only without blocking on a FIFO
 * (O_NONBLOCK, cleared after), refuses anything but a regular file ("'P'
 * is not a regular file") or one larger than `max` bytes, and returns the
 * descriptor (its size in *size) or a negative LOOM_E* code; on LOOM_EIO
 * errno is the reason (for a caller that words the message itself). */
int loom_file_open_regular(const char *path, uint64_t max, uint64_t *size,
			   struct loom_err *err);
/* Read at most `limit` bytes of fd (from its offset) in 1 MiB blocks,
 * handing each to fn(ctx, block, n); *bytes is what was read (less than
 * limit at the end of the file).  0, or LOOM_EIO ("cannot read 'path'")
 * / LOOM_ENOMEM. */
int loom_fd_blocks(int fd, const char *path, uint64_t limit,
		   void (*fn)(void *ctx, const void *block, size_t n), void *ctx,
		   uint64_t *bytes, struct loom_err *err);
/* Read a whole regular file of at most `max` bytes (as above) into a
 * malloc'd, NUL-terminated buffer; a file that grows past `max` while it
 * is read is refused too. */
int loom_file_read_bounded(const char *path, size_t max, char **buf, size_t *len,
			   struct loom_err *err);
/* The same for a file the user names (a configuration, a vocabulary, a
 * SQuAD or predictions file): besides a regular file, "-" (stdin), a pipe
 * or process substitution (-c <(...)) or a FIFO (waited on for its writer,
 * as cat does), read up to `max` bytes: more is refused ("'P' holds more
 * than N bytes ...").  A device (/dev/zero) is refused by name. */
int loom_file_read_input(const char *path, size_t max, char **buf, size_t *len,
			 struct loom_err *err);
/* The bounds loom applies: config.json, state.json, loom-train -c FILE; and
 * manifests and vocabularies (gpt2's files are 1-2 MB, the largest
 * tokenizer.json files some tens of MB). */
#define LOOM_FILE_MAX_CONFIG ((size_t)16 << 20)
#define LOOM_FILE_MAX_LIST ((size_t)256 << 20)

/* Write a whole buffer to `path` atomically (temp + fsync + rename). */
int loom_write_file_atomic(const char *path, const void *buf, size_t len,
			   struct loom_err *err);


/* Find `rel` (e.g. "vocab/gpt2/encoder.json") among the data loom ships in
 * share/: tries $LOOM_SHARE, then relative to the running executable
 * (EXE/../share/loom when installed, EXE/../../share in the build tree),
 * then the compiled-in LOOM_SHARE_DIR.  Writes the first existing path to
 * out; returns 0, or LOOM_EINVAL if it is nowhere. */
int loom_share_path(const char *rel, char *out, size_t n);

#endif
