/* loom_plan.c - memory plans, ranks, presets and the matmul probe
 * (loom_plan.h). */
#include "loom_plan.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_file.h"
#include "loom_mm.h"
#include "loom_trainer.h"

void loom_plan_on(const struct loom_config *c, int n, int recompute, struct loom_model_mem *m)
{
	struct loom_config x = *c;
	x.data_parallel = n;
	loom_trainer_plan(&x, recompute, m);
}

int loom_plan_ranks_needed(const struct loom_config *c, int recompute, uint64_t mem,
			   struct loom_model_mem *m)
{
	for (int n = 1; n <= LOOM_PLAN_MAX_RANKS; n++) {
		loom_plan_on(c, n, recompute, m);
		if (m->total <= mem)
			return n;
	}
	return 0;
}

/* c at D replicas x T ranks, the vocabulary padded to a multiple of T */
static void plan_grid(const struct loom_config *c, int D, int T, struct loom_model_mem *m)
{
	struct loom_config x = *c;
	x.tensor_parallel = T;
	x.vocab_size = (c->vocab_size + T - 1) / T * T;
	loom_plan_on(&x, D, x.recompute, m);
}

int loom_plan_grid(const struct loom_config *c, uint64_t mem, int *D, int *T, int *vocab,
		   struct loom_model_mem *m)
{
	int best = 0;
	struct loom_model_mem pm;
	/* the MLP width a replica's ranks split (validate_tp in loom_config.c) */
	int mlp = c->model == LOOM_MODEL_BERT && c->intermediate ? c->intermediate : 4 * c->n_embd;
	for (int t = 1; t <= c->n_head; t++) {
		int most = LOOM_PLAN_MAX_RANKS / t, lo = 1, hi = most;
		if (c->n_head % t || mlp % t || (c->sequence_parallel && c->seq_len % t) ||
		    (best && t > best))
			continue;
		plan_grid(c, most, t, &pm);
		if (pm.total > mem)
			continue;
		/* the plan shrinks as the replicas grow: the fewest that fit */
		while (lo < hi) {
			int mid = lo + (hi - lo) / 2;
			plan_grid(c, mid, t, &pm);
			if (pm.total <= mem)
				hi = mid;
			else
				lo = mid + 1;
		}
		if (!best || lo * t < best) {
			best = lo * t;
			*D = lo;
			*T = t;
			*vocab = (c->vocab_size + t - 1) / t * t;
			plan_grid(c, lo, t, m);
		}
	}
	return best;
}

int loom_plan_best_preset(const struct loom_config *c, uint64_t mem, char *fit, char *small,
			  size_t len, struct loom_model_mem *m, uint64_t *small_total,
			  struct loom_err *err)
{
	char dir[4096];
	uint64_t best = 0;
	int rc = 0;
	*fit = *small = '\0';
	*small_total = UINT64_MAX;
	if (loom_share_path("presets", dir, sizeof dir))
		return loom_err_set(err, LOOM_EIO, "no presets directory (share/presets): set LOOM_SHARE");
	DIR *d = opendir(dir);
	if (!d)
		return loom_err_set(err, LOOM_EIO, "%s: %s", dir, strerror(errno));
	struct dirent *e;
	while (!rc && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n <= 5 || n - 5 >= len || strcmp(e->d_name + n - 5, ".json"))
			continue;
		char name[256];
		snprintf(name, sizeof name, "%.*s", (int)(n - 5), e->d_name);
		struct loom_config p;
		loom_config_defaults(&p);
		if (loom_config_apply_preset(&p, name)) {
			rc = loom_err_set(err, LOOM_EFORMAT, "%s", loom_config_error(&p));
			break;
		}
		if (p.model != LOOM_MODEL_GPT)
			continue;
		p.sharding = c->sharding;
		p.precision = c->precision;
		p.data_parallel = c->data_parallel;
		struct loom_model_mem pm;
		loom_trainer_plan(&p, p.recompute, &pm);
		uint64_t np = loom_config_n_params(&p);
		/* ties (none among the presets today) go to the first name */
		if (pm.total <= mem && (np > best || (np == best && strcmp(name, fit) < 0))) {
			best = np;
			*m = pm;
			snprintf(fit, len, "%s", name);
		}
		if (pm.total < *small_total || (pm.total == *small_total && strcmp(name, small) < 0)) {
			*small_total = pm.total;
			snprintf(small, len, "%s", name);
		}
	}
	closedir(d);
	return rc;
}

int loom_plan_probe_matmul(const struct loom_config *c, int *M, int *K, int *N, double *gflops,
			   struct loom_err *err)
{
	struct loom_mm *mm = loom_mm_new(c->precision, err);
	if (!mm)
		return err->code ? err->code : LOOM_ENOMEM;
	long rows = (long)c->micro_batch * c->seq_len;
	*M = rows < 2048 ? (int)rows : 2048;
	*K = c->n_embd < 1024 ? c->n_embd : 1024;
	*N = 4 * *K;
	size_t na = (size_t)*M * *K, nb = (size_t)*K * *N, nc = (size_t)*M * *N;
	float *a = malloc(sizeof(float) * na), *b = malloc(sizeof(float) * nb);
	float *o = malloc(sizeof(float) * nc);
	int rc = 0;
	if (!a || !b || !o) {
		rc = loom_err_set(err, LOOM_ENOMEM, "out of memory for the matmul probe");
		goto out;
	}
	for (size_t i = 0; i < na; i++)
		a[i] = (float)(i % 17) * 0.01f;
	for (size_t i = 0; i < nb; i++)
		b[i] = (float)(i % 13) * 0.01f;
	if (loom_mm_weights(mm, b, nb)) {
		rc = loom_err_set(err, LOOM_ENOMEM, "out of memory for the matmul probe");
		goto out;
	}
	double best = 0, flop = 2.0 * *M * (double)*K * *N, t_all = loom_now();
	for (int r = 0; r < 12 && (r < 4 || loom_now() - t_all < 0.5); r++) {
		double t0 = loom_now();
		loom_mm_gemm(mm, 0, 0, *M, *N, *K, a, b, 0, o);
		double dt = loom_now() - t0;
		if (r && flop / dt / 1e9 > best) /* the first run warms up */
			best = flop / dt / 1e9;
	}
	rc = loom_mm_check(mm, err);
	*gflops = best;
out:
	loom_mm_free(mm);
	free(a);
	free(b);
	free(o);
	return rc;
}
