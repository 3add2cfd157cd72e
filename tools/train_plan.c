/* train_plan.c - loom-train --dry-run's printout (the plans of
 * lib/train/loom_plan.h) and --bench-sgemm. */
/* before cblas.h, whose complex.h defines I (a field of struct loom_bert) */
#include "loom_bert.h"

#include <ctype.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "loom_kernels.h"
#include "loom_plan.h"
#include "loom_trainer.h"
#include "train_plan.h"

/* "2h05m", "3m12s", "4.2s" */
static const char *duration(double s, char *buf, size_t n)
{
	if (!(s < 1e9))
		snprintf(buf, n, "?");
	else if (s < 60)
		snprintf(buf, n, "%.1fs", s);
	else if (s < 3600)
		snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
	else if (s < 86400 * 3)
		snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
	else
		snprintf(buf, n, "%.1fd", s / 86400);
	return buf;
}

/* Model FLOP/s over the matmul probe rate of the same precision, the
 * dry-run estimate's assumption: measured by make bench
 * (tests/bench/train-bf16.sh) at gpt2 B=8,T=256 on 2 threads of an AMD
 * EPYC (Zen 4) shared with other work: fp32 0.52, bf16 0.31 (best step
 * over best probe).  A quiet machine does better, so the estimate leans
 * long. */
#define MFU_FP32 0.50
#define MFU_BF16 0.30

static const char *sharding_name(const struct loom_config *c)
{
	return c->sharding == LOOM_SHARD_WEIGHTS ? "weights" : "optimizer";
}

/* --memory-per-rank: the ranks c needs of `mem` bytes each (and with
 * recompute when c does not recompute), the smallest data x
 * tensor-parallel grid, and the largest GPT preset that fits c's rank
 * count. */
static void print_fit(const struct loom_config *c, uint64_t mem, const char *mem_name)
{
	struct loom_model_mem m, mr;
	char b0[32], b1[32], b2[32], fit[256], small[256], rec[96] = "";
	const char *sh = sharding_name(c);
	int n = loom_plan_ranks_needed(c, c->recompute, mem, &m), nr;
	if (!c->recompute && (nr = loom_plan_ranks_needed(c, 1, mem, &mr)) && (!n || nr < n))
		snprintf(rec, sizeof rec, "; with recompute: %d rank%s, %s per rank", nr,
			 nr == 1 ? "" : "s", cli_bytes((double)mr.total, b1, sizeof b1));
	if (n)
		printf("%s needs %d rank%s of %s (sharding=%s%s): %s per rank%s\n", c->preset, n,
		       n == 1 ? "" : "s", mem_name, sh, c->recompute ? ", recompute" : "",
		       cli_bytes((double)m.total, b0, sizeof b0), rec);
	else if (c->sharding == LOOM_SHARD_WEIGHTS) /* what does not shrink with the ranks */
		printf("%s does not fit ranks of %s (sharding=weights%s): on %d ranks a rank still "
		       "needs %s, the gathered layer buffers (%s) and activations (%s)%s whole%s\n",
		       c->preset, mem_name, c->recompute ? ", recompute" : "", LOOM_PLAN_MAX_RANKS,
		       cli_bytes((double)m.total, b0, sizeof b0),
		       cli_bytes((double)m.gathered, b1, sizeof b1),
		       cli_bytes((double)m.acts, b2, sizeof b2), m.bf16 ? " and bf16 copies" : "",
		       rec);
	else
		printf("%s does not fit ranks of %s (sharding=optimizer%s): on %d ranks a rank still "
		       "needs %s, the weights (%s), gradients and activations (%s) whole%s%s\n",
		       c->preset, mem_name, c->recompute ? ", recompute" : "", LOOM_PLAN_MAX_RANKS,
		       cli_bytes((double)m.total, b0, sizeof b0),
		       cli_bytes((double)m.params, b1, sizeof b1),
		       cli_bytes((double)m.acts, b2, sizeof b2),
		       "; sharding=weights shards the weights and gradients", rec);
	int D, T, V;
	if (loom_plan_grid(c, mem, &D, &T, &V, &m)) {
		char pad[48] = "";
		if (V != c->vocab_size)
			snprintf(pad, sizeof pad, ", vocab_size=%d", V);
		printf("%s: %d x %d ranks of %s (data x tensor parallel, sharding=%s%s%s): %s per "
		       "rank\n", c->preset, D, T, mem_name, sh, c->recompute ? ", recompute" : "",
		       pad, cli_bytes((double)m.total, b0, sizeof b0));
	} else {
		printf("%s: no grid of data x tensor-parallel ranks fits ranks of %s (sharding=%s%s, "
		       "up to %d ranks)\n", c->preset, mem_name, sh,
		       c->recompute ? ", recompute" : "", LOOM_PLAN_MAX_RANKS);
	}
	uint64_t small_total;
	int r = c->data_parallel;
	struct loom_err err = { 0 };
	if (loom_plan_best_preset(c, mem, fit, small, sizeof fit, &m, &small_total, &err))
		cli_die("%s", err.msg);
	if (*fit)
		printf("largest GPT preset that fits %d rank%s of %s: %s (%s per rank; sharding=%s)\n",
		       r, r == 1 ? "" : "s", mem_name, fit, cli_bytes((double)m.total, b0, sizeof b0), sh);
	else if (*small)
		printf("no GPT preset fits %d rank%s of %s: the smallest, %s, needs %s per rank "
		       "(sharding=%s)\n", r, r == 1 ? "" : "s", mem_name, small,
		       cli_bytes((double)small_total, b0, sizeof b0), sh);
}

/* " (1/R of WHOLE)" after a row that R ranks share, else "" */
static const char *share(int R, uint64_t x, uint64_t whole, char *buf, size_t len)
{
	char w[32];
	if (R < 2 || x >= whole)
		return "";
	snprintf(buf, len, " (1/%d of %s)", R, cli_bytes((double)whole, w, sizeof w));
	return buf;
}

/* --memory-per-rank (0: none), as given for the lines ("8 GB", "512 MiB") */
static uint64_t mem_per_rank;
static char mem_name[80];

/* --memory-per-rank SIZE: 8GB (powers of 1000), 8G or 8GiB (of 1024) */
void train_plan_on_memory(const char *opt, const char *arg)
{
	mem_per_rank = cli_size(opt, arg);
	if (!mem_per_rank)
		cli_usage_error("%s: '%s': a rank needs some memory", opt, arg);
	/* the unit as loom_parse_size read it, spelt out: 8g -> 8 GiB, 8gb -> 8 GB */
	const char *u = arg + strcspn(arg, "KMGTkmgt");
	size_t ul = strlen(u);
	int c = toupper((unsigned char)*u);
	if (!ul)
		snprintf(mem_name, sizeof mem_name, "%s B", arg);
	else
		snprintf(mem_name, sizeof mem_name, "%.*s %c%s", (int)(u - arg), arg,
			 ul == 2 && c == 'K' ? 'k' : c, ul == 2 ? "B" : "iB");
}

int train_plan_has_memory(void)
{
	return mem_per_rank != 0;
}

/* At the first frame (B and T are the data's): the model's size (and its
 * live weights when sparse), the preset and the key settings, one line. */
void train_print_model_line(const struct loom_trainer *t, int threads)
{
	const struct loom_config *c = &t->cfg;
	char live[96] = "";
	if (c->sparsity > 0) {
		uint64_t w = loom_config_sparse_weights(c);
		snprintf(live, sizeof live, " (%llu live at sparsity %g)",
			 (unsigned long long)(t->ops->n_params(t->model) - w +
					      (uint64_t)llround((1 - c->sparsity) * (double)w)),
			 c->sparsity);
	}
	cli_warn("%s: %llu parameters%s, %d thread%s, %s kernels, B=%d T=%d grad_accum %d, "
		 "%lld step%s, lr %g, %s", c->preset,
		 (unsigned long long)t->ops->n_params(t->model), live, threads,
		 threads == 1 ? "" : "s", loom_k_isa(), c->micro_batch, c->seq_len, c->grad_accum,
		 (long long)c->steps, c->steps == 1 ? "" : "s", c->lr,
		 c->precision == LOOM_PREC_BF16 ? "bf16 matmuls (oneDNN)" : "fp32 matmuls (OpenBLAS)");
}

void train_print_dry_run(const struct loom_config *c)
{
	struct loom_model_mem m0, m1;
	char b0[32], b1[48], b3[32], b4[32], kind[64] = "", per[96] = "";
	uint64_t np = loom_config_n_params(c);
	int TP = c->tensor_parallel, R = c->data_parallel, S = TP > 1 ? 1 : R; /* S: shares shown */
	loom_trainer_plan(c, 0, &m0);
	loom_trainer_plan(c, 1, &m1);
	if (c->model != LOOM_MODEL_GPT)
		snprintf(kind, sizeof kind, "%s task=%s, ", loom_model_name(c->model),
			 loom_task_name(c->task));
	if (R > 1)
		snprintf(per, sizeof per, " per rank of %d (sharding=%s)", R, sharding_name(c));
	if (TP > 1)
		snprintf(per, sizeof per, " per rank of %d x %d (data x tensor parallel, sharding=%s)",
			 R, TP, sharding_name(c));
	printf("config: %s (%sn_layer %d, n_embd %d, n_head %d, vocab %d, seq_len %d)\n", c->preset,
	       kind, c->n_layer, c->n_embd, c->n_head, c->vocab_size, c->seq_len);
	printf("parameters: %llu (%.3fB)\n", (unsigned long long)np, np / 1e9);
	printf("memory plan%s at micro_batch %d x seq_len %d (%s):\n", per, c->micro_batch,
	       c->seq_len, c->precision == LOOM_PREC_BF16 ? "bf16 matmuls, fp32 state" : "fp32");
	printf("  parameters      %s%s\n", cli_bytes((double)m0.params, b0, sizeof b0),
	       share(S, m0.params, np * 4, b1, sizeof b1));
	printf("  gradients       %s%s\n", cli_bytes((double)m0.grads, b0, sizeof b0),
	       share(S, m0.grads, np * 4, b1, sizeof b1));
	printf("  AdamW m + v     %s%s\n", cli_bytes((double)m0.adam, b0, sizeof b0),
	       share(S, m0.adam, np * 8, b1, sizeof b1));
	if (m0.gshard)
		printf("  gradient shard  %s (the reduce-scattered 1/%d of the gradients)\n",
		       cli_bytes((double)m0.gshard, b0, sizeof b0), R);
	if (m0.gathered)
		printf("  gathered layers %s (full copies: %s)\n",
		       cli_bytes((double)m0.gathered, b0, sizeof b0),
		       m0.gathered_head ? "at the LM head, the embeddings' weights and gradients"
					: "the embeddings, 2 layers' weights and 2 layers' gradients");
	printf("  activations     %s (%s with recompute)\n", cli_bytes((double)m0.acts, b3, sizeof b3),
	       cli_bytes((double)m1.acts, b4, sizeof b4));
	if (TP > 1) { /* the other sequence_parallel's activations */
		struct loom_config o = *c;
		struct loom_model_mem s0, s1;
		o.sequence_parallel = !c->sequence_parallel;
		loom_trainer_plan(&o, 0, &s0);
		loom_trainer_plan(&o, 1, &s1);
		if (c->seq_len % TP)
			printf("                  (sequence parallelism: not at seq_len %d, which T=%d "
			       "does not divide)\n", c->seq_len, TP);
		else
			printf("                  (%s sequence parallelism: %s, %s with recompute)\n",
			       o.sequence_parallel ? "with" : "without",
			       cli_bytes((double)s0.acts, b3, sizeof b3),
			       cli_bytes((double)s1.acts, b4, sizeof b4));
	}
	if (c->model == LOOM_MODEL_BERT && TP > 1 && c->sequence_parallel) /* (loom_bert.h) */
		printf("                  (sequence parallelism splits the padded rows: a batch "
		       "computes its padding too)\n");
	else if (c->model == LOOM_MODEL_BERT) { /* rows at their real length (loom_bert.h) */
		struct loom_bert_config bc;
		loom_bert_config_from(c, &bc);
		printf("                  (the padded bound: rows run at their real length, so a batch "
		       "takes %s per 1,000 real tokens%s)\n",
		       cli_bytes(4.0 * (double)loom_bert_act_floats(&bc, 1, 1000), b3, sizeof b3),
		       c->task == LOOM_TASK_SQUAD && c->qa_loss == LOOM_BERT_QA_LOSS_ALL
			       ? "; training with qa_loss=all computes the padding" : "");
	}
	if (m0.bf16)
		printf("  bf16 copies     %s (%s, matmul operands)\n",
		       cli_bytes((double)m0.bf16, b3, sizeof b3),
		       m0.gathered ? "gathered weights" : "weights");
	printf("  total           %s (%s with recompute)\n", cli_bytes((double)m0.total, b0, sizeof b0),
	       cli_bytes((double)m1.total, b1, sizeof b1));
	if (TP > 1)
		printf("tensor parallel: each rank holds %llu of the %llu parameters and sends %s per step in its %s\n",
		       (unsigned long long)(m0.params / 4), (unsigned long long)np,
		       cli_bytes((double)m0.tp_bytes, b0, sizeof b0),
		       c->sequence_parallel
			       ? "collectives (sequence parallel: all-gathers and reduce-scatters of [B,T,C], 4 a layer forward and 6 backward, the embeddings' and the head's; all-reduces of the LayerNorm gradients and the loss's)"
			       : "all-reduces (4 [B,T,C] a layer, the embeddings', the head's and the loss's)");
	if (mem_per_rank)
		print_fit(c, mem_per_rank, mem_name);
	if (c->sparsity > 0) {
		char sl[64];
		uint64_t w = loom_config_sparse_weights(c);
		printf("sparsity: %g of the blocks (%dx%d) of %s: %llu of their %llu weights live "
		       "(the FLOPs below count the live ones, and the dense weight gradient of "
		       "the mask-update steps)\n", c->sparsity, c->block_size,
		       c->block_size, loom_sparse_layers_str(c->sparse_layers, sl, sizeof sl),
		       (unsigned long long)llround((1 - c->sparsity) * (double)w), (unsigned long long)w);
	}
	printf("FLOPs per token: %.4g training (6N + 12 L T C), %.4g forward\n",
	       loom_config_flops_per_token(c), loom_config_fwd_flops_per_token(c));
	printf("tokens per step: %lld (global_batch %d x seq_len %d)\n",
	       (long long)c->global_batch * c->seq_len, c->global_batch, c->seq_len);
	double fps = loom_config_flops_per_token(c) * c->global_batch * (double)c->seq_len;
	printf("FLOPs per step: %.4g\n", fps);
	int M, K, N;
	double rate;
	struct loom_err err = { 0 };
	if (loom_plan_probe_matmul(c, &M, &K, &N, &rate, &err))
		cli_die("%s", err.msg);
	double mfu = c->precision == LOOM_PREC_BF16 ? MFU_BF16 : MFU_FP32;
	double step = fps / (rate * 1e9 * mfu * R * TP); /* the ranks share a step's FLOPs */
	char d0[32], d1[32], ranks[96] = "";
	if (R * TP > 1)
		snprintf(ranks, sizeof ranks, "%d ranks at this machine's rate, communication not "
			 "counted; ", R * TP);
	printf("matmul probe: %.1f GFLOP/s (%s, %dx%dx%d, %d thread%s)\n", rate,
	       c->precision == LOOM_PREC_BF16 ? "bf16" : "fp32", M, K, N, omp_get_max_threads(),
	       omp_get_max_threads() == 1 ? "" : "s");
	printf("time per step: %s (%sat MFU %.2f, assumed: measured by make bench for gpt2 B=8 T=256)\n",
	       duration(step, d0, sizeof d0), ranks, mfu);
	printf("time of the run: %s (%lld steps)\n", duration(step * (double)c->steps, d1, sizeof d1),
	       (long long)c->steps);
}

double train_bench_sgemm(int verbose)
{
	static const int sizes[] = { 1024, 2048 };
	double best = 0;
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		int n = sizes[s];
		float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n);
		float *c = malloc(sizeof(float) * n * n);
		if (!a || !b || !c)
			cli_die("out of memory");
		for (long i = 0; i < (long)n * n; i++) {
			a[i] = (float)(i % 17) * 0.01f;
			b[i] = (float)(i % 13) * 0.01f;
		}
		for (int r = 0; r < 4; r++) {
			double t0 = loom_now();
			loom_mm_gemm(NULL, 0, 0, n, n, n, a, b, 0, c); /* as the model's products */
			double dt = loom_now() - t0, gf = 2.0 * n * n * (double)n / dt / 1e9;
			if (r && gf > best) /* first run warms up */
				best = gf;
			if (verbose)
				cli_warn("sgemm %d: %.1f GFLOP/s", n, gf);
		}
		free(a);
		free(b);
		free(c);
	}
	return best;
}
