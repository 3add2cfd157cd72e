/*
 * loom_ckpt.h - training checkpoints: a directory per step, written
 * atomically, loadable by HuggingFace (GPT2LMHeadModel.from_pretrained).
 *
 *   DIR/step-00000100/model.safetensors      weights, HF GPT-2 names/layouts
 *                    /optimizer.safetensors  AdamW moments: NAME.exp_avg,
 *                                            NAME.exp_avg_sq (optional)
 *                    /config.json            HF GPT-2 keys + "loom": {...}
 *                    /state.json             step, samples, RNG, data position
 *                    /vocab.json, merges.txt the tokenizer (optional)
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
 * state.json records the size and CRC-32C of every other file, computed
 * while writing; loading compares them (a flipped byte is found), refuses
 * a loom checkpoint missing any part, and refuses NaN/infinite values.
 *
 * The API is generic over the model: the caller passes its tensor table
 * (name, shape, float data) in HuggingFace GPT-2 naming; loom_ckpt does
 * not know the model code.  Loading validates everything before copying:
 * the safetensors structure (lib/train/loom_safetensors.h), config.json's HF keys
 * against the tensors actually present (wte = [vocab_size, n_embd], wpe =
 * [n_positions, n_embd], n_layer blocks of GPT-2 shapes), and then each of
 * the caller's tensors by name, dtype F32 and shape.
 *
 * Ownership: the caller's tensor table and data are borrowed during a
 * call only.  A loaded struct loom_ckpt owns its files' mappings.
 * Errors: 0 or negative LOOM_E*; one line naming the checkpoint directory
 * or file and the reason, e.g. "ckpt/step-00000100/model.safetensors:
 * tensor 'transformer.wte.weight' is [128, 64] but config.json (n_embd 32,
 * vocab_size 128) needs [128, 32]".  Thread-safety: the default
 * (loom_common.h).
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

/* HuggingFace GPT-2 config keys (config.json). */
struct loom_ckpt_hf {
	int64_t n_layer, n_embd, n_head, n_positions, vocab_size;
	double layer_norm_epsilon;
	/* dropout probabilities (HF defaults 0.1 when a file has none) */
	double resid_pdrop, embd_pdrop, attn_pdrop;
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
};

/* The tokenizer a model was trained with, stored beside it as HuggingFace
 * expects (GPT2Tokenizer): vocab.json + merges.txt (loom_vocab.h's
 * loom_vocab_render_gpt2), and bos/eos_token_id in config.json. */
struct loom_ckpt_vocab {
	const char *name;		/* what --vocab said, e.g. "gpt2" */
	const char *vocab_json;
	size_t vocab_json_len;
	const char *merges;
	size_t merges_len;
	int64_t eos_token_id;		/* <|endoftext|>, -1 if none */
};

struct loom_ckpt_save {
	const char *dir;	/* DIR (created if missing) */
	const struct loom_ckpt_tensor *tensors;
	size_t n_tensors;
	/* AdamW moments parallel to `tensors` (same shapes), or NULL. */
	float *const *adam_m;
	float *const *adam_v;
	struct loom_ckpt_hf hf;
	const char *loom_config_json;	/* loom's resolved config (a JSON
					 * object), stored under "loom";
					 * may be NULL */
	struct loom_ckpt_state state;	/* state.step names the directory */
	const char *state_extra_json;	/* optional JSON object merged into
					 * state.json under "extra" */
	const struct loom_ckpt_vocab *vocab;	/* NULL: no tokenizer files */
	unsigned keep;			/* keep newest N step dirs; 0 = all */
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
 * step directory is written to out_path (if non-NULL, n bytes). */
int loom_ckpt_write(const struct loom_ckpt_save *s, char *out_path, size_t n,
		    struct loom_err *err);

/* Remove step directories of DIR beyond the newest `keep` (never the one
 * `latest` points to) and stale temp dirs.  Returns how many were removed
 * or a negative code. */
int loom_ckpt_prune(const char *dir, unsigned keep, struct loom_err *err);

/* Resolve PATH to a step directory: PATH itself if it holds config.json,
 * else PATH/latest (resolved).  Writes it to out. */
int loom_ckpt_resolve(const char *path, char *out, size_t n, struct loom_err *err);

/* Read only state.json of the checkpoint at PATH (resolved as above). */
int loom_ckpt_read_state(const char *path, struct loom_ckpt_state *st,
			 struct loom_err *err);

struct loom_ckpt;

/* loom_ckpt_open flags: skip the checksum verification. */
#define LOOM_CKPT_NO_VERIFY 1u

/* Open and validate a checkpoint (resolved as above): state.json (absent
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
struct loom_ckpt *loom_ckpt_open(const char *path, unsigned flags, struct loom_err *err);
void loom_ckpt_free(struct loom_ckpt *c);

const char *loom_ckpt_dir(const struct loom_ckpt *c);
const struct loom_ckpt_hf *loom_ckpt_hf(const struct loom_ckpt *c);
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
 * model.safetensors as F32 of exactly that shape and hold finite values
 * only, and every tensor in the file must be in the table (except HF's
 * buffers "*.attn.bias", "*.attn.masked_bias" and a tied
 * "lm_head.weight"). */
int loom_ckpt_load_model(struct loom_ckpt *c, const struct loom_ckpt_tensor *t,
			 size_t n);
/* Copy AdamW moments (parallel arrays, as for saving; finite values only). */
int loom_ckpt_load_optimizer(struct loom_ckpt *c, const struct loom_ckpt_tensor *t,
			     size_t n, float *const *adam_m, float *const *adam_v);
const char *loom_ckpt_error(const struct loom_ckpt *c);
/* The side file NAME of the checkpoint (verified at open when state.json
 * lists it), opened and validated into *st (the caller frees it with
 * loom_st_free); *st = NULL and 0 when the checkpoint has no such file. */
int loom_ckpt_open_sidecar(struct loom_ckpt *c, const char *name, struct loom_st **st);

#endif
