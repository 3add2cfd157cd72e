/* Unit tests for loom_tb: the event file it writes reads back, record by
 * record, through loom_tfr_reader (both CRCs checked) and protobuf-c's own
 * decoder of tensorflow.Event; loom_tb_read gives the same values back and
 * refuses a corrupt record; a cut file reads up to its last whole record. */
#include <string.h>

#include "loom_tb.h"
#include "loom_tfrecord.h"
#include "tap.h"
#include "tensorflow/event.pb-c.h"

struct seen {
	int versions, scalars, texts;
	int64_t last_step;
	char last_tag[64];
	double last_value;
	char text[256];
};

static int collect(void *ctx, const struct loom_tb_event *ev)
{
	struct seen *s = ctx;
	if (ev->kind == LOOM_TB_VERSION) {
		s->versions++;
		return 0;
	}
	snprintf(s->last_tag, sizeof s->last_tag, "%s", ev->tag);
	s->last_step = ev->step;
	if (ev->kind == LOOM_TB_SCALAR) {
		s->scalars++;
		s->last_value = ev->value;
	} else {
		s->texts++;
		snprintf(s->text, sizeof s->text, "%.*s", (int)ev->text_len, ev->text);
	}
	return 0;
}

int main(void)
{
	struct loom_err err = { 0 };
	const char *dir = tap_path("runs/a");
	struct loom_tb *tb = loom_tb_open(dir, &err);
	ok(tb != NULL, "open creates the directory and the file (%s)", err.msg);
	if (!tb)
		return done_testing();
	const char *base = strrchr(loom_tb_path(tb), '/') + 1;
	ok(!strncmp(base, "events.out.tfevents.", 20), "named events.out.tfevents.<time>.<host> (%s)", base);
	struct loom_tb *tb2 = loom_tb_open(dir, &err);
	ok(tb2 && strcmp(loom_tb_path(tb2), loom_tb_path(tb)), "a second file in the same second gets another name");
	loom_tb_close(tb2, NULL);
	char path[4096];
	snprintf(path, sizeof path, "%s", loom_tb_path(tb));

	is_int(loom_tb_scalar(tb, 1, "train/loss", 4.5), 0, "scalar");
	is_int(loom_tb_scalar(tb, 2, "train/loss", 3.25), 0, "scalar");
	is_int(loom_tb_text(tb, 2, "config", "{\"n_layer\": 2}"), 0, "text");
	is_int(loom_tb_flush(tb), 0, "flush");
	size_t len;
	char *flushed = tap_slurp(&len, "%s", path);
	ok(flushed && len > 0, "flushed records are in the file before close");
	free(flushed);
	is_int(loom_tb_scalar(tb, 3, "eval/loss", 2.0), 0, "scalar after a flush");
	is_int(loom_tb_close(tb, &err), 0, "close");

	/* the file, read by loom's TFRecord reader and protobuf-c */
	struct loom_tfr_reader *r = loom_tfr_reader_open(path, 0, &err);
	struct loom_tfr_record rec;
	int n = 0, rc = 0;
	Tensorflow__Event *ev[8] = { 0 };
	while (r && (rc = loom_tfr_reader_next(r, &rec)) == 0 && n < 8)
		ev[n++] = tensorflow__event__unpack(NULL, rec.len, rec.data);
	ok(r && rc == LOOM_EOF, "every record's CRCs check (%s)", r ? loom_tfr_reader_error(r) : err.msg);
	loom_tfr_reader_free(r);
	is_int(n, 5, "five events");
	for (int i = 0; i < n; i++)
		ok(ev[i] != NULL, "event %d is a tensorflow.Event", i);
	if (n == 5 && ev[0] && ev[1] && ev[3] && ev[4]) {
		is_int(ev[0]->what_case, TENSORFLOW__EVENT__WHAT_FILE_VERSION, "first: file_version");
		is_str(ev[0]->file_version, "brain.Event:2", "brain.Event:2");
		ok(ev[0]->wall_time > 1.6e9, "with a wall time (%f)", ev[0]->wall_time);
		is_int(ev[1]->what_case, TENSORFLOW__EVENT__WHAT_SUMMARY, "then summaries");
		is_int(ev[1]->step, 1, "step");
		ok(ev[1]->wall_time >= ev[0]->wall_time, "wall time goes on");
		is_int(ev[1]->summary->n_value, 1, "one value");
		is_str(ev[1]->summary->value[0]->tag, "train/loss", "tag");
		is_int(ev[1]->summary->value[0]->value_case, TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE, "simple_value");
		ok(ev[1]->summary->value[0]->simple_value == 4.5f, "value");
		const Tensorflow__Summary__Value *t = ev[3]->summary->value[0];
		is_str(t->tag, "config", "text tag");
		ok(t->metadata && t->metadata->plugin_data, "with plugin data");
		if (t->metadata && t->metadata->plugin_data)
			is_str(t->metadata->plugin_data->plugin_name, "text", "the text plugin's");
		is_int(t->value_case, TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR, "a tensor");
		is_int(t->tensor->dtype, TENSORFLOW__DATA_TYPE__DT_STRING, "DT_STRING");
		is_int(t->tensor->n_string_val, 1, "one string");
		is_int(t->tensor->tensor_shape->n_dim, 0, "a scalar string");
		is_mem(t->tensor->string_val[0].data, "{\"n_layer\": 2}", 14, "the text");
		is_int(ev[4]->step, 3, "the event queued after the flush");
	}
	for (int i = 0; i < n; i++)
		tensorflow__event__free_unpacked(ev[i], NULL);

	/* loom_tb_read: the same values */
	char *buf = tap_slurp(&len, "%s", path);
	struct seen s = { 0 };
	ok(loom_tfr_sniff(buf, len), "sniff: an event file is TFRecord");
	ok(!loom_tfr_sniff("{\"step\":1}\n", 11), "sniff: a JSON log is not");
	is_int(loom_tb_read(buf, len, "f", collect, &s, &err), 5, "read: 5 records");
	is_int(s.versions, 1, "a version");
	is_int(s.scalars, 3, "3 scalars");
	is_int(s.texts, 1, "a text");
	is_str(s.text, "{\"n_layer\": 2}", "its text");
	is_str(s.last_tag, "eval/loss", "last tag");
	ok(s.last_value == 2.0 && s.last_step == 3, "last value and step");

	/* cut inside the last record: the ones before it are read */
	memset(&s, 0, sizeof s);
	is_int(loom_tb_read(buf, len - 5, "f", collect, &s, &err), LOOM_ETRUNC, "a cut file: LOOM_ETRUNC");
	ok(strstr(err.msg, "f: record 4 at byte") != NULL, "naming the record (%s)", err.msg);
	is_int(s.scalars, 2, "after the records before it");

	/* cut inside the header of a record: the ones before it are read */
	memset(&s, 0, sizeof s);
	is_int(loom_tb_read(buf, 40 + 5, "f", collect, &s, &err), LOOM_ETRUNC, "cut in a header: LOOM_ETRUNC");
	is_str(err.msg, "f: record 1 at byte 40: truncated record header (5 of 12 bytes)", "names it");
	is_int(s.versions, 1, "after the record before it");
	/* a flipped length byte */
	buf[40] ^= 1;
	is_int(loom_tb_read(buf, len, "f", collect, &s, &err), LOOM_ECHECKSUM, "a damaged length: LOOM_ECHECKSUM");
	ok(strstr(err.msg, "f: record 1 at byte 40: length CRC mismatch") != NULL, "%s", err.msg);
	buf[40] ^= 1;
	/* not an Event: a record of other bytes */
	uint8_t junk[3 + 16];
	loom_tfr_frame(junk, "\xff\xff\xff", 3);
	is_int(loom_tb_read(junk, sizeof junk, "j", collect, &s, &err), LOOM_EFORMAT, "a record that is not an Event: LOOM_EFORMAT");
	is_str(err.msg, "j: record 0 at byte 0: not a tensorflow.Event", "names it");
	/* a flipped payload byte */
	buf[30] ^= 1;
	is_int(loom_tb_read(buf, len, "f", collect, &s, &err), LOOM_ECHECKSUM, "a corrupt record: LOOM_ECHECKSUM");
	ok(strstr(err.msg, "CRC mismatch") != NULL, "%s", err.msg);
	free(buf);

	/* the directory cannot be made */
	ok(loom_tb_open("/dev/null/x", &err) == NULL, "a directory that cannot be made: NULL (%s)", err.msg);
	return done_testing();
}
