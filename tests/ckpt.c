/* Unit tests for loom_ckpt: atomic step directories, the latest switch,
 * --keep pruning, validated loading and each refusal. */
#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom_ckpt.h"
#include "loom_crc32c.h"
#include "loom_file.h"
#include "loom_gpt.h"
#include "tap.h"

#define L 2
#define C 8
#define V 16
#define P 4
#define MAXT (4 + 12 * L)

static struct loom_ckpt_tensor tab[MAXT];
static char names[MAXT][64];
static float *param, *adam_m, *adam_v;
static float *mp[MAXT], *vp[MAXT];
static size_t nt, total;

static void add(const char *name, int ndim, int64_t s0, int64_t s1)
{
	snprintf(names[nt], sizeof names[nt], "%s", name);
	tab[nt].name = names[nt];
	tab[nt].ndim = ndim;
	tab[nt].shape[0] = s0;
	tab[nt].shape[1] = s1;
	tab[nt].data = (float *)(uintptr_t)total;	/* offset, fixed up below */
	total += (size_t)(s0 * (ndim > 1 ? s1 : 1));
	nt++;
}

/* The GPT-2 tensor table of a tiny model, HF names and layouts. */
static void build_table(void)
{
	char n[64];
	add("transformer.wte.weight", 2, V, C);
	add("transformer.wpe.weight", 2, P, C);
	for (int l = 0; l < L; l++) {
#define A(suffix, nd, a, b) \
	snprintf(n, sizeof n, "transformer.h.%d." suffix, l), add(n, nd, a, b)
		A("ln_1.weight", 1, C, 0);
		A("ln_1.bias", 1, C, 0);
		A("attn.c_attn.weight", 2, C, 3 * C);
		A("attn.c_attn.bias", 1, 3 * C, 0);
		A("attn.c_proj.weight", 2, C, C);
		A("attn.c_proj.bias", 1, C, 0);
		A("ln_2.weight", 1, C, 0);
		A("ln_2.bias", 1, C, 0);
		A("mlp.c_fc.weight", 2, C, 4 * C);
		A("mlp.c_fc.bias", 1, 4 * C, 0);
		A("mlp.c_proj.weight", 2, 4 * C, C);
		A("mlp.c_proj.bias", 1, C, 0);
	}
	add("transformer.ln_f.weight", 1, C, 0);
	add("transformer.ln_f.bias", 1, C, 0);
	param = malloc(total * sizeof *param);
	adam_m = malloc(total * sizeof *param);
	adam_v = malloc(total * sizeof *param);
	for (size_t i = 0; i < total; i++) {
		param[i] = (float)i * 0.5f - 3;
		adam_m[i] = (float)i * 1e-3f;
		adam_v[i] = (float)i * 1e-6f;
	}
	for (size_t i = 0; i < nt; i++) {
		size_t off = (size_t)(uintptr_t)tab[i].data;
		tab[i].data = param + off;
		mp[i] = adam_m + off;
		vp[i] = adam_v + off;
	}
}

static struct loom_gpt_hf hf = {
	.n_layer = L, .n_embd = C, .n_head = 2, .n_positions = P, .vocab_size = V,
	.layer_norm_epsilon = 1e-5, .resid_pdrop = 0.125, .embd_pdrop = 0.125, .attn_pdrop = 0.25,
};

static struct loom_ckpt_save base_save(const char *dir, uint64_t step)
{
	struct loom_ckpt_save s = {
		.dir = dir, .tensors = tab, .n_tensors = nt, .adam_m = mp, .adam_v = vp,
		.arch = &loom_gpt_ckpt_arch, .hf = &hf,
		.loom_config_json = "{\"preset\":\"tiny\",\"n_layer\":2}",
		.state = {.step = step, .samples = step * 4, .tokens = step * 20,
			  .rng = {1, 2, 0xfedcba9876543210ull, 4},
			  .data_seq = step * 2, .data_epoch = 1, .data_seed = 99,
			  .data_batch = 2, .data_seq_len = 5, .data_world = 1},
		.state_extra_json = "{\"loss\":1.5}",
	};
	return s;
}

static const char *root;
static char dir[512];	/* root/run/ckpt: the checkpoints the cases save */

static void sh(const char *fmt, const char *arg)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, fmt, arg, arg, arg);
	if (system(cmd) != 0)
		diag("command failed: %s", cmd);
}

/* Open a checkpoint expecting a refusal containing `want`. */
static void refuse_open_flags(const char *name, const char *path, unsigned flags,
			      const char *want)
{
	struct loom_err err = {0};
	struct loom_ckpt *c = loom_ckpt_open(path, &loom_gpt_ckpt_arch, flags, &err);
	ok(c == NULL, "%s: refused", name);
	ok(strstr(err.msg, want) != NULL && !strchr(err.msg, '\n'),
	   "%s: one line '%s' has '%s'", name, err.msg, want);
	loom_ckpt_free(c);
}

/* The structural checks, behind the checksums (the broken copies below
 * are edited on purpose). */
static void refuse_open(const char *name, const char *path, const char *want)
{
	refuse_open_flags(name, path, LOOM_CKPT_NO_VERIFY, want);
}

/* Flip one byte of a file at `off`. */
static void flip(const char *path, long off)
{
	FILE *f = fopen(path, "r+b");
	if (!f || fseek(f, off, SEEK_SET)) {
		diag("cannot open %s", path);
		if (f)
			fclose(f);
		return;
	}
	int ch = fgetc(f);
	fseek(f, off, SEEK_SET);
	fputc(ch ^ 0x10, f);
	fclose(f);
}

/* bad: a fresh copy of step 400 to break */
static char bad[600];

static void fresh(void)
{
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "cp -r '%s/step-00000400' '%s'", dir, bad);
	if (tap_rm_rf(bad) || system(cmd))
		diag("cp failed");
}

static void case_save(void)
{
	struct loom_err err = {0};
	char out[512], p[600], link[512];
	struct loom_ckpt_save s = base_save(dir, 100);
	is_int(loom_ckpt_write(&s, out, sizeof out, &err), 0, "save step 100: %s", err.msg);
	snprintf(p, sizeof p, "%s/step-00000100", dir);
	is_str(out, p, "returns the step directory");
	const char *files[] = {"model.safetensors", "optimizer.safetensors", "config.json",
			       "state.json"};
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof p, "%s/step-00000100/%s", dir, files[i]);
		ok(access(p, R_OK) == 0, "has %s", files[i]);
	}
	snprintf(p, sizeof p, "%s/latest", dir);
	ssize_t ll = readlink(p, link, sizeof link - 1);
	link[ll > 0 ? ll : 0] = '\0';
	is_str(link, "step-00000100", "latest is a relative symlink to the step dir");
	is_int(tap_count_dir(dir, "."), 0, "no temporary debris");
}

/* config.json: HF keys and loom's own. */
static void case_config_json(void)
{
	char p[600];
	snprintf(p, sizeof p, "%s/latest/config.json", dir);
	json_error_t je;
	json_t *cfg = json_load_file(p, 0, &je);
	ok(cfg != NULL, "config.json parses");
	is_str(json_string_value(json_object_get(cfg, "model_type")), "gpt2", "model_type gpt2");
	is_str(json_string_value(json_array_get(json_object_get(cfg, "architectures"), 0)),
	       "GPT2LMHeadModel", "architectures");
	is_str(json_string_value(json_object_get(cfg, "activation_function")), "gelu_new",
	       "activation gelu_new");
	is_int(json_integer_value(json_object_get(cfg, "n_embd")), C, "n_embd");
	is_int(json_integer_value(json_object_get(cfg, "n_ctx")), P, "n_ctx");
	ok(json_real_value(json_object_get(cfg, "attn_pdrop")) == 0.25 &&
	   json_real_value(json_object_get(cfg, "resid_pdrop")) == 0.125 &&
	   json_real_value(json_object_get(cfg, "embd_pdrop")) == 0.125, "HF dropout keys");
	is_str(json_string_value(json_object_get(json_object_get(cfg, "loom"), "preset")), "tiny",
	       "loom config stored under 'loom'");
	json_decref(cfg);
}

/* state.json records every other file's size and CRC-32C. */
static void case_state_files(void)
{
	struct loom_err err = {0};
	char p[600];
	json_error_t je;
	snprintf(p, sizeof p, "%s/latest/state.json", dir);
	json_t *sj = json_load_file(p, 0, &je);
	json_t *fm = json_object_get(json_object_get(sj, "files"), "model.safetensors");
	char *raw = NULL;
	size_t rawlen = 0;
	snprintf(p, sizeof p, "%s/latest/model.safetensors", dir);
	ok(loom_read_file(p, &raw, &rawlen, &err) == 0, "read model.safetensors");
	char hex[16];
	snprintf(hex, sizeof hex, "%08x", raw ? loom_crc32c(0, raw, rawlen) : 0);
	ok(fm && json_integer_value(json_object_get(fm, "bytes")) == (json_int_t)rawlen &&
	   !strcmp(json_string_value(json_object_get(fm, "crc32c")), hex),
	   "state.json files: model.safetensors size and CRC-32C (%s)", hex);
	is_int(json_object_size(json_object_get(sj, "files")), 3,
	       "files: model, optimizer, config.json");
	free(raw);
	json_decref(sj);
}

/* Load it back: state, HF keys, bit-identical weights and moments; -1 if
 * it does not open (nothing after can run). */
static int case_load(void)
{
	struct loom_err err = {0};
	struct loom_ckpt *c = loom_ckpt_open(dir, &loom_gpt_ckpt_arch, 0, &err);
	ok(c != NULL, "open DIR (via latest): %s", c ? "" : err.msg);
	if (!c)
		return -1;
	ok(strstr(loom_ckpt_dir(c), "step-00000100") != NULL, "resolved to the step dir");
	const struct loom_ckpt_state *st = loom_ckpt_state(c);
	ok(st->step == 100 && st->samples == 400 && st->tokens == 2000 && st->data_seq == 200 &&
	   st->data_epoch == 1 && st->data_seed == 99 && st->data_batch == 2 &&
	   st->data_seq_len == 5 && st->data_world == 1, "state round-trips");
	ok(st->rng[2] == 0xfedcba9876543210ull && st->rng[3] == 4, "64-bit RNG state round-trips");
	const struct loom_gpt_hf *h = loom_ckpt_hf(c);
	ok(h->n_layer == L && h->vocab_size == V && h->attn_pdrop == 0.25 &&
	   h->resid_pdrop == 0.125, "hf keys");
	ok(strstr(loom_ckpt_loom_config(c), "\"preset\":\"tiny\"") != NULL, "loom config text");
	ok(loom_ckpt_has_optimizer(c), "has optimizer");
	ok(loom_ckpt_has_state(c) && loom_ckpt_has_checksums(c), "has state and checksums");
	float *save_p = malloc(total * 4), *save_m = malloc(total * 4), *save_v = malloc(total * 4);
	memcpy(save_p, param, total * 4);
	memcpy(save_m, adam_m, total * 4);
	memcpy(save_v, adam_v, total * 4);
	memset(param, 0, total * 4);
	memset(adam_m, 0, total * 4);
	memset(adam_v, 0, total * 4);
	is_int(loom_ckpt_load_model(c, tab, nt), 0, "load model");
	ok(memcmp(param, save_p, total * 4) == 0, "weights bit-identical");
	is_int(loom_ckpt_load_optimizer(c, tab, nt, mp, vp), 0, "load optimizer");
	ok(memcmp(adam_m, save_m, total * 4) == 0 && memcmp(adam_v, save_v, total * 4) == 0,
	   "AdamW moments bit-identical");
	/* a model of a different shape is refused with a clear line */
	tab[0].shape[1] = C + 1;
	is_int(loom_ckpt_load_model(c, tab, nt), LOOM_EFORMAT, "wrong model shape refused");
	ok(strstr(loom_ckpt_error(c), "tensor 'transformer.wte.weight' is F32 [16, 8] but the "
		  "model needs F32 [16, 9]") != NULL, "shape message: %s", loom_ckpt_error(c));
	tab[0].shape[1] = C;
	is_int(loom_ckpt_load_model(c, tab, nt - 1), LOOM_EFORMAT, "smaller model refused");
	ok(strstr(loom_ckpt_error(c), "'transformer.ln_f.bias' is not part of the model") != NULL,
	   "extra tensor message: %s", loom_ckpt_error(c));
	loom_ckpt_free(c);
	free(save_p);
	free(save_m);
	free(save_v);
	return 0;
}

static void case_read_state(void)
{
	struct loom_err err = {0};
	struct loom_ckpt_state rs;
	is_int(loom_ckpt_read_state(dir, &rs, &err), 0, "read_state");
	is_int(rs.data_seq, 200, "read_state data position");

	/* a data position that disagrees with itself: frames consumed by
	 * batches of 0 records on 0 ranks; all zero (no frame yet) is fine */
	{
		char d0[600];
		snprintf(d0, sizeof d0, "%s/zero", root);
		struct loom_ckpt_save z = base_save(d0, 7);
		z.state.data_batch = 0;
		z.state.data_world = 0;
		is_int(loom_ckpt_write(&z, NULL, 0, &err), 0, "save a state of batch 0, world 0");
		is_int(loom_ckpt_read_state(d0, &rs, &err), LOOM_EFORMAT, "read_state refuses it");
		ok(strstr(err.msg, "/step-00000007/state.json: data.batch is 0, expected at least 1 "
			  "(the frames' records per frame: data.next_seq 14, batch 0, seq_len 5, "
			  "world 0)") != NULL, "  naming the file, the key and what was expected: %s",
		   err.msg);
		refuse_open_flags("state batch 0, world 0", d0, 0, "data.batch is 0");
		z.state.data_batch = 2;
		is_int(loom_ckpt_write(&z, NULL, 0, &err), 0, "save a state of world 0");
		refuse_open_flags("state world 0", d0, 0,
				  "state.json: data.world is 0, expected at least 1 (the frames' rank count");
		z = base_save(d0, 0);
		z.state.data_seq = z.state.data_batch = z.state.data_seq_len = z.state.data_world = 0;
		is_int(loom_ckpt_write(&z, NULL, 0, &err), 0, "save step 0, no frame consumed");
		is_int(loom_ckpt_read_state(d0, &rs, &err), 0, "  all zero: read (%s)", err.msg);
	}
}

/* More saves, keep 2. */
static void case_keep(void)
{
	struct loom_err err = {0};
	char p[600], link[512];
	struct loom_ckpt_save s;
	for (uint64_t k = 200; k <= 400; k += 100) {
		s = base_save(dir, k);
		s.keep = 2;
		is_int(loom_ckpt_write(&s, NULL, 0, &err), 0, "save step %d", (int)k);
	}
	is_int(tap_count_dir(dir, "step-"), 2, "keep 2 pruned older step dirs");
	snprintf(p, sizeof p, "%s/step-00000300", dir);
	ok(access(p, F_OK) == 0, "step 300 kept");
	snprintf(p, sizeof p, "%s/step-00000200", dir);
	ok(access(p, F_OK) != 0, "step 200 removed");
	snprintf(p, sizeof p, "%s/latest", dir);
	ssize_t ll = readlink(p, link, sizeof link - 1);
	link[ll > 0 ? ll : 0] = '\0';
	is_str(link, "step-00000400", "latest switched to 400");
}

/* Re-saving the same step replaces it. */
static void case_resave(void)
{
	struct loom_err err = {0};
	param[0] = 42;
	struct loom_ckpt_save s = base_save(dir, 400);
	is_int(loom_ckpt_write(&s, NULL, 0, &err), 0, "re-save step 400");
	is_int(tap_count_dir(dir, "."), 0, "no debris after replacing");
	struct loom_ckpt *c = loom_ckpt_open(dir, &loom_gpt_ckpt_arch, 0, &err);
	param[0] = 0;
	ok(c && loom_ckpt_load_model(c, tab, nt) == 0 && param[0] == 42, "replaced contents");
	loom_ckpt_free(c);
}

static void case_failed_save(void)
{
	struct loom_err err = {0};
	char p[600], link[512];
	snprintf(p, sizeof p, "%s/latest", dir);
	/* a failing save leaves the previous checkpoint and no debris */
	struct loom_ckpt_save s = base_save(dir, 500);
	s.loom_config_json = "[not json";
	ok(loom_ckpt_write(&s, NULL, 0, &err) < 0, "bad config JSON fails the save");
	is_int(tap_count_dir(dir, "."), 0, "failed save leaves no temp dir");
	ssize_t ll = readlink(p, link, sizeof link - 1);
	link[ll > 0 ? ll : 0] = '\0';
	is_str(link, "step-00000400", "latest untouched by a failed save");
	s = base_save(dir, 500);
	struct loom_gpt_hf h3 = hf;
	h3.n_head = 3;
	s.hf = &h3;
	ok(loom_ckpt_write(&s, NULL, 0, &err) == LOOM_EINVAL, "n_embd %% n_head refused at save");
}

/* A save removes debris of an interrupted one, even without keep. */
static void case_interrupted_saves(void)
{
	struct loom_err err = {0};
	char p[600];
	snprintf(p, sizeof p, "%s/.step-00000450.tmp-zzzzzz", dir);
	mkdir(p, 0777);
	struct loom_ckpt_save s = base_save(dir, 450);
	is_int(loom_ckpt_write(&s, NULL, 0, &err), 0, "save after an interrupted save");
	is_int(tap_count_dir(dir, "."), 0, "interrupted save's temp dir removed");
	is_int(tap_count_dir(dir, "step-"), 3, "no step pruned without keep");

	/* stale temp dirs are pruned */
	snprintf(p, sizeof p, "%s/.step-00000600.tmp-abcdef", dir);
	mkdir(p, 0777);
	ok(loom_ckpt_prune(dir, 0, &err) >= 1, "prune removes interrupted saves");
	is_int(tap_count_dir(dir, "."), 0, "debris gone");
}

/* Refusals: build broken copies of a good checkpoint. */
static void case_refusals(void)
{
	char cmd[4096];
	refuse_open("not a checkpoint", root, "is not a checkpoint (no config.json, no latest)");
	refuse_open("missing dir", "/nonexistent/ckpt", "No such file");

	snprintf(bad, sizeof bad, "%s/bad", root);
	fresh();
	snprintf(cmd, sizeof cmd, "%s/model.safetensors", bad);
	ok(truncate(cmd, 4000) == 0, "truncate model.safetensors");
	refuse_open("truncated model", bad, "file truncated?");

	fresh();
	snprintf(cmd, sizeof cmd, "%s/model.safetensors", bad);
	FILE *f = fopen(cmd, "r+b");
	fseek(f, 8, SEEK_SET);
	fputs("@@@", f);
	fclose(f);
	refuse_open("bad header", bad, "bad JSON header at byte");

	fresh();
	sh("sed -i 's/\"n_embd\": 8/\"n_embd\": 4/' '%s/config.json'", bad);
	refuse_open("config n_embd vs tensors", bad,
		    "tensor 'transformer.wte.weight' is [16, 8] but config.json (n_embd 4, "
		    "vocab_size 16, n_positions 4) needs [16, 4]");

	fresh();
	sh("sed -i 's/\"n_layer\": 2/\"n_layer\": 3/' '%s/config.json'", bad);
	refuse_open("config n_layer vs tensors", bad,
		    "tensor 'transformer.h.2.ln_1.weight' is missing (config.json: n_layer 3)");

	fresh();
	sh("sed -i 's/\"n_layer\": 2/\"n_layer\": 1/' '%s/config.json'", bad);
	refuse_open("fewer layers in config", bad,
		    "has tensor 'transformer.h.1.ln_1.weight' but config.json says n_layer 1");

	fresh();
	sh("sed -i 's/\"n_head\": 2/\"n_head\": 3/' '%s/config.json'", bad);
	refuse_open("n_head", bad, "n_embd 8 is not divisible by n_head 3");

	fresh();
	sh("sed -i 's/\"attn_pdrop\": 0.25/\"attn_pdrop\": 1.5/' '%s/config.json'", bad);
	refuse_open("attn_pdrop out of range", bad, "attn_pdrop must be a number in [0, 1)");

	fresh();
	sh("sed -i 's/\"vocab_size\": 16/\"vocab_size\": \"x\"/' '%s/config.json'", bad);
	refuse_open("typed keys", bad, "'vocab_size' missing or not a positive integer");

	fresh();
	sh("echo '{' > '%s/config.json'", bad);
	refuse_open("bad config.json", bad, "config.json: line");

	fresh();
	sh("sed -i 's/\"step\": 400/\"step\": -4/' '%s/state.json'", bad);
	refuse_open("bad state.json", bad, "'step' missing or not a count");

	fresh();
	snprintf(cmd, sizeof cmd, "%s/optimizer.safetensors", bad);
	ok(truncate(cmd, 100) == 0, "truncate optimizer");
	refuse_open("truncated optimizer", bad, "optimizer.safetensors: truncated");
}

/* A weights-only checkpoint (no state.json, no optimizer) opens. */
static void case_hf_directory(void)
{
	struct loom_err err = {0};
	fresh();
	sh("rm '%s/state.json' '%s/optimizer.safetensors'", bad);
	sh("/usr/bin/python3 -c 'import json,sys; p=sys.argv[1]+\"/config.json\"; "
	   "d=json.load(open(p)); del d[\"loom\"]; json.dump(d, open(p, \"w\"))' '%s'", bad);
	struct loom_ckpt *c = loom_ckpt_open(bad, &loom_gpt_ckpt_arch, 0, &err);
	ok(c && loom_ckpt_state(c)->step == 0 && !loom_ckpt_has_optimizer(c) &&
	   !loom_ckpt_has_state(c) && !loom_ckpt_has_checksums(c),
	   "a HuggingFace directory (no state.json, no loom config) opens as step 0: %s",
	   c ? "" : err.msg);
	ok(c && loom_ckpt_load_optimizer(c, tab, nt, mp, vp) == LOOM_EINVAL,
	   "loading missing optimizer is an error");
	loom_ckpt_free(c);
}

/* A loom checkpoint missing any part is refused, naming the part. */
static void case_missing_parts(void)
{
	char cmd[4096];
	static const char *const missing[][2] = {
		{"state.json", "/bad: state.json is missing"},
		{"optimizer.safetensors", "/bad: optimizer.safetensors is missing (state.json lists it)"},
		{"model.safetensors", "/bad: model.safetensors is missing (state.json lists it)"},
		{"config.json", "/bad: config.json is missing"},
	};
	for (size_t i = 0; i < sizeof missing / sizeof *missing; i++) {
		fresh();
		snprintf(cmd, sizeof cmd, "%s/%s", bad, missing[i][0]);
		ok(unlink(cmd) == 0, "remove %s", missing[i][0]);
		refuse_open_flags(missing[i][0], bad, 0, missing[i][1]);
	}
}

/* Corruption: one flipped byte anywhere is found. */
static void case_corruption(void)
{
	struct loom_err err = {0};
	char cmd[4096];
	fresh();
	snprintf(cmd, sizeof cmd, "%s/model.safetensors", bad);
	struct stat sb;
	stat(cmd, &sb);
	flip(cmd, (long)sb.st_size - 8);	/* the low mantissa byte of a weight */
	refuse_open_flags("flipped byte in the model's data", bad, 0,
			  "/bad/model.safetensors: checksum mismatch (CRC-32C ");
	struct loom_ckpt *c = loom_ckpt_open(bad, &loom_gpt_ckpt_arch, LOOM_CKPT_NO_VERIFY, &err);
	ok(c && loom_ckpt_load_model(c, tab, nt) == 0, "LOOM_CKPT_NO_VERIFY reads it anyway");
	loom_ckpt_free(c);
	fresh();
	snprintf(cmd, sizeof cmd, "%s/optimizer.safetensors", bad);
	flip(cmd, 3000);
	c = loom_ckpt_open(bad, &loom_gpt_ckpt_arch, 0, &err);
	ok(c && loom_ckpt_load_model(c, tab, nt) == 0, "flipped byte in the optimizer: opens "
	   "(loom-eval never reads the moments): %s", c ? "" : err.msg);
	ok(c && loom_ckpt_load_optimizer(c, tab, nt, mp, vp) == LOOM_EFORMAT &&
	   strstr(loom_ckpt_error(c), "/bad/optimizer.safetensors: checksum mismatch"),
	   "... and loading the moments finds it: %s", c ? loom_ckpt_error(c) : "");
	loom_ckpt_free(c);
	fresh();
	sh("sed -i 's/\"n_embd\": 8/\"n_embd\": 4/' '%s/config.json'", bad);
	refuse_open_flags("edited config.json", bad, 0, "/bad/config.json: ");
	fresh();
	snprintf(cmd, sizeof cmd, "%s/model.safetensors", bad);
	ok(truncate(cmd, 4000) == 0, "truncate model.safetensors");
	refuse_open_flags("truncated model (verified)", bad, 0,
			  "/bad/model.safetensors: 4000 bytes, but state.json records ");
	fresh();
	sh("sed -i 's/\"crc32c\": \"/\"crc32c\": \"x/' '%s/state.json'", bad);
	refuse_open_flags("bad checksum field", bad, 0, "needs \"bytes\" and \"crc32c\"");
}

/* An older loom's checkpoint (no "files") opens unverified. */
static void case_without_checksums(void)
{
	struct loom_err err = {0};
	fresh();
	sh("/usr/bin/python3 -c 'import json,sys; p=sys.argv[1]+\"/state.json\"; "
	   "d=json.load(open(p)); del d[\"files\"]; json.dump(d, open(p, \"w\"))' '%s'", bad);
	struct loom_ckpt *c = loom_ckpt_open(bad, &loom_gpt_ckpt_arch, 0, &err);
	ok(c && loom_ckpt_has_state(c) && !loom_ckpt_has_checksums(c) &&
	   loom_ckpt_state(c)->step == 400, "checkpoint without checksums opens: %s",
	   c ? "" : err.msg);
	loom_ckpt_free(c);
}

/* Tokenizer files beside the model, checksummed like the others. */
static void case_tokenizer(void)
{
	struct loom_err err = {0};
	char p[600], cmd[4096];
	json_error_t je;
	snprintf(p, sizeof p, "%s/voc", root);
	struct loom_ckpt_vocab voc = {
		.name = "toy",
		.files = { { "vocab.json", "{\"a\":0}", 7 }, { "merges.txt", "#version: 0.2\n", 14 } },
		.eos_token_id = 7,
	};
	struct loom_ckpt_save s = base_save(p, 3);
	s.vocab = &voc;
	is_int(loom_ckpt_write(&s, NULL, 0, &err), 0, "save with a tokenizer");
	struct loom_ckpt *c = loom_ckpt_open(p, &loom_gpt_ckpt_arch, 0, &err);
	ok(c && loom_ckpt_vocab_spec(c) && strstr(loom_ckpt_vocab_spec(c), "/step-00000003/vocab.json,") &&
	   strstr(loom_ckpt_vocab_spec(c), "/step-00000003/merges.txt") &&
	   !strcmp(loom_ckpt_vocab_name(c), "toy"), "vocab spec and name: %s",
	   c && loom_ckpt_vocab_spec(c) ? loom_ckpt_vocab_spec(c) : err.msg);
	loom_ckpt_free(c);
	snprintf(cmd, sizeof cmd, "%s/latest/config.json", p);
	json_t *cfg = json_load_file(cmd, 0, &je);
	ok(cfg && json_integer_value(json_object_get(cfg, "eos_token_id")) == 7 &&
	   json_integer_value(json_object_get(cfg, "bos_token_id")) == 7,
	   "config.json: bos/eos_token_id");
	json_decref(cfg);
	snprintf(cmd, sizeof cmd, "%s/latest/merges.txt", p);
	flip(cmd, 3);
	refuse_open_flags("flipped byte in merges.txt", p, 0, "merges.txt: checksum mismatch");
	c = loom_ckpt_open(dir, &loom_gpt_ckpt_arch, 0, &err);
	ok(c && !loom_ckpt_vocab_spec(c) && !loom_ckpt_vocab_name(c), "no tokenizer: NULL");
	loom_ckpt_free(c);
}

/* Non-finite weights or moments are refused, naming the tensor. */
static void case_non_finite(void)
{
	struct loom_err err = {0};
	char p[600];
	snprintf(p, sizeof p, "%s/nan", root);
	float keep0 = param[total - 3];
	param[total - 3] = NAN;
	struct loom_ckpt_save s = base_save(p, 1);
	is_int(loom_ckpt_write(&s, NULL, 0, &err), 0, "save a checkpoint holding a NaN");
	struct loom_ckpt *c = loom_ckpt_open(p, &loom_gpt_ckpt_arch, 0, &err);
	ok(c && loom_ckpt_load_model(c, tab, nt) == LOOM_EFORMAT &&
	   strstr(loom_ckpt_error(c), "model.safetensors: the checkpoint holds non-finite values: "
		  "tensor 'transformer.ln_f.bias' element 5 is nan"),
	   "NaN weight refused: %s", c ? loom_ckpt_error(c) : err.msg);
	loom_ckpt_free(c);
	param[total - 3] = keep0;
	adam_v[0] = INFINITY;
	s = base_save(p, 2);
	is_int(loom_ckpt_write(&s, NULL, 0, &err), 0, "save a checkpoint holding an infinite moment");
	adam_v[0] = 0;
	c = loom_ckpt_open(p, &loom_gpt_ckpt_arch, 0, &err);
	ok(c && loom_ckpt_load_model(c, tab, nt) == 0 &&
	   loom_ckpt_load_optimizer(c, tab, nt, mp, vp) == LOOM_EFORMAT &&
	   strstr(loom_ckpt_error(c), "'transformer.wte.weight.exp_avg_sq' element 0 is inf"),
	   "infinite moment refused: %s", c ? loom_ckpt_error(c) : err.msg);
	loom_ckpt_free(c);
}

int main(void)
{
	build_table();
	ok((root = tap_tmpdir()) != NULL, "scratch dir");
	snprintf(dir, sizeof dir, "%s/run/ckpt", root);
	case_save();
	case_config_json();
	case_state_files();
	if (case_load() < 0)
		return done_testing();
	case_read_state();
	case_keep();
	case_resave();
	case_failed_save();
	case_interrupted_saves();
	case_refusals();
	case_hf_directory();
	case_missing_parts();
	case_corruption();
	case_without_checksums();
	case_tokenizer();
	case_non_finite();
	free(param);
	free(adam_m);
	free(adam_v);
	return done_testing();
}
