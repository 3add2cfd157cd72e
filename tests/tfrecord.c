/* Unit tests for loom_tfrecord: framing, writer (sync/async, sha256,
 * index), streaming reader (files and pipes) with every corruption the
 * format can suffer, index parse/format, random access through the index. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loom_crc32c.h"
#include "loom_file.h"
#include "loom_hash.h"
#include "loom_tfrecord.h"
#include "tap.h"

static void spit(const char *path, const void *b, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		if (write(fd, b, n) != (ssize_t)n)
			diag("short write");
		close(fd);
	}
}

/* Read a whole file with the streaming reader; returns the first error
 * (or LOOM_EOF) and the number of good records, message in msg. */
static int read_all(const char *path, int flags, uint64_t *nrec, char *msg)
{
	struct loom_err e;
	struct loom_tfr_reader *r = loom_tfr_reader_open(path, flags, &e);
	struct loom_tfr_record rec;
	int rc;
	*nrec = 0;
	if (!r) {
		snprintf(msg, LOOM_ERR_MAX, "%s", e.msg);
		return e.code;
	}
	while ((rc = loom_tfr_reader_next(r, &rec)) == 0)
		(*nrec)++;
	snprintf(msg, LOOM_ERR_MAX, "%s", loom_tfr_reader_error(r));
	loom_tfr_reader_free(r);
	return rc;
}

/* three.tfrecord's payloads, and its bytes once written */
static uint8_t pay[3][40];
static const size_t plen[3] = { 34, 40, 35 };
static uint8_t *fb;
static size_t flen;

static int count_dir(void)
{
	return tap_count_dir(tap_tmpdir(), "");
}

/* loom_tfr_scan's check: counts payloads, refuses record `refuse` */
struct scan_ctx {
	int checked, refuse, progress_calls;
	uint64_t last_records, last_bytes;
};

static int scan_check(void *ctx, const uint8_t *payload, size_t len, struct loom_err *e)
{
	struct scan_ctx *c = ctx;
	(void)payload;
	(void)len;
	if (c->checked++ == c->refuse)
		return loom_err_set(e, LOOM_EFORMAT, "not an Example");
	return 0;
}

static void scan_progress(void *ctx, uint64_t records, uint64_t bytes)
{
	struct scan_ctx *c = ctx;
	c->progress_calls++;
	c->last_records = records;
	c->last_bytes = bytes;
}

/* three records of 34, 40, 35 bytes: the index vector, the framing */
static void three_records(void)
{
	struct loom_err e;
	for (int r = 0; r < 3; r++)
		for (int i = 0; i < 40; i++)
			pay[r][i] = (uint8_t)(r * 40 + i);
	const char *f3 = tap_path("three.tfrecord");
	struct loom_tfr_writer *w = loom_tfr_writer_new(f3, 0, LOOM_TFW_SHA256, &e);
	ok(w != NULL, "writer opens");
	for (int r = 0; r < 3; r++)
		is_int(loom_tfr_writer_write(w, pay[r], plen[r]), 0, "write record %d", r);
	ok(access(f3, F_OK) != 0, "nothing under the final name before commit");
	is_int(loom_tfr_writer_commit(w), 0, "commit");
	is_int(loom_tfr_writer_records(w), 3, "3 records");
	is_int(loom_tfr_writer_bytes(w), 157, "157 bytes");
	char hex[LOOM_HASH_HEX_MAX];
	loom_hash_file_hex("sha256", f3, hex, &e);
	is_str(loom_tfr_writer_sha256(w), hex, "sha256 computed while writing == file sha256");
	is_int(loom_tfr_writer_write_index(w, tap_path("three.tfrecord.index")), 0,
	       "write index");
	loom_tfr_writer_free(w);
	size_t ilen;
	char *itext = (char *)tap_slurp(&ilen, "%s", tap_path("three.tfrecord.index"));
	is_str(itext, "0 50\n50 56\n106 51\n", "index is exactly tfrecord2idx's");
	free(itext);

	/* Framing by hand: u64 LE length, masked CRC of it, payload, masked CRC. */
	fb = (uint8_t *)tap_slurp(&flen, "%s", f3);
	is_int(flen, 157, "file size");
	ok(fb[0] == 34 && fb[1] == 0 && fb[7] == 0, "length is u64 little-endian");
	uint32_t lc = (uint32_t)fb[8] | (uint32_t)fb[9] << 8 | (uint32_t)fb[10] << 16 |
		      (uint32_t)fb[11] << 24;
	is_int(lc, loom_crc32c_mask(loom_crc32c(0, fb, 8)), "length CRC is masked crc32c");
	uint32_t pc = (uint32_t)fb[46] | (uint32_t)fb[47] << 8 | (uint32_t)fb[48] << 16 |
		      (uint32_t)fb[49] << 24;
	is_int(pc, loom_crc32c_masked(pay[0], 34), "payload CRC is masked crc32c");
	ok(memcmp(fb + 12, pay[0], 34) == 0, "payload in place");
	uint8_t framed[34 + 16];
	loom_tfr_frame(framed, pay[0], 34);
	ok(memcmp(framed, fb, 50) == 0, "loom_tfr_frame == writer's framing");
}

/* the streaming reader: a file, skipped payloads, a pipe */
static void streaming_reader(void)
{
	const char *f3 = tap_path("three.tfrecord");
	struct loom_err e;
	struct loom_tfr_reader *rd = loom_tfr_reader_open(f3, 0, &e);
	struct loom_tfr_record rec;
	int good = 1;
	for (int r = 0; r < 3; r++) {
		good &= loom_tfr_reader_next(rd, &rec) == 0 && rec.len == plen[r] &&
			memcmp(rec.data, pay[r], plen[r]) == 0 && rec.index == (uint64_t)r;
	}
	ok(good, "reader returns the 3 payloads");
	is_int(rec.offset, 106, "offset of record 2");
	is_int(loom_tfr_reader_next(rd, &rec), LOOM_EOF, "then LOOM_EOF");
	is_int(loom_tfr_reader_offset(rd), 157, "reader consumed 157 bytes");
	loom_tfr_reader_free(rd);

	rd = loom_tfr_reader_open(f3, LOOM_TFR_SKIP_PAYLOAD, &e);
	uint64_t offs[3];
	for (int r = 0; r < 3; r++)
		if (loom_tfr_reader_next(rd, &rec) == 0)
			offs[r] = rec.offset;
	ok(offs[0] == 0 && offs[1] == 50 && offs[2] == 106 && rec.data == NULL,
	   "skip-payload mode yields offsets only");
	loom_tfr_reader_free(rd);

	/* Through a pipe. */
	int pfd[2];
	if (pipe(pfd) == 0) {
		pid_t pid = fork();
		if (pid == 0) {
			close(pfd[0]);
			(void)!write(pfd[1], fb, 157 - 5); /* truncated final record */
			_exit(0);
		}
		close(pfd[1]);
		rd = loom_tfr_reader_fdopen(pfd[0], "(pipe)", 0, &e);
		int rc1 = loom_tfr_reader_next(rd, &rec);
		int rc2 = loom_tfr_reader_next(rd, &rec);
		int rc3 = loom_tfr_reader_next(rd, &rec);
		ok(rc1 == 0 && rc2 == 0, "pipe: two good records");
		is_int(rc3, LOOM_ETRUNC, "pipe: truncated last record");
		is_str(loom_tfr_reader_error(rd),
		       "(pipe): record 2 at byte 106: truncated record (payload of 35 bytes, "
		       "46 of 51 bytes present)", "pipe: message");
		loom_tfr_reader_free(rd);
		close(pfd[0]);
		waitpid(pid, NULL, 0);
	}
}

/* every corruption the streaming reader must name */
static void corruptions(void)
{
	char msg[LOOM_ERR_MAX];
	uint64_t n;
	uint8_t *bad = malloc(flen);
	const char *fb_path = tap_path("bad.tfrecord");

	memcpy(bad, fb, flen);
	bad[50 + 12 + 7] ^= 0x10; /* payload of record 1 */
	spit(fb_path, bad, flen);
	is_int(read_all(fb_path, 0, &n, msg), LOOM_ECHECKSUM, "flipped payload byte: checksum error");
	ok(strstr(msg, "bad.tfrecord: record 1 at byte 50: payload CRC mismatch") != NULL,
	   "  message names file, record, offset: %s", msg);
	is_int(n, 1, "  one good record before it");
	is_int(read_all(fb_path, LOOM_TFR_NO_PAYLOAD_CRC, &n, msg), LOOM_EOF,
	       "  not detected when payload CRCs are off");

	memcpy(bad, fb, flen);
	bad[106 + 1] ^= 0x01; /* length of record 2 */
	spit(fb_path, bad, flen);
	is_int(read_all(fb_path, 0, &n, msg), LOOM_ECHECKSUM, "flipped length byte");
	ok(strstr(msg, "record 2 at byte 106: length CRC mismatch") != NULL, "  %s", msg);
	is_int(read_all(fb_path, LOOM_TFR_SKIP_PAYLOAD, &n, msg), LOOM_ECHECKSUM,
	       "  also caught when skipping payloads");

	memcpy(bad, fb, flen);
	bad[157 - 2] ^= 0x80; /* payload CRC of the last record */
	spit(fb_path, bad, flen);
	is_int(read_all(fb_path, 0, &n, msg), LOOM_ECHECKSUM, "flipped CRC byte");

	spit(fb_path, fb, 157 - 5);
	is_int(read_all(fb_path, 0, &n, msg), LOOM_ETRUNC, "truncated final record");
	ok(strstr(msg, "record 2 at byte 106: truncated record") != NULL, "  %s", msg);
	spit(fb_path, fb, 106 + 7);
	is_int(read_all(fb_path, 0, &n, msg), LOOM_ETRUNC, "truncated inside a header");
	ok(strstr(msg, "record 2 at byte 106: truncated record header (7 of 12 bytes)") != NULL,
	   "  %s", msg);

	/* A valid length CRC over a length larger than the file. */
	memcpy(bad, fb, flen);
	uint8_t hdr[12];
	memset(hdr, 0, 12);
	hdr[0] = 0x00;
	hdr[2] = 0x10; /* 1 MiB */
	uint32_t m = loom_crc32c_masked(hdr, 8);
	memcpy(hdr + 8, &m, 4);
	memcpy(bad + 50, hdr, 12);
	spit(fb_path, bad, flen);
	is_int(read_all(fb_path, 0, &n, msg), LOOM_ETRUNC, "length larger than the file");
	ok(strstr(msg, "record 1 at byte 50: truncated record: length field says 1048576") != NULL,
	   "  %s", msg);
	/* Huge length (2^62) must not allocate. */
	hdr[2] = 0;
	hdr[7] = 0x40;
	m = loom_crc32c_masked(hdr, 8);
	memcpy(hdr + 8, &m, 4);
	memcpy(bad + 50, hdr, 12);
	spit(fb_path, bad, flen);
	is_int(read_all(fb_path, 0, &n, msg), LOOM_ETRUNC, "length 2^62 rejected");

	spit(fb_path, "", 0);
	is_int(read_all(fb_path, 0, &n, msg), LOOM_EOF, "empty file: no records, clean EOF");
	is_int(read_all(tap_path("missing"), 0, &n, msg), LOOM_EIO, "missing file");
	ok(strstr(msg, "cannot open") != NULL, "  %s", msg);
	free(bad);
}

/* index parse / format */
static void index_parse_format(void)
{
	struct loom_err e;
	uint64_t *off, cnt;
	is_int(loom_tfr_index_parse("0 50\n50 56\n106 51\n", 18, "x", &off, &cnt, &e), 0,
	       "parse index");
	ok(cnt == 3 && off[0] == 0 && off[1] == 50 && off[2] == 106 && off[3] == 157,
	   "  offsets 0 50 106 157");
	char *txt;
	size_t tl;
	loom_tfr_index_format(off, cnt, &txt, &tl, &e);
	is_str(txt, "0 50\n50 56\n106 51\n", "format(parse(x)) == x");
	free(txt);
	free(off);
	is_int(loom_tfr_index_parse("0 50\n50 56", 10, "x", &off, &cnt, &e), 0,
	       "missing final newline accepted");
	free(off);
	is_int(loom_tfr_index_parse("", 0, "x", &off, &cnt, &e), 0, "empty index");
	is_int(cnt, 0, "  0 records");
	free(off);
	is_int(loom_tfr_index_parse("0 50\n51 56\n", 11, "x.index", &off, &cnt, &e), LOOM_EFORMAT,
	       "gap between records");
	is_str(e.msg, "x.index: line 2: offset 51 but the previous record ends at 50", "  message");
	is_int(loom_tfr_index_parse("0 5\n", 4, "x", &off, &cnt, &e), LOOM_EFORMAT,
	       "size below 16");
	is_int(loom_tfr_index_parse("0 50 \n", 6, "x", &off, &cnt, &e), LOOM_EFORMAT, "junk");
	is_int(loom_tfr_index_parse("0x0 50\n", 7, "x", &off, &cnt, &e), LOOM_EFORMAT, "hex");
	is_int(loom_tfr_index_parse("0 99999999999999999999\n", 23, "x", &off, &cnt, &e),
	       LOOM_EFORMAT, "overflow");
}

/* one pass: index and payload sizes (loom-index's loom_tfr_scan) */
static void scan(void)
{
	const char *f3 = tap_path("three.tfrecord"), *fb_path = tap_path("bad.tfrecord");
	uint8_t *bad = malloc(flen);
	struct loom_err e;
	char *txt;
	size_t tl;
	struct loom_tfr_writer *w;
	struct loom_tfr_scan sc;
	struct scan_ctx sx = { .refuse = -1 };
	is_int(loom_tfr_scan(f3, NULL, NULL, NULL, &sc, &e), 0, "scan");
	ok(sc.records == 3 && sc.bytes == 157 && sc.offsets[0] == 0 && sc.offsets[1] == 50 &&
	   sc.offsets[2] == 106 && sc.offsets[3] == 157, "  3 records, 157 bytes, offsets 0 50 106 157");
	ok(sc.pmin == 34 && sc.pmax == 40 && sc.psum == 109, "  payloads: min 34, max 40, sum 109");
	loom_tfr_index_format(sc.offsets, sc.records, &txt, &tl, &e);
	is_str(txt, "0 50\n50 56\n106 51\n", "  its index is the writer's");
	free(txt);
	free(sc.offsets);
	is_int(loom_tfr_scan(f3, scan_check, NULL, &sx, &sc, &e), 0, "scan with a check");
	is_int(sx.checked, 3, "  called on every payload");
	free(sc.offsets);
	sx = (struct scan_ctx){ .refuse = 1 };
	is_int(loom_tfr_scan(f3, scan_check, NULL, &sx, &sc, &e), LOOM_EFORMAT,
	       "a payload the check refuses stops the scan");
	ok(strstr(e.msg, "three.tfrecord: record 1 at byte 50: not an Example") != NULL, "  %s", e.msg);
	ok(sc.offsets == NULL, "  nothing to free");
	memcpy(bad, fb, flen);
	bad[50 + 12 + 7] ^= 0x10; /* payload of record 1 */
	spit(fb_path, bad, flen);
	is_int(loom_tfr_scan(fb_path, NULL, NULL, NULL, &sc, &e), 0,
	       "without a check payloads are skipped (their CRCs too)");
	free(sc.offsets);
	sx = (struct scan_ctx){ .refuse = -1 };
	is_int(loom_tfr_scan(fb_path, scan_check, NULL, &sx, &sc, &e), LOOM_ECHECKSUM,
	       "with a check, a payload CRC mismatch");
	ok(strstr(e.msg, "bad.tfrecord: record 1 at byte 50: payload CRC mismatch") != NULL,
	   "  %s", e.msg);
	spit(fb_path, "", 0);
	is_int(loom_tfr_scan(fb_path, NULL, NULL, NULL, &sc, &e), 0, "empty file");
	ok(sc.records == 0 && sc.bytes == 0 && sc.offsets[0] == 0 && sc.pmin == UINT64_MAX &&
	   sc.pmax == 0, "  no records, pmin UINT64_MAX");
	free(sc.offsets);
	is_int(loom_tfr_scan(tap_path("missing"), NULL, NULL, NULL, &sc, &e), LOOM_EIO, "missing file");
	ok(strstr(e.msg, "cannot open") != NULL, "  %s", e.msg);
	w = loom_tfr_writer_new(fb_path, 0, 0, &e);
	for (int i = 0; i < 2500; i++)
		loom_tfr_writer_write(w, pay[0], (size_t)(i % 3));
	loom_tfr_writer_commit(w);
	loom_tfr_writer_free(w);
	sx = (struct scan_ctx){ .refuse = -1 };
	is_int(loom_tfr_scan(fb_path, NULL, scan_progress, &sx, &sc, &e), 0, "2500 records");
	ok(sx.progress_calls == 2 && sx.last_records == 2048 && sx.last_bytes == sc.offsets[2048],
	   "  progress every 1024 records (%d calls, last at %llu records, byte %llu)",
	   sx.progress_calls, (unsigned long long)sx.last_records,
	   (unsigned long long)sx.last_bytes);
	ok(sc.records == 2500 && sc.pmin == 0 && sc.pmax == 2 && sc.psum == 2499 &&
	   sc.offsets[2500] == sc.bytes, "  sizes and offsets of 2500 records");
	free(sc.offsets);

	free(bad);
}

/* random access through the index, and indexes that disagree with their file */
static void random_access(void)
{
	const char *f3 = tap_path("three.tfrecord"), *fb_path = tap_path("bad.tfrecord");
	uint8_t *bad = malloc(flen);
	struct loom_err e;
	struct loom_tfr_file *tf = loom_tfr_file_open(f3, NULL, &e);
	ok(tf != NULL, "open shard + index%s%s", tf ? "" : ": ", tf ? "" : e.msg);
	is_int(loom_tfr_file_count(tf), 3, "  3 records");
	is_int(loom_tfr_file_payload_len(tf, 1), 40, "  payload 1 is 40 bytes");
	is_int(loom_tfr_file_max_payload(tf), 40, "  max payload 40");
	is_int(loom_tfr_file_offset(tf, 2), 106, "  offset 2");
	uint8_t rb[64];
	size_t got;
	int good = 1;
	for (int r = 2; r >= 0; r--)
		good &= loom_tfr_file_read(tf, (uint64_t)r, rb, sizeof rb, &got, NULL) == 0 &&
			got == plen[r] && memcmp(rb, pay[r], got) == 0;
	ok(good, "  reads every record (backwards)");
	is_int(loom_tfr_file_read(tf, 1, rb, 39, &got, NULL), LOOM_ERANGE, "  small buffer");
	is_int(loom_tfr_file_read(tf, 3, rb, 64, &got, NULL), LOOM_EINVAL, "  out of range");
	loom_tfr_file_free(tf);

	/* Corrupt payload, read through the index. */
	memcpy(bad, fb, flen);
	bad[106 + 20] ^= 1;
	spit(fb_path, bad, flen);
	spit(tap_path("bad.tfrecord.index"), "0 50\n50 56\n106 51\n", 18);
	tf = loom_tfr_file_open(fb_path, NULL, &e);
	is_int(loom_tfr_file_read(tf, 2, rb, 64, &got, &e), LOOM_ECHECKSUM,
	       "random access: payload CRC checked");
	ok(strstr(e.msg, "bad.tfrecord: record 2 at byte 106: payload CRC mismatch") != NULL,
	   "  %s", e.msg);
	is_int(loom_tfr_file_read(tf, 0, rb, 64, &got, NULL), 0, "  record 0 still fine");
	loom_tfr_file_free(tf);

	/* Index disagreeing with its file. */
	spit(fb_path, fb, flen);
	spit(tap_path("bad.tfrecord.index"), "0 50\n50 56\n", 11);
	tf = loom_tfr_file_open(fb_path, NULL, &e);
	ok(tf == NULL, "index covering too little is rejected on open");
	ok(strstr(e.msg, "index disagrees with its file: it covers 106 bytes in 2 records, the "
			 "file has 157 bytes") != NULL, "  %s", e.msg);
	spit(tap_path("bad.tfrecord.index"), "0 56\n56 50\n106 51\n", 18);
	tf = loom_tfr_file_open(fb_path, NULL, &e);
	ok(tf != NULL, "index with the right total opens");
	is_int(loom_tfr_file_read(tf, 0, rb, 64, &got, &e), LOOM_EFORMAT,
	       "  but a record boundary disagrees");
	ok(strstr(e.msg, "record 0 at byte 0: index disagrees with its file: index says a payload "
			 "of 40 bytes, the record header says 34") != NULL, "  %s", e.msg);
	loom_tfr_file_free(tf);
	tf = loom_tfr_file_open(fb_path, tap_path("nonexistent.index"), &e);
	ok(tf == NULL && strstr(e.msg, "cannot open") != NULL, "missing index: %s", e.msg);
	free(bad);
}

/* writer: async + tiny buffer + record larger than the buffer; abandoned and unwritable writers */
static void writers(void)
{
	struct loom_err e;
	struct loom_tfr_file *tf;
	struct loom_tfr_writer *w;
	char hex[LOOM_HASH_HEX_MAX];
	size_t got, nrec = 2000;
	uint8_t *big = malloc(20000);
	for (int i = 0; i < 20000; i++)
		big[i] = (uint8_t)(i * 7 + 3);
	char *fa = strdup(tap_path("async.tfrecord")), *fs = strdup(tap_path("sync.tfrecord"));
	struct loom_tfr_writer *wa = loom_tfr_writer_new(fa, 4096, LOOM_TFW_ASYNC | LOOM_TFW_SHA256,
							 &e);
	struct loom_tfr_writer *ws = loom_tfr_writer_new(fs, 1 << 20, 0, &e);
	int wrc = 0;
	for (size_t i = 0; i < nrec; i++) {
		size_t l = i == 777 ? 20000 : (i * 37) % 1000;
		wrc |= loom_tfr_writer_write(ws, big, l);
		uint8_t *dst = loom_tfr_writer_reserve(wa, l + 5);
		if (!dst) {
			wrc = -1;
			break;
		}
		memcpy(dst, big, l);
		wrc |= loom_tfr_writer_finish(wa, l);
	}
	is_int(wrc, 0, "async and sync writers accept %zu records", nrec);
	is_int(loom_tfr_writer_commit(wa), 0, "async commit");
	is_int(loom_tfr_writer_commit(ws), 0, "sync commit");
	size_t la, ls;
	uint8_t *ba = (uint8_t *)tap_slurp(&la, "%s", fa), *bs = (uint8_t *)tap_slurp(&ls, "%s", fs);
	ok(ba && bs && la == ls && memcmp(ba, bs, la) == 0, "async == sync output (%zu bytes)", la);
	loom_hash_file_hex("sha256", fa, hex, &e);
	is_str(loom_tfr_writer_sha256(wa), hex, "async sha256 == file sha256");
	is_int(loom_tfr_writer_bytes(wa), la, "bytes() == file size");
	is_int(loom_tfr_writer_write_index(wa, tap_path("async.tfrecord.index")), 0, "async index");
	tf = loom_tfr_file_open(fa, NULL, &e);
	ok(tf && loom_tfr_file_count(tf) == nrec && loom_tfr_file_payload_len(tf, 777) == 20000,
	   "index of the async file opens, 20000-byte record 777");
	uint8_t *rbig = malloc(20000);
	ok(tf && loom_tfr_file_read(tf, 777, rbig, 20000, &got, NULL) == 0 &&
	   memcmp(rbig, big, 20000) == 0, "  and reads it back");
	loom_tfr_file_free(tf);
	loom_tfr_writer_free(wa);
	loom_tfr_writer_free(ws);
	free(ba);
	free(bs);
	free(rbig);

	/* Abandoned writer: no final file, no temporary left. */
	int before = count_dir();
	w = loom_tfr_writer_new(tap_path("abandoned.tfrecord"), 0, LOOM_TFW_ASYNC, &e);
	for (int i = 0; i < 3000; i++)
		loom_tfr_writer_write(w, big, 5000);
	loom_tfr_writer_free(w);
	ok(access(tap_path("abandoned.tfrecord"), F_OK) != 0, "abandoned writer: no output");
	is_int(count_dir(), before, "  no temporary left");

	FILE *pf = fopen(tap_path("plain"), "w");
	fclose(pf);
	w = loom_tfr_writer_new(tap_path("plain/x.tfrecord"), 0, 0, &e);
	ok(w == NULL && strstr(e.msg, "Not a directory"), "unwritable path: %s", e.msg);
	unlink(tap_path("plain"));
	free(big);
	free(fa);
	free(fs);
}

int main(void)
{
	tap_tmpdir();
	three_records();
	streaming_reader();
	corruptions();
	index_parse_format();
	scan();
	random_access();
	writers();
	free(fb);
	return done_testing();
}
