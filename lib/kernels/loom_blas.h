/*
 * loom_blas.h - keep OpenBLAS off its slow fallback kernels.
 *
 * Purpose: Debian's OpenBLAS 0.3.21 does not know some current CPUs and
 * falls back to its SSE3 "Prescott" kernels (about 5x slower sgemm).  The
 * kernel set is chosen when the library loads, from OPENBLAS_CORETYPE, so
 * the only fix from inside a program is to re-execute itself with that
 * variable set.  loom_blas_better_core() tells whether that is worth it;
 * loom_blas_reexec() does it.  Tools that multiply matrices (loom-train,
 * loom-eval) call both first thing in main, before any thread starts.
 *
 * Ownership/errors: no allocation.  loom_blas_reexec() returns only on
 * failure (negative errno); nothing prints.  Thread-safety: unlike the
 * default, loom_blas_reexec() (setenv, execv) must run before any other
 * thread exists; loom_blas_better_core() is thread-safe.
 */
#ifndef LOOM_BLAS_H
#define LOOM_BLAS_H

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

/* Set OPENBLAS_CORETYPE=core and LOOM_OPENBLAS_DETECTED=<current core>
 * and execv("/proc/self/exe", argv).  Returns -errno if exec failed (the
 * environment is restored). */
int loom_blas_reexec(char *const *argv, const char *core);

#endif
