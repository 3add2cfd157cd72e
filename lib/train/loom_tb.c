/* loom_tb.c - TensorBoard event files (see loom_tb.h, formats/tensorboard.md). */
#include "loom_tb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loom_file.h"
#include "loom_tfrecord.h"
#include "tensorflow/event.pb-c.h"

struct loom_tb {
	int fd;
	char *path;
	uint8_t *buf;          /* framed records not yet written */
	size_t len, cap;
	uint8_t *pack;         /* scratch for one packed Event */
	size_t pack_cap;
	int failed;            /* the first error, kept: later calls fail too */
	struct loom_err err;
};

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *loom_tb_path(const struct loom_tb *tb)
{
	return tb->path;
}

const char *loom_tb_error(const struct loom_tb *tb)
{
	return tb->err.msg;
}

/* Pack ev and append it framed to the queue. */
static int queue_event(struct loom_tb *tb, Tensorflow__Event *ev)
{
	if (tb->failed)
		return tb->failed;
	size_t n = tensorflow__event__get_packed_size(ev);
	if (n > tb->pack_cap) {
		uint8_t *p = realloc(tb->pack, n);
		if (!p)
			return tb->failed = loom_err_set(&tb->err, LOOM_ENOMEM, "%s: out of memory", tb->path);
		tb->pack = p;
		tb->pack_cap = n;
	}
	tensorflow__event__pack(ev, tb->pack);
	if (tb->len + n + LOOM_TFR_OVERHEAD > tb->cap) {
		size_t cap = (tb->len + n + LOOM_TFR_OVERHEAD) * 2;
		uint8_t *b = realloc(tb->buf, cap);
		if (!b)
			return tb->failed = loom_err_set(&tb->err, LOOM_ENOMEM, "%s: out of memory", tb->path);
		tb->buf = b;
		tb->cap = cap;
	}
	loom_tfr_frame(tb->buf + tb->len, tb->pack, n);
	tb->len += n + LOOM_TFR_OVERHEAD;
	return 0;
}

int loom_tb_flush(struct loom_tb *tb)
{
	if (tb->failed)
		return tb->failed;
	if (tb->len && loom_write_all(tb->fd, tb->buf, tb->len) < 0)
		return tb->failed = loom_err_errno(&tb->err, LOOM_EIO, errno, "%s", tb->path);
	tb->len = 0;
	return 0;
}

static int queue_value(struct loom_tb *tb, int64_t step, Tensorflow__Summary__Value *v)
{
	Tensorflow__Summary sum = TENSORFLOW__SUMMARY__INIT;
	Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
	sum.n_value = 1;
	sum.value = &v;
	ev.wall_time = wall_now();
	ev.step = step;
	ev.what_case = TENSORFLOW__EVENT__WHAT_SUMMARY;
	ev.summary = &sum;
	return queue_event(tb, &ev);
}

int loom_tb_scalar(struct loom_tb *tb, int64_t step, const char *tag, double value)
{
	Tensorflow__Summary__Value v = TENSORFLOW__SUMMARY__VALUE__INIT;
	v.tag = (char *)tag;
	v.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
	v.simple_value = (float)value;
	return queue_value(tb, step, &v);
}

int loom_tb_text(struct loom_tb *tb, int64_t step, const char *tag, const char *text)
{
	Tensorflow__SummaryMetadata__PluginData pd = TENSORFLOW__SUMMARY_METADATA__PLUGIN_DATA__INIT;
	Tensorflow__SummaryMetadata md = TENSORFLOW__SUMMARY_METADATA__INIT;
	Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
	Tensorflow__TensorProto t = TENSORFLOW__TENSOR_PROTO__INIT;
	Tensorflow__Summary__Value v = TENSORFLOW__SUMMARY__VALUE__INIT;
	ProtobufCBinaryData s = { strlen(text), (uint8_t *)text };
	pd.plugin_name = "text";
	md.plugin_data = &pd;
	t.dtype = TENSORFLOW__DATA_TYPE__DT_STRING;
	t.tensor_shape = &shape; /* rank 0: one string */
	t.n_string_val = 1;
	t.string_val = &s;
	v.tag = (char *)tag;
	v.metadata = &md;
	v.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR;
	v.tensor = &t;
	return queue_value(tb, step, &v);
}

static void tb_free(struct loom_tb *tb)
{
	if (tb->fd >= 0)
		close(tb->fd);
	free(tb->path);
	free(tb->buf);
	free(tb->pack);
	free(tb);
}

struct loom_tb *loom_tb_open(const char *dir, struct loom_err *err)
{
	struct loom_tb *tb = calloc(1, sizeof *tb);
	char host[256] = "localhost";
	if (!tb) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	tb->fd = -1;
	if (loom_mkdir_p(dir, err) < 0) {
		tb_free(tb);
		return NULL;
	}
	if (gethostname(host, sizeof host - 1) < 0 || !host[0])
		snprintf(host, sizeof host, "localhost");
	host[sizeof host - 1] = 0;
	double now = wall_now();
	for (int attempt = 0; attempt < 2 && tb->fd < 0; attempt++) {
		free(tb->path);
		if (asprintf(&tb->path, attempt ? "%s/events.out.tfevents.%lld.%s.%ld" :
				 "%s/events.out.tfevents.%lld.%s", dir, (long long)now, host,
			     (long)getpid()) < 0) {
			tb->path = NULL;
			loom_err_set(err, LOOM_ENOMEM, "out of memory");
			tb_free(tb);
			return NULL;
		}
		tb->fd = open(tb->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (tb->fd < 0 && (errno != EEXIST || attempt)) {
			loom_err_errno(err, LOOM_EIO, errno, "cannot create '%s'", tb->path);
			tb_free(tb);
			return NULL;
		}
	}
	Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
	ev.wall_time = now;
	ev.what_case = TENSORFLOW__EVENT__WHAT_FILE_VERSION;
	ev.file_version = LOOM_TB_FILE_VERSION;
	if (queue_event(tb, &ev) || loom_tb_flush(tb)) {
		*err = tb->err;
		tb_free(tb);
		return NULL;
	}
	return tb;
}

int loom_tb_close(struct loom_tb *tb, struct loom_err *err)
{
	if (!tb)
		return 0;
	int rc = loom_tb_flush(tb);
	if (!rc && fsync(tb->fd) < 0 && errno != EINVAL)
		rc = loom_err_errno(&tb->err, LOOM_EIO, errno, "%s", tb->path);
	if (close(tb->fd) < 0 && !rc)
		rc = loom_err_errno(&tb->err, LOOM_EIO, errno, "%s", tb->path);
	tb->fd = -1;
	if (rc && err)
		*err = tb->err;
	tb_free(tb);
	return rc;
}

/* ---- reading ---------------------------------------------------------- */

const struct loom_tb_tag_name loom_tb_tags[LOOM_TB_N_TAGS] = {
	[LOOM_TB_LOSS] = { "train/loss", "loss" },
	[LOOM_TB_LR] = { "train/lr", "lr" },
	[LOOM_TB_GRAD_NORM] = { "train/grad_norm", "grad_norm" },
	[LOOM_TB_TOKENS_PER_S] = { "train/tokens_per_s", "tokens_per_s" },
	[LOOM_TB_EVAL_LOSS] = { "eval/loss", "eval_loss" },
	[LOOM_TB_EVAL_PPL] = { "eval/perplexity", "eval_ppl" },
	[LOOM_TB_EVAL_ACC] = { "eval/accuracy", "eval_acc" },
	[LOOM_TB_DENSITY] = { "sparsity/density", "density" },
	[LOOM_TB_CHURN] = { "sparsity/churn", "churn" },
	[LOOM_TB_EVAL_EM] = { "eval/exact_match", "eval_exact_match" },
	[LOOM_TB_EVAL_F1] = { "eval/f1", "eval_f1" },
	[LOOM_TB_EVAL_TRAIN_LOSS] = { "eval/train_loss", "eval_train_loss" },
};

const char *loom_tb_log_key(const char *tag)
{
	for (int i = 0; i < LOOM_TB_N_TAGS; i++)
		if (!strcmp(tag, loom_tb_tags[i].tag))
			return loom_tb_tags[i].log_key;
	return NULL;
}

/* A tensor's one number (DT_FLOAT or DT_DOUBLE); 0 if it holds none. */
static int tensor_scalar(const Tensorflow__TensorProto *t, double *v)
{
	if (t->dtype == TENSORFLOW__DATA_TYPE__DT_FLOAT) {
		float f;
		if (t->n_float_val == 1)
			return *v = t->float_val[0], 1;
		if (t->tensor_content.len != sizeof f)
			return 0;
		memcpy(&f, t->tensor_content.data, sizeof f);
		return *v = f, 1;
	}
	if (t->dtype == TENSORFLOW__DATA_TYPE__DT_DOUBLE) {
		if (t->n_double_val == 1)
			return *v = t->double_val[0], 1;
		if (t->tensor_content.len != sizeof *v)
			return 0;
		memcpy(v, t->tensor_content.data, sizeof *v);
		return 1;
	}
	return 0;
}

/* The callbacks of one Event. */
static int event_values(const Tensorflow__Event *e,
			int (*cb)(void *ctx, const struct loom_tb_event *ev), void *ctx)
{
	struct loom_tb_event ev = { .wall_time = e->wall_time, .step = e->step };
	if (e->what_case == TENSORFLOW__EVENT__WHAT_FILE_VERSION) {
		ev.kind = LOOM_TB_VERSION;
		ev.text = e->file_version;
		ev.text_len = strlen(e->file_version);
		return cb(ctx, &ev);
	}
	if (e->what_case != TENSORFLOW__EVENT__WHAT_SUMMARY)
		return 0;
	for (size_t i = 0; i < e->summary->n_value; i++) {
		const Tensorflow__Summary__Value *v = e->summary->value[i];
		const Tensorflow__TensorProto *t = v->tensor;
		ev.tag = v->tag;
		if (v->value_case == TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE) {
			ev.kind = LOOM_TB_SCALAR;
			ev.value = v->simple_value;
		} else if (v->value_case != TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR) {
			continue;
		} else if (tensor_scalar(t, &ev.value)) {
			ev.kind = LOOM_TB_SCALAR;
		} else if (t->dtype == TENSORFLOW__DATA_TYPE__DT_STRING && t->n_string_val >= 1) {
			ev.kind = LOOM_TB_TEXT;
			ev.text = (const char *)t->string_val[0].data;
			ev.text_len = t->string_val[0].len;
		} else {
			continue;
		}
		int rc = cb(ctx, &ev);
		if (rc)
			return rc;
	}
	return 0;
}

long loom_tb_read(const void *buf, size_t len, const char *name,
		  int (*cb)(void *ctx, const struct loom_tb_event *ev), void *ctx,
		  struct loom_err *err)
{
	struct loom_tfr_record rec;
	uint64_t off = 0;
	long n = 0;
	int rc;
	while ((rc = loom_tfr_buf_next(buf, len, &off, (uint64_t)n, name, &rec, err)) == 0) {
		Tensorflow__Event *e = tensorflow__event__unpack(NULL, rec.len, rec.data);
		if (!e)
			return loom_err_set(err, LOOM_EFORMAT, "%s: record %ld at byte %llu: not a tensorflow.Event",
					    name, n, (unsigned long long)rec.offset);
		rc = event_values(e, cb, ctx);
		tensorflow__event__free_unpacked(e, NULL);
		if (rc)
			return rc;
		n++;
	}
	return rc == LOOM_EOF ? n : rc;
}
