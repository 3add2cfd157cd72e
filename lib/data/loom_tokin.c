/* loom_tokin.c - token streams in (u16 / u32 / text); see loom_tokin.h.
 * A file of its own so that a tool reading ids (loom-bpe decode) links
 * this and loom_reader, not the shard writer. */
#include "loom_tokin.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom_reader.h"

int loom_tokfmt_parse(const char *s, enum loom_tokfmt *fmt)
{
	if (!strcmp(s, "u16"))
		*fmt = LOOM_TOK_U16;
	else if (!strcmp(s, "u32"))
		*fmt = LOOM_TOK_U32;
	else if (!strcmp(s, "text"))
		*fmt = LOOM_TOK_TEXT;
	else
		return LOOM_EINVAL;
	return 0;
}

const char *loom_tokfmt_name(enum loom_tokfmt fmt)
{
	return fmt == LOOM_TOK_U16 ? "u16" : fmt == LOOM_TOK_U32 ? "u32" : "text";
}

#define TOKIN_BUF (1u << 20)

struct loom_tokin {
	struct loom_reader rd;
	int own;
	char *name;
	enum loom_tokfmt fmt;
	uint64_t size;
	uint64_t line;       /* text: current line (1-based) */
	struct loom_err err;
};

struct loom_tokin *loom_tokin_open(const char *path, enum loom_tokfmt fmt,
				   struct loom_err *err)
{
	struct loom_tokin *t = calloc(1, sizeof *t);
	if (!t || loom_reader_init(&t->rd, -1, TOKIN_BUF) ||
	    !(t->name = strdup(strcmp(path, "-") ? path : "(stdin)"))) {
		if (t)
			loom_reader_release(&t->rd);
		free(t);
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	t->fmt = fmt;
	t->line = 1;
	if (strcmp(path, "-") == 0) {
		t->rd.fd = STDIN_FILENO;
	} else {
		t->rd.fd = open(path, O_RDONLY | O_CLOEXEC);
		if (t->rd.fd < 0) {
			loom_err_errno(err, LOOM_EIO, errno, "cannot open '%s'", path);
			loom_tokin_free(t);
			return NULL;
		}
		t->own = 1;
	}
	struct stat st;
	if (fstat(t->rd.fd, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			loom_err_set(err, LOOM_EIO, "cannot read '%s': Is a directory", path);
			loom_tokin_free(t);
			return NULL;
		}
		if (S_ISREG(st.st_mode)) {
			t->size = (uint64_t)st.st_size;
#ifdef POSIX_FADV_SEQUENTIAL
			posix_fadvise(t->rd.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
		}
	}
	return t;
}

/* Refill: keep the unread bytes, read until 64 KiB (or, for a token cut
 * by the end of the buffer, at least one more byte) are unread. */
static int tokin_fill(struct loom_tokin *t)
{
	size_t want = t->rd.end - t->rd.start + 1;
	ssize_t got = loom_reader_fill_err(&t->rd, want > 65536 ? want : 65536, t->name, &t->err);
	return got < 0 ? (int)got : 0;
}

/* u16 little-endian -> u32 (a loop the compiler vectorizes). */
static void widen_u16(uint32_t *restrict out, const uint8_t *restrict p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint16_t v;
		memcpy(&v, p + 2 * i, 2);
		out[i] = v;
	}
}

static ssize_t tokin_binary(struct loom_tokin *t, uint32_t *out, size_t cap)
{
	size_t w = t->fmt == LOOM_TOK_U16 ? 2 : 4;
	if (t->rd.end - t->rd.start < w && !t->rd.eof) {
		int rc = tokin_fill(t);
		if (rc < 0)
			return rc;
	}
	size_t avail = (t->rd.end - t->rd.start) / w;
	if (avail == 0) {
		if (t->rd.end > t->rd.start)
			return loom_err_set(&t->err, LOOM_ETRUNC,
					    "%s: input ends inside a %s token (%zu stray byte%s at"
					    " byte %" PRIu64 ")", t->name,
					    loom_tokfmt_name(t->fmt), t->rd.end - t->rd.start,
					    t->rd.end - t->rd.start == 1 ? "" : "s",
					    t->rd.pos + t->rd.start);
		return 0;
	}
	if (avail > cap)
		avail = cap;
	const uint8_t *p = t->rd.buf + t->rd.start;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (w == 2)
		widen_u16(out, p, avail);
	else
		memcpy(out, p, avail * 4);
#else
	if (w == 2)
		for (size_t i = 0; i < avail; i++)
			out[i] = (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
	else
		for (size_t i = 0; i < avail; i++)
			out[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
				 (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
#endif
	t->rd.start += avail * w;
	return (ssize_t)avail;
}

static inline int is_space(uint8_t c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static ssize_t tokin_text(struct loom_tokin *t, uint32_t *out, size_t cap)
{
	size_t n = 0;
	while (n < cap) {
		/* Skip whitespace. */
		while (t->rd.start < t->rd.end && is_space(t->rd.buf[t->rd.start]))
			t->line += t->rd.buf[t->rd.start++] == '\n';
		if (t->rd.start == t->rd.end) {
			if (t->rd.eof || n)
				break;
			int rc = tokin_fill(t);
			if (rc < 0)
				return rc;
			continue;
		}
		/* A token must be complete in the buffer: refill if it may continue. */
		size_t e = t->rd.start;
		while (e < t->rd.end && !is_space(t->rd.buf[e]))
			e++;
		if (e == t->rd.end && !t->rd.eof) {
			if (t->rd.start == 0 && t->rd.end >= TOKIN_BUF)
				return loom_err_set(&t->err, LOOM_EFORMAT,
						    "%s: line %" PRIu64 ": token longer than 1 MiB",
						    t->name, t->line);
			if (n)
				break; /* return what we have; next call refills */
			int rc = tokin_fill(t);
			if (rc < 0)
				return rc;
			continue;
		}
		const uint8_t *p = t->rd.buf + t->rd.start;
		size_t len = e - t->rd.start;
		uint64_t v = 0;
		int digits = 1;
		for (size_t i = 0; i < len; i++) {
			if (p[i] < '0' || p[i] > '9') {
				digits = 0;
				break;
			}
			if (v <= UINT32_MAX)
				v = v * 10 + (p[i] - '0');
		}
		if (!digits || v > UINT32_MAX) {
			char shown[40];
			size_t sl = len < 32 ? len : 32;
			memcpy(shown, p, sl);
			shown[sl] = 0;
			for (size_t i = 0; i < sl; i++)
				if ((uint8_t)shown[i] < 0x20 || (uint8_t)shown[i] >= 0x7f)
					shown[i] = '?';
			return loom_err_set(&t->err, digits ? LOOM_ERANGE : LOOM_EFORMAT,
					    "%s: line %" PRIu64 ": token '%s%s' %s", t->name, t->line,
					    shown, len > sl ? "..." : "",
					    digits ? "is >= 2^32" : "is not a number");
		}
		out[n++] = (uint32_t)v;
		t->rd.start = e;
	}
	return (ssize_t)n;
}

ssize_t loom_tokin_read(struct loom_tokin *t, uint32_t *out, size_t cap)
{
	if (t->err.code)
		return t->err.code;
	if (!cap)
		return 0;
	return t->fmt == LOOM_TOK_TEXT ? tokin_text(t, out, cap) : tokin_binary(t, out, cap);
}

uint64_t loom_tokin_bytes(const struct loom_tokin *t)
{
	return t->rd.pos + t->rd.start;
}

uint64_t loom_tokin_size(const struct loom_tokin *t)
{
	return t->size;
}

void loom_tokin_free(struct loom_tokin *t)
{
	if (!t)
		return;
	if (t->own)
		close(t->rd.fd);
	free(t->name);
	loom_reader_release(&t->rd);
	free(t);
}

const char *loom_tokin_error(const struct loom_tokin *t)
{
	return t->err.msg;
}
