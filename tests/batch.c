/* Unit tests for loom_batch: frame round trips and every corruption the
 * reader must name (frame number and byte offset). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "loom_batch.h"
#include "loom_crc32c.h"
#include "loom_file.h"
#include "tap.h"

#define B 3
#define TP1 5
#define NFR 4

static unsigned char stream[8192];
static size_t stream_len;
static size_t frame_bytes;

static void fill(uint32_t *t, int f, uint32_t maxv)
{
	for (int i = 0; i < B * TP1; i++)
		t[i] = (uint32_t)(f * 1000 + i * 7) % maxv;
}

/* Build a stream of NFR frames + END with dtype into stream[]. */
static void build(unsigned dtype, uint64_t first_seq)
{
	struct loom_batch_hdr h = {.dtype = (uint16_t)dtype, .batch = B, .seq_len = TP1,
				   .world = 1, .seed = 42};
	uint32_t t[B * TP1];
	stream_len = 0;
	for (int f = 0; f < NFR; f++) {
		fill(t, f, dtype == LOOM_BATCH_U16 ? 65536 : 0xffffffffu);
		h.seq = first_seq + (uint64_t)f;
		h.epoch = (uint32_t)f / 2;
		long n = loom_batch_encode(&h, t, stream + stream_len);
		frame_bytes = (size_t)n;
		stream_len += (size_t)n;
	}
	h.flags = LOOM_BATCH_F_END;
	h.seq = first_seq + NFR;
	stream_len += (size_t)loom_batch_encode(&h, NULL, stream + stream_len);
}

/* Read the whole stream; return the final rc and leave the message. */
static int read_all(const void *buf, size_t len, char *msg, int *frames)
{
	struct loom_batch_reader *r = loom_batch_reader_new_mem(buf, len, "s");
	struct loom_batch_hdr h;
	const uint32_t *t;
	int rc;
	*frames = 0;
	while ((rc = loom_batch_read(r, &h, &t)) == 1)
		(*frames)++;
	snprintf(msg, LOOM_ERR_MAX, "%s", rc < 0 ? loom_batch_reader_error(r) : "");
	loom_batch_reader_free(r);
	return rc;
}

/* Re-seal a header after editing it so only the intended check fires. */
static void reseal(unsigned char *p)
{
	uint32_t c = loom_crc32c(0, p, 60);
	for (int i = 0; i < 4; i++)
		p[60 + i] = (unsigned char)(c >> (8 * i));
}

static void corrupt_case(const char *name, void (*edit)(unsigned char *s, size_t *len),
			 int want_rc, const char *want_msg)
{
	static unsigned char copy[sizeof stream];
	char msg[LOOM_ERR_MAX];
	int frames;
	size_t len = stream_len;
	memcpy(copy, stream, stream_len);
	edit(copy, &len);
	int rc = read_all(copy, len, msg, &frames);
	is_int(rc, want_rc, "%s: error code", name);
	ok(strstr(msg, want_msg) != NULL, "%s: message '%s' has '%s'", name, msg, want_msg);
}

static void e_magic(unsigned char *s, size_t *len)
{
	(void)len;
	s[2 * frame_bytes] = 'X';
}
static void e_version(unsigned char *s, size_t *len)
{
	(void)len;
	s[frame_bytes + 4] = 9;
	reseal(s + frame_bytes);
}
static void e_v2_plain(unsigned char *s, size_t *len)
{
	(void)len;
	s[4] = 2; /* version 2 without FEATURES: no frame loom writes */
	reseal(s);
}
static void e_hdrcrc(unsigned char *s, size_t *len)
{
	(void)len;
	s[frame_bytes + 24] ^= 1;	/* seq changed, not resealed */
}
static void e_payload(unsigned char *s, size_t *len)
{
	(void)len;
	s[3 * frame_bytes + 64 + 5] ^= 0x10;
}
static void e_shape(unsigned char *s, size_t *len)
{
	(void)len;	/* frame 2 claims batch 1: payload size mismatch */
	s[2 * frame_bytes + 12] = 1;
	reseal(s + 2 * frame_bytes);
}
static void e_trunc_mid(unsigned char *s, size_t *len)
{
	(void)s;
	*len = 2 * frame_bytes + 70;
}
static void e_trunc_hdr(unsigned char *s, size_t *len)
{
	(void)s;
	*len = frame_bytes + 10;
}
static void e_no_end(unsigned char *s, size_t *len)
{
	(void)s;
	*len = NFR * frame_bytes;
}
static void e_gap(unsigned char *s, size_t *len)
{
	(void)len;
	s[2 * frame_bytes + 24] = 9;
	reseal(s + 2 * frame_bytes);
}
static void e_trailing(unsigned char *s, size_t *len)
{
	s[*len] = 'x';
	(*len)++;
}
static void e_end_count(unsigned char *s, size_t *len)
{
	s[*len - 64 + 24] = 77;
	reseal(s + *len - 64);
}
static void e_dtype(unsigned char *s, size_t *len)
{
	(void)len;
	s[8] = 3;
	reseal(s);
}

/* Frame sizes of both dtypes. */
static void case_frame_size(void)
{
	is_int(loom_batch_frame_size(LOOM_BATCH_U16, B, TP1), 64 + 2 * B * TP1, "frame size u16");
	is_int(loom_batch_frame_size(LOOM_BATCH_U32, B, TP1), 64 + 4 * B * TP1, "frame size u32");
}

/* Both dtypes: NFR frames and END round-trip through a memory reader. */
static void case_round_trip(void)
{
	uint32_t want[B * TP1];
	struct loom_batch_hdr h;
	const uint32_t *got;
	for (unsigned dt = LOOM_BATCH_U16; dt <= LOOM_BATCH_U32; dt++) {
		build(dt, 10);
		is_int(stream_len, NFR * loom_batch_frame_size(dt, B, TP1) + 64,
		       "dtype %u: stream length", dt);
		ok(memcmp(stream, "LMBF", 4) == 0, "dtype %u: magic first", dt);
		struct loom_batch_reader *r = loom_batch_reader_new_mem(stream, stream_len, "mem");
		int good = 1;
		for (int f = 0; f < NFR; f++) {
			int rc = loom_batch_read(r, &h, &got);
			fill(want, f, dt == LOOM_BATCH_U16 ? 65536 : 0xffffffffu);
			good &= rc == 1 && h.seq == 10u + (unsigned)f && h.epoch == (unsigned)f / 2 &&
				h.batch == B && h.seq_len == TP1 && h.seed == 42 &&
				memcmp(got, want, sizeof want) == 0;
		}
		ok(good, "dtype %u: %d frames round-trip (tokens, seq, epoch, seed)", dt, NFR);
		is_int(loom_batch_read(r, &h, &got), 0, "dtype %u: END frame is a clean end", dt);
		ok(h.flags & LOOM_BATCH_F_END, "dtype %u: END flag", dt);
		is_int(h.seq, 10 + NFR, "dtype %u: END seq is the next sequence number", dt);
		is_int(loom_batch_read(r, &h, &got), 0, "dtype %u: reads after END stay 0", dt);
		is_int(loom_batch_reader_frames(r), NFR, "dtype %u: frame count", dt);
		is_int(loom_batch_reader_offset(r), stream_len, "dtype %u: offset at end", dt);
		loom_batch_reader_free(r);
	}
}

/* u16 refuses tokens >= 65536; rank >= world is refused. */
static void case_encode_refusals(void)
{
	uint32_t t[B * TP1];
	struct loom_batch_hdr h;
	h = (struct loom_batch_hdr){.dtype = LOOM_BATCH_U16, .batch = B, .seq_len = TP1, .world = 1};
	fill(t, 0, 1000);
	t[3] = 70000;
	is_int(loom_batch_encode(&h, t, stream), LOOM_ERANGE, "u16 frame refuses token 70000");
	h.rank = 1;
	is_int(loom_batch_encode(&h, t, stream), LOOM_EINVAL, "rank >= world refused");
}

/* Corruptions, each named with its frame number and byte offset. */
static void case_corruptions(void)
{
	char msg[LOOM_ERR_MAX];
	int frames;
	build(LOOM_BATCH_U16, 0);
	char where[64];
	snprintf(where, sizeof where, "frame 2 at byte %zu: bad magic", 2 * frame_bytes);
	corrupt_case("bad magic", e_magic, LOOM_EFORMAT, where);
	snprintf(where, sizeof where, "frame 1 at byte %zu: unsupported frame version 9",
		 frame_bytes);
	corrupt_case("version", e_version, LOOM_EFORMAT, where);
	corrupt_case("version 2 without features", e_v2_plain, LOOM_EFORMAT,
		     "frame 0 at byte 0: a version-2 frame without features (flag FEATURES): "
		     "token frames are version 1");
	corrupt_case("header crc", e_hdrcrc, LOOM_ECHECKSUM, "frame 1 at byte");
	corrupt_case("header crc msg", e_hdrcrc, LOOM_ECHECKSUM, "header checksum mismatch");
	snprintf(where, sizeof where, "frame 3 at byte %zu: payload checksum", 3 * frame_bytes);
	corrupt_case("payload crc", e_payload, LOOM_ECHECKSUM, where);
	corrupt_case("shape", e_shape, LOOM_EFORMAT, "frame 2 at byte");
	corrupt_case("shape msg", e_shape, LOOM_EFORMAT, "does not match shape 1x5");
	corrupt_case("truncated payload", e_trunc_mid, LOOM_ETRUNC,
		     "frame 2 at byte");
	corrupt_case("truncated payload msg", e_trunc_mid, LOOM_ETRUNC,
		     "stream ends inside the payload (6 of 30 bytes)");
	corrupt_case("truncated header", e_trunc_hdr, LOOM_ETRUNC,
		     "frame 1 at byte 94: stream ends inside the frame header (10 of 64");
	corrupt_case("no END frame", e_no_end, LOOM_ETRUNC,
		     "stream ended after frame 4 (byte 376) without an end-of-stream frame");
	corrupt_case("sequence gap", e_gap, LOOM_EFORMAT,
		     "frame 2 at byte 188: sequence number 9, expected 2");
	corrupt_case("data after END", e_trailing, LOOM_EFORMAT,
		     "data after the end-of-stream frame");
	corrupt_case("END count", e_end_count, LOOM_EFORMAT,
		     "end-of-stream frame says the next sequence number is 77");
	corrupt_case("dtype", e_dtype, LOOM_EFORMAT, "frame 0 at byte 0: unknown dtype 3");
	is_int(read_all(stream, 0, msg, &frames), LOOM_ETRUNC, "empty stream is an error");
	ok(strstr(msg, "after frame 0 (byte 0)") != NULL, "empty stream message: %s", msg);
}

/* Expected shape. */
static void case_expected_shape(void)
{
	struct loom_batch_hdr h;
	const uint32_t *got;
	struct loom_batch_reader *r = loom_batch_reader_new_mem(stream, stream_len, "stdin");
	loom_batch_reader_expect(r, 8, TP1);
	is_int(loom_batch_read(r, &h, &got), LOOM_EFORMAT, "unexpected shape refused");
	is_str(loom_batch_reader_error(r), "stdin: frame 0 at byte 0: shape 3x5, expected 8x5",
	       "shape message");
	loom_batch_reader_free(r);
}

/* Frames written to a pipe, read by a reader over the fd. */
static void case_pipe(void)
{
	uint32_t t[B * TP1];
	unsigned char buf[3 * LOOM_BATCH_HEADER_SIZE + 2 * sizeof t];
	size_t len = 0;
	struct loom_batch_hdr h;
	const uint32_t *got;
	int fds[2];
	ok(pipe(fds) == 0, "pipe");
	h = (struct loom_batch_hdr){.dtype = LOOM_BATCH_U32, .batch = B, .seq_len = TP1,
				    .world = 2, .rank = 1, .seed = 7,
				    .flags = LOOM_BATCH_F_PAD, .pad_id = 99, .seq = 5};
	fill(t, 1, 1u << 20);
	len += (size_t)loom_batch_encode(&h, t, buf + len);
	h.seq = 6;
	h.epoch = 1;
	len += (size_t)loom_batch_encode(&h, t, buf + len);
	h.seq = 7;
	h.flags |= LOOM_BATCH_F_END;
	len += (size_t)loom_batch_encode(&h, NULL, buf + len);
	is_int(loom_write_all(fds[1], buf, len), 0, "frames written to the pipe");
	close(fds[1]);
	struct loom_batch_reader *r = loom_batch_reader_new(fds[0], "pipe");
	is_int(loom_batch_read(r, &h, &got), 1, "pipe: frame 0");
	ok(h.seq == 5 && h.rank == 1 && h.world == 2 && (h.flags & LOOM_BATCH_F_PAD) &&
	   h.pad_id == 99 && memcmp(got, t, sizeof t) == 0, "pipe: header fields and tokens");
	is_int(loom_batch_read(r, &h, &got), 1, "pipe: frame 1");
	is_int(h.epoch, 1, "pipe: epoch");
	is_int(loom_batch_read(r, &h, &got), 0, "pipe: END");
	is_int(h.seq, 7, "pipe: END seq");
	loom_batch_reader_free(r);
	close(fds[0]);
}

/* version 2: frames with per-token and per-record features */
static void case_features(void)
{
	uint32_t t[B * TP1];
	struct loom_batch_hdr h;
	const uint32_t *got;
	struct loom_batch_reader *r;
	struct loom_batch_feature ft[3] = {
		{ .name = "segment_ids", .shape = LOOM_BATCH_PER_TOKEN, .length = TP1 },
		{ .name = "unique_ids", .shape = LOOM_BATCH_PER_RECORD, .length = 1 },
		{ .name = "span", .shape = LOOM_BATCH_PER_RECORD, .length = 2 },
	};
	int64_t seg[B * TP1], uid[B], span[B * 2];
	for (int i = 0; i < B * TP1; i++)
		seg[i] = i % TP1 > 2;
	for (int b = 0; b < B; b++) {
		uid[b] = 1000000000 + b + (b == 2 ? 5000000000ll : 0);
		span[2 * b] = -1;
		span[2 * b + 1] = b;
	}
	const int64_t *vals[3] = { seg, uid, span };
	ft[0].dtype = loom_batch_narrowest(seg, B * TP1);
	ft[1].dtype = loom_batch_narrowest(uid, B);
	ft[2].dtype = loom_batch_narrowest(span, B * 2);
	ok(ft[0].dtype == LOOM_BATCH_U8 && ft[1].dtype == LOOM_BATCH_I64 &&
	   ft[2].dtype == LOOM_BATCH_I32, "narrowest: u8, i64, i32");
	h = (struct loom_batch_hdr){.dtype = LOOM_BATCH_U16, .batch = B, .seq_len = TP1,
				    .world = 1, .seed = 3};
	fill(t, 0, 30522);
	size_t cap = loom_batch_frame_size_features(B, TP1, ft, 3);
	unsigned char *v2 = malloc(2 * cap + LOOM_BATCH_HEADER_SIZE);
	long n1 = loom_batch_encode_features(&h, t, ft, 3, vals, v2);
	ok(n1 > 0 && (size_t)n1 <= cap, "encode a version-2 frame (%ld bytes)", n1);
	h.seq = 1;
	ft[1].dtype = LOOM_BATCH_U8;
	is_int(loom_batch_encode_features(&h, t, ft, 3, vals, v2 + n1), LOOM_ERANGE,
	       "a value that does not fit its dtype: LOOM_ERANGE");
	ft[1].dtype = LOOM_BATCH_I64;
	long n2 = loom_batch_encode_features(&h, t, ft, 3, vals, v2 + n1);
	h.flags = LOOM_BATCH_F_END;
	h.seq = 2;
	size_t len = (size_t)n1 + (size_t)n2;
	len += (size_t)loom_batch_encode(&h, NULL, v2 + len);
	ok(v2[4] == 2 && v2[5] == 0, "  its version is 2");

	r = loom_batch_reader_new_mem(v2, len, "v2");
	is_int(loom_batch_read(r, &h, &got), LOOM_EFORMAT,
	       "a reader that did not ask for features refuses the frame");
	is_str(loom_batch_reader_error(r), "v2: frame 0 at byte 0: a frame with features "
	       "(version 2): this reader reads token frames only", "  in one line");
	loom_batch_reader_free(r);

	r = loom_batch_reader_new_mem(v2, len, "v2");
	loom_batch_reader_accept_features(r);
	const struct loom_batch_feature *rf;
	size_t nrf;
	int good = 1;
	for (int fr = 0; fr < 2; fr++) {
		good &= loom_batch_read(r, &h, &got) == 1 && memcmp(got, t, sizeof t) == 0;
		loom_batch_reader_features(r, &rf, &nrf);
		good &= nrf == 3 && !strcmp(rf[2].name, "span") && rf[2].length == 2 &&
			rf[1].shape == LOOM_BATCH_PER_RECORD;
		good &= !memcmp(loom_batch_reader_values(r, 0), seg, sizeof seg) &&
			!memcmp(loom_batch_reader_values(r, 1), uid, sizeof uid) &&
			!memcmp(loom_batch_reader_values(r, 2), span, sizeof span);
	}
	ok(good, "a reader that accepts features reads ids and every feature back");
	is_int(loom_batch_read(r, &h, &got), 0, "  then the END frame");
	loom_batch_reader_free(r);

	/* a version-1 stream through a reader that accepts features */
	build(LOOM_BATCH_U16, 0);
	r = loom_batch_reader_new_mem(stream, stream_len, "v1");
	loom_batch_reader_accept_features(r);
	int nfr = 0;
	while (loom_batch_read(r, &h, &got) == 1)
		nfr++;
	loom_batch_reader_features(r, &rf, &nrf);
	ok(nfr == NFR && nrf == 0, "a version-2 reader reads version 1 (no features)");
	loom_batch_reader_free(r);

	/* corrupt feature tables: one line naming the feature */
	struct { const char *name; size_t off; unsigned char val; const char *want; } cc[] = {
		{ "dtype", 8 + 32 + 25, 9, "v2: frame 0 at byte 0: feature 1 \"unique_ids\": unknown dtype" },
		{ "shape", 8 + 24, 7, "v2: frame 0 at byte 0: feature 0 \"segment_ids\": unknown shape" },
		{ "length", 8 + 28, 4, "v2: frame 0 at byte 0: feature 0 \"segment_ids\": length does not fit its shape" },
		{ "name", 8 + 64, 's', "v2: frame 0 at byte 0: feature 2 \"segment_ids\": name repeats" },
		{ "count", 0, 2, "v2: frame 0 at byte 0: payload_bytes" },
	};
	for (size_t c = 0; c < sizeof cc / sizeof cc[0]; c++) {
		unsigned char *x = malloc(len);
		memcpy(x, v2, len);
		unsigned char *q = x + LOOM_BATCH_HEADER_SIZE;
		if (!strcmp(cc[c].name, "name"))
			memcpy(q + 8 + 64, "segment_ids", 12);
		else
			q[cc[c].off] = cc[c].val;
		/* keep the payload CRC right: the table itself is wrong */
		uint32_t crc = loom_crc32c(0, q, (size_t)n1 - LOOM_BATCH_HEADER_SIZE);
		for (int i = 0; i < 4; i++)
			x[56 + i] = (unsigned char)(crc >> (8 * i));
		crc = loom_crc32c(0, x, 60);
		for (int i = 0; i < 4; i++)
			x[60 + i] = (unsigned char)(crc >> (8 * i));
		r = loom_batch_reader_new_mem(x, len, "v2");
		loom_batch_reader_accept_features(r);
		is_int(loom_batch_read(r, &h, &got), LOOM_EFORMAT, "feature table: bad %s", cc[c].name);
		ok(!strncmp(loom_batch_reader_error(r), cc[c].want, strlen(cc[c].want)),
		   "  %s", loom_batch_reader_error(r));
		loom_batch_reader_free(r);
		free(x);
	}
	free(v2);
}

int main(void)
{
	case_frame_size();
	case_round_trip();
	case_encode_refusals();
	case_corruptions();
	case_expected_shape();
	case_pipe();
	case_features();
	return done_testing();
}
