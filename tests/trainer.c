/* The trainer object (lib/train/loom_trainer.h) without a tool: a GPT
 * configured from a preset and --set, built from the seed, fitted to the
 * first frame, stepped; a checkpoint resumed continues bit-exactly (the
 * same losses and weights as the run that went on); held-out evaluation
 * over a frames file counts every target and leaves the weights alone;
 * a BERT (task=mlm) steps and resumes the same way; --keep-best's
 * promotion and its record across a resume;
 * the refusals keep their message (and say when it is a usage error). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom_batch.h"
#include "loom_bert.h"
#include "loom_trainer.h"
#include "tap.h"

enum { B = 2, REC = 17, V = 64 };

static char *sets[] = { "vocab_size=64,n_layer=2,n_embd=32,n_head=2,n_positions=32,steps=8" };

/* frame `seq`: B records of REC tokens following a rule the model learns */
static void make_frame(uint64_t seq, struct loom_batch_hdr *h, uint32_t *tok)
{
	*h = (struct loom_batch_hdr){ .version = 1, .dtype = LOOM_BATCH_U32, .batch = B, .seq_len = REC, .seq = seq,
				      .world = 1 };
	for (int r = 0; r < B; r++)
		for (int i = 0; i < REC; i++)
			tok[r * REC + i] = (uint32_t)((seq * 5 + (uint64_t)r * 3 + (uint64_t)i * 7) % V);
}

/* A trainer configured, settled and built (metric: --keep-best's, or NULL). */
static int start_with(struct loom_trainer *t, const char *resume, const char *save,
		      const char *metric)
{
	struct loom_trainer_opts o = { .config = "tiny", .sets = sets, .nsets = 1,
				       .resume = resume, .save_dir = save, .keep_best = metric };
	loom_trainer_init(t, &o, NULL);
	int rc = loom_trainer_configure(t);
	if (!rc)
		rc = loom_trainer_settle(t);
	if (!rc)
		rc = loom_trainer_build(t);
	if (rc)
		diag("%s", t->err.msg);
	return rc;
}

static int start(struct loom_trainer *t, const char *resume, const char *save)
{
	return start_with(t, resume, save, NULL);
}

/* One optimizer step on frame t->step (grad_accum 1): its loss. */
static float train_step(struct loom_trainer *t)
{
	struct loom_batch_hdr h;
	uint32_t tok[B * REC];
	make_frame(t->data_seq, &h, tok);
	struct loom_frame f = { .h = &h, .tok = tok, .src = "test", .n = h.seq };
	float loss = NAN, lr, norm;
	double lsum;
	loom_trainer_begin_step(t);
	if (loom_trainer_micro(t, &f, 0, &loss))
		diag("%s", t->err.msg);
	lsum = loss;
	loom_trainer_step(t, &lsum, &lr, &norm);
	return loss;
}

static void step_and_resume(const char *dir)
{
	struct loom_trainer a, b;
	float la[5], lb[2];
	is_int(start(&a, NULL, dir), 0, "a GPT from preset tiny and --set");
	ok(a.g && !a.b && a.ops == &loom_gpt_ops, "  the GPT behind the model interface");
	is_int(loom_trainer_fit_frame(&a, B, REC, 0), 0, "the first frame fits");
	is_int(a.cfg.micro_batch, B, "  micro_batch from the frames (the preset's gave way)");
	is_int(a.cfg.seq_len, REC - 1, "  seq_len from the frames' records");
	for (int i = 0; i < 3; i++)
		la[i] = train_step(&a);
	is_int((int)a.step, 3, "three steps");
	is_int((int)a.data_seq, 3, "  the stream position follows the frames");
	is_int((int)a.tokens, 3 * B * (REC - 1), "  tokens counted");
	ok(isfinite(la[0]) && fabsf(la[0] - logf(V)) < 0.5f, "  the first loss is about ln V (%g)",
	   la[0]);
	is_int(loom_trainer_save(&a), 0, "a checkpoint at step 3");
	ok(strstr(a.saved_path, "step-00000003") != NULL, "  written to %s", a.saved_path);
	for (int i = 3; i < 5; i++)
		la[i] = train_step(&a);
	ok(la[4] < la[0], "the loss falls (%g -> %g)", la[0], la[4]);

	is_int(start(&b, a.saved_path, NULL), 0, "resumed from the checkpoint");
	is_int((int)b.step, 3, "  at step 3");
	is_int((int)b.data_seq, 3, "  the next frame is 3");
	is_int(loom_trainer_fit_frame(&b, B, REC, 0), 0, "  the frames fit the checkpoint's config");
	for (int i = 0; i < 2; i++)
		lb[i] = train_step(&b);
	ok(!memcmp(lb, la + 3, sizeof lb), "  steps 4 and 5 have the same losses bit for bit");
	is_mem(b.g->params, a.g->params, sizeof(float) * a.g->n_params,
	       "  and the same weights as the run that went on");
	is_mem(b.g->m, a.g->m, sizeof(float) * a.g->n_params, "  and AdamW moments");
	loom_trainer_release(&b);
	loom_trainer_release(&a);
}

static void evaluate(const char *dir)
{
	struct loom_trainer t;
	char path[4200];
	snprintf(path, sizeof path, "%s/eval.frames", dir);
	FILE *f = fopen(path, "wb");
	int wrote = f != NULL;
	for (int i = 0; f && i < 3; i++) {
		struct loom_batch_hdr h;
		uint32_t tok[B * REC];
		static unsigned char buf[1 << 16];
		make_frame(100 + (uint64_t)i, &h, tok);
		long n = loom_batch_encode(&h, tok, buf);
		wrote &= n > 0 && fwrite(buf, 1, (size_t)n, f) == (size_t)n;
	}
	struct loom_batch_hdr end = { .version = 1, .dtype = LOOM_BATCH_U32,
				      .flags = LOOM_BATCH_F_END, .seq = 103, .world = 1 };
	unsigned char eb[LOOM_BATCH_HEADER_SIZE];
	long n = loom_batch_encode(&end, NULL, eb);
	wrote &= f && n > 0 && fwrite(eb, 1, (size_t)n, f) == (size_t)n;
	ok(f && wrote && !fclose(f), "a frames file of 3 frames and the end");
	is_int(start(&t, NULL, NULL), 0, "a new GPT");
	loom_trainer_fit_frame(&t, B, REC, 0);
	float *before = malloc(sizeof(float) * t.g->n_params);
	memcpy(before, t.g->params, sizeof(float) * t.g->n_params);
	struct loom_eval_sums s1, s2;
	is_int(loom_trainer_evaluate(&t, path, 0, NULL, &s1), 0, "evaluation over the file");
	is_int((int)s1.n, 3 * B * (REC - 1), "  every target counted");
	ok(isfinite(s1.nll) && fabs(s1.nll / (double)s1.n - log(V)) < 0.5,
	   "  the mean loss is about ln V (%g)", s1.nll / (double)s1.n);
	ok(s1.correct >= 0 && s1.correct <= s1.n, "  the right predictions are counted");
	is_int(loom_trainer_evaluate(&t, path, 2, NULL, &s2), 0, "at most 2 frames");
	is_int((int)s2.n, 2 * B * (REC - 1), "  2 frames' targets");
	is_mem(t.g->params, before, sizeof(float) * t.g->n_params, "the weights are unchanged");
	snprintf(path, sizeof path, "%s/none.frames", dir);
	ok(loom_trainer_evaluate(&t, path, 0, NULL, &s1) == LOOM_EIO &&
	   strstr(t.err.msg, "none.frames"), "a missing file: %s", t.err.msg);
	free(before);
	loom_trainer_release(&t);
}

/* task=mlm on token frames: rows [CLS] record [SEP], masks keyed by the
 * stream position, so a resumed run draws the same ones. */
static void bert_mlm(const char *dir)
{
	static char *bsets[] = { "task=mlm,n_layer=1,n_embd=32,n_head=2,intermediate=64,"
				 "vocab_size=128,n_positions=32,seq_len=18,steps=8" };
	struct loom_trainer_opts o = { .config = "bert-tiny", .sets = bsets, .nsets = 1,
				       .save_dir = dir };
	struct loom_trainer a, b;
	float la[3], lb;
	char saved[4096];
	loom_trainer_init(&a, &o, NULL);
	ok(!loom_trainer_configure(&a) && !loom_trainer_settle(&a) && !loom_trainer_build(&a) &&
	   a.b && !a.g && a.ops == &loom_bert_ops, "a BERT (task=mlm) behind the same interface");
	if (a.err.msg[0])
		diag("%s", a.err.msg);
	is_int(loom_trainer_fit_frame(&a, B, REC, 0), 0, "  its first frame fits");
	is_int(a.cfg.seq_len, REC + 1, "  seq_len 18 holds a record's 17 tokens, [CLS] and [SEP]");
	la[0] = train_step(&a);
	is_int(loom_trainer_save(&a), 0, "  a checkpoint at step 1");
	snprintf(saved, sizeof saved, "%s", a.saved_path);
	la[1] = train_step(&a);
	la[2] = train_step(&a);
	ok(isfinite(la[0]) && isfinite(la[2]), "  finite losses (%g, %g)", la[0], la[2]);
	o.resume = saved;
	o.save_dir = NULL;
	loom_trainer_init(&b, &o, NULL);
	ok(!loom_trainer_configure(&b) && !loom_trainer_settle(&b) && !loom_trainer_build(&b) &&
	   b.step == 1, "  resumed at step 1");
	loom_trainer_fit_frame(&b, B, REC, 0);
	lb = train_step(&b);
	ok(!memcmp(&lb, &la[1], sizeof lb), "  step 2: the same loss bit for bit (%g)", lb);
	loom_trainer_release(&b);
	loom_trainer_release(&a);
}

/* --keep-best: promotion by a metric, its record in the checkpoints, kept
 * on --resume (the better of the checkpoint's and SAVE/best's). */
static int start_best(struct loom_trainer *t, const char *resume, const char *save,
		      const char *metric)
{
	int rc = start_with(t, resume, save, metric);
	return rc ? rc : loom_trainer_fit_frame(t, B, REC, 0);
}

static void keep_best(const char *dir)
{
	struct loom_trainer a, b;
	struct loom_ckpt_best was;
	char save[4200], step1[4300], link[64], p[4400];
	int higher = -1;
	ok(!loom_trainer_metric("eval/loss", &higher) && higher == 0, "eval/loss: lower is better");
	ok(!loom_trainer_metric("eval/f1", &higher) && higher == 1, "eval/f1: higher is better");
	is_int(loom_trainer_metric("eval/bleu", &higher), LOOM_EINVAL, "eval/bleu: not a metric");
	snprintf(save, sizeof save, "%s/kb", dir);
	is_int(start_best(&a, NULL, save, "eval/loss"), 0, "a GPT with keep_best eval/loss");
	train_step(&a);
	ok(!loom_trainer_improves(&a), "nothing offered: no promotion");
	loom_trainer_offer(&a, "eval/accuracy", 0.5);
	ok(!loom_trainer_improves(&a), "another metric offered: no promotion");
	loom_trainer_offer(&a, "eval/loss", 3.0);
	ok(loom_trainer_improves(&a), "the first value promotes");
	is_int(loom_trainer_save_best(&a, &was), 0, "saved as best at step 1");
	ok(!was.metric[0] && a.best.value == 3.0 && a.best.step == 1 &&
	   !strcmp(a.best.metric, "eval/loss"), "  no best before; eval/loss 3 at step 1 now");
	ok(a.saved == 0, "  not a step checkpoint (latest untouched)");
	is_int(loom_trainer_save(&a), 0, "a step checkpoint at step 1");
	snprintf(step1, sizeof step1, "%s", a.saved_path);
	train_step(&a);
	struct loom_eval_sums sum;
	snprintf(p, sizeof p, "%s/eval.frames", dir); /* evaluate()'s */
	is_int(loom_trainer_evaluate(&a, p, 0, NULL, &sum), 0, "an evaluation");
	ok(!loom_trainer_improves(&a), "  clears the last one's offer");
	loom_trainer_offer(&a, "eval/loss", 3.5);
	ok(!loom_trainer_improves(&a), "a worse value: no promotion");
	loom_trainer_offer(&a, "eval/loss", NAN);
	ok(!loom_trainer_improves(&a), "NaN: no promotion");
	loom_trainer_offer(&a, "eval/loss", 2.0);
	ok(loom_trainer_improves(&a), "a lower loss promotes");
	is_int(loom_trainer_save_best(&a, &was), 0, "saved as best at step 2");
	ok(was.value == 3.0 && was.step == 1, "  the one it replaced: 3 at step 1");
	snprintf(p, sizeof p, "%s/best", save);
	ssize_t n = readlink(p, link, sizeof link - 1);
	link[n > 0 ? n : 0] = '\0';
	is_str(link, "best-00000002", "  SAVE/best -> best-00000002");
	ok(strstr(a.best_path, "/kb/best-00000002") != NULL, "  its directory: %s", a.best_path);
	loom_trainer_release(&a);

	is_int(start_best(&b, step1, save, "eval/loss"), 0, "resumed from step 1");
	ok(b.best.value == 2.0 && b.best.step == 2, "  the best so far is SAVE/best's (2 at step 2), "
	   "better than the checkpoint's record");
	train_step(&b);
	loom_trainer_offer(&b, "eval/loss", 2.5);
	ok(!loom_trainer_improves(&b), "  so 2.5 does not replace it");
	loom_trainer_release(&b);
	is_int(start_best(&b, step1, save, "eval/accuracy"), 0, "resumed with another metric");
	ok(!b.best.metric[0], "  starts without a best");
	loom_trainer_release(&b);
	is_int(start_best(&b, step1, NULL, NULL), 0, "resumed without keep_best");
	ok(!strcmp(b.best.metric, "eval/loss") && b.best.value == 3.0,
	   "  the checkpoint's record carried on");
	loom_trainer_release(&b);
	struct loom_trainer_opts o = { .config = "tiny", .keep_best = "eval/f1" };
	loom_trainer_init(&b, &o, NULL);
	ok(!loom_trainer_configure(&b) && loom_trainer_settle(&b) == LOOM_EINVAL && b.usage &&
	   strstr(b.err.msg, "--keep-best eval/f1: the run reports it only with --eval-squad"),
	   "eval/f1 without --eval-squad: a usage error (%s)", b.err.msg);
	loom_trainer_release(&b);
}

static void refusals(void)
{
	struct loom_trainer t;
	struct loom_trainer_opts o = { .config = "no-such-preset" };
	loom_trainer_init(&t, &o, NULL);
	ok(loom_trainer_configure(&t) == LOOM_EINVAL && t.usage &&
	   strstr(t.err.msg, "no-such-preset"), "an unknown preset is a usage error: %s",
	   t.err.msg);
	loom_trainer_release(&t);
	char *bad[] = { "micro_batch=4" };
	o = (struct loom_trainer_opts){ .config = "tiny", .sets = bad, .nsets = 1 };
	loom_trainer_init(&t, &o, NULL);
	ok(!loom_trainer_configure(&t) && !loom_trainer_settle(&t) && !loom_trainer_build(&t),
	   "micro_batch=4 set by the user");
	ok(loom_trainer_fit_frame(&t, B, REC, 4) == LOOM_EFORMAT && !t.usage &&
	   strstr(t.err.msg, "stdin: frame 4: ") && strstr(t.err.msg, "from --set"),
	   "  frames of 2 records refused, naming where it was set: %s", t.err.msg);
	loom_trainer_release(&t);
}

int main(void)
{
	const char *dir = tap_tmpdir();
	step_and_resume(dir);
	evaluate(dir);
	bert_mlm(dir);
	keep_best(dir);
	refusals();
	return done_testing();
}
