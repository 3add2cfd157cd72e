/*
 * train_plan.h - loom-train's --dry-run printout (parameters, memory plan,
 * FLOPs, the time estimate, with --memory-per-rank the ranks needed and
 * the largest preset that fits) and --bench-sgemm; they print on stdout
 * and exit on an error.
 */
#ifndef TRAIN_PLAN_H
#define TRAIN_PLAN_H

#include <stdint.h>

struct loom_config;

/* The --dry-run report of c (mem: --memory-per-rank in bytes, 0: none;
 * mem_name: as given, for the lines). */
void train_print_dry_run(const struct loom_config *c, uint64_t mem, const char *mem_name);
/* The best sgemm GFLOP/s of a few products (-v: each on stderr). */
double train_bench_sgemm(int verbose);

#endif
