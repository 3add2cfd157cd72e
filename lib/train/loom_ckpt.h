/*
 * loom_ckpt.h - training checkpoints: a directory per step, written
 * atomically, loadable by HuggingFace (GPT2LMHeadModel.from_pretrained,
 * BertForQuestionAnswering.from_pretrained).
 *
 *   DIR/step-00000100/model.safetensors      weights, HF GPT-2 names/layouts
 *                    /optimizer.safetensors  AdamW moments: NAME.exp_avg,
 *                                            NAME.exp_avg_sq (optional)
 *                    /config.json            HF keys (GPT-2, BERT) + "loom": {...}
 *                    /state.json             step, samples, RNG, data position
 *                    /vocab.json, merges.txt the tokenizer (optional; BERT:
 *                                            vocab.txt, tokenizer_config.json)
 *                    /sparsity.safetensors   a side file: RigL masks and
 *                                            state (optional, see
 *                                            loom_ckpt_save.sidecar)
 *   DIR/latest -> step-00000100               (relative symlink)
 *
 * See formats/checkpoint.md.  Saving writes every file into a fresh
 * DIR/.step-NNNNNNNN.tmp-XXXXXX directory, fsyncs each file and the
 * directory, renames it to step-NNNNNNNN, fsyncs DIR, then switches
 * `latest` atomically (a new symlink under a temp name renamed over it)
 * and finally prunes older step directories beyond `keep`.  A crash at any
 * point leaves either the old or the new checkpoint, never a torn one.
 * A save `as` a name (loom_ckpt_save.as: loom-train --keep-best's
 * DIR/best -> best-NNNNNNNN) is written the same way beside the steps.
 * state.json records the size and CRC-32C of every other file, computed
 * while writing; loading compares them (a flipped byte is found), refuses
 * a loom checkpoint missing any part, and refuses NaN/infinite values.
 *
 * Several processes (MPI ranks, weight sharding) each holding a slice of
 * every tensor write one checkpoint together, the same bytes one process
 * writes (loom_ckpt_write_begin / write_slices / write_commit below): each
 * pwrites its slices into the two data files, and the files' checksums
 * are combined from the CRCs of the pieces each wrote.  A process killed
 * at any point leaves the previous checkpoint.  Loading by slices
 * (loom_ckpt_load_model_slices, load_optimizer_slices) reads only a
 * process's slices, so a checkpoint resumes on any number of processes.
 * A slice that is not one range of each tensor (tensor parallelism's
 * columns) is written and read as runs (struct loom_ckpt_run). 
 * loom_ckpt knows no MPI: the caller moves the temp directory's name and
 * the pieces (plain structs) between processes.
 *
 * The API is generic over the model: the caller passes its tensor table
 * (name, shape, float data) in HuggingFace naming and its family (struct
 * loom_ckpt_arch: config.json's keys and the tensors they imply); loom_ckpt
 * does not know the model code.  Loading validates everything before
 * copying: the safetensors structure (lib/train/loom_safetensors.h),
 * config.json's HF keys against the tensors actually present (for GPT-2
 * wte = [vocab_size, n_embd], wpe = [n_positions, n_embd], n_layer blocks
 * of GPT-2 shapes), and then each of the caller's tensors by name, dtype
 * F32 and shape.
 *
 * Ownership: the caller's tensor table and data are borrowed during a
 * call only.  A loaded struct loom_ckpt owns its files' mappings (pages
 * copied out are dropped from the process's memory again).  A struct
 * loom_ckpt_tx (a save in progress) owns its temp directory until commit
 * renames it into place; loom_ckpt_tx_free removes it otherwise.
 * Errors: 0 or negative LOOM_E*; one line naming the checkpoint directory
 * or file and the reason, e.g. "ckpt/step-00000100/model.safetensors:
 * tensor 'transformer.wte.weight' is [128, 64] but config.json (n_embd 32,
 * vocab_size 128) needs [128, 32]", "ckpt/.step-00000100.tmp-Ab12Cd/
 * optimizer.safetensors: bytes 4096..8192 were written by no process (a
 * gap in the pieces at byte 4096)".  Thread-safety: the default
 * (loom_common.h); write_slices calls of disjoint slices into one temp
 * directory may run at once (processes or threads), each with its own
 * pieces array.
 */
#ifndef LOOM_CKPT_H
#define LOOM_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "loom_common.h"
#include "loom_safetensors.h"

/* One tensor of the caller's model (F32, row-major, HF layout). */
struct loom_ckpt_tensor {
	const char *name;	/* e.g. "transformer.h.0.attn.c_attn.weight" */
	int ndim;
	int64_t shape[LOOM_ST_MAX_DIMS];
	float *data;		/* save: read from; load: written to */
};

struct json_t;			/* jansson's */

/* One tensor that a model family's config.json implies. */
struct loom_ckpt_expect {
	char name[96];		/* loom's name, e.g. "transformer.h.0.ln_1.weight" */
	int ndim;
	int64_t shape[2];
	int optional;		/* 1: checked only when the file has it (a head) */
	const char *keys;	/* the config keys of its shape, for messages:
				 * "n_embd 32, vocab_size 128, n_positions 4" */
};

/* A model family in HuggingFace's layout: what loom_ckpt needs to know of
 * it to write config.json and to check a file's tensors against it.  One
 * per family, beside the model: loom_gpt_ckpt_arch (loom_gpt.h, GPT-2),
 * loom_bert_ckpt_arch (loom_bert.h, BERT).  `hf` below is the family's own
 * struct of config.json's numbers (hf_size bytes). */
struct loom_ckpt_arch {
	const char *model_type;	/* config.json's "model_type": "gpt2", "bert" */
	/* the base model's prefix, which a file of HF's bare model class
	 * (GPT2Model, BertModel) lacks: "transformer.", "bert." */
	const char *prefix;
	const char *layers_key;	/* config.json's layer count: "n_layer" */
	size_t hf_size;
	/* Before saving: 0, or LOOM_EINVAL when the numbers make no model. */
	int (*hf_check)(const void *hf, struct loom_err *err);
	/* Set config.json's HF keys of *hf on the empty object cfg, in the
	 * order HF writes them: 0, or LOOM_ENOMEM. */
	int (*hf_write)(const void *hf, struct json_t *cfg);
	/* config.json (model_type already checked) -> *hf (zeroed): 0, or
	 * LOOM_EFORMAT naming path and the key. */
	int (*hf_parse)(struct json_t *cfg, const char *path, void *hf, struct loom_err *err);
	int64_t (*n_layers)(const void *hf);
	/* The tensors implied by *hf outside the layers (layer -1) or of layer
	 * l (0 .. n_layers; the check refuses a layer n_layers) into out[max];
	 * returns their count.  keys points into scratch[nk] if formatted. */
	size_t (*expect)(const void *hf, int64_t layer, struct loom_ckpt_expect *out, size_t max,
			 char *scratch, size_t nk);
	/* 1 for a tensor that a file may hold and the model never reads (HF
	 * buffers, a tied decoder, a pooler); may be NULL. */
	int (*ignored)(const char *name);
	/* Another name the tensor `name` has in older files (BERT's LayerNorm
	 * gamma/beta for weight/bias) into buf[n], or NULL; may be NULL. */
	const char *(*alias)(const char *name, char *buf, size_t n);
};

/* state.json: where training stands. */
struct loom_ckpt_state {
	uint64_t step;		/* optimizer steps done */
	uint64_t samples;	/* records consumed (all ranks) */
	uint64_t tokens;	/* tokens trained on */
	uint64_t rng[4];	/* the trainer's RNG state */
	/* data position, from the batch frames (lib/data/loom_batch.h) */
	uint64_t data_seq;	/* next batch sequence number to consume */
	uint32_t data_epoch;	/* epoch of the last frame consumed */
	uint64_t data_seed;	/* the feeder's seed */
	uint32_t data_batch, data_seq_len, data_world;
	/* loom-train --keep-best: the best evaluation so far, state.json's
	 * "best": {"metric": "eval/f1", "value": 0.81, "step": 40}
	 * (metric[0] == 0: none; the value finite) */
	struct loom_ckpt_best {
		char metric[32];
		double value;
		uint64_t step;
	} best;
};

/* The tokenizer a model was trained with, stored beside it as HuggingFace
 * expects: GPT2Tokenizer's vocab.json + merges.txt (loom_vocab.h's
 * loom_vocab_render_gpt2) and bos/eos_token_id in config.json;
 * BertTokenizer's vocab.txt + tokenizer_config.json
 * (loom_bert_ckpt_vocab). */
#define LOOM_CKPT_VOCAB_FILES 2
struct loom_ckpt_vocab {
	const char *name;		/* what --vocab said, e.g. "gpt2" */
	struct {
		const char *name;	/* "vocab.json"; NULL: unused */
		const char *data;
		size_t len;
	} files[LOOM_CKPT_VOCAB_FILES];
	int64_t eos_token_id;		/* <|endoftext|>, -1 if none */
};

struct loom_ckpt_save {
	const char *dir;	/* DIR (created if missing) */
	const struct loom_ckpt_tensor *tensors;
	size_t n_tensors;
	/* AdamW moments parallel to `tensors` (same shapes), or NULL. */
	float *const *adam_m;
	float *const *adam_v;
	const struct loom_ckpt_arch *arch;	/* the model family */
	const void *hf;			/* its config.json numbers */
	const char *loom_config_json;	/* loom's resolved config (a JSON
					 * object), stored under "loom";
					 * may be NULL */
	struct loom_ckpt_state state;	/* state.step names the directory */
	const char *state_extra_json;	/* optional JSON object merged into
					 * state.json under "extra" */
	const struct loom_ckpt_vocab *vocab;	/* NULL: no tokenizer files */
	unsigned keep;			/* keep newest N step dirs; 0 = all */
	/* NULL: DIR/step-NNNNNNNN, `latest` switched to it, older steps
	 * pruned.  A name such as "best" (letters only, neither "step" nor
	 * "latest"): DIR/NAME-NNNNNNNN, written the same way, the symlink
	 * DIR/NAME switched to it as `latest` is, then the other NAME-*
	 * directories removed; `latest` and the steps are left as they are. */
	const char *as;
	/* An extra safetensors file of the model's own (e.g.
	 * "sparsity.safetensors"), checksummed in state.json like the
	 * others; HuggingFace reads only model.safetensors.  NULL: none. */
	const char *sidecar_name;
	const struct loom_st_tensor *sidecar;
	size_t n_sidecar;
	const char *const *sidecar_meta;	/* __metadata__ key, value, ..., NULL */
};

/* Write DIR/step-NNNNNNNN atomically, switch DIR/latest, prune.  An
 * existing directory of the same step is replaced.  On success the final
 * step directory is written to out_path (if non-NULL, n bytes).  (One
 * process holding whole tensors: loom_ckpt_write_begin, write_slices of
 * everything, commit.) */
int loom_ckpt_write(const struct loom_ckpt_save *s, char *out_path, size_t n,
		    struct loom_err *err);

/* The checkpoint s would write, made of the directory src that holds it
 * already under another name (the same step and state: a checkpoint of
 * this very step saved as "best", now saved as the step, or the other way
 * round): its files hard-linked (copied where the file system links none)
 * into the temp step directory, then committed, linked and pruned as
 * loom_ckpt_write does; nothing of the model is written twice.  s's
 * tensors are not read: only dir, as, keep and state.  LOOM_EINVAL if
 * src's state.json is not s's state. */
int loom_ckpt_write_copy(const char *src, const struct loom_ckpt_save *s, char *out_path,
			 size_t n, struct loom_err *err);

/* --- one checkpoint written by several processes (weight sharding) ---
 *
 * Each of N processes ("ranks") holds a slice of every tensor: elements
 * [lo[i], hi[i]) of tensor i in row-major order (possibly empty; the
 * slices of all ranks cover each tensor exactly once), at data + lo[i]
 * (data, adam_m[i] and adam_v[i] point at element 0, only the slice need
 * be valid).  The result is the directory loom_ckpt_write makes, byte for
 * byte, whatever N (resume on another N, read on one machine):
 *
 *   rank 0:     loom_ckpt_write_begin(&s, &tx, &err)     every file but
 *               the tensor data and state.json, the two data files sized
 *               to their final length; broadcast loom_ckpt_tx_dir(tx)
 *   every rank: loom_ckpt_write_slices(tmpdir, &s, lo, hi, pieces, &n,
 *               &err) pwrites its slices into the two files, fsyncs, and
 *               describes them in a few pieces; gather the pieces
 *   rank 0:     loom_ckpt_write_commit(tx, all, total, out, len, &err)
 *               checks they tile both files, makes their checksums from
 *               the pieces' (no file is read back), writes state.json and
 *               commits as loom_ckpt_write does; loom_ckpt_tx_free(tx)
 *
 * The ranks must see the temp directory under the same path (a shared file
 * system, the same working directory if s.dir is relative) and pass the
 * same table (names, shapes, step: the file's header is compared).  A rank
 * killed at any point leaves the previous checkpoint and `latest` as they
 * were; the temp directory is removed by loom_ckpt_tx_free (a failed
 * save) or, after a crash, by the next save's pruning. */

/* loom_ckpt_piece.file */
enum { LOOM_CKPT_MODEL_FILE = 0, LOOM_CKPT_OPTIMIZER_FILE = 1 };

/* `len` bytes at byte `off` of the file `file` (model.safetensors,
 * optimizer.safetensors) of CRC-32C `crc`, written by one rank.  Plain
 * bytes (padding zeroed): send them as MPI_BYTE. */
struct loom_ckpt_piece {
	int file;
	uint64_t off, len;
	uint32_t crc;
};

/* The most pieces one write_slices call makes for a table of n tensors
 * (a run of tensors whole in the file's order is one piece). */
#define LOOM_CKPT_MAX_PIECES(n) (3 * (size_t)(n))

struct loom_ckpt_tx;

/* Rank 0: check the table as loom_ckpt_write does, create the temp step
 * directory DIR/.step-NNNNNNNN.tmp-XXXXXX and write into it everything but
 * the tensor data and state.json: the headers of model.safetensors and
 * (with moments) optimizer.safetensors, each file sized to its final
 * length, the side file, the tokenizer files, config.json.  *tx = NULL on
 * failure (nothing left behind). */
int loom_ckpt_write_begin(const struct loom_ckpt_save *s, struct loom_ckpt_tx **tx,
			  struct loom_err *err);
/* The temp step directory (for loom_ckpt_write_slices on every rank). */
const char *loom_ckpt_tx_dir(const struct loom_ckpt_tx *tx);
/* Every rank (rank 0 too): pwrite elements [lo[i], hi[i]) of every tensor
 * i of s (weights; moments if s->adam_m) into the files of tmpdir at the
 * places the whole-tensor layout gives them, fsync.  lo = hi = NULL: whole
 * tensors.  pieces[*npieces] on entry (LOOM_CKPT_MAX_PIECES(s->n_tensors)
 * is always enough); on return *npieces pieces describe what was written,
 * adjacent slices merged into one.  Refuses a slice outside its tensor and
 * a file whose size or header is not this table's (LOOM_EINVAL). */
int loom_ckpt_write_slices(const char *tmpdir, const struct loom_ckpt_save *s,
			   const uint64_t *lo, const uint64_t *hi,
			   struct loom_ckpt_piece *pieces, size_t *npieces,
			   struct loom_err *err);
/* The same in steps, for a process that writes its slices in several
 * sets (loom_dist: one a bucket, each with its own moments' addresses):
 * slices_open checks the table and both files once (as write_slices) and
 * keeps them open; each slices_put pwrites elements [lo[i], hi[i]) of
 * every tensor as write_slices does, the moments from adam_m[i],
 * adam_v[i] (NULL: s's own; an entry of an empty slice may be NULL) into
 * pieces[*npieces] (LOOM_CKPT_MAX_PIECES(s->n_tensors) per put is always
 * enough); slices_finish fsyncs and closes the files once and frees w
 * (err NULL: an abandoned write, nothing synced; w NULL: nothing).  s and
 * its tensor table are borrowed until finish.  write_slices is open, one
 * put, finish. */
struct loom_ckpt_slices;
int loom_ckpt_slices_open(const char *tmpdir, const struct loom_ckpt_save *s,
			  struct loom_ckpt_slices **w, struct loom_err *err);
int loom_ckpt_slices_put(struct loom_ckpt_slices *w, const uint64_t *lo, const uint64_t *hi,
			 float *const *adam_m, float *const *adam_v,
			 struct loom_ckpt_piece *pieces, size_t *npieces, struct loom_err *err);
int loom_ckpt_slices_finish(struct loom_ckpt_slices *w, struct loom_err *err);
/* A slice that is not one range of each tensor (tensor parallelism: a
 * rank's columns of a matrix are a run in every row) as runs: elements
 * [lo, lo + n) of tensor `tensor` of the table, read from w[0..n) (and,
 * with moments, m[0..n), v[0..n)): the process's own layout, not the
 * tensor's.  slices_put_runs pwrites r[0..nr) as slices_put does (pieces:
 * 3 a run is always enough; runs adjacent in a file merge into one). */
struct loom_ckpt_run {
	size_t tensor;
	uint64_t lo, n;
	float *w, *m, *v;
};
int loom_ckpt_slices_put_runs(struct loom_ckpt_slices *w, const struct loom_ckpt_run *r,
			      size_t nr, struct loom_ckpt_piece *pieces, size_t *npieces,
			      struct loom_err *err);
/* Rank 0, with the pieces of all ranks (any order): they must tile the
 * data of each file exactly, else LOOM_EFORMAT naming the file and the
 * byte where a gap or an overlap starts; the files' CRC-32C come from the
 * header's and the pieces' (loom_crc32c_combine).  Then state.json, fsync,
 * rename to DIR/step-NNNNNNNN (replacing one of the same step), switch
 * DIR/latest, prune to s->keep, as loom_ckpt_write; the step directory
 * into out_path (if non-NULL, out_len bytes).  A failure before the rename
 * leaves the previous checkpoint as it was. */
int loom_ckpt_write_commit(struct loom_ckpt_tx *tx, const struct loom_ckpt_piece *pieces,
			   size_t n, char *out_path, size_t out_len, struct loom_err *err);
/* Free tx (NULL: nothing); the temp directory is removed unless commit
 * renamed it into place. */
void loom_ckpt_tx_free(struct loom_ckpt_tx *tx);

/* Remove step directories of DIR beyond the newest `keep` (never the one
 * `latest` points to) and stale temp dirs.  Returns how many were removed
 * or a negative code. */
int loom_ckpt_prune(const char *dir, unsigned keep, struct loom_err *err);

/* A run's hold on its checkpoint directory (loom-train --save DIR): DIR
 * made when missing and DIR/.loom-train.lock taken (loom_lock_take), so
 * that two runs never remove each other's temporaries as debris.  The
 * kernel drops the lock when the process dies; loom_ckpt_dir_unlock
 * removes the file, and DIR when this hold made it and it is still empty.
 * Errors name DIR: "DIR: another loom-train is writing checkpoints there
 * (it holds 'DIR/.loom-train.lock')" (LOOM_EBUSY), or why DIR cannot be
 * made or locked; nothing is left held. */
struct loom_ckpt_dir_lock {
	char path[4200];	/* DIR/.loom-train.lock */
	int fd;			/* -1: not held */
	char made[4096];	/* DIR when this hold made it, else "" */
};
int loom_ckpt_dir_lock(const char *dir, struct loom_ckpt_dir_lock *l, struct loom_err *err);
void loom_ckpt_dir_unlock(struct loom_ckpt_dir_lock *l);

/* Resolve PATH to a step directory: PATH itself if it holds config.json,
 * else PATH/latest (resolved).  Writes it to out. */
int loom_ckpt_resolve(const char *path, char *out, size_t n, struct loom_err *err);

/* Read only state.json of the checkpoint at PATH (resolved as above). */
int loom_ckpt_read_state(const char *path, struct loom_ckpt_state *st,
			 struct loom_err *err);

/* loom-feed --resume PATH: the data position of the checkpoint's
 * state.json, checked against the feed f made with o: the same seed,
 * global batch (batch x world) and sequence length (LOOM_EINVAL when they
 * differ), and state.json against itself (samples within the batches taken,
 * data.epoch that of its batch: LOOM_EFORMAT).  *seq: the batch to start
 * at (0 for a state without a data position). */
struct loom_feed;
struct loom_feed_opts;
int loom_ckpt_feed_resume(const char *path, const struct loom_feed_opts *o,
			  const struct loom_feed *f, uint64_t *seq, struct loom_err *err);

struct loom_ckpt;

/* loom_ckpt_open flags: skip the checksum verification. */
#define LOOM_CKPT_NO_VERIFY 1u

/* Open and validate a checkpoint of the model family `arch` (resolved as
 * above; config.json's model_type, when present, must be arch's):
 * state.json (absent
 * in a directory made by HuggingFace: step 0, no checksums; required when
 * config.json has loom's "loom" object), every file state.json lists must
 * exist and, unless LOOM_CKPT_NO_VERIFY, have the size and CRC-32C it
 * records (optimizer.safetensors: checked by loom_ckpt_load_optimizer;
 * state.json without "files", written by an older loom, is read
 * unverified: see loom_ckpt_has_checksums), then config.json,
 * model.safetensors and the config-vs-tensors check,
 * optimizer.safetensors if present.  A missing part is named, e.g.
 * "ckpt/step-00000100: state.json is missing".  Returns NULL with the
 * message in err. */
struct loom_ckpt *loom_ckpt_open(const char *path, const struct loom_ckpt_arch *arch,
				 unsigned flags, struct loom_err *err);
void loom_ckpt_free(struct loom_ckpt *c);

const char *loom_ckpt_dir(const struct loom_ckpt *c);
/* config.json's numbers: the family's struct (arch->hf_size bytes). */
const void *loom_ckpt_hf(const struct loom_ckpt *c);
const struct loom_ckpt_state *loom_ckpt_state(const struct loom_ckpt *c);
/* loom's resolved config as compact JSON text, NULL if config.json has no
 * "loom" object (e.g. a checkpoint made by HuggingFace). */
const char *loom_ckpt_loom_config(const struct loom_ckpt *c);
int loom_ckpt_has_optimizer(const struct loom_ckpt *c);
/* "DIR/vocab.json,DIR/merges.txt" (a --vocab spec, loom_vocab_load_spec)
 * when the checkpoint holds its tokenizer, else NULL. */
const char *loom_ckpt_vocab_spec(const struct loom_ckpt *c);
/* config.json's "loom_vocab": the name it was trained with ("gpt2"), or NULL. */
const char *loom_ckpt_vocab_name(const struct loom_ckpt *c);
/* 1 if the checkpoint has a state.json (a loom checkpoint). */
int loom_ckpt_has_state(const struct loom_ckpt *c);
/* 1 if state.json records file checksums (verified at open unless
 * LOOM_CKPT_NO_VERIFY). */
int loom_ckpt_has_checksums(const struct loom_ckpt *c);

/* Copy the weights into the caller's table.  Every table entry must be in
 * model.safetensors (under its name, without the family's prefix, or its
 * alias) as F32 of exactly that shape and hold finite values only, and
 * every tensor in the file must be in the table (except those the
 * family's ignored() names: for the GPT HF's buffers "*.attn.bias",
 * "*.attn.masked_bias" and a tied "lm_head.weight"). */
int loom_ckpt_load_model(struct loom_ckpt *c, const struct loom_ckpt_tensor *t,
			 size_t n);
/* The loads that follow (of the model, its slices or runs) leave unread
 * the file's tensors whose names (without the family's prefix) start with
 * one of skip[] (NULL-terminated, borrowed until the next call or the
 * free; e.g. the head of another task); NULL: none. */
void loom_ckpt_skip(struct loom_ckpt *c, const char *const *skip);
/* The same checks (every table entry, every file tensor) but copying (and
 * checking finite) only elements [lo[i], hi[i]) of tensor i, to
 * t[i].data + lo[i]: a rank's slices (see loom_ckpt_write_slices); lo =
 * hi = NULL: everything.  Only the slices' pages of the file are read (the
 * process's memory does not grow by the file).  A slice outside its
 * tensor: LOOM_EINVAL. */
int loom_ckpt_load_model_slices(struct loom_ckpt *c, const struct loom_ckpt_tensor *t,
				size_t n, const uint64_t *lo, const uint64_t *hi);
/* 1 if model.safetensors holds the tensor `name` (as the load finds it). */
int loom_ckpt_has_tensor(const struct loom_ckpt *c, const char *name);
/* Copy AdamW moments (parallel arrays, as for saving; finite values only). */
int loom_ckpt_load_optimizer(struct loom_ckpt *c, const struct loom_ckpt_tensor *t,
			     size_t n, float *const *adam_m, float *const *adam_v);
/* The same for elements [lo[i], hi[i]) of each moment (as above). */
int loom_ckpt_load_optimizer_slices(struct loom_ckpt *c, const struct loom_ckpt_tensor *t,
				    size_t n, float *const *adam_m, float *const *adam_v,
				    const uint64_t *lo, const uint64_t *hi);
/* The checks of loom_ckpt_load_model_slices for table t[n] (the whole
 * tensors: names, shapes; data unused), copying only the runs r[0..nr)
 * (struct loom_ckpt_run: into r->w, and with optimizer the moments into
 * r->m, r->v): a rank that holds no tensor whole reads only its runs. */
int loom_ckpt_load_runs(struct loom_ckpt *c, const struct loom_ckpt_tensor *t, size_t n,
			const struct loom_ckpt_run *r, size_t nr, int optimizer);
const char *loom_ckpt_error(const struct loom_ckpt *c);
/* The side file NAME of the checkpoint (verified at open when state.json
 * lists it), opened and validated into *st (the caller frees it with
 * loom_st_free); *st = NULL and 0 when the checkpoint has no such file. */
int loom_ckpt_open_sidecar(struct loom_ckpt *c, const char *name, struct loom_st **st);

#endif
