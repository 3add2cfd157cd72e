/* loom_blas.c - see loom_blas.h */
#include "loom_blas.h"

#include <cblas.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "loom_common.h"

const char *loom_blas_core(void)
{
	const char *c = openblas_get_corename();
	return c ? c : "?";
}

const char *loom_blas_better_core(void)
{
	static const char *const slow[] = {"Prescott", "Core2", "Penryn", "Nehalem",
					   "Atom", "Unknown", "Generic"};
	const char *core = openblas_get_corename();
	int is_slow = 0;
	if (!core || getenv("OPENBLAS_CORETYPE") || getenv(LOOM_BLAS_DETECTED_ENV))
		return NULL;
	for (size_t i = 0; i < sizeof slow / sizeof *slow; i++)
		is_slow |= strcasecmp(core, slow[i]) == 0;
	if (!is_slow)
		return NULL;
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f"))
		return "SkylakeX";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "Haswell";
	if (__builtin_cpu_supports("avx"))
		return "Sandybridge";
	return NULL;
}

/* 3: AVX-512, 2: AVX2+FMA, 1: AVX, 0: older or unknown */
static int core_level(const char *core)
{
	static const char *const l3[] = { "SkylakeX", "CooperLake", "SapphireRapids" };
	static const char *const l2[] = { "Haswell", "Zen" };
	for (size_t i = 0; i < sizeof l3 / sizeof *l3; i++)
		if (!strcasecmp(core, l3[i]))
			return 3;
	for (size_t i = 0; i < sizeof l2 / sizeof *l2; i++)
		if (!strcasecmp(core, l2[i]))
			return 2;
	return !strcasecmp(core, "Sandybridge");
}

const char *loom_blas_weaker_core(void)
{
	static const char *const name[] = { NULL, "Sandybridge", "Haswell", "SkylakeX" };
	const char *core = openblas_get_corename();
	if (!core || !getenv("OPENBLAS_CORETYPE") || getenv(LOOM_BLAS_DETECTED_ENV))
		return NULL;
	__builtin_cpu_init();
	int best = __builtin_cpu_supports("avx512f") ? 3 :
		   __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 2 :
		   __builtin_cpu_supports("avx") ? 1 : 0;
	return core_level(core) < best ? name[best] : NULL;
}

int loom_blas_reexec(char *const *argv, const char *core)
{
	int wait = !getenv("OMP_WAIT_POLICY");
	if (!wait && !core)
		return 0;
	if ((wait && setenv("OMP_WAIT_POLICY", "passive", 1) < 0) ||
	    (core && (setenv("OPENBLAS_CORETYPE", core, 1) < 0 ||
		      setenv(LOOM_BLAS_DETECTED_ENV, loom_blas_core(), 1) < 0)))
		return -errno;
	execv("/proc/self/exe", argv);
	int e = errno;
	if (wait)
		unsetenv("OMP_WAIT_POLICY");
	if (core) {
		unsetenv("OPENBLAS_CORETYPE");
		unsetenv(LOOM_BLAS_DETECTED_ENV);
	}
	return -e;
}

int loom_threads_for_load(int ncpu, int others)
{
	if (ncpu < 1)
		return 1;
	if (others <= 0)
		return ncpu;
	return others >= ncpu ? 1 : ncpu - others;
}

int loom_threads_running(const char *loadavg)
{
	double l1, l5, l15;
	int running, total;
	if (sscanf(loadavg, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) != 5 ||
	    running < 0 || total < running)
		return LOOM_EFORMAT;
	return running;
}

/* the first n-1 bytes of a (/proc) file as a string; LOOM_EIO if unreadable */
static int read_small(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return LOOM_EIO;
	ssize_t r = read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return LOOM_EIO;
	buf[r] = 0;
	return (int)r;
}

/* this process's running threads: the caller, and workers not yet asleep */
static int own_running(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	char path[64], buf[512];
	int n = 0;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/self/task/%.32s/stat", e->d_name);
		char *p = read_small(path, buf, sizeof buf) > 0 ? strrchr(buf, ')') : NULL;
		n += p && p[1] == ' ' && p[2] == 'R';
	}
	if (d)
		closedir(d);
	return n ? n : 1;
}

/* OpenBLAS's own pool (a pthreads build's) stays at one thread:
 * loom_mm_gemm() runs it on each thread of loom's team
 * (lib/kernels/loom_mm.h).  First: an OpenMP build's
 * openblas_set_num_threads() sets OpenMP's count too. */
static void set_threads(int n)
{
	openblas_set_num_threads(1);
	omp_set_num_threads(n);
}

/* The count that fits the load now; sets th->others.  On a quiet machine
 * (nothing runnable but, at most, the caller) the answer is all CPUs
 * whatever this process's own threads are doing, so its tasks are not
 * scanned (tens to hundreds of microseconds with many threads). */
static int fit_load(struct loom_threads *th)
{
	char buf[128];
	int running = read_small("/proc/loadavg", buf, sizeof buf) > 0 ? loom_threads_running(buf) : -1;
	if (running < 0)
		th->others = -1;
	else if (running <= 1)
		th->others = 0;
	else {
		int own = own_running();
		th->others = running > own ? running - own : 0;
	}
	return loom_threads_for_load(th->ncpu, th->others);
}

void loom_threads_init(struct loom_threads *th, int threads)
{
	const char *env = getenv("OMP_NUM_THREADS");
	th->ncpu = omp_get_num_procs();
	th->fixed = threads > 0 || (env && *env);
	th->n = threads > 0 ? threads : omp_get_max_threads();
	th->others = -1;
	th->pending = 0;
	th->last = loom_now();
	if (!th->fixed)
		th->n = fit_load(th);
	set_threads(th->n);
}

int loom_threads_update(struct loom_threads *th)
{
	double now = loom_now();
	if (th->fixed || now - th->last < 0.100)
		return 0;
	th->last = now;
	int n = fit_load(th);
	if (n != th->n && n != th->pending) { /* seen once: wait for the next look */
		th->pending = n;
		return 0;
	}
	th->pending = 0;
	if (n == th->n && omp_get_max_threads() == n)
		return 0;
	int changed = n != th->n;
	th->n = n;
	set_threads(n);
	return changed;
}

int loom_threads_adapt(struct loom_threads *th, const char *what, unsigned long long i,
		       char *msg, size_t n)
{
	char d[96];
	if (!loom_threads_update(th))
		return 0;
	snprintf(msg, n, "%s %llu: %s", what, i, loom_threads_describe(th, d, sizeof d));
	return 1;
}

const char *loom_threads_describe(const struct loom_threads *th, char *buf, size_t n)
{
	if (th->fixed)
		snprintf(buf, n, "%d thread%s (set)", th->n, th->n == 1 ? "" : "s");
	else if (th->others < 0)
		snprintf(buf, n, "%d thread%s (%d CPU%s, load unknown)", th->n,
			 th->n == 1 ? "" : "s", th->ncpu, th->ncpu == 1 ? "" : "s");
	else
		snprintf(buf, n, "%d thread%s (%d CPU%s, %d other task%s running)", th->n,
			 th->n == 1 ? "" : "s", th->ncpu, th->ncpu == 1 ? "" : "s", th->others,
			 th->others == 1 ? "" : "s");
	return buf;
}
