/*
 * cli.h - what every loom tool's main shares: one option table per command,
 * naming, messages, exit codes, option-value parsing, progress lines, and
 * signal-time cleanup.
 *
 * Options: each command declares each option once, in a table of OPT_*()
 * lines (long name, short letter, variable, kind, argument name, help), in
 * the spirit of git's parse-options.  cli_parse() turns the table into
 * getopt_long's, checks every value (whole numbers and numbers in a range;
 * one line naming the option, exit 2), generates the
 * options section of --help, and adds -h/--help and -V/--version to every
 * table; the same -v/--verbose, -q/--quiet (-q wins over -v) and
 * --progress for the tools that list them (OPT_VERBOSE, OPT_QUIET,
 * OPT_PROGRESS).
 * Help text names a default one way: "(default: X)" at the end of the
 * option's text, or "(default)" after one of its enumerated values.
 * A hidden --list-options prints the options, one per line, with their
 * enumerated values: share/bash-completion/loom completes from it.
 *
 *	static int no_write;
 *	static const struct cli_opt opts[] = {
 *		OPT_STRING('o', "output", &output, "PATH", "index path (- = stdout)"),
 *		OPT_BOOL(0, "no-write", &no_write, "write no index"),
 *		OPT_INT('j', "jobs", &jobs, "N", 1, 1024, "files verified in parallel"),
 *		OPT_VERBOSE("a line per FILE"), OPT_QUIET(NULL, "no summary line"),
 *		OPT_END()
 *	};
 *	static const struct cli_cmd cmd = { "loom-index", "usage: ...\n", opts };
 *	cli_parse(&cmd, argc, argv);   (the arguments: argv[optind..argc))
 *
 * This is the tools' side (it prints and exits); libloom itself never does.
 * Exit codes: 0 ok, 1 runtime/data failure, 2 bad usage, 75 temporary
 * network failure (EX_TEMPFAIL: cron and make may retry).
 */
#ifndef LOOM_CLI_H
#define LOOM_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "loom_common.h"
#include "loom_opt.h"

#define EXIT_USAGE 2
#define EXIT_TEMPFAIL 75

/* The entry of an option table is libloom's (loom_opt.h, with the texts
 * and checks that need no terminal); the tools name it struct cli_opt. */
#define cli_opt loom_opt

#define OPT_END() { .kind = LOOM_OPT_END }
/* a heading or a line of text among the options in --help */
#define OPT_TEXT(H_) { .kind = LOOM_OPT_TEXT, .help = (H_) }
#define OPT_SET_INT(S_, L_, V_, VAL_, H_) \
	{ .kind = LOOM_OPT_SET, .short_name = (S_), .name = (L_), .var.i = (V_), .value = (VAL_), .help = (H_) }
#define OPT_BOOL(S_, L_, V_, H_) OPT_SET_INT(S_, L_, V_, 1, H_)
#define OPT_STRING(S_, L_, V_, A_, H_) \
	{ .kind = LOOM_OPT_STRING, .short_name = (S_), .name = (L_), .var.s = (V_), .arg = (A_), .help = (H_) }
/* a string with enumerated values (checked by the tool; listed for completion) */
#define OPT_ENUM(S_, L_, V_, A_, VALS_, H_) \
	{ .kind = LOOM_OPT_STRING, .short_name = (S_), .name = (L_), .var.s = (V_), .arg = (A_), \
	  .help = (H_), .values = (VALS_) }
#define OPT_INT(S_, L_, V_, A_, LO_, HI_, H_) \
	{ .kind = LOOM_OPT_INT, .short_name = (S_), .name = (L_), .var.i = (V_), .arg = (A_), \
	  .min = (LO_), .max = (HI_), .help = (H_) }
#define OPT_U64(S_, L_, V_, A_, LO_, HI_, H_) \
	{ .kind = LOOM_OPT_U64, .short_name = (S_), .name = (L_), .var.u = (V_), .arg = (A_), \
	  .min = (LO_), .max = (HI_), .help = (H_) }
#define OPT_DOUBLE(S_, L_, V_, A_, LO_, HI_, H_) \
	{ .kind = LOOM_OPT_DOUBLE, .short_name = (S_), .name = (L_), .var.d = (V_), .arg = (A_), \
	  .dmin = (LO_), .dmax = (HI_), .help = (H_) }
/* special ones (repeated --set K=V, values with limits of their own such as
 * sizes, options that set several things): a = NULL for an option without
 * argument */
#define OPT_CALLBACK(S_, L_, F_, A_, H_) \
	{ .kind = LOOM_OPT_CALL, .short_name = (S_), .name = (L_), .var.fn = (F_), .arg = (A_), .help = (H_) }
#define OPT_ENUM_CALLBACK(S_, L_, F_, A_, VALS_, H_) \
	{ .kind = LOOM_OPT_CALL, .short_name = (S_), .name = (L_), .var.fn = (F_), .arg = (A_), \
	  .help = (H_), .values = (VALS_) }
/* An old spelling kept working for scripts (-L or --seq-len for --seq):
 * S_ and/or L_ (0, NULL: none) mean the option of the table whose long
 * name is TARGET_; --help and --list-options show only the target. */
#define OPT_ALIAS(S_, L_, TARGET_) \
	{ .kind = LOOM_OPT_ALIAS, .short_name = (S_), .name = (L_), .help = (TARGET_) }
/* WordPiece casing (loom_wordpiece_open's rules, loom-bpe(1)): --lowercase
 * and --cased set cli_casing (an enum loom_casing, LOOM_CASING_AUTO when
 * neither is given); both together are a usage error, whatever the order. */
#define OPT_CASING() \
	OPT_CALLBACK(0, "lowercase", cli_on_casing, NULL, \
		     "WordPiece: lower-case and strip accents (default:\n" \
		     "as tokenizer_config.json or the vocabulary says)"), \
	OPT_CALLBACK(0, "cased", cli_on_casing, NULL, "WordPiece: keep case and accents")
extern int cli_casing;
void cli_on_casing(const char *opt, const char *arg);
/* loom_wordpiece_open(spec, casing) (cli_casing, or LOOM_CASING_NONE to
 * decode) or exit: 2 when the casing must be given or cannot be, 1 when a
 * file cannot be read; -v says which file and what decided the casing
 * (`why` when a casing is passed that the user did not give, else the
 * option or loom_wordpiece_casing_rule). */
struct loom_wordpiece *cli_wordpiece_open(const char *spec, int casing, const char *why);
/* The shared ones (-h and -V end every table: cli_parse() adds them):
 * -v sets cli_verbose, -q sets cli_quiet (and *v if v is not NULL) and
 * clears cli_verbose once all options are read; --progress sets
 * cli_force_progress (and *v). */
#define OPT_VERBOSE(H_) { .kind = LOOM_OPT_VERBOSE, .short_name = 'v', .name = "verbose", .help = (H_) }
#define OPT_QUIET(V_, H_) { .kind = LOOM_OPT_QUIET, .short_name = 'q', .name = "quiet", .var.i = (V_), .help = (H_) }
#define OPT_PROGRESS(V_, H_) { .kind = LOOM_OPT_PROGRESS, .name = "progress", .var.i = (V_), .help = (H_) }

struct cli_cmd {
	const char *prog;    /* the name in messages ("loom-bpe" for its subcommands) */
	const char *usage;   /* --help before the options: "usage: ...\n" and a description */
	const struct cli_opt *opts;
	const char *footer;  /* --help after the options (or NULL) */
	/* -V's second line: library versions (or NULL) */
	const char *(*version)(void);
};

/* Subcommands, the git way: a table of command words, each with its
 * cli_cmd (for --help and to know which options take an argument) and its
 * main.  cli_dispatch() finds the first word that is not an option or an
 * option's argument (by the tables: `loom-eval -c X squad` and
 * `loom-eval squad -c X` are the same command), moves it to argv[1] and
 * calls its main with (argc - 1, argv + 1): the subcommand's argv[0] is
 * its word.  Without a word, `dflt` runs with the whole argv (loom-eval's
 * evaluation) or, where there is none, -h/-V answer for the program and
 * anything else is a usage error naming the commands. */
struct cli_subcmd {
	const char *name;
	const struct cli_cmd *cmd;  /* NULL: its options come after the word */
	int (*run)(int argc, char **argv);
};
struct cli_cmds {
	const char *prog;
	const char *usage;                /* the program's --help */
	const struct cli_subcmd *cmds;    /* ends with { NULL } */
	const struct cli_subcmd *dflt;    /* NULL: a command word is required */
	const char *(*version)(void);
};
int cli_dispatch(const struct cli_cmds *t, int argc, char **argv);
/* The whole command line, as cli_dispatch() left it (the command word at
 * argv[1]) or as cli_parse() got it: for manifests that record it and for
 * re-executing the program. */
extern int cli_argc;
extern char **cli_argv;

/* Sets the program name and the usage text (as cli_init), parses argv by
 * the table and -h, -V (getopt_long, arguments permuted), handles -h, -V and
 * --list-options and exits on a bad option or value (exit 2).  Returns the
 * index of the first non-option argument. */
int cli_parse(const struct cli_cmd *cmd, int argc, char **argv);
/* A cli_cmd.version for tools whose only library of note is jansson */
const char *cli_version_jansson(void);
/* Before cli_parse: an argument --NAME (or --NAME=V) that is no option of
 * cmd but a key of the tool's configuration (is_key) is a usage error that
 * says how to set it: "--lr is not an option but a configuration key: give
 * --set lr=3e-5" (the value after it, or V). */
void cli_key_hint(const struct cli_cmd *cmd, int argc, char **argv, int (*is_key)(const char *name));
/* -q, --quiet and --progress of the command line cli_parse() read */
extern int cli_quiet, cli_force_progress;

/* For tests only (tests/shard-kill.t, tests/squad-prepare.t): with
 * LOOM_SHARD_TEST_KILL_AT=N in the environment, a commit_step hook
 * (loom_shardset_opts) that kills the process (SIGKILL, as kill -9) just
 * before the N-th (from 0) file-system step of removing leftovers and
 * committing an output set; NULL without it. */
void (*cli_test_kill_hook(void **ctx))(void *ctx, const char *what, const char *path);

/* Sets the program name used in messages, the usage text printed by --help
 * (whose first words name the command in the hint after usage errors), installs handlers that remove live temporary
 * outputs on SIGINT/SIGTERM/SIGHUP before dying and at exit (an exit(1)
 * after loom_outfile_open leaves no temporary file behind), raises the soft limit on
 * open files to the hard one, and checks stdout at exit: flushed and closed
 * without a write error, else "prog: cannot write to stdout: REASON" and
 * exit 1 (quiet after an error already reported by cli_die/cli_exit/
 * cli_usage_error, or on EPIPE).  cli_parse() calls it; a main without a
 * table of its own (loom-bpe's dispatcher) calls it first. */
void cli_init(const char *prog, const char *usage);
extern const char *cli_prog;

/* "prog: message" to stderr. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* -v, --verbose: one "prog: message" line per event to stderr (never
 * stdout).  cli_parse() sets it from -v and clears it under -q: -q wins. */
extern int cli_verbose;
/* "prog: message" to stderr when cli_verbose, else nothing; one whole
 * line even when called from several threads. */
void cli_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A tool's summary line ("prog: N records, ... s"): "prog: message" to
 * stderr in one write, as cli_warn, unless -q. */
void cli_summary(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog: message" to stderr, exit 1. */
_Noreturn void cli_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog: message" to stderr, exit with `code` (2: and the hint, as
 * cli_usage_error). */
_Noreturn void cli_exit(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* "prog: message" and "Try 'prog --help' for more information." to
 * stderr (not the whole usage), exit 2. */
_Noreturn void cli_usage_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
/* Usage to stdout, exit 0 (the generated one after cli_parse()). */
_Noreturn void cli_help(void);
/* "prog (loom X.Y.Z)" plus `extra` (library versions, may be NULL), exit 0. */
_Noreturn void cli_version(const char *extra);

/* Option values (for OPT_CALLBACKs; the table checks its own kinds): on
 * failure a usage error naming the option, exit 2. */
uint64_t cli_u64(const char *opt, const char *arg, uint64_t min, uint64_t max);
uint64_t cli_size(const char *opt, const char *arg); /* 512M, 2G, ... */

/* Refuse to write binary data to a terminal unless forced (exit 2). */
void cli_no_binary_tty(int fd, int force);

/* Progress on stderr: enabled when stderr is a TTY or when forced
 * (--progress); throttled to a few updates a second; "\r...\e[K" lines. */
struct cli_progress {
	int enabled;
	int shown;
	double start, last;
};
void cli_progress_init(struct cli_progress *p, int force);
/* For a tool whose stdout feeds the next tool (loom-feed | loom-train): as
 * above, but also off when stdout is a pipe unless forced, so that one
 * terminal shows one progress line, the last stage's. */
void cli_progress_init_upstream(struct cli_progress *p, int force);
/* Returns 1 if it is time for an update (cheap to call often): at the first
 * call, then at most four times a second. */
int cli_progress_due(struct cli_progress *p);
void cli_progress_show(struct cli_progress *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Clear the progress line (if one was shown).  cli_warn, cli_info and the
 * error messages clear it themselves before their line. */
void cli_progress_done(struct cli_progress *p);

/* Byte counts ("12.3 MB") and durations ("4:05", "1:02:03") for messages:
 * libloom's formatters (loom_common.h), under the names the tools use. */
#define cli_bytes loom_fmt_bytes
#define cli_duration loom_fmt_duration

#endif
