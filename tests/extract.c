/* Unit tests for loom_extract (lib/wiki/loom_extract.h), with no dump and
 * no tool: pages made by hand go through loom_extract_page in each format;
 * the namespace, redirect, disambiguation, length and size filters count
 * and tell what they skip; share/wiki-style tables load, and a bad line is
 * refused naming the file and line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_extract.h"
#include "tap.h"

static char notes[4096];
static int nwarn;

static void note(void *ud, int level, const char *msg)
{
	(void)ud;
	nwarn += level == LOOM_EXTRACT_WARN;
	strncat(notes, msg, sizeof notes - strlen(notes) - 2);
	strcat(notes, "\n");
}

static struct loom_dump_ns site_ns[] = { { 6, "Datei" }, { 14, "Kategorie" } };
static struct loom_dump_site site = { .dbname = "dewiki", .url_prefix = "https://de.wikipedia.org/wiki",
				      .ns = site_ns, .nns = 2 };

static struct loom_page page(uint64_t id, const char *title, const char *text)
{
	struct loom_page pg = { .id = id, .revid = id * 10, .has_id = 1, .has_ns = 1,
				.has_text = 1, .title = title, .title_len = strlen(title),
				.text = text, .text_len = strlen(text), .line = 7,
				.text_size = strlen(text) };
	return pg;
}

/* The record of one page through a fresh extractor with these options
 * (and the tables written to dir); *stat: the counts. */
static char *run(struct loom_extract_opts o, const struct loom_page *pg, const char *tables,
		 uint64_t *stat)
{
	static char buf[4096];
	struct loom_dump_out out = { 0 };
	struct loom_err err;
	o.note = note;
	o.nns = o.nns ? o.nns : 1;
	struct loom_extract *x = loom_extract_new(&o, 2);
	if (tables && loom_extract_load_table(x, tables, LOOM_EXTRACT_DISAMBIGUATION, &err))
		diag("%s", err.msg);
	int rc = loom_extract_page(x, 1, &site, pg, &out);
	snprintf(buf, sizeof buf, "%s%.*s", rc ? "ERROR " : "", (int)out.buf.len,
		 out.buf.p ? out.buf.p : "");
	memcpy(stat, out.stat, sizeof out.stat);
	loom_wt_buf_free(&out.buf);
	loom_extract_free(x);
	return buf;
}

static void case_formats(void)
{
	struct loom_page pg = page(12, "A & <B>", "First line.\n\nSecond '''line'''.");
	uint64_t st[LOOM_DUMP_NSTAT];
	struct loom_extract_opts o = { .format = LOOM_EXTRACT_LINES };
	is_str(run(o, &pg, NULL, st), "First line. Second line.\n", "lines: one line");
	is_int(st[LOOM_EXTRACT_S_ARTICLES], 1, "lines: counted");
	is_int(st[LOOM_EXTRACT_S_BYTES_OUT], 25, "lines: bytes out");
	o.nul = 1;
	char *s = run(o, &pg, NULL, st);
	ok(!memcmp(s, "First line. Second line.", 24) && st[LOOM_EXTRACT_S_BYTES_OUT] == 25,
	   "lines -z: NUL at the end");
	o = (struct loom_extract_opts){ .format = LOOM_EXTRACT_TEXT };
	is_str(run(o, &pg, NULL, st), "First line.\nSecond line.\n\n", "text: empty line after");
	o.format = LOOM_EXTRACT_JSONL;
	is_str(run(o, &pg, NULL, st),
	       "{\"id\":\"12\",\"revid\":\"120\",\"url\":\"https://de.wikipedia.org/wiki?curid=12\","
	       "\"title\":\"A & <B>\",\"text\":\"First line.\\nSecond line.\"}\n",
	       "jsonl: one object a line");
	o.format = LOOM_EXTRACT_DOC;
	is_str(run(o, &pg, NULL, st),
	       "<doc id=\"12\" url=\"https://de.wikipedia.org/wiki?curid=12\" title=\"A &amp; &lt;B&gt;\">\n"
	       "A & <B>\n\nFirst line.\nSecond line.\n</doc>\n", "doc: attributes escaped");
}

static void case_skips(void)
{
	uint64_t st[LOOM_DUMP_NSTAT];
	struct loom_extract_opts o = { .format = LOOM_EXTRACT_LINES };
	struct loom_page pg = page(3, "Talk:X", "Hello.");
	pg.ns = 1;
	notes[0] = 0;
	is_str(run(o, &pg, NULL, st), "", "namespace 1: no record");
	ok(st[LOOM_EXTRACT_S_NS] == 1 && !notes[0], "counted; not told without notes_info");
	o.notes_info = 1;
	run(o, &pg, NULL, st);
	is_str(notes, "page 3 'Talk:X': namespace 1: skipped\n", "told with notes_info");

	notes[0] = 0;
	pg = page(4, "Lovelace", "");
	pg.redirect = 1;
	pg.redirect_title = "Ada Lovelace";
	is_str(run(o, &pg, NULL, st), "", "redirect: no record");
	is_str(notes, "page 4 'Lovelace': redirect to 'Ada Lovelace': skipped\n", "redirect told");
	o.keep_redirects = 1;
	o.format = LOOM_EXTRACT_JSONL;
	ok(strstr(run(o, &pg, NULL, st), "\"text\":\"Ada Lovelace\",\"redirect\":\"Ada Lovelace\"}") &&
	   st[LOOM_EXTRACT_S_KEPT_REDIRECTS] == 1 && st[LOOM_EXTRACT_S_REDIRECTS] == 1,
	   "--keep-redirects: the target is the text");

	notes[0] = 0;
	nwarn = 0;
	o = (struct loom_extract_opts){ .format = LOOM_EXTRACT_LINES };
	pg = page(5, "Big", "");
	pg.too_large = 1;
	pg.text_size = 2500;
	is_str(run(o, &pg, NULL, st), "", "too large: no record");
	is_str(notes, "page 5 'Big' (line 7): 2.5 kB of wikitext, over --max-page-size: skipped\n",
	       "too large: a warning even without notes_info");
	ok(nwarn == 1 && st[LOOM_EXTRACT_S_TOO_LARGE] == 1, "too large: counted, level WARN");
	pg = page(6, "None", "");
	pg.has_text = 0;
	run(o, &pg, NULL, st);
	ok(nwarn == 2 && st[LOOM_EXTRACT_S_NOTEXT] == 1, "no <text>: counted, level WARN");

	notes[0] = 0;
	o.notes_info = 1;
	o.min_length = 10;
	pg = page(7, "Short", "Tiny.");
	is_str(run(o, &pg, NULL, st), "", "--min-length: no record");
	is_str(notes, "page 7 'Short': 5 characters, under --min-length: skipped\n", "short told");
	pg = page(8, "Files", "[[Datei:x.png|thumb|a]]");
	notes[0] = 0;
	run(o, &pg, NULL, st);
	ok(st[LOOM_EXTRACT_S_SHORT] == 1 && strstr(notes, "empty after cleaning"),
	   "the dump's own File name is dropped: empty");
}

static void case_tables(void)
{
	uint64_t st[LOOM_DUMP_NSTAT];
	const char *good = tap_path("dab.tsv");
	FILE *f = fopen(good, "w");
	fputs("# comment\n\nde\ttitle\t(Begriffsklärung)\nfr\ttitle\t(homonymie)\n", f);
	fclose(f);
	struct loom_extract_opts o = { .format = LOOM_EXTRACT_LINES, .skip_dab = 1, .notes_info = 1 };
	struct loom_page pg = page(9, "Bank (Begriffsklärung)", "Bank steht für vieles.");
	notes[0] = 0;
	is_str(run(o, &pg, good, st), "", "a de title row applies to dewiki");
	ok(st[LOOM_EXTRACT_S_DAB] == 1 && strstr(notes, "disambiguation: skipped"), "counted, told");
	pg = page(10, "Bank (homonymie)", "Bank steht für vieles.");
	is_str(run(o, &pg, good, st), "Bank steht für vieles.\n", "an fr row does not");

	struct loom_extract_opts d = { 0 };
	struct loom_extract *x = loom_extract_new(&d, 1);
	struct loom_err err;
	const char *bad = tap_path("bad.tsv");
	f = fopen(bad, "w");
	fputs("de\ttitle\tok\nde\tpage\tX\n", f);
	fclose(f);
	is_int(loom_extract_load_table(x, bad, LOOM_EXTRACT_DISAMBIGUATION, &err), LOOM_EFORMAT,
	       "a kind that is not template or title");
	ok(strstr(err.msg, "bad.tsv line 2: 'page' is not template or title") != NULL, "%s", err.msg);
	f = fopen(bad, "w");
	fputs("de\t6\tDatei\nde\t7\tX\n", f);
	fclose(f);
	is_int(loom_extract_load_table(x, bad, LOOM_EXTRACT_NAMESPACES, &err), LOOM_EFORMAT,
	       "a namespace not 6, 14 or -2");
	ok(strstr(err.msg, "line 2: '7' is not a namespace 6, 14 or -2") != NULL, "%s", err.msg);
	f = fopen(bad, "w");
	fputs("de\ttitle\n", f);
	fclose(f);
	loom_extract_load_table(x, bad, LOOM_EXTRACT_DISAMBIGUATION, &err);
	ok(strstr(err.msg, "line 1: want LANG<TAB>template|title<TAB>NAME") != NULL, "%s", err.msg);
	ok(loom_extract_load_table(x, tap_path("none.tsv"), 0, &err) < 0, "a missing file");
	loom_extract_free(x);
	loom_extract_free(NULL);
}

static void case_summary(void)
{
	struct loom_dump_stats st = { .pages = 14, .bytes_in = 15900, .bytes_xml = 15900,
				      .invalid_utf8 = 2, .multistream = 1 };
	st.stat[LOOM_EXTRACT_S_ARTICLES] = 7;
	st.stat[LOOM_EXTRACT_S_REDIRECTS] = 2;
	st.stat[LOOM_EXTRACT_S_TOO_LARGE] = 1;
	st.stat[LOOM_EXTRACT_S_BYTES_OUT] = 2500;
	struct loom_extract_opts o = { .keep_redirects = 1 };
	char line[1024];
	loom_extract_summary(&o, &st, 0.125, 1, line, sizeof line);
	is_str(line, "14 pages seen, 7 articles written, 2 redirects (kept), 0 skipped by namespace, "
		     "0 disambiguation, 0 empty or short, 0 without text, 1 too large, 15.9 kB in "
		     "(15.9 kB XML), 2.5 kB out, 2 invalid UTF-8, 0.12 s, multistream, INCOMPLETE",
	       "the summary line");
}

int main(void)
{
	ok(tap_tmpdir() != NULL, "scratch dir");
	case_summary();
	case_formats();
	case_skips();
	case_tables();
	return done_testing();
}
