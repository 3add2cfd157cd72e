/* loom_eval.c - held-out evaluation sources and a GPT frame's loss sums
 * (loom_eval.h). */
#include "loom_eval.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loom_feed.h"
#include "loom_gpt.h"
#include "loom_shard.h"

/* r (NULL: out of memory) reading what the task reads. */
static int reader_for_task(struct loom_eval_src *e, struct loom_batch_reader *r,
			   struct loom_err *err)
{
	if (!(e->r = r))
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	if (e->features)
		loom_batch_reader_accept_features(r);
	return 0;
}

/* 1 if path holds a JSON object (a manifest), 0 if not, or an error. */
static int is_manifest(const char *path, struct loom_err *err)
{
	FILE *f = fopen(path, "rb");
	int c = ' ';
	if (!f)
		return loom_err_set(err, LOOM_EIO, "cannot open '%s': %s", path, strerror(errno));
	while (c == ' ' || c == '\t' || c == '\n' || c == '\r')
		c = getc(f);
	fclose(f);
	return c == '{';
}

int loom_eval_open(struct loom_eval_src *e, const char *path, uint32_t batch, uint32_t rec,
		   int features, uint64_t max_frames, struct loom_err *err)
{
	memset(e, 0, sizeof *e);
	e->path = path;
	e->fd = -1;
	e->features = features;
	e->max_frames = max_frames;
	int rc = is_manifest(path, err);
	if (rc < 0)
		return rc;
	if (!rc) {
		e->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (e->fd < 0)
			return loom_err_set(err, LOOM_EIO, "cannot open '%s': %s", path,
					    strerror(errno));
		return reader_for_task(e, loom_batch_reader_new(e->fd, path), err);
	}
	/* a squad-features manifest gives the record length itself */
	struct loom_feed_opts fo = { .manifest = path, .batch = batch ? batch : 1,
				     .seq_len = features ? 0 : rec, .epochs = 1,
				     .stream_order = 1, .threads = 1 };
	struct loom_err ferr;
	e->feed = loom_feed_new(&fo, &ferr);
	if (!e->feed)
		return loom_err_set(err, ferr.code ? ferr.code : LOOM_EFORMAT, "--eval-data %s",
				    ferr.msg);
	if (batch && loom_feed_start(e->feed, 0) < 0)
		return loom_err_set(err, LOOM_EFORMAT, "--eval-data %s", loom_feed_error(e->feed));
	return 0;
}

int loom_eval_next(struct loom_eval_src *e, struct loom_batch_hdr *h, const uint32_t **tok,
		   struct loom_err *err)
{
	int rc;
	if (e->max_frames && e->frames == e->max_frames)
		return 0;
	if (e->feed) {
		const void *buf;
		size_t len;
		loom_batch_reader_free(e->r);
		e->r = NULL;
		if ((rc = loom_feed_next(e->feed, &buf, &len)) < 0)
			return loom_err_set(err, rc, "--eval-data %s", loom_feed_error(e->feed));
		if (rc == 0)
			return 0;
		if ((rc = reader_for_task(e, loom_batch_reader_new_mem(buf, len, e->path), err)))
			return rc;
	}
	if ((rc = loom_batch_read(e->r, h, tok)) < 0)
		return loom_err_set(err, rc, "%s", loom_batch_reader_error(e->r));
	e->frames += rc == 1;
	return rc;
}

void loom_eval_close(struct loom_eval_src *e)
{
	loom_batch_reader_free(e->r);
	e->r = NULL;
	loom_feed_free(e->feed);
	e->feed = NULL;
	if (e->fd >= 0)
		close(e->fd);
	e->fd = -1;
}

int loom_eval_check(const char *path, int features, int *rec, struct loom_err *err)
{
	struct loom_eval_src e;
	struct loom_batch_hdr h;
	const uint32_t *tok;
	int rc = is_manifest(path, err);
	*rec = 0;
	if (rc < 0)
		return rc;
	if (rc) {
		struct loom_manifest m;
		struct loom_err merr;
		if ((rc = loom_manifest_read(path, &m, &merr)) < 0)
			return loom_err_set(err, rc, "--eval-data %s", merr.msg);
		*rec = m.has_seq_len && m.seq_len > 0 && m.seq_len <= INT32_MAX ? (int)m.seq_len : 0;
		loom_manifest_release(&m);
		if (!*rec)
			return loom_err_set(err, LOOM_EFORMAT, "--eval-data %s: no seq_len", path);
		rc = loom_eval_open(&e, path, 0, (uint32_t)*rec, features, 0, err);
		loom_eval_close(&e);
		return rc;
	}
	if ((rc = loom_eval_open(&e, path, 0, 0, features, 0, err)) == 0)
		while ((rc = loom_eval_next(&e, &h, &tok, err)) == 1)
			if (!*rec || (int)h.seq_len < *rec)
				*rec = (int)h.seq_len;
	loom_eval_close(&e);
	if (rc < 0)
		return rc;
	if (!*rec)
		return loom_err_set(err, LOOM_EFORMAT, "%s: no batch frames to evaluate", path);
	return 0;
}

int loom_eval_gpt(struct loom_gpt *g, const struct loom_batch_hdr *h, const uint32_t *tok,
		  int T, int32_t *in, int32_t *tg, struct loom_eval_sums *s)
{
	int B = (int)h->batch;
	loom_gpt_split_records(tok, B, (int)h->seq_len, T, in, tg);
	if (h->flags & LOOM_BATCH_F_PAD)
		loom_gpt_mask_pad(g, h->pad_id, in, tg, (size_t)B * T);
	int rc = loom_gpt_forward(g, in, tg, B, T, 0, 0, NULL);
	if (rc < 0)
		return rc;
	double a;
	int64_t b, c;
	loom_gpt_eval_counts(g, &a, &b, &c);
	s->nll += a;
	s->n += b;
	s->correct += c;
	return 0;
}
