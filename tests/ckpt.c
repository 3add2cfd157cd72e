/* Unit tests for loom_ckpt: atomic step directories, the latest switch,
 * --keep pruning, validated loading and each refusal; a checkpoint written
 * by several simulated ranks (write_begin, write_slices, write_commit) and
 * loaded by slices. */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* The weights and moments saved (cases that load overwrite them). */
static void reset_values(void)
{
	for (size_t i = 0; i < total; i++) {
		param[i] = (float)i * 0.5f - 3;
		adam_m[i] = (float)i * 1e-3f;
		adam_v[i] = (float)i * 1e-6f;
	}
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
	reset_values();
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

/* loom-train --keep-best: saved as "best" beside the steps (DIR/best ->
 * best-NNNNNNNN, the earlier ones and their debris removed, latest and
 * the steps untouched), state.json's "best" read back, a bad one refused. */
static void case_save_as(void)
{
	struct loom_err err = {0};
	struct loom_ckpt_state rs;
	char d[600], p[700], link[64], out[700];
	snprintf(d, sizeof d, "%s/as", root);
	struct loom_ckpt_save s = base_save(d, 10);
	is_int(loom_ckpt_write(&s, NULL, 0, &err), 0, "a step to keep beside the best");
	for (uint64_t k = 20; k <= 30; k += 10) {
		s = base_save(d, k);
		s.as = "best";
		snprintf(s.state.best.metric, sizeof s.state.best.metric, "eval/f1");
		s.state.best.value = 0.1 * (double)k + 1.0 / 3;
		s.state.best.step = k;
		is_int(loom_ckpt_write(&s, out, sizeof out, &err), 0, "saved as best at step %d (%s)",
		       (int)k, err.msg);
	}
	snprintf(p, sizeof p, "%s/best-00000030", d);
	is_str(out, p, "  its directory: best-00000030");
	snprintf(p, sizeof p, "%s/best", d);
	ssize_t n = readlink(p, link, sizeof link - 1);
	link[n > 0 ? n : 0] = '\0';
	is_str(link, "best-00000030", "  DIR/best -> best-00000030 (relative)");
	snprintf(p, sizeof p, "%s/best-00000020", d);
	ok(access(p, F_OK) != 0, "  the earlier best-00000020 removed");
	snprintf(p, sizeof p, "%s/latest", d);
	n = readlink(p, link, sizeof link - 1);
	link[n > 0 ? n : 0] = '\0';
	is_str(link, "step-00000010", "  latest still names the step");
	snprintf(p, sizeof p, "%s/best", d);
	is_int(loom_ckpt_read_state(p, &rs, &err), 0, "read_state of DIR/best");
	ok(!strcmp(rs.best.metric, "eval/f1") && rs.best.value == 3.0 + 1.0 / 3 &&
	   rs.best.step == 30, "  its best: eval/f1, the value to the last bit, step 30");
	is_int(loom_ckpt_read_state(d, &rs, &err), 0, "read_state of a step without one");
	is_int(rs.best.metric[0], 0, "  no best");
	struct loom_ckpt *c = loom_ckpt_open(p, &loom_gpt_ckpt_arch, 0, &err);
	ok(c && loom_ckpt_state(c)->best.step == 30, "DIR/best opens, checksums and all");
	loom_ckpt_free(c);
	/* debris of an interrupted best save goes with the next one */
	snprintf(p, sizeof p, "%s/.best-00000040.tmp-abc123", d);
	mkdir(p, 0777);
	s = base_save(d, 50);
	s.as = "best";
	is_int(loom_ckpt_write(&s, NULL, 0, &err), 0, "another best");
	ok(access(p, F_OK) != 0, "  the debris of an interrupted one removed");
	const char *bad[] = { "latest", "step", "Best", "a/b", "" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		s.as = bad[i];
		is_int(loom_ckpt_write(&s, NULL, 0, &err), LOOM_EINVAL, "saved as '%s': refused", bad[i]);
	}
	/* a "best" of another shape is refused, naming state.json */
	snprintf(p, sizeof p, "%s/best/state.json", d);
	sh("sed -i 's|\"files\"|\"best\": {\"metric\": \"eval/f1\", \"value\": \"x\"}, \"files\"|' %s", p);
	snprintf(p, sizeof p, "%s/best", d);
	is_int(loom_ckpt_read_state(p, &rs, &err), LOOM_EFORMAT, "a bad best refused");
	ok(strstr(err.msg, "/best-00000050/state.json: 'best' is not {\"metric\": NAME, \"value\": "
		  "a finite number, \"step\": a count}") != NULL, "  naming the file: %s", err.msg);
}

/* A step saved as the "best" of the same step just written: its files
 * linked, not written again; the state must be the same. */
static void case_write_copy(void)
{
	struct loom_err err = {0};
	struct stat a, b;
	char d[600], p[800], q[800], out[700], link[64];
	snprintf(d, sizeof d, "%s/copy", root);
	struct loom_ckpt_save s = base_save(d, 70);
	s.as = "best";
	snprintf(s.state.best.metric, sizeof s.state.best.metric, "eval/loss");
	s.state.best.value = 0.75;
	s.state.best.step = 70;
	is_int(loom_ckpt_write(&s, out, sizeof out, &err), 0, "best at step 70 (%s)", err.msg);
	char best[700];
	snprintf(best, sizeof best, "%s", out);
	s.as = NULL;
	s.tensors = NULL; /* not read */
	s.state.samples++;
	is_int(loom_ckpt_write_copy(best, &s, out, sizeof out, &err), LOOM_EINVAL,
	       "another state: refused");
	ok(strstr(err.msg, "/best-00000070: not the checkpoint of step 70 this save would write "
		  "(its state.json differs)") != NULL, "  naming the directory: %s", err.msg);
	is_int(tap_count_dir(d, "."), 0, "  nothing left behind");
	snprintf(p, sizeof p, "%s/step-00000070", d);
	ok(access(p, F_OK) != 0, "  no step directory");
	s.state.samples--;
	err = (struct loom_err){0};
	is_int(loom_ckpt_write_copy(best, &s, out, sizeof out, &err), 0, "the step from the best (%s)",
	       err.msg);
	is_str(out, p, "  its directory: step-00000070");
	const char *files[] = { "model.safetensors", "optimizer.safetensors", "config.json",
				"state.json" };
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof p, "%s/step-00000070/%s", d, files[i]);
		snprintf(q, sizeof q, "%s/%s", best, files[i]);
		ok(stat(p, &a) == 0 && stat(q, &b) == 0 && a.st_ino == b.st_ino && a.st_nlink == 2,
		   "  %s: the best's, linked", files[i]);
	}
	snprintf(p, sizeof p, "%s/latest", d);
	ssize_t n = readlink(p, link, sizeof link - 1);
	link[n > 0 ? n : 0] = '\0';
	is_str(link, "step-00000070", "  latest -> step-00000070");
	struct loom_ckpt *c = loom_ckpt_open(d, &loom_gpt_ckpt_arch, 0, &err);
	ok(c && loom_ckpt_state(c)->best.step == 70 && loom_ckpt_load_model(c, tab, nt) == 0,
	   "  opens, checksums verified, model loads");
	loom_ckpt_free(c);
	is_int(tap_count_dir(d, "."), 0, "  no temporary debris");
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

/* --- one checkpoint written by several processes (weight sharding) ------- */

#define MAXR 4
static const float POISON = -7777.0f;

static uint64_t numel_of(size_t i)
{
	return (uint64_t)tab[i].shape[0] * (tab[i].ndim > 1 ? (uint64_t)tab[i].shape[1] : 1);
}

/* Rank r's slices of every tensor among n ranks, for slicing `kind`:
 * 0 (n = 3): uneven; every fifth tensor whole on one rank (empty on the
 *    others), the rest cut at 2/7 and 5/9 (wte [16, 8] at elements 36 and
 *    71: mid-row), the three parts going to the ranks in rotation;
 * 1: FSDP's flat split, the table's elements in n equal runs;
 * 2: everything on rank 0. */
static void slicing(int kind, int n, int r, uint64_t *lo, uint64_t *hi)
{
	uint64_t g = 0, all = total, start = all * (uint64_t)r / (uint64_t)n,
		 end = all * (uint64_t)(r + 1) / (uint64_t)n;
	for (size_t i = 0; i < nt; i++) {
		uint64_t ne = numel_of(i), cut[4] = {0, ne * 2 / 7, ne * 5 / 9, ne};
		lo[i] = hi[i] = 0;
		if (kind == 0 && i % 5 == 1) {
			if ((int)(i % 3) == r)
				hi[i] = ne;
		} else if (kind == 0) {
			int part = (r - (int)(i % 3) + 3) % 3;
			lo[i] = cut[part];
			hi[i] = cut[part + 1];
		} else if (kind == 1) {
			uint64_t a = start > g ? start - g : 0, b = end > g ? end - g : 0;
			lo[i] = a < ne ? a : ne;
			hi[i] = b < ne ? b : ne;
			if (hi[i] < lo[i])
				lo[i] = hi[i] = 0;
		} else if (r == 0) {
			hi[i] = ne;
		}
		g += ne;
	}
}

/* What a rank holds: its own copies of the weights and moments, only its
 * slices valid (the rest POISON, which no save may write and no load may
 * overwrite), and a table pointing at them. */
struct rank {
	float *p, *m, *v;
	struct loom_ckpt_tensor t[MAXT];
	float *mp[MAXT], *vp[MAXT];
	uint64_t lo[MAXT], hi[MAXT];
};

static void rank_view(struct rank *rk, int kind, int n, int r, int fill)
{
	slicing(kind, n, r, rk->lo, rk->hi);
	rk->p = malloc(3 * total * sizeof(float));
	rk->m = rk->p + total;
	rk->v = rk->m + total;
	for (size_t k = 0; k < 3 * total; k++)
		rk->p[k] = POISON;
	for (size_t i = 0; i < nt; i++) {
		size_t off = (size_t)(tab[i].data - param);
		rk->t[i] = tab[i];
		rk->t[i].data = rk->p + off;
		rk->mp[i] = rk->m + off;
		rk->vp[i] = rk->v + off;
		for (uint64_t e = rk->lo[i]; fill && e < rk->hi[i]; e++) {
			rk->p[off + e] = param[off + e];
			rk->m[off + e] = adam_m[off + e];
			rk->v[off + e] = adam_v[off + e];
		}
	}
}

/* The pieces of all ranks, as rank 0 gathers them. */
struct gathered {
	struct loom_ckpt_tx *tx;
	struct loom_ckpt_piece p[MAXR * LOOM_CKPT_MAX_PIECES(MAXT) + 4];
	size_t n, per_rank[MAXR];
};

static void add_extras(struct loom_ckpt_save *s);

/* begin, then each rank's write_slices in the order given (from its own
 * copies); the commit is the caller's. */
static int sliced_begin(struct gathered *g, const char *d, uint64_t step, int kind, int n,
			const int *order, struct loom_err *err)
{
	struct loom_ckpt_save s = base_save(d, step);
	add_extras(&s);
	memset(g, 0, sizeof *g);
	int rc = loom_ckpt_write_begin(&s, &g->tx, err);
	for (int k = 0; rc == 0 && k < n; k++) {
		int r = order ? order[k] : k;
		struct rank rk;
		rank_view(&rk, kind, n, r, 1);
		struct loom_ckpt_save rs = s;
		rs.tensors = rk.t;
		rs.adam_m = rk.mp;
		rs.adam_v = rk.vp;
		size_t np = LOOM_CKPT_MAX_PIECES(nt);
		rc = loom_ckpt_write_slices(loom_ckpt_tx_dir(g->tx), &rs, rk.lo, rk.hi,
					    g->p + g->n, &np, err);
		g->per_rank[r] = np;
		g->n += np;
		free(rk.p);
	}
	return rc;
}

static const struct loom_ckpt_vocab sh_voc = {
	.name = "toy",
	.files = { { "vocab.json", "{\"a\":0}", 7 }, { "merges.txt", "#version: 0.2\n", 14 } },
	.eos_token_id = 7,
};
static const uint8_t sh_mask[4] = {1, 0, 1, 1};
static const struct loom_st_tensor sh_side[1] = {
	{ .name = "x.mask", .dtype = LOOM_ST_U8, .ndim = 2, .shape = {2, 2}, .data = sh_mask },
};
static const char *const sh_meta[] = {"format", "loom-rigl", "block_size", "4", NULL};

/* every kind of file a save writes: a tokenizer and a side file too */
static void add_extras(struct loom_ckpt_save *s)
{
	s->vocab = &sh_voc;
	s->sidecar_name = "sparsity.safetensors";
	s->sidecar = sh_side;
	s->n_sidecar = 1;
	s->sidecar_meta = sh_meta;
}

static const char *const step_files[] = { "model.safetensors", "optimizer.safetensors",
					  "sparsity.safetensors", "vocab.json", "merges.txt",
					  "config.json", "state.json" };

/* Every file of two step directories, byte for byte. */
static int same_dirs(const char *a, const char *b)
{
	int same = tap_count_dir(a, "") == 7 && tap_count_dir(b, "") == 7;
	for (size_t i = 0; i < sizeof step_files / sizeof *step_files; i++) {
		size_t na = 0, nb = 0;
		char *x = tap_slurp(&na, "%s/%s", a, step_files[i]);
		char *y = tap_slurp(&nb, "%s/%s", b, step_files[i]);
		if (!x || !y || na != nb || memcmp(x, y, na)) {
			diag("%s differs", step_files[i]);
			same = 0;
		}
		free(x);
		free(y);
	}
	return same;
}

/* loom_ckpt_write's files against ones python (stdlib) lays out from the
 * raw tensors by the safetensors spec, and state.json's sizes and CRC-32Cs
 * against python's own CRC-32C of each file. */
static const char golden_py[] =
	"import json, struct, sys\n"
	"d, raw, tabf = sys.argv[1:4]\n"
	"tab = json.load(open(tabf))\n"
	"b = open(raw, 'rb').read(); n = len(b) // 12\n"
	"P, M, V = b[:4*n], b[4*n:8*n], b[8*n:]\n"
	"def st(ts):\n"
	"    h = {'__metadata__': {'format': 'pt', 'loom_step': '7'}}; off = 0; data = b''\n"
	"    for name, shape, blob in ts:\n"
	"        h[name] = {'dtype': 'F32', 'shape': shape, 'data_offsets': [off, off + len(blob)]}\n"
	"        off += len(blob); data += blob\n"
	"    j = json.dumps(h, separators=(',', ':')).encode()\n"
	"    j += b' ' * (-len(j) % 8)\n"
	"    return struct.pack('<Q', len(j)) + j + data\n"
	"model, opt, at = [], [], 0\n"
	"for name, shape in tab:\n"
	"    k = 1\n"
	"    for s in shape: k *= s\n"
	"    sl = slice(4 * at, 4 * (at + k)); at += k\n"
	"    model.append((name, shape, P[sl]))\n"
	"    opt += [(name + '.exp_avg', shape, M[sl]), (name + '.exp_avg_sq', shape, V[sl])]\n"
	"bad = 0\n"
	"for f, ts in (('model.safetensors', model), ('optimizer.safetensors', opt)):\n"
	"    if open(d + '/' + f, 'rb').read() != st(ts):\n"
	"        print('# ' + f + ' is not the spec layout'); bad = 1\n"
	"T = []\n"
	"for i in range(256):\n"
	"    c = i\n"
	"    for _ in range(8): c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1\n"
	"    T.append(c)\n"
	"def crc(x):\n"
	"    c = 0xFFFFFFFF\n"
	"    for y in x: c = T[(c ^ y) & 0xFF] ^ (c >> 8)\n"
	"    return c ^ 0xFFFFFFFF\n"
	"files = json.load(open(d + '/state.json'))['files']\n"
	"for f, r in files.items():\n"
	"    x = open(d + '/' + f, 'rb').read()\n"
	"    if r != {'bytes': len(x), 'crc32c': '%08x' % crc(x)}:\n"
	"        print('# state.json: ' + f + ': ' + str(r)); bad = 1\n"
	"sys.exit(bad)\n";

static int python_golden(const char *stepdir)
{
	char cmd[4096];
	FILE *f = fopen(tap_path("raw.bin"), "wb");
	fwrite(param, 4, total, f);
	fwrite(adam_m, 4, total, f);
	fwrite(adam_v, 4, total, f);
	fclose(f);
	f = fopen(tap_path("table.json"), "w");
	for (size_t i = 0; i < nt; i++) {
		fprintf(f, "%s[\"%s\", [%lld", i ? ", " : "[", tab[i].name, (long long)tab[i].shape[0]);
		if (tab[i].ndim > 1)
			fprintf(f, ", %lld", (long long)tab[i].shape[1]);
		fprintf(f, "]]");
	}
	fprintf(f, "]\n");
	fclose(f);
	f = fopen(tap_path("golden.py"), "w");
	fputs(golden_py, f);
	fclose(f);
	snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s' '%s' '%s'", tap_path("golden.py"),
		 stepdir, tap_path("raw.bin"), tap_path("table.json"));
	return system(cmd);
}

/* Three ranks with uneven slices (empty ones, a tensor cut mid-row),
 * writing in any order: the very directory loom_ckpt_write makes, which is
 * the layout of the safetensors spec; it loads with the usual loader. */
static void case_sharded_save(void)
{
	struct loom_err err = {0};
	struct gathered *g = malloc(sizeof *g);
	char ref[600], out[600], a[700], b[700];
	reset_values();
	snprintf(ref, sizeof ref, "%s/whole", root);
	struct loom_ckpt_save s = base_save(ref, 7);
	add_extras(&s);
	is_int(loom_ckpt_write(&s, NULL, 0, &err), 0, "sharded: loom_ckpt_write's checkpoint");
	snprintf(a, sizeof a, "%s/step-00000007", ref);
	is_int(python_golden(a), 0, "sharded: loom_ckpt_write's files are the spec's layout "
	       "(python), state.json's CRC-32Cs python's");

	static const int orders[][3] = { {2, 0, 1}, {1, 2, 0} };
	for (int kind = 0; kind < 3; kind++) {
		char d[600];
		snprintf(d, sizeof d, "%s/shard%d", root, kind);
		int rc = sliced_begin(g, d, 7, kind, 3, orders[kind & 1], &err);
		is_int(rc, 0, "sharded %d: begin + 3 ranks' write_slices: %s", kind,
		       rc ? err.msg : "");
		if (rc == 0) {
			/* rank 0 receives them in any order */
			for (size_t k = 0; k < g->n / 2; k++) {
				struct loom_ckpt_piece t = g->p[k];
				g->p[k] = g->p[g->n - 1 - k];
				g->p[g->n - 1 - k] = t;
			}
			rc = loom_ckpt_write_commit(g->tx, g->p, g->n, out, sizeof out, &err);
			is_int(rc, 0, "sharded %d: commit: %s", kind, rc ? err.msg : "");
		}
		loom_ckpt_tx_free(g->tx);
		snprintf(b, sizeof b, "%s/step-00000007", d);
		is_str(out, b, "sharded %d: commit returns the step directory", kind);
		ok(same_dirs(a, b), "sharded %d: byte-identical to loom_ckpt_write's", kind);
		is_int(tap_count_dir(d, "."), 0, "sharded %d: no temporary debris", kind);
		if (kind == 0)
			ok(g->per_rank[0] > 0 && g->per_rank[1] > 0 && g->per_rank[2] > 0,
			   "sharded 0: every rank wrote pieces (%zu, %zu, %zu)", g->per_rank[0],
			   g->per_rank[1], g->per_rank[2]);
		/* a flat split: the model's run one piece, the optimizer's (m, v of
		 * each tensor in turn) at most 3: a cut tensor's tail of m, its tail
		 * of v + the whole tensors + the next cut one's head of m, its head
		 * of v */
		if (kind == 1)
			ok(g->per_rank[0] <= 4 && g->per_rank[1] <= 4 && g->per_rank[2] <= 4,
			   "sharded 1: a flat split: at most 4 pieces a rank, adjacent slices "
			   "merged (%zu, %zu, %zu)", g->per_rank[0], g->per_rank[1], g->per_rank[2]);
		if (kind == 2)
			ok(g->per_rank[0] == 2 && g->per_rank[1] == 0 && g->per_rank[2] == 0,
			   "sharded 2: whole tensors: one piece a file (%zu, %zu, %zu)",
			   g->per_rank[0], g->per_rank[1], g->per_rank[2]);
	}
	snprintf(b, sizeof b, "%s/shard0", root);
	struct loom_ckpt *c = loom_ckpt_open(b, &loom_gpt_ckpt_arch, 0, &err);
	struct rank rk;
	rank_view(&rk, 2, 1, 0, 0);
	ok(c && loom_ckpt_load_model(c, rk.t, nt) == 0 &&
	   loom_ckpt_load_optimizer(c, rk.t, nt, rk.mp, rk.vp) == 0 &&
	   !memcmp(rk.p, param, total * 4) && !memcmp(rk.m, adam_m, total * 4) &&
	   !memcmp(rk.v, adam_v, total * 4),
	   "sharded: the usual loader reads it, verified, bit-identical: %s",
	   c ? loom_ckpt_error(c) : err.msg);
	free(rk.p);
	loom_ckpt_free(c);
	free(g);
}

/* A rank writing its slices in several sets (loom_dist: one a bucket):
 * slices_open once, a put per set with that set's moments (an empty
 * slice's NULL), slices_finish once: the same directory byte for byte. */
static void case_sharded_puts(void)
{
	struct loom_err err = {0};
	struct gathered *g = malloc(sizeof *g);
	char d[600], a[700], b[700];
	snprintf(d, sizeof d, "%s/puts", root);
	struct loom_ckpt_save s = base_save(d, 7);
	add_extras(&s);
	memset(g, 0, sizeof *g);
	int rc = loom_ckpt_write_begin(&s, &g->tx, &err);
	for (int r = 0; rc == 0 && r < 3; r++) {
		struct rank rk;
		struct loom_ckpt_slices *w;
		rank_view(&rk, 0, 3, r, 1);
		struct loom_ckpt_save rs = s;
		rs.tensors = rk.t;
		rs.adam_m = rk.mp;
		rs.adam_v = rk.vp;
		rc = loom_ckpt_slices_open(loom_ckpt_tx_dir(g->tx), &rs, &w, &err);
		for (int set = 0; rc == 0 && set < 2; set++) {
			/* set 0: the first half of the tensors, set 1 the rest */
			uint64_t lo[MAXT], hi[MAXT];
			float *m[MAXT], *v[MAXT];
			for (size_t i = 0; i < nt; i++) {
				int mine = (i < nt / 2) == !set;
				lo[i] = mine ? rk.lo[i] : 0;
				hi[i] = mine ? rk.hi[i] : 0;
				m[i] = lo[i] < hi[i] ? rk.mp[i] : NULL;
				v[i] = lo[i] < hi[i] ? rk.vp[i] : NULL;
			}
			size_t np = LOOM_CKPT_MAX_PIECES(nt);
			rc = loom_ckpt_slices_put(w, lo, hi, m, v, g->p + g->n, &np, &err);
			g->n += np;
		}
		int rc2 = loom_ckpt_slices_finish(w, &err);
		rc = rc ? rc : rc2;
		free(rk.p);
	}
	is_int(rc, 0, "puts: 3 ranks, 2 sets each: %s", rc ? err.msg : "");
	if (rc == 0) {
		rc = loom_ckpt_write_commit(g->tx, g->p, g->n, NULL, 0, &err);
		is_int(rc, 0, "puts: commit: %s", rc ? err.msg : "");
	}
	loom_ckpt_tx_free(g->tx);
	snprintf(a, sizeof a, "%s/whole/step-00000007", root);
	snprintf(b, sizeof b, "%s/step-00000007", d);
	ok(same_dirs(a, b), "puts: byte-identical to loom_ckpt_write's");
	is_int(loom_ckpt_slices_finish(NULL, &err), 0, "slices_finish(NULL): nothing");
	free(g);
}

/* Rank r of 2's runs (tensor parallelism's layout): of each matrix the
 * r-th half of every row, the vectors whole on rank 0, each run's
 * weights and moments packed in the rank's own arrays p, m, v (NULL: only
 * counts).  Returns the count. */
static size_t half_rows(int r, struct loom_ckpt_run *run, float *p, float *m, float *v)
{
	size_t n = 0, at = 0;
	for (size_t i = 0; i < nt; i++) {
		uint64_t rows = tab[i].ndim > 1 ? (uint64_t)tab[i].shape[0] : 1, w = numel_of(i) / rows;
		if (rows == 1 && r)
			continue;
		uint64_t a = rows == 1 ? 0 : w / 2 * (uint64_t)r, len = rows == 1 ? w : w / 2;
		for (uint64_t row = 0; row < rows; row++, n++, at += len) {
			if (!run)
				continue;
			run[n] = (struct loom_ckpt_run){ .tensor = i, .lo = row * w + a, .n = len,
							 .w = p + at, .m = m + at, .v = v + at };
			size_t o = (size_t)(tab[i].data - param) + row * w + a;
			memcpy(p + at, param + o, len * 4);
			memcpy(m + at, adam_m + o, len * 4);
			memcpy(v + at, adam_v + o, len * 4);
		}
	}
	return n;
}

/* Two ranks each holding half of every row of the matrices in their own
 * layout (tensor parallelism) write their runs: the very directory
 * loom_ckpt_write makes; each reads its runs back, and only them. */
static void case_runs(void)
{
	struct loom_err err = {0};
	struct gathered *g = malloc(sizeof *g);
	struct loom_ckpt_run *run[2];
	float *buf[2];
	size_t nr[2];
	char d[600], a[700], b[700];
	snprintf(d, sizeof d, "%s/runs", root);
	struct loom_ckpt_save s = base_save(d, 7);
	add_extras(&s);
	memset(g, 0, sizeof *g);
	reset_values();
	int rc = loom_ckpt_write_begin(&s, &g->tx, &err);
	for (int r = 0; r < 2; r++) {
		nr[r] = half_rows(r, NULL, NULL, NULL, NULL);
		run[r] = malloc(sizeof **run * nr[r]);
		buf[r] = malloc(3 * total * sizeof(float));
		for (size_t k = 0; k < 3 * total; k++)
			buf[r][k] = POISON;
		half_rows(r, run[r], buf[r], buf[r] + total, buf[r] + 2 * total);
	}
	struct loom_ckpt_piece *pc = malloc(sizeof *pc * 3 * (nr[0] + nr[1]));
	size_t np = 0;
	for (int r = 1; rc == 0 && r >= 0; r--) {
		struct loom_ckpt_slices *w;
		size_t n = 3 * nr[r];
		rc = loom_ckpt_slices_open(loom_ckpt_tx_dir(g->tx), &s, &w, &err);
		if (rc == 0)
			rc = loom_ckpt_slices_put_runs(w, run[r], nr[r], pc + np, &n, &err);
		int rc2 = loom_ckpt_slices_finish(w, rc ? NULL : &err);
		rc = rc ? rc : rc2;
		np += n;
	}
	is_int(rc, 0, "runs: 2 ranks' halves of every row: %s", rc ? err.msg : "");
	if (rc == 0) {
		rc = loom_ckpt_write_commit(g->tx, pc, np, NULL, 0, &err);
		is_int(rc, 0, "runs: commit: %s", rc ? err.msg : "");
	}
	loom_ckpt_tx_free(g->tx);
	snprintf(a, sizeof a, "%s/whole/step-00000007", root);
	snprintf(b, sizeof b, "%s/step-00000007", d);
	ok(same_dirs(a, b), "runs: byte-identical to loom_ckpt_write's");

	struct loom_ckpt *c = loom_ckpt_open(b, &loom_gpt_ckpt_arch, 0, &err);
	for (int r = 0; r < 2; r++) {
		float *want = malloc(3 * total * sizeof(float));
		memcpy(want, buf[r], 3 * total * sizeof(float));
		for (size_t k = 0; k < 3 * total; k++)
			buf[r][k] = POISON;
		ok(c && loom_ckpt_load_runs(c, tab, nt, run[r], nr[r], 1) == 0 &&
		   !memcmp(want, buf[r], 3 * total * sizeof(float)),
		   "runs: rank %d reads its runs of the weights and moments back: %s", r,
		   c ? loom_ckpt_error(c) : err.msg);
		free(want);
	}
	run[0][0].lo = numel_of(0) - 1;
	is_int(c ? loom_ckpt_load_runs(c, tab, nt, run[0], 1, 0) : 0, LOOM_EINVAL,
	       "runs: a run past its tensor's end refused");
	ok(c && strstr(loom_ckpt_error(c), "slice [127, 131) of tensor 'transformer.wte.weight' "
		       "is not within its 128 elements"), "  naming the tensor: %s",
	   c ? loom_ckpt_error(c) : "");
	loom_ckpt_free(c);
	for (int r = 0; r < 2; r++) {
		free(run[r]);
		free(buf[r]);
	}
	free(pc);
	free(g);
}

/* Pieces that leave a gap or overlap are refused, naming the file and the
 * byte; freeing the transaction leaves the previous checkpoint. */
static void case_sharded_refusals(void)
{
	struct loom_err err = {0};
	struct gathered *g = malloc(sizeof *g);
	char d[600], want[1200], link[512], p[700];
	snprintf(d, sizeof d, "%s/refuse", root);
	struct loom_ckpt_save s = base_save(d, 1);
	is_int(loom_ckpt_write(&s, NULL, 0, &err), 0, "sharded refusals: a previous checkpoint");
	is_int(sliced_begin(g, d, 2, 0, 3, NULL, &err), 0, "sharded refusals: 3 ranks wrote");
	const char *tmp = loom_ckpt_tx_dir(g->tx);
	ok(strstr(tmp, "/.step-00000002.tmp-") != NULL, "tx dir is the temp step dir: %s", tmp);

	/* a gap: a piece of the optimizer's missing */
	size_t k = 0;
	while (k < g->n && g->p[k].file != LOOM_CKPT_OPTIMIZER_FILE)
		k++;
	struct loom_ckpt_piece gone = g->p[k];
	g->p[k] = g->p[--g->n];
	is_int(loom_ckpt_write_commit(g->tx, g->p, g->n, NULL, 0, &err), LOOM_EFORMAT,
	       "a gap in the pieces refused");
	snprintf(want, sizeof want, "%s/optimizer.safetensors: bytes %llu..%llu were written by "
		 "no process (a gap in the pieces at byte %llu)", tmp,
		 (unsigned long long)gone.off, (unsigned long long)(gone.off + gone.len),
		 (unsigned long long)gone.off);
	is_str(err.msg, want, "  one line naming the file and the byte");
	g->p[g->n++] = gone;

	/* an overlap: a model piece written twice in part */
	k = 0;
	while (k < g->n && (g->p[k].file != LOOM_CKPT_MODEL_FILE || g->p[k].len < 12))
		k++;
	g->p[g->n] = g->p[k];
	g->p[g->n].off += 4;
	g->p[g->n++].len = 8;
	is_int(loom_ckpt_write_commit(g->tx, g->p, g->n, NULL, 0, &err), LOOM_EFORMAT,
	       "overlapping pieces refused");
	snprintf(want, sizeof want, "%s/model.safetensors: the pieces overlap at byte %llu "
		 "(bytes %llu..%llu are written twice)", tmp,
		 (unsigned long long)g->p[k].off + 4, (unsigned long long)g->p[k].off + 4,
		 (unsigned long long)g->p[k].off + 12);
	is_str(err.msg, want, "  one line naming the file and the byte");
	g->n--;

	/* a piece past the end, of no file */
	g->p[g->n] = g->p[g->n - 1];
	g->p[g->n].file = 2;
	is_int(loom_ckpt_write_commit(g->tx, g->p, g->n + 1, NULL, 0, &err), LOOM_EINVAL,
	       "a piece of another file refused: %s", err.msg);

	/* a piece past the end of the file */
	struct stat sb;
	snprintf(p, sizeof p, "%s/optimizer.safetensors", tmp);
	long long size = stat(p, &sb) == 0 ? (long long)sb.st_size : 0;
	g->p[g->n] = (struct loom_ckpt_piece){ .file = LOOM_CKPT_OPTIMIZER_FILE,
					       .off = (uint64_t)size - 4, .len = 8 };
	is_int(loom_ckpt_write_commit(g->tx, g->p, g->n + 1, NULL, 0, &err), LOOM_EFORMAT,
	       "a piece past the file's end refused");
	snprintf(want, sizeof want, "%s: a piece at byte %lld of 8 bytes ends past the file's "
		 "%lld bytes", p, size - 4, size);
	is_str(err.msg, want, "  naming the file and the byte");

	/* freed uncommitted: no temp dir, the previous checkpoint intact */
	loom_ckpt_tx_free(g->tx);
	is_int(tap_count_dir(d, "."), 0, "a tx freed before commit leaves no temp dir");
	snprintf(p, sizeof p, "%s/latest", d);
	ssize_t ll = readlink(p, link, sizeof link - 1);
	link[ll > 0 ? ll : 0] = '\0';
	is_str(link, "step-00000001", "  and latest as it was");
	struct loom_ckpt *c = loom_ckpt_open(d, &loom_gpt_ckpt_arch, 0, &err);
	ok(c && loom_ckpt_state(c)->step == 1 && tap_count_dir(d, "step-") == 1,
	   "  and the previous checkpoint, verified: %s", c ? "" : err.msg);
	loom_ckpt_free(c);

	/* begun, half written, freed */
	struct loom_ckpt_tx *tx;
	is_int(loom_ckpt_write_begin(&s, &tx, &err), 0, "begin a save of step 1 again");
	struct rank rk;
	rank_view(&rk, 1, 2, 1, 1);
	struct loom_ckpt_save rs = s;
	rs.tensors = rk.t;
	rs.adam_m = rk.mp;
	rs.adam_v = rk.vp;
	size_t np = LOOM_CKPT_MAX_PIECES(nt);
	is_int(loom_ckpt_write_slices(loom_ckpt_tx_dir(tx), &rs, rk.lo, rk.hi, g->p, &np, &err),
	       0, "one rank of two wrote");
	loom_ckpt_tx_free(tx);
	is_int(tap_count_dir(d, "."), 0, "  freed: no temp dir");
	c = loom_ckpt_open(d, &loom_gpt_ckpt_arch, 0, &err);
	ok(c && loom_ckpt_load_model(c, tab, nt) == 0, "  step 1 untouched, verified: %s",
	   c ? loom_ckpt_error(c) : err.msg);
	loom_ckpt_free(c);

	/* a rank whose table is not the one begun: the header differs */
	s.state.step = 3;
	is_int(loom_ckpt_write_begin(&s, &tx, &err), 0, "begin step 3");
	rs.state.step = 4;
	np = LOOM_CKPT_MAX_PIECES(nt);
	is_int(loom_ckpt_write_slices(loom_ckpt_tx_dir(tx), &rs, rk.lo, rk.hi, g->p, &np, &err),
	       LOOM_EINVAL, "a rank of another table refused");
	snprintf(want, sizeof want, "%s/model.safetensors: its header is not this tensor table's",
		 loom_ckpt_tx_dir(tx));
	ok(strstr(err.msg, want) != NULL, "  naming the file: %s", err.msg);
	rs.state.step = 3;
	rk.hi[3] = numel_of(3) + 1;
	np = LOOM_CKPT_MAX_PIECES(nt);
	is_int(loom_ckpt_write_slices(loom_ckpt_tx_dir(tx), &rs, rk.lo, rk.hi, g->p, &np, &err),
	       LOOM_EINVAL, "a slice past its tensor refused");
	snprintf(want, sizeof want, "slice [%llu, %llu) of '%s' is not within its %llu elements",
		 (unsigned long long)rk.lo[3], (unsigned long long)numel_of(3) + 1, tab[3].name,
		 (unsigned long long)numel_of(3));
	ok(strstr(err.msg, want) != NULL, "  naming the tensor: %s", err.msg);
	loom_ckpt_tx_free(tx);
	free(rk.p);

	/* kill -9 of a rank mid-save: the previous checkpoint stays, the next
	 * save removes the debris */
	pid_t pid = fork();
	if (pid == 0) {
		struct gathered *h = malloc(sizeof *h);
		sliced_begin(h, d, 5, 0, 3, NULL, &err);
		raise(SIGKILL);
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "a save killed (SIGKILL) before commit");
	ll = readlink(p, link, sizeof link - 1);
	link[ll > 0 ? ll : 0] = '\0';
	is_str(link, "step-00000001", "  latest as it was");
	is_int(tap_count_dir(d, ".step-00000005.tmp-"), 1, "  its temp dir left behind");
	c = loom_ckpt_open(d, &loom_gpt_ckpt_arch, 0, &err);
	ok(c && loom_ckpt_load_model(c, tab, nt) == 0 &&
	   loom_ckpt_load_optimizer(c, tab, nt, mp, vp) == 0, "  step 1 loads, verified: %s",
	   c ? loom_ckpt_error(c) : err.msg);
	loom_ckpt_free(c);
	is_int(sliced_begin(g, d, 6, 1, 2, NULL, &err), 0, "the next save, by 2 ranks");
	int rc = loom_ckpt_write_commit(g->tx, g->p, g->n, NULL, 0, &err);
	is_int(rc, 0, "  commits: %s", rc ? err.msg : "");
	loom_ckpt_tx_free(g->tx);
	is_int(tap_count_dir(d, "."), 0, "  and removed the killed save's debris");
	free(g);
}

static void case_optimizer_verified_once(const char *d);

/* Sliced loads: each rank of several slicings gets exactly its slices
 * (nothing else of its buffers written), together the whole tensors. */
static void case_sliced_loads(void)
{
	struct loom_err err = {0};
	char d[600];
	snprintf(d, sizeof d, "%s/shard0", root);
	struct loom_ckpt *c = loom_ckpt_open(d, &loom_gpt_ckpt_arch, 0, &err);
	ok(c != NULL, "sliced loads: open: %s", c ? "" : err.msg);
	if (!c)
		return;
	static const int kinds[][2] = { {0, 3}, {1, 2}, {1, 4}, {2, 3} };
	float *all = malloc(3 * total * sizeof(float));
	for (size_t s = 0; s < sizeof kinds / sizeof *kinds; s++) {
		int kind = kinds[s][0], n = kinds[s][1], good = 1, rc = 0;
		for (size_t k = 0; k < 3 * total; k++)
			all[k] = POISON;
		for (int r = 0; r < n; r++) {
			struct rank rk;
			rank_view(&rk, kind, n, r, 0);
			if ((rc = loom_ckpt_load_model_slices(c, rk.t, nt, rk.lo, rk.hi)) < 0 ||
			    (rc = loom_ckpt_load_optimizer_slices(c, rk.t, nt, rk.mp, rk.vp, rk.lo,
								  rk.hi)) < 0)
				diag("rank %d: %s", r, loom_ckpt_error(c));
			for (size_t i = 0; i < nt; i++) {
				size_t off = (size_t)(tab[i].data - param);
				for (uint64_t e = 0; e < numel_of(i); e++)
					for (int q = 0; q < 3; q++) {
						float x = rk.p[q * total + off + e];
						if (e >= rk.lo[i] && e < rk.hi[i])
							all[q * total + off + e] = x;
						else
							good &= x == POISON;
					}
			}
			free(rk.p);
		}
		is_int(rc, 0, "sliced loads %d/%d ranks: loaded", kind, n);
		ok(good, "sliced loads %d/%d ranks: nothing outside a rank's slices written", kind,
		   n);
		ok(!memcmp(all, param, total * 4) && !memcmp(all + total, adam_m, total * 4) &&
		   !memcmp(all + 2 * total, adam_v, total * 4),
		   "sliced loads %d/%d ranks: together, the whole weights and moments", kind, n);
	}
	free(all);
	struct rank rk;
	rank_view(&rk, 2, 1, 0, 0);
	rk.hi[nt - 1] = numel_of(nt - 1) + 1;
	is_int(loom_ckpt_load_model_slices(c, rk.t, nt, rk.lo, rk.hi), LOOM_EINVAL,
	       "a slice past its tensor refused");
	ok(strstr(loom_ckpt_error(c), "model.safetensors: slice [0, 9) of tensor "
		  "'transformer.ln_f.bias' is not within its 8 elements") != NULL,
	   "  naming the tensor: %s", loom_ckpt_error(c));
	tab[0].shape[1] = C + 1;
	rk.t[0].shape[1] = C + 1;
	rk.hi[nt - 1] = numel_of(nt - 1);
	is_int(loom_ckpt_load_model_slices(c, rk.t, nt, rk.lo, rk.hi), LOOM_EFORMAT,
	       "the shapes are checked as for a whole load");
	tab[0].shape[1] = C;
	free(rk.p);
	loom_ckpt_free(c);
	case_optimizer_verified_once(d);
}

/* A caller loading the moments by several calls (loom_dist_load: one a
 * bucket) has optimizer.safetensors read and checked once per open, not
 * at every call: a byte changed after the first call goes unseen by the
 * later ones (a fresh open still finds it). */
static void case_optimizer_verified_once(const char *d)
{
	struct loom_err err = {0};
	struct rank rk;
	char p[700];
	const float x = 0.25f, *y = &x;
	snprintf(p, sizeof p, "%s/latest/optimizer.safetensors", d);
	struct loom_ckpt *c = loom_ckpt_open(d, &loom_gpt_ckpt_arch, 0, &err);
	rank_view(&rk, 1, 2, 0, 0);
	ok(c && loom_ckpt_load_optimizer_slices(c, rk.t, nt, rk.mp, rk.vp, rk.lo, rk.hi) == 0,
	   "verified once: the first call reads and checks the file: %s",
	   c ? loom_ckpt_error(c) : err.msg);
	struct stat sb;
	int fd = open(p, O_RDWR);
	float old = 0;
	ok(fd >= 0 && fstat(fd, &sb) == 0 && pread(fd, &old, 4, sb.st_size - 4) == 4 &&
	   pwrite(fd, y, 4, sb.st_size - 4) == 4, "  the file's last moment changed");
	free(rk.p);
	rank_view(&rk, 1, 2, 1, 0);
	ok(c && loom_ckpt_load_optimizer_slices(c, rk.t, nt, rk.mp, rk.vp, rk.lo, rk.hi) == 0,
	   "  the second call does not read the whole file again: %s",
	   c ? loom_ckpt_error(c) : "");
	loom_ckpt_free(c);
	c = loom_ckpt_open(d, &loom_gpt_ckpt_arch, 0, &err);
	ok(c && loom_ckpt_load_optimizer_slices(c, rk.t, nt, rk.mp, rk.vp, rk.lo, rk.hi) ==
	   LOOM_EFORMAT && strstr(loom_ckpt_error(c), "checksum mismatch"),
	   "  a fresh open checks it again: %s", c ? loom_ckpt_error(c) : err.msg);
	loom_ckpt_free(c);
	ok(fd >= 0 && pwrite(fd, &old, 4, sb.st_size - 4) == 4, "  restored");
	if (fd >= 0)
		close(fd);
	free(rk.p);
}

/* A non-finite value inside one's slice is refused, naming the tensor;
 * one outside it is another rank's. */
static void case_sliced_non_finite(void)
{
	struct loom_err err = {0};
	char p[600];
	struct rank rk;
	rank_view(&rk, 2, 1, 0, 0);	/* whole tensors ... */
	snprintf(p, sizeof p, "%s/nan/step-00000001", root);	/* ln_f.bias[5] is NaN */
	struct loom_ckpt *c = loom_ckpt_open(p, &loom_gpt_ckpt_arch, 0, &err);
	rk.hi[nt - 1] = 5;	/* ... but of ln_f.bias elements [0, 5) */
	ok(c && loom_ckpt_load_model_slices(c, rk.t, nt, rk.lo, rk.hi) == 0,
	   "a NaN outside the slice: loads: %s", c ? loom_ckpt_error(c) : err.msg);
	rk.lo[nt - 1] = 4;
	rk.hi[nt - 1] = 8;
	ok(c && loom_ckpt_load_model_slices(c, rk.t, nt, rk.lo, rk.hi) == LOOM_EFORMAT &&
	   strstr(loom_ckpt_error(c), "model.safetensors: the checkpoint holds non-finite values: "
		  "tensor 'transformer.ln_f.bias' element 5 is nan"),
	   "a NaN inside the slice refused, naming the tensor and element: %s",
	   c ? loom_ckpt_error(c) : err.msg);
	loom_ckpt_free(c);
	snprintf(p, sizeof p, "%s/nan/step-00000002", root);	/* exp_avg_sq of wte [0] is inf */
	c = loom_ckpt_open(p, &loom_gpt_ckpt_arch, 0, &err);
	rk.lo[nt - 1] = 0;
	rk.lo[0] = 1;
	ok(c && loom_ckpt_load_optimizer_slices(c, rk.t, nt, rk.mp, rk.vp, rk.lo, rk.hi) == 0,
	   "an infinite moment outside the slice: loads: %s", c ? loom_ckpt_error(c) : err.msg);
	rk.lo[0] = 0;
	rk.hi[0] = 1;
	ok(c && loom_ckpt_load_optimizer_slices(c, rk.t, nt, rk.mp, rk.vp, rk.lo, rk.hi) ==
	   LOOM_EFORMAT && strstr(loom_ckpt_error(c), "optimizer.safetensors: the checkpoint "
				  "holds non-finite values: tensor "
				  "'transformer.wte.weight.exp_avg_sq' element 0 is inf"),
	   "an infinite moment inside the slice refused: %s", c ? loom_ckpt_error(c) : err.msg);
	loom_ckpt_free(c);
	free(rk.p);
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
	case_save_as();
	case_write_copy();
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
	case_sharded_save();
	case_sharded_puts();
	case_runs();
	case_sharded_refusals();
	case_sliced_loads();
	case_sliced_non_finite();
	free(param);
	free(adam_m);
	free(adam_v);
	return done_testing();
}
