/*
 * loom_opt.h - option tables, the part that needs no terminal: an option
 * entry, the --help and --list-options texts made from a table,
 * getopt_long's tables, the values checked and stored (in the spirit of
 * git's parse-options, which lives in libgit).
 *
 * Purpose: a command declares each option once, in a table of struct
 * loom_opt ended by LOOM_OPT_END (tools/cli.h has the OPT_*() lines that
 * fill it, and the parser that prints and exits).  Here:
 *   loom_opt_help     usage, then a line per option ("  -o, --output PATH"
 *                     and its text in a column; '\n' in a text continues
 *                     it below), then the footer
 *   loom_opt_list     "-o --output" per option, " : VALUES" when its
 *                     values are enumerated (shell completion)
 *   loom_opt_getopt   getopt_long's long table and short string; an
 *                     alias's names return its target's code
 *   loom_opt_takes_next  whether an argv word takes the next word as its
 *                     argument (so a command word can be found among them)
 *   loom_opt_store    a value checked and stored (SET, STRING, INT, U64,
 *                     DOUBLE): whole numbers or numbers in their range
 *   loom_opt_u64, loom_opt_double  the same checks for callbacks
 *   loom_opt_key_word  a configuration key given as if it were an option
 *   loom_opt_range    a range of whole numbers, A:B
 * A long name may be abbreviated, as getopt_long allows.
 *
 * Ownership: the table is the caller's; the texts and getopt tables
 * returned are malloc'd, the caller frees them.  Errors: 0 or negative
 * LOOM_E* (LOOM_EINVAL: not a number; LOOM_ERANGE: out of range), one line
 * naming the option in *err; NULL for out of memory.
 * Thread-safety: the default (loom_common.h).
 */
#ifndef LOOM_OPT_H
#define LOOM_OPT_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"

enum loom_opt_kind {
	LOOM_OPT_END, LOOM_OPT_TEXT, /* end of table; a line of text in --help */
	LOOM_OPT_SET,            /* no argument: *var.i = value */
	LOOM_OPT_STRING,         /* *var.s = the argument */
	LOOM_OPT_INT,            /* *var.i: a whole number in [min, max] */
	LOOM_OPT_U64,            /* *var.u: a whole number in [min, max] */
	LOOM_OPT_DOUBLE,         /* *var.d: a number in [dmin, dmax] */
	LOOM_OPT_CALL,           /* var.fn("--name", argument or NULL) */
	LOOM_OPT_HELP, LOOM_OPT_VERSION, LOOM_OPT_VERBOSE, LOOM_OPT_QUIET, LOOM_OPT_PROGRESS,
	LOOM_OPT_ALIAS,          /* another spelling of the option .help names */
};

struct loom_opt {
	enum loom_opt_kind kind;
	int short_name;     /* a letter, or 0 */
	const char *name;   /* the long name, without "--" */
	union {
		int *i;
		uint64_t *u;
		double *d;
		const char **s;
		void (*fn)(const char *opt, const char *arg);
	} var;
	const char *arg;    /* the argument's name in --help; NULL: no argument */
	const char *help;   /* its text in --help; '\n' continues it below */
	int value;          /* LOOM_OPT_SET */
	uint64_t min, max;  /* LOOM_OPT_INT, LOOM_OPT_U64 */
	double dmin, dmax;  /* LOOM_OPT_DOUBLE */
	const char *values; /* the enumerated values, for completion ("u16 u32 text") */
};

struct option;

char *loom_opt_help(const char *usage, const struct loom_opt *opts, const char *footer);
char *loom_opt_list(const struct loom_opt *opts);
/* The option an alias stands for (o itself when it is none); NULL when
 * the table lacks it. */
const struct loom_opt *loom_opt_target(const struct loom_opt *opts, const struct loom_opt *o);
/* For opts[0..n): *lo (with --list-options as code list_code, then the
 * terminator) and *shorts; a long-only option's code is 256 + its index.
 * LOOM_ENOMEM, or LOOM_EINVAL when an alias's target is missing. */
int loom_opt_getopt(const struct loom_opt *opts, size_t n, int list_code, struct option **lo,
		    char **shorts, struct loom_err *err);
/* Does the argv word arg ("--name", "--name=V", "-xVALUE", "-xy") take
 * the next word as its argument in opts? */
int loom_opt_takes_next(const struct loom_opt *opts, const char *arg);
/* The first argv word "--NAME[=V]" before "--" that is not an option of
 * opts (nor --help, --version, --list-options; getopt takes prefixes) but
 * a name is_key knows (a configuration key given as an option): its
 * index, NAME in name[64] and *value (V, else the next word when it is no
 * option, else "V"); 0 when there is none. */
int loom_opt_key_word(const struct loom_opt *opts, int argc, char **argv,
		      int (*is_key)(const char *name), char name[64], const char **value);
/* A range of whole numbers "A:B" (A to B, B excluded; A: and :B are open
 * ends, 0 and UINT64_MAX) or "A" (A alone): *a, *b.  Messages name opt:
 * not a number, out of range, B before A, or not A:B. */
int loom_opt_range(const char *opt, const char *s, uint64_t *a, uint64_t *b, struct loom_err *err);
/* Store arg in o's variable, as "--name" says in a message. */
int loom_opt_store(const struct loom_opt *o, const char *arg, struct loom_err *err);
int loom_opt_u64(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *v,
		 struct loom_err *err);
int loom_opt_double(const char *opt, const char *arg, double min, double max, double *v,
		    struct loom_err *err);

#endif
