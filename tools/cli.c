/* cli.c - see cli.h */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom_common.h"
#include "loom_file.h"
#include "loom_wordpiece.h"

const char *cli_prog = "loom";
static const char *cli_usage_text = "";

static void on_fatal_signal(int sig)
{
	loom_outfile_unlink_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Set once a failure was reported (exit status non-zero): close_stdout()
 * then adds no second line. */
static int cli_failed;

/* LeakSanitizer's hook (make asan): a tool that exits on an error leaves
 * what it holds to the kernel, and what a register still pointed to there
 * is reported at random; leaks are checked on the runs that succeed. */
__attribute__((used, visibility("default"))) int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return cli_failed;
}

/* At exit (the close_stdout of git and coreutils): what the tool printed on
 * stdout must have reached it, up to the last flush and the close; if not,
 * one line and exit 1 (a closed pipe, EPIPE, stays quiet, as in the
 * tools' own checks).  A stdout closed before anything was written is
 * fine. */
static void close_stdout(void)
{
	errno = 0;
	int bad = fflush(stdout) != 0, e = errno;
	if (!bad && ferror(stdout)) {
		/* an earlier flush failed (stdio dropped that buffer, and the
		 * reason): a pipe whose reader left (| head) polls as an error */
		struct pollfd p = { .fd = STDOUT_FILENO, .events = POLLOUT };
		bad = 1;
		e = poll(&p, 1, 0) == 1 && (p.revents & POLLERR) ? EPIPE : 0;
	}
	if (fclose(stdout) != 0 && !bad && errno != EBADF) {
		bad = 1;
		e = errno;
	}
	if (!bad || e == EPIPE)
		return;
	if (!cli_failed)
		fprintf(stderr, "%s: cannot write to stdout: %s\n", cli_prog,
			e ? strerror(e) : "write error");
	_exit(1);
}

/* A set of shards is kept open at once (loom-shard writes them and 256
 * spill buckets, loom-feed reads them in a shuffled order): raise the soft
 * limit on open files (1024 by default) to the hard one, as systemd
 * advises for programs that need many; loom never uses select(2). */
static void raise_nofile_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

void cli_init(const char *prog, const char *usage)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	static int registered; /* a subcommand calls cli_init again */
	cli_prog = prog;
	cli_usage_text = usage;
	if (!registered++) {
		atexit(close_stdout);
		/* run first: exit(1) after an output was opened leaves no temp */
		atexit(loom_outfile_unlink_all);
	}
	raise_nofile_limit();
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_fatal_signal;
		sigemptyset(&sa.sa_mask);
		/* keep an inherited "ignore" (nohup, background jobs) */
		struct sigaction old;
		sigaction(sigs[i], NULL, &old);
		if (old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
	}
}

/* A progress line is on the terminal: cleared before any other line goes
 * to stderr, so that a message never glues onto it. */
static int progress_shown;

/* PRE "prog: " message END in buf (cap bytes), or in memory of its own when
 * it does not fit there (the caller frees a line that is not buf; out of
 * memory: the message cut short in buf). */
static char *fmt_line(char *buf, size_t cap, const char *pre, const char *end, const char *fmt,
		      va_list ap)
{
	char *line = buf;
	size_t e = strlen(end);
	va_list aq;
	va_copy(aq, ap);
	int p = snprintf(buf, cap, "%s%s: ", pre, cli_prog);
	int n = vsnprintf(buf + p, cap - (size_t)p, fmt, ap);
	size_t need = (size_t)p + (n > 0 ? (size_t)n : 0) + e + 1;
	if (need > cap && (line = malloc(need))) {
		memcpy(line, buf, (size_t)p);
		vsnprintf(line + p, need - (size_t)p - e, fmt, aq);
		cap = need;
	} else if (!line) {
		line = buf;
	}
	va_end(aq);
	size_t len = strlen(line);
	len = len > cap - e - 1 ? cap - e - 1 : len;
	memcpy(line + len, end, e + 1);
	return line;
}

/* "prog: message\n" on stderr, after clearing a progress line, in one
 * write: one whole line even when worker threads write messages too, or
 * (stderr being unbuffered) when several processes share the stream, as
 * the ranks under mpirun or the stages of a pipe on one terminal do. */
static void vline(const char *fmt, va_list ap)
{
	char small[1024];
	flockfile(stderr);
	char *line = fmt_line(small, sizeof small, progress_shown ? "\r\033[K" : "", "\n", fmt, ap);
	progress_shown = 0;
	fputs(line, stderr);
	funlockfile(stderr);
	if (line != small)
		free(line);
}

static void vmsg(const char *fmt, va_list ap)
{
	fflush(stdout);
	vline(fmt, ap);
}

void cli_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
}

int cli_verbose;
int cli_quiet, cli_force_progress;

void cli_summary(const char *fmt, ...)
{
	va_list ap;
	if (cli_quiet)
		return;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
}

void cli_info(const char *fmt, ...)
{
	va_list ap;
	if (!cli_verbose)
		return;
	/* stdout is not flushed: it is data, and a worker thread may call this */
	va_start(ap, fmt);
	vline(fmt, ap);
	va_end(ap);
}

void cli_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
	cli_failed = 1;
	exit(1);
}


/* "Try 'prog --help' for more information." (git/coreutils style), exit 2.
 * The command is the program name and, for a subcommand, the lowercase word
 * after it in the usage text ("usage: loom-bpe encode [options]"). */
static _Noreturn void usage_hint(void)
{
	const char *u = cli_usage_text;
	size_t plen = strlen(cli_prog), sub = 0;
	if (!strncmp(u, "usage: ", 7) && !strncmp(u + 7, cli_prog, plen) && u[7 + plen] == ' ') {
		const char *w = u + 8 + plen;
		while (w[sub] >= 'a' && w[sub] <= 'z')
			sub++;
		if (w[sub] != ' ' && w[sub] != '\n')
			sub = 0;
	}
	fprintf(stderr, "Try '%s%s%.*s --help' for more information.\n", cli_prog,
		sub ? " " : "", (int)sub, sub ? u + 8 + plen : "");
	cli_failed = 1;
	exit(EXIT_USAGE);
}

void cli_usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
	usage_hint();
}

void cli_exit(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
	if (code == EXIT_USAGE)
		usage_hint();
	cli_failed = code != 0;
	exit(code);
}

/* text on stdout, then exit 0.  A text longer than stdio's buffer is
 * flushed inside fputs: a failure is told here with its errno, which
 * close_stdout() would no longer know (a reader gone, EPIPE: quiet). */
static _Noreturn void put_stdout_exit(const char *text)
{
	errno = 0;
	if ((fputs(text, stdout) == EOF || fflush(stdout) == EOF) && errno != EPIPE)
		cli_die("cannot write to stdout: %s", errno ? strerror(errno) : "write error");
	exit(0);
}

void cli_help(void)
{
	put_stdout_exit(cli_usage_text);
}

void cli_version(const char *extra)
{
	printf("%s (loom %s)\n", cli_prog, loom_version());
	if (extra && *extra)
		printf("%s\n", extra);
	exit(0); /* a write error: close_stdout() says it, exit 1 */
}

/* --- the option table ---------------------------------------------------- */

static const struct cli_cmd *cli_cmd; /* cli_parse()'s, for -V */

static void take(const struct cli_opt *o, const char *arg)
{
	char opt[64];
	struct loom_err err;
	snprintf(opt, sizeof opt, "--%s", o->name);
	switch (o->kind) {
	case LOOM_OPT_SET: case LOOM_OPT_STRING: case LOOM_OPT_INT: case LOOM_OPT_U64:
	case LOOM_OPT_DOUBLE:
		if (loom_opt_store(o, arg, &err))
			cli_usage_error("%s", err.msg);
		break;
	case LOOM_OPT_CALL: o->var.fn(opt, arg); break;
	case LOOM_OPT_HELP: cli_help();
	case LOOM_OPT_VERSION: cli_version(cli_cmd->version ? cli_cmd->version() : NULL);
	case LOOM_OPT_VERBOSE: cli_verbose = 1; break;
	case LOOM_OPT_QUIET:
		cli_quiet = 1;
		if (o->var.i)
			*o->var.i = 1;
		break;
	case LOOM_OPT_PROGRESS:
		cli_force_progress = 1;
		if (o->var.i)
			*o->var.i = 1;
		break;
	case LOOM_OPT_END: case LOOM_OPT_TEXT: case LOOM_OPT_ALIAS: break;
	}
}

const char *cli_version_jansson(void)
{
	return "jansson " JANSSON_VERSION;
}

void cli_key_hint(const struct cli_cmd *cmd, int argc, char **argv, int (*is_key)(const char *name))
{
	char name[64];
	const char *v;
	cli_init(cmd->prog, cmd->usage);
	if (loom_opt_key_word(cmd->opts, argc, argv, is_key, name, &v))
		cli_usage_error("--%s is not an option but a configuration key: give --set %s=%s",
				name, name, v);
}

/* Every table ends with -h and -V. */
#define OPT_HELP() { .kind = LOOM_OPT_HELP, .short_name = 'h', .name = "help", .help = "this help" }
#define OPT_VERSION() \
	{ .kind = LOOM_OPT_VERSION, .short_name = 'V', .name = "version", .help = "version" }

/* getopt's code of the hidden --list-options (a long-only option's is 256 +
 * its index in the table) */
enum { LIST_OPTIONS = 1000 };

int cli_argc;
char **cli_argv;

int cli_parse(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct cli_opt std[] = { OPT_HELP(), OPT_VERSION(), OPT_END() };
	static char *text;
	static struct cli_opt *opts; /* cmd's, then -h and -V */
	size_t n = 0;
	while (cmd->opts[n].kind != LOOM_OPT_END)
		n++;
	struct option *lo;
	char *shorts;
	struct loom_err err;
	free(opts);
	opts = malloc((n + 3) * sizeof *opts);
	if (!opts)
		cli_die("out of memory");
	memcpy(opts, cmd->opts, n * sizeof *opts);
	memcpy(opts + n, std, sizeof std);
	n += 2;
	if (loom_opt_getopt(opts, n, LIST_OPTIONS, &lo, &shorts, &err))
		cli_die("%s", err.msg);
	free(text);
	if (!(text = loom_opt_help(cmd->usage, opts, cmd->footer)))
		cli_die("out of memory");
	cli_init(cmd->prog, text);
	if (!cli_argv) {
		cli_argc = argc;
		cli_argv = argv;
	}
	cli_cmd = cmd;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		const struct cli_opt *o = NULL;
		if (c == LIST_OPTIONS) {
			static char *list; /* kept for the exit (a leak check finds it) */
			if (!(list = loom_opt_list(opts)))
				cli_die("out of memory");
			put_stdout_exit(list);
		}
		if (c >= 256 && c < 256 + (int)n)
			o = &opts[c - 256];
		for (size_t i = 0; !o && c > 0 && c < 256 && i < n; i++)
			if (opts[i].short_name == c && opts[i].kind != LOOM_OPT_TEXT)
				o = &opts[i];
		if (!o) /* getopt said what is wrong */
			usage_hint();
		take(loom_opt_target(opts, o), optarg);
	}
	if (cli_quiet)
		cli_verbose = 0;
	free(lo);
	free(shorts);
	return optind;
}

/* --- WordPiece casing ------------------------------------------------------ */

int cli_casing = LOOM_CASING_AUTO;

void cli_on_casing(const char *opt, const char *arg)
{
	int c = strcmp(opt, "--cased") ? LOOM_CASING_LOWER : LOOM_CASING_CASED;
	(void)arg;
	if (cli_casing != LOOM_CASING_AUTO && cli_casing != c)
		cli_usage_error("--lowercase and --cased contradict each other: give one");
	cli_casing = c;
}

struct loom_wordpiece *cli_wordpiece_open(const char *spec, int casing, const char *why)
{
	struct loom_err err = { 0 };
	struct loom_wordpiece *w = loom_wordpiece_open(spec, casing, &err);
	if (!w && err.code == LOOM_EINVAL)
		cli_exit(EXIT_USAGE, "--vocab %s%s", err.msg, loom_wordpiece_casing_hint(&err));
	if (!w)
		cli_die("%s", err.msg);
	cli_info("vocabulary %s (%s): %u WordPiece tokens (ids 0..%u), %s (by %s)", spec,
		 loom_wordpiece_path(w), loom_wordpiece_size(w), loom_wordpiece_size(w) - 1,
		 loom_wordpiece_lowercases(w) ? "lower-cased" : "cased", why ? why :
		 casing == LOOM_CASING_LOWER ? "--lowercase" :
		 casing == LOOM_CASING_CASED ? "--cased" : loom_wordpiece_casing_rule(w));
	return w;
}

/* --- subcommands ----------------------------------------------------------- */

/* ... by the tables of every command (`loom-eval -c X squad`) */
static int takes_next(const struct cli_cmds *t, const char *arg)
{
	int next = t->dflt && t->dflt->cmd && loom_opt_takes_next(t->dflt->cmd->opts, arg);
	for (const struct cli_subcmd *c = t->cmds; c->name; c++)
		next |= c->cmd && loom_opt_takes_next(c->cmd->opts, arg);
	return next;
}

int cli_dispatch(const struct cli_cmds *t, int argc, char **argv)
{
	cli_init(t->prog, t->usage);
	int w = 1;
	while (w < argc && argv[w][0] == '-' && argv[w][1] && strcmp(argv[w], "--"))
		w += 1 + takes_next(t, argv[w]);
	if (w < argc && strcmp(argv[w], "--"))
		for (const struct cli_subcmd *c = t->cmds; c->name; c++) {
			if (strcmp(argv[w], c->name))
				continue;
			char *word = argv[w];
			memmove(argv + 2, argv + 1, (size_t)(w - 1) * sizeof *argv);
			argv[1] = word;
			cli_argc = argc;
			cli_argv = argv;
			return c->run(argc - 1, argv + 1);
		}
	if (t->dflt) {
		cli_argc = argc;
		cli_argv = argv;
		return t->dflt->run(argc, argv);
	}
	char names[256] = "";
	size_t len = 0;
	for (const struct cli_subcmd *c = t->cmds; c->name && len < sizeof names; c++)
		len += (size_t)snprintf(names + len, sizeof names - len, "%s%s",
					c == t->cmds ? "" : c[1].name ? ", " : " or ", c->name);
	for (int i = 1; i < w && i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			cli_help();
		if (!strcmp(argv[i], "-V") || !strcmp(argv[i], "--version"))
			cli_version(t->version ? t->version() : NULL);
	}
	if (w < argc && strcmp(argv[w], "--"))
		cli_usage_error("unknown command '%s' (%s)", argv[w], names);
	cli_usage_error("missing command (%s)", names);
}

uint64_t cli_u64(const char *opt, const char *arg, uint64_t min, uint64_t max)
{
	uint64_t v;
	struct loom_err err;
	if (loom_opt_u64(opt, arg, min, max, &v, &err))
		cli_usage_error("%s", err.msg);
	return v;
}

uint64_t cli_size(const char *opt, const char *arg)
{
	uint64_t v;
	if (loom_parse_size(arg, &v) < 0)
		cli_usage_error("%s: '%s' is not a size (e.g. 512M, 2G)", opt, arg);
	return v;
}

void cli_no_binary_tty(int fd, int force)
{
	if (!force && isatty(fd))
		cli_usage_error("refusing to write binary data to a terminal "
				"(redirect it, or use --force)");
}

void cli_progress_init(struct cli_progress *p, int force)
{
	memset(p, 0, sizeof *p);
	p->enabled = force || isatty(STDERR_FILENO);
	p->start = loom_now();
	p->last = -1; /* the first update is due at once */
}

void cli_progress_init_upstream(struct cli_progress *p, int force)
{
	struct stat st;
	cli_progress_init(p, force);
	if (!force && fstat(STDOUT_FILENO, &st) == 0 && S_ISFIFO(st.st_mode))
		p->enabled = 0;
}

int cli_progress_due(struct cli_progress *p)
{
	if (!p->enabled)
		return 0;
	double t = loom_now();
	if (t - p->last < 0.25)
		return 0;
	p->last = t;
	return 1;
}

/* One write, as vline's: the other stages of a pipe write to the same
 * terminal, and a line of theirs must not fall inside an update. */
void cli_progress_show(struct cli_progress *p, const char *fmt, ...)
{
	char small[512];
	va_list ap;
	if (!p->enabled)
		return;
	flockfile(stderr);
	va_start(ap, fmt);
	char *line = fmt_line(small, sizeof small, "\r", "\033[K", fmt, ap);
	va_end(ap);
	fputs(line, stderr);
	fflush(stderr);
	p->shown = progress_shown = 1;
	funlockfile(stderr);
	if (line != small)
		free(line);
}

void cli_progress_done(struct cli_progress *p)
{
	if (p->shown) {
		flockfile(stderr);
		fputs("\r\033[K", stderr);
		fflush(stderr);
		p->shown = progress_shown = 0;
		funlockfile(stderr);
	}
}

static uint64_t kill_at;

static void kill_at_step(void *ctx, const char *what, const char *path)
{
	static uint64_t step;
	(void)what;
	(void)path;
	if (step++ == *(uint64_t *)ctx)
		raise(SIGKILL);
}

void (*cli_test_kill_hook(void **ctx))(void *ctx, const char *what, const char *path)
{
	const char *ka = getenv("LOOM_SHARD_TEST_KILL_AT");
	if (!ka || !*ka)
		return NULL;
	kill_at = cli_u64("LOOM_SHARD_TEST_KILL_AT", ka, 0, UINT64_MAX);
	*ctx = &kill_at;
	return kill_at_step;
}
