/* Unit tests for loom_reader (lib/common/loom_reader.h): fill reads until
 * `want` bytes are unread (across short reads from a pipe), returns fewer
 * only at the end, slides unread bytes to the front keeping pos, grows the
 * buffer for a large want, and reports a failed read as LOOM_EIO with its
 * errno. */
#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loom_common.h"
#include "loom_reader.h"
#include "tap.h"

/* A pipe whose writer (a child) writes n bytes i % 251 in pieces of
 * `piece` bytes, then closes; returns the read end. */
static int pipe_source(size_t n, size_t piece, pid_t *pid)
{
	int p[2];
	if (pipe(p))
		return -1;
	*pid = fork();
	if (*pid == 0) {
		close(p[0]);
		uint8_t b[4096];
		for (size_t i = 0; i < n;) {
			size_t k = n - i < piece ? n - i : piece;
			for (size_t j = 0; j < k; j++)
				b[j] = (uint8_t)((i + j) % 251);
			if (write(p[1], b, k) != (ssize_t)k)
				_exit(1);
			i += k;
		}
		_exit(0);
	}
	close(p[1]);
	return p[0];
}

static int pattern_ok(const uint8_t *p, size_t n, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)((off + i) % 251))
			return 0;
	return 1;
}

static void fills_across_short_reads(void)
{
	pid_t pid;
	int fd = pipe_source(100000, 7, &pid);
	struct loom_reader r;
	is_int(loom_reader_init(&r, fd, 65536), 0, "init");
	ssize_t got = loom_reader_fill(&r, 1000);
	ok(got >= 1000, "fill(1000) from 7-byte writes: at least 1000 unread (%zd)", got);
	ok(pattern_ok(r.buf + r.start, (size_t)got, 0), "the bytes are the stream's first");
	r.start += 600; /* consume */
	got = loom_reader_fill(&r, 300);
	ok(got >= 300 && r.start == 600, "fill with enough unread reads nothing, moves nothing");
	/* 65000 is more than the 65536 - 600 bytes the buffer can hold after
	 * r.start, however much the first fill got from the pipe: it must slide */
	got = loom_reader_fill(&r, 65000);
	ok(got >= 65000 && r.start == 0 && r.pos == 600,
	   "fill(65000): unread bytes slid to the front, pos = 600 (%zd unread)", got);
	ok(pattern_ok(r.buf, (size_t)got, r.pos), "slid bytes and new ones in order");
	uint64_t seen = r.pos;
	while ((got = loom_reader_fill(&r, 4096)) > 0) {
		if (!pattern_ok(r.buf + r.start, (size_t)got, r.pos + r.start))
			break;
		seen = r.pos + r.start + (size_t)got;
		r.start = r.end;
		if (r.eof)
			break;
	}
	is_int(seen, 100000, "every byte read once, in order");
	is_int(loom_reader_fill(&r, 1), 0, "fill at the end: 0");
	ok(r.eof, "eof set");
	loom_reader_release(&r);
	close(fd);
	int st;
	waitpid(pid, &st, 0);
}

static void short_at_end_and_growth(void)
{
	pid_t pid;
	int fd = pipe_source(5000, 4096, &pid);
	struct loom_reader r;
	loom_reader_init(&r, fd, 1024);
	ssize_t got = loom_reader_fill(&r, 3000);
	ok(got >= 3000 && r.cap >= 3000, "want 3000 > cap 1024: buffer grows (cap %zu)", r.cap);
	ok(pattern_ok(r.buf, (size_t)got, 0), "grown buffer keeps the bytes");
	r.start = 10;
	got = loom_reader_fill(&r, 8000);
	is_int(got, 4990, "fill(8000) of a 5000-byte stream, 10 consumed: 4990, the rest");
	ok(r.eof && r.pos == 10 && pattern_ok(r.buf, 4990, 10), "at the end: eof, pos 10, bytes right");
	loom_reader_release(&r);
	loom_reader_release(&r); /* twice is harmless */
	close(fd);
	int st;
	waitpid(pid, &st, 0);
}

static void read_error(void)
{
	int fd = open(".", O_RDONLY | O_DIRECTORY);
	struct loom_reader r;
	loom_reader_init(&r, fd, 256);
	is_int(loom_reader_fill(&r, 1), LOOM_EIO, "read() of a directory: LOOM_EIO");
	is_int(r.errnum, EISDIR, "errnum is EISDIR");
	loom_reader_release(&r);
	close(fd);
}

int main(void)
{
	fills_across_short_reads();
	short_at_end_and_growth();
	read_error();
	return done_testing();
}
