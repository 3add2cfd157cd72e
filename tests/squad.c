/* tests/squad.c - loom_squad: reading SQuAD v1.1 files (answer positions
 * by code point, every refusal named) and the official EM/F1 (the
 * normalization of evaluate-v1.1.py, Python's float repr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_squad.h"
#include "loom_wordpiece.h"
#include "tap.h"

/* "Éclair" makes code points and bytes differ before the answers. */
static const char DATA[] =
	"{\"version\": \"1.1\", \"data\": [{\"title\": \"T\", \"paragraphs\": ["
	"{\"context\": \"\\u00c9clair: The Denver Broncos won the game in 2016.\","
	" \"qas\": ["
	"  {\"id\": \"q1\", \"question\": \"Who won?\", \"answers\": ["
	"    {\"text\": \"The Denver Broncos\", \"answer_start\": 8},"
	"    {\"text\": \"Denver Broncos\", \"answer_start\": 12}]},"
	"  {\"id\": \"q2\", \"question\": \"When?\", \"answers\": ["
	"    {\"text\": \"2016\", \"answer_start\": 43}]}]},"
	"{\"context\": \"Second paragraph.\", \"qas\": ["
	"  {\"id\": \"q3\", \"question\": \"Which?\", \"answers\": ["
	"    {\"text\": \"Second\", \"answer_start\": 0}]}]}]}]}";

static struct loom_squad *load(void)
{
	struct loom_squad *s = loom_squad_new();
	int rc = loom_squad_load_mem(s, DATA, sizeof DATA - 1, "dev.json");
	if (rc)
		diag("%s", loom_squad_error(s));
	return s;
}

static void case_load(void)
{
	struct loom_squad *s = load();
	is_int(s->n_paras, 2, "2 paragraphs");
	is_int(s->n_qas, 3, "3 questions");
	is_str(s->version, "1.1", "version");
	is_str(s->qas[0].id, "q1", "first id");
	is_int(s->qas[0].n_answers, 2, "two gold answers");
	is_int(s->qas[0].answers[0].start, 9, "answer_start 8 (code points) is byte 9 after the 2-byte E acute");
	is_int(s->qas[1].answers[0].start, 44, "2016 at byte 44");
	is_int(s->qas[2].para, 1, "q3 in the second paragraph");
	is_str(s->paras[1].title, "T", "title");
	loom_squad_free(s);
	loom_squad_free(NULL);
}

static double em_of(const char *pred, const char *gold)
{
	struct loom_squad_answer g = { gold, strlen(gold), 0 };
	double em, f1;
	if (loom_squad_metrics(pred, strlen(pred), &g, 1, &em, &f1))
		return -1;
	return em;
}

static double f1_of(const char *pred, const char *gold)
{
	struct loom_squad_answer g = { gold, strlen(gold), 0 };
	double em, f1;
	if (loom_squad_metrics(pred, strlen(pred), &g, 1, &em, &f1))
		return -1;
	return f1;
}

static void case_metrics(void)
{
	ok(em_of("the Denver Broncos!", "Denver Broncos") == 1, "EM: articles and punctuation removed");
	ok(em_of("DENVER  broncos", "denver broncos") == 1, "EM: case and white space");
	ok(em_of("an apple", "apple") == 1, "EM: 'an' is an article");
	ok(em_of("anapple", "apple") == 0, "EM: 'an' inside a word is kept");
	ok(em_of("the_apple", "apple") == 0, "EM: '_' is a word character, so no \\b");
	ok(em_of("\xc3\xa9the apple", "\xc3\xa9 apple") == 0,
	   "EM: letters are word characters (no \\b between \xc3\xa9 and 'the')");
	ok(em_of("the\xc3\xa9 x", "x") == 0, "EM: no \\b between 'the' and a letter");
	ok(em_of("x\xe3\x80\x80y", "x y") == 1, "EM: U+3000 is white space");
	ok(em_of("a\xe3\x80\x80" "b", "b") == 1, "EM: an article before U+3000 goes");
	ok(em_of("x\x1cy", "x y") == 1, "EM: U+001C is white space to Python");
	ok(em_of("\xc4\xb0stanbul", "i\xcc\x87stanbul") == 1, "EM: U+0130 lower-cases to i + U+0307");
	ok(em_of("", "") == 1 && f1_of("", "") == 0, "empty vs empty: EM 1, F1 0 (as the script)");
	ok(f1_of("Denver Broncos won", "Denver Broncos") > 0.7999999 &&
	   f1_of("Denver Broncos won", "Denver Broncos") < 0.8000001, "F1 0.8");
	ok(f1_of("a b b", "b b c") == f1_of("b c b", "b b a"), "F1 counts tokens as a multiset");
	ok(f1_of("b b", "b b c") > 0.7999999 && f1_of("b b", "b b c") < 0.8000001,
	   "F1 0.8 with a repeated token (a set would give 2/3)");
	ok(f1_of("x", "y") == 0, "F1 0 without a shared token");
}

static const char *score(const char *pred, int *rc, struct loom_squad_score *sc)
{
	static char out[128];
	struct loom_squad *s = load();
	*rc = loom_squad_score_mem(s, pred, strlen(pred), "pred.json", sc);
	char a[40], b[40];
	if (*rc)
		snprintf(out, sizeof out, "%s", loom_squad_error(s));
	else
		snprintf(out, sizeof out, "%s %s", loom_double_repr(sc->exact_match, a, sizeof a),
			 loom_double_repr(sc->f1, b, sizeof b));
	loom_squad_free(s);
	return out;
}

static void case_score(void)
{
	struct loom_squad_score sc;
	int rc;
	is_str(score("{\"q1\": \"Broncos\", \"q2\": \"in 2016\", \"q3\": \"second\"}", &rc, &sc),
	       "33.333333333333336 77.77777777777777",
	       "scores as the official script prints them (evaluate-v1.1.py on the same files)");
	is_int(sc.unanswered, 0, "all answered");
	is_str(score("{\"q1\": \"Denver Broncos\"}", &rc, &sc), "33.333333333333336 33.333333333333336",
	       "missing predictions score 0 and count");
	is_int(sc.unanswered, 2, "two unanswered");
	is_str(score("{\"q1\": 3}", &rc, &sc), "pred.json: question q1: the prediction is not a string",
	       "a prediction that is not a string is refused");
	is_str(score("[1]", &rc, &sc), "pred.json: not a JSON object of question id -> answer text",
	       "predictions not an object");
	ok(strstr(score("{\"q1\": ", &rc, &sc), "pred.json:1:") != NULL, "truncated predictions: line, column");
}

static void case_bad(void)
{
	static const struct {
		const char *json, *msg;
	} bad[] = {
		{ "{\"data\": [", "d.json:1:10: " },
		{ "{\"version\": \"1.1\"}", "d.json: no \"data\" array: not a SQuAD file" },
		{ "{\"data\": [{\"paragraphs\": [{\"context\": \"\", \"qas\": []}]}]}",
		  "d.json: article 0 paragraph 0: empty context" },
		{ "{\"data\": [{\"paragraphs\": [{\"context\": \"abc\", \"qas\": [{\"id\": \"x\", "
		  "\"question\": \"q\", \"answers\": [{\"text\": \"bc\", \"answer_start\": 0}]}]}]}]}",
		  "d.json: question x: answer 0: answer_start 0 is not where its text is in the context" },
		{ "{\"data\": [{\"paragraphs\": [{\"context\": \"abc\", \"qas\": [{\"id\": \"x\", "
		  "\"question\": \"q\", \"answers\": [{\"text\": \"c\", \"answer_start\": 9}]}]}]}]}",
		  "d.json: question x: answer 0: answer_start 9 is outside the context" },
		{ "{\"data\": [{\"paragraphs\": [{\"context\": \"abc\", \"qas\": [{\"id\": \"x\", "
		  "\"question\": \"q\", \"answers\": [{\"text\": \"c\", \"answer_start\": 2}]}, "
		  "{\"id\": \"x\", \"question\": \"q\", \"answers\": []}]}]}]}",
		  "d.json: question x: the id repeats" },
		{ "{\"data\": [{\"paragraphs\": [{\"context\": \"abc\", \"qas\": [{\"id\": \"x\", "
		  "\"question\": \"q\", \"answers\": []}]}]}]}",
		  "d.json: question x: empty \"answers\": a SQuAD 2.0 question without an answer; loom reads SQuAD v1.1" },
		{ "{\"data\": [{\"paragraphs\": [{\"context\": \"abc\", \"qas\": [{\"id\": \"y\", "
		  "\"question\": \"q\", \"answers\": [{\"text\": \"c\", \"answer_start\": 2}], "
		  "\"is_impossible\": true}]}]}]}",
		  "d.json: question y: \"is_impossible\": true: a SQuAD 2.0 question without an answer" },
		{ "{\"data\": [{\"paragraphs\": [{\"context\": \"abc\", \"qas\": [{\"id\": \"x\", "
		  "\"answers\": []}]}]}]}",
		  "d.json: question x: no \"question\" string" },
		{ "{\"data\": [{\"paragraphs\": [{\"context\": \"abc\", \"qas\": [{\"id\": \"x\", "
		  "\"question\": \"q\", \"answers\": [{\"text\": \"c\"}]}]}]}]}",
		  "d.json: question x: answer 0 has no \"answer_start\" integer" },
		{ "{\"data\": [{\"title\": 1}]}", "d.json: article 0 has no \"paragraphs\" array" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct loom_squad *s = loom_squad_new();
		int rc = loom_squad_load_mem(s, bad[i].json, strlen(bad[i].json), "d.json");
		is_int(rc, LOOM_EFORMAT, "bad file %zu refused", i);
		ok(!strncmp(loom_squad_error(s), bad[i].msg, strlen(bad[i].msg)), "message %zu: %s", i,
		   loom_squad_error(s));
		loom_squad_free(s);
	}
	struct loom_squad *s = loom_squad_new();
	is_int(loom_squad_load(s, "/dev/zero"), LOOM_EFORMAT, "/dev/zero refused");
	is_str(loom_squad_error(s), "'/dev/zero' is a device, not a file or a pipe", "named");
	loom_squad_free(s);
}

/* Context "a b c d e f g h" (one token a word), question "q", answer "f
 * g": its tokenizer and data set. */
static int abc_load(struct loom_wordpiece **w, struct loom_squad **s)
{
	static const char vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nq\na\nb\nc\nd\ne\nf\ng\nh\n";
	static const char data[] =
		"{\"data\": [{\"paragraphs\": [{\"context\": \"a b c d e f g h\", \"qas\": ["
		"{\"id\": \"x\", \"question\": \"Q\", \"answers\": [{\"text\": \"f g\", \"answer_start\": 10}]}]}]}]}";
	*w = loom_wordpiece_new();
	*s = loom_squad_new();
	return loom_wordpiece_load_mem(*w, vocab, sizeof vocab - 1, "v", NULL) ||
	       loom_squad_load_mem(*s, data, sizeof data - 1, "d");
}

/* Windows and answer positions, seq 8: room for 8 - 3 - 1 = 4 context
 * tokens. */
static void case_features(void)
{
	struct loom_wordpiece *w;
	struct loom_squad *s;
	ok(!abc_load(&w, &s), "load");
	struct loom_squad_feature_opts o = { 8, 2, 64 };
	struct loom_squad_features F;
	is_int(loom_squad_features(s, w, &o, &F), 0, "features");
	is_int(F.n, 3, "windows at 0, 2, 4 (stride 2) until one reaches the end");
	static const uint32_t want0[8] = { 2, 4, 3, 5, 6, 7, 8, 3 };
	is_mem(F.input_ids, want0, sizeof want0, "[CLS] q [SEP] a b c d [SEP]");
	static const uint8_t seg0[8] = { 0, 0, 0, 1, 1, 1, 1, 1 };
	is_mem(F.segment_ids, seg0, 8, "segment ids");
	static const uint32_t want2[8] = { 2, 4, 3, 9, 10, 11, 12, 3 };
	is_mem(F.input_ids + 16, want2, sizeof want2, "last window: e f g h");
	ok(F.f[0].start == 0 && F.f[0].end == 0, "window 0 lacks the answer: [CLS]");
	ok(F.f[1].start == 0 && F.f[1].end == 0, "window 1 (c d e f) lacks g: [CLS]");
	ok(F.f[2].start == 4 && F.f[2].end == 5, "window 2: f g at 4, 5");
	is_int(F.f[2].ctx_first, 4, "window 2 starts at context token 4");
	is_int(F.tok_start[F.ctx_off[0] + 5], 10, "token f starts at byte 10");
	loom_squad_features_release(&F);
	o.seq = 4;
	is_int(loom_squad_features(s, w, &o, &F), LOOM_EINVAL, "no room for the context");
	ok(strstr(loom_squad_error(s), "question x: 1 question tokens leave no room") != NULL,
	   "named: %s", loom_squad_error(s));
	struct loom_wordpiece *none = loom_wordpiece_new();
	o.seq = 8;
	is_int(loom_squad_features(s, none, &o, &F), LOOM_EINVAL,
	       "a tokenizer without a vocabulary is refused (it has no [CLS])");
	is_str(loom_squad_error(s), "the vocabulary lacks [CLS]", "so named");
	loom_wordpiece_free(none);
	loom_squad_free(s);
	loom_wordpiece_free(w);
}

/* Predictions from logits, on the windows of case_features: a b c d |
 * c d e f | e f g h (positions 3..6 of each feature are the context). */
static void case_predict(void)
{
	struct loom_wordpiece *w;
	struct loom_squad *s;
	struct loom_squad_feature_opts o = { 8, 2, 64 };
	struct loom_squad_features F;
	ok(!abc_load(&w, &s) && !loom_squad_features(s, w, &o, &F) && F.n == 3, "three windows");
	/* max context: min(left, right) + 0.01 x 4, the first best window */
	ok(loom_squad_max_context(&F, 0, 5) && !loom_squad_max_context(&F, 1, 3),
	   "c: window 0 (1 left... 1 right) beats window 1 (0 left)");
	ok(loom_squad_max_context(&F, 1, 4) && !loom_squad_max_context(&F, 0, 6),
	   "d: window 1 beats window 0 (its last token)");
	ok(!loom_squad_max_context(&F, 0, 0) && !loom_squad_max_context(&F, 0, 7) &&
	   !loom_squad_max_context(&F, 0, 2), "[CLS], [SEP]: no context");
	float sl[24] = { 0 }, el[24] = { 0 };
	sl[0 * 8 + 5] = 5;	/* window 0: c .. d, 10 */
	el[0 * 8 + 6] = 5;
	sl[1 * 8 + 3] = 50;	/* window 1: c .. c, 100, but c's window is 0 */
	el[1 * 8 + 3] = 50;
	sl[2 * 8 + 5] = 6;	/* window 2: g .. h, 12 */
	el[2 * 8 + 6] = 6;
	struct loom_squad_prediction p;
	struct loom_squad_post_opts po = { 20, 30 };
	is_int(loom_squad_predict(s, &F, sl, el, &po, &p), 0, "predict");
	ok(p.feature == 2 && p.tok_start == 5 && p.tok_end == 6 && p.score == 12 && p.start == 12 &&
	   p.len == 3, "the best window's span (g h, bytes 12..15), not window 1's c (not its max context)");
	po.max_answer = 1;
	loom_squad_predict(s, &F, sl, el, &po, &p);
	ok(p.feature == 2 && p.tok_start == 5 && p.tok_end == 5 && p.start == 12 && p.len == 1,
	   "max_answer 1: g (6 + 0; h's 0 + 6 ties, later)");
	po.n_best = 4;
	loom_squad_predict(s, &F, sl, el, &po, &p);
	ok(p.feature == -1 && p.len == 0,
	   "n_best 4 (positions 0..2 are candidates too): no valid span, the empty answer");
	po.n_best = 5;
	loom_squad_predict(s, &F, sl, el, &po, &p);
	ok(p.feature == 0 && p.tok_start == 3 && p.tok_end == 3 && p.score == 0 && p.start == 0 &&
	   p.len == 1, "n_best 5: position 3 joins: a (score 0, the first of the ties)");
	po.n_best = 0;
	is_int(loom_squad_predict(s, &F, sl, el, &po, &p), LOOM_EINVAL, "n_best 0 refused");
	po.n_best = 9;
	po.max_answer = 0;
	is_int(loom_squad_predict(s, &F, sl, el, &po, &p), LOOM_EINVAL, "max_answer 0 refused");
	po = (struct loom_squad_post_opts){ 20, 30 };
	loom_squad_predict(s, &F, sl, el, &po, &p);
	const char *path = tap_path("pred.json");
	is_int(loom_squad_write_predictions(s, &p, path), 0, "write the predictions");
	size_t len;
	char *txt = tap_slurp(&len, "%s", path);
	is_str(txt, "{\n    \"x\": \"g h\"\n}\n", "{id: answer}, indented, a newline at the end");
	free(txt);
	struct loom_squad_score sc;
	ok(!loom_squad_score_file(s, path, &sc) && sc.exact_match == 0 && sc.f1 == 50,
	   "and scored (g h against f g: F1 50)");
	loom_squad_features_release(&F);
	loom_squad_free(s);
	loom_wordpiece_free(w);
}

int main(void)
{
	case_load();
	case_metrics();
	case_score();
	case_bad();
	case_features();
	case_predict();
	return done_testing();
}
