/* threads.c - the thread count that follows the load (lib/kernels/loom_blas.h):
 * the load-to-threads function, the /proc/loadavg reading, an explicit count,
 * a new count taken at the second look that finds it. */
#include <omp.h>
#include <string.h>

#include "loom_blas.h"
#include "loom_common.h"
#include "tap.h"

int main(void)
{
	/* ncpu, others -> threads */
	static const int table[][3] = {
		{ 2, 0, 2 }, { 2, 1, 1 }, { 2, 2, 1 }, { 2, 3, 1 }, { 2, 99, 1 },
		{ 2, -1, 2 }, { 1, 0, 1 }, { 1, 5, 1 }, { 64, 10, 54 }, { 64, 63, 1 },
		{ 8, 7, 1 }, { 8, 6, 2 }, { 0, 0, 1 },
	};
	for (size_t i = 0; i < sizeof table / sizeof *table; i++)
		is_int(loom_threads_for_load(table[i][0], table[i][1]), table[i][2],
		       "%d CPUs, %d other runnable tasks: %d threads", table[i][0], table[i][1],
		       table[i][2]);

	is_int(loom_threads_running("0.50 0.40 0.30 3/123 4567\n"), 3, "/proc/loadavg: 3 running");
	is_int(loom_threads_running("12.01 8.00 2.10 17/2048 99"), 17, "17 running");
	is_int(loom_threads_running("0.00 0.00 0.00 1/80 5"), 1, "only the reader");
	is_int(loom_threads_running("0.50 0.40 0.30 3 123"), LOOM_EFORMAT, "no slash: malformed");
	is_int(loom_threads_running("0.50 0.40"), LOOM_EFORMAT, "truncated: malformed");
	is_int(loom_threads_running(""), LOOM_EFORMAT, "empty: malformed");
	is_int(loom_threads_running("0.1 0.1 0.1 9/3 1"), LOOM_EFORMAT, "more running than tasks: malformed");

	struct loom_threads th;
	char d[96];
	loom_threads_init(&th, 3);
	is_int(th.fixed, 1, "-j 3: fixed");
	is_int(omp_get_max_threads(), 3, "-j 3: OpenMP runs 3 threads");
	is_int(loom_threads_update(&th), 0, "an update leaves a fixed count alone");
	is_int(omp_get_max_threads(), 3, "still 3");
	is_str(loom_threads_describe(&th, d, sizeof d), "3 threads (set)", "-v: 3 threads (set)");

	loom_threads_init(&th, 0); /* the environment is clean (hermetic.h): no OMP_NUM_THREADS */
	is_int(th.fixed, 0, "default: follows the load");
	ok(th.n >= 1 && th.n <= omp_get_num_procs(), "between 1 and the CPUs (%d)", th.n);
	is_int(omp_get_max_threads(), th.n, "OpenMP runs that count");
	ok(th.others >= 0, "the load was read from /proc/loadavg (%d other tasks running)",
	   th.others);
	is_int(th.n, loom_threads_for_load(th.ncpu, th.others), "the count fits the load read");
	th.n = 1;
	th.others = 3;
	th.ncpu = 2;
	is_str(loom_threads_describe(&th, d, sizeof d), "1 thread (2 CPUs, 3 other tasks running)",
	       "-v: 1 thread (2 CPUs, 3 other tasks running)");

	/* a new count is taken when two looks in a row find it: on one CPU
	 * every load fits 1 thread, so a count of 5 goes at the second look */
	loom_threads_init(&th, 0);
	th.ncpu = 1;
	th.n = 5;
	th.last = 0;
	is_int(loom_threads_update(&th), 0, "the first look at a new count changes nothing");
	is_int(th.n, 5, "still 5, 1 pending");
	is_int(loom_threads_update(&th), 0, "a look within 100 ms of the last is skipped");
	th.last = 0;
	char msg[160];
	is_int(loom_threads_adapt(&th, "step", 7, msg, sizeof msg), 1,
	       "the second look finding 1 changes the count");
	ok(!strncmp(msg, "step 7: 1 thread (1 CPU, ", 25), "-v: what, which one and the count (%s)",
	   msg);
	is_int(th.n, 1, "now 1");
	is_int(omp_get_max_threads(), 1, "OpenMP runs 1");
	th.n = 5;
	th.pending = 3;
	th.last = 0;
	is_int(loom_threads_update(&th), 0, "a look finding another count than the pending one waits");
	is_int(th.pending, 1, "... and that count is now the pending one");

	setenv("OMP_NUM_THREADS", "2", 1);
	loom_threads_init(&th, 0);
	is_int(th.fixed, 1, "OMP_NUM_THREADS set: a fixed count");
	return done_testing();
}
