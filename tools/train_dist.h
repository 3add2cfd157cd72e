/*
 * train_dist.h - loom-train's side of data parallelism (lib/train/loom_dist.h):
 * joining the MPI job, the per-step agreement of the ranks on stop/end/
 * failure, the sharded optimizer step, and checkpoint gathering.  These
 * print (rank-prefixed messages) and exit; with one process (no mpirun, or
 * a build without MPI) every call reduces to loom-train's single-process
 * behaviour.
 *
 * Step protocol (every rank, once per optimizer step): read the frames of
 * the step; right after the last micro-batch's frame was read
 * (sharding=weights: after each micro-batch's frame), or as soon
 * as the input ended or failed, train_dist_sync() exchanges each rank's
 * status and stop signal.  All ranks then do the same thing: train the
 * step (and stop after it if any rank got SIGINT/SIGTERM/SIGUSR1), end
 * normally (every input ended at the same step), or exit 1 with one
 * message from rank 0 naming the ranks at fault.  Stop signals are held
 * blocked between syncs so every rank sees the same ones.
 */
#ifndef TRAIN_DIST_H
#define TRAIN_DIST_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

struct loom_config;
struct loom_dist_model;

/* SIGINT, SIGTERM and SIGUSR1 set *stop (the first; a second one ends the
 * process at once), noting who sent it.  Under mpirun they are taken only
 * at train_dist_sync, and the ranks agree on the first rank's. */
void train_dist_catch_stops(volatile sig_atomic_t *stop);
/* " (sent by pid 4242, timeout, to rank 1)": who sent the stop signal
 * (pid and name: a process's kill; none for the kernel's, e.g. a
 * terminal's ^C), and under mpirun the rank it reached; "" if unknown. */
const char *train_dist_stop_from(char *buf, size_t n);
/* Join the job (MPI_Init under mpirun); messages become "loom-train: rank N". */
void train_dist_init(int *argc, char ***argv);
int train_dist_rank(void);
int train_dist_world(void);
/* For --version: "Open MPI v4.1.4 (data-parallel)" or "no MPI (single process)". */
const char *train_dist_version(void);
/* data_parallel = the number of ranks (a --set data_parallel=K that
 * disagrees with it is a usage error); the ranks' wait for a silent one
 * gives up after dist_timeout. */
void train_dist_config(struct loom_config *c, char **sets, int nsets);
/* Answer the other ranks' roll call (loom_dist_answer): at least every
 * second while this rank waits for its input. */
void train_dist_answer(void);
/* Share the model: parameters from rank 0, moments sharded; prints the world
 * and the optimizer memory per rank (rank 0, unless quiet). */
void train_dist_attach(const struct loom_dist_model *m, int micro, int quiet, int verbose);
/* The frames of this rank must come from loom-feed --rank r --world w:
 * its replica's (tensor_parallel: the T ranks of a replica read the
 * same frames). */
void train_dist_check_frame(unsigned rank, unsigned world);
/* This rank's data-parallel replica (without tensor parallelism: its
 * rank) and its rank in the replica's tensor-parallel group (0 without). */
int train_dist_replica(void);
int train_dist_tp_rank(void);
/* Rank 0's v on every rank (every rank calls it): a decision rank 0
 * makes alone, such as --keep-best's after its evaluation. */
int train_dist_agree(int v);
/* The model's count of the bytes a rank sends per step in the
 * tensor-parallel all-reduces (at its last forward's shape), reported
 * beside the measured at exit. */
struct loom_trainer;
void train_dist_tp_bound(const struct loom_trainer *t);
/* Collective over replica 0's ranks (the others return at once): each
 * writes its runs r[0..n) into the checkpoint s (loom_dist_save_runs);
 * the step directory into path[len]. */
struct loom_ckpt_run;
void train_dist_save_runs(const struct loom_ckpt_save *s, const struct loom_ckpt_run *r,
			  size_t n, char *path, size_t len);
/* sharding=weights: the parts of this rank's runs in its chunks
 * (loom_dist_load_runs). */
void train_dist_load_runs(struct loom_ckpt *ck, const struct loom_ckpt_tensor *t, size_t n,
			  const struct loom_ckpt_run *r, size_t nr, int optimizer);
/* status: 0 read the step's frames, 1 input ended (END frame), 2 failed.
 * Returns 1 if every rank's input ended (a normal end), 0 to train the
 * step; exits 1 when some ranks ended or failed.  Sets *stop to a stop
 * signal any rank received.  Once per step (later calls for the same
 * step return the first answer). */
int train_dist_sync(uint64_t step, int status, volatile sig_atomic_t *stop);
/* Micro-batch `micro` of the step begins (`last`: the step's last):
 * returns 1 if the ranks sync once its frame is read (the last one;
 * sharding=weights: every one, as each forward gathers weights from all
 * ranks). */
int train_dist_micro_begin(int micro, int last);
/* Its backward is done (sharding=weights: the gradients reduce-scattered). */
void train_dist_micro_end(void);
/* A data failure on this rank: the message, then the agreement (exit 1). */
_Noreturn void train_dist_fail(uint64_t step, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* An error every rank reached together (after train_dist_sync agreed on
 * it, e.g. every input ended inside the first step): rank 0 prints the
 * message, every rank exits 1, MPI finalized rather than aborted. */
_Noreturn void train_dist_agreed_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with exit status `code` (2: a usage error, with the hint). */
_Noreturn void train_dist_agreed_exit(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The attached model's step over the ranks; *lsum becomes the mean over ranks. */
void train_dist_step(float lr, int64_t t, float *norm, double *lsum);
/* 1 under sharding=weights over several ranks. */
int train_dist_shards_weights(void);
/* sharding=weights: every rank writes its part of the checkpoint s
 * (loom_dist_save); the step directory into path[n]. */
struct loom_ckpt_save;
void train_dist_save(const struct loom_ckpt_save *s, char *path, size_t n);
/* sharding=weights, once attached: this rank's chunks of the weights (and
 * with `optimizer` the moments) from ck; a bad file stops every rank. */
struct loom_ckpt;
struct loom_ckpt_tensor;
void train_dist_load(struct loom_ckpt *ck, const struct loom_ckpt_tensor *t, size_t n,
		     int optimizer);
/* Around a checkpoint save (every rank calls both): gathers the moments on
 * rank 0 into the attached model's m and v; returns 1 on the rank that
 * writes. */
int train_dist_save_begin(void);
void train_dist_save_end(void);
/* The trainer t's hooks into this layer (lib/train/loom_trainer.h), its
 * lines through cli_warn. */
struct loom_trainer;
struct loom_trainer_hooks;
void train_dist_hooks(struct loom_trainer_hooks *hk, struct loom_trainer *t);
/* Wait until fd has data (or EOF), answering the other ranks' roll call
 * meanwhile; 0 if *stop was set first, -1 if nothing came for `limit`
 * seconds (> 0), else 1. */
int train_dist_wait_input(int fd, double limit, volatile sig_atomic_t *stop);
/* The input ended inside the run's first step on every rank (they
 * agreed): one line, exit 1, nothing saved. */
_Noreturn void train_dist_trained_nothing(int grad_accum, int micro, int resumed);

#endif
