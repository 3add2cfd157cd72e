/* loom-feed - TFRecord shards -> shuffled micro-batches as binary frames on
 * stdout (formats/batch.md).
 *
 * Records are drawn through each shard's .index (random access, pread) in a
 * seeded permutation per epoch across all shards.  The permutation is a
 * keyed Feistel network over [0, N) with cycle walking: O(1) memory,
 * random access, the same for every rank.  Global batch s (s counts across
 * epochs) is positions [i*G, (i+1)*G) of epoch s / K's permutation, where
 * G = B x world, K = floor(N / G) and i = s % K; rank r gets positions
 * [i*G + r*B, i*G + (r+1)*B).  So rank r's frame s, concatenated over
 * ranks, is exactly the world=1 frame s with --batch G.
 *
 * Worker threads fill a ring of encoded frames ahead of the writer (the
 * main thread), which writes them in sequence order: the output does not
 * depend on the thread count.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "loom_batch.h"
#include "loom_ckpt.h"
#include "loom_example.h"
#include "loom_file.h"
#include "loom_hash.h"
#include "loom_kernels.h"
#include "loom_tfrecord.h"

static const char usage[] =
	"usage: loom-feed [options] (--manifest M | SHARD.tfrecord...) --batch B --seq T --seed S\n"
	"Write shuffled micro-batches of B records of T+1 tokens as binary frames\n"
	"(formats/batch.md) on stdout, for loom-train and loom-eval.\n"
	"  -m, --manifest FILE   shards listed in loom-shard's manifest (paths relative to it);\n"
	"                        each shard must have the size the manifest records\n"
	"      --verify          also check each shard's sha256 against the manifest\n"
	"  -b, --batch B         records per frame (per rank)\n"
	"  -t, --seq T           sequence length T; each record gives T+1 tokens\n"
	"  -s, --seed S          shuffle seed (same seed = same bytes)\n"
	"  -e, --epochs E        passes over the data (default 1; 0 = endless)\n"
	"      --rank R          this rank's slice of each global batch (default 0)\n"
	"      --world W         number of ranks (default 1); global batch = B x W\n"
	"      --skip-batches N  start at global batch N (sequence number N)\n"
	"      --resume CKPT     start where checkpoint CKPT's training stopped\n"
	"      --pad ID          pad records shorter than T+1 with ID (else an error)\n"
	"      --dtype D         auto (u16 when every id fits, per frame), u16 or u32\n"
	"  -j, --threads N       read-ahead threads (default 2)\n"
	"      --text            write \"SEQ EPOCH ROW: ids...\" lines instead of frames\n"
	"  -f, --force           write binary frames even to a terminal\n"
	"      --progress        progress on stderr even when it is not a terminal\n"
	"                        or stdout is a pipe (then loom-train's line shows)\n"
	"  -v, --verbose         each shard opened (records, index) and each epoch\n"
	"                        started (its batches and seed), on stderr\n"
	"  -q, --quiet           no summary line (and no -v lines)\n"
	"  -h, --help            this help\n"
	"  -V, --version         version\n"
	"Records longer than T+1 are cut.  Each epoch yields floor(N / (B x W)) global\n"
	"batches (the remainder is dropped).  The stream ends with an end-of-stream\n"
	"frame; a closed pipe (| head) ends loom-feed quietly with status 0.\n";

struct shard {
	struct loom_tfr_file *f;
	uint64_t first, count;
};

enum { SLOT_EMPTY, SLOT_BUSY, SLOT_READY, SLOT_ERROR };

struct slot {
	int state;
	uint64_t seq;
	size_t len;
	unsigned char *buf;
	char msg[LOOM_ERR_MAX + 256];
};

static struct {
	struct shard *shards;
	size_t nshards;
	uint64_t N, K, G;		/* records, batches per epoch, global batch */
	uint32_t B, T1, rank, world;
	uint64_t seed;
	int pad;
	uint32_t pad_id;
	int dtype;			/* 0 = auto */
	int text;			/* --text: lines instead of frames */
	char feature[128];		/* the Example feature holding the ids */
	uint64_t start, end;		/* seq range [start, end) */
	size_t max_payload;
	/* Feistel permutation domain: 2^(2*half_bits) >= N */
	unsigned half_bits;
	/* ring */
	struct slot *slots;
	size_t nslots;
	uint64_t next_claim, written;
	int stop;
	pthread_mutex_t mu;
	pthread_cond_t cv_free, cv_ready;
} F = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv_free = PTHREAD_COND_INITIALIZER,
       .cv_ready = PTHREAD_COND_INITIALIZER};

/* --- the permutation -------------------------------------------------------- */

static uint64_t round_fn(uint64_t key, unsigned r, uint64_t x)
{
	return loom_splitmix64(key ^ loom_splitmix64(((uint64_t)r << 56) ^ x));
}

/* Keyed 6-round balanced Feistel bijection on [0, 2^(2h)). */
static uint64_t feistel(uint64_t key, uint64_t x)
{
	const unsigned h = F.half_bits;
	const uint64_t mask = h >= 64 ? ~0ull : (1ull << h) - 1;
	uint64_t l = x >> h, r = x & mask;
	for (unsigned i = 0; i < 6; i++) {
		uint64_t t = l ^ (round_fn(key, i, r) & mask);
		l = r;
		r = t;
	}
	return (l << h) | r;
}

/* Position p of epoch e's permutation of [0, N). */
static uint64_t permute(uint32_t epoch, uint64_t p)
{
	uint64_t key = loom_splitmix64(loom_splitmix64(F.seed) ^ (0x9e3779b97f4a7c15ull * (epoch + 1ull)));
	uint64_t x = p;
	do
		x = feistel(key, x);
	while (x >= F.N);
	return x;
}

/* --- filling a frame -------------------------------------------------------- */

static size_t shard_of(uint64_t g)
{
	size_t lo = 0, hi = F.nshards;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (F.shards[mid].first <= g)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

struct wbuf {
	unsigned char *payload;
	uint32_t *ids;
	uint32_t *tok;
	size_t ids_cap;
};

static int fill(struct wbuf *w, struct slot *sl, uint64_t seq)
{
	uint32_t epoch = (uint32_t)(seq / F.K);
	uint64_t base = (seq % F.K) * F.G + (uint64_t)F.rank * F.B;
	struct loom_err err;
	for (uint32_t b = 0; b < F.B; b++) {
		uint64_t g = permute(epoch, base + b);
		size_t si = shard_of(g);
		struct shard *s = &F.shards[si];
		uint64_t rec = g - s->first;
		size_t len, n;
		int rc = loom_tfr_file_read(s->f, rec, w->payload, F.max_payload, &len, &err);
		if (rc < 0) {
			snprintf(sl->msg, sizeof sl->msg, "%s", err.msg);
			return rc;
		}
		rc = loom_example_decode_u32(w->payload, len, F.feature, w->ids,
					     w->ids_cap, &n, &err);
		if (rc < 0) {
			snprintf(sl->msg, sizeof sl->msg, "%s: record %llu: %s",
				 loom_tfr_file_path(s->f), (unsigned long long)rec, err.msg);
			return rc;
		}
		uint32_t *dst = w->tok + (size_t)b * F.T1;
		if (n >= F.T1) {
			memcpy(dst, w->ids, F.T1 * sizeof *dst);
		} else if (F.pad) {
			memcpy(dst, w->ids, n * sizeof *dst);
			for (size_t k = n; k < F.T1; k++)
				dst[k] = F.pad_id;
		} else {
			snprintf(sl->msg, sizeof sl->msg,
				 "%s: record %llu has %zu tokens but --seq %u needs %u "
				 "(use --pad ID or a smaller --seq)", loom_tfr_file_path(s->f),
				 (unsigned long long)rec, n, F.T1 - 1, F.T1);
			return LOOM_EFORMAT;
		}
	}
	if (F.text) {
		char *p = (char *)sl->buf;
		for (uint32_t b = 0; b < F.B; b++) {
			p += sprintf(p, "%llu %u %u:", (unsigned long long)seq, epoch, b);
			for (uint32_t k = 0; k < F.T1; k++)
				p += sprintf(p, " %u", w->tok[(size_t)b * F.T1 + k]);
			*p++ = '\n';
		}
		sl->len = (size_t)(p - (char *)sl->buf);
		return 0;
	}
	struct loom_batch_hdr h = {
		.dtype = (uint16_t)(F.dtype ? F.dtype : LOOM_BATCH_U16),
		.flags = F.pad ? LOOM_BATCH_F_PAD : 0, .batch = F.B, .seq_len = F.T1,
		.pad_id = F.pad ? F.pad_id : 0, .seq = seq, .epoch = epoch,
		.rank = (uint16_t)F.rank, .world = (uint16_t)F.world, .seed = F.seed,
	};
	long n = loom_batch_encode(&h, w->tok, sl->buf);
	if (n == LOOM_ERANGE && F.dtype == 0) {
		h.dtype = LOOM_BATCH_U32;
		n = loom_batch_encode(&h, w->tok, sl->buf);
	}
	if (n < 0) {
		snprintf(sl->msg, sizeof sl->msg, "batch %llu: a token id does not fit --dtype u16",
			 (unsigned long long)seq);
		return (int)n;
	}
	sl->len = (size_t)n;
	return 0;
}

static void *worker(void *arg)
{
	(void)arg;
	struct wbuf w;
	w.ids_cap = F.max_payload + F.T1;
	w.payload = malloc(F.max_payload ? F.max_payload : 1);
	w.ids = malloc(w.ids_cap * sizeof *w.ids);
	w.tok = malloc((size_t)F.B * F.T1 * sizeof *w.tok);
	pthread_mutex_lock(&F.mu);
	if (!w.payload || !w.ids || !w.tok)
		F.stop = 2;
	for (;;) {
		if (F.stop || F.next_claim >= F.end)
			break;
		uint64_t seq = F.next_claim++;
		struct slot *sl = &F.slots[seq % F.nslots];
		while (!F.stop && seq >= F.written + F.nslots)
			pthread_cond_wait(&F.cv_free, &F.mu);
		/* Stopped by an error at a lower seq while waiting: that error is
		 * what the writer reports, this seq is never needed. */
		if (seq >= F.written + F.nslots)
			break;
		sl->state = SLOT_BUSY;
		sl->seq = seq;
		pthread_mutex_unlock(&F.mu);
		int rc = fill(&w, sl, seq);
		pthread_mutex_lock(&F.mu);
		sl->state = rc < 0 ? SLOT_ERROR : SLOT_READY;
		if (rc < 0)
			F.stop = 1;	/* claimed earlier seqs still complete */
		pthread_cond_broadcast(&F.cv_ready);
	}
	pthread_cond_broadcast(&F.cv_ready);
	pthread_mutex_unlock(&F.mu);
	free(w.payload);
	free(w.ids);
	free(w.tok);
	return NULL;
}

/* --- inputs ----------------------------------------------------------------- */

static void add_shard(const char *path, const char *index)
{
	struct loom_err err;
	struct loom_tfr_file *f = loom_tfr_file_open(path, index, &err);
	if (!f)
		cli_die("%s", err.msg);
	struct shard *s = realloc(F.shards, (F.nshards + 1) * sizeof *s);
	if (!s)
		cli_die("out of memory");
	F.shards = s;
	s[F.nshards].f = f;
	s[F.nshards].first = F.N;
	s[F.nshards].count = loom_tfr_file_count(f);
	F.N += s[F.nshards].count;
	if (loom_tfr_file_max_payload(f) > F.max_payload)
		F.max_payload = loom_tfr_file_max_payload(f);
	cli_info("shard %s: %llu records, index %s%s", path,
		 (unsigned long long)s[F.nshards].count, index ? index : path,
		 index ? "" : ".index");
	F.nshards++;
}

/* A shard against its manifest entry: its size ("bytes"), and its sha256
 * with --verify (when recorded); one line naming the shard if they differ. */
static void check_shard(const char *manifest, const char *shard, json_t *e, int verify)
{
	struct stat st;
	if (stat(shard, &st) < 0)
		cli_die("%s: cannot open shard '%s': %s", manifest, shard, strerror(errno));
	json_t *b = json_object_get(e, "bytes");
	if (json_is_integer(b) && (json_int_t)st.st_size != json_integer_value(b))
		cli_die("%s: shard '%s' is %lld bytes, the manifest says %lld", manifest, shard,
			(long long)st.st_size, (long long)json_integer_value(b));
	json_t *h = json_object_get(e, "sha256");
	if (!verify || !json_is_string(h))
		return;
	char hex[LOOM_HASH_HEX_MAX];
	struct loom_err err;
	if (loom_hash_file_hex("sha256", shard, hex, &err) < 0)
		cli_die("%s", err.msg);
	if (strcmp(hex, json_string_value(h)))
		cli_die("%s: shard '%s' has sha256 %s, the manifest says %s", manifest, shard,
			hex, json_string_value(h));
}

/* Manifest (formats/manifest.md): {"feature": NAME, "seq_len": L,
 * "shards": [{"file": NAME, "index": NAME, "records": N, "bytes": N,
 * "sha256": HEX}, ...]} with names relative to the manifest's directory. */
static void read_manifest(const char *path, int verify)
{
	json_error_t je;
	struct loom_err err;
	char *text;
	size_t len;
	if (loom_read_file(path, &text, &len, &err) < 0)
		cli_die("%s", err.msg);
	json_t *m = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	free(text);
	if (!m)
		cli_die("%s: line %d: %s", path, je.line, je.text);
	json_t *shards = json_object_get(m, "shards");
	if (!json_is_array(shards) || json_array_size(shards) == 0)
		cli_die("%s: no \"shards\" list", path);
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		slash[1] = '\0';
	else
		dir[0] = '\0';
	size_t i;
	json_t *e;
	json_array_foreach(shards, i, e) {
		json_t *name = json_is_string(e) ? e : json_object_get(e, "file");
		if (!name)
			name = json_object_get(e, "path");
		if (!json_is_string(name))
			cli_die("%s: shards[%zu] has no \"file\"", path, i);
		const char *n = json_string_value(name);
		char full[PATH_MAX * 2], idx[PATH_MAX * 2];
		snprintf(full, sizeof full, "%s%s", n[0] == '/' ? "" : dir, n);
		json_t *ji = json_object_get(e, "index");
		if (json_is_string(ji))
			snprintf(idx, sizeof idx, "%s%s", json_string_value(ji)[0] == '/' ? "" : dir,
				 json_string_value(ji));
		if (json_is_object(e))
			check_shard(path, full, e, verify);
		add_shard(full, json_is_string(ji) ? idx : NULL);
		json_t *recs = json_object_get(e, "records");
		if (json_is_integer(recs) &&
		    (uint64_t)json_integer_value(recs) != F.shards[F.nshards - 1].count)
			cli_die("%s: shard '%s' has %llu records, the manifest says %lld", path,
				full, (unsigned long long)F.shards[F.nshards - 1].count,
				(long long)json_integer_value(recs));
	}
	json_t *feat = json_object_get(m, "feature");
	if (json_is_string(feat)) {
		snprintf(F.feature, sizeof F.feature, "%s", json_string_value(feat));
	}
	json_t *L = json_object_get(m, "seq_len");
	if (json_is_integer(L) && json_integer_value(L) < (json_int_t)F.T1 && !F.pad)
		cli_die("%s: records have seq_len %lld tokens but --seq %u needs %u "
			"(use --pad ID or --seq %lld)", path, (long long)json_integer_value(L),
			F.T1 - 1, F.T1, (long long)json_integer_value(L) - 1);
	json_decref(m);
}

static void on_sigpipe_exit(void)
{
	/* | head: the reader is gone; that is not an error */
	_exit(0);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"manifest", required_argument, NULL, 'm'},
		{"batch", required_argument, NULL, 'b'},
		{"seq", required_argument, NULL, 't'},
		{"seed", required_argument, NULL, 's'},
		{"epochs", required_argument, NULL, 'e'},
		{"rank", required_argument, NULL, 1},
		{"world", required_argument, NULL, 2},
		{"skip-batches", required_argument, NULL, 3},
		{"resume", required_argument, NULL, 4},
		{"pad", required_argument, NULL, 5},
		{"dtype", required_argument, NULL, 6},
		{"progress", no_argument, NULL, 7},
		{"text", no_argument, NULL, 8},
		{"verify", no_argument, NULL, 9},
		{"threads", required_argument, NULL, 'j'},
		{"force", no_argument, NULL, 'f'},
		{"verbose", no_argument, NULL, 'v'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0}
	};
	const char *manifest = NULL, *resume = NULL;
	uint64_t epochs = 1, skip = 0, threads = 2;
	int have_b = 0, have_t = 0, have_s = 0, have_skip = 0, force = 0, quiet = 0;
	int progress = 0, verify = 0, c;

	cli_init("loom-feed", usage);
	F.world = 1;
	snprintf(F.feature, sizeof F.feature, "%s", LOOM_EXAMPLE_IDS);
	while ((c = getopt_long(argc, argv, "m:b:t:s:e:j:fvqhV", opts, NULL)) != -1) {
		switch (c) {
		case 'm': manifest = optarg; break;
		case 'b': F.B = (uint32_t)cli_u64("--batch", optarg, 1, 1u << 20); have_b = 1; break;
		case 't': F.T1 = (uint32_t)cli_u64("--seq", optarg, 1, 1u << 24) + 1; have_t = 1; break;
		case 's': F.seed = cli_u64("--seed", optarg, 0, UINT64_MAX); have_s = 1; break;
		case 'e': epochs = cli_u64("--epochs", optarg, 0, UINT32_MAX); break;
		case 1: F.rank = (uint32_t)cli_u64("--rank", optarg, 0, 65534); break;
		case 2: F.world = (uint32_t)cli_u64("--world", optarg, 1, 65535); break;
		case 3: skip = cli_u64("--skip-batches", optarg, 0, UINT64_MAX / 2); have_skip = 1; break;
		case 4: resume = optarg; break;
		case 5: F.pad_id = (uint32_t)cli_u64("--pad", optarg, 0, UINT32_MAX); F.pad = 1; break;
		case 6:
			if (strcmp(optarg, "auto") == 0)
				F.dtype = 0;
			else if (strcmp(optarg, "u16") == 0)
				F.dtype = LOOM_BATCH_U16;
			else if (strcmp(optarg, "u32") == 0)
				F.dtype = LOOM_BATCH_U32;
			else
				cli_usage_error("--dtype: '%s' is not auto, u16 or u32", optarg);
			break;
		case 7: progress = 1; break;
		case 8: F.text = 1; break;
		case 9: verify = 1; break;
		case 'j': threads = cli_u64("--threads", optarg, 1, 64); break;
		case 'f': force = 1; break;
		case 'v': cli_verbose = 1; break;
		case 'q': quiet = 1; break;
		case 'h': cli_help();
		case 'V': cli_version("jansson " JANSSON_VERSION);
		default: cli_bad_option();
		}
	}
	if (quiet)
		cli_verbose = 0;
	if (!have_b || !have_t || !have_s)
		cli_usage_error("--batch, --seq and --seed are required");
	if (manifest && optind < argc)
		cli_usage_error("give --manifest or shard files, not both");
	if (!manifest && optind == argc)
		cli_usage_error("no input: give --manifest M or shard files");
	if (F.rank >= F.world)
		cli_usage_error("--rank %u must be less than --world %u", F.rank, F.world);
	if (verify && !manifest)
		cli_usage_error("--verify needs --manifest");
	if (have_skip && resume)
		cli_usage_error("--skip-batches and --resume exclude each other");
	if ((uint64_t)F.B * F.T1 > LOOM_BATCH_MAX_TOKENS)
		cli_usage_error("--batch x (--seq + 1) is larger than a frame may be (%u tokens)",
				LOOM_BATCH_MAX_TOKENS);
	if (F.dtype == LOOM_BATCH_U16 && F.pad && F.pad_id > 0xffff)
		cli_usage_error("--pad %u does not fit --dtype u16", F.pad_id);
	if (!F.text)
		cli_no_binary_tty(STDOUT_FILENO, force);

	if (manifest)
		read_manifest(manifest, verify);
	for (int i = optind; i < argc; i++)
		add_shard(argv[i], NULL);
	F.G = (uint64_t)F.B * F.world;
	if (F.N < F.G)
		cli_die("%llu records are fewer than one global batch of %llu (--batch %u x --world %u)",
			(unsigned long long)F.N, (unsigned long long)F.G, F.B, F.world);
	F.K = F.N / F.G;
	F.half_bits = 1;
	while (F.half_bits < 32 && (1ull << (2 * F.half_bits)) < F.N)
		F.half_bits++;

	if (resume) {
		struct loom_ckpt_state st;
		struct loom_err err;
		if (loom_ckpt_read_state(resume, &st, &err) < 0)
			cli_die("--resume: %s", err.msg);
		if (st.data_batch) {
			if (st.data_seed != F.seed)
				cli_die("--resume: the checkpoint was trained on --seed %llu, not %llu",
					(unsigned long long)st.data_seed,
					(unsigned long long)F.seed);
			uint64_t g = (uint64_t)st.data_batch * (st.data_world ? st.data_world : 1);
			if (g != F.G)
				cli_die("--resume: the checkpoint's global batch is %llu records "
					"(%u x %u), this one %llu", (unsigned long long)g,
					st.data_batch, st.data_world, (unsigned long long)F.G);
			if (st.data_seq_len && st.data_seq_len != F.T1)
				cli_die("--resume: the checkpoint was trained on --seq %u, not %u",
					st.data_seq_len - 1, F.T1 - 1);
		}
		skip = st.data_seq;
	}
	F.start = skip;
	F.end = epochs ? epochs * F.K : UINT64_MAX;
	if (epochs && F.end / F.K != epochs)
		F.end = UINT64_MAX;
	if (F.start > F.end)
		F.start = F.end;
	F.next_claim = F.written = F.start;

	signal(SIGPIPE, SIG_IGN);
	F.nslots = threads * 4 < 8 ? 8 : threads * 4;
	F.slots = calloc(F.nslots, sizeof *F.slots);
	size_t fsz = F.text ? (size_t)F.B * (F.T1 * 11 + 64)
			    : loom_batch_frame_size(LOOM_BATCH_U32, F.B, F.T1);
	for (size_t i = 0; F.slots && i < F.nslots; i++)
		if (!(F.slots[i].buf = malloc(fsz)))
			cli_die("out of memory");
	if (!F.slots)
		cli_die("out of memory");
	pthread_t *tid = calloc(threads, sizeof *tid);
	for (uint64_t i = 0; i < threads; i++)
		if (pthread_create(&tid[i], NULL, worker, NULL) != 0)
			cli_die("cannot start a thread: %s", strerror(errno));

	struct cli_progress pr;
	cli_progress_init_upstream(&pr, progress);
	double t0 = loom_now();
	uint64_t bytes = 0, frames = 0;
	uint32_t last_epoch = F.start < F.end ? (uint32_t)(F.start / F.K) : 0;
	for (uint64_t seq = F.start; seq < F.end; seq++) {
		struct slot *sl = &F.slots[seq % F.nslots];
		pthread_mutex_lock(&F.mu);
		while (!(sl->seq == seq && (sl->state == SLOT_READY || sl->state == SLOT_ERROR)) &&
		       F.stop != 2)
			pthread_cond_wait(&F.cv_ready, &F.mu);
		pthread_mutex_unlock(&F.mu);
		if (F.stop == 2)
			cli_die("out of memory");
		if (seq == F.start || seq % F.K == 0)
			cli_info("epoch %llu %s at batch %llu (its batches %llu to %llu), seed %llu",
				 (unsigned long long)(seq / F.K), seq % F.K ? "resumes" : "starts",
				 (unsigned long long)seq, (unsigned long long)(seq / F.K * F.K),
				 (unsigned long long)((seq / F.K + 1) * F.K - 1),
				 (unsigned long long)F.seed);
		if (sl->state == SLOT_ERROR) {
			cli_progress_done(&pr);
			cli_die("%s", sl->msg);
		}
		int rc = loom_write_all(STDOUT_FILENO, sl->buf, sl->len);
		if (rc == -EPIPE)
			on_sigpipe_exit();
		if (rc < 0)
			cli_die("cannot write to stdout: %s", strerror(-rc));
		bytes += sl->len;
		frames++;
		last_epoch = (uint32_t)(seq / F.K);
		pthread_mutex_lock(&F.mu);
		sl->state = SLOT_EMPTY;
		F.written = seq + 1;
		pthread_cond_broadcast(&F.cv_free);
		pthread_mutex_unlock(&F.mu);
		if (cli_progress_due(&pr)) {
			double dt = loom_now() - t0;
			cli_progress_show(&pr, "batch %llu, epoch %u, %.0f records/s",
					  (unsigned long long)seq, last_epoch,
					  dt > 0 ? (double)frames * F.B / dt : 0);
		}
	}
	cli_progress_done(&pr);
	if (F.text)
		goto done;
	/* END frame */
	unsigned char end[LOOM_BATCH_HEADER_SIZE];
	struct loom_batch_hdr h = {
		.dtype = (uint16_t)(F.dtype ? F.dtype : LOOM_BATCH_U16),
		.flags = LOOM_BATCH_F_END | (F.pad ? LOOM_BATCH_F_PAD : 0), .batch = F.B,
		.seq_len = F.T1, .pad_id = F.pad ? F.pad_id : 0, .seq = F.end == UINT64_MAX ? 0 : F.end,
		.epoch = last_epoch, .rank = (uint16_t)F.rank, .world = (uint16_t)F.world,
		.seed = F.seed,
	};
	loom_batch_encode(&h, NULL, end);
	int rc = loom_write_all(STDOUT_FILENO, end, sizeof end);
	if (rc == -EPIPE)
		on_sigpipe_exit();
	if (rc < 0)
		cli_die("cannot write to stdout: %s", strerror(-rc));
	bytes += sizeof end;
done:
	for (uint64_t i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	if (!quiet) {
		double dt = loom_now() - t0;
		char bb[32];
		fprintf(stderr,
			"loom-feed: %llu batches of %ux%u (rank %u of %u) from %llu records in %zu "
			"shard%s (%llu batches/epoch), %s in %.2f s: %.0f records/s, %.1f MB/s\n",
			(unsigned long long)frames, F.B, F.T1, F.rank, F.world,
			(unsigned long long)F.N, F.nshards, F.nshards == 1 ? "" : "s",
			(unsigned long long)F.K, cli_bytes((double)bytes, bb, sizeof bb), dt,
			dt > 0 ? (double)frames * F.B / dt : 0, dt > 0 ? bytes / dt / 1e6 : 0);
	}
	for (size_t i = 0; i < F.nshards; i++)
		loom_tfr_file_free(F.shards[i].f);
	for (size_t i = 0; i < F.nslots; i++)
		free(F.slots[i].buf);
	free(F.slots);
	free(F.shards);
	free(tid);
	return 0;
}
