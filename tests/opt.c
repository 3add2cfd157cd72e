/* Unit tests for loom_opt (lib/common/loom_opt.h), with no tool: the
 * --help and --list-options texts of a table, getopt_long's tables (an
 * alias returns its target's code), which argv words take the next one,
 * and values checked and stored with the messages the tools print. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "loom_opt.h"
#include "tap.h"

static int flag, n;
static uint64_t big;
static double w;
static const char *out;
static void cb(const char *opt, const char *arg) { (void)opt; (void)arg; }
static int is_key(const char *name) { return !strcmp(name, "n_layer") || !strcmp(name, "n_head") ||
					      !strcmp(name, "threads_x"); }

static const struct loom_opt opts[] = {
	{ .kind = LOOM_OPT_STRING, .short_name = 'o', .name = "output", .var.s = &out, .arg = "FILE",
	  .help = "write to FILE\n(default: stdout)" },
	{ .kind = LOOM_OPT_TEXT, .help = "More:" },
	{ .kind = LOOM_OPT_SET, .short_name = 'z', .name = "null", .var.i = &flag, .value = 1,
	  .help = "NUL ends" },
	{ .kind = LOOM_OPT_INT, .short_name = 'j', .name = "threads", .var.i = &n, .arg = "N",
	  .min = 1, .max = 64, .help = "threads" },
	{ .kind = LOOM_OPT_ALIAS, .name = "jobs", .help = "threads" },
	{ .kind = LOOM_OPT_ALIAS, .short_name = 'L', .help = "threads" },
	{ .kind = LOOM_OPT_U64, .name = "big", .var.u = &big, .arg = "N", .max = 1000, .help = "big" },
	{ .kind = LOOM_OPT_DOUBLE, .name = "smooth", .var.d = &w, .arg = "W", .dmin = 0, .dmax = 0.5,
	  .help = "weight" },
	{ .kind = LOOM_OPT_CALL, .name = "format", .var.fn = cb, .arg = "FMT", .help = "format",
	  .values = "a b" },
	{ .kind = LOOM_OPT_END },
};

int main(void)
{
	char *h = loom_opt_help("usage: x [options]\n", opts, "Footer.\n");
	is_str(h, "usage: x [options]\n"
		  "  -o, --output FILE  write to FILE\n"
		  "                     (default: stdout)\n"
		  "More:\n"
		  "  -z, --null         NUL ends\n"
		  "  -j, --threads N    threads\n"
		  "      --big N        big\n"
		  "      --smooth W     weight\n"
		  "      --format FMT   format\n"
		  "Footer.\n", "--help: a column (the widest lead + 2), aliases not shown");
	free(h);
	char *l = loom_opt_list(opts);
	is_str(l, "-o --output\n-z --null\n-j --threads\n--big\n--smooth\n--format : a b\n",
	       "--list-options");
	free(l);

	struct option *lo;
	char *shorts;
	struct loom_err err;
	is_int(loom_opt_getopt(opts, 9, 1000, &lo, &shorts, &err), 0, "getopt tables");
	is_str(shorts, "o:zj:L:", "short options: an alias's letter takes its target's argument");
	ok(!strcmp(lo[3].name, "jobs") && lo[3].val == 'j' && lo[3].has_arg == required_argument,
	   "--jobs returns -j's code");
	ok(!strcmp(lo[4].name, "big") && lo[4].val == 256 + 6, "a long-only option: 256 + its index");
	ok(!strcmp(lo[7].name, "list-options") && lo[7].val == 1000 && !lo[8].name,
	   "--list-options, then the end");
	free(lo);
	free(shorts);
	struct loom_opt broken[] = { { .kind = LOOM_OPT_ALIAS, .name = "x", .help = "none" },
				     { .kind = LOOM_OPT_END } };
	is_int(loom_opt_getopt(broken, 1, 1000, &lo, &shorts, &err), LOOM_EINVAL, "an alias of nothing");
	is_str(err.msg, "internal error: alias of an option --none that the table lacks", "says so");
	free(lo);
	free(shorts);

	ok(loom_opt_takes_next(opts, "--output") && loom_opt_takes_next(opts, "--out") &&
	   !loom_opt_takes_next(opts, "--output=x") && !loom_opt_takes_next(opts, "--null"),
	   "long names, abbreviated, '=' joined");
	ok(loom_opt_takes_next(opts, "--jobs") && loom_opt_takes_next(opts, "-L") &&
	   loom_opt_takes_next(opts, "-zj") && !loom_opt_takes_next(opts, "-j4") &&
	   !loom_opt_takes_next(opts, "-z"), "aliases and clusters");

	is_int(loom_opt_store(&opts[3], "8", &err), 0, "--threads 8");
	is_int(n, 8, "stored");
	is_int(loom_opt_store(&opts[3], "65", &err), LOOM_ERANGE, "--threads 65");
	is_str(err.msg, "--threads: '65' is out of range [1, 64]", "its message");
	is_int(loom_opt_store(&opts[6], "x", &err), LOOM_EINVAL, "--big x");
	is_str(err.msg, "--big: 'x' is not a whole number", "its message");
	ok(!loom_opt_store(&opts[6], "0x10", &err) && big == 16, "hex");
	is_int(loom_opt_store(&opts[7], "0.6", &err), LOOM_ERANGE, "--smooth 0.6");
	is_str(err.msg, "--smooth: '0.6' is out of range [0, 0.5]", "its message");
	is_int(loom_opt_store(&opts[7], "y", &err), LOOM_EINVAL, "--smooth y");
	is_str(err.msg, "--smooth: 'y' is not a number", "its message");
	ok(!loom_opt_store(&opts[7], "0.25", &err) && w == 0.25, "--smooth 0.25");
	ok(!loom_opt_store(&opts[0], "f", &err) && !strcmp(out, "f") &&
	   !loom_opt_store(&opts[2], NULL, &err) && flag == 1, "a string, a flag");
	ok(loom_opt_store(&opts[8], "a", &err) == LOOM_EINVAL, "a callback is not stored");

	char name[64];
	const char *v;
	char *argv1[] = { "x", "--out", "f", "--n_layer", "3", "--", "--n_head=2", NULL };
	is_int(loom_opt_key_word(opts, 7, argv1, is_key, name, &v), 3, "a key given as an option");
	ok(!strcmp(name, "n_layer") && !strcmp(v, "3"), "its name and the next word");
	char *argv2[] = { "x", "--n_head=2", NULL };
	ok(loom_opt_key_word(opts, 2, argv2, is_key, name, &v) == 1 && !strcmp(v, "2"), "--KEY=V");
	char *argv3[] = { "x", "--n_layer", "-j", "2", "--help", NULL };
	ok(loom_opt_key_word(opts, 4, argv3, is_key, name, &v) == 1 && !strcmp(v, "V"),
	   "no value after it: V");
	char *argv4[] = { "x", "--thr", "3", "--bogus", "--", "--n_layer", NULL };
	is_int(loom_opt_key_word(opts, 6, argv4, is_key, name, &v), 0,
	       "an abbreviated option, an unknown word, a key after --: none");

	uint64_t a, b;
	ok(!loom_opt_range("-r", "3:5", &a, &b, &err) && a == 3 && b == 5, "range A:B");
	ok(!loom_opt_range("-r", "7", &a, &b, &err) && a == 7 && b == 8, "range A: one");
	ok(!loom_opt_range("-r", ":4", &a, &b, &err) && a == 0 && b == 4 &&
	   !loom_opt_range("-r", "4:", &a, &b, &err) && a == 4 && b == UINT64_MAX &&
	   !loom_opt_range("-r", ":", &a, &b, &err) && a == 0 && b == UINT64_MAX, "open ends");
	is_int(loom_opt_range("-r", "5:3", &a, &b, &err), LOOM_ERANGE, "B before A");
	is_str(err.msg, "-r: end 3 is before start 5", "its message");
	is_int(loom_opt_range("-r", "1:y", &a, &b, &err), LOOM_EINVAL, "not a number");
	is_str(err.msg, "-r: 'y' is not a whole number", "its message");
	is_int(loom_opt_range("-r", "123456789012345678901234567890123:4", &a, &b, &err), LOOM_EINVAL,
	       "a left side too long");
	is_str(err.msg, "-r: '123456789012345678901234567890123:4' is not A:B", "its message");
	is_int(loom_opt_range("-r", "18446744073709551615", &a, &b, &err), LOOM_ERANGE,
	       "A alone has a successor");
	return done_testing();
}
