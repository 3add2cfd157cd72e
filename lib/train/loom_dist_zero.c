/* loom_dist_zero.c - ZeRO-1 (sharding=optimizer) and ZeRO-3
 * (sharding=weights) over the data-parallel group: gradient buckets, unit
 * gathers, the sharded AdamW step and RigL's block scores and norms
 * (through the model's mask hooks); see loom_dist.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_config.h"
#include "loom_dist_impl.h"
#include "loom_kernels.h"

void loom_dist_arm(struct loom_dist *d)
{
	if (d->dp.size > 1)
		d->armed = 1;
}

uint64_t loom_dist_bytes_bound(const struct loom_dist *d, int micro)
{
	double f = d->dp.size > 1 ? (double)(d->dp.size - 1) / d->dp.size : 0;
	double P = (double)d->m.n_params;
	if (!d->weights)
		return (uint64_t)(2 * f * P * 4);
	double E = 0; /* the embeddings' unit, gathered once per micro-batch */
	for (int k = d->u ? d->u[0].k0 : 0; d->u && k < d->u[0].k1; k++)
		E += (double)(d->b[k].b1 - d->b[k].b0);
	double g = d->m.emb_gathers > 0 ? d->m.emb_gathers : 1;
	return (uint64_t)((3 * P + (g - 2) * E) * f * 4 * micro);
}

#ifdef LOOM_HAVE_MPI

/* Start bucket b's reduce-scatter: its chunk of the sum over ranks lands
 * in the gradient shard (sharding=optimizer) or in b->rb, to be added to
 * it by bucket_finish (sharding=weights: every micro-batch). */
static int bucket_start(struct loom_dist *d, struct bucket *b)
{
	if (b->started || b->sent)
		return 0;
	b->started = 1;
	b->sent = d->weights;
	float *dst = d->gs + b->soff;
	if (d->weights) {
		if (!(b->rb = loom_model_falloc(b->c1 - b->c0))) /* mmap: given back when freed */
			return loom_err_set(&d->err, LOOM_ENOMEM, "rank %d: out of memory", d->job.rank);
		dst = b->rb;
	}
	d->bytes_step += (uint64_t)(b->b1 - b->b0 - (b->c1 - b->c0)) * 4;
	if (d->dp.size == 2) {
		/* Two ranks: send the peer its half, receive ours (our own half
		 * is added when it is done).  Open MPI's MPI_Ireduce_scatter
		 * reduces on one rank and scatters: 1.5x these bytes. */
		int peer = 1 - d->dp.rank, tag = (int)(b - d->b);
		MPI_TRY(d, MPI_Irecv(dst, b->counts[d->dp.rank], MPI_FLOAT, peer, tag,
				     d->dp.comm, &b->req), "receive of gradients");
		MPI_TRY(d, MPI_Isend(d->m.grads + b->b0 + b->displs[peer], b->counts[peer], MPI_FLOAT,
				     peer, tag, d->dp.comm, &b->req2), "send of gradients");
		return 0;
	}
	MPI_TRY(d, MPI_Ireduce_scatter(d->m.grads + b->b0, dst, b->counts, MPI_FLOAT,
				       MPI_SUM, d->dp.comm, &b->req),
		"reduce-scatter of gradients");
	return 0;
}

/* Wait for bucket b's reduce-scatter; two ranks: add our own half.
 * sharding=weights: add the chunk to the shard, and the bucket's
 * gradients (read by the peers now) are given back, zero again. */
static int bucket_finish(struct loom_dist *d, struct bucket *b)
{
	if (!b->started)
		return 0;
	WAIT_TRY(d, &b->req, "reduce-scatter of gradients");
	if (d->dp.size == 2)
		WAIT_TRY(d, &b->req2, "send of gradients");
	b->started = 0;
	float *dst = d->gs + b->soff;
	const float *own = d->m.grads + b->c0, *in = d->weights ? b->rb : dst;
	size_t n = b->c1 - b->c0;
	int two = d->dp.size == 2;
	if (d->weights || two) {
		#pragma omp parallel for simd schedule(static)
		for (size_t i = 0; i < n; i++)
			dst[i] = (d->weights ? dst[i] : 0.0f) + (two ? in[i] + own[i] : in[i]);
	}
	if (d->weights) {
		loom_lazy_free(b->rb);
		b->rb = NULL;
		loom_lazy_release(d->m.grads + b->b0, (b->b1 - b->b0) * sizeof(float));
	}
	return 0;
}

/* Let outstanding requests move (MPI progresses only inside MPI calls);
 * sharding=weights: finish the reduce-scatters that are done. */
static int progress(struct loom_dist *d)
{
	for (int k = 0; k < d->nb; k++) {
		struct bucket *b = &d->b[k];
		int f1 = 1, f2 = 1;
		if (b->started && b->req != MPI_REQUEST_NULL)
			MPI_Test(&b->req, &f1, MPI_STATUS_IGNORE);
		if (b->started && b->req2 != MPI_REQUEST_NULL)
			MPI_Test(&b->req2, &f2, MPI_STATUS_IGNORE);
		if (d->weights && b->started && f1 && f2) {
			int rc = bucket_finish(d, b);
			if (rc)
				return rc;
		}
		if (b->greq != MPI_REQUEST_NULL)
			MPI_Test(&b->greq, &f1, MPI_STATUS_IGNORE);
		if (b->greq2 != MPI_REQUEST_NULL)
			MPI_Test(&b->greq2, &f1, MPI_STATUS_IGNORE);
	}
	return 0;
}

static void on_grad_ready(void *ctx, int l)
{
	struct loom_dist *d = ctx;
	if (!d->armed)
		return;
	for (int k = 0; k < d->nb; k++)
		if (d->b[k].tag == l && bucket_start(d, &d->b[k]))
			return; /* reported again by loom_dist_step */
	progress(d);
}

/* ---- sharding=weights: a unit's parameters gathered when the model needs them */

static struct unit *unit_of(struct loom_dist *d, int u)
{
	return &d->u[u + 1];
}

/* Start gathering unit u's parameters: each rank's chunk of each bucket
 * (kept in place in the full-size array) to every rank. */
static int unit_gather(struct loom_dist *d, int u)
{
	struct unit *x = unit_of(d, u);
	if (x->state != U_AWAY)
		return 0;
	x->state = U_COMING;
	for (int k = x->k0; k < x->k1; k++) {
		struct bucket *b = &d->b[k];
		float *p = d->m.params + b->b0;
		d->bytes_step += (uint64_t)(b->c1 - b->c0) * 4 * (d->dp.size - 1);
		if (d->dp.size == 2) {
			int peer = 1 - d->dp.rank, tag = 1 << 20 | k;
			MPI_TRY(d, MPI_Irecv(p + b->displs[peer], b->counts[peer], MPI_FLOAT, peer, tag,
					     d->dp.comm, &b->greq), "all-gather of parameters");
			MPI_TRY(d, MPI_Isend(p + b->displs[d->dp.rank], b->counts[d->dp.rank], MPI_FLOAT,
					     peer, tag, d->dp.comm, &b->greq2),
				"all-gather of parameters");
			continue;
		}
		MPI_TRY(d, MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, p, b->counts, b->displs,
					   MPI_FLOAT, d->dp.comm, &b->greq),
			"all-gather of parameters");
	}
	return 0;
}

static int unit_wait(struct loom_dist *d, int u)
{
	struct unit *x = unit_of(d, u);
	if (x->state == U_HERE)
		return 0;
	int rc = unit_gather(d, u);
	if (rc)
		return rc;
	double t0 = loom_now();
	for (int k = x->k0; k < x->k1; k++) {
		WAIT_TRY(d, &d->b[k].greq, "all-gather of parameters");
		if (d->dp.size == 2)
			WAIT_TRY(d, &d->b[k].greq2, "all-gather of parameters");
	}
	double w = loom_now() - t0;
	d->wait_s += w;
	d->gather_wait_s += w;
	x->state = U_HERE;
	return 0;
}

static int on_need(void *ctx, int u, int next, struct loom_err *err)
{
	struct loom_dist *d = ctx;
	int again = unit_of(d, u)->state == U_HERE;
	int rc = d->gather_failed ? d->err.code : unit_wait(d, u);
	/* the next unit's gather overlaps unit u's compute; but when the
	 * embeddings are needed again (the LM head, whose gradient they are
	 * about to hold too), it waits until they are gone */
	d->after_emb = u < 0 && again ? next : LOOM_DIST_UNIT_NONE;
	if (!rc && !(u < 0 && again) && next != LOOM_DIST_UNIT_NONE)
		rc = unit_gather(d, next);
	if (!rc)
		rc = progress(d);
	if (rc)
		*err = d->err;
	return rc;
}

/* Between two products of the model: let the gathers and reduce-scatters
 * in flight move (an error is reported by the next wait). */
static void on_tick(void *ctx)
{
	progress(ctx);
}

/* Unit u's parameters are no longer needed: give back all but our chunks. */
static void on_done(void *ctx, int u)
{
	struct loom_dist *d = ctx;
	struct unit *x = unit_of(d, u);
	for (int k = x->k0; k < x->k1; k++) {
		const struct bucket *b = &d->b[k];
		loom_lazy_release(d->m.params + b->b0, (b->c0 - b->b0) * sizeof(float));
		loom_lazy_release(d->m.params + b->c1, (b->b1 - b->c1) * sizeof(float));
	}
	x->state = U_AWAY;
	if (u < 0 && d->after_emb != LOOM_DIST_UNIT_NONE && unit_gather(d, d->after_emb))
		d->gather_failed = 1; /* reported by the next need */
	d->after_emb = LOOM_DIST_UNIT_NONE;
}

int loom_dist_micro_end(struct loom_dist *d)
{
	if (!d->weights)
		return 0;
	/* every bucket, also of a backward that had no target to learn from */
	double t0 = loom_now();
	for (int k = 0; k < d->nb; k++) {
		int rc = bucket_start(d, &d->b[k]);
		if (!rc)
			rc = bucket_finish(d, &d->b[k]);
		if (rc)
			return rc;
		d->b[k].sent = 0;
	}
	d->wait_s += loom_now() - t0;
	return 0;
}

/* RigL under sharding=weights: the block norms from every rank's chunks,
 * combined in rank order, then the same mask update on every rank; the
 * changed blocks zeroed in our chunks of the weights and moments. */
static int rigl_update_sharded(struct loom_dist *d, int64_t t)
{
	const struct loom_dist_masks *x = &d->m.masks;
	void *model = d->m.model;
	float *params = d->m.params;
	x->norm_reset(model);
	for (int k = 0; k < d->nb; k++)
		x->norm_range(model, d->b[k].c0, d->b[k].c1, params + d->b[k].c0);
	size_t n;
	const double *mine = x->norms(model, &n);
	double *all = malloc(sizeof(double) * (n ? n : 1) * (size_t)d->dp.size);
	if (!all)
		return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory for the block norms");
	int rc = dist_allgather(d, &d->dp, mine, n, MPI_DOUBLE, 8, all,
				"allgather of the block norms");
	if (!rc) {
		x->update_norms(model, all, d->dp.size, t);
		for (int k = 0; k < d->nb; k++) {
			const struct bucket *b = &d->b[k];
			x->zero_changed(model, b->c0, b->c1, params + b->c0);
		}
		x->changed(model);
	}
	free(all);
	return rc;
}

static int bcast_params(struct loom_dist *d)
{
	float *p = d->m.params;
	for (size_t o = 0; o < d->m.n_params; o += MAX_BUCKET) {
		size_t n = d->m.n_params - o < MAX_BUCKET ? d->m.n_params - o : MAX_BUCKET;
		MPI_Request r;
		MPI_TRY(d, MPI_Ibcast(p + o, (int)n, MPI_FLOAT, 0, d->dp.comm, &r),
			"broadcast of the parameters");
		WAIT_TRY(d, &r, "broadcast of the parameters");
	}
	d->m.weights_changed(d->m.model);
	return 0;
}

/* AdamW on this rank's chunk of bucket b, tensor by tensor (decay flags). */
static void adamw_chunk(struct loom_dist *d, const struct bucket *b, float lr, int64_t t,
			float gscale)
{
	const struct loom_dist_model *g = &d->m;
	const struct loom_adamw *c = &g->adamw;
	for (int i = 0; i < g->n_tensors; i++) {
		const struct loom_tensor *tt = &g->tensors[i];
		size_t lo = tt->offset > b->c0 ? tt->offset : b->c0;
		size_t hi = tt->offset + tt->numel < b->c1 ? tt->offset + tt->numel : b->c1;
		if (lo >= hi)
			continue;
		size_t s = b->soff + (lo - b->c0);
		loom_k_adamw(g->params + lo, d->gs + s, d->ms + s, d->vs + s, hi - lo, lr,
			     (float)c->beta1, (float)c->beta2, (float)c->eps,
			     tt->decay ? (float)c->weight_decay : 0.0f, t, gscale);
	}
}

/* RigL update step: every rank scores the blocks on its shard of the
 * summed dense gradient, the partial scores are all-gathered and combined
 * in rank order (the same floats on every rank), then the shard is masked
 * to the live blocks. */
static int rigl_scores(struct loom_dist *d)
{
	const struct loom_dist_masks *x = &d->m.masks;
	void *model = d->m.model;
	x->score_reset(model);
	for (int k = 0; k < d->nb; k++)
		x->score_range(model, d->b[k].c0, d->b[k].c1, d->gs + d->b[k].soff);
	size_t n;
	const float *mine = x->scores(model, &n);
	float *all = malloc(sizeof(float) * (n ? n : 1) * (size_t)d->dp.size);
	if (!all)
		return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory for the block scores");
	int rc = dist_allgather(d, &d->dp, mine, n, MPI_FLOAT, 4, all,
				"allgather of the block scores");
	if (rc) {
		free(all);
		return rc;
	}
	x->score_combine(model, all, d->dp.size);
	free(all);
	for (int k = 0; k < d->nb; k++)
		x->mask_range(model, d->b[k].c0, d->b[k].c1, d->gs + d->b[k].soff);
	return 0;
}

/* Tensor parallelism: the sum of squares of this rank's gradient shard
 * over the tensors every tensor-parallel rank holds whole (0 without). */
static double replicated_sumsq(const struct loom_dist *d)
{
	const struct loom_dist_model *g = &d->m;
	double s = 0;
	for (int i = 0; g->replicated && i < g->n_tensors; i++) {
		if (!g->replicated(g->model, i))
			continue;
		size_t t0 = g->tensors[i].offset, t1 = t0 + g->tensors[i].numel;
		for (int k = 0; k < d->nb; k++) {
			const struct bucket *b = &d->b[k];
			size_t lo = t0 > b->c0 ? t0 : b->c0, hi = t1 < b->c1 ? t1 : b->c1;
			if (lo < hi)
				s += loom_k_sumsq(d->gs + b->soff + (lo - b->c0), hi - lo);
		}
	}
	return s;
}

int loom_dist_step(struct loom_dist *d, float lr, int64_t t, float *norm, double *lsum)
{
	struct loom_dist_model *g = &d->m;
	if (d->dp.size == 1) {
		d->err.code = 0;
		g->step(g->model, lr, t, norm);
		return d->err.code; /* tensor parallelism: its norm's all-reduce failed */
	}
	int rc;
	for (int k = 0; !d->weights && k < d->nb; k++) /* weights: done by micro_end */
		if ((rc = bucket_start(d, &d->b[k])))
			return rc;
	d->armed = d->weights;
	double t0 = loom_now();
	for (int k = 0; k < d->nb; k++)
		if ((rc = bucket_finish(d, &d->b[k])))
			return rc;
	if (!d->weights)
		memset(g->grads, 0, g->n_params * sizeof(float));
	int update = g->masks.take_due && g->masks.take_due(g->model);
	if (update && (rc = rigl_scores(d)))
		return rc;
	/* the sum of squares, the loss, and of the sum the replicated tensors' */
	double red[3] = { loom_k_sumsq(d->gs, d->shard_n), lsum ? *lsum : 0, replicated_sumsq(d) };
	MPI_Request nr;
	MPI_TRY(d, MPI_Iallreduce(MPI_IN_PLACE, red, 3, MPI_DOUBLE, MPI_SUM, d->dp.comm, &nr),
		"allreduce of the gradient norm");
	WAIT_TRY(d, &nr, "allreduce of the gradient norm");
	d->bytes_step += 24 * (uint64_t)(d->dp.size - 1);
	if (d->tp.size > 1) { /* the split tensors' squares of every slice */
		double split = red[0] - red[2];
		if ((rc = dist_tp_reduce(d, &split, 1, LOOM_DIST_SUM_F64, &d->err)))
			return rc;
		red[0] = split + red[2];
	}
	d->wait_s += loom_now() - t0;
	/* the shards hold sums over ranks: the mean gradient is 1/world of it */
	float n = (float)(sqrt(red[0]) / d->dp.size);
	if (norm)
		*norm = n;
	if (lsum)
		*lsum = red[1] / d->dp.size;
	float gscale = 1.0f / (float)d->dp.size;
	if (g->adamw.grad_clip > 0 && n > g->adamw.grad_clip)
		gscale = (float)(g->adamw.grad_clip / n) / (float)d->dp.size;
	for (int k = 0; k < d->nb; k++) {
		struct bucket *b = &d->b[k];
		adamw_chunk(d, b, lr, t, gscale);
		if (d->weights) /* the next forward gathers the parameters */
			continue;
		MPI_TRY(d, MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g->params + b->b0,
					   b->counts, b->displs, MPI_FLOAT, d->dp.comm, &b->req),
			"all-gather of parameters");
		d->bytes_step += (uint64_t)(b->b1 - b->b0 - (b->c1 - b->c0)) * 4;
		progress(d);
	}
	if (d->weights)
		memset(d->gs, 0, d->shard_n * sizeof(float));
	t0 = loom_now();
	for (int k = 0; !d->weights && k < d->nb; k++)
		WAIT_TRY(d, &d->b[k].req, "all-gather of parameters");
	g->weights_changed(g->model);
	if (update && d->weights && (rc = rigl_update_sharded(d, t)))
		return rc;
	if (update && !d->weights) /* every rank: the same weights, scores, so masks */
		g->masks.update(g->model, t);
	for (int k = 0; update && k < d->nb; k++) {
		const struct bucket *b = &d->b[k];
		g->masks.zero_changed(g->model, b->c0, b->c1, d->ms + b->soff);
		g->masks.zero_changed(g->model, b->c0, b->c1, d->vs + b->soff);
	}
	/* sharding=weights: the next forward starts with the embeddings, whose
	 * gather can start now that the step (and RigL) changed the weights */
	if (d->weights && (rc = unit_gather(d, -1)))
		return rc;
	d->wait_s += loom_now() - t0;
	d->bytes_total += d->bytes_step;
	d->bytes_step = 0;
	return 0;
}

/* Buckets: per tag, the contiguous range of its tensors, split into pieces
 * of at most MAX_BUCKET floats; ordered L-1 .. 0, then -1. */
static int plan_buckets(struct loom_dist *d)
{
	const struct loom_dist_model *g = &d->m;
	int W = d->dp.size, cap = 0;
	if (!(d->u = calloc((size_t)g->n_layer + 1, sizeof *d->u)))
		return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory");
	for (int tag = g->n_layer - 1; tag >= -1; tag--) {
		size_t lo = SIZE_MAX, hi = 0, sum = 0;
		for (int i = 0; i < g->n_tensors; i++) {
			const struct loom_tensor *t = &g->tensors[i];
			if (g->tag(t->name, g->n_layer) != tag)
				continue;
			lo = t->offset < lo ? t->offset : lo;
			hi = t->offset + t->numel > hi ? t->offset + t->numel : hi;
			sum += t->numel;
		}
		if (!sum)
			continue;
		if (sum != hi - lo)
			return loom_err_set(&d->err, LOOM_EINVAL,
					    "layer %d's tensors are not contiguous", tag);
		d->u[tag + 1].k0 = d->nb;
		for (size_t o = lo; o < hi; o += MAX_BUCKET) {
			if (d->nb == cap) {
				cap = cap ? cap * 2 : 16;
				struct bucket *nbk = realloc(d->b, sizeof *nbk * cap);
				if (!nbk)
					return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory");
				d->b = nbk;
			}
			struct bucket *b = &d->b[d->nb++];
			memset(b, 0, sizeof *b);
			b->tag = tag;
			b->b0 = o;
			b->b1 = hi - o < MAX_BUCKET ? hi : o + MAX_BUCKET;
			b->counts = calloc(W, sizeof(int));
			b->displs = calloc(W, sizeof(int));
			if (!b->counts || !b->displs)
				return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory");
			size_t n = b->b1 - b->b0;
			for (int r = 0; r < W; r++) {
				size_t s = n * r / W, e = n * (r + 1) / W;
				b->counts[r] = (int)(e - s);
				b->displs[r] = (int)s;
			}
			b->c0 = b->b0 + n * d->dp.rank / W;
			b->c1 = b->b0 + n * (d->dp.rank + 1) / W;
			b->soff = d->shard_n;
			d->shard_n += b->c1 - b->c0;
#ifdef LOOM_HAVE_MPI
			b->req = b->req2 = b->greq = b->greq2 = MPI_REQUEST_NULL;
#endif
		}
		d->u[tag + 1].k1 = d->nb;
	}
	return 0;
}

int loom_dist_attach(struct loom_dist *d, const struct loom_dist_model *g)
{
	int rc;
	d->m = *g;
	if (d->dp.size == 1) {
		if (d->tp.size > 1) /* the layers' all-reduces only */
			g->connect(g->model, &(struct loom_dist_calls){
				.ctx = d, .reduce = dist_tp_reduce, .gather = dist_tp_gather,
				.scatter = dist_tp_scatter });
		return 0;
	}
	d->weights = g->sharding == LOOM_SHARD_WEIGHTS;
	d->after_emb = LOOM_DIST_UNIT_NONE;
	if (d->weights && !g->units)
		return loom_err_set(&d->err, LOOM_EINVAL,
				    "sharding=weights: this model cannot have its weights sharded");
	/* sharding=weights: every rank made the same weights (the seed's or
	 * the checkpoint's): no broadcast, which would need them whole */
	if (!d->weights && (rc = bcast_params(d)))
		return rc;
	if ((rc = plan_buckets(d)))
		return rc;
	if (d->weights) { /* first keep only our chunks of the weights */
		for (int u = -1; u < g->n_layer; u++)
			on_done(d, u);
		loom_lazy_release(g->grads, g->n_params * sizeof(float));
	}
	d->gs = loom_model_falloc(d->shard_n);
	d->ms = loom_model_falloc(d->shard_n);
	d->vs = loom_model_falloc(d->shard_n);
	if (!d->gs || !d->ms || !d->vs)
		return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory for the optimizer shard");
	for (int k = 0; k < d->nb; k++) {
		const struct bucket *b = &d->b[k];
		memcpy(d->ms + b->soff, *g->m + b->c0, (b->c1 - b->c0) * sizeof(float));
		memcpy(d->vs + b->soff, *g->v + b->c0, (b->c1 - b->c0) * sizeof(float));
	}
	loom_lazy_free(*g->m);
	loom_lazy_free(*g->v);
	*g->m = *g->v = NULL;
	struct loom_dist_calls c = { .ctx = d, .grad_ready = on_grad_ready,
				     .reduce = d->tp.size > 1 ? dist_tp_reduce : NULL,
				     .gather = d->tp.size > 1 ? dist_tp_gather : NULL,
				     .scatter = d->tp.size > 1 ? dist_tp_scatter : NULL };
	if (d->weights) {
		c.need = on_need;
		c.done = on_done;
		c.tick = on_tick;
		d->armed = 1;
	}
	g->connect(g->model, &c);
	return 0;
}

#else /* !LOOM_HAVE_MPI: a world of one */

int loom_dist_step(struct loom_dist *d, float lr, int64_t t, float *norm, double *lsum)
{
	(void)lsum;
	d->bytes_step = 0;
	d->m.step(d->m.model, lr, t, norm);
	return 0;
}

int loom_dist_attach(struct loom_dist *d, const struct loom_dist_model *m)
{
	d->m = *m;
	return 0;
}

int loom_dist_micro_end(struct loom_dist *d)
{
	(void)d;
	return 0;
}
#endif
