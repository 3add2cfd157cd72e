/*
 * cli.h - what every loom tool's main shares: naming, messages, exit codes,
 * option-value parsing, progress lines, and signal-time cleanup.
 *
 * This is the tools' side (it prints and exits); libloom itself never does.
 * Exit codes: 0 ok, 1 runtime/data failure, 2 bad usage, 75 temporary
 * network failure (EX_TEMPFAIL: cron and make may retry).
 */
#ifndef LOOM_CLI_H
#define LOOM_CLI_H

#include <stdint.h>
#include <stdio.h>

#define EXIT_USAGE 2
#define EXIT_TEMPFAIL 75

/* Call first in main: sets the program name used in messages, the usage
 * text printed by --help and after usage errors, installs handlers that
 * remove live temporary outputs on SIGINT/SIGTERM/SIGHUP before dying, and
 * checks stdout at exit: flushed and closed without a write error, else
 * "prog: cannot write to stdout: REASON" and exit 1 (quiet after an error
 * already reported by cli_die/cli_exit/cli_usage_error, or on EPIPE). */
void cli_init(const char *prog, const char *usage);
extern const char *cli_prog;

/* "prog: message" to stderr. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* -v, --verbose: one "prog: message" line per event to stderr (never
 * stdout).  Tools set cli_verbose from -v and clear it under -q: -q wins. */
extern int cli_verbose;
/* "prog: message" to stderr when cli_verbose, else nothing; one whole
 * line even when called from several threads. */
void cli_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog: message" to stderr, exit 1. */
_Noreturn void cli_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog: message" to stderr, exit with `code`. */
_Noreturn void cli_exit(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* "prog: message" + usage to stderr, exit 2. */
_Noreturn void cli_usage_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
/* Usage to stdout, exit 0. */
_Noreturn void cli_help(void);
/* "prog (loom X.Y.Z)" plus `extra` (library versions, may be NULL), exit 0. */
_Noreturn void cli_version(const char *extra);
/* For getopt's '?' case: its message is already printed; add usage, exit 2. */
_Noreturn void cli_bad_option(void);

/* Option values: on failure a usage error naming the option, exit 2. */
uint64_t cli_u64(const char *opt, const char *arg, uint64_t min, uint64_t max);
double cli_double(const char *opt, const char *arg, double min, double max);
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
 * call, then at most four times a second. */int cli_progress_due(struct cli_progress *p);
void cli_progress_show(struct cli_progress *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Clear the progress line (if one was shown). */
void cli_progress_done(struct cli_progress *p);

/* Human-readable byte count ("12.3 MB") into buf. */
const char *cli_bytes(double n, char *buf, size_t len);
/* A duration for progress lines ("4:05", "1:02:03") into buf. */
const char *cli_duration(double sec, char *buf, size_t len);

#endif
