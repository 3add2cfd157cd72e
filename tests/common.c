/* Unit tests for loom_common (parsing, errors) and loom_file (atomic output). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom_common.h"
#include "loom_file.h"
#include "tap.h"

static const char *dir;	/* the scratch directory; dir/out.bin holds "hello" */

/* Numbers, sizes and doubles. */
static void case_parse(void)
{
	uint64_t v;
	double d;
	is_int(loom_parse_u64("42", 0, 100, &v), 0, "parse 42");
	is_int(v, 42, "value 42");
	is_int(loom_parse_u64("0x10", 0, 100, &v), 0, "parse hex");
	is_int(v, 16, "hex value");
	is_int(loom_parse_u64("101", 0, 100, &v), LOOM_ERANGE, "above max");
	is_int(loom_parse_u64("18446744073709551616", 0, UINT64_MAX, &v), LOOM_ERANGE,
	       "2^64 overflows");
	is_int(loom_parse_u64("-1", 0, 100, &v), LOOM_EINVAL, "negative rejected");
	is_int(loom_parse_u64("12x", 0, 100, &v), LOOM_EINVAL, "trailing junk");
	is_int(loom_parse_u64("", 0, 100, &v), LOOM_EINVAL, "empty");
	is_int(loom_parse_u64(" 1", 0, 100, &v), LOOM_EINVAL, "leading space");
	is_int(loom_parse_size("512M", &v), 0, "size 512M");
	is_int(v, 512ull << 20, "512M value");
	is_int(loom_parse_size("17179869184T", &v), LOOM_ERANGE, "size overflow");
	is_int(loom_parse_size("8GB", &v), 0, "size 8GB");
	is_int(v, 8000000000ull, "8GB: powers of 1000");
	is_int(loom_parse_size("16GiB", &v), 0, "size 16GiB");
	is_int(v, 16ull << 30, "16GiB: powers of 1024");
	is_int(loom_parse_size("2g", &v), 0, "size 2g");
	is_int(v, 2ull << 30, "2g: any case");
	is_int(loom_parse_size("512kB", &v), 0, "size 512kB");
	is_int(v, 512000, "512kB");
	is_int(loom_parse_size("4096", &v), 0, "size without a unit");
	is_int(v, 4096, "4096: bytes");
	is_int(loom_parse_size("18446744074GB", &v), LOOM_ERANGE, "decimal size overflow");
	is_int(loom_parse_size("18446744073GB", &v), 0, "the largest whole GB");
	is_int(loom_parse_size("8iB", &v), LOOM_EINVAL, "iB without a unit");
	is_int(loom_parse_size("8B", &v), LOOM_EINVAL, "B without a unit");
	is_int(loom_parse_size("8XB", &v), LOOM_EINVAL, "unknown unit");
	is_int(loom_parse_size("GB", &v), LOOM_EINVAL, "a unit without a number");
	is_int(loom_parse_size("8 GB", &v), LOOM_EINVAL, "a space");
	is_int(loom_parse_double("1e-3", &d), 0, "double");
	ok(d == 1e-3, "double value");
	is_int(loom_parse_double("nan", &d), LOOM_EINVAL, "nan rejected");
}

/* Error messages, with and without errno. */
static void case_errors(void)
{
	struct loom_err err;
	is_int(loom_err_set(&err, LOOM_EFORMAT, "record %d", 17), LOOM_EFORMAT,
	       "err_set returns its code");
	is_str(err.msg, "record 17", "err_set message");
	loom_err_errno(&err, LOOM_EIO, ENOSPC, "cannot write '%s'", "x");
	is_str(err.msg, "cannot write 'x': No space left on device", "errno message");
}

/* An atomic output: a temp file until commit; abort keeps the old file. */
static void take_line(void *ctx, const char *line)
{
	snprintf(ctx, 64, "%s|", line);
}

static void case_note(void)
{
	char got[64] = "untouched";
	loom_note(NULL, got, "x %d", 1);
	is_str(got, "untouched", "loom_note without a callback: nothing");
	loom_note(take_line, got, "shard %s: %d records", "a.tfrecord", 7);
	is_str(got, "shard a.tfrecord: 7 records|", "loom_note: the formatted line, once");
}

static void case_outfile(void)
{
	struct loom_err err;
	char path[4200];
	snprintf(path, sizeof path, "%s/out.bin", dir);
	struct loom_outfile o;
	is_int(loom_outfile_open(&o, path), 0, "outfile open");
	is_int(loom_outfile_write(&o, "hello", 5), 0, "outfile write");
	ok(access(path, F_OK) != 0, "final name absent before commit");
	is_int(tap_count_dir(dir, ""), 1, "one temp file while writing");
	is_int(loom_outfile_commit(&o), 0, "commit");
	char *buf;
	size_t len;
	is_int(loom_read_file(path, &buf, &len, &err), 0, "read back");
	ok(len == 5 && memcmp(buf, "hello", 5) == 0, "content committed");
	free(buf);
	struct stat st;
	stat(path, &st);
	ok((st.st_mode & 0777) == (0666 & ~umask(022)), "mode follows umask");

	is_int(loom_outfile_open(&o, path), 0, "reopen");
	loom_outfile_write(&o, "partial", 7);
	loom_outfile_abort(&o);
	is_int(loom_read_file(path, &buf, &len, &err), 0, "read after abort");
	ok(len == 5 && memcmp(buf, "hello", 5) == 0, "abort keeps the old file");
	free(buf);
	is_int(tap_count_dir(dir, ""), 1, "abort removes the temp file");

	char *name;
	is_int(loom_outfile_open(&o, path), 0, "open for a partial result");
	loom_outfile_write(&o, "half", 4);
	is_int(loom_outfile_commit_suffix(&o, ".incomplete", &name), 0, "commit under a suffix");
	char want[4300];
	snprintf(want, sizeof want, "%s.incomplete", path);
	is_str(name, want, "its name: FILE.incomplete");
	is_int(loom_read_file(path, &buf, &len, &err), 0, "FILE itself");
	ok(len == 5 && memcmp(buf, "hello", 5) == 0, "untouched");
	free(buf);
	is_int(loom_read_file(name, &buf, &len, &err), 0, "FILE.incomplete");
	ok(len == 4 && memcmp(buf, "half", 4) == 0, "holds the partial result");
	free(buf);
	unlink(name);
	free(name);
	is_int(tap_count_dir(dir, ""), 1, "no temp file left");

	snprintf(path, sizeof path, "%s/no/such/dir/x", dir);
	is_int(loom_read_file(path, &buf, &len, &err), LOOM_EIO, "read missing");
	ok(strstr(err.msg, "No such file") != NULL, "read message has strerror");
}

/* loom_outfile_finish commits, or aborts on a failure (copying its
 * message); loom_pwrite_all writes at an offset, past the end too. */
static void case_finish_pwrite(void)
{
	struct loom_err err = {0};
	char path[4200], *buf;
	size_t len;
	snprintf(path, sizeof path, "%s/fin.bin", dir);
	struct loom_outfile o;
	is_int(loom_outfile_open(&o, path), 0, "finish: open");
	loom_outfile_write(&o, "hello", 5);
	is_int(loom_outfile_finish(&o, 0, &err), 0, "finish(0) commits");
	is_int(loom_outfile_open(&o, path), 0, "finish: reopen");
	loom_outfile_write(&o, "partial", 7);
	loom_err_set(&o.err, LOOM_EINVAL, "%s: a step failed", path);
	is_int(loom_outfile_finish(&o, LOOM_EINVAL, &err), LOOM_EINVAL, "finish(failure) fails");
	ok(strstr(err.msg, "fin.bin: a step failed") != NULL, "  with the outfile's message: %s",
	   err.msg);
	is_int(loom_read_file(path, &buf, &len, &err), 0, "  read back");
	ok(len == 5 && memcmp(buf, "hello", 5) == 0, "  the committed file kept");
	free(buf);
	is_int(tap_count_dir_containing(dir, "fin.bin.tmp-"), 0, "  no temp file left");

	int fd = open(path, O_RDWR);
	is_int(loom_pwrite_all(fd, "J", 1, 0), 0, "pwrite at 0");
	is_int(loom_pwrite_all(fd, "LLO", 3, 2), 0, "pwrite at 2");
	is_int(loom_pwrite_all(fd, "!", 1, 7), 0, "pwrite past the end");
	is_int(loom_pwrite_all(fd, "?", 1, -1), -EINVAL, "a negative offset refused");
	close(fd);
	is_int(loom_read_file(path, &buf, &len, &err), 0, "  read back");
	ok(len == 8 && memcmp(buf, "JeLLO\0\0!", 8) == 0, "  the bytes at their offsets");
	free(buf);
}

/* A FIFO (like /dev/null, a non-regular file) is written in place. */
static void case_outfile_in_place(void)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/fifo", dir);
	ok(mkfifo(path, 0600) == 0, "make a FIFO");
	int rfd = open(path, O_RDONLY | O_NONBLOCK);
	struct loom_outfile o;
	is_int(loom_outfile_open(&o, path), 0, "open a FIFO as output");
	is_int(loom_outfile_write(&o, "abc", 3), 0, "write to the FIFO");
	is_int(loom_outfile_commit(&o), 0, "commit on a FIFO");
	char got[8] = { 0 };
	is_int(read(rfd, got, sizeof got), 3, "the reader got the bytes");
	close(rfd);
	struct stat fst;
	ok(lstat(path, &fst) == 0 && S_ISFIFO(fst.st_mode), "the FIFO is still a FIFO");
	unlink(path);
	is_int(loom_outfile_open(&o, "/dev/null"), 0, "open /dev/null");
	loom_outfile_write(&o, "x", 1);
	is_int(loom_outfile_commit(&o), 0, "commit /dev/null");
	ok(stat("/dev/null", &fst) == 0 && S_ISCHR(fst.st_mode), "/dev/null is still a device");
}

/* loom_basename. */
static void case_basename(void)
{
	is_str(loom_basename("a/b/c.txt"), "c.txt", "basename of a path");
	is_str(loom_basename("c.txt"), "c.txt", "basename without a slash");
}

/* loom_mkdir_p: mkdir -p. */
static void case_mkdir_p(void)
{
	struct loom_err err;
	char path[4200];
	snprintf(path, sizeof path, "%s/a/b/c", dir);
	is_int(loom_mkdir_p(path, &err), 0, "mkdir -p creates parents");
	struct stat fst;
	ok(stat(path, &fst) == 0 && S_ISDIR(fst.st_mode), "the directory exists");
	is_int(loom_mkdir_p(path, &err), 0, "an existing directory is fine");
	snprintf(path, sizeof path, "%s/out.bin/x", dir);
	is_int(loom_mkdir_p(path, &err), LOOM_EIO, "a file in the way fails");
	ok(strstr(err.msg, "out.bin") != NULL, "message names the path");
	is_int(loom_mkdir_p("", &err), LOOM_EINVAL, "mkdir -p of an empty name fails");
}

/* An outfile below missing directories creates them. */
static void case_outfile_parents(void)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/a/new/sub/f.txt", dir);
	struct loom_outfile o;
	struct stat fst;
	is_int(loom_outfile_open(&o, path), 0, "outfile below missing directories opens");
	loom_outfile_write(&o, "hi", 2);
	is_int(loom_outfile_commit(&o), 0, "and commits");
	ok(stat(path, &fst) == 0 && fst.st_size == 2, "the file is there");
	unlink(path);
	snprintf(path, sizeof path, "%s/a/new/sub", dir);
	rmdir(path);
	snprintf(path, sizeof path, "%s/a/new", dir);
	rmdir(path);
	snprintf(path, sizeof path, "%s/out.bin/f.txt", dir);
	ok(loom_outfile_open(&o, path) < 0 && strstr(loom_outfile_error(&o), "out.bin"),
	   "outfile below a file fails, naming the path");
}

/* loom_lock_take: one holder at a time; release removes the file. */
static void case_lock(void)
{
	struct loom_err err;
	char path[4200];
	int l1, l2;
	snprintf(path, sizeof path, "%s/.x.lock", dir);
	is_int(loom_lock_take(path, &l1, &err), 0, "lock taken");
	is_int(loom_lock_take(path, &l2, &err), LOOM_EBUSY, "a second taker: LOOM_EBUSY");
	ok(l2 == -1 && strstr(err.msg, ".x.lock") != NULL, "  naming the file: %s", err.msg);
	loom_lock_release(path, &l1);
	ok(l1 == -1 && access(path, F_OK) != 0, "release removes the file");
	is_int(loom_lock_take(path, &l2, &err), 0, "then the lock is free");
	loom_lock_release(path, &l2);
	snprintf(path, sizeof path, "%s/nodir/.x.lock", dir);
	is_int(loom_lock_take(path, &l1, &err), LOOM_EIO, "a lock in a missing directory: LOOM_EIO");
}

/* Files loom opens by name: regular, size-bounded, a FIFO never blocks. */
static void case_bounded_reads(void)
{
	struct loom_err err;
	char path[4200];
	snprintf(path, sizeof path, "%s/out.bin", dir);
	char *buf;
	size_t len;
	is_int(loom_file_read_bounded(path, 5, &buf, &len, &err), 0, "bounded read at the bound");
	ok(len == 5 && memcmp(buf, "hello", 6) == 0, "content, NUL-terminated");
	free(buf);
	is_int(loom_file_read_bounded(path, 4, &buf, &len, &err), LOOM_EFORMAT, "one byte over");
	ok(strstr(err.msg, "out.bin' is 5 bytes, more than the 4") != NULL, "names file and sizes");
	is_int(loom_file_read_bounded("/dev/zero", 1 << 20, &buf, &len, &err), LOOM_EFORMAT,
	       "/dev/zero refused");
	is_str(err.msg, "'/dev/zero' is not a regular file", "message");
	is_int(loom_file_read_bounded(dir, 1 << 20, &buf, &len, &err), LOOM_EFORMAT,
	       "a directory refused");
	snprintf(path, sizeof path, "%s/fifo", dir);
	mkfifo(path, 0600);
	uint64_t size;
	is_int(loom_file_open_regular(path, 1 << 20, &size, &err), LOOM_EFORMAT,
	       "a FIFO without a writer: refused, not blocked on");
	unlink(path);
	snprintf(path, sizeof path, "%s/no-such", dir);
	is_int(loom_file_open_regular(path, 1, &size, &err), LOOM_EIO, "missing: LOOM_EIO");
}

/* Files the user names: a regular file, a pipe (read to its end), bounded;
 * a device refused by name. */
static void case_input_reads(void)
{
	struct loom_err err;
	char path[4200], *buf;
	size_t len;
	snprintf(path, sizeof path, "%s/out.bin", dir);
	is_int(loom_file_read_input(path, 5, &buf, &len, &err), 0, "a regular file at the bound");
	ok(len == 5 && memcmp(buf, "hello", 6) == 0, "content, NUL-terminated");
	free(buf);
	is_int(loom_file_read_input(path, 4, &buf, &len, &err), LOOM_EFORMAT, "one byte over");
	int p[2];
	ok(pipe(p) == 0 && write(p[1], "{\"a\": 1}", 8) == 8, "a pipe holding 8 bytes");
	close(p[1]);
	snprintf(path, sizeof path, "/dev/fd/%d", p[0]);
	is_int(loom_file_read_input(path, 8, &buf, &len, &err), 0, "the pipe read, as -c <(...)");
	ok(len == 8 && memcmp(buf, "{\"a\": 1}", 9) == 0, "its content");
	free(buf);
	close(p[0]);
	ok(pipe(p) == 0 && write(p[1], "123456789", 9) == 9, "a pipe holding 9 bytes");
	close(p[1]);
	snprintf(path, sizeof path, "/dev/fd/%d", p[0]);
	is_int(loom_file_read_input(path, 8, &buf, &len, &err), LOOM_EFORMAT, "past the bound: refused");
	ok(strstr(err.msg, "holds more than the 8 bytes") != NULL, "says so: %s", err.msg);
	close(p[0]);
	is_int(loom_file_read_input("/dev/zero", 1 << 20, &buf, &len, &err), LOOM_EFORMAT,
	       "/dev/zero refused");
	is_str(err.msg, "'/dev/zero' is a device, not a file or a pipe", "by name");
}

/* loom_path_join: one slash, no "." components */
static void case_path_join(void)
{
	static const char *const joins[][3] = {
		{ "dumps/", "x.bz2", "dumps/x.bz2" }, { "dumps", "x", "dumps/x" },
		{ "./a//b/./", "c", "a/b/c" }, { "/", "x", "/x" }, { "", "x", "x" },
		{ "a", "/abs/x", "/abs/x" }, { "etc/../state", "f", "etc/../state/f" },
		{ ".", ".", "." }, { "//a", "b/", "/a/b" },
	};
	for (size_t i = 0; i < sizeof joins / sizeof joins[0]; i++) {
		char *j = loom_path_join(joins[i][0], joins[i][1]);
		is_str(j, joins[i][2], "loom_path_join('%s', '%s')", joins[i][0], joins[i][1]);
		free(j);
	}
	char *j = loom_path_join(NULL, "x/");
	is_str(j, "x", "loom_path_join(NULL, 'x/')");
	free(j);
}

/* loom_double_repr: Python's repr() of a float (loom-eval's SQuAD scores) */
static void case_double_repr(void)
{
	char b[40];
	is_str(loom_double_repr(100.0, b, sizeof b), "100.0", "repr 100.0");
	is_str(loom_double_repr(0.0, b, sizeof b), "0.0", "repr 0.0");
	is_str(loom_double_repr(1e-05, b, sizeof b), "1e-05", "repr 1e-05");
	is_str(loom_double_repr(0.0001, b, sizeof b), "0.0001", "repr 0.0001");
	is_str(loom_double_repr(12.5, b, sizeof b), "12.5", "repr 12.5");
}

/* loom_fmt_bytes / loom_fmt_duration: the tools' byte counts and times. */
static void case_fmt(void)
{
	char b[32];
	is_str(loom_fmt_bytes(0, b, sizeof b), "0 B", "0 bytes");
	is_str(loom_fmt_bytes(999, b, sizeof b), "999 B", "999 bytes");
	is_str(loom_fmt_bytes(1500, b, sizeof b), "1.5 kB", "kB, one decimal");
	is_str(loom_fmt_bytes(3.2e9, b, sizeof b), "3.2 GB", "GB");
	is_str(loom_fmt_bytes(5e15, b, sizeof b), "5000.0 TB", "TB is the last unit");
	is_str(loom_fmt_duration(-1, b, sizeof b), "0:00", "negative: 0:00");
	is_str(loom_fmt_duration(245.4, b, sizeof b), "4:05", "M:SS, rounded");
	is_str(loom_fmt_duration(3723, b, sizeof b), "1:02:03", "H:MM:SS from an hour");
}

int main(void)
{
	case_fmt();
	case_parse();
	case_errors();
	case_note();
	ok((dir = tap_tmpdir()) != NULL, "scratch dir");
	case_outfile();
	case_finish_pwrite();
	case_outfile_in_place();
	case_basename();
	case_mkdir_p();
	case_outfile_parents();
	case_lock();
	case_bounded_reads();
	case_input_reads();
	case_path_join();
	case_double_repr();
	return done_testing();
}
