/*
 * loom_extract.h - what loom-extract does to each page of a dump: the
 * namespace, redirect, disambiguation and length filters, the per-language
 * tables of share/wiki, wikitext cleaning, and the four output formats.
 *
 * Purpose: loom_extract_page is a loom_dump_page_fn (loom_dump.h): it runs
 * on loom_dump's worker threads, one loom_wikitext per worker, and appends
 * the page's record to out->buf, counting in out->stat[LOOM_EXTRACT_S_*]:
 *   lines  one article per line (newlines -> spaces), '\n' or NUL after
 *   text   the cleaned text, then an empty line (or NUL)
 *   jsonl  {"id","revid","url","title","text"[,"redirect"]} per line
 *   doc    WikiExtractor's <doc id url title> ... </doc>
 * Pages skipped are counted and told through opts.note (with the page id,
 * title and reason) rather than printed: level LOOM_EXTRACT_INFO for the
 * ordinary skips (namespace, redirect, disambiguation, empty, short; only
 * when opts.notes_info is set), LOOM_EXTRACT_WARN for a page without
 * <text> or over the dump's size limit.
 * The tables (loom_extract_load_table) are share/wiki/disambiguation.tsv
 * and namespaces.tsv: "LANG<TAB>KIND<TAB>TEXT" lines, '#' lines comments;
 * the rows of the dump's language (its dbname less "wiki") or of "*"
 * apply, or all rows when none names that language.
 *
 * Ownership: loom_extract_new copies the options; loom_extract_free
 * (accepts NULL) frees the tables and the per-worker cleaners.  Errors: 0
 * or negative LOOM_E*; loom_extract_load_table's message (naming the file
 * and line) in *err; loom_extract_page returns LOOM_ENOMEM only.
 * Thread-safety: load the tables before the run; then loom_extract_page
 * may run on several workers at once, each with its own worker number
 * (< threads); the note function is called from those workers.
 */
#ifndef LOOM_EXTRACT_H
#define LOOM_EXTRACT_H

#include <stdint.h>

#include "loom_common.h"
#include "loom_dump.h"
#include "loom_wikitext.h"

enum { LOOM_EXTRACT_LINES, LOOM_EXTRACT_TEXT, LOOM_EXTRACT_JSONL, LOOM_EXTRACT_DOC };

/* out->stat[] indices */
enum { LOOM_EXTRACT_S_ARTICLES, LOOM_EXTRACT_S_REDIRECTS, LOOM_EXTRACT_S_NS,
       LOOM_EXTRACT_S_DAB, LOOM_EXTRACT_S_SHORT, LOOM_EXTRACT_S_NOTEXT,
       LOOM_EXTRACT_S_BYTES_OUT, LOOM_EXTRACT_S_KEPT_REDIRECTS, LOOM_EXTRACT_S_TOO_LARGE };

enum { LOOM_EXTRACT_INFO, LOOM_EXTRACT_WARN };

/* kinds of table (loom_extract_load_table) */
enum { LOOM_EXTRACT_DISAMBIGUATION, LOOM_EXTRACT_NAMESPACES };

#define LOOM_EXTRACT_MAX_NS 64

struct loom_extract_opts {
	int format;                 /* LOOM_EXTRACT_LINES .. _DOC */
	int nul;                    /* lines/text: NUL after each article */
	int keep_redirects;         /* a redirect's record: its target title */
	int skip_dab;               /* drop disambiguation pages */
	uint64_t min_length;        /* drop articles of fewer characters */
	struct loom_wikitext_opts wopts;
	int64_t ns[LOOM_EXTRACT_MAX_NS]; /* namespaces kept */
	int nns;
	int notes_info;             /* tell the ordinary skips too */
	void (*note)(void *ud, int level, const char *msg); /* may be NULL */
	void *note_ud;
};

struct loom_extract;

/* For `threads` workers; NULL when out of memory. */
struct loom_extract *loom_extract_new(const struct loom_extract_opts *o, int threads);
void loom_extract_free(struct loom_extract *x);

/* Add the rows of a share/wiki table at path (kind: LOOM_EXTRACT_*). */
int loom_extract_load_table(struct loom_extract *x, const char *path, int kind,
			    struct loom_err *err);

/* The loom_dump_page_fn; ctx is the struct loom_extract. */
int loom_extract_page(void *ctx, int worker, const struct loom_dump_site *site,
		      const struct loom_page *pg, struct loom_dump_out *out);

/* The summary line of a run (no newline) into buf[n]: pages, articles,
 * each kind of skip, bytes in and out, invalid UTF-8, seconds, and
 * whether the dump was multistream or the output is incomplete. */
void loom_extract_summary(const struct loom_extract_opts *o, const struct loom_dump_stats *st,
			  double seconds, int incomplete, char *buf, size_t n);

#endif
