/*
 * loom_blas.h - keep OpenBLAS off its slow fallback kernels.
 *
 * Purpose: Debian's OpenBLAS 0.3.21 does not know some current CPUs and
 * falls back to its SSE3 "Prescott" kernels (about 5x slower sgemm).  The
 * kernel set is chosen when the library loads, from OPENBLAS_CORETYPE, so
 * the only fix from inside a program is to re-execute itself with that
 * variable set.  loom_blas_better_core() tells whether that is worth it;
 * loom_blas_reexec() does it, and makes OpenMP's waiting threads sleep.
 * Tools that multiply matrices (loom-train, loom-eval) call both first thing
 * in main, before any thread starts.
 *
 * Threads on a shared machine (struct loom_threads): every parallel region
 * of a forward or backward pass (hundreds per step) ends at a barrier, so
 * a team with more threads than the CPUs other processes leave free waits,
 * at each barrier, for a thread the kernel has descheduled: a mini-preset
 * eval beside three busy processes on 2 cores took 88 s on 2 threads and
 * 1.3 s on one.  The default thread count therefore follows the load: the
 * CPUs minus the runnable tasks of other processes (/proc/loadavg), looked
 * at again by the caller at every training step, eval frame or generated
 * token.  An explicit count (-j N, or OMP_NUM_THREADS in the environment)
 * stays exactly that.
 *
 * Ownership/errors: nothing to free.  loom_blas_reexec() returns only when
 * there is nothing to change or on failure (negative errno); nothing prints.
 * Thread-safety: unlike the default, loom_blas_reexec() (setenv, execv) must
 * run before any other thread exists; loom_blas_better_core() is
 * thread-safe; a struct loom_threads belongs to the thread that runs the
 * model (it sets the OpenMP thread count of the process, and holds
 * OpenBLAS's own at 1: loom_mm_gemm() runs sgemm on each thread of the
 * OpenMP team, lib/kernels/loom_mm.h).
 */
#ifndef LOOM_BLAS_H
#define LOOM_BLAS_H

#include <stddef.h>

/* The environment variable a re-executed process finds the old core in. */
#define LOOM_BLAS_DETECTED_ENV "LOOM_OPENBLAS_DETECTED"

/* OpenBLAS's current core name ("SkylakeX", "Prescott", ...; "?" unknown). */
const char *loom_blas_core(void);

/* If OpenBLAS runs a generic/old core on a CPU with AVX, AVX2+FMA or
 * AVX-512, the OPENBLAS_CORETYPE that fits ("Sandybridge", "Haswell",
 * "SkylakeX"); NULL when nothing is to gain, when OPENBLAS_CORETYPE is
 * already set, or in a process that was already re-executed. */
const char *loom_blas_better_core(void);

/* If the user's OPENBLAS_CORETYPE holds OpenBLAS to a weaker core than
 * this CPU supports (e.g. Haswell's AVX2 kernels on an AVX-512 CPU, about
 * half the sgemm rate), the core that fits ("SkylakeX", "Haswell",
 * "Sandybridge"); NULL otherwise, and in a process loom re-executed with
 * its own choice. */
const char *loom_blas_weaker_core(void);

/* Re-execute the program once (execv("/proc/self/exe", argv)) with the
 * environment OpenBLAS and the OpenMP runtime read when they load, before
 * main:
 *  - OMP_WAIT_POLICY=passive unless the user set a policy: a thread that
 *    waits at a barrier sleeps rather than spins, and leaves its CPU to the
 *    thread everyone waits for (a few microseconds per parallel region);
 *  - OPENBLAS_CORETYPE=core and LOOM_OPENBLAS_DETECTED=<current core> when
 *    core (from loom_blas_better_core()) is not NULL.
 * Returns 0 when there is nothing to change (so in the re-executed
 * process), -errno if exec failed (the environment is restored). */
int loom_blas_reexec(char *const *argv, const char *core);

/* The threads of the OpenMP team: a fixed count or one that follows the
 * load.  Fields are read-only for callers. */
struct loom_threads {
	int fixed;	/* 1: an explicit count, never changed */
	int ncpu;	/* the CPUs this process may run on */
	int n;		/* the count in force */
	int others;	/* runnable tasks of other processes at the last look;
			 * -1 when unknown (no /proc) or fixed */
	int pending;	/* a new count seen at the last look, to be confirmed
			 * by the next; 0: none */
	double last;	/* loom_now() of the last look */
};

/* Set up th and the thread count: threads > 0 is an explicit count (-j N);
 * 0 takes OMP_NUM_THREADS when set, else follows the load (a first look
 * now). */
void loom_threads_init(struct loom_threads *th, int threads);

/* When the count follows the load and the last look is 100 ms old or
 * more, look again (/proc/loadavg; /proc/self/task only when other tasks
 * may be running) and set the count, once two looks in a row found the
 * same new one (a burst of load seen once changes nothing).  Call it
 * outside parallel regions, at each step, frame or token.  Returns 1 when
 * the count changed, else 0. */
int loom_threads_update(struct loom_threads *th);

/* loom_threads_update() before step, frame or token i of `what`; when the
 * count changed, returns 1 with "WHAT I: " and loom_threads_describe()'s
 * text in msg (for -v), else 0. */
int loom_threads_adapt(struct loom_threads *th, const char *what, unsigned long long i,
		       char *msg, size_t n);

/* The threads to run with on ncpu CPUs when `others` tasks of other
 * processes are runnable: the CPUs they leave free, at least 1.
 * others < 0 (unknown): ncpu. */
int loom_threads_for_load(int ncpu, int others);

/* The runnable tasks (threads) of the whole machine in the text of
 * /proc/loadavg ("0.50 0.40 0.30 3/123 4567": 3); LOOM_EFORMAT if
 * malformed. */
int loom_threads_running(const char *loadavg);

/* For -v: "2 threads (set)", "1 thread (2 CPUs, 3 other tasks running)". */
const char *loom_threads_describe(const struct loom_threads *th, char *buf, size_t n);

#endif
