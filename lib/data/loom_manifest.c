/* loom_manifest.c - see loom_manifest.h */
#include "loom_manifest.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "loom_file.h"

void loom_shard_name(char *out, size_t n, const char *prefix, uint64_t i, uint64_t total)
{
	snprintf(out, n, "%s-%05" PRIu64 "-of-%05" PRIu64 ".tfrecord", prefix, i, total);
}

static const char *json_str(json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A key the manifest (formats/manifest.md) may have must have its type
 * (a string, or a whole number >= 0; null where nullable): else
 * LOOM_EFORMAT naming the file, the key and what was expected. */
static int manifest_key(const char *path, json_t *o, const char *where, const char *key,
			int type, int nullable, struct loom_err *err)
{
	json_t *v = json_object_get(o, key);
	if (!v || (nullable && json_is_null(v)))
		return 0;
	if (type == JSON_STRING ? json_is_string(v)
				: json_is_integer(v) && json_integer_value(v) >= 0)
		return 0;
	char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	loom_err_set(err, LOOM_EFORMAT, "%s: %s%s is %.40s, expected %s", path, where, key,
		     text ? text : "?",
		     type == JSON_STRING ? (nullable ? "a string or null" : "a string")
					 : "a whole number >= 0");
	free(text);
	return LOOM_EFORMAT;
}

int loom_manifest_read(const char *path, struct loom_manifest *m, struct loom_err *err)
{
	json_error_t je;
	char *text;
	size_t len;
	memset(m, 0, sizeof *m);
	int rc = loom_file_read_bounded(path, LOOM_FILE_MAX_LIST, &text, &len, err);
	if (rc < 0)
		return rc;
	json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	free(text);
	if (!j)
		return loom_err_set(err, LOOM_EFORMAT, "%s: line %d: %s", path, je.line,
				    loom_json_reason(je.text));
	m->priv = j;
	json_t *shards = json_object_get(j, "shards"), *e;
	if (!json_is_array(shards) || json_array_size(shards) == 0) {
		loom_manifest_release(m);
		return loom_err_set(err, LOOM_EFORMAT, "%s: no \"shards\" list", path);
	}
	m->nshards = json_array_size(shards);
	if (!(m->shards = calloc(m->nshards, sizeof *m->shards))) {
		loom_manifest_release(m);
		return loom_err_set(err, LOOM_ENOMEM, "%s: out of memory", path);
	}
	size_t i;
	json_array_foreach(shards, i, e) {
		char where[48];
		snprintf(where, sizeof where, "shards[%zu].", i);
		if (json_is_object(e) &&
		    ((rc = manifest_key(path, e, where, "bytes", JSON_INTEGER, 0, err)) ||
		     (rc = manifest_key(path, e, where, "sha256", JSON_STRING, 1, err)) ||
		     (rc = manifest_key(path, e, where, "records", JSON_INTEGER, 0, err)) ||
		     (rc = manifest_key(path, e, where, "index", JSON_STRING, 0, err)))) {
			loom_manifest_release(m);
			return rc;
		}
		struct loom_manifest_shard *sh = &m->shards[i];
		json_t *name = json_is_string(e) ? e : json_object_get(e, "file");
		sh->file = json_str(name ? name : json_object_get(e, "path"));
		sh->bare = json_is_string(e);
		sh->index = json_str(json_object_get(e, "index"));
		json_t *r = json_object_get(e, "records"), *b = json_object_get(e, "bytes");
		sh->has_records = json_is_integer(r);
		sh->records = json_integer_value(r);
		sh->has_bytes = json_is_integer(b);
		sh->bytes = json_integer_value(b);
		sh->sha256 = json_str(json_object_get(e, "sha256"));
	}
	if ((rc = manifest_key(path, j, "", "feature", JSON_STRING, 0, err)) ||
	    (rc = manifest_key(path, j, "", "kind", JSON_STRING, 0, err)) ||
	    (rc = manifest_key(path, j, "", "seq_len", JSON_INTEGER, 0, err))) {
		loom_manifest_release(m);
		return rc;
	}
	m->feature = json_str(json_object_get(j, "feature"));
	m->kind = json_str(json_object_get(j, "kind"));
	json_t *feats = json_object_get(j, "features");
	if (json_is_array(feats) && json_array_size(feats)) {
		m->nfeatures = json_array_size(feats);
		if (!(m->features = calloc(m->nfeatures, sizeof *m->features))) {
			loom_manifest_release(m);
			return loom_err_set(err, LOOM_ENOMEM, "%s: out of memory", path);
		}
	}
	json_array_foreach(m->nfeatures ? feats : NULL, i, e) {
		struct loom_manifest_feature *mf = &m->features[i];
		const char *shape = json_str(json_object_get(e, "shape"));
		json_t *len = json_object_get(e, "length");
		mf->name = json_str(json_object_get(e, "name"));
		mf->per_token = shape && !strcmp(shape, "token");
		mf->length = json_is_integer(len) ? json_integer_value(len) : 0;
		if (!mf->name || !shape || (!mf->per_token && strcmp(shape, "record")) ||
		    mf->length < 1) {
			loom_manifest_release(m);
			return loom_err_set(err, LOOM_EFORMAT, "%s: features[%zu]: expected a \"name\", "
					    "a \"shape\" \"token\" or \"record\" and a \"length\" >= 1",
					    path, i);
		}
	}
	json_t *L = json_object_get(j, "seq_len");
	m->has_seq_len = json_is_integer(L);
	m->seq_len = json_integer_value(L);
	return 0;
}

void loom_manifest_release(struct loom_manifest *m)
{
	free(m->shards);
	free(m->features);
	json_decref(m->priv);
	memset(m, 0, sizeof *m);
}
