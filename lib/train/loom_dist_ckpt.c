/* loom_dist_ckpt.c - checkpoints of a sharded model: sharding=weights has
 * every rank write and read its chunks, sharding=optimizer gathers the
 * moments on rank 0; see loom_dist.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_ckpt.h"
#include "loom_dist_impl.h"

void loom_dist_gather_done(struct loom_dist *d)
{
	loom_lazy_free(d->gm);
	loom_lazy_free(d->gv);
	d->gm = d->gv = NULL;
}

#ifdef LOOM_HAVE_MPI

/* Bucket k's chunk of each of the nt tensors: elements [lo[i], hi[i]) of
 * tensor i (empty when they do not meet), and where its moments sit in
 * the shards: mp[i], vp[i] point so that element j (lo <= j < hi) of the
 * tensor is mp[i][j] (only used there; an empty slice points at the
 * shard's start). */
static void bucket_slices(const struct loom_dist *d, int k, size_t nt, uint64_t *lo,
			  uint64_t *hi, float **mp, float **vp)
{
	const struct bucket *b = &d->b[k];
	for (size_t i = 0; i < nt; i++) {
		const struct loom_tensor *t = &d->m.tensors[i];
		size_t a = t->offset > b->c0 ? t->offset : b->c0;
		size_t z = t->offset + t->numel < b->c1 ? t->offset + t->numel : b->c1;
		lo[i] = hi[i] = 0;
		mp[i] = d->ms;
		vp[i] = d->vs;
		if (a >= z)
			continue;
		lo[i] = a - t->offset;
		hi[i] = z - t->offset;
		/* the shard's soff + offset + j - c0 */
		uintptr_t o = ((uintptr_t)t->offset - (uintptr_t)b->c0) * sizeof(float);
		mp[i] = (float *)((uintptr_t)(d->ms + b->soff) + o);
		vp[i] = (float *)((uintptr_t)(d->vs + b->soff) + o);
	}
}

struct slices {
	uint64_t *lo, *hi;
	float **mp, **vp;
};

static int slices_new(struct slices *x, size_t nt, struct loom_err *e)
{
	x->lo = calloc(nt ? nt : 1, sizeof *x->lo);
	x->hi = calloc(nt ? nt : 1, sizeof *x->hi);
	x->mp = calloc(nt ? nt : 1, sizeof *x->mp);
	x->vp = calloc(nt ? nt : 1, sizeof *x->vp);
	return x->lo && x->hi && x->mp && x->vp ? 0 : loom_err_set(e, LOOM_ENOMEM, "out of memory");
}

static void slices_free(struct slices *x)
{
	free(x->lo);
	free(x->hi);
	free(x->mp);
	free(x->vp);
}

/* This rank's pieces of a checkpoint: per bucket, its chunk of each
 * tensor (the weights in place, the moments in the shards). */
static int save_slices(struct loom_dist *d, const char *dir, const struct loom_ckpt_save *s,
		       struct loom_ckpt_piece *pieces, size_t cap, size_t *np, struct loom_err *e)
{
	struct slices x;
	struct loom_ckpt_slices *w = NULL;
	int rc = slices_new(&x, s->n_tensors, e);
	struct loom_ckpt_save s2 = *s;
	s2.adam_m = x.mp;
	s2.adam_v = x.vp;
	*np = 0;
	if (!rc && d->nb > 0) { /* the moments' pointers set before the table is checked */
		bucket_slices(d, 0, s->n_tensors, x.lo, x.hi, x.mp, x.vp);
		rc = loom_ckpt_slices_open(dir, &s2, &w, e);
	}
	for (int k = 0; !rc && k < d->nb; k++) { /* the files opened and synced once */
		bucket_slices(d, k, s->n_tensors, x.lo, x.hi, x.mp, x.vp);
		size_t n = cap - *np;
		rc = loom_ckpt_slices_put(w, x.lo, x.hi, x.mp, x.vp, pieces + *np, &n, e);
		*np += n;
	}
	int rc2 = loom_ckpt_slices_finish(w, rc ? NULL : e);
	slices_free(&x);
	return rc ? rc : rc2;
}

int loom_dist_load(struct loom_dist *d, struct loom_ckpt *ck, const struct loom_ckpt_tensor *t,
		   size_t n, int optimizer)
{
	struct slices x;
	int rc = slices_new(&x, n, &d->err);
	for (int k = 0; !rc && k < d->nb; k++) {
		bucket_slices(d, k, n, x.lo, x.hi, x.mp, x.vp);
		rc = loom_ckpt_load_model_slices(ck, t, n, x.lo, x.hi);
		if (!rc && optimizer)
			rc = loom_ckpt_load_optimizer_slices(ck, t, n, x.mp, x.vp, x.lo, x.hi);
		if (rc)
			loom_err_set(&d->err, rc, "%s", loom_ckpt_error(ck));
	}
	slices_free(&x);
	return rc;
}

/* This rank's part of a checkpoint written by group g: pwrite it into
 * the temp directory dir, describe it in p[0..*np) (at most cap). */
typedef int (*part_fn)(struct loom_dist *d, const char *dir, const struct loom_ckpt_save *s,
		       void *ctx, struct loom_ckpt_piece *p, size_t cap, size_t *np,
		       struct loom_err *e);

static int weights_part(struct loom_dist *d, const char *dir, const struct loom_ckpt_save *s,
			void *ctx, struct loom_ckpt_piece *p, size_t cap, size_t *np,
			struct loom_err *e)
{
	(void)ctx;
	return save_slices(d, dir, s, p, cap, np, e);
}

/* One checkpoint by every rank of group g: its rank 0 begins it, each
 * writes its part (cap pieces at most), rank 0 commits; every rank of g
 * learns how it ended. */
static int save_over(struct loom_dist *d, const struct dist_group *g,
		     const struct loom_ckpt_save *s, size_t cap, part_fn part, void *ctx,
		     char *out, size_t len)
{
	struct loom_err e = { 0 };
	struct loom_ckpt_tx *tx = NULL;
	struct { int32_t rc; char dir[4096]; } hd = { 0, "" };
	/* the moments' table as the headers need it (the sharded ones are
	 * in the shards, which the parts read): neither begin nor the
	 * checks of the parts read the data */
	float **ph = malloc(sizeof *ph * (s->n_tensors ? s->n_tensors : 1));
	struct loom_ckpt_save s0 = *s;
	for (size_t i = 0; ph && i < s->n_tensors; i++)
		ph[i] = s->adam_m && s->adam_m[i] ? s->adam_m[i] : d->ms;
	s0.adam_m = s0.adam_v = ph;
	if (g->rank == 0) {
		hd.rc = ph ? loom_ckpt_write_begin(&s0, &tx, &e)
			   : loom_err_set(&e, LOOM_ENOMEM, "out of memory");
		if (!hd.rc)
			snprintf(hd.dir, sizeof hd.dir, "%s", loom_ckpt_tx_dir(tx));
	}
	int rc = dist_bcast_bytes(d, g, &hd, sizeof hd, "broadcast of the checkpoint directory");
	if (rc || hd.rc) {
		free(ph);
		loom_ckpt_tx_free(tx);
		return rc ? rc : g->rank == 0 ? loom_err_set(&d->err, hd.rc, "%s", e.msg)
			   : loom_err_set(&d->err, hd.rc, "rank 0 could not start the checkpoint");
	}
	size_t np = 0;
	struct loom_ckpt_piece *mine = calloc(cap ? cap : 1, sizeof *mine), *all = NULL;
	int32_t cnt = -1, *cnts = g->rank == 0 ? calloc((size_t)g->size, sizeof *cnts) : NULL;
	int *bytes = g->rank == 0 ? calloc((size_t)g->size, sizeof *bytes) : NULL;
	int *displs = g->rank == 0 ? calloc((size_t)g->size, sizeof *displs) : NULL;
	if (!mine || (g->rank == 0 && (!cnts || !bytes || !displs)))
		loom_err_set(&e, LOOM_ENOMEM, "out of memory");
	else if (!ph)
		loom_err_set(&e, LOOM_ENOMEM, "out of memory");
	else if (!part(d, hd.dir, &s0, ctx, mine, cap, &np, &e))
		cnt = (int32_t)np; /* -1 tells rank 0 this rank failed */
	if (cnt < 0)
		loom_err_set(&d->err, e.code, "rank %d: %s", d->job.rank, e.msg);
	MPI_Request r;
	int total = 0, failed = 0;
	rc = MPI_Igather(&cnt, 1, MPI_INT32_T, cnts, 1, MPI_INT32_T, 0, g->comm, &r);
	rc = rc != MPI_SUCCESS ? dist_mpi_fail(d, rc, "gather of the checkpoint pieces")
			       : dist_wait(d, &r, "gather of the checkpoint pieces");
	for (int i = 0; !rc && g->rank == 0 && i < g->size; i++) {
		failed |= cnts[i] < 0;
		bytes[i] = cnts[i] < 0 ? 0 : cnts[i] * (int)sizeof *mine;
		displs[i] = total;
		total += bytes[i];
	}
	if (!rc && g->rank == 0 && !(all = malloc(total ? (size_t)total : 1)))
		rc = loom_err_set(&d->err, LOOM_ENOMEM, "out of memory");
	if (!rc) {
		rc = MPI_Igatherv(mine, cnt < 0 ? 0 : cnt * (int)sizeof *mine, MPI_BYTE, all, bytes,
				  displs, MPI_BYTE, 0, g->comm, &r);
		rc = rc != MPI_SUCCESS ? dist_mpi_fail(d, rc, "gather of the checkpoint pieces")
				       : dist_wait(d, &r, "gather of the checkpoint pieces");
	}
	int32_t res = rc ? rc : cnt < 0 ? e.code : 0;
	if (!rc && g->rank == 0 && !failed) {
		res = loom_ckpt_write_commit(tx, all, (size_t)total / sizeof *mine, out, len, &e);
		if (res)
			loom_err_set(&d->err, res, "%s", e.msg);
	} else if (!rc && g->rank == 0 && !res) {
		res = LOOM_EIO;
		loom_err_set(&d->err, res, "a rank could not write its part of the checkpoint (its message above); the previous checkpoint is unchanged");
	}
	loom_ckpt_tx_free(tx);
	free(ph);
	free(mine);
	free(all);
	free(cnts);
	free(bytes);
	free(displs);
	if (rc)
		return rc;
	/* every rank learns how it ended */
	struct { int32_t rc; char dir[4096]; } ed = { res, "" };
	if (g->rank == 0 && !res)
		snprintf(ed.dir, sizeof ed.dir, "%s", out);
	if ((rc = dist_bcast_bytes(d, g, &ed, sizeof ed, "broadcast of the checkpoint's end")))
		return rc;
	if (ed.rc && !d->err.code)
		loom_err_set(&d->err, ed.rc, "the checkpoint failed on another rank");
	if (!ed.rc && g->rank && out && len)
		snprintf(out, len, "%s", ed.dir);
	return ed.rc;
}

int loom_dist_save(struct loom_dist *d, const struct loom_ckpt_save *s, char *out, size_t len)
{
	if (!d->weights)
		return loom_err_set(&d->err, LOOM_EINVAL, "loom_dist_save: the weights are not sharded");
	return save_over(d, &d->dp, s, LOOM_CKPT_MAX_PIECES(s->n_tensors) * (size_t)d->nb,
			 weights_part, NULL, out, len);
}

struct runs {
	const struct loom_ckpt_run *r;
	size_t n;
};

static int runs_part(struct loom_dist *d, const char *dir, const struct loom_ckpt_save *s,
		     void *ctx, struct loom_ckpt_piece *p, size_t cap, size_t *np,
		     struct loom_err *e)
{
	const struct runs *x = ctx;
	struct loom_ckpt_slices *w = NULL;
	(void)d;
	*np = cap;
	int rc = loom_ckpt_slices_open(dir, s, &w, e);
	if (!rc)
		rc = loom_ckpt_slices_put_runs(w, x->r, x->n, p, np, e);
	int rc2 = loom_ckpt_slices_finish(w, rc ? NULL : e);
	return rc ? rc : rc2;
}

/* sharding=weights: the parts of the runs r[0..n) (their weights in the
 * model's parameters) that lie in this rank's chunks, the moments in the
 * shards; x->r malloc'd */
static int chunk_runs(struct loom_dist *d, const struct loom_ckpt_run *r, size_t n, struct runs *x)
{
	struct loom_ckpt_run *o = NULL;
	size_t k = 0;
	for (int pass = 0; pass < 2; pass++) { /* count, then fill */
		k = 0;
		for (size_t j = 0; j < n; j++) {
			size_t a0 = (size_t)(r[j].w - d->m.params), a1 = a0 + r[j].n;
			for (int b = 0; b < d->nb; b++) {
				const struct bucket *u = &d->b[b];
				size_t lo = a0 > u->c0 ? a0 : u->c0, hi = a1 < u->c1 ? a1 : u->c1;
				if (lo >= hi)
					continue;
				if (o)
					o[k] = (struct loom_ckpt_run){
						.tensor = r[j].tensor, .lo = r[j].lo + (lo - a0),
						.n = hi - lo, .w = d->m.params + lo,
						.m = d->ms + u->soff + (lo - u->c0),
						.v = d->vs + u->soff + (lo - u->c0) };
				k++;
			}
		}
		if (!pass && !(o = malloc(sizeof *o * (k ? k : 1))))
			return loom_err_set(&d->err, LOOM_ENOMEM, "out of memory");
	}
	x->r = o;
	x->n = k;
	return 0;
}

int loom_dist_save_runs(struct loom_dist *d, const struct loom_ckpt_save *s,
			const struct loom_ckpt_run *r, size_t n, char *out, size_t len)
{
	struct runs x = { r, n };
	if (!d->weights) /* replica 0 writes; the others hold the same slices */
		return d->dp.rank ? 0 : save_over(d, &d->tp, s, 3 * n, runs_part, &x, out, len);
	/* every rank its runs' parts in its chunks, the whole job's one checkpoint */
	int rc = chunk_runs(d, r, n, &x);
	if (rc) /* the others' collective needs this rank: stop the job */
		return rc;
	rc = save_over(d, &d->job, s, 3 * x.n, runs_part, &x, out, len);
	free((void *)x.r);
	return rc;
}

int loom_dist_load_runs(struct loom_dist *d, struct loom_ckpt *ck, const struct loom_ckpt_tensor *t,
			size_t n, const struct loom_ckpt_run *r, size_t nr, int optimizer)
{
	struct runs x;
	int rc = chunk_runs(d, r, nr, &x);
	if (!rc && (rc = loom_ckpt_load_runs(ck, t, n, x.r, x.n, optimizer)))
		loom_err_set(&d->err, rc, "%s", loom_ckpt_error(ck));
	free((void *)x.r);
	return rc;
}

int loom_dist_gather_moments(struct loom_dist *d, float **m, float **v)
{
	const struct loom_dist_model *g = &d->m;
	*m = *v = NULL;
	if (d->dp.size == 1) {
		*m = *g->m;
		*v = *g->v;
		return 0;
	}
	if (d->dp.rank == 0) {
		loom_lazy_free(d->gm);
		loom_lazy_free(d->gv);
		d->gm = loom_model_falloc(g->n_params);
		d->gv = loom_model_falloc(g->n_params);
		if (!d->gm || !d->gv) /* the others still send: abort, not hang */
			return loom_err_set(&d->err, LOOM_ENOMEM,
					    "rank 0: out of memory gathering the optimizer state");
	}
	for (int k = 0; k < d->nb; k++) {
		struct bucket *b = &d->b[k];
		int cnt = (int)(b->c1 - b->c0);
		MPI_Request r[2];
		MPI_TRY(d, MPI_Igatherv(d->ms + b->soff, cnt, MPI_FLOAT, d->gm ? d->gm + b->b0 : NULL,
					b->counts, b->displs, MPI_FLOAT, 0, d->dp.comm, &r[0]),
			"gather of the optimizer state");
		MPI_TRY(d, MPI_Igatherv(d->vs + b->soff, cnt, MPI_FLOAT, d->gv ? d->gv + b->b0 : NULL,
					b->counts, b->displs, MPI_FLOAT, 0, d->dp.comm, &r[1]),
			"gather of the optimizer state");
		WAIT_TRY(d, &r[0], "gather of the optimizer state");
		WAIT_TRY(d, &r[1], "gather of the optimizer state");
	}
	*m = d->gm;
	*v = d->gv;
	return 0;
}

#else /* !LOOM_HAVE_MPI: a world of one */

int loom_dist_load(struct loom_dist *d, struct loom_ckpt *ck, const struct loom_ckpt_tensor *t,
		   size_t n, int optimizer)
{
	(void)ck;
	(void)t;
	(void)n;
	(void)optimizer;
	return loom_err_set(&d->err, LOOM_EINVAL, "loom_dist_load: the weights are not sharded");
}

int loom_dist_save(struct loom_dist *d, const struct loom_ckpt_save *s, char *out, size_t len)
{
	(void)s;
	(void)out;
	(void)len;
	return loom_err_set(&d->err, LOOM_EINVAL, "loom_dist_save: the weights are not sharded");
}

int loom_dist_save_runs(struct loom_dist *d, const struct loom_ckpt_save *s,
			const struct loom_ckpt_run *r, size_t n, char *out, size_t len)
{
	(void)s;
	(void)r;
	(void)n;
	(void)out;
	(void)len;
	return loom_err_set(&d->err, LOOM_EINVAL, "loom_dist_save_runs: no tensor parallelism "
			    "without MPI");
}

int loom_dist_load_runs(struct loom_dist *d, struct loom_ckpt *ck, const struct loom_ckpt_tensor *t,
			size_t n, const struct loom_ckpt_run *r, size_t nr, int optimizer)
{
	(void)ck;
	(void)t;
	(void)n;
	(void)r;
	(void)nr;
	(void)optimizer;
	return loom_err_set(&d->err, LOOM_EINVAL, "loom_dist_load_runs: the weights are not sharded");
}

int loom_dist_gather_moments(struct loom_dist *d, float **m, float **v)
{
	*m = *d->m.m;
	*v = *d->m.v;
	return 0;
}

#endif
