/* loom_ckpt.c - see loom_ckpt.h */
#include "loom_ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom_crc32c.h"
#include "loom_feed.h"
#include "loom_file.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "loom_ckpt copies float32 tensors as little-endian bytes"
#endif

#define STEP_FMT "step-%08" PRIu64

/* Files whose size and CRC-32C state.json records (formats/checkpoint.md). */
#define MAX_FILES 16

struct recorded {
	char name[64];
	uint64_t bytes;
	uint32_t crc32c;
};

struct loom_ckpt {
	char dir[PATH_MAX];
	char model_path[PATH_MAX + 32];
	const struct loom_ckpt_arch *arch;
	void *hf;			/* arch->hf_size bytes */
	struct loom_ckpt_state state;
	int has_state;
	int verify;			/* check sums (optimizer: when loaded) */
	int optim_verified;		/* optimizer.safetensors checked (once) */
	struct recorded files[MAX_FILES];
	size_t n_files;			/* 0: state.json records no checksums */
	char *loom_config;
	char *vocab_spec;
	char *vocab_name;
	struct loom_st *model;
	struct loom_st *optim;
	const char *const *skip;	/* file tensors no load reads (loom_ckpt_skip) */
	struct loom_err err;
};

/* --- small helpers ---------------------------------------------------------- */

static json_t *json_u64(uint64_t v)
{
	if (v <= (uint64_t)INT64_MAX)
		return json_integer((json_int_t)v);
	char buf[32];
	snprintf(buf, sizeof buf, "%" PRIu64, v);
	return json_string(buf);
}

/* Integer >= 0, or a decimal / 0x-hex string (for values above 2^63). */
static int json_get_u64(json_t *v, uint64_t *out)
{
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (json_is_string(v))
		return loom_parse_u64(json_string_value(v), 0, UINT64_MAX, out) < 0 ? LOOM_EFORMAT : 0;
	return LOOM_EFORMAT;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)f;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static int rm_tree(const char *path)
{
	return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* rm_tree, its failure as an error on err */
static int rm_tree_err(const char *path, struct loom_err *err)
{
	if (rm_tree(path) < 0)
		return loom_err_errno(err, LOOM_EIO, errno, "cannot remove '%s'", path);
	return 0;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *s64, const uint64_t *su)
{
	size_t at = 0;
	at += (size_t)snprintf(buf + at, n - at, "[");
	for (int i = 0; i < ndim && at < n; i++)
		at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? ", " : "",
				       s64 ? (long long)s64[i] : (long long)su[i]);
	if (at < n)
		snprintf(buf + at, n - at, "]");
}

/* One file of a checkpoint and what state.json records of it. */
struct file_sum {
	const char *name;
	struct loom_st_sum sum;
};

static int write_json(const char *path, json_t *j, struct loom_st_sum *sum,
		      struct loom_err *err)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!s)
		return loom_err_set(err, LOOM_ENOMEM, "%s: out of memory", path);
	size_t n = strlen(s);
	char *t = realloc(s, n + 2);
	if (!t) {
		free(s);
		return loom_err_set(err, LOOM_ENOMEM, "%s: out of memory", path);
	}
	t[n] = '\n';
	t[n + 1] = '\0';
	if (sum) {
		sum->bytes = n + 1;
		sum->crc32c = loom_crc32c(0, t, n + 1);
	}
	int rc = loom_write_file_atomic(path, t, n + 1, err);
	free(t);
	return rc;
}

/* --- saving ----------------------------------------------------------------- */

static int to_st(const struct loom_ckpt_tensor *t, const float *data, const char *name,
		 struct loom_st_tensor *o)
{
	memset(o, 0, sizeof *o);
	o->name = name;
	o->dtype = LOOM_ST_F32;
	if (t->ndim < 0 || t->ndim > LOOM_ST_MAX_DIMS)
		return LOOM_EINVAL;
	o->ndim = t->ndim;
	for (int d = 0; d < t->ndim; d++) {
		if (t->shape[d] < 0)
			return LOOM_EINVAL;
		o->shape[d] = (uint64_t)t->shape[d];
	}
	o->data = data;
	return 0;
}

static json_t *hf_config(const struct loom_ckpt_save *s, struct loom_err *err)
{
	json_t *loom = NULL;
	if (s->loom_config_json) {
		json_error_t je;
		loom = json_loads(s->loom_config_json, 0, &je);
		if (!json_is_object(loom)) {
			json_decref(loom);
			loom_err_set(err, LOOM_EINVAL, "loom config is not a JSON object: %s",
				     loom_json_reason(je.text));
			return NULL;
		}
	}
	json_t *c = json_object();
	if (!c || s->arch->hf_write(s->hf, c) < 0) {
		json_decref(c);
		json_decref(loom);
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	if (s->vocab && s->vocab->eos_token_id >= 0) {
		json_object_set_new(c, "bos_token_id", json_integer(s->vocab->eos_token_id));
		json_object_set_new(c, "eos_token_id", json_integer(s->vocab->eos_token_id));
	}
	if (s->vocab && s->vocab->name)
		json_object_set_new(c, "loom_vocab", json_string(s->vocab->name));
	if (loom)
		json_object_set_new(c, "loom", loom);
	return c;
}

static json_t *state_json(const struct loom_ckpt_state *st, const char *extra,
			  const struct file_sum *files, size_t nfiles, struct loom_err *err)
{
	char r[4][20];
	for (int i = 0; i < 4; i++)
		snprintf(r[i], sizeof r[i], "0x%016" PRIx64, st->rng[i]);
	json_t *j = json_pack("{s:o, s:o, s:o, s:[s,s,s,s], s:{s:o, s:I, s:o, s:I, s:I, s:I}}",
			      "step", json_u64(st->step),
			      "samples", json_u64(st->samples),
			      "tokens", json_u64(st->tokens),
			      "rng", r[0], r[1], r[2], r[3],
			      "data", "next_seq", json_u64(st->data_seq),
			      "epoch", (json_int_t)st->data_epoch,
			      "seed", json_u64(st->data_seed),
			      "batch", (json_int_t)st->data_batch,
			      "seq_len", (json_int_t)st->data_seq_len,
			      "world", (json_int_t)st->data_world);
	if (!j) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	if (extra) {
		json_error_t je;
		json_t *x = json_loads(extra, 0, &je);
		if (!json_is_object(x)) {
			json_decref(x);
			json_decref(j);
			loom_err_set(err, LOOM_EINVAL, "state extra is not a JSON object: %s", loom_json_reason(je.text));
			return NULL;
		}
		json_object_set_new(j, "extra", x);
	}
	if (st->best.metric[0] &&
	    json_object_set_new(j, "best", json_pack("{s:s, s:f, s:o}", "metric", st->best.metric,
						      "value", st->best.value, "step",
						      json_u64(st->best.step))) < 0) {
		json_decref(j);
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	json_t *f = json_object();
	if (!f || json_object_set_new(j, "files", f) < 0) {
		json_decref(j);
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < nfiles; i++) {
		char crc[16];
		snprintf(crc, sizeof crc, "%08" PRIx32, files[i].sum.crc32c);
		if (json_object_set_new(f, files[i].name,
					json_pack("{s:o, s:s}", "bytes", json_u64(files[i].sum.bytes),
						  "crc32c", crc)) < 0) {
			json_decref(j);
			loom_err_set(err, LOOM_ENOMEM, "out of memory");
			return NULL;
		}
	}
	return j;
}

/* The symlink DIR/link (latest, best) switched to target atomically. */
static int switch_link(const char *dir, const char *link, const char *target,
		       struct loom_err *err)
{
	char tmp[PATH_MAX + 96], latest[PATH_MAX + 32];
	static unsigned counter;
	snprintf(latest, sizeof latest, "%s/%s", dir, link);
	for (int tries = 0;; tries++) {
		snprintf(tmp, sizeof tmp, "%s/.%s.tmp-%ld-%u", dir, link, (long)getpid(),
			 __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
		if (symlink(target, tmp) == 0)
			break;
		if (errno != EEXIST || tries > 100)
			return loom_err_errno(err, LOOM_EIO, errno, "cannot create symlink '%s'",
					      tmp);
	}
	if (rename(tmp, latest) < 0) {
		int e = errno;
		unlink(tmp);
		return loom_err_errno(err, LOOM_EIO, e, "cannot switch '%s'", latest);
	}
	return loom_fsync_dir_of(dir, err);
}

/* Checks that the caller's HF numbers agree with its tensors before
 * anything is written (a bug here would make an unloadable checkpoint). */
static int check_save_table(const struct loom_ckpt_save *s, struct loom_err *err)
{
	if (!s->arch || !s->hf)
		return loom_err_set(err, LOOM_EINVAL, "checkpoint: no model family given");
	int rc = s->arch->hf_check(s->hf, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < s->n_tensors; i++) {
		const struct loom_ckpt_tensor *t = &s->tensors[i];
		if (!t->name || !t->data || t->ndim < 0 || t->ndim > LOOM_ST_MAX_DIMS)
			return loom_err_set(err, LOOM_EINVAL, "checkpoint: bad tensor table entry %zu",
					    i);
		if (s->adam_m && (!s->adam_m[i] || !s->adam_v || !s->adam_v[i]))
			return loom_err_set(err, LOOM_EINVAL,
					    "checkpoint: missing AdamW moments for '%s'", t->name);
	}
	return 0;
}

static int opt_names(const struct loom_ckpt_save *s, char ***names)
{
	char **n = calloc(2 * s->n_tensors + 1, sizeof *n);
	if (!n)
		return LOOM_ENOMEM;
	for (size_t i = 0; i < s->n_tensors; i++) {
		if (asprintf(&n[2 * i], "%s.exp_avg", s->tensors[i].name) < 0 ||
		    asprintf(&n[2 * i + 1], "%s.exp_avg_sq", s->tensors[i].name) < 0) {
			for (size_t k = 0; k < 2 * s->n_tensors; k++)
				free(n[k]);
			free(n);
			return LOOM_ENOMEM;
		}
	}
	*names = n;
	return 0;
}

/* The two files of tensor data, in the order of loom_ckpt_piece.file. */
static const char *const data_file[2] = { "model.safetensors", "optimizer.safetensors" };

/* The safetensors header of data file f (LOOM_CKPT_MODEL_FILE: the
 * weights; LOOM_CKPT_OPTIMIZER_FILE: NAME.exp_avg, NAME.exp_avg_sq of
 * every tensor in turn) at `path`: loom_st_header's. */
static int data_header(const struct loom_ckpt_save *s, int f, const char *path, char **hdr,
		       size_t *hlen, uint64_t *dlen, struct loom_err *err)
{
	char step[32];
	char **on = NULL;
	int rc = 0;
	const size_t n = f == LOOM_CKPT_MODEL_FILE ? s->n_tensors : 2 * s->n_tensors;
	struct loom_st_tensor *st = calloc(n + 1, sizeof *st);
	if (!st || (f == LOOM_CKPT_OPTIMIZER_FILE && opt_names(s, &on) < 0)) {
		free(st);
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	}
	snprintf(step, sizeof step, "%" PRIu64, s->state.step);
	const char *meta[] = {"format", "pt", "loom_step", step, NULL};
	for (size_t i = 0; i < n; i++) {
		const struct loom_ckpt_tensor *t = &s->tensors[on ? i / 2 : i];
		if (to_st(t, NULL, on ? on[i] : t->name, &st[i]) < 0) {
			rc = loom_err_set(err, LOOM_EINVAL, "checkpoint: bad shape for '%s'", t->name);
			goto out;
		}
	}
	rc = loom_st_header(path, st, n, meta, hdr, hlen, dlen, err);
out:
	for (size_t k = 0; on && k < n; k++)
		free(on[k]);
	free(on);
	free(st);
	return rc;
}

/* The files state.json lists: the two data files, a side file, the
 * tokenizer's two, config.json. */
#define MAX_SUMS (2 + 1 + LOOM_CKPT_VOCAB_FILES + 1)

struct loom_ckpt_tx {
	char dir[PATH_MAX];		/* DIR */
	char name[48];			/* step-NNNNNNNN (AS-NNNNNNNN) */
	char link[24];			/* latest (AS) */
	char tmp[PATH_MAX];		/* DIR/.step-NNNNNNNN.tmp-XXXXXX */
	unsigned keep;
	struct loom_ckpt_state state;
	char *state_extra;
	int nfiles;			/* data files: 1, or 2 with the moments */
	uint64_t hlen[2], size[2];	/* a data file's header bytes and size */
	uint32_t hcrc[2];		/* the CRC-32C of its header */
	/* what state.json lists, in its order: the data files, then the
	 * others (their sums computed as they were written) */
	struct file_sum sums[MAX_SUMS];
	char names[MAX_SUMS][64];
	size_t nsums;
	int renamed;			/* tmp is the step directory now */
};

/* Name the next file of state.json's list, of the kind `what` ("side
 * file", "tokenizer file"; NULL: loom's own): a plain name the reader
 * takes, none of loom's own files for the caller's. */
static struct loom_st_sum *add_sum(struct loom_ckpt_tx *tx, const char *what, const char *name,
				   struct loom_err *err)
{
	static const char *const own[] = { "model.safetensors", "optimizer.safetensors",
					   "config.json", "state.json" };
	int bad = !name || !*name || strchr(name, '/') || !strcmp(name, ".") ||
		  !strcmp(name, "..") || strlen(name) >= sizeof tx->names[0];
	for (size_t i = 0; what && !bad && i < sizeof own / sizeof *own; i++)
		bad = !strcmp(name, own[i]);
	for (size_t i = 0; !bad && i < tx->nsums; i++)
		bad = !strcmp(tx->sums[i].name, name);
	if (bad) {
		loom_err_set(err, LOOM_EINVAL, "checkpoint: bad %s name '%s'",
			     what ? what : "file", name ? name : "(null)");
		return NULL;
	}
	snprintf(tx->names[tx->nsums], sizeof tx->names[0], "%s", name);
	tx->sums[tx->nsums].name = tx->names[tx->nsums];
	return &tx->sums[tx->nsums++].sum;
}

/* Write the header of data file f and size the file to its final length
 * (the data a hole until the processes write their slices). */
static int begin_data_file(const struct loom_ckpt_save *s, struct loom_ckpt_tx *tx, int f,
			   struct loom_err *err)
{
	char path[PATH_MAX + 64], *hdr;
	size_t hlen;
	uint64_t dlen;
	struct loom_outfile o;
	snprintf(path, sizeof path, "%s/%s", tx->tmp, data_file[f]);
	int rc = data_header(s, f, path, &hdr, &hlen, &dlen, err);
	if (rc < 0)
		return rc;
	if (!add_sum(tx, NULL, data_file[f], err)) {
		free(hdr);
		return err->code;
	}
	tx->hlen[f] = hlen;
	tx->size[f] = hlen + dlen;
	tx->hcrc[f] = loom_crc32c(0, hdr, hlen);
	rc = loom_outfile_open(&o, path);
	if (rc == 0)
		rc = loom_outfile_write(&o, hdr, hlen);
	if (rc == 0 && ftruncate(o.fd, (off_t)tx->size[f]) < 0)
		rc = loom_err_errno(&o.err, LOOM_EIO, errno, "cannot extend '%s' to %" PRIu64
				    " bytes", path, tx->size[f]);
	rc = loom_outfile_finish(&o, rc, err);
	free(hdr);
	return rc;
}

/* Everything of the step directory but the tensor data and state.json. */
static int begin_files(const struct loom_ckpt_save *s, struct loom_ckpt_tx *tx,
		       struct loom_err *err)
{
	char path[PATH_MAX + 64];
	struct loom_st_sum *sum;
	int rc;
	for (int f = 0; f < tx->nfiles; f++)
		if ((rc = begin_data_file(s, tx, f, err)) < 0)
			return rc;
	if (s->sidecar_name) {
		if (!(sum = add_sum(tx, "side file", s->sidecar_name, err)))
			return err->code;
		snprintf(path, sizeof path, "%s/%s", tx->tmp, s->sidecar_name);
		if ((rc = loom_st_write(path, s->sidecar, s->n_sidecar, s->sidecar_meta, sum,
					err)) < 0)
			return rc;
	}
	for (int i = 0; s->vocab && i < LOOM_CKPT_VOCAB_FILES; i++) {
		const char *name = s->vocab->files[i].name, *data = s->vocab->files[i].data;
		size_t len = s->vocab->files[i].len;
		if (!name)
			continue;
		if (!data)
			return loom_err_set(err, LOOM_EINVAL, "checkpoint: bad tokenizer file '%s'",
					    name);
		if (!(sum = add_sum(tx, "tokenizer file", name, err)))
			return err->code;
		snprintf(path, sizeof path, "%s/%s", tx->tmp, name);
		sum->bytes = len;
		sum->crc32c = loom_crc32c(0, data, len);
		if ((rc = loom_write_file_atomic(path, data, len, err)) < 0)
			return rc;
	}
	json_t *cfg = hf_config(s, err);
	if (!cfg)
		return err->code;
	snprintf(path, sizeof path, "%s/config.json", tx->tmp);
	sum = add_sum(tx, NULL, "config.json", err);
	rc = sum ? write_json(path, cfg, sum, err) : err->code;
	json_decref(cfg);
	return rc;
}

/* The transaction of a save of s: its names and an empty temp step
 * directory (made with the mode mkdir(2) would give); *out = NULL on
 * failure. */
static int tx_open(const struct loom_ckpt_save *s, struct loom_ckpt_tx **out,
		   struct loom_err *err)
{
	struct loom_ckpt_tx *tx;
	int rc;
	*out = NULL;
	if ((rc = loom_mkdir_p(s->dir, err)) < 0)
		return rc;
	size_t al = s->as ? strspn(s->as, "abcdefghijklmnopqrstuvwxyz") : 0;
	if (s->as && (!al || s->as[al] || al > 16 || !strcmp(s->as, "step") ||
		      !strcmp(s->as, "latest")))
		return loom_err_set(err, LOOM_EINVAL, "checkpoint: bad name '%s' to save as", s->as);
	if (!(tx = calloc(1, sizeof *tx)))
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	snprintf(tx->name, sizeof tx->name, "%s-%08" PRIu64, s->as ? s->as : "step", s->state.step);
	snprintf(tx->link, sizeof tx->link, "%s", s->as ? s->as : "latest");
	if (snprintf(tx->dir, sizeof tx->dir, "%s", s->dir) >= (int)sizeof tx->dir ||
	    snprintf(tx->tmp, sizeof tx->tmp, "%s/.%s.tmp-XXXXXX", s->dir, tx->name) >=
	    (int)sizeof tx->tmp || strlen(tx->tmp) + 64 >= PATH_MAX) {
		free(tx);
		return loom_err_set(err, LOOM_EINVAL, "checkpoint path too long: '%s'", s->dir);
	}
	if (!mkdtemp(tx->tmp)) {
		rc = loom_err_errno(err, LOOM_EIO, errno, "cannot create '%s'", tx->tmp);
		free(tx);
		return rc;
	}
	{	/* mkdtemp makes 0700; give the mode mkdir(2) would */
		mode_t um = umask(0);
		umask(um);
		chmod(tx->tmp, 0777 & ~um);
	}
	tx->keep = s->keep;
	tx->state = s->state;
	*out = tx;
	return 0;
}

int loom_ckpt_write_begin(const struct loom_ckpt_save *s, struct loom_ckpt_tx **out,
			  struct loom_err *err)
{
	struct loom_ckpt_tx *tx;
	int rc;
	*out = NULL;
	if ((rc = check_save_table(s, err)) < 0 || (rc = tx_open(s, &tx, err)) < 0)
		return rc;
	tx->nfiles = s->adam_m ? 2 : 1;
	if (s->state_extra_json && !(tx->state_extra = strdup(s->state_extra_json)))
		rc = loom_err_set(err, LOOM_ENOMEM, "out of memory");
	if (rc < 0 || (rc = begin_files(s, tx, err)) < 0) {
		loom_ckpt_tx_free(tx);
		return rc;
	}
	*out = tx;
	return 0;
}

const char *loom_ckpt_tx_dir(const struct loom_ckpt_tx *tx)
{
	return tx->tmp;
}

void loom_ckpt_tx_free(struct loom_ckpt_tx *tx)
{
	if (!tx)
		return;
	if (!tx->renamed)
		rm_tree(tx->tmp);
	free(tx->state_extra);
	free(tx);
}

/* Open data file f of the save in tmpdir for writing slices into it, after
 * checking that it is the one write_begin made for this very table: its
 * size and header (processes whose tables differ would tear it). */
static int open_data_file(const char *tmpdir, const struct loom_ckpt_save *s, int f,
			  char *path, size_t np, int *fd, uint64_t *base, struct loom_err *err)
{
	char *hdr, *got = NULL;
	size_t hlen;
	uint64_t dlen;
	struct stat sb;
	int rc;
	snprintf(path, np, "%s/%s", tmpdir, data_file[f]);
	if ((rc = data_header(s, f, path, &hdr, &hlen, &dlen, err)) < 0)
		return rc;
	*fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (*fd < 0 || fstat(*fd, &sb) < 0) {
		rc = loom_err_errno(err, LOOM_EIO, errno, "cannot open '%s'", path);
		goto out;
	}
	if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != hlen + dlen) {
		rc = loom_err_set(err, LOOM_EINVAL, "%s: %lld bytes, but this tensor table makes "
				  "%" PRIu64 " (not the file loom_ckpt_write_begin made for it)",
				  path, (long long)sb.st_size, hlen + dlen);
		goto out;
	}
	if (!(got = malloc(hlen))) {
		rc = loom_err_set(err, LOOM_ENOMEM, "out of memory");
		goto out;
	}
	rc = loom_pread_all(*fd, got, hlen, 0);
	if (rc == -1)
		rc = loom_err_errno(err, LOOM_EIO, errno, "cannot read '%s'", path);
	else if (rc < 0 || memcmp(got, hdr, hlen))
		rc = loom_err_set(err, LOOM_EINVAL, "%s: its header is not this tensor table's (the "
				  "processes' tables differ)", path);
	*base = hlen;
out:
	if (rc < 0 && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	free(got);
	free(hdr);
	return rc;
}

struct pieces {
	struct loom_ckpt_piece *p;
	size_t n, cap;
	struct loom_ckpt_piece *last[2];	/* each file's latest piece */
};

/* pwrite bytes [off, off + len) of data file f from src, as a piece of its
 * own or, right after the previous one, as more of it. */
static int put_slice(struct pieces *pc, int f, int fd, const char *path, uint64_t off,
		     const void *src, uint64_t len, struct loom_err *err)
{
	if (!len)
		return 0;
	int rc = loom_pwrite_all(fd, src, len, (off_t)off);
	if (rc < 0)
		return loom_err_errno(err, LOOM_EIO, -rc, "cannot write '%s' at byte %" PRIu64,
				      path, off);
	struct loom_ckpt_piece *last = pc->last[f];
	if (last && last->off + last->len == off) {
		last->crc = loom_crc32c(last->crc, src, len);
		last->len += len;
		return 0;
	}
	if (pc->n == pc->cap)
		return loom_err_set(err, LOOM_EINVAL, "checkpoint: more than %zu pieces (give "
				    "LOOM_CKPT_MAX_PIECES of the table)", pc->cap);
	last = pc->last[f] = &pc->p[pc->n++];
	memset(last, 0, sizeof *last);	/* padding too: it may travel as bytes */
	last->file = f;
	last->off = off;
	last->len = len;
	last->crc = loom_crc32c(0, src, len);
	return 0;
}

static uint64_t numel(const struct loom_ckpt_tensor *t)
{
	uint64_t n = 1;
	for (int d = 0; d < t->ndim; d++)
		n *= (uint64_t)t->shape[d];
	return n;
}

/* The data files of a temp step directory open for slices, checked once. */
struct loom_ckpt_slices {
	struct loom_ckpt_save s;	/* the caller's, borrowed until finish */
	int nf;				/* data files: 1, or 2 with the moments */
	int fd[2];
	uint64_t base[2];		/* where each file's data starts */
	char path[2][PATH_MAX + 64];
};

int loom_ckpt_slices_open(const char *tmpdir, const struct loom_ckpt_save *s,
			  struct loom_ckpt_slices **out, struct loom_err *err)
{
	int rc;
	*out = NULL;
	if ((rc = check_save_table(s, err)) < 0)
		return rc;
	struct loom_ckpt_slices *w = calloc(1, sizeof *w);
	if (!w)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	w->s = *s;
	w->nf = s->adam_m ? 2 : 1;
	w->fd[0] = w->fd[1] = -1;
	for (int f = 0; f < w->nf; f++)
		if ((rc = open_data_file(tmpdir, s, f, w->path[f], sizeof w->path[f], &w->fd[f],
					 &w->base[f], err)) < 0) {
			loom_ckpt_slices_finish(w, NULL);
			return rc;
		}
	*out = w;
	return 0;
}

int loom_ckpt_slices_put(struct loom_ckpt_slices *w, const uint64_t *lo, const uint64_t *hi,
			 float *const *adam_m, float *const *adam_v,
			 struct loom_ckpt_piece *pieces, size_t *npieces, struct loom_err *err)
{
	const struct loom_ckpt_save *s = &w->s;
	struct pieces pc = {pieces, 0, *npieces, {NULL, NULL}};
	uint64_t at[2] = {w->base[0], w->base[1]};
	int rc;
	*npieces = 0;
	if (!lo != !hi)
		return loom_err_set(err, LOOM_EINVAL, "checkpoint: slices need both lo and hi");
	if (w->nf == 2 && !adam_m) {
		adam_m = s->adam_m;
		adam_v = s->adam_v;
	}
	/* the header checked the shapes: no sizes overflow */
	for (size_t i = 0; i < s->n_tensors; i++) {
		const struct loom_ckpt_tensor *t = &s->tensors[i];
		const uint64_t n = numel(t), nb = n * sizeof(float);
		const uint64_t a = lo ? lo[i] : 0, b = hi ? hi[i] : n;
		if (a > b || b > n)
			return loom_err_set(err, LOOM_EINVAL, "checkpoint: slice [%" PRIu64 ", %"
					    PRIu64 ") of '%s' is not within its %" PRIu64
					    " elements", a, b, t->name, n);
		const float *src[3] = { t->data, w->nf == 2 ? adam_m[i] : NULL,
					w->nf == 2 ? adam_v[i] : NULL };
		for (int k = 0; k < 2 * w->nf - 1; k++) {
			const int f = k ? LOOM_CKPT_OPTIMIZER_FILE : LOOM_CKPT_MODEL_FILE;
			if (a < b && !src[k])
				return loom_err_set(err, LOOM_EINVAL, "checkpoint: missing AdamW "
						    "moments for '%s'", t->name);
			if ((rc = put_slice(&pc, f, w->fd[f], w->path[f], at[f] + a * sizeof(float),
					    src[k] ? src[k] + a : NULL, (b - a) * sizeof(float),
					    err)) < 0)
				return rc;
			at[f] += nb;
		}
	}
	*npieces = pc.n;
	return 0;
}

int loom_ckpt_slices_put_runs(struct loom_ckpt_slices *w, const struct loom_ckpt_run *r,
			      size_t nr, struct loom_ckpt_piece *pieces, size_t *npieces,
			      struct loom_err *err)
{
	const struct loom_ckpt_save *s = &w->s;
	struct pieces pc = {pieces, 0, *npieces, {NULL, NULL}};
	uint64_t *at = malloc(sizeof *at * (s->n_tensors + 1)); /* tensor i's bytes in the model file */
	int rc = 0;
	*npieces = 0;
	if (!at)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	at[0] = 0;
	for (size_t i = 0; i < s->n_tensors; i++)
		at[i + 1] = at[i] + numel(&s->tensors[i]) * sizeof(float);
	for (size_t k = 0; rc == 0 && k < nr; k++, r++) {
		const struct loom_ckpt_tensor *t = r->tensor < s->n_tensors ? &s->tensors[r->tensor] : NULL;
		const uint64_t n = t ? numel(t) : 0, nb = n * sizeof(float);
		if (!t || r->lo > n || r->n > n - r->lo) {
			rc = loom_err_set(err, LOOM_EINVAL, "checkpoint: run [%" PRIu64 ", +%" PRIu64
					  ") of tensor %zu is not within the table", r->lo, r->n,
					  r->tensor);
			break;
		}
		const float *src[3] = { r->w, r->m, r->v };
		/* model: tensor i's data; optimizer: its exp_avg, then its exp_avg_sq */
		const uint64_t off[3] = { w->base[0] + at[r->tensor], w->base[1] + 2 * at[r->tensor],
					  w->base[1] + 2 * at[r->tensor] + nb };
		for (int j = 0; rc == 0 && j < 2 * w->nf - 1; j++) {
			const int f = j ? LOOM_CKPT_OPTIMIZER_FILE : LOOM_CKPT_MODEL_FILE;
			if (r->n && !src[j])
				rc = loom_err_set(err, LOOM_EINVAL, "checkpoint: missing %s for a run "
						  "of '%s'", j ? "AdamW moments" : "weights", t->name);
			else
				rc = put_slice(&pc, f, w->fd[f], w->path[f],
					       off[j] + r->lo * sizeof(float), src[j],
					       r->n * sizeof(float), err);
		}
	}
	free(at);
	if (rc == 0)
		*npieces = pc.n;
	return rc;
}

int loom_ckpt_slices_finish(struct loom_ckpt_slices *w, struct loom_err *err)
{
	int rc = 0;
	if (!w)
		return 0;
	for (int f = 0; f < w->nf; f++) {
		if (w->fd[f] < 0)
			continue;
		if (err && rc == 0 && fsync(w->fd[f]) < 0)
			rc = loom_err_errno(err, LOOM_EIO, errno, "cannot sync '%s'", w->path[f]);
		if (close(w->fd[f]) < 0 && err && rc == 0)
			rc = loom_err_errno(err, LOOM_EIO, errno, "cannot write '%s'", w->path[f]);
	}
	free(w);
	return rc;
}

int loom_ckpt_write_slices(const char *tmpdir, const struct loom_ckpt_save *s,
			   const uint64_t *lo, const uint64_t *hi, struct loom_ckpt_piece *pieces,
			   size_t *npieces, struct loom_err *err)
{
	struct loom_ckpt_slices *w;
	size_t cap = *npieces;
	*npieces = 0;
	int rc = loom_ckpt_slices_open(tmpdir, s, &w, err);
	if (rc < 0)
		return rc;
	rc = loom_ckpt_slices_put(w, lo, hi, NULL, NULL, pieces, &cap, err);
	int rc2 = loom_ckpt_slices_finish(w, rc < 0 ? NULL : err);
	if (rc == 0 && (rc = rc2) == 0)
		*npieces = cap;
	return rc;
}

static int by_file_offset(const void *a, const void *b)
{
	const struct loom_ckpt_piece *x = a, *y = b;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* The pieces of every process must tile each data file's data exactly;
 * their CRCs combine, in file order after the header's, into the file's. */
static int combine_pieces(struct loom_ckpt_tx *tx, const struct loom_ckpt_piece *pieces,
			  size_t n, struct loom_err *err)
{
	struct loom_ckpt_piece *p = malloc((n ? n : 1) * sizeof *p);
	char path[PATH_MAX + 64];
	int rc = 0;
	if (!p)
		return loom_err_set(err, LOOM_ENOMEM, "out of memory");
	for (size_t k = 0; k < n; k++)
		if (pieces[k].file < 0 || pieces[k].file >= tx->nfiles) {
			free(p);
			return loom_err_set(err, LOOM_EINVAL, "%s: piece %zu is of file %d, not of "
					    "this save's %s", tx->tmp, k, pieces[k].file,
					    tx->nfiles == 2 ? "model and optimizer" : "model");
		}
	memcpy(p, pieces, n * sizeof *p);
	qsort(p, n, sizeof *p, by_file_offset);
	size_t k = 0;
	for (int f = 0; f < tx->nfiles && rc == 0; f++) {
		uint64_t at = tx->hlen[f];
		uint32_t crc = tx->hcrc[f];
		snprintf(path, sizeof path, "%s/%s", tx->tmp, data_file[f]);
		for (; k < n && p[k].file == f && rc == 0; k++) {
			if (!p[k].len)
				continue;
			if (p[k].off > tx->size[f] || p[k].len > tx->size[f] - p[k].off)
				rc = loom_err_set(err, LOOM_EFORMAT, "%s: a piece at byte %" PRIu64
						  " of %" PRIu64 " bytes ends past the file's %"
						  PRIu64 " bytes", path, p[k].off, p[k].len,
						  tx->size[f]);
			else if (p[k].off > at)
				rc = loom_err_set(err, LOOM_EFORMAT, "%s: bytes %" PRIu64 "..%" PRIu64
						  " were written by no process (a gap in the pieces "
						  "at byte %" PRIu64 ")", path, at, p[k].off, at);
			else if (p[k].off < at)
				rc = loom_err_set(err, LOOM_EFORMAT, "%s: the pieces overlap at byte %"
						  PRIu64 " (bytes %" PRIu64 "..%" PRIu64 " are "
						  "written twice)", path, p[k].off, p[k].off,
						  at < p[k].off + p[k].len ? at : p[k].off + p[k].len);
			else {
				crc = loom_crc32c_combine(crc, p[k].crc, p[k].len);
				at += p[k].len;
			}
		}
		if (rc == 0 && at != tx->size[f])
			rc = loom_err_set(err, LOOM_EFORMAT, "%s: bytes %" PRIu64 "..%" PRIu64
					  " were written by no process (a gap in the pieces at "
					  "byte %" PRIu64 ")", path, at, tx->size[f], at);
		tx->sums[f].sum.bytes = tx->size[f];
		tx->sums[f].sum.crc32c = crc;
	}
	free(p);
	return rc;
}

/* After a save as a name (tx->link): the other LINK-* directories, and the
 * debris of interrupted saves as it (.LINK-*.tmp-*, .LINK-*.old-*). */
static int prune_as(const struct loom_ckpt_tx *tx, struct loom_err *err)
{
	DIR *d = opendir(tx->dir);
	struct dirent *e;
	char path[PATH_MAX + 320];
	size_t ll = strlen(tx->link);
	int removed = 0, rc;
	if (!d)
		return loom_err_errno(err, LOOM_EIO, errno, "cannot open '%s'", tx->dir);
	while ((e = readdir(d))) {
		const char *n = e->d_name + (e->d_name[0] == '.');
		if (strncmp(n, tx->link, ll) || n[ll] != '-' || strspn(n + ll + 1, "0123456789") < 8 ||
		    !strcmp(e->d_name, tx->name) ||
		    (n != e->d_name && !strstr(n, ".tmp-") && !strstr(n, ".old-")))
			continue;
		snprintf(path, sizeof path, "%s/%s", tx->dir, e->d_name);
		if ((rc = rm_tree_err(path, err))) {
			closedir(d);
			return rc;
		}
		removed++;
	}
	closedir(d);
	return removed ? loom_fsync_dir_of(tx->dir, err) : 0;
}

/* The temp step directory, complete and synced, becomes DIR/NAME
 * (replacing one of the same name), the link switched to it, then the
 * pruning of a save. */
static int install(struct loom_ckpt_tx *tx, char *out_path, size_t out_len,
		   struct loom_err *err)
{
	char final[PATH_MAX + 64], old[PATH_MAX + 64];
	int rc;
	/* Replace an existing directory of the same step: move it aside. */
	snprintf(final, sizeof final, "%s/%s", tx->dir, tx->name);
	old[0] = '\0';
	if (rename(tx->tmp, final) < 0) {
		if (errno != ENOTEMPTY && errno != EEXIST)
			return loom_err_errno(err, LOOM_EIO, errno, "cannot rename to '%s'", final);
		snprintf(old, sizeof old, "%s/.%s.old-XXXXXX", tx->dir, tx->name);
		if (!mkdtemp(old) || rename(final, old) < 0 || rename(tx->tmp, final) < 0)
			return loom_err_errno(err, LOOM_EIO, errno, "cannot replace '%s'", final);
	}
	tx->renamed = 1;
	if ((rc = loom_fsync_dir_of(tx->dir, err)) < 0)
		return rc;
	if ((rc = switch_link(tx->dir, tx->link, tx->name, err)) < 0)
		return rc;
	if (old[0])
		rm_tree(old);
	if (out_path && out_len)
		snprintf(out_path, out_len, "%s", final);
	if (strcmp(tx->link, "latest")) /* saved as a name: its earlier ones go */
		return prune_as(tx, err);
	/* always: removes debris of interrupted saves; with keep, old steps */
	if ((rc = loom_ckpt_prune(tx->dir, tx->keep, err)) < 0)
		return rc;
	return 0;
}

int loom_ckpt_write_commit(struct loom_ckpt_tx *tx, const struct loom_ckpt_piece *pieces,
			   size_t n, char *out_path, size_t out_len, struct loom_err *err)
{
	char path[PATH_MAX + 64];
	int rc;
	if (tx->renamed)
		return loom_err_set(err, LOOM_EINVAL, "%s/%s: already committed", tx->dir,
				    tx->name);
	if ((rc = combine_pieces(tx, pieces, n, err)) < 0)
		return rc;
	json_t *sj = state_json(&tx->state, tx->state_extra, tx->sums, tx->nsums, err);
	if (!sj)
		return err->code;
	snprintf(path, sizeof path, "%s/state.json", tx->tmp);
	rc = write_json(path, sj, NULL, err);
	json_decref(sj);
	if (rc < 0 || (rc = loom_fsync_dir_of(tx->tmp, err)) < 0)
		return rc;
	return install(tx, out_path, out_len, err);
}

int loom_ckpt_write(const struct loom_ckpt_save *s, char *out_path, size_t n,
		    struct loom_err *err)
{
	struct loom_ckpt_tx *tx;
	struct loom_ckpt_piece p[2];	/* whole tensors: one piece a file */
	size_t np = 2;
	int rc = loom_ckpt_write_begin(s, &tx, err);
	if (rc == 0)
		rc = loom_ckpt_write_slices(loom_ckpt_tx_dir(tx), s, NULL, NULL, p, &np, err);
	if (rc == 0)
		rc = loom_ckpt_write_commit(tx, p, np, out_path, n, err);
	loom_ckpt_tx_free(tx);
	return rc;
}

/* File src as dst: a hard link, or where the file system makes none, a
 * copy (synced, renamed into place). */
static int link_or_copy(const char *src, const char *dst, struct loom_err *err)
{
	if (link(src, dst) == 0)
		return 0;
	if (errno != EPERM && errno != EXDEV && errno != EMLINK && errno != ENOTSUP)
		return loom_err_errno(err, LOOM_EIO, errno, "cannot link '%s' to '%s'", src, dst);
	int fd = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return loom_err_errno(err, LOOM_EIO, errno, "cannot open '%s'", src);
	struct loom_outfile o;
	char buf[1 << 16];
	ssize_t k;
	int rc = loom_outfile_open(&o, dst);
	while (rc == 0 && (k = read(fd, buf, sizeof buf)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		rc = k < 0 ? loom_err_errno(&o.err, LOOM_EIO, errno, "cannot read '%s'", src)
			   : loom_outfile_write(&o, buf, (size_t)k);
	}
	close(fd);
	return loom_outfile_finish(&o, rc, err);
}

int loom_ckpt_write_copy(const char *src, const struct loom_ckpt_save *s, char *out_path,
			 size_t n, struct loom_err *err)
{
	struct loom_ckpt_state st;
	char from[PATH_MAX + 300], to[PATH_MAX + 300];
	int rc = loom_ckpt_read_state(src, &st, err);
	if (rc < 0)
		return rc;
	if (st.step != s->state.step || st.samples != s->state.samples ||
	    st.tokens != s->state.tokens || st.data_seq != s->state.data_seq ||
	    st.best.step != s->state.best.step || strcmp(st.best.metric, s->state.best.metric))
		return loom_err_set(err, LOOM_EINVAL, "%s: not the checkpoint of step %" PRIu64
				    " this save would write (its state.json differs)", src,
				    s->state.step);
	struct loom_ckpt_tx *tx;
	DIR *d = NULL;
	if ((rc = tx_open(s, &tx, err)) < 0)
		return rc;
	snprintf(to, sizeof to, "%s/state.json", tx->tmp);
	if (!(d = opendir(src)))
		rc = loom_err_errno(err, LOOM_EIO, errno, "cannot open '%s'", src);
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(from, sizeof from, "%s/%s", src, e->d_name);
		snprintf(to, sizeof to, "%s/%s", tx->tmp, e->d_name);
		rc = link_or_copy(from, to, err);
	}
	if (d)
		closedir(d);
	if (rc == 0 && (rc = loom_fsync_dir_of(to, err)) == 0)
		rc = install(tx, out_path, n, err);
	loom_ckpt_tx_free(tx);
	return rc;
}

static int parse_step_name(const char *s, uint64_t *step)
{
	if (strncmp(s, "step-", 5) != 0 || strlen(s + 5) < 8)
		return LOOM_EFORMAT;
	uint64_t v = 0;
	for (const char *p = s + 5; *p; p++) {
		if (*p < '0' || *p > '9' || v > (UINT64_MAX - 9) / 10)
			return LOOM_EFORMAT;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*step = v;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int loom_ckpt_prune(const char *dir, unsigned keep, struct loom_err *err)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	uint64_t *steps = NULL, latest_step = UINT64_MAX, st;
	size_t n = 0, cap = 0;
	int removed = 0, rc;
	char path[PATH_MAX], link[PATH_MAX];
	if (!d)
		return loom_err_errno(err, LOOM_EIO, errno, "cannot open '%s'", dir);
	snprintf(path, sizeof path, "%s/latest", dir);
	ssize_t ll = readlink(path, link, sizeof link - 1);
	if (ll > 0) {
		link[ll] = '\0';
		const char *base = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
		if (parse_step_name(base, &st) == 0)
			latest_step = st;
	}
	while ((e = readdir(d))) {
		if (parse_step_name(e->d_name, &st) == 0) {
			if (n == cap) {
				cap = cap ? 2 * cap : 16;
				uint64_t *q = realloc(steps, cap * sizeof *q);
				if (!q) {
					closedir(d);
					free(steps);
					return loom_err_set(err, LOOM_ENOMEM, "out of memory");
				}
				steps = q;
			}
			steps[n++] = st;
		} else if (e->d_name[0] == '.' && strncmp(e->d_name, ".step-", 6) == 0 &&
			   (strstr(e->d_name, ".tmp-") || strstr(e->d_name, ".old-"))) {
			/* debris of an interrupted save */
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
			if (rm_tree(path) == 0)
				removed++;
		}
	}
	closedir(d);
	qsort(steps, n, sizeof *steps, cmp_u64);
	for (size_t i = 0; keep && i + keep < n; i++) {
		if (steps[i] == latest_step)
			continue;
		snprintf(path, sizeof path, "%s/" STEP_FMT, dir, steps[i]);
		if ((rc = rm_tree_err(path, err))) {
			free(steps);
			return rc;
		}
		removed++;
	}
	free(steps);
	if (removed)
		loom_fsync_dir_of(dir, err);
	return removed;
}

int loom_ckpt_dir_lock(const char *dir, struct loom_ckpt_dir_lock *l, struct loom_err *err)
{
	struct stat st;
	struct loom_err e = { 0 };
	memset(l, 0, sizeof *l);
	l->fd = -1;
	if (strlen(dir) >= sizeof l->made)
		return loom_err_set(err, LOOM_ERANGE, "%s: the path is too long", dir);
	if (stat(dir, &st) && errno == ENOENT)
		snprintf(l->made, sizeof l->made, "%s", dir);
	if (loom_mkdir_p(dir, &e))
		return loom_err_set(err, e.code, "%s: %s", dir, e.msg);
	snprintf(l->path, sizeof l->path, "%s/.loom-train.lock", dir);
	int rc = loom_lock_take(l->path, &l->fd, &e);
	if (rc == LOOM_EBUSY)
		loom_err_set(err, rc, "%s: another loom-train is writing checkpoints there (it holds "
			     "'%s')", dir, l->path);
	else if (rc)
		loom_err_set(err, rc, "%s: %s", dir, e.msg);
	if (rc)
		loom_ckpt_dir_unlock(l);
	return rc;
}

void loom_ckpt_dir_unlock(struct loom_ckpt_dir_lock *l)
{
	if (l->path[0])
		loom_lock_release(l->path, &l->fd);
	if (l->made[0])
		rmdir(l->made); /* fails, harmlessly, once a checkpoint is in it */
	l->path[0] = l->made[0] = '\0';
}

/* --- loading ---------------------------------------------------------------- */

int loom_ckpt_resolve(const char *path, char *out, size_t n, struct loom_err *err)
{
	char buf[PATH_MAX + 32], real[PATH_MAX];
	struct stat sb;
	if (stat(path, &sb) < 0)
		return loom_err_errno(err, LOOM_EIO, errno, "checkpoint '%s'", path);
	if (!S_ISDIR(sb.st_mode))
		return loom_err_set(err, LOOM_EINVAL,
				    "checkpoint '%s' is not a directory", path);
	snprintf(buf, sizeof buf, "%s/config.json", path);
	if (stat(buf, &sb) == 0) {
		snprintf(buf, sizeof buf, "%s", path);
	} else {
		snprintf(buf, sizeof buf, "%s/latest", path);
		if (stat(buf, &sb) < 0) {
			static const char *const parts[] = { "model.safetensors", "state.json",
							     "optimizer.safetensors" };
			for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
				snprintf(buf, sizeof buf, "%s/%s", path, parts[i]);
				if (stat(buf, &sb) == 0)
					return loom_err_set(err, LOOM_EFORMAT,
							    "%s: config.json is missing", path);
			}
			return loom_err_set(err, LOOM_EINVAL,
					    "'%s' is not a checkpoint (no config.json, no latest)",
					    path);
		}
	}
	if (!realpath(buf, real))
		return loom_err_errno(err, LOOM_EIO, errno, "checkpoint '%s'", buf);
	if (strlen(real) >= n)
		return loom_err_set(err, LOOM_EINVAL, "path too long: '%s'", real);
	memcpy(out, real, strlen(real) + 1);
	return 0;
}

static json_t *parse_json(const char *path, const char *buf, size_t len,
			  struct loom_err *err)
{
	json_error_t je;
	json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		loom_err_set(err, LOOM_EFORMAT, "%s: line %d: %s", path, je.line, loom_json_reason(je.text));
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		loom_err_set(err, LOOM_EFORMAT, "%s: not a JSON object", path);
		return NULL;
	}
	return j;
}

static json_t *load_json(const char *path, struct loom_err *err)
{
	char *buf;
	size_t len;
	if (loom_file_read_bounded(path, LOOM_FILE_MAX_CONFIG, &buf, &len, err) < 0)
		return NULL;
	json_t *j = parse_json(path, buf, len, err);
	free(buf);
	return j;
}

/* state.json's "files": {"NAME": {"bytes": N, "crc32c": "8 hex digits"}} */
static int parse_files(json_t *j, const char *path, struct loom_ckpt *c, struct loom_err *err)
{
	json_t *f = json_object_get(j, "files"), *v;
	const char *name;
	if (!f)
		return 0;
	if (!json_is_object(f) || json_object_size(f) > MAX_FILES)
		return loom_err_set(err, LOOM_EFORMAT,
				    "%s: 'files' is not an object of at most %d files", path,
				    MAX_FILES);
	json_object_foreach(f, name, v) {
		struct recorded *r = &c->files[c->n_files];
		json_t *crc = json_object_get(v, "crc32c");
		const char *hex = json_is_string(crc) ? json_string_value(crc) : "";
		if (!*name || strchr(name, '/') || strlen(name) >= sizeof r->name ||
		    !strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "state.json"))
			return loom_err_set(err, LOOM_EFORMAT, "%s: files: bad file name '%s'",
					    path, name);
		if (json_get_u64(json_object_get(v, "bytes"), &r->bytes) < 0 ||
		    strlen(hex) != 8 || strspn(hex, "0123456789abcdef") != 8)
			return loom_err_set(err, LOOM_EFORMAT,
					    "%s: files.%s needs \"bytes\" and \"crc32c\" (8 hex "
					    "digits)", path, name);
		snprintf(r->name, sizeof r->name, "%s", name);
		r->crc32c = (uint32_t)strtoul(hex, NULL, 16);
		c->n_files++;
	}
	return 0;
}

static const struct recorded *recorded(const struct loom_ckpt *c, const char *name)
{
	for (size_t i = 0; i < c->n_files; i++)
		if (!strcmp(c->files[i].name, name))
			return &c->files[i];
	return NULL;
}

/* Compare a file's size and CRC-32C with what state.json records. */
static int check_sum(const struct loom_ckpt *c, const struct recorded *r, uint64_t bytes,
		     uint32_t crc, struct loom_err *err)
{
	if (bytes != r->bytes)
		return loom_err_set(err, LOOM_EFORMAT,
				    "%s/%s: %llu bytes, but state.json records %llu: the file "
				    "was truncated or changed after the checkpoint was written",
				    c->dir, r->name, (unsigned long long)bytes,
				    (unsigned long long)r->bytes);
	if (crc != r->crc32c)
		return loom_err_set(err, LOOM_EFORMAT,
				    "%s/%s: checksum mismatch (CRC-32C %08" PRIx32 ", state.json "
				    "records %08" PRIx32 "): the file is corrupt",
				    c->dir, r->name, crc, r->crc32c);
	return 0;
}

static void crc_block(void *crc, const void *block, size_t n)
{
	*(uint32_t *)crc = loom_crc32c(*(uint32_t *)crc, block, n);
}

/* Read a file of the checkpoint (a regular file: never more bytes than
 * state.json records) and compare it with the record. */
static int verify_file(const struct loom_ckpt *c, const struct recorded *r, struct loom_err *err)
{
	char p[PATH_MAX + 96];
	uint64_t size, bytes = 0;
	uint32_t crc = 0;
	snprintf(p, sizeof p, "%s/%s", c->dir, r->name);
	int fd = loom_file_open_regular(p, UINT64_MAX, &size, err);
	if (fd < 0)
		return fd;
	int rc = loom_fd_blocks(fd, p, size == r->bytes ? size : 0, crc_block, &crc, &bytes, err);
	close(fd);
	if (rc < 0)
		return rc;
	return check_sum(c, r, size == r->bytes ? bytes : size, crc, err);
}

/* A loom checkpoint's file must be in its directory: a symbolic link that
 * resolves outside it is refused (HuggingFace directories, without
 * state.json, are exempt: its cache links snapshots/X/FILE to ../../blobs).
 * A missing file or a dangling link is left for the open to report. */
static int check_inside(const char *dir, const char *name, struct loom_err *err)
{
	char p[PATH_MAX + 96], real[PATH_MAX];
	struct stat sb;
	size_t n = strlen(dir);
	snprintf(p, sizeof p, "%s/%s", dir, name);
	if (lstat(p, &sb) < 0 || !S_ISLNK(sb.st_mode) || !realpath(p, real))
		return 0;
	if (strncmp(real, dir, n) == 0 && real[n] == '/')
		return 0;
	return loom_err_set(err, LOOM_EFORMAT,
			    "%s: %s is a symbolic link to '%s', outside the checkpoint", dir, name,
			    real);
}

/* check_inside for every other file a loom checkpoint may hold (state.json
 * itself is checked before it is read). */
static int check_all_inside(const struct loom_ckpt *c, struct loom_err *err)
{
	static const char *const names[] = { "config.json", "model.safetensors",
					     "optimizer.safetensors", "vocab.json", "merges.txt",
					     "vocab.txt", "tokenizer_config.json" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (check_inside(c->dir, names[i], err) < 0)
			return err->code;
	for (size_t i = 0; i < c->n_files; i++)
		if (check_inside(c->dir, c->files[i].name, err) < 0)
			return err->code;
	return 0;
}

static int parse_state(json_t *j, const char *path, struct loom_ckpt_state *st,
		       struct loom_err *err)
{
	json_t *d = json_object_get(j, "data"), *r = json_object_get(j, "rng");
	uint64_t v[6];
	memset(st, 0, sizeof *st);
	if (json_get_u64(json_object_get(j, "step"), &st->step) < 0)
		return loom_err_set(err, LOOM_EFORMAT, "%s: 'step' missing or not a count", path);
	json_t *x;
	if ((x = json_object_get(j, "samples")) && json_get_u64(x, &st->samples) < 0)
		return loom_err_set(err, LOOM_EFORMAT, "%s: 'samples' is not a count", path);
	if ((x = json_object_get(j, "tokens")) && json_get_u64(x, &st->tokens) < 0)
		return loom_err_set(err, LOOM_EFORMAT, "%s: 'tokens' is not a count", path);
	if (r) {
		if (!json_is_array(r) || json_array_size(r) != 4)
			return loom_err_set(err, LOOM_EFORMAT, "%s: 'rng' must be 4 values", path);
		for (size_t i = 0; i < 4; i++)
			if (json_get_u64(json_array_get(r, i), &st->rng[i]) < 0)
				return loom_err_set(err, LOOM_EFORMAT, "%s: rng[%zu] is not a u64",
						    path, i);
	}
	if ((x = json_object_get(j, "best"))) {
		json_t *m = json_object_get(x, "metric"), *v = json_object_get(x, "value");
		if (!json_is_object(x) || !json_is_string(m) ||
		    json_string_length(m) >= sizeof st->best.metric || !json_string_length(m) ||
		    !json_is_number(v) || !isfinite(json_number_value(v)) ||
		    json_get_u64(json_object_get(x, "step"), &st->best.step) < 0)
			return loom_err_set(err, LOOM_EFORMAT, "%s: 'best' is not {\"metric\": NAME, "
					    "\"value\": a finite number, \"step\": a count}", path);
		snprintf(st->best.metric, sizeof st->best.metric, "%s", json_string_value(m));
		st->best.value = json_number_value(v);
	}
	if (d) {
		static const char *const keys[6] = {"next_seq", "epoch", "seed", "batch",
						    "seq_len", "world"};
		if (!json_is_object(d))
			return loom_err_set(err, LOOM_EFORMAT, "%s: 'data' is not an object", path);
		for (int i = 0; i < 6; i++) {
			v[i] = 0;
			x = json_object_get(d, keys[i]);
			if (x && (json_get_u64(x, &v[i]) < 0 || (i != 0 && i != 2 && v[i] > UINT32_MAX)))
				return loom_err_set(err, LOOM_EFORMAT, "%s: data.%s is out of range",
						    path, keys[i]);
		}
		st->data_seq = v[0];
		st->data_epoch = (uint32_t)v[1];
		st->data_seed = v[2];
		st->data_batch = (uint32_t)v[3];
		st->data_seq_len = (uint32_t)v[4];
		st->data_world = (uint32_t)v[5];
		/* all zero: no frame consumed yet (a checkpoint of step 0);
		 * else the frames' shape, as loom-feed --resume needs it */
		if (v[0] || v[3] || v[4] || v[5])
			for (int i = 3; i < 6; i++)
				if (v[i] < (i == 4 ? 2u : 1u))
					return loom_err_set(err, LOOM_EFORMAT,
							    "%s: data.%s is %llu, expected at least %d "
							    "(the frames' %s: data.next_seq %llu, batch "
							    "%llu, seq_len %llu, world %llu)", path,
							    keys[i], (unsigned long long)v[i],
							    i == 4 ? 2 : 1,
							    i == 3 ? "records per frame" :
							    i == 4 ? "record length" : "rank count",
							    (unsigned long long)v[0],
							    (unsigned long long)v[3],
							    (unsigned long long)v[4],
							    (unsigned long long)v[5]);
	}
	return 0;
}

int loom_ckpt_read_state(const char *path, struct loom_ckpt_state *st, struct loom_err *err)
{
	char dir[PATH_MAX], p[PATH_MAX + 32];
	int rc = loom_ckpt_resolve(path, dir, sizeof dir, err);
	if (rc < 0)
		return rc;
	if (check_inside(dir, "state.json", err) < 0)
		return err->code;
	snprintf(p, sizeof p, "%s/state.json", dir);
	json_t *j = load_json(p, err);
	if (!j)
		return err->code;
	rc = parse_state(j, p, st, err);
	json_decref(j);
	return rc;
}

/* The tensor `name` of the file: under that name, without the family's
 * prefix (a file of HF's bare model class), or under its alias. */
static const struct loom_st_tensor *st_find(const struct loom_ckpt_arch *a,
					    const struct loom_st *st, const char *name)
{
	char buf[160];
	const size_t pl = a->prefix ? strlen(a->prefix) : 0;
	for (int k = 0; k < 2; k++) {
		const struct loom_st_tensor *t = loom_st_find(st, name);
		if (!t && pl && strncmp(name, a->prefix, pl) == 0)
			t = loom_st_find(st, name + pl);
		if (t || k || !a->alias || !(name = a->alias(name, buf, sizeof buf)))
			return t;
	}
	return NULL;
}

/* Check the tensors that config.json implies exist with their shapes. */
static int check_config_vs_tensors(struct loom_ckpt *c)
{
	const struct loom_ckpt_arch *a = c->arch;
	const int64_t nl = a->n_layers(c->hf);
	struct loom_ckpt_expect want[32];
	char keys[2048], got[160], need[160];
	for (int64_t l = -1; l <= nl; l++) {
		size_t cnt = a->expect(c->hf, l, want, sizeof want / sizeof *want, keys,
				       sizeof keys);
		for (size_t i = 0; i < cnt; i++) {
			const struct loom_ckpt_expect *w = &want[i];
			const struct loom_st_tensor *t = st_find(a, c->model, w->name);
			if (l == nl) {
				if (t)
					return loom_err_set(&c->err, LOOM_EFORMAT,
							    "%s: has tensor '%s' but config.json says "
							    "%s %lld", c->model_path, w->name,
							    a->layers_key, (long long)nl);
				continue;
			}
			if (!t && w->optional)
				continue;
			if (!t)
				return loom_err_set(&c->err, LOOM_EFORMAT,
						    "%s: tensor '%s' is missing (config.json: "
						    "%s %lld)", c->model_path, w->name,
						    a->layers_key, (long long)nl);
			int okay = t->ndim == w->ndim;
			for (int d = 0; okay && d < w->ndim; d++)
				okay = t->shape[d] == (uint64_t)w->shape[d];
			if (!okay) {
				shape_str(got, sizeof got, t->ndim, NULL, t->shape);
				shape_str(need, sizeof need, w->ndim, w->shape, NULL);
				return loom_err_set(&c->err, LOOM_EFORMAT,
						    "%s: tensor '%s' is %s but config.json (%s) "
						    "needs %s", c->model_path, w->name, got, w->keys,
						    need);
			}
			if (t->dtype != LOOM_ST_F32)
				return loom_err_set(&c->err, LOOM_EFORMAT,
						    "%s: tensor '%s' is %s; loom reads F32 only",
						    c->model_path, w->name, loom_st_dtype_name(t->dtype));
		}
	}
	return 0;
}

struct loom_ckpt *loom_ckpt_open(const char *path, const struct loom_ckpt_arch *arch,
				 unsigned flags, struct loom_err *err)
{
	struct loom_ckpt *c = calloc(1, sizeof *c);
	char p[PATH_MAX + 96];
	char *raw = NULL;
	size_t rawlen;
	json_t *cfg = NULL;
	struct stat sb;
	const int verify = !(flags & LOOM_CKPT_NO_VERIFY);
	if (!c) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	c->arch = arch;
	if (!(c->hf = calloc(1, arch->hf_size))) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		goto fail;
	}
	if (loom_ckpt_resolve(path, c->dir, sizeof c->dir, err) < 0)
		goto fail;
	/* state.json first: it records the other files' sizes and checksums */
	snprintf(p, sizeof p, "%s/state.json", c->dir);
	if (stat(p, &sb) == 0) {
		if (check_inside(c->dir, "state.json", err) < 0)
			goto fail;
		json_t *sj = load_json(p, err);
		if (!sj)
			goto fail;
		int rc = parse_state(sj, p, &c->state, err);
		if (rc == 0)
			rc = parse_files(sj, p, c, err);
		json_decref(sj);
		if (rc < 0)
			goto fail;
		c->has_state = 1;
		if (check_all_inside(c, err) < 0)
			goto fail;
	}
	for (size_t i = 0; i < c->n_files; i++) {
		snprintf(p, sizeof p, "%s/%s", c->dir, c->files[i].name);
		if (stat(p, &sb) < 0) {
			loom_err_set(err, LOOM_EFORMAT, "%s: %s is missing (state.json lists it)",
				     c->dir, c->files[i].name);
			goto fail;
		}
	}
	/* the tokenizer's files are read later by the vocabulary loaders, which
	 * take pipes a user names: here they must be regular files */
	static const char *const tok_files[] = { "vocab.json", "merges.txt", "vocab.txt",
						 "tokenizer.json", "tokenizer_config.json" };
	for (size_t i = 0; i < sizeof tok_files / sizeof *tok_files; i++) {
		snprintf(p, sizeof p, "%s/%s", c->dir, tok_files[i]);
		if (stat(p, &sb) == 0 && !S_ISREG(sb.st_mode)) {
			loom_err_set(err, LOOM_EFORMAT, "'%s' is not a regular file", p);
			goto fail;
		}
	}
	snprintf(p, sizeof p, "%s/config.json", c->dir);
	if (loom_file_read_bounded(p, LOOM_FILE_MAX_CONFIG, &raw, &rawlen, err) < 0)
		goto fail;
	const struct recorded *r = recorded(c, "config.json");
	if (verify && r && check_sum(c, r, rawlen, loom_crc32c(0, raw, rawlen), err) < 0)
		goto fail;
	if (!(cfg = parse_json(p, raw, rawlen, err)))
		goto fail;
	json_t *mt = json_object_get(cfg, "model_type");
	if (mt && (!json_is_string(mt) || strcmp(json_string_value(mt), arch->model_type))) {
		if (json_is_string(mt))
			loom_err_set(err, LOOM_EFORMAT, "%s: model_type is \"%s\", not \"%s\"", p,
				     json_string_value(mt), arch->model_type);
		else
			loom_err_set(err, LOOM_EFORMAT, "%s: model_type is not \"%s\"", p,
				     arch->model_type);
		goto fail;
	}
	if (arch->hf_parse(cfg, p, c->hf, err) < 0)
		goto fail;
	json_t *lv = json_object_get(cfg, "loom_vocab");
	if (json_is_string(lv) && !(c->vocab_name = strdup(json_string_value(lv)))) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		goto fail;
	}
	json_t *loom = json_object_get(cfg, "loom");
	if (loom) {
		if (!json_is_object(loom)) {
			loom_err_set(err, LOOM_EFORMAT, "%s: 'loom' is not an object", p);
			goto fail;
		}
		c->loom_config = json_dumps(loom, JSON_COMPACT | JSON_PRESERVE_ORDER);
		if (!c->loom_config) {
			loom_err_set(err, LOOM_ENOMEM, "out of memory");
			goto fail;
		}
		if (!c->has_state) { /* loom writes every part; HF dirs have no state */
			loom_err_set(err, LOOM_EFORMAT, "%s: state.json is missing", c->dir);
			goto fail;
		}
	}
	/* the optimizer's moments are verified when loaded (loom-eval never
	 * reads them: two thirds of a checkpoint's bytes) */
	c->verify = verify;
	for (size_t i = 0; verify && i < c->n_files; i++)
		if (strcmp(c->files[i].name, "config.json") &&
		    strcmp(c->files[i].name, "optimizer.safetensors") &&
		    verify_file(c, &c->files[i], err) < 0)
			goto fail;
	snprintf(c->model_path, sizeof c->model_path, "%s/model.safetensors", c->dir);
	if (stat(c->model_path, &sb) < 0) {
		/* a PyTorch-only HuggingFace directory: loom reads no pickle */
		char bin[sizeof c->model_path];
		snprintf(bin, sizeof bin, "%s/pytorch_model.bin", c->dir);
		loom_err_set(err, LOOM_EFORMAT, "%s: model.safetensors is missing%s", c->dir,
			     stat(bin, &sb) ? "" : " (it has pytorch_model.bin, which loom does not read: "
			     "convert it, loom-train(1) HUGGINGFACE WEIGHTS)");
		goto fail;
	}
	if (!(c->model = loom_st_open(c->model_path, err)))
		goto fail;
	if (check_config_vs_tensors(c) < 0) {
		*err = c->err;
		goto fail;
	}
	snprintf(p, sizeof p, "%s/optimizer.safetensors", c->dir);
	if (stat(p, &sb) == 0 && !(c->optim = loom_st_open(p, err)))
		goto fail;
	char m[PATH_MAX + 32];
	snprintf(p, sizeof p, "%s/vocab.json", c->dir);
	snprintf(m, sizeof m, "%s/merges.txt", c->dir);
	if (stat(p, &sb) == 0 && stat(m, &sb) == 0 &&
	    asprintf(&c->vocab_spec, "%s,%s", p, m) < 0) {
		c->vocab_spec = NULL;
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		goto fail;
	}
	free(raw);
	json_decref(cfg);
	return c;
fail:
	free(raw);
	json_decref(cfg);
	loom_ckpt_free(c);
	return NULL;
}

void loom_ckpt_free(struct loom_ckpt *c)
{
	if (!c)
		return;
	free(c->vocab_spec);
	free(c->vocab_name);
	loom_st_free(c->model);
	loom_st_free(c->optim);
	free(c->loom_config);
	free(c->hf);
	free(c);
}

const char *loom_ckpt_dir(const struct loom_ckpt *c)
{
	return c->dir;
}

const void *loom_ckpt_hf(const struct loom_ckpt *c)
{
	return c->hf;
}

const struct loom_ckpt_state *loom_ckpt_state(const struct loom_ckpt *c)
{
	return &c->state;
}

const char *loom_ckpt_loom_config(const struct loom_ckpt *c)
{
	return c->loom_config;
}

const char *loom_ckpt_vocab_spec(const struct loom_ckpt *c)
{
	return c->vocab_spec;
}

const char *loom_ckpt_vocab_name(const struct loom_ckpt *c)
{
	return c->vocab_spec ? c->vocab_name : NULL;
}

int loom_ckpt_open_sidecar(struct loom_ckpt *c, const char *name, struct loom_st **st)
{
	char p[PATH_MAX + 64];
	struct stat sb;
	*st = NULL;
	if (c->has_state && check_inside(c->dir, name, &c->err) < 0)
		return c->err.code;
	snprintf(p, sizeof p, "%s/%s", c->dir, name);
	if (stat(p, &sb) < 0) {
		if (recorded(c, name))
			return loom_err_set(&c->err, LOOM_EFORMAT, "%s: %s is missing (state.json lists it)",
					    c->dir, name);
		return 0;
	}
	if (!(*st = loom_st_open(p, &c->err)))
		return c->err.code;
	return 0;
}

int loom_ckpt_has_state(const struct loom_ckpt *c)
{
	return c->has_state;
}

int loom_ckpt_has_checksums(const struct loom_ckpt *c)
{
	return c->n_files > 0;
}

int loom_ckpt_has_optimizer(const struct loom_ckpt *c)
{
	return c->optim != NULL;
}

const char *loom_ckpt_error(const struct loom_ckpt *c)
{
	return c->err.msg;
}

/* Index of the first NaN or infinity in x[0..n), SIZE_MAX if none (one
 * branch-free pass first: checkpoints are large and almost always clean). */
static size_t first_non_finite(const float *x, size_t n)
{
	const uint32_t *u = (const uint32_t *)x;
	uint32_t any = 0;
	for (size_t i = 0; i < n; i++)
		any |= (u[i] & 0x7f800000u) == 0x7f800000u;
	if (!any)
		return SIZE_MAX;
	for (size_t i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return i;
	return SIZE_MAX;
}

/* Elements [lo, hi) (hi UINT64_MAX: to the end) of the file's tensor f
 * (called `name`) to `to`, checked finite. */
static int copy_run(struct loom_ckpt *c, const struct loom_st *st, const struct loom_st_tensor *f,
		    const char *name, float *to, uint64_t lo, uint64_t hi)
{
	const uint64_t n = f->nbytes / sizeof(float);
	if (hi == UINT64_MAX)
		hi = n;
	if (lo > hi || hi > n)
		return loom_err_set(&c->err, LOOM_EINVAL,
				    "%s: slice [%" PRIu64 ", %" PRIu64 ") of tensor '%s' is not "
				    "within its %" PRIu64 " elements", loom_st_name(st), lo, hi,
				    name, n);
	loom_st_copy(st, f, lo * sizeof(float), to, (hi - lo) * sizeof(float));
	size_t bad = first_non_finite(to, (size_t)(hi - lo));
	if (bad != SIZE_MAX)
		return loom_err_set(&c->err, LOOM_EFORMAT,
				    "%s: the checkpoint holds non-finite values: tensor '%s' "
				    "element %" PRIu64 " is %g", loom_st_name(st), name, lo + bad,
				    (double)to[bad]);
	return 0;
}

/* Check the file's tensor `name` against the caller's t, then copy its
 * elements [lo, hi) (all of them when hi is UINT64_MAX) to dst + lo,
 * touching only those bytes of the file's mapping (and not keeping them:
 * loom_st_copy). */
static int copy_tensor(struct loom_ckpt *c, const struct loom_st *st,
		       const struct loom_ckpt_tensor *t, const char *name, float *dst,
		       uint64_t lo, uint64_t hi, const struct loom_st_tensor **used)
{
	const struct loom_st_tensor *f = st_find(c->arch, st, name);
	char got[160], need[160];
	if (!f)
		return loom_err_set(&c->err, LOOM_EFORMAT, "%s: tensor '%s' is missing",
				    loom_st_name(st), name);
	int okay = f->ndim == t->ndim && f->dtype == LOOM_ST_F32;
	for (int d = 0; okay && d < t->ndim; d++)
		okay = t->shape[d] >= 0 && f->shape[d] == (uint64_t)t->shape[d];
	if (!okay) {
		shape_str(got, sizeof got, f->ndim, NULL, f->shape);
		shape_str(need, sizeof need, t->ndim, t->shape, NULL);
		return loom_err_set(&c->err, LOOM_EFORMAT,
				    "%s: tensor '%s' is %s %s but the model needs F32 %s",
				    loom_st_name(st), name, loom_st_dtype_name(f->dtype), got, need);
	}
	if (used)
		*used = f;
	return copy_run(c, st, f, name, dst + lo, lo, hi);
}

int loom_ckpt_has_tensor(const struct loom_ckpt *c, const char *name)
{
	return st_find(c->arch, c->model, name) != NULL;
}

static int skipped(const struct loom_ckpt_arch *a, const char *name, const char *const *skip)
{
	const size_t pl = a->prefix ? strlen(a->prefix) : 0;
	if (pl && strncmp(name, a->prefix, pl) == 0)
		name += pl;
	for (; skip && *skip; skip++)
		if (strncmp(name, *skip, strlen(*skip)) == 0)
			return 1;
	return 0;
}

void loom_ckpt_skip(struct loom_ckpt *c, const char *const *skip)
{
	c->skip = skip;
}

/* The loads: whole tensors when lo and hi are NULL. */
static int load_model(struct loom_ckpt *c, const struct loom_ckpt_tensor *t, size_t n,
		      const uint64_t *lo, const uint64_t *hi)
{
	const size_t nf = loom_st_count(c->model);
	char *used = calloc(nf + 1, 1);
	int rc = 0;
	if (!used)
		return loom_err_set(&c->err, LOOM_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const struct loom_st_tensor *f;
		if ((rc = copy_tensor(c, c->model, &t[i], t[i].name, t[i].data, lo ? lo[i] : 0,
				      hi ? hi[i] : UINT64_MAX, &f)) < 0)
			goto out;
		used[f - loom_st_get(c->model, 0)] = 1;
	}
	for (size_t k = 0; k < nf; k++) {
		const char *fn = loom_st_get(c->model, k)->name;
		if (!used[k] && !(c->arch->ignored && c->arch->ignored(fn)) &&
		    !skipped(c->arch, fn, c->skip)) {
			rc = loom_err_set(&c->err, LOOM_EFORMAT,
					  "%s: tensor '%s' is not part of the model",
					  c->model_path, fn);
			goto out;
		}
	}
out:
	free(used);
	return rc;
}

int loom_ckpt_load_model(struct loom_ckpt *c, const struct loom_ckpt_tensor *t, size_t n)
{
	return load_model(c, t, n, NULL, NULL);
}

int loom_ckpt_load_model_slices(struct loom_ckpt *c, const struct loom_ckpt_tensor *t,
				size_t n, const uint64_t *lo, const uint64_t *hi)
{
	if (!lo != !hi)
		return loom_err_set(&c->err, LOOM_EINVAL, "%s: slices need both lo and hi",
				    c->model_path);
	return load_model(c, t, n, lo, hi);
}

int loom_ckpt_load_optimizer_slices(struct loom_ckpt *c, const struct loom_ckpt_tensor *t,
				    size_t n, float *const *adam_m, float *const *adam_v,
				    const uint64_t *lo, const uint64_t *hi)
{
	char name[512];
	int rc;
	if (!c->optim)
		return loom_err_set(&c->err, LOOM_EINVAL,
				    "%s: no optimizer.safetensors (weights-only checkpoint)", c->dir);
	if (!lo != !hi)
		return loom_err_set(&c->err, LOOM_EINVAL, "%s: slices need both lo and hi",
				    loom_st_name(c->optim));
	/* read and checked once per open, not at every call (loom_dist_load
	 * calls once per bucket: the whole file each time) */
	const struct recorded *r = recorded(c, "optimizer.safetensors");
	if (c->verify && r && !c->optim_verified && verify_file(c, r, &c->err) < 0)
		return c->err.code;
	c->optim_verified = 1;
	if (loom_st_count(c->optim) != 2 * n)
		return loom_err_set(&c->err, LOOM_EFORMAT,
				    "%s/optimizer.safetensors: %zu tensors, the model needs %zu",
				    c->dir, loom_st_count(c->optim), 2 * n);
	for (size_t i = 0; i < n; i++) {
		const uint64_t a = lo ? lo[i] : 0, b = hi ? hi[i] : UINT64_MAX;
		snprintf(name, sizeof name, "%s.exp_avg", t[i].name);
		if ((rc = copy_tensor(c, c->optim, &t[i], name, adam_m[i], a, b, NULL)) < 0)
			return rc;
		snprintf(name, sizeof name, "%s.exp_avg_sq", t[i].name);
		if ((rc = copy_tensor(c, c->optim, &t[i], name, adam_v[i], a, b, NULL)) < 0)
			return rc;
	}
	return 0;
}

int loom_ckpt_load_runs(struct loom_ckpt *c, const struct loom_ckpt_tensor *t, size_t n,
			const struct loom_ckpt_run *r, size_t nr, int optimizer)
{
	char name[512];
	uint64_t *none = calloc(n ? n : 1, sizeof *none);
	float **d = calloc(n ? n : 1, sizeof *d);
	const struct loom_st_tensor **f = calloc(n ? n : 1, sizeof *f);
	int rc = none && d && f ? 0 : loom_err_set(&c->err, LOOM_ENOMEM, "out of memory");
	for (size_t i = 0; i < n && d; i++)
		d[i] = t[i].data;
	/* every check of a load, no element copied: the runs come next */
	if (!rc)
		rc = load_model(c, t, n, none, none);
	if (!rc && optimizer)
		rc = loom_ckpt_load_optimizer_slices(c, t, n, d, d, none, none);
	for (int k = 0; k < 1 + 2 * !!optimizer && !rc; k++) {
		const struct loom_st *st = k ? c->optim : c->model;
		for (size_t i = 0; i < n; i++) { /* found by load_model: the names are there */
			snprintf(name, sizeof name, "%s%s", t[i].name,
				 k == 0 ? "" : k == 1 ? ".exp_avg" : ".exp_avg_sq");
			f[i] = st_find(c->arch, st, name);
		}
		for (size_t j = 0; j < nr && !rc; j++) {
			float *to = k == 0 ? r[j].w : k == 1 ? r[j].m : r[j].v;
			if (r[j].tensor >= n || r[j].lo > UINT64_MAX - r[j].n)
				rc = loom_err_set(&c->err, LOOM_EINVAL, "%s: run %zu is not within the "
						  "table", loom_st_name(st), j);
			else
				rc = copy_run(c, st, f[r[j].tensor], t[r[j].tensor].name, to, r[j].lo,
					      r[j].lo + r[j].n);
		}
	}
	free(none);
	free(d);
	free(f);
	return rc;
}

int loom_ckpt_load_optimizer(struct loom_ckpt *c, const struct loom_ckpt_tensor *t,
			     size_t n, float *const *adam_m, float *const *adam_v)
{
	return loom_ckpt_load_optimizer_slices(c, t, n, adam_m, adam_v, NULL, NULL);
}

int loom_ckpt_feed_resume(const char *path, const struct loom_feed_opts *o,
			  const struct loom_feed *f, uint64_t *seq, struct loom_err *err)
{
	struct loom_ckpt_state st;
	int rc = loom_ckpt_read_state(path, &st, err);
	if (rc < 0)
		return rc;
	*seq = st.data_seq;
	if (!st.data_batch)
		return 0;
	uint64_t G = (uint64_t)o->batch * o->world;
	if (st.data_seed != o->seed)
		return loom_err_set(err, LOOM_EINVAL, "the checkpoint was trained on --seed %llu, not %llu",
				    (unsigned long long)st.data_seed, (unsigned long long)o->seed);
	uint64_t w = st.data_world ? st.data_world : 1, g = (uint64_t)st.data_batch * w;
	if (g != G)
		return loom_err_set(err, LOOM_EINVAL, "the checkpoint's global batch is %llu records "
				    "(%u x %u), this one %llu", (unsigned long long)g,
				    st.data_batch, st.data_world, (unsigned long long)G);
	/* seq_len 0: a squad-features manifest gives the records' length */
	if (st.data_seq_len && o->seq_len && st.data_seq_len != o->seq_len)
		return loom_err_set(err, LOOM_EINVAL, "the checkpoint was trained on --seq %u, not %u",
				    st.data_seq_len - 1, o->seq_len - 1);
	struct loom_feed_stats fs;
	loom_feed_get_stats(f, &fs);
	uint64_t held = st.data_seq * st.data_batch * w;
	if (st.samples > held)
		return loom_err_set(err, LOOM_EFORMAT, "%s: state.json disagrees with itself: 'samples' "
				    "is %llu, but data.next_seq %llu batches of %u x %llu hold %llu", path,
				    (unsigned long long)st.samples, (unsigned long long)st.data_seq,
				    st.data_batch, (unsigned long long)w, (unsigned long long)held);
	/* the epoch of the last batch taken, or (a state written between
	 * frames) of the next one */
	if (fs.per_epoch && st.data_epoch != st.data_seq / fs.per_epoch &&
	    (!st.data_seq || st.data_epoch != (st.data_seq - 1) / fs.per_epoch))
		return loom_err_set(err, LOOM_EFORMAT, "%s: state.json disagrees with itself: data.epoch "
				    "is %u, but data.next_seq %llu is in epoch %llu of this manifest (%llu "
				    "batches an epoch)", path, st.data_epoch, (unsigned long long)st.data_seq,
				    (unsigned long long)(st.data_seq / fs.per_epoch),
				    (unsigned long long)fs.per_epoch);
	return 0;
}
