/*
 * loom_profile.c - per-op time of a training step (loom_profile.h).
 */
#include "loom_profile.h"

#include <stdio.h>
#include <string.h>

int loom_prof_on;
double loom_prof_acc[LOOM_PROF_N];
int loom_prof_bwd;
static double step_t0, step_cpu0;

static const struct {
	const char *name;
	int parallel;
} ops[LOOM_PROF_N] = {
	[LOOM_PROF_DATA] = { "data", 0 },
	[LOOM_PROF_EMBED_FWD] = { "embed_fwd", 1 },
	[LOOM_PROF_EMBED_BWD] = { "embed_bwd", 1 },
	[LOOM_PROF_MATMUL_FWD] = { "matmul_fwd", 1 },
	[LOOM_PROF_MATMUL_BWD] = { "matmul_bwd", 1 },
	[LOOM_PROF_ATTN_FWD] = { "attention_fwd", 1 },
	[LOOM_PROF_ATTN_BWD] = { "attention_bwd", 1 },
	[LOOM_PROF_LN_FWD] = { "layernorm_fwd", 1 },
	[LOOM_PROF_LN_BWD] = { "layernorm_bwd", 1 },
	[LOOM_PROF_GELU_FWD] = { "gelu_fwd", 1 },
	[LOOM_PROF_GELU_BWD] = { "gelu_bwd", 1 },
	[LOOM_PROF_ELEM_FWD] = { "elementwise_fwd", 1 },
	[LOOM_PROF_ELEM_BWD] = { "elementwise_bwd", 1 },
	[LOOM_PROF_XENT_FWD] = { "crossentropy_fwd", 1 },
	[LOOM_PROF_XENT_BWD] = { "crossentropy_bwd", 1 },
	[LOOM_PROF_OPTIM] = { "optimizer", 1 },
	[LOOM_PROF_RIGL] = { "rigl", 1 },
	[LOOM_PROF_COMM] = { "comm", 0 },
};

void loom_prof_enable(int on)
{
	loom_prof_on = on != 0;
}

void loom_prof_backward(int on)
{
	loom_prof_bwd = on != 0;
}

const char *loom_prof_name(enum loom_prof_op op)
{
	return op < LOOM_PROF_N ? ops[op].name : "?";
}

int loom_prof_parallel(enum loom_prof_op op)
{
	return op < LOOM_PROF_N && ops[op].parallel;
}

void loom_prof_step_begin(void)
{
	memset(loom_prof_acc, 0, sizeof loom_prof_acc);
	step_t0 = loom_prof_on ? loom_now() : 0;
	step_cpu0 = loom_prof_on ? loom_cpu_now() : 0;
}

void loom_prof_step_end(struct loom_prof *p)
{
	memset(p, 0, sizeof *p);
	if (!loom_prof_on)
		return;
	p->total = loom_now() - step_t0;
	p->cpu = loom_cpu_now() - step_cpu0;
	for (int i = 0; i < LOOM_PROF_N; i++) {
		p->op[i] = loom_prof_acc[i];
		if (ops[i].parallel)
			p->parallel += p->op[i];
	}
	p->serial = p->total - p->parallel;
}

void loom_prof_add(struct loom_prof *sum, const struct loom_prof *p)
{
	for (int i = 0; i < LOOM_PROF_N; i++)
		sum->op[i] += p->op[i];
	sum->total += p->total;
	sum->parallel += p->parallel;
	sum->serial += p->serial;
	sum->cpu += p->cpu;
}

void loom_prof_mean(struct loom_prof *p, unsigned n)
{
	if (!n)
		return;
	for (int i = 0; i < LOOM_PROF_N; i++)
		p->op[i] /= n;
	p->total /= n;
	p->parallel /= n;
	p->serial /= n;
	p->cpu /= n;
}

/* snprintf appended at *len, which counts what snprintf would write */
#define APPEND(buf, n, len, ...)                                                     \
	do {                                                                         \
		size_t at_ = *(len) < (n) ? *(len) : (n);                            \
		int k_ = snprintf((buf) + at_, (n) - at_, __VA_ARGS__);              \
		*(len) += k_ > 0 ? (size_t)k_ : 0;                                   \
	} while (0)

static double share(const struct loom_prof *p, double x)
{
	return p->total > 0 ? x / p->total : 0;
}

int loom_prof_json(const struct loom_prof *p, char *buf, size_t n)
{
	size_t len = 0;
	APPEND(buf, n, &len, "{\"seconds\":%.6g,\"parallel\":%.6g,\"serial\":%.6g,\"serial_share\":%.6g,\"cpu\":%.6g,\"ops\":{",
	       p->total, p->parallel, p->serial, share(p, p->serial), p->cpu);
	for (int i = 0; i < LOOM_PROF_N; i++)
		APPEND(buf, n, &len, "%s\"%s\":%.6g", i ? "," : "", ops[i].name, p->op[i]);
	APPEND(buf, n, &len, "}}");
	return (int)len;
}

int loom_prof_text(const struct loom_prof *p, char *buf, size_t n)
{
	size_t len = 0;
	int order[LOOM_PROF_N];
	for (int i = 0; i < LOOM_PROF_N; i++) { /* insertion sort, largest first */
		int j = i;
		for (; j > 0 && p->op[order[j - 1]] < p->op[i]; j--)
			order[j] = order[j - 1];
		order[j] = i;
	}
	APPEND(buf, n, &len, "%.3f s: serial %.2f%%, parallel %.2f%% |", p->total,
	       100 * share(p, p->serial), 100 * share(p, p->parallel));
	for (int i = 0; i < LOOM_PROF_N; i++)
		if (share(p, p->op[order[i]]) >= 0.0005)
			APPEND(buf, n, &len, " %s %.1f%%", ops[order[i]].name,
			       100 * share(p, p->op[order[i]]));
	return (int)len;
}
