/* loom_blas.c - see loom_blas.h */
#include "loom_blas.h"

#include <cblas.h>
#include <errno.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

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
	if (setenv("OPENBLAS_CORETYPE", core, 1) < 0 ||
	    setenv(LOOM_BLAS_DETECTED_ENV, loom_blas_core(), 1) < 0)
		return -errno;
	execv("/proc/self/exe", argv);
	int e = errno;
	unsetenv("OPENBLAS_CORETYPE");
	unsetenv(LOOM_BLAS_DETECTED_ENV);
	return -e;
}
