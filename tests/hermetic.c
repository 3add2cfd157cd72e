/* hermetic.c - a C test sees the known environment of tests/hermetic.h,
 * and so do the OpenMP runtime and OpenBLAS, which read theirs before main
 * (tests/hermetic.t runs this with a caller's environment full of them). */
#include <omp.h>

#include "tap.h"

int main(void)
{
	extern char **environ;
	int n = 0;
	for (char **e = environ; *e; e++)
		if (hermetic_dirty(*e)) {
			diag("left in the environment: %s", *e);
			n++;
		}
	is_int(n, 0, "no OpenBLAS, OpenMP, oneDNN, loom (but LOOM_BUILD) or locale variables");
	is_str(getenv("LC_ALL"), "C.UTF-8", "LC_ALL=C.UTF-8");
	is_int(omp_get_max_threads(), omp_get_num_procs(),
	       "the OpenMP runtime read no OMP_NUM_THREADS: one thread per CPU");
	is_int(omp_get_dynamic(), 0, "nor OMP_DYNAMIC");
	return done_testing();
}
