/* Unit tests for loom_example_line: Examples rendered as loom-cat's lines,
 * bare ids and JSON (the one-feature fast path, and every feature of
 * another Example through loom_example_to_json), extremes of int64, the
 * buffers reused and grown across records, and the refusals; no tool. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom_example.h"
#include "loom_example_line.h"
#include "tap.h"

static struct loom_example_line l;
static uint8_t pay[1 << 16];

/* The line of payload pay[0..n), NUL-terminated, or "ERROR <msg>". */
static const char *render(size_t n, const char *key, int ids_only)
{
	static char out[1 << 18];
	const char *line;
	size_t len;
	if (loom_example_line(&l, pay, n, key, ids_only, &line, &len) < 0)
		snprintf(out, sizeof out, "ERROR %s", l.err.msg);
	else
		snprintf(out, sizeof out, "%.*s", (int)len, line);
	return out;
}

int main(void)
{
	loom_example_line_init(&l);
	int64_t v[] = { INT64_MIN, INT64_MAX, 0, -1, 50256 };
	size_t n = loom_example_encode_i64("input_ids", v, 5, pay);
	is_str(render(n, "input_ids", 0),
	       "{\"input_ids\":[-9223372036854775808,9223372036854775807,0,-1,50256]}\n",
	       "JSON, the fast path");
	is_str(render(n, "input_ids", 1), "-9223372036854775808 9223372036854775807 0 -1 50256\n",
	       "bare ids");
	n = loom_example_encode_i64("input_ids", v, 0, pay);
	is_str(render(n, "input_ids", 1), "\n", "no values: an empty line");
	is_str(render(n, "input_ids", 0), "{\"input_ids\":[]}\n", "no values: an empty list");

	int64_t a[] = { 7, 8 }, b[] = { -3 };
	struct loom_example_i64 two[] = { { "ids", a, 2 }, { "mask", b, 1 } };
	n = loom_example_encode_i64s(two, 2, pay);
	is_str(render(n, "input_ids", 0), "{\"ids\":[7,8],\"mask\":[-3]}\n",
	       "two features: every one, through to_json");
	is_str(render(n, "mask", 1), "-3\n", "--ids of one feature of several");
	is_str(render(n, "input_ids", 1), "ERROR no feature 'input_ids'", "--ids of a feature it lacks");

	static int64_t many[8000];
	for (int i = 0; i < 8000; i++)
		many[i] = (int64_t)i * 1000003;
	n = loom_example_encode_i64("input_ids", many, 8000, pay);
	const char *s = render(n, "input_ids", 0);
	ok(!strncmp(s, "{\"input_ids\":[0,1000003,2000006,", 31) &&
	   strstr(s, ",7999023997]}\n") && strlen(s) > 8000 * 2, "a large record after small ones");
	n = loom_example_encode_i64("k\"q", v, 2, pay);
	is_str(render(n, "k\"q", 0), "{\"k\\\"q\":[-9223372036854775808,9223372036854775807]}\n",
	       "a key JSON must escape: not the fast path");

	memcpy(pay, "not a protobuf", 14);
	ok(!strncmp(render(14, "input_ids", 0), "ERROR not a tf.train.Example", 28), "garbage: refused");
	loom_example_line_release(&l);
	loom_example_line_release(&l);
	return done_testing();
}
