/*
 * loom_profile.h - where a training step's time goes (loom-train --profile).
 *
 * Purpose: per-op wall time of a step, accumulated by the code that runs
 * the ops (the models in lib/train, the frame reader in lib/data) into
 * one process-wide table of seconds per op kind (matmuls forward and
 * backward, attention, LayerNorm, GELU, softmax/cross-entropy, ...), and
 * the step's split into parallel time (inside the ops that run as an
 * OpenMP team or an OpenBLAS call) and serial time (everything else: the
 * serial ops, such as reading frames, and the time between ops).  The
 * caller brackets a step with loom_prof_step_begin() and
 * loom_prof_step_end(), which returns the step's table; a step's
 * parallel + serial equals its total by construction.
 *
 * Cost: while profiling is off (the default) an instrumented op costs one
 * test of a global flag; on, two clock reads per op call (a few hundred
 * per step).  Ops are timed from the calling thread, around whole kernel
 * calls, never nested (each second of the step counts in one op at most).
 *
 * Ownership: a struct loom_prof is the caller's; the table behind the
 * macros is static.  Errors: none (nothing here fails or allocates).
 * Thread-safety: unlike the default, the accumulators are not locked:
 * enable, begin, end and the instrumented calls belong to one thread (the
 * one that runs the model; the kernels' OpenMP teams are inside the ops).
 */
#ifndef LOOM_PROFILE_H
#define LOOM_PROFILE_H

#include <stddef.h>

#include "loom_common.h"

/* The op kinds, in the order they are printed.  _fwd / _bwd: the forward
 * and the backward pass (backward's recomputation of forward ops under
 * recompute counts as _bwd). */
enum loom_prof_op {
	LOOM_PROF_DATA,		/* reading and checking the step's frames (serial) */
	LOOM_PROF_EMBED_FWD,	/* token + position (+ type) embedding */
	LOOM_PROF_EMBED_BWD,	/* its gradient scatter */
	LOOM_PROF_MATMUL_FWD,	/* every product: projections, MLP, LM / QA head */
	LOOM_PROF_MATMUL_BWD,
	LOOM_PROF_ATTN_FWD,	/* attention (QK^T, softmax, @V) per head and row */
	LOOM_PROF_ATTN_BWD,
	LOOM_PROF_LN_FWD,	/* LayerNorm */
	LOOM_PROF_LN_BWD,
	LOOM_PROF_GELU_FWD,
	LOOM_PROF_GELU_BWD,
	LOOM_PROF_ELEM_FWD,	/* dropout, residual adds, masks */
	LOOM_PROF_ELEM_BWD,
	LOOM_PROF_XENT_FWD,	/* softmax + cross-entropy of the head, counts */
	LOOM_PROF_XENT_BWD,
	LOOM_PROF_OPTIM,	/* gradient norm, clipping, AdamW, zeroing */
	LOOM_PROF_RIGL,		/* RigL's block scores, masks and updates */
	LOOM_PROF_COMM,		/* waiting for and exchanging with other ranks (serial) */
	LOOM_PROF_N
};

/* A step's table: seconds per op, the step's total and its split. */
struct loom_prof {
	double op[LOOM_PROF_N];
	double total;		/* step_begin to step_end */
	double parallel;	/* the sum of the parallel ops */
	double serial;		/* total - parallel: serial ops and the time between ops */
	double cpu;		/* CPU seconds of the process over the step, all threads
				 * (waiting threads that sleep count nothing): the work,
				 * which the load of other processes does not stretch */
};

extern int loom_prof_on;		/* read by the macros; set by loom_prof_enable */
extern double loom_prof_acc[LOOM_PROF_N];
extern int loom_prof_bwd;		/* 1 while a backward pass runs (loom_prof_backward) */

/* The pass the ops of a model's shared code (a forward recomputed by
 * backward, ...) count in: LOOM_PROF_PHASE(LOOM_PROF_LN_FWD) is _LN_BWD
 * while loom_prof_backward(1) holds. */
#define LOOM_PROF_PHASE(op) ((enum loom_prof_op)((op) + loom_prof_bwd))
void loom_prof_backward(int on);

/* Profiling on (1) or off (0) for the process; off clears nothing. */
void loom_prof_enable(int on);

/* The op's name in the report ("matmul_fwd", ...), and whether it runs
 * in parallel (1) or serially (0). */
const char *loom_prof_name(enum loom_prof_op op);
int loom_prof_parallel(enum loom_prof_op op);

/* A step: begin zeroes the accumulators (what ran between steps, such as an
 * evaluation, is not counted) and starts its clock; end fills *p.  While
 * off, end gives a table of zeros. */
void loom_prof_step_begin(void);
void loom_prof_step_end(struct loom_prof *p);

/* Add one step's table to a running sum (*sum zeroed by the caller), and
 * divide a sum of n steps into their mean. */
void loom_prof_add(struct loom_prof *sum, const struct loom_prof *p);
void loom_prof_mean(struct loom_prof *p, unsigned n);

/* The table as one JSON object, seconds with 6 significant digits:
 * {"seconds":..,"parallel":..,"serial":..,"serial_share":..,
 *  "ops":{"data":..,"embed_fwd":..,...}} (every op, in enum order), and as
 * one line for people: "1.234 s: serial 0.41%, parallel 99.59% | matmul_bwd
 * 40.1% matmul_fwd 20.3% ..." (the ops of at least 0.05% of the step,
 * largest first).  Both return the length snprintf would (output
 * truncated to n). */
int loom_prof_json(const struct loom_prof *p, char *buf, size_t n);
int loom_prof_text(const struct loom_prof *p, char *buf, size_t n);

/* Time an op: double t = LOOM_PROF_BEGIN(); ...; LOOM_PROF_END(op, t);
 * or LOOM_PROF(op, statement;) around one statement. */
#define LOOM_PROF_BEGIN() (loom_prof_on ? loom_now() : 0.0)
#define LOOM_PROF_END(o, t0)                                        \
	do {                                                        \
		if (loom_prof_on)                                   \
			loom_prof_acc[o] += loom_now() - (t0); \
	} while (0)
#define LOOM_PROF(o, stmt)                      \
	do {                                    \
		double loom_prof_t0_ = LOOM_PROF_BEGIN(); \
		stmt                            \
		LOOM_PROF_END(o, loom_prof_t0_);     \
	} while (0)

#endif
