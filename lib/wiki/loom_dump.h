/*
 * loom_dump.h - streaming MediaWiki XML dump reader (pages-articles).
 *
 * Purpose: read a MediaWiki export dump (.xml.bz2, .xml.gz, .xml, any
 * filter libarchive knows, or stdin) one <page> at a time and hand each
 * page to a caller-supplied function on worker threads, then hand the
 * per-batch results back IN DUMP ORDER on the calling thread.  Output is
 * identical for any thread count.
 *
 *   loom_pagexml   expat push parser -> struct loom_page callbacks, one
 *                  page in memory at a time (also the fuzz target).
 *   loom_dump      the parallel engine:
 *     single stream: a reader thread (libarchive, raw format, all filters,
 *       UTF-8 repair) | a parser thread (expat, batches of pages) | N
 *       workers (the page function) | the caller (in-order write).
 *     multistream + index (--index FILE, or NAME-index.txt.bz2 beside
 *       NAME.xml.bz2): stream 0 (<siteinfo>) is read first; then N
 *       workers share two kinds of task: decompress bz2 stream k (bytes
 *       offset_k..offset_k+1, read with pread, libarchive on memory) into
 *       a list of blocks, and parse + clean stream k with its own expat
 *       parser, consuming those blocks as they come (even while another
 *       worker is still decompressing it).  Results are written in stream
 *       order.
 *   Memory is bounded by a window of in-flight batches/streams (2N+2),
 *   whatever the dump size.
 *
 * Invalid UTF-8 in the dump is replaced by U+FFFD before XML parsing and
 * counted (stats.invalid_utf8).  A truncated or corrupt compressed file
 * or malformed XML stops the run: the batches before the error are still
 * written (in order), then loom_dump_run returns LOOM_ETRUNC/LOOM_EFORMAT
 * with a message naming the byte offset (compressed file) or the line and
 * column (XML).
 *
 * Ownership: loom_dump_open copies what it needs; the page passed to the
 * page function is valid only during the call.  Errors: 0 or negative
 * LOOM_E*, message on the object (loom_dump_error / loom_pagexml_error).
 * Thread-safety: the default (loom_common.h) for the object, but the
 * page function runs on the worker threads, several at once (never two at
 * once for one worker): it must be thread-safe, e.g. one loom_wikitext
 * per worker; the write function runs on the calling thread.
 */
#ifndef LOOM_DUMP_H
#define LOOM_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"
#include "loom_wikitext.h"

struct loom_page {
	uint64_t id, revid;
	int64_t ns;
	int has_id, has_ns, has_text;
	int redirect;                 /* <redirect/> present */
	const char *redirect_title;   /* its title attribute ("" if none) */
	const char *title;
	size_t title_len;
	const char *text;             /* wikitext of the (last) revision */
	size_t text_len;
	uint64_t line;                /* line of <page> (in its bz2 stream
					 * for multistream input) */
	uint64_t text_size;           /* bytes of wikitext in the dump */
	int too_large;                /* text_size is over the parser's
					 * max_text: text is empty */
};

struct loom_dump_ns {
	int64_t key;
	char *name;
};

/* What <siteinfo> said (all strings may be empty). */
struct loom_dump_site {
	char *sitename, *dbname, *base;
	char *url_prefix;             /* base up to its last '/' */
	struct loom_dump_ns *ns;
	size_t nns;
};
/* Name of namespace `key` ("" if unknown). */
const char *loom_dump_ns_name(const struct loom_dump_site *s, int64_t key);

/* ---- the page parser ------------------------------------------------ */

typedef int (*loom_pagexml_fn)(void *ctx, const struct loom_page *pg);
typedef void (*loom_siteinfo_fn)(void *ctx, const struct loom_dump_site *site);

struct loom_pagexml;
/* `synthetic_root`: the input is a run of <page> elements without the
 * <mediawiki> root (a bz2 stream of a multistream dump); a closing
 * </mediawiki> in it is accepted. */
struct loom_pagexml *loom_pagexml_new(int synthetic_root, loom_pagexml_fn page,
				      loom_siteinfo_fn site, void *ctx);
void loom_pagexml_free(struct loom_pagexml *px);
/* Keep at most `max` bytes of a page's wikitext (0: no limit, the
 * default): a longer text is dropped as it streams (not held in memory)
 * and the page comes with too_large set. */
void loom_pagexml_set_max_text(struct loom_pagexml *px, size_t max);
/* Parse more input.  Returns 0, LOOM_EFORMAT (message: line, column,
 * reason), LOOM_ENOMEM, or the page function's own negative code. */
int loom_pagexml_feed(struct loom_pagexml *px, const char *buf, size_t n);
/* End of input.  mode: */
enum {
	LOOM_PAGEXML_END_DOC,    /* the document (or last stream) is complete */
	LOOM_PAGEXML_END_OPEN,   /* may stop inside the root (stream 0) */
	LOOM_PAGEXML_END_STREAM, /* a middle stream: close the synthetic root */
};
int loom_pagexml_finish(struct loom_pagexml *px, int mode);
const char *loom_pagexml_error(const struct loom_pagexml *px);
uint64_t loom_pagexml_pages(const struct loom_pagexml *px);

/* ---- the engine ---------------------------------------------------- */

#define LOOM_DUMP_NSTAT 16

/* The result of one batch of pages: the page function appends to buf and
 * counts whatever it likes in stat[] (summed by the engine). */
struct loom_dump_out {
	struct loom_wt_buf buf;
	uint64_t stat[LOOM_DUMP_NSTAT];
};

/* Runs on a worker thread (worker in 0..threads-1, never concurrently for
 * the same worker).  Nonzero return stops the run with that code. */
typedef int (*loom_dump_page_fn)(void *ctx, int worker, const struct loom_dump_site *site,
				 const struct loom_page *pg, struct loom_dump_out *out);
/* Runs on the calling thread, batches in dump order.  Nonzero stops. */
typedef int (*loom_dump_write_fn)(void *ctx, const struct loom_dump_out *out);

struct loom_dump_opts {
	int threads;          /* page-function workers, >= 1 */
	const char *index;    /* multistream index; NULL: look beside the dump */
	int no_index;         /* ignore any index: read as a single stream */
	size_t batch_bytes;   /* single stream: wikitext per batch (1 MiB) */
	size_t max_text;      /* loom_pagexml_set_max_text (0: no limit) */
};

struct loom_dump_stats {
	uint64_t bytes_in;      /* compressed bytes consumed so far */
	uint64_t size_in;       /* size of the input file (0 if unknown) */
	uint64_t bytes_xml;     /* decompressed bytes */
	uint64_t pages;         /* pages parsed */
	uint64_t invalid_utf8;  /* bytes replaced by U+FFFD before parsing */
	uint64_t stat[LOOM_DUMP_NSTAT]; /* sums of out.stat written so far */
	int multistream;        /* 1 if reading by index */
	uint64_t streams;       /* bz2 streams listed by the index */
};

struct loom_dump;

/* Open `path` ("-" = stdin).  On failure returns NULL with a message in
 * err (naming the file). */
struct loom_dump *loom_dump_open(const char *path, const struct loom_dump_opts *opts,
				 struct loom_err *err);
void loom_dump_free(struct loom_dump *d);
/* Read the whole dump.  0 on success, else a negative LOOM_E* (the
 * batches before the failure have been written). */
int loom_dump_run(struct loom_dump *d, loom_dump_page_fn page, loom_dump_write_fn write,
		  void *ctx);
/* Snapshot of the counters (thread-safe; call from the write function). */
void loom_dump_stats(struct loom_dump *d, struct loom_dump_stats *st);
const char *loom_dump_error(const struct loom_dump *d);

#endif
