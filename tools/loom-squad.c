/* loom-squad - SQuAD v1.1 for BERT: `prepare` writes a SQuAD file's
 * question + context-window features (lib/data/loom_squad.h) as TFRecord
 * shards of tf.train.Example with Google run_squad.py's feature names, an
 * index beside each and a manifest (formats/squad-features.md), committed
 * as one set (lib/data/loom_shardset.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "loom_example.h"
#include "loom_file.h"
#include "loom_hash.h"
#include "loom_shardset.h"
#include "loom_squad.h"
#include "loom_tfrecord.h"
#include "loom_wordpiece.h"

static const char usage_main[] =
"usage: loom-squad prepare [options] --vocab V FILE.json -o PREFIX\n"
"SQuAD v1.1 for BERT.\n"
"  prepare  questions -> features as TFRecord shards  (loom-squad prepare --help)\n"
"  -h, --help      this help;   -V, --version   versions\n";

/* Google's run_squad.py: unique_id = 1000000000 + the feature's index. */
#define UNIQUE_ID_BASE 1000000000

/* The features of a record, in the order written (formats/squad-features.md). */
enum { F_UNIQUE, F_IDS, F_MASK, F_SEG, F_START, F_END, F_IMPOSSIBLE, F_EXAMPLE, F_DOC_START,
       F_TOK_START, F_TOK_END, F_N };
static const char *const feature_names[F_N] = {
	"unique_ids", "input_ids", "input_mask", "segment_ids", "start_positions",
	"end_positions", "is_impossible", "example_index", "doc_start", "token_start",
	"token_end",
};
static int per_token(int k)
{
	return k == F_IDS || k == F_MASK || k == F_SEG || k == F_TOK_START || k == F_TOK_END;
}

static struct {
	const char *vocab, *prefix;
	uint64_t seq, stride, max_query, shards;
	int no_sha256;
} o = { .seq = 384, .stride = 128, .max_query = 64, .shards = 1 };

static const struct cli_opt prepare_opts[] = {
	OPT_STRING(0, "vocab", &o.vocab, "V",
		   "bert-base-uncased (shipped), a vocab.txt, a\n"
		   "directory holding one or a tokenizer.json (required)"),
	OPT_STRING('o', "output", &o.prefix, "PREFIX", "output prefix (required)"),
	OPT_U64(0, "seq", &o.seq, "N", 8, 1u << 16, "tokens per feature (default: 384)"),
	OPT_U64(0, "stride", &o.stride, "N", 1, 1u << 16,
		"a context window starts every N tokens\n(run_squad.py's doc_stride; default: 128)"),
	OPT_U64(0, "max-query", &o.max_query, "N", 1, 1u << 16,
		"question tokens kept (default: 64)"),
	OPT_CASING(),
	OPT_U64('n', "shards", &o.shards, "N", 1, 99999,
		"N shards, feature r in shard r mod N (default: 1)"),
	OPT_BOOL(0, "no-sha256", &o.no_sha256, "do not hash the shards (sha256 null in the manifest)"),
	OPT_VERBOSE("the vocabulary and the file read (questions,\nparagraphs, features)"),
	OPT_QUIET(NULL, "no summary line"),
	OPT_END()
};

static const struct cli_cmd prepare_cmd = {
	.prog = "loom-squad",
	.usage = "usage: loom-squad prepare --vocab V [options] FILE.json -o PREFIX\n"
		 "Turn every question of a SQuAD v1.1 file into BERT features ([CLS] question\n"
		 "[SEP] context window [SEP] [PAD]...) and write one tf.train.Example a feature\n"
		 "(run_squad.py's unique_ids input_ids input_mask segment_ids start_positions\n"
		 "end_positions is_impossible, and example_index doc_start token_start token_end)\n"
		 "as PREFIX-00000-of-0000N.tfrecord shards, each with its .index, and\n"
		 "PREFIX.manifest.json (formats/squad-features.md).\n",
	.opts = prepare_opts,
	.footer = "The manifest is the commit point: it always names a complete set, the old\n"
		  "one or the new one, even if the run is killed; on error nothing is left.\n",
	.version = loom_tfr_versions,
};

/* The record of feature i into out (room for loom_example_bound_i64s). */
static size_t encode_feature(const struct loom_squad *sq, const struct loom_squad_features *fs,
			     size_t i, int64_t *v, uint8_t *out)
{
	const struct loom_squad_feature *f = &fs->f[i];
	size_t seq = fs->seq, para = sq->qas[f->qa].para;
	const uint64_t *ts = fs->tok_start + fs->ctx_off[para] + f->ctx_first;
	const uint64_t *te = fs->tok_end + fs->ctx_off[para] + f->ctx_first;
	struct loom_example_i64 fe[F_N];
	int64_t *p = v;
	for (int k = 0; k < F_N; k++) {
		fe[k] = (struct loom_example_i64){ feature_names[k], p, per_token(k) ? seq : 1 };
		p += fe[k].n;
	}
	int64_t *ids = (int64_t *)fe[F_IDS].v, *mask = (int64_t *)fe[F_MASK].v;
	int64_t *seg = (int64_t *)fe[F_SEG].v, *tst = (int64_t *)fe[F_TOK_START].v;
	int64_t *ten = (int64_t *)fe[F_TOK_END].v;
	for (size_t t = 0; t < seq; t++) {
		ids[t] = fs->input_ids[i * seq + t];
		seg[t] = fs->segment_ids[i * seq + t];
		mask[t] = t < f->n_tokens;
		size_t c = t - f->doc_start; /* wraps below doc_start */
		tst[t] = c < f->ctx_len ? (int64_t)ts[c] : -1;
		ten[t] = c < f->ctx_len ? (int64_t)te[c] : -1;
	}
	*(int64_t *)fe[F_UNIQUE].v = UNIQUE_ID_BASE + (int64_t)i;
	*(int64_t *)fe[F_START].v = f->start;
	*(int64_t *)fe[F_END].v = f->end;
	*(int64_t *)fe[F_IMPOSSIBLE].v = 0;
	*(int64_t *)fe[F_EXAMPLE].v = f->qa;
	*(int64_t *)fe[F_DOC_START].v = f->doc_start;
	return loom_example_encode_i64s(fe, F_N, out);
}

static json_t *feature_table(uint64_t seq)
{
	json_t *a = json_array();
	for (int k = 0; a && k < F_N; k++)
		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:I}", "name", feature_names[k],
						   "shape", per_token(k) ? "token" : "record",
						   "dtype", "int64",
						   "length", (json_int_t)(per_token(k) ? seq : 1)));
	return a;
}

/* The manifest's object, "shards" (null) to be filled by the commit. */
static json_t *manifest(const struct loom_squad *sq, const struct loom_squad_features *fs,
			const struct loom_wordpiece *w,
			const char *file, const char *file_sha, const char *vocab_sha,
			size_t answered, int argc, char **argv)
{
	json_t *m = json_object(), *cmd = json_array();
	if (!m || !cmd) {
		json_decref(m);
		json_decref(cmd);
		return NULL;
	}
	for (int i = 0; i < argc; i++)
		json_array_append_new(cmd, json_string(argv[i]));
	json_object_set_new(m, "format", json_string("loom-tfrecord-shards"));
	json_object_set_new(m, "schema_version", json_integer(1));
	json_object_set_new(m, "kind", json_string("squad-features"));
	json_object_set_new(m, "kind_version", json_integer(1));
	json_object_set_new(m, "feature", json_string("input_ids"));
	json_object_set_new(m, "features", feature_table(o.seq));
	json_object_set_new(m, "seq_len", json_integer((json_int_t)o.seq));
	json_object_set_new(m, "stride", json_integer((json_int_t)o.stride));
	json_object_set_new(m, "max_query", json_integer((json_int_t)o.max_query));
	json_object_set_new(m, "lowercase", json_boolean(loom_wordpiece_lowercases(w)));
	json_object_set_new(m, "vocab_size", json_integer(loom_wordpiece_size(w)));
	json_object_set_new(m, "vocab_sha256", json_string(vocab_sha));
	json_object_set_new(m, "source", json_string(loom_basename(file)));
	json_object_set_new(m, "source_sha256", json_string(file_sha));
	json_object_set_new(m, "source_version", sq->version ? json_string(sq->version) : json_null());
	json_object_set_new(m, "questions", json_integer((json_int_t)sq->n_qas));
	json_object_set_new(m, "records", json_integer((json_int_t)fs->n));
	json_object_set_new(m, "answers_in_window", json_integer((json_int_t)answered));
	json_object_set_new(m, "unique_id_base", json_integer(UNIQUE_ID_BASE));
	json_object_set_new(m, "shuffle", json_false());
	json_object_set_new(m, "sharding", json_string("round-robin"));
	json_object_set_new(m, "shards", json_null());
	json_object_set_new(m, "command", cmd);
	return m;
}

static struct loom_wordpiece *load_vocab(char *sha)
{
	struct loom_err err;
	struct loom_wordpiece *w = cli_wordpiece_open(o.vocab, cli_casing, NULL);
	if (loom_wordpiece_check_bert(w, loom_wordpiece_path(w)) < 0)
		cli_die("%s", loom_wordpiece_error(w));
	if (loom_hash_file_hex("sha256", loom_wordpiece_path(w), sha, &err) < 0)
		cli_die("%s", err.msg);
	return w;
}

static int prepare_main(int argc, char **argv)
{
	int first = cli_parse(&prepare_cmd, argc, argv);
	if (!o.vocab)
		cli_usage_error("--vocab is required (bert-base-uncased or a vocab.txt)");
	if (!o.prefix)
		cli_usage_error("-o PREFIX is required");
	if (first != argc - 1)
		cli_usage_error("expected one SQuAD file, got %d", argc - first);
	const char *file = argv[first];
	double t0 = loom_now();
	char vsha[LOOM_HASH_HEX_MAX], fsha[LOOM_HASH_HEX_MAX];
	struct loom_wordpiece *w = load_vocab(vsha);
	struct loom_squad *sq = loom_squad_new();
	if (!sq)
		cli_die("out of memory");
	/* read once: parsed, and its sha256 for the manifest */
	struct loom_err err;
	char *text;
	size_t tlen;
	if (loom_file_read_input(file, LOOM_SQUAD_MAX_FILE, &text, &tlen, &err) < 0)
		cli_die("%s", err.msg);
	if (loom_squad_load_mem(sq, text, tlen, file) < 0)
		cli_die("%s", loom_squad_error(sq));
	if (loom_hash_buf_hex("sha256", text, tlen, fsha, &err) < 0)
		cli_die("%s", err.msg);
	free(text);
	struct loom_squad_feature_opts fo = { (uint32_t)o.seq, (uint32_t)o.stride,
					      (uint32_t)o.max_query };
	struct loom_squad_features fs;
	if (loom_squad_features(sq, w, &fo, &fs) < 0)
		cli_die("%s: %s", file, loom_squad_error(sq));
	cli_info("%s: %zu questions, %zu paragraphs -> %zu features", file, sq->n_qas,
		 sq->n_paras, fs.n);

	struct loom_shardset_opts so = { .prefix = o.prefix, .who = "loom-squad",
					 .shards = o.shards, .no_sha256 = o.no_sha256 };
	so.commit_step = cli_test_kill_hook(&so.commit_step_ctx);
	if (loom_mkdir_parent(o.prefix, &err) < 0)
		cli_die("%s", err.msg);
	struct loom_shardset *set = loom_shardset_open(&so, &err);
	if (!set)
		cli_die("%s", err.msg);
	size_t nv = 5 * o.seq + 6, answered = 0;
	int64_t *v = malloc(nv * sizeof *v);
	struct loom_example_i64 bound[F_N];
	for (int k = 0; k < F_N; k++)
		bound[k] = (struct loom_example_i64){ feature_names[k], NULL,
						      per_token(k) ? o.seq : 1 };
	uint8_t *rec = malloc(loom_example_bound_i64s(bound, F_N));
	if (!v || !rec)
		cli_die("out of memory");
	for (size_t i = 0; i < fs.n; i++) {
		answered += fs.f[i].start != 0;
		size_t n = encode_feature(sq, &fs, i, v, rec);
		if (loom_shardset_put(set, rec, n, &err) < 0) {
			loom_shardset_free(set); /* removes what the run wrote */
			cli_die("%s", err.msg);
		}
	}
	free(v);
	free(rec);
	struct loom_shardset_result r;
	json_t *m = manifest(sq, &fs, w, file, fsha, vsha, answered, cli_argc,
			     cli_argv);
	if (loom_shardset_commit(set, m, &r, &err) < 0) {
		loom_shardset_free(set);
		cli_die("%s", err.msg);
	}
	if (*r.note)
		cli_warn("warning: %s", r.note);
	char b[32];
	cli_summary("%zu question%s -> %zu feature%s (seq %" PRIu64 ", stride %" PRIu64
		    ", max-query %" PRIu64 "; %zu with the answer in the window) in %" PRIu64
		    " shard%s, %s, %.2f s -> %s", sq->n_qas, sq->n_qas == 1 ? "" : "s", fs.n,
		    fs.n == 1 ? "" : "s", o.seq, o.stride, o.max_query,
		    answered, r.shards, r.shards == 1 ? "" : "s", cli_bytes((double)r.bytes, b, sizeof b),
		    loom_now() - t0, r.manifest);
	loom_shardset_free(set);
	loom_squad_features_release(&fs);
	loom_squad_free(sq);
	loom_wordpiece_free(w);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct cli_subcmd cmds[] = {
		{ "prepare", &prepare_cmd, prepare_main },
		{ NULL, NULL, NULL },
	};
	static const struct cli_cmds t = { "loom-squad", usage_main, cmds, NULL,
					   loom_tfr_versions };
	return cli_dispatch(&t, argc, argv);
}
