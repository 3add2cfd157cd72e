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

/* "prog: message\n" on stderr, after clearing a progress line, in one
 * write: one whole line even when worker threads write messages too, or
 * (stderr being unbuffered) when several processes share the stream, as
 * the ranks under mpirun do. */
static void vline(const char *fmt, va_list ap)
{
	char small[1024], *line = small;
	size_t cap = sizeof small;
	va_list aq;
	va_copy(aq, ap);
	int p = snprintf(small, cap, "%s: ", cli_prog);
	int n = vsnprintf(small + p, cap - (size_t)p, fmt, ap);
	size_t need = (size_t)p + (n > 0 ? (size_t)n : 0) + 2; /* '\n', NUL */
	if (need > cap && (line = malloc(need))) {
		memcpy(line, small, (size_t)p);
		vsnprintf(line + p, need - (size_t)p - 1, fmt, aq);
		cap = need;
	} else if (!line) {
		line = small; /* out of memory: the message cut short */
	}
	va_end(aq);
	size_t len = strlen(line);
	len = len > cap - 2 ? cap - 2 : len;
	line[len] = '\n';
	line[len + 1] = '\0';
	flockfile(stderr);
	if (progress_shown) {
		fputs("\r\033[K", stderr);
		progress_shown = 0;
	}
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

void cli_help(void)
{
	fputs(cli_usage_text, stdout);
	exit(0); /* a write error: close_stdout() says it, exit 1 */
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

/* "  -o, --output PATH" */
static int opt_lead(const struct cli_opt *o, char *buf, size_t len)
{
	char s[8] = "    ";
	if (o->short_name)
		snprintf(s, sizeof s, "-%c, ", o->short_name);
	return snprintf(buf, len, "  %s--%s%s%s", s, o->name, o->arg ? " " : "",
			o->arg ? o->arg : "");
}

/* The usage text, the options section generated from the table. */
static char *usage_text(const struct cli_cmd *cmd, const struct cli_opt *opts)
{
	char *text = NULL, lead[128];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int col = 20;
	if (!f)
		cli_die("out of memory");
	for (const struct cli_opt *o = opts; o->kind != CLI_END; o++) {
		int w = o->kind == CLI_TEXT || o->kind == CLI_ALIAS ? 0 :
			opt_lead(o, lead, sizeof lead) + 2;
		if (w > col)
			col = w;
	}
	fputs(cmd->usage, f);
	for (const struct cli_opt *o = opts; o->kind != CLI_END; o++) {
		if (o->kind == CLI_TEXT) {
			fprintf(f, "%s\n", o->help);
			continue;
		}
		if (o->kind == CLI_ALIAS)
			continue;
		int w = opt_lead(o, lead, sizeof lead);
		fprintf(f, "%s%*s", lead, col - w, "");
		for (const char *h = o->help; *h; h++) {
			fputc(*h, f);
			if (*h == '\n')
				fprintf(f, "%*s", col, "");
		}
		fputc('\n', f);
	}
	if (cmd->footer)
		fputs(cmd->footer, f);
	if (fclose(f) != 0 || !text)
		cli_die("out of memory");
	return text;
}

/* --list-options: "-o --output" per option, " : VALUES" when enumerated */
static _Noreturn void list_options(const struct cli_opt *opts)
{
	for (const struct cli_opt *o = opts; o->kind != CLI_END; o++) {
		if (o->kind == CLI_TEXT || o->kind == CLI_ALIAS)
			continue;
		if (o->short_name)
			printf("-%c ", o->short_name);
		printf("--%s%s%s\n", o->name, o->values ? " : " : "", o->values ? o->values : "");
	}
	exit(fflush(stdout) == 0 ? 0 : 1);
}

static double cli_double(const char *opt, const char *arg, double min, double max)
{
	double v;
	if (loom_parse_double(arg, &v) < 0)
		cli_usage_error("%s: '%s' is not a number", opt, arg);
	if (v < min || v > max)
		cli_usage_error("%s: '%s' is out of range [%g, %g]", opt, arg, min, max);
	return v;
}

static void take(const struct cli_opt *o, const char *arg)
{
	char opt[64];
	snprintf(opt, sizeof opt, "--%s", o->name);
	switch (o->kind) {
	case CLI_SET: *o->var.i = o->value; break;
	case CLI_STRING: *o->var.s = arg; break;
	case CLI_INT: *o->var.i = (int)cli_u64(opt, arg, o->min, o->max); break;
	case CLI_U64: *o->var.u = cli_u64(opt, arg, o->min, o->max); break;
	case CLI_DOUBLE: *o->var.d = cli_double(opt, arg, o->dmin, o->dmax); break;
	case CLI_CALL: o->var.fn(opt, arg); break;
	case CLI_HELP: cli_help();
	case CLI_VERSION: cli_version(cli_cmd->version ? cli_cmd->version() : NULL);
	case CLI_VERBOSE: cli_verbose = 1; break;
	case CLI_QUIET:
		cli_quiet = 1;
		if (o->var.i)
			*o->var.i = 1;
		break;
	case CLI_PROGRESS:
		cli_force_progress = 1;
		if (o->var.i)
			*o->var.i = 1;
		break;
	case CLI_END: case CLI_TEXT: case CLI_ALIAS: break;
	}
}

const char *cli_version_jansson(void)
{
	return "jansson " JANSSON_VERSION;
}

void cli_key_hint(const struct cli_cmd *cmd, int argc, char **argv, int (*is_key)(const char *name))
{
	cli_init(cmd->prog, cmd->usage);
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (strncmp(argv[i], "--", 2) || !argv[i][2])
			continue;
		char name[64];
		const char *a = argv[i] + 2, *eq = strchr(a, '=');
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		if (len >= sizeof name)
			continue;
		memcpy(name, a, len);
		name[len] = 0;
		int opt = !strcmp(name, "help") || !strcmp(name, "version") ||
			  !strcmp(name, "list-options");
		for (const struct cli_opt *o = cmd->opts; !opt && o->kind != CLI_END; o++)
			opt = o->name && !strncmp(o->name, name, len); /* getopt takes prefixes */
		if (opt || !is_key(name))
			continue;
		const char *v = eq ? eq + 1 : i + 1 < argc && argv[i + 1][0] != '-' ? argv[i + 1] : "V";
		cli_usage_error("--%s is not an option but a configuration key: give --set %s=%s",
				name, name, v);
	}
}

/* Every table ends with -h and -V. */
#define OPT_HELP() { .kind = CLI_HELP, .short_name = 'h', .name = "help", .help = "this help" }
#define OPT_VERSION() \
	{ .kind = CLI_VERSION, .short_name = 'V', .name = "version", .help = "version" }

/* getopt's code of the hidden --list-options (a long-only option's is 256 +
 * its index in the table) */
enum { LIST_OPTIONS = 1000 };

/* The option an OPT_ALIAS stands for (the option itself otherwise). */
static const struct cli_opt *alias_target(const struct cli_opt *opts, const struct cli_opt *o)
{
	if (o->kind != CLI_ALIAS)
		return o;
	for (const struct cli_opt *t = opts; t->kind != CLI_END; t++)
		if (t->kind != CLI_TEXT && t->kind != CLI_ALIAS && !strcmp(t->name, o->help))
			return t;
	cli_die("internal error: alias of an option --%s that the table lacks", o->help);
}

int cli_argc;
char **cli_argv;

int cli_parse(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct cli_opt std[] = { OPT_HELP(), OPT_VERSION(), OPT_END() };
	static char *text;
	static struct cli_opt *opts; /* cmd's, then -h and -V */
	size_t n = 0;
	while (cmd->opts[n].kind != CLI_END)
		n++;
	free(opts);
	opts = malloc((n + 3) * sizeof *opts);
	/* the options and -h, -V (n + 2), --list-options and the terminator */
	struct option *lo = calloc(n + 4, sizeof *lo);
	char *shorts = malloc(3 * n + 8), *sp = shorts;
	if (!opts || !lo || !shorts)
		cli_die("out of memory");
	memcpy(opts, cmd->opts, n * sizeof *opts);
	memcpy(opts + n, std, sizeof std);
	n += 2;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct cli_opt *o = &opts[i], *t = alias_target(opts, o);
		if (o->kind == CLI_TEXT)
			continue;
		if (o->name) /* an alias's long name returns its target's code */
			lo[k++] = (struct option){ o->name, t->arg ? required_argument : no_argument,
						   NULL, t->short_name ? t->short_name :
						   256 + (int)(t - opts) };
		if (o->short_name) {
			*sp++ = (char)o->short_name;
			if (t->arg)
				*sp++ = ':';
		}
	}
	lo[k] = (struct option){ "list-options", no_argument, NULL, LIST_OPTIONS };
	*sp = 0;
	free(text);
	text = usage_text(cmd, opts);
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
		if (c == LIST_OPTIONS)
			list_options(opts);
		if (c >= 256 && c < 256 + (int)n)
			o = &opts[c - 256];
		for (size_t i = 0; !o && c > 0 && c < 256 && i < n; i++)
			if (opts[i].short_name == c && opts[i].kind != CLI_TEXT)
				o = &opts[i];
		if (!o) /* getopt said what is wrong */
			usage_hint();
		take(alias_target(opts, o), optarg);
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
		cli_exit(EXIT_USAGE, "--vocab %s%s", err.msg,
			 strstr(err.msg, "say whether") ? " (--lowercase or --cased)" :
			 strstr(err.msg, "no casing") ? " (drop --lowercase/--cased)" : "");
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

/* Does the option `arg` (an argv word: "--name", "--name=V", "-xVALUE",
 * "-xy") take the next word as its argument in the table opts?  A long
 * name may be abbreviated, as getopt_long allows. */
static int opt_takes_next(const struct cli_opt *opts, const char *arg)
{
	if (arg[1] == '-' && strchr(arg, '='))
		return 0;
	if (arg[1] == '-') {
		for (const struct cli_opt *o = opts; o->kind != CLI_END; o++)
			if (o->kind != CLI_TEXT && o->name &&
			    !strncmp(o->name, arg + 2, strlen(arg + 2)) && alias_target(opts, o)->arg)
				return 1;
		return 0;
	}
	/* a cluster: the first letter that takes an argument takes the rest
	 * of the word, or the next one */
	for (const char *p = arg + 1; *p; p++)
		for (const struct cli_opt *o = opts; o->kind != CLI_END; o++)
			if (o->kind != CLI_TEXT && o->short_name == *p && alias_target(opts, o)->arg)
				return p[1] == '\0';
	return 0;
}

/* ... by the tables of every command (`loom-eval -c X squad`) */
static int takes_next(const struct cli_cmds *t, const char *arg)
{
	int next = t->dflt && t->dflt->cmd && opt_takes_next(t->dflt->cmd->opts, arg);
	for (const struct cli_subcmd *c = t->cmds; c->name; c++)
		next |= c->cmd && opt_takes_next(c->cmd->opts, arg);
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
	int rc = loom_parse_u64(arg, min, max, &v);
	if (rc == LOOM_ERANGE)
		cli_usage_error("%s: '%s' is out of range [%llu, %llu]", opt, arg,
				(unsigned long long)min, (unsigned long long)max);
	if (rc < 0)
		cli_usage_error("%s: '%s' is not a whole number", opt, arg);
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

void cli_progress_show(struct cli_progress *p, const char *fmt, ...)
{
	va_list ap;
	if (!p->enabled)
		return;
	flockfile(stderr);
	fprintf(stderr, "\r%s: ", cli_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\033[K", stderr);
	fflush(stderr);
	p->shown = progress_shown = 1;
	funlockfile(stderr);
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
