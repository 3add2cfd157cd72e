/*
 * loom_batch.h - the batch frame stream between loom-feed and its readers
 * (loom-train, loom-eval).  The wire format is specified in
 * formats/batch.md; in short, a stream is a sequence of frames, each a
 * 64-byte little-endian header followed by B x (T+1) tokens (u16 or u32):
 *
 *   off size field
 *     0    4 magic "LMBF"
 *     4    2 version (1)
 *     6    2 header_size (64)
 *     8    2 dtype (1 = u16 tokens, 2 = u32 tokens)
 *    10    2 flags (bit 0 END: end-of-stream frame; bit 1 PAD: pad_id valid)
 *    12    4 batch B (records in this frame)
 *    16    4 seq_len T+1 (tokens per record)
 *    20    4 pad_id
 *    24    8 seq: batch sequence number (global, counts across epochs)
 *    32    4 epoch
 *    36    2 rank, 38 2 world
 *    40    8 payload_bytes (= B * (T+1) * token size; 0 in the END frame)
 *    48    8 seed (the feeder's shuffle seed)
 *    56    4 payload CRC-32C
 *    60    4 header CRC-32C over bytes 0..59
 *
 * Version 2 (FEATURES flag, formats/batch.md): the payload starts with a
 * table of named features (per-token or per-record, u8/u16/u32/i32/i64)
 * and holds, after the ids, each feature's values; loom-feed writes it for
 * squad-features sets.  A reader reads such frames only when asked
 * (loom_batch_reader_accept_features), so loom-train and loom-eval refuse
 * them in one line.
 *
 * A stream ends with exactly one END frame whose `seq` is the next sequence
 * number that would have been written; EOF before it (at a frame boundary
 * or mid-frame) is an error naming the frame number and byte offset, so a
 * reader tells a clean end from a feeder that died.
 *
 * Ownership: a reader owns its buffers; the tokens of a frame it returns
 * stay valid until the next read or free.  The encoders take caller
 * memory and never keep pointers to it.
 * Errors: functions return 0 (or 1, see loom_batch_read) or a negative
 * LOOM_E* code and keep a one-line message naming the stream, the frame
 * number (0-based, counted from the start of the stream) and byte offset,
 * e.g. "stdin: frame 3 at byte 4160: payload checksum mismatch".
 * Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_BATCH_H
#define LOOM_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

#define LOOM_BATCH_MAGIC "LMBF"
#define LOOM_BATCH_VERSION 1		/* token frames */
#define LOOM_BATCH_VERSION_FEATURES 2	/* frames that may carry features */
#define LOOM_BATCH_HEADER_SIZE 64

enum loom_batch_dtype {
	LOOM_BATCH_U16 = 1,
	LOOM_BATCH_U32 = 2,
	/* features only: */
	LOOM_BATCH_U8 = 3,
	LOOM_BATCH_I32 = 4,
	LOOM_BATCH_I64 = 5,
};

enum {
	LOOM_BATCH_F_END = 1u << 0,	/* end-of-stream frame */
	LOOM_BATCH_F_PAD = 1u << 1,	/* pad_id is meaningful */
	LOOM_BATCH_F_FEATURES = 1u << 2,/* version 2: the payload starts with a
					   feature table (formats/batch.md) */
};

/* --- features (version 2) ------------------------------------------------
 * Besides its B x seq_len token ids, a frame may carry named features,
 * per-token (B x seq_len values) or per-record (B x length values). */
#define LOOM_BATCH_MAX_FEATURES 64
#define LOOM_BATCH_NAME_MAX 24		/* name bytes, NUL included */
#define LOOM_BATCH_MAX_PAYLOAD (1ull << 31)

enum { LOOM_BATCH_PER_TOKEN = 0, LOOM_BATCH_PER_RECORD = 1 };

struct loom_batch_hdr;

struct loom_batch_feature {
	char name[LOOM_BATCH_NAME_MAX];	/* NUL-terminated, unique in a frame */
	uint8_t shape;			/* LOOM_BATCH_PER_TOKEN or _PER_RECORD */
	uint8_t dtype;			/* U16 U32 U8 I32 I64 */
	uint32_t length;		/* values per record (seq_len per token) */
};

/* The narrowest of U8, I32, I64 that holds v[0..n). */
uint8_t loom_batch_narrowest(const int64_t *v, size_t n);
/* Largest frame (u32 ids, i64 features) of this shape and features. */
size_t loom_batch_frame_size_features(uint32_t batch, uint32_t seq_len,
				      const struct loom_batch_feature *f, size_t nf);
/* Encode a version-2 frame: the ids as loom_batch_encode, then feature k's
 * B x f[k].length values values[k] (row-major) as f[k].dtype.  Returns the
 * bytes written, LOOM_ERANGE if an id or a value does not fit its dtype,
 * LOOM_EINVAL on a bad header or feature table.  nf = 0 gives the
 * version-1 frame loom_batch_encode writes. */
long loom_batch_encode_features(const struct loom_batch_hdr *h, const uint32_t *tokens,
				const struct loom_batch_feature *f, size_t nf,
				const int64_t *const *values, void *out);

/* Largest B x (T+1) a reader accepts (guards allocations on bad input). */
#define LOOM_BATCH_MAX_TOKENS (1u << 28)

/* The decoded header of one frame. */
struct loom_batch_hdr {
	uint16_t version;
	uint16_t dtype;		/* enum loom_batch_dtype */
	uint16_t flags;
	uint32_t batch;		/* B */
	uint32_t seq_len;	/* T+1 */
	uint32_t pad_id;
	uint64_t seq;		/* batch sequence number */
	uint32_t epoch;
	uint16_t rank, world;
	uint64_t payload_bytes;
	uint64_t seed;
	uint32_t payload_crc;
};

/* Bytes per token of a dtype (2 or 4), 0 if unknown. */
size_t loom_batch_dtype_size(unsigned dtype);
/* Bytes of a whole data frame (header + payload) for the given shape. */
size_t loom_batch_frame_size(unsigned dtype, uint32_t batch, uint32_t seq_len);

/* Encode one frame into out (loom_batch_frame_size() bytes; for an END
 * frame LOOM_BATCH_HEADER_SIZE bytes).  h->payload_bytes and
 * h->payload_crc are computed here; tokens (B*(T+1), row-major) may be
 * NULL for an END frame.  Returns the bytes written, or LOOM_ERANGE if a
 * token does not fit the dtype (with U16), LOOM_EINVAL on a bad header. */
long loom_batch_encode(const struct loom_batch_hdr *h, const uint32_t *tokens,
		       void *out);

/* Decode and validate a 64-byte header (magic, version, header size,
 * dtype, flags, header CRC, payload_bytes == B*(T+1)*size, limits).
 * Returns 0 or LOOM_EFORMAT / LOOM_ECHECKSUM with a message in err
 * (without frame/offset prefix). */
int loom_batch_decode_hdr(const void *buf, struct loom_batch_hdr *h,
			  struct loom_err *err);

/* --- reader ------------------------------------------------------------ */

struct loom_batch_reader;

/* Read frames from fd (not closed by the reader); `name` is used in
 * messages ("stdin", a file name). */
struct loom_batch_reader *loom_batch_reader_new(int fd, const char *name);
/* Read frames from memory (len bytes, not copied: must outlive reader). */
struct loom_batch_reader *loom_batch_reader_new_mem(const void *buf, size_t len,
						    const char *name);
void loom_batch_reader_free(struct loom_batch_reader *r);

/* Require every data frame to have this shape (0 = any); a frame that
 * differs is an error "frame N at byte X: shape 4x65, expected 8x65".
 * Without it, the shape of the first frame is required of all later ones. */
void loom_batch_reader_expect(struct loom_batch_reader *r, uint32_t batch,
			      uint32_t seq_len);

/* Accept frames with features (version 2, FEATURES flag); without this
 * call such a frame is an error "a frame with features (version 2): this
 * reader reads token frames only".  Version-1 frames read either way. */
void loom_batch_reader_accept_features(struct loom_batch_reader *r);
/* Without accept_features: the refusal of a frame with features ends with
 * "; HINT" (a static string, what the reader's user should do). */
void loom_batch_reader_features_hint(struct loom_batch_reader *r, const char *hint);
/* Call wait(ctx, fd) before each read(2) of the descriptor: it returns when
 * the read should go ahead (e.g. once poll(2) finds the fd readable), and
 * may do other work meanwhile or end the process (loom-train under mpirun
 * answers the other ranks and gives up on a silent feeder). */
void loom_batch_reader_on_wait(struct loom_batch_reader *r, void (*wait)(void *ctx, int fd),
			       void *ctx);
/* The features of the frames read (the first frame's table: every later
 * frame must have the same names, shapes and lengths; dtypes may change);
 * *n = 0 for token frames.  The values of feature k in the last frame
 * read, B x length, widened to int64 (owned by the reader). */
void loom_batch_reader_features(const struct loom_batch_reader *r,
				const struct loom_batch_feature **f, size_t *n);
const int64_t *loom_batch_reader_values(const struct loom_batch_reader *r, size_t k);

/* Read the next frame.  Returns 1 with *h filled and *tokens pointing to
 * B*(T+1) tokens widened to u32 (owned by the reader); 0 at the END frame
 * (a clean end; *h is the END header); negative on error: LOOM_ETRUNC
 * (stream ended mid-frame or without an END frame), LOOM_EFORMAT (magic,
 * version, shape, sequence gap, END frame count mismatch, data after END),
 * LOOM_ECHECKSUM (header or payload CRC), LOOM_EIO.  Sequence numbers must
 * increase by one from frame to frame (the first may be any). */
int loom_batch_read(struct loom_batch_reader *r, struct loom_batch_hdr *h,
		    const uint32_t **tokens);

/* Frames read so far (data frames, not counting END) and bytes consumed. */
uint64_t loom_batch_reader_frames(const struct loom_batch_reader *r);
uint64_t loom_batch_reader_offset(const struct loom_batch_reader *r);
const char *loom_batch_reader_error(const struct loom_batch_reader *r);

/* The index of the first token of a frame's payload tok[batch x seq_len]
 * that is >= limit and is not its padding (pad_id, with the PAD flag);
 * batch x seq_len when there is none.  Ids are unsigned 32-bit: any value,
 * pad_id too, is a valid id of the format; limit is the consumer's
 * vocabulary size. */
size_t loom_batch_first_bad_id(const struct loom_batch_hdr *h, const uint32_t *tok,
			       uint64_t limit);

#endif
