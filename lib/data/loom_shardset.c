/* loom_shardset.c - see loom_shardset.h */
#include "loom_shardset.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom_file.h"
#include "loom_manifest.h"
#include "loom_tfrecord.h"

struct loom_shardset {
	struct loom_shardset_opts o;
	char *prefix, *who;
	/* writers */
	struct loom_tfr_writer **w;
	uint64_t nw, wcap;
	uint64_t written;    /* records handed to writers */
	/* the output set */
	char *dir, *base;    /* the prefix's directory and last component */
	char run[16];        /* this run's id, in the names of its files */
	char **old;          /* files named by the manifest found at the start */
	size_t nold;
	char *lock_path;
	int lock_fd;
	char **done;         /* this run's files, removed again on failure */
	size_t ndone;
	json_t *run_set, *final_set; /* prepared: the shard lists under the run's
					and the final names */
	uint64_t bytes;
	int committed;
};

static int nomem(struct loom_err *err)
{
	return loom_err_set(err, LOOM_ENOMEM, "out of memory");
}

/* ---- writers ---- */

static int writer_path(struct loom_shardset *s, uint64_t j, uint64_t total, char *out, size_t n,
		       struct loom_err *err)
{
	loom_shard_name(out, n, s->prefix, j, total);
	if (strlen(out) + 8 >= n)
		return loom_err_set(err, LOOM_EINVAL, "output prefix too long");
	return 0;
}

static int open_writer(struct loom_shardset *s, uint64_t j, uint64_t total, struct loom_err *err)
{
	char path[4096];
	struct loom_err e;
	int rc = writer_path(s, j, total, path, sizeof path, err);
	if (rc < 0)
		return rc;
	if (j >= s->wcap) {
		uint64_t nc = s->wcap ? s->wcap * 2 : 16;
		while (nc <= j)
			nc *= 2;
		struct loom_tfr_writer **p = realloc(s->w, nc * sizeof *p);
		if (!p)
			return nomem(err);
		memset(p + s->wcap, 0, (nc - s->wcap) * sizeof *p);
		s->w = p;
		s->wcap = nc;
	}
	s->w[j] = loom_tfr_writer_new(path, s->o.buffer,
				      (s->o.no_sha256 ? 0 : LOOM_TFW_SHA256) | LOOM_TFW_ASYNC, &e);
	if (!s->w[j])
		return loom_err_set(err, e.code, "%s", e.msg);
	if (j + 1 > s->nw)
		s->nw = j + 1;
	return 0;
}

/* The writer for the next output record. */
static struct loom_tfr_writer *next_writer(struct loom_shardset *s, struct loom_err *err)
{
	uint64_t r = s->written, j;
	if (s->o.shards) {
		if (!s->nw)
			for (uint64_t k = 0; k < s->o.shards; k++)
				if (open_writer(s, k, s->o.shards, err) < 0)
					return NULL;
		j = r % s->o.shards;
	} else {
		j = r / s->o.records_per_shard;
		if (j >= s->nw && open_writer(s, j, 0, err) < 0)
			return NULL;
	}
	return s->w[j];
}

int loom_shardset_put(struct loom_shardset *s, const uint8_t *p, size_t n, struct loom_err *err)
{
	struct loom_tfr_writer *w = next_writer(s, err);
	if (!w)
		return err->code ? err->code : LOOM_EIO;
	if (loom_tfr_writer_write(w, p, n) < 0)
		return loom_err_set(err, LOOM_EIO, "%s", loom_tfr_writer_error(w));
	s->written++;
	return 0;
}

uint64_t loom_shardset_records(const struct loom_shardset *s)
{
	return s->written;
}

/* ---- the set in place, leftovers, lock ---- */

/* Length of "BASE-NNNNN-of-NNNNN.tfrecord[.index]" at the start of name,
 * or 0. */
static size_t match_shard_name(const char *base, const char *name)
{
	size_t bl = strlen(base), d;
	if (strncmp(name, base, bl) || name[bl] != '-')
		return 0;
	const char *p = name + bl + 1;
	if ((d = strspn(p, "0123456789")) < 5 || strncmp(p + d, "-of-", 4))
		return 0;
	p += d + 4;
	if ((d = strspn(p, "0123456789")) < 5 || strncmp(p + d, ".tfrecord", 9))
		return 0;
	p += d + 9;
	if (!strncmp(p, ".index", 6))
		p += 6;
	return (size_t)(p - name);
}

/* Is `name` a file of the output set of prefix `base` (a shard, an index),
 * or a temporary of one (".NAME.tmp-*", also of the manifest)? */
static int set_file(const char *base, const char *name)
{
	size_t n = match_shard_name(base, name), bl = strlen(base);
	if (n)
		return name[n] == 0;
	if (name[0] != '.')
		return 0;
	while (*name == '.')
		name++;
	n = match_shard_name(base, name);
	if (!n && !strncmp(name, base, bl) && !strncmp(name + bl, ".manifest.json", 14))
		n = bl + 14;
	return n && !strncmp(name + n, ".tmp-", 5) && name[n + 5];
}

static int named_old(const struct loom_shardset *s, const char *name)
{
	for (size_t i = 0; i < s->nold; i++)
		if (!strcmp(s->old[i], name))
			return 1;
	return 0;
}

/* Append a copy of str to the list *v of *n strings. */
static int push_name(char ***v, size_t *n, const char *str, struct loom_err *err)
{
	char **p = realloc(*v, (*n + 1) * sizeof *p);
	if (!p)
		return nomem(err);
	*v = p;
	if (!(p[*n] = strdup(str)))
		return nomem(err);
	(*n)++;
	return 0;
}

static int add_old(struct loom_shardset *s, const char *name, struct loom_err *err)
{
	/* Only the prefix's own names are ever removed: nothing outside the
	 * directory, nothing a tampered manifest might name. */
	if (strchr(name, '/') || !set_file(s->base, name))
		return 0;
	return push_name(&s->old, &s->nold, name, err);
}

/* The files named by the manifest in place (none if there is none or it is
 * not a manifest: then no set can be read there). */
static int read_old_set(struct loom_shardset *s, struct loom_err *err)
{
	char path[4200];
	snprintf(path, sizeof path, "%s.manifest.json", s->prefix);
	struct loom_manifest m;
	struct loom_err e;
	int rc = 0;
	if (loom_manifest_read(path, &m, &e) < 0)
		return 0;
	for (size_t i = 0; rc == 0 && i < m.nshards; i++) {
		if (m.shards[i].file)
			rc = add_old(s, m.shards[i].file, err);
		if (rc == 0 && m.shards[i].index)
			rc = add_old(s, m.shards[i].index, err);
	}
	loom_manifest_release(&m);
	return rc;
}

static void commit_step(struct loom_shardset *s, const char *what, const char *path)
{
	if (s->o.commit_step)
		s->o.commit_step(s->o.commit_step_ctx, what, path);
}

static int remove_file(struct loom_shardset *s, const char *path, struct loom_err *err)
{
	commit_step(s, "unlink", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return loom_err_errno(err, LOOM_EIO, errno, "cannot remove '%s'", path);
	return 0;
}

/* Remove what killed runs left: temporaries and set files that the
 * manifest in place does not name. */
static int remove_leftovers(struct loom_shardset *s, struct loom_err *err)
{
	DIR *d = opendir(s->dir);
	if (!d)
		return loom_err_errno(err, LOOM_EIO, errno, "cannot read directory '%s'", s->dir);
	struct dirent *de;
	int rc = 0, removed = 0;
	while (rc == 0 && (de = readdir(d))) {
		if (!set_file(s->base, de->d_name) || named_old(s, de->d_name))
			continue;
		char path[8192];
		snprintf(path, sizeof path, "%s/%s", s->dir, de->d_name);
		rc = remove_file(s, path, err);
		removed = 1;
	}
	closedir(d);
	if (rc == 0 && removed)
		rc = loom_fsync_dir_of(s->dir, err);
	return rc;
}

/* Hold DIR/.BASE.lock for the run (loom_lock_take); another run on the
 * prefix is refused. */
static int lock_prefix(struct loom_shardset *s, struct loom_err *err)
{
	size_t n = strlen(s->dir) + strlen(s->base) + 16;
	if (!(s->lock_path = malloc(n)))
		return nomem(err);
	snprintf(s->lock_path, n, "%s/.%s.lock", s->dir, s->base);
	if (access(s->dir, F_OK) && errno == ENOENT)
		return loom_err_set(err, LOOM_EIO, "output directory '%s' does not exist", s->dir);
	int rc = loom_lock_take(s->lock_path, &s->lock_fd, err);
	if (rc == LOOM_EBUSY)
		return loom_err_set(err, LOOM_EBUSY, "another %s is writing '%s' (it holds '%s')",
				    s->who, s->prefix, s->lock_path);
	return rc;
}

/* Lock the prefix, note the set in place, remove leftovers, pick the run id. */
static int open_set(struct loom_shardset *s, struct loom_err *err)
{
	char *c = strdup(s->prefix);
	if (!c)
		return nomem(err);
	s->dir = strdup(dirname(c));
	free(c);
	s->base = strdup(loom_basename(s->prefix));
	if (!s->dir || !s->base)
		return nomem(err);
	if (!*s->base || !strcmp(s->base, ".") || !strcmp(s->base, ".."))
		return loom_err_set(err, LOOM_EINVAL,
				    "output prefix '%s' names no file in a directory", s->prefix);
	int rc = lock_prefix(s, err);
	if (rc == 0)
		rc = read_old_set(s, err);
	if (rc == 0)
		rc = remove_leftovers(s, err);
	uint32_t id;
	if (getentropy(&id, sizeof id) < 0)
		id = (uint32_t)getpid() ^ (uint32_t)(loom_now() * 1e6);
	size_t i;
	do { /* a name that no file of the old set has */
		snprintf(s->run, sizeof s->run, "run%08" PRIx32, id++);
		for (i = 0; i < s->nold && !strstr(s->old[i], s->run); i++)
			;
	} while (i < s->nold);
	return rc;
}

struct loom_shardset *loom_shardset_open(const struct loom_shardset_opts *o,
					 struct loom_err *err)
{
	if (!o->prefix || !*o->prefix || (o->shards == 0 && o->records_per_shard == 0)) {
		loom_err_set(err, LOOM_EINVAL, "invalid sharding options");
		return NULL;
	}
	struct loom_shardset *s = calloc(1, sizeof *s);
	if (!s) {
		nomem(err);
		return NULL;
	}
	s->o = *o;
	s->lock_fd = -1;
	s->prefix = strdup(o->prefix);
	s->who = strdup(o->who ? o->who : "run");
	if (!s->prefix || !s->who) {
		nomem(err);
		loom_shardset_free(s);
		return NULL;
	}
	s->o.prefix = s->prefix;
	s->o.who = s->who;
	if (!s->o.buffer)
		s->o.buffer = 1u << 20;
	if (open_set(s, err) < 0) {
		loom_shardset_free(s);
		return NULL;
	}
	return s;
}

/* ---- commit ---- */

static int write_manifest(struct loom_shardset *s, json_t *m, json_t *shards, const char *path,
			  struct loom_err *err)
{
	json_object_set_new(m, "shards", shards);
	char *text = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!text)
		return nomem(err);
	size_t tl = strlen(text);
	char *t2 = realloc(text, tl + 2);
	if (!t2) {
		free(text);
		return nomem(err);
	}
	t2[tl] = '\n';
	t2[tl + 1] = 0;
	commit_step(s, "rename", path);
	int rc = loom_write_file_atomic(path, t2, tl + 1, err);
	free(t2);
	return rc;
}

static json_t *shard_entry(struct loom_shardset *s, struct loom_tfr_writer *w,
			   const char *path, const char *ipath)
{
	return json_pack("{s:s, s:s, s:I, s:I, s:o}",
			 "file", loom_basename(path),
			 "index", loom_basename(ipath),
			 "records", (json_int_t)loom_tfr_writer_records(w),
			 "bytes", (json_int_t)loom_tfr_writer_bytes(w),
			 "sha256", s->o.no_sha256 ? json_null()
			 : json_string(loom_tfr_writer_sha256(w)));
}

/* After the commit point: remove the old set, give the new one its final
 * names (the list `final` names them) and drop this run's names. */
static int publish(struct loom_shardset *s, json_t *m, json_t *final, const char *mpath,
		   struct loom_err *err)
{
	int rc = 0;
	for (size_t i = 0; i < s->nold && rc == 0; i++) {
		char path[8192];
		snprintf(path, sizeof path, "%s/%s", s->dir, s->old[i]);
		rc = remove_file(s, path, err);
	}
	size_t i;
	json_t *e;
	json_array_foreach(final, i, e) {
		for (int k = 0; k < 2 && rc == 0; k++) {
			char path[8192];
			const char *run = s->done[2 * i + (size_t)k];
			snprintf(path, sizeof path, "%s/%s", s->dir,
				 json_string_value(json_object_get(e, k ? "index" : "file")));
			if ((rc = remove_file(s, path, err)) < 0)
				break;
			commit_step(s, "link", path);
			if (link(run, path) < 0)
				rc = loom_err_errno(err, LOOM_EIO, errno,
						    "cannot link '%s' to '%s'", path, run);
		}
	}
	if (rc == 0)
		rc = loom_fsync_dir_of(s->dir, err);
	if (rc < 0) {
		json_decref(final);
		return rc;
	}
	if ((rc = write_manifest(s, m, final, mpath, err)) < 0)
		return rc;
	for (size_t k = 0; k < s->ndone && rc == 0; k++)
		rc = remove_file(s, s->done[k], err);
	if (rc == 0)
		rc = loom_fsync_dir_of(s->dir, err);
	return rc;
}

static void rollback(struct loom_shardset *s)
{
	for (size_t i = 0; i < s->ndone; i++) {
		unlink(s->done[i]);
		free(s->done[i]);
	}
	free(s->done);
	s->done = NULL;
	s->ndone = 0;
}

/* Each shard and its index under this run's names, fsynced. */
static int prepare(struct loom_shardset *s, struct loom_err *err)
{
	int rc = 0;
	json_t *run = json_array(), *final = json_array();
	if (!run || !final) {
		json_decref(run);
		json_decref(final);
		return nomem(err);
	}
	for (uint64_t j = 0; j < s->nw && rc == 0; j++) {
		char path[4096], ipath[4200], rpath[4400], ripath[4500];
		struct loom_tfr_writer *w = s->w[j];
		writer_path(s, j, s->nw, path, sizeof path, err);
		snprintf(ipath, sizeof ipath, "%s.index", path);
		snprintf(rpath, sizeof rpath, "%s/.%s.tmp-%s", s->dir, loom_basename(path), s->run);
		snprintf(ripath, sizeof ripath, "%s.index", rpath);
		commit_step(s, "rename", rpath);
		if (loom_tfr_writer_rename(w, rpath) < 0 || loom_tfr_writer_commit(w) < 0) {
			rc = loom_err_set(err, LOOM_EIO, "%s", loom_tfr_writer_error(w));
			break;
		}
		if ((rc = push_name(&s->done, &s->ndone, rpath, err)) < 0)
			break;
		commit_step(s, "rename", ripath);
		if (loom_tfr_writer_write_index(w, ripath) < 0) {
			rc = loom_err_set(err, LOOM_EIO, "%s", loom_tfr_writer_error(w));
			break;
		}
		if ((rc = push_name(&s->done, &s->ndone, ripath, err)) < 0)
			break;
		/* an entry json_pack could not make (NULL) is not appended: -1 */
		int bad = json_array_append_new(run, shard_entry(s, w, rpath, ripath));
		bad |= json_array_append_new(final, shard_entry(s, w, path, ipath));
		if (bad) {
			rc = nomem(err);
			break;
		}
		s->bytes += loom_tfr_writer_bytes(w);
	}
	if (rc < 0) {
		json_decref(run);
		json_decref(final);
		return rc;
	}
	s->run_set = run;
	s->final_set = final;
	return 0;
}

/* The manifest naming the prepared files: the commit point. */
static int commit(struct loom_shardset *s, json_t *m, struct loom_shardset_result *r,
		  struct loom_err *err)
{
	int rc = 0;
	if (!s->final_set && (rc = prepare(s, err)) < 0)
		return rc;
	json_t *run = s->run_set, *final = s->final_set;
	s->run_set = s->final_set = NULL;
	snprintf(r->manifest, sizeof r->manifest, "%s.manifest.json", s->prefix);
	if ((rc = write_manifest(s, m, run, r->manifest, err)) < 0) {
		json_decref(final);
		return rc;
	}
	s->committed = 1;
	r->shards = s->nw;
	r->bytes = s->bytes;
	struct loom_err e = { 0 };
	if (publish(s, m, final, r->manifest, &e) < 0) /* the new set is in place,
							   under one of its two names */
		snprintf(r->note, sizeof r->note, "%s (the new set is complete;"
			 " the next run removes what is left over)", e.msg);
	return 0;
}

int loom_shardset_prepare(struct loom_shardset *s, struct loom_err *err)
{
	if (s->final_set || s->committed)
		return 0;
	int rc = prepare(s, err);
	if (rc < 0)
		rollback(s);
	return rc;
}

int loom_shardset_commit(struct loom_shardset *s, json_t *manifest,
			 struct loom_shardset_result *r, struct loom_err *err)
{
	memset(r, 0, sizeof *r);
	if (!manifest)
		return nomem(err);
	int rc = commit(s, manifest, r, err);
	json_decref(manifest);
	if (rc < 0)
		rollback(s);
	return rc;
}

void loom_shardset_free(struct loom_shardset *s)
{
	if (!s)
		return;
	json_decref(s->run_set);
	json_decref(s->final_set);
	if (!s->committed)
		rollback(s);
	for (size_t i = 0; i < s->ndone; i++)
		free(s->done[i]);
	free(s->done);
	for (size_t i = 0; i < s->nold; i++)
		free(s->old[i]);
	free(s->old);
	loom_lock_release(s->lock_path, &s->lock_fd);
	free(s->lock_path);
	free(s->dir);
	free(s->base);
	for (uint64_t j = 0; j < s->nw; j++)
		loom_tfr_writer_free(s->w[j]);
	free(s->w);
	free(s->prefix);
	free(s->who);
	free(s);
}
