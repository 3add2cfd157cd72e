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

/* --memory-per-rank SIZE (an option callback: 8GB, 8G, 8GiB); whether it
 * was given. */
void train_plan_on_memory(const char *opt, const char *arg);
int train_plan_has_memory(void);
/* The --dry-run report of c (with --memory-per-rank: the ranks it takes). */
void train_print_dry_run(const struct loom_config *c);
/* At the first frame: the model's size (live weights when sparse), the
 * preset and the key settings, one line on stderr. */
struct loom_trainer;
void train_print_model_line(const struct loom_trainer *t, int threads);
/* The best sgemm GFLOP/s of a few products (-v: each on stderr). */
double train_bench_sgemm(int verbose);

#endif
