/* Unit tests of the wikitext cleaner (lib/wiki/loom_wikitext.h), one per
 * construct, plus UTF-8 repair and the linear-time guarantees. */
#include <stdlib.h>
#include <string.h>

#include "loom_wikitext.h"
#include "tap.h"

#define TABLES 1
#define HEADINGS 2

static struct loom_wikitext_info info;

static char *clean(const char *in, size_t n, int flags)
{
	struct loom_wikitext_opts o = { flags & TABLES, (flags & HEADINGS) != 0, 0 };
	struct loom_wikitext *w = loom_wikitext_new(&o);
	struct loom_wt_buf out = { 0 };
	loom_wikitext_drop_prefix(w, "Fichier", 7);
	if (loom_wikitext_clean(w, in, n, &out, &info) || loom_wt_buf_add(&out, "", 1)) {
		loom_wikitext_free(w);
		return strdup("(error)");
	}
	loom_wikitext_free(w);
	return out.p;
}

static void t(const char *in, const char *want, int flags, const char *name)
{
	char *got = clean(in, strlen(in), flags);
	is_str(got, want, "%s", name);
	free(got);
}

/* Templates, parser functions, magic words. */
static void case_templates(void)
{
	t("a {{cite|x=1}} b", "a b", 0, "template removed");
	t("a {{outer|{{inner|{{deep}}}}|y}} b", "a b", 0, "nested templates removed");
	t("a {{Infobox\n| name = X\n| born = {{date|1}}\n}}\nb", "a b", 0, "multi-line template removed");
	t("x {{{1|default}}} y", "x y", 0, "template parameter removed");
	t("{{#if: a | b | c}}text{{PAGENAME}}", "text", 0, "parser function and magic word removed");
	t("{{DEFAULTSORT:X}}__NOTOC__ body __TOC__", "body", 0, "behaviour switches removed");
	t("a {{x b", "a x b", 0, "unterminated template: opener dropped");
	t("a }} b", "a }} b", 0, "stray closer kept");
	t("{{{{{x}}}}} y", "y", 0, "five-brace run matched");
}

/* Tables. */
static void case_tables(void)
{
	t("p\n{| class=x\n! A !! B\n|-\n| 1 || 2\n|}\nq", "p\nq", 0, "table removed");
	t("{| class=x\n|+ Cap\n! A !! B\n|-\n| 1 || style=\"c\" | 2\n|}", "Cap\nA | B\n1 | 2", TABLES,
	  "--keep-tables: caption and rows");
	t("a\n{|\n| cell\nnever closed", "a", 0, "unterminated table runs to the end");
	t("a\n: {| class=x\n| c\n|}\nb", "a\nb", 0, "indented table (:{|) removed");
	t("{|\n| a || colspan=\"2\" {{yes}} || b\n|}", "a | b", TABLES, "--keep-tables: attribute-only cell dropped");
	t("x\n{{multicol}}\n* a\n|\n* b\n{{multicol-end}}\ny", "x\na\nb\ny", 0, "lone | of a template-made table dropped");
	t("{|\n|\n{|\n| inner\n|}\n| outer\n|}\nafter", "after", 0, "nested tables removed");
}

/* Extension tags, comments. */
static void case_tags_and_comments(void)
{
	t("a<ref name=\"x\">cite {{y}}</ref> b<ref name=x/>.", "a b.", 0, "refs removed");
	t("a<REF>x</REF>b", "ab", 0, "tags case-insensitive");
	t("a <!-- hidden\nstill --> b", "a b", 0, "comment removed");
	t("a <!-- never closed", "a", 0, "unclosed comment runs to the end");
	t("x <math>e^{i\\pi}</math> y", "x y", 0, "math removed");
	t("<gallery>\nFile:a.jpg|A\n</gallery>t", "t", 0, "gallery removed");
	t("<timeline>\nx\n</timeline>t", "t", 0, "timeline removed");
	t("<syntaxhighlight lang=c>int x;</syntaxhighlight>t", "t", 0, "syntaxhighlight removed");
	t("<score>c d</score><templatestyles src=a/>t", "t", 0, "score, templatestyles removed");
	t("a <ref>unclosed b", "a unclosed b", 0, "unclosed ref: only the tag dropped");
	t("<nowiki>[[a]] {{b}} ''c''</nowiki>", "[[a]] {{b}} ''c''", 0, "nowiki kept literally");
	t("<pre>\n* x\n</pre>", "* x", 0, "pre kept literally");
}

/* Links. */
static void case_links(void)
{
	t("[[Target|text]]", "text", 0, "piped link");
	t("[[Target]]", "Target", 0, "plain link");
	t("[[Target]]s", "Targets", 0, "link trail");
	t("[[File:a.jpg|thumb|cap [[x|y]]]] after", "after", 0, "file link with nested link removed");
	t("[[Image:a.jpg]][[Category:C|k]][[media:x.ogg]]t", "t", 0, "image, category, media removed");
	t("[[Fichier:a.jpg|x]]t", "t", 0, "extra drop prefix (localized File)");
	t("[[ファイル:a.jpg|x]][[Category:日本]]本文", "本文", 0, "Japanese file link removed");
	t("a [[de:Foo]] [[zh-yue:Bar]] b", "a b", 0, "interlanguage links removed");
	t("[[wikt:weft|weft]]", "weft", 0, "interwiki with label kept");
	t("[[:Category:X]]", "Category:X", 0, "leading-colon link shown");
	t("[[Help:Editing (x)|]]", "Editing", 0, "pipe trick");
	t("[[a [[b]] c", "a b c", 0, "unmatched [[ dropped");
	t("[http://x.org text here]", "text here", 0, "external link with text");
	t("a [https://x.org] b", "a b", 0, "external link without text removed");
	t("see http://bare.example.org/x now", "see http://bare.example.org/x now", 0, "bare URL kept");
	t("[not a link] [http://unclosed", "[not a link] [http://unclosed", 0, "brackets kept");
}

/* Quotes, headings, lists. */
static void case_quotes_headings_lists(void)
{
	t("'''bold''' ''it'' '''''both''''' ''''four''''", "bold it both 'four'", 0, "quotes");
	t("don't", "don't", 0, "apostrophe kept");
	t("== H ==\ntext", "text", 0, "heading dropped");
	t("== H ==\ntext\n=== Sub ''x'' ===\nmore", "H\ntext\nSub x\nmore", HEADINGS,
	  "--headings: heading lines");
	t("intro\n* one\n** two\n# three\n#: four\n; term\n: def\nend", "intro\none\ntwo\nthree\nfour\nterm\ndef\nend",
	  0, "list items as lines without markers");
	t("a\nb\n\nc", "a b\nc", 0, "paragraphs: lines joined, blank line splits");
	t("a\n----\nb", "a\nb", 0, "horizontal rule");
}

/* Entities and tags. */
static void case_entities_and_tags(void)
{
	t("&amp; &lt;b&gt; &quot;q&quot; &#8212; &#x2014; &eacute; &euro;", "& <b> \"q\" — — é €", 0, "entities");
	t("1&nbsp;km &#160;x", "1 km x", 0, "nbsp is a space");
	t("&bogus; &#xZZ; & x", "&bogus; &#xZZ; & x", 0, "non-entities kept");
	t("&#0; &#xD800;", "\xef\xbf\xbd \xef\xbf\xbd", 0, "invalid code points -> U+FFFD");
	t("a<br>b<br/>c<br />d", "a\nb\nc\nd", 0, "<br> is a line break");
	t("<span style=\"x\">in</span> <b>bold</b> <small>s</small>", "in bold s", 0, "other tags stripped, text kept");
	t("a < b > c <3", "a < b > c <3", 0, "lone angle brackets kept");
}

/* Tidy. */
static void case_tidy(void)
{
	t("by {{lang|fr|X}}, and", "by, and", 0, "space before comma after removed template");
	t("X ({{lang-en|x}}) is", "X is", 0, "empty parentheses removed");
	t("織機（しょっき、{{lang-en|loom}}）は", "織機（しょっき）は", 0, "Japanese: trailing 、 before ） removed");
}

/* Disambiguation. */
static void case_disambiguation(void)
{
	free(clean("x {{Disambiguation}}", 20, 0));
	ok(info.disambiguation, "{{Disambiguation}} detected");
	free(clean("x {{曖昧さ回避}}", strlen("x {{曖昧さ回避}}"), 0));
	ok(info.disambiguation, "{{曖昧さ回避}} detected");
	free(clean("x {{Place name disambiguation|y}}", 33, 0));
	ok(info.disambiguation, "{{... disambiguation}} detected");
	free(clean("x {{cite}}", 10, 0));
	ok(!info.disambiguation, "ordinary template is not a disambiguation");
}

/* UTF-8. */
static void case_utf8(void)
{
	{
		const char in[] = "ok \xff \xc3( \xe2\x82 \xf0\x9f\x98\x80 \xed\xa0\x80 \xc0\xaf end";
		char *got = clean(in, sizeof in - 1, 0);
		is_str(got, "ok \xef\xbf\xbd \xef\xbf\xbd( \xef\xbf\xbd\xef\xbf\xbd \xf0\x9f\x98\x80 "
			    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd end",
		       "invalid UTF-8 replaced, valid kept");
		is_int(info.invalid_utf8, 9, "invalid bytes counted");
		is_int(info.chars, 23, "characters counted");
		free(got);
	}
	{
		/* streaming sanitizer: a sequence split across calls */
		struct loom_wt_buf out = { 0 };
		unsigned char carry[4];
		int nc = 0;
		const char *s = "a\xe6\x97\xa5" "b";
		int64_t bad = 0;
		for (size_t i = 0; i < 5; i++)
			bad += loom_utf8_sanitize(s + i, 1, &out, carry, &nc, 1);
		bad += loom_utf8_sanitize("", 0, &out, carry, &nc, 0);
		ok(out.len == 5 && memcmp(out.p, s, 5) == 0 && bad == 0, "sanitize: split sequence joined");
		out.len = 0;
		bad = loom_utf8_sanitize("\xe6\x97", 2, &out, carry, &nc, 1);
		bad += loom_utf8_sanitize("", 0, &out, carry, &nc, 0);
		ok(out.len == 6 && bad == 2, "sanitize: truncated sequence at the end is bad");
		loom_wt_buf_free(&out);
	}
	{
		/* valid_utf8 skips the repair pass: same output on valid text */
		const char *in = "''日本'' [[a|b]] {{c}} &amp; <ref>x</ref>\n* item";
		struct loom_wikitext_opts o = { 0, 0, 1 };
		struct loom_wikitext *w = loom_wikitext_new(&o);
		struct loom_wt_buf out = { 0 };
		char *want = clean(in, strlen(in), 0);
		ok(loom_wikitext_clean(w, in, strlen(in), &out, NULL) == 0 && out.len == strlen(want) &&
		   memcmp(out.p, want, out.len) == 0, "valid_utf8: same output");
		free(want);
		loom_wt_buf_free(&out);
		loom_wikitext_free(w);
	}
	t("日本語の[[記事|文章]]は'''そのまま'''。", "日本語の文章はそのまま。", 0, "Japanese text unharmed");
}

/* Linear time on hostile input: the searches ahead of the cursor (closing
 * tags, '>', ']') are memoized, so the bytes they examine stay a small
 * multiple of the input whatever the input; a search repeated from every
 * opener would examine ~n^2/2. */
static void case_hostile_input(void)
{
	size_t n = 4u << 20;
	char *big = malloc(n + 1);
	const char *pat[] = { "{", "[[", "{{a|", "<ref>", "[http://a ", "{|\n", "<b ", "&#",
			      "<ref ", "<nowiki>", "<pre>x</pr", "<ref>a</" };
	for (size_t p = 0; p < sizeof pat / sizeof pat[0]; p++) {
		size_t l = strlen(pat[p]);
		for (size_t i = 0; i < n; i++)
			big[i] = pat[p][i % l];
		char *got = clean(big, n, 0);
		ok(info.scanned <= 3 * (uint64_t)n, "4 MB of '%s'...: %llu bytes examined (%.2f per byte)",
		   p == 5 ? "{|\\n" : pat[p], (unsigned long long)info.scanned, (double)info.scanned / n);
		free(got);
	}
	/* memory: scratch a small multiple of the page whatever the markup
	 * (one span per "[[" or "{{" was 24x the page) */
	const char *mem[] = { "[[", "{{a|", "[[a]]", "{{", "]]", "[[File:a|", "\xff",
			      "<nowiki>[</nowiki>", "{|\n|a||b\n" };
	for (size_t p = 0; p < sizeof mem / sizeof mem[0]; p++) {
		size_t l = strlen(mem[p]);
		for (size_t i = 0; i < n; i++)
			big[i] = mem[p][i % l];
		for (int keep = 0; keep < 2; keep++) {
			char *got = clean(big, n, keep ? TABLES : 0);
			ok(info.scratch <= 8 * (uint64_t)n,
			   "4 MB of '%s'...%s: %.1f MB scratch (%.2fx the page)",
			   p == 6 ? "\\xff" : p == 8 ? "{|\\n|a||b\\n" : mem[p],
			   keep ? " (tables kept)" : "", info.scratch / 1e6, (double)info.scratch / n);
			free(got);
		}
	}
	{
		char *lit = malloc(n + 32);
		size_t k = (size_t)sprintf(lit, "<nowiki>");
		memset(lit + k, '[', n - 32);
		k += n - 32;
		k += (size_t)sprintf(lit + k, "</nowiki>");
		char *got = clean(lit, k, 0);
		/* markup inside <nowiki> is held as 6-byte entities
		 * until the last pass, in both ping-pong buffers */
		ok(strlen(got) == n - 32 && info.scratch <= 13 * (uint64_t)k,
		   "4 MB of <nowiki>[[[...: %.1f MB scratch (%.2fx the page, 6-byte entities)",
		   info.scratch / 1e6, (double)info.scratch / k);
		free(got);
		free(lit);
	}
	/* deeply nested, balanced */
	size_t d = 1u << 20, k = 0;
	for (size_t i = 0; i < d; i++)
		big[k++] = '[', big[k++] = '[';
	big[k++] = 'x';
	for (size_t i = 0; i < d; i++)
		big[k++] = ']', big[k++] = ']';
	char *got = clean(big, k, 0);
	is_str(got, "x", "1M nested links -> x");
	ok(info.scratch <= 12 * (uint64_t)k, "1M nested links: %.1f MB scratch (%.2fx the page)",
	   info.scratch / 1e6, (double)info.scratch / k);
	{
		/* the same object after it gave back its emptied stack */
		struct loom_wikitext *w = loom_wikitext_new(NULL);
		struct loom_wt_buf out = { 0 };
		const char *next = "[[x|[[y|[[a]]]]]] [[b|c]]";
		int r1 = loom_wikitext_clean(w, big, k, &out, NULL);
		out.len = 0;
		int r2 = loom_wikitext_clean(w, next, strlen(next), &out, NULL);
		ok(r1 == 0 && r2 == 0 && out.len == 3 && !memcmp(out.p, "a c", 3),
		   "a page after 1M nested links, same object");
		loom_wt_buf_free(&out);
		loom_wikitext_free(w);
	}
	free(got);
	k = 0;
	for (size_t i = 0; i < d; i++)
		big[k++] = '{', big[k++] = '{';
	for (size_t i = 0; i < d; i++)
		big[k++] = '}', big[k++] = '}';
	got = clean(big, k, 0);
	is_str(got, "", "1M nested templates removed");
	free(got);
	free(big);
}

int main(void)
{
	case_templates();
	case_tables();
	case_tags_and_comments();
	case_links();
	case_quotes_headings_lists();
	case_entities_and_tags();
	case_tidy();
	case_disambiguation();
	case_utf8();
	case_hostile_input();
	return done_testing();
}
