/*
 * loom_wikitext.h - MediaWiki wikitext -> plain article text.
 *
 * Purpose: the cleaner behind loom-extract.  It removes markup the way
 * users of WikiExtractor expect, WITHOUT expanding templates:
 *   - templates, parser functions and magic words {{...}} (nested,
 *     multi-line, {{{params}}}) are removed; tables {| ... |} are removed
 *     (keep_tables keeps the cell text, one row per line, cells joined by
 *     " | "); behaviour switches __TOC__ are removed;
 *   - <ref>..</ref>, <ref/>, comments, <math>, <gallery>, <timeline>,
 *     <syntaxhighlight>, <score>, <graph>, <templatedata>, <includeonly>
 *     and similar extension tags are removed with their content;
 *     <nowiki> and <pre> content is kept literally;
 *   - [[T|text]] -> text, [[T]] -> T, [[T]]s -> Ts; links to files, images,
 *     categories, media and interlanguage links are removed (localized
 *     namespace names can be added with loom_wikitext_drop_prefix);
 *     [http://x text] -> text, [http://x] removed, bare URLs kept;
 *   - '' ''' ''''' removed; headings dropped or kept as a line (headings);
 *     list items (* # : ;) become lines without their markers; HTML
 *     entities decoded (&nbsp; and U+00A0 become a plain space); <br> and
 *     block tags (p, div, li, ...) end a line; other tags are stripped,
 *     their text kept;
 *   - invalid UTF-8 becomes U+FFFD (one per bad byte) and is counted.
 * Unmatched openers ({{ [[ without a closer) are dropped, their text kept;
 * an unterminated table runs to the end of the article (as in MediaWiki).
 *
 * Output: paragraphs separated by a single '\n', no empty paragraphs, no
 * trailing newline.  Every stage is a single left-to-right pass with
 * explicit stacks and memoized searches: time is linear in the input
 * (plus a sort of the link edits), with no recursion and no backtracking.
 *
 * Ownership: a loom_wikitext object owns its scratch buffers and reuses
 * them between calls (memory ~ a few times the largest article, reported
 * in loom_wikitext_info.scratch).  Thread-safety: the default
 * (loom_common.h): one object per thread.  Errors: functions return 0 or a
 * negative LOOM_E* (only LOOM_ENOMEM / LOOM_EINVAL, the latter for a page
 * over 1.4 GB); the message is kept
 * on the object (loom_wikitext_error).
 */
#ifndef LOOM_WIKITEXT_H
#define LOOM_WIKITEXT_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

/* A growable byte buffer (also used by loom_dump). */
struct loom_wt_buf {
	char *p;
	size_t len, cap;
};
/* Make room for `extra` more bytes: 0 or LOOM_ENOMEM. */
int loom_wt_buf_reserve(struct loom_wt_buf *b, size_t extra);
int loom_wt_buf_add(struct loom_wt_buf *b, const void *p, size_t n);
void loom_wt_buf_free(struct loom_wt_buf *b);

struct loom_wikitext_opts {
	int keep_tables;  /* keep table cell text */
	int headings;     /* keep section headings as lines */
	int valid_utf8;   /* the caller guarantees valid UTF-8 (e.g. text from
			   * loom_dump, repaired before parsing): skip the
			   * repair pass */
};

struct loom_wikitext_info {
	uint64_t invalid_utf8;   /* bytes replaced by U+FFFD */
	int disambiguation;      /* a disambiguation template or __DISAMBIG__
				    was seen */
	uint64_t chars;          /* code points of the output, '\n' excluded */
	uint64_t scanned;        /* bytes examined by the searches ahead of
				  * the passes' cursors (closing tags, '>',
				  * ']'): memoized, so at most a few times
				  * the input; the witness of linear time */
	uint64_t scratch;        /* most scratch memory the object held at
				  * once during the call (its buffers are
				  * reused: this includes what earlier,
				  * larger pages made it keep) */
};

struct loom_wikitext;

struct loom_wikitext *loom_wikitext_new(const struct loom_wikitext_opts *opts);
void loom_wikitext_free(struct loom_wikitext *w);
/* Also drop links whose target starts with "name:" (e.g. the dump's
 * localized names of namespaces 6 File, 14 Category, -2 Media).  The first
 * letter is compared case-insensitively for ASCII, '_' equals ' '. */
int loom_wikitext_drop_prefix(struct loom_wikitext *w, const char *name, size_t len);
/* Also take {{name}} / {{name|...}} as the mark of a disambiguation page
 * (e.g. German "Begriffsklärung"; built in: English names, "Aimai" and
 * names holding 曖昧さ回避).  Compared as loom_wikitext_drop_prefix does. */
int loom_wikitext_disambig_template(struct loom_wikitext *w, const char *name, size_t len);
/* Clean `n` bytes of wikitext and APPEND the text to `out`.  `info`, if not
 * NULL, receives what was seen.  Returns 0 or LOOM_ENOMEM. */
int loom_wikitext_clean(struct loom_wikitext *w, const char *in, size_t n,
			struct loom_wt_buf *out, struct loom_wikitext_info *info);
const char *loom_wikitext_error(const struct loom_wikitext *w);

/* Replace invalid UTF-8 in src by U+FFFD, appending to out; returns the
 * number of bad bytes, or LOOM_ENOMEM.  `*carry`/`*ncarry` (up to 3 bytes)
 * hold an incomplete sequence at the end of src for the next call when
 * `more` is set; pass more=0 on the last call (the tail is then bad). */
int64_t loom_utf8_sanitize(const char *src, size_t n, struct loom_wt_buf *out,
			   unsigned char carry[4], int *ncarry, int more);

#endif
