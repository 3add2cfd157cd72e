/*
 * loom_plan.h - what a run needs before it starts: the memory plan per
 * rank of a configuration (a GPT's or a BERT's, lib/train/loom_trainer.h),
 * the ranks (or the data x tensor-parallel grid) it needs of a given
 * memory, the largest GPT preset that fits,
 * and the machine's matmul rate in the run's precision (loom-train
 * --dry-run prints them).
 *
 * Ownership: nothing kept.  Errors: a negative LOOM_E* code, the message
 * in the struct loom_err passed in.  Nothing prints.  Thread-safety: the
 * default (loom_common.h).
 */
#ifndef LOOM_PLAN_H
#define LOOM_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"
#include "loom_config.h"
#include "loom_gpt.h"

/* the most ranks loom_plan_ranks_needed tries */
#define LOOM_PLAN_MAX_RANKS 65536

/* The plan per rank of c on n ranks (c's sharding), with or without
 * recompute. */
void loom_plan_on(const struct loom_config *c, int n, int recompute, struct loom_model_mem *m);
/* The smallest rank count (up to LOOM_PLAN_MAX_RANKS) on which c fits
 * `mem` bytes per rank, or 0; *m its plan (none fits: the plan on the
 * most ranks). */
int loom_plan_ranks_needed(const struct loom_config *c, int recompute, uint64_t mem,
			   struct loom_model_mem *m);
/* The smallest grid of D data-parallel replicas x T tensor-parallel ranks
 * (fewest ranks D x T, up to LOOM_PLAN_MAX_RANKS; of as many, the least
 * T) on which the model c fits `mem` bytes per rank with its sharding and
 * recompute: T among the divisors of n_head that divide the MLP width
 * (4 x n_embd; a BERT's intermediate) and, with sequence_parallel,
 * seq_len, the vocabulary padded up to a multiple of T (*vocab: the
 * padded size, c's when T divides it).  Returns D x T with *D, *T and
 * its plan in *m, or 0 when none fits. */
int loom_plan_grid(const struct loom_config *c, uint64_t mem, int *D, int *T, int *vocab,
		   struct loom_model_mem *m);
/* Of the GPT presets (share/presets/\*.json of model gpt), each as it is
 * but with c's sharding, precision and rank count: the one of the most
 * parameters that fits `mem` bytes per rank (fit[len], its plan in *m)
 * and the one of the least memory (small[len], its total in
 * *small_total); "" when there is none. */
int loom_plan_best_preset(const struct loom_config *c, uint64_t mem, char *fit, char *small,
			  size_t len, struct loom_model_mem *m, uint64_t *small_total,
			  struct loom_err *err);
/* The machine's matmul rate in c's precision: best of a few products of
 * the model's MLP shape (B*T x C x 4C, capped at 2048 x 1024 x 4096 so
 * the probe stays under a second on big models), in GFLOP/s into *gflops;
 * the shape into *M, *K, *N. */
int loom_plan_probe_matmul(const struct loom_config *c, int *M, int *K, int *N, double *gflops,
			   struct loom_err *err);

#endif
