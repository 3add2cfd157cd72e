/* loom_file.c - see loom_file.h */
#include "loom_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define LIVE_MAX 256

/* Table of live temporary names for loom_outfile_unlink_all().  Writers hold
 * the mutex; the signal-time reader does not (best effort, never crashes:
 * entries are only ever set to a valid string or NULL). */
static char *volatile live[LIVE_MAX];
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;

static void live_add(char *name)
{
	pthread_mutex_lock(&live_lock);
	for (int i = 0; i < LIVE_MAX; i++)
		if (!live[i]) {
			live[i] = name;
			break;
		}
	pthread_mutex_unlock(&live_lock);
}

static void live_del(const char *name)
{
	pthread_mutex_lock(&live_lock);
	for (int i = 0; i < LIVE_MAX; i++)
		if (live[i] == name) {
			live[i] = NULL;
			break;
		}
	pthread_mutex_unlock(&live_lock);
}

void loom_outfile_unlink_all(void)
{
	for (int i = 0; i < LIVE_MAX; i++) {
		char *n = live[i];
		if (n)
			unlink(n);
	}
}

/* write(2) (off < 0) or pwrite(2) at off all of buf. */
static int write_loop(int fd, const void *buf, size_t n, off_t off)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = off < 0 ? write(fd, p, n) : pwrite(fd, p, n, off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
		if (off >= 0)
			off += w;
	}
	return 0;
}

int loom_write_all(int fd, const void *buf, size_t n)
{
	return write_loop(fd, buf, n, -1);
}

int loom_pwrite_all(int fd, const void *buf, size_t n, off_t off)
{
	return off < 0 ? -EINVAL : write_loop(fd, buf, n, off);
}

int loom_pread_all(int fd, void *buf, size_t n, off_t off)
{
	char *p = buf;
	while (n > 0) {
		ssize_t r = pread(fd, p, n, off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return LOOM_EIO;
		}
		if (r == 0)
			return LOOM_ETRUNC;
		p += r;
		n -= (size_t)r;
		off += r;
	}
	return 0;
}

int loom_outfile_open(struct loom_outfile *o, const char *path)
{
	memset(o, 0, sizeof *o);
	o->fd = -1;
	if (strcmp(path, "-") == 0) {
		o->path = strdup("-");
		if (!o->path)
			return loom_err_set(&o->err, LOOM_ENOMEM, "out of memory");
		o->fd = STDOUT_FILENO;
		return 0;
	}
	/* An existing non-regular target (/dev/null, a FIFO, a terminal) is
	 * written in place: there is nothing to rename over it. */
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		o->path = strdup(path);
		if (!o->path)
			return loom_err_set(&o->err, LOOM_ENOMEM, "out of memory");
		o->fd = open(path, O_WRONLY | O_CLOEXEC);
		if (o->fd < 0) {
			int e = errno;
			free(o->path);
			o->path = NULL;
			return loom_err_errno(&o->err, LOOM_EIO, e, "cannot open '%s'", path);
		}
		return 0;
	}
	char *copy = strdup(path);
	o->path = strdup(path);
	if (!copy || !o->path) {
		free(copy);
		free(o->path);
		o->path = NULL;
		return loom_err_set(&o->err, LOOM_ENOMEM, "out of memory");
	}
	const char *dir = dirname(copy);
	const char *base = loom_basename(path);
	size_t n = strlen(dir) + strlen(base) + 32;
	o->tmp = malloc(n);
	if (!o->tmp) {
		free(copy);
		free(o->path);
		o->path = NULL;
		return loom_err_set(&o->err, LOOM_ENOMEM, "out of memory");
	}
	snprintf(o->tmp, n, "%s/.%s.tmp-XXXXXX", dir, base);
	o->fd = mkstemp(o->tmp);
	if (o->fd < 0 && errno == ENOENT) { /* a missing parent: mkdir -p it */
		if (loom_mkdir_parent(path, &o->err) < 0) {
			free(copy);
			free(o->tmp);
			o->tmp = NULL;
			free(o->path);
			o->path = NULL;
			return LOOM_EIO;
		}
		snprintf(o->tmp, n, "%s/.%s.tmp-XXXXXX", dir, base);
		o->fd = mkstemp(o->tmp);
	}
	free(copy);
	if (o->fd < 0) {
		int e = errno;
		free(o->tmp);
		o->tmp = NULL;
		loom_err_errno(&o->err, LOOM_EIO, e, "cannot create '%s'", path);
		free(o->path);
		o->path = NULL;
		return LOOM_EIO;
	}
	/* mkstemp makes 0600; give the file the mode open(2) would. */
	mode_t um = umask(0);
	umask(um);
	fchmod(o->fd, 0666 & ~um);
	live_add(o->tmp);
	return 0;
}

/* A parked temporary file opened again (O_APPEND: where it was). */
static int outfile_unpark(struct loom_outfile *o, int flags)
{
	if (o->fd >= 0 || !o->tmp)
		return 0;
	o->fd = open(o->tmp, O_WRONLY | O_CLOEXEC | flags);
	if (o->fd < 0)
		return loom_err_errno(&o->err, LOOM_EIO, errno, "cannot open '%s' again",
				      o->path);
	return 0;
}

int loom_outfile_park(struct loom_outfile *o)
{
	if (!o->tmp || o->fd < 0)
		return 0;
	int rc = close(o->fd);
	o->fd = -1;
	return rc < 0 ? loom_err_errno(&o->err, LOOM_EIO, errno, "cannot write '%s'", o->path) : 0;
}

int loom_outfile_write(struct loom_outfile *o, const void *buf, size_t n)
{
	if (outfile_unpark(o, O_APPEND) < 0)
		return LOOM_EIO;
	int rc = loom_write_all(o->fd, buf, n);
	if (rc < 0)
		return loom_err_errno(&o->err, LOOM_EIO, -rc, "cannot write '%s'",
				      o->path);
	o->bytes += n;
	return 0;
}

static void outfile_release(struct loom_outfile *o)
{
	if (o->tmp) {
		live_del(o->tmp);
		free(o->tmp);
		o->tmp = NULL;
	}
	free(o->path);
	o->path = NULL;
	o->fd = -1;
}

int loom_outfile_commit_suffix(struct loom_outfile *o, const char *suffix, char **name)
{
	*name = NULL;
	if (o->tmp && o->path) {
		char *p = NULL;
		if (asprintf(&p, "%s%s", o->path, suffix) < 0 || !(*name = strdup(p))) {
			free(p);
			loom_outfile_abort(o);
			return loom_err_set(&o->err, LOOM_ENOMEM, "out of memory");
		}
		free(o->path);
		o->path = p;
	}
	return loom_outfile_commit(o);
}

int loom_outfile_commit(struct loom_outfile *o)
{
	if (!o->path)
		return 0;
	if (!o->tmp) { /* stdout or a non-regular file: written in place */
		int rc = 0;
		if (o->fd != STDOUT_FILENO && close(o->fd) < 0)
			rc = loom_err_errno(&o->err, LOOM_EIO, errno, "cannot write '%s'",
					    o->path);
		outfile_release(o);
		return rc;
	}
	if (outfile_unpark(o, 0) < 0 || fsync(o->fd) < 0) {
		if (o->fd >= 0)
			loom_err_errno(&o->err, LOOM_EIO, errno, "cannot write '%s'", o->path);
		loom_outfile_abort(o);
		return LOOM_EIO;
	}
	if (close(o->fd) < 0) {
		int e = errno;
		o->fd = -1;
		loom_err_errno(&o->err, LOOM_EIO, e, "cannot write '%s'", o->path);
		loom_outfile_abort(o);
		return LOOM_EIO;
	}
	o->fd = -1;
	if (rename(o->tmp, o->path) < 0) {
		int e = errno;
		loom_err_errno(&o->err, LOOM_EIO, e, "cannot rename to '%s'", o->path);
		loom_outfile_abort(o);
		return LOOM_EIO;
	}
	int rc = loom_fsync_dir_of(o->path, &o->err);
	outfile_release(o);
	return rc;
}

void loom_outfile_abort(struct loom_outfile *o)
{
	if (!o->path)
		return;
	if (o->tmp) {
		if (o->fd >= 0)
			close(o->fd);
		unlink(o->tmp);
	} else if (o->fd >= 0 && o->fd != STDOUT_FILENO) {
		close(o->fd);
	}
	outfile_release(o);
}

int loom_outfile_finish(struct loom_outfile *o, int rc, struct loom_err *err)
{
	if (rc == 0)
		rc = loom_outfile_commit(o);
	if (rc < 0) {
		*err = o->err;
		loom_outfile_abort(o);
	}
	return rc;
}

const char *loom_outfile_error(const struct loom_outfile *o)
{
	return o->err.msg;
}

int loom_lock_take(const char *path, int *fd, struct loom_err *err)
{
	*fd = -1;
	for (;;) {
		int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		if (f < 0)
			return loom_err_errno(err, LOOM_EIO, errno, "cannot create '%s'", path);
		if (flock(f, LOCK_EX | LOCK_NB) < 0) {
			int e = errno;
			close(f);
			if (e == EWOULDBLOCK)
				return loom_err_set(err, LOOM_EBUSY, "'%s' is locked by another process",
						    path);
			return loom_err_errno(err, LOOM_EIO, e, "cannot lock '%s'", path);
		}
		struct stat a, b;
		if (fstat(f, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino) {
			*fd = f;
			return 0;
		}
		close(f); /* its last holder removed it: take the new one */
	}
}

void loom_lock_release(const char *path, int *fd)
{
	if (*fd >= 0) {
		unlink(path);
		close(*fd);
		*fd = -1;
	}
}

int loom_fsync_dir_of(const char *path, struct loom_err *err)
{
	struct stat st;
	char *copy = strdup(path);
	if (!copy)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	const char *dir = (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
				  ? path : dirname(copy);
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	int rc = 0;
	if (fd < 0 || fsync(fd) < 0)
		rc = loom_err_errno(err, LOOM_EIO, errno, "cannot sync directory '%s'", dir);
	if (fd >= 0)
		close(fd);
	free(copy);
	return rc;
}

const char *loom_basename(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* fsync the directory buf[0..end) ("." when end == buf, "/" for a leading
 * slash): makes a directory just created inside it durable. */
static int fsync_prefix(char *buf, char *end, struct loom_err *err)
{
	char c = *end;
	const char *dir = end == buf ? (*buf == '/' ? "/" : ".") : buf;
	*end = '\0';
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
	if (fd < 0 || fsync(fd) < 0)
		rc = loom_err_errno(err, LOOM_EIO, errno, "cannot sync directory '%s'", dir);
	if (fd >= 0)
		close(fd);
	*end = c;
	return rc;
}

int loom_mkdir_p(const char *path, struct loom_err *err)
{
	struct stat st;
	char *buf = strdup(path);
	int rc = 0;
	if (!buf)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	if (!*buf) {
		free(buf);
		return loom_err_set(err, LOOM_EINVAL, "empty directory name");
	}
	char *parent_end = buf;  /* the last '/' before the current component */
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (p[-1] == '/') {
			/* "a//b" or a trailing slash: nothing to create */
		} else if (mkdir(buf, 0777) == 0) {
			if ((rc = fsync_prefix(buf, parent_end, err)) < 0)
				break;
		} else if (errno != EEXIST) {
			rc = loom_err_errno(err, LOOM_EIO, errno, "cannot create directory '%s'", buf);
			break;
		}
		*p = c;
		if (!c)
			break;
		parent_end = p;
	}
	if (rc == 0 && (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)))
		rc = loom_err_set(err, LOOM_EIO, "'%s' is not a directory", path);
	free(buf);
	return rc;
}

int loom_mkdir_parent(const char *path, struct loom_err *err)
{
	const char *slash = strrchr(path, '/');
	if (!slash || slash == path)
		return 0;
	char *dir = strndup(path, (size_t)(slash - path));
	if (!dir)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	int rc = loom_mkdir_p(dir, err);
	free(dir);
	return rc;
}

/* Read fd to its end into a malloc'd, NUL-terminated buffer (first `cap`
 * bytes, doubled as needed), never holding more than max + 1 bytes: more
 * than max is LOOM_EFORMAT.  Closes fd if `own`. */
static int read_fd_all(int fd, int own, const char *path, size_t cap, size_t max, char **buf,
		       size_t *len, struct loom_err *err)
{
	size_t n = 0;
	char *p = malloc(cap);
	int rc = p ? 0 : loom_err_set(err, LOOM_ENOMEM, "'%s': out of memory", path);
	while (rc == 0) {
		if (n == cap - 1) {
			if (n > max)
				break;
			size_t ncap = cap * 2 < max + 2 ? cap * 2 : max + 2;
			char *q = realloc(p, ncap);
			if (!q) {
				rc = loom_err_set(err, LOOM_ENOMEM, "'%s': out of memory", path);
				break;
			}
			p = q;
			cap = ncap;
		}
		ssize_t r = read(fd, p + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rc = loom_err_errno(err, LOOM_EIO, errno, "cannot read '%s'", path);
		else if (r == 0)
			break;
		else
			n += (size_t)r;
	}
	if (own)
		close(fd);
	if (rc == 0 && n > max)
		rc = loom_err_set(err, LOOM_EFORMAT, "'%s' grew past %zu bytes while read", path,
				  max);
	if (rc < 0) {
		free(p);
		return rc;
	}
	p[n] = '\0';
	*buf = p;
	*len = n;
	return 0;
}

int loom_read_file(const char *path, char **buf, size_t *len, struct loom_err *err)
{
	int std = strcmp(path, "-") == 0, fd = std ? STDIN_FILENO : open(path, O_RDONLY);
	if (fd < 0)
		return loom_err_errno(err, LOOM_EIO, errno, "cannot open '%s'", path);
	return read_fd_all(fd, !std, path, 1 << 16, SIZE_MAX - 2, buf, len, err);
}

int loom_fd_blocks(int fd, const char *path, uint64_t limit,
		   void (*fn)(void *ctx, const void *block, size_t n), void *ctx,
		   uint64_t *bytes, struct loom_err *err)
{
	enum { BLOCK = 1 << 20 };
	char *buf = malloc(BLOCK);
	if (!buf)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	*bytes = 0;
	while (*bytes < limit) {
		ssize_t n = read(fd, buf, limit - *bytes < BLOCK ? (size_t)(limit - *bytes) : BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			free(buf);
			return loom_err_errno(err, LOOM_EIO, e, "cannot read '%s'", path);
		}
		if (n == 0)
			break;
		fn(ctx, buf, (size_t)n);
		*bytes += (uint64_t)n;
	}
	free(buf);
	return 0;
}

int loom_file_open_regular(const char *path, uint64_t max, uint64_t *size,
			   struct loom_err *err)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), e;
	if (fd < 0) {
		e = errno;
		loom_err_errno(err, LOOM_EIO, e, "cannot open '%s'", path);
		errno = e;
		return LOOM_EIO;
	}
	if (fstat(fd, &st) < 0) {
		e = errno;
		close(fd);
		loom_err_errno(err, LOOM_EIO, e, "cannot read '%s'", path);
		errno = e;
		return LOOM_EIO;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return loom_err_set(err, LOOM_EFORMAT, "'%s' is not a regular file", path);
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return loom_err_set(err, LOOM_EFORMAT,
				    "'%s' is %llu bytes, more than the %llu such a file may have",
				    path, (unsigned long long)st.st_size, (unsigned long long)max);
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	*size = (uint64_t)st.st_size;
	return fd;
}

int loom_file_read_bounded(const char *path, size_t max, char **buf, size_t *len,
			   struct loom_err *err)
{
	uint64_t size;
	int fd = loom_file_open_regular(path, max, &size, err);
	if (fd < 0)
		return fd;
	/* one byte more than the file had, to see it grew; at most max + 1 */
	return read_fd_all(fd, 1, path, (size_t)size + 2, max, buf, len, err);
}

int loom_file_read_input(const char *path, size_t max, char **buf, size_t *len,
			 struct loom_err *err)
{
	int std = strcmp(path, "-") == 0;
	/* blocking, as cat: a FIFO waits for its writer */
	int fd = std ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return loom_err_errno(err, LOOM_EIO, errno, "cannot open '%s'", path);
	struct stat st;
	if (!std && fstat(fd, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) {
		close(fd); /* /dev/zero, a disk: never a configuration */
		return loom_err_set(err, LOOM_EFORMAT, "'%s' is a device, not a file or a pipe", path);
	}
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		if ((uint64_t)st.st_size > max) {
			if (!std)
				close(fd);
			return loom_err_set(err, LOOM_EFORMAT,
					    "'%s' is %llu bytes, more than the %zu such a file may have",
					    path, (unsigned long long)st.st_size, max);
		}
		return read_fd_all(fd, !std, path, (size_t)st.st_size + 2, max, buf, len, err);
	}
	int rc = read_fd_all(fd, !std, path, 1 << 16, max, buf, len, err);
	if (rc == LOOM_EFORMAT) /* a pipe or device that gave more than max */
		loom_err_set(err, LOOM_EFORMAT, "'%s' holds more than the %zu bytes such a file may have",
			     path, max);
	return rc;
}

int loom_write_file_atomic(const char *path, const void *buf, size_t len,
			   struct loom_err *err)
{
	struct loom_outfile o;
	int rc = loom_outfile_open(&o, path);
	if (rc == 0)
		rc = loom_outfile_write(&o, buf, len);
	return loom_outfile_finish(&o, rc, err);
}

char *loom_path_join(const char *dir, const char *name)
{
	size_t dl = dir && *name != '/' ? strlen(dir) : 0, nl = strlen(name);
	char *raw = malloc(dl + nl + 2), *out = malloc(dl + nl + 3);
	if (!raw || !out) {
		free(raw);
		free(out);
		return NULL;
	}
	snprintf(raw, dl + nl + 2, "%.*s%s%s", (int)dl, dl ? dir : "", dl ? "/" : "", name);
	size_t o = 0;
	if (raw[0] == '/')
		out[o++] = '/';
	for (char *p = raw; *p;) {
		while (*p == '/')
			p++;
		size_t k = strcspn(p, "/");
		if (k && !(k == 1 && p[0] == '.')) {
			if (o && out[o - 1] != '/')
				out[o++] = '/';
			memcpy(out + o, p, k);
			o += k;
		}
		p += k;
	}
	if (!o)
		out[o++] = '.';
	out[o] = 0;
	free(raw);
	return out;
}

#ifndef LOOM_SHARE_DIR
#define LOOM_SHARE_DIR "/usr/local/share/loom"
#endif

static int share_try(const char *dir, const char *rel, char *out, size_t n)
{
	struct stat st;
	if (!dir || !*dir)
		return 0;
	if ((size_t)snprintf(out, n, "%s/%s", dir, rel) >= n)
		return 0;
	return stat(out, &st) == 0;
}

int loom_share_path(const char *rel, char *out, size_t n)
{
	char exe[4096], dir[4096 + 32];
	ssize_t len;
	if (share_try(getenv("LOOM_SHARE"), rel, out, n))
		return 0;
	len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (len > 0) {
		exe[len] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(dir, sizeof dir, "%s/../share/loom", exe);
			if (share_try(dir, rel, out, n))
				return 0;
			snprintf(dir, sizeof dir, "%s/../../share", exe);
			if (share_try(dir, rel, out, n))
				return 0;
		}
	}
	if (share_try(LOOM_SHARE_DIR, rel, out, n))
		return 0;
	return LOOM_EINVAL;
}
