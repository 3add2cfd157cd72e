/* loom-bpe - byte-level BPE, exactly GPT-2's: encode | decode | train. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpe_train.h"
#include "cli.h"
#include "loom_bpe.h"
#include "loom_file.h"
#include "loom_pretok.h"
#include "loom_vocab.h"

static const char usage_main[] =
"usage: loom-bpe encode|decode|train [options] [FILE...]\n"
"Byte-level BPE tokenizer, exactly GPT-2's (tiktoken / HuggingFace ids).\n"
"  encode   text documents -> token ids       (loom-bpe encode --help)\n"
"  decode   token ids -> text                 (loom-bpe decode --help)\n"
"  train    learn a vocabulary from text      (loom-bpe train --help)\n"
"  -h, --help      this help;   -V, --version   versions\n";

static const char usage_encode[] =
"usage: loom-bpe encode [options] [FILE...]\n"
"Encode documents from FILEs (or stdin) into token ids on stdout.\n"
"      --vocab V          gpt2 (default, shipped), a directory with\n"
"                         encoder.json + vocab.bpe, ENCODER.json,VOCAB.bpe,\n"
"                         a HuggingFace tokenizer.json (FILE.json; byte-level\n"
"                         BPE, its ids) or a tiktoken rank file NAME.tiktoken\n"
"  -d, --docs MODE        lines: one document per line (default); nul:\n"
"                         NUL-separated (keeps newlines); jsonl: one JSON\n"
"                         object per line, text in --field; whole: each\n"
"                         input file is one document\n"
"      --field NAME       the JSON field with the text (default: text)\n"
"  -e, --eos ID|none      token appended after each document (default: the\n"
"                         vocabulary's <|endoftext|>)\n"
"  -m, --min-tokens N     drop documents with fewer than N tokens (default 1:\n"
"                         empty documents are dropped)\n"
"  -f, --format F         u16 | u32 (little-endian) | text (one document per\n"
"                         line); default u16 (u32 if the vocabulary has more\n"
"                         than 65536 ids), text when stdout is a terminal\n"
"      --allow-special    recognise special tokens (<|endoftext|>) in the\n"
"                         text; by default they are plain text\n"
"  -j, --threads N        encoding threads (default 1); output order is kept\n"
"  -o, --output FILE      write FILE atomically instead of stdout\n"
"      --force            write binary ids to a terminal\n"
"      --progress         progress on stderr even when it is not a terminal\n"
"  -v, --verbose          the vocabulary loaded (source, size) and each\n"
"                         input file read, on stderr\n"
"  -q, --quiet            no summary on stderr (and no -v lines)\n"
"  -h, --help             this help;  -V, --version  versions\n"
"Summary on stderr: documents, tokens, bytes, tokens per byte, MB/s.\n";

static const char usage_decode[] =
"usage: loom-bpe decode [options] [FILE...]\n"
"Decode token ids from FILEs (or stdin) back into text on stdout.\n"
"      --vocab V          as for encode (default gpt2)\n"
"  -f, --format F         input ids: u16 (default; u32 if the vocabulary\n"
"                         has more than 65536 ids) | u32 | text (decimal ids\n"
"                         separated by white space)\n"
"  -d, --docs MODE        whole (default): the end-of-text token prints as its\n"
"                         text; lines / nul: it prints as a newline / NUL,\n"
"                         so that encode --docs lines | decode --docs lines\n"
"                         gives the input back\n"
"  -e, --eos ID           the end-of-text token for --docs lines|nul\n"
"  -o, --output FILE      write FILE atomically instead of stdout\n"
"  -v, --verbose          the vocabulary loaded (source, size) and each\n"
"                         input file read with its ids, on stderr\n"
"  -q, --quiet            no summary on stderr (and no -v lines)\n"
"  -h, --help             this help;  -V, --version  versions\n"
"An id outside the vocabulary is an error naming the id and its position.\n";

enum { DOCS_LINES, DOCS_NUL, DOCS_JSONL, DOCS_WHOLE };
enum { FMT_U16, FMT_U32, FMT_TEXT, FMT_DEFAULT };

#define CHUNK (1u << 20)

/* ---- common ----------------------------------------------------------- */

static struct loom_vocab *load_vocab(const char *spec)
{
	struct loom_vocab *v = loom_vocab_new();
	if (!v)
		cli_die("out of memory");
	if (loom_vocab_load_spec(v, spec))
		cli_die("%s", loom_vocab_error(v));
	if (cli_verbose) {
		char dir[4096];
		int shipped = !strcmp(spec, "gpt2") && !loom_share_path("vocab/gpt2", dir, sizeof dir);
		cli_info("vocabulary %s%s%s%s: %u tokens (ids 0..%u), %u merges, %u special%s", spec,
			 shipped ? " (" : "", shipped ? dir : "", shipped ? ")" : "", v->n_tokens,
			 v->n_ids - 1, v->n_merges, v->n_specials, v->n_specials == 1 ? "" : "s");
	}
	return v;
}

static int parse_docs(const char *s, int allow_jsonl)
{
	if (!strcmp(s, "lines"))
		return DOCS_LINES;
	if (!strcmp(s, "nul"))
		return DOCS_NUL;
	if (allow_jsonl && !strcmp(s, "jsonl"))
		return DOCS_JSONL;
	if (!strcmp(s, "whole"))
		return DOCS_WHOLE;
	cli_usage_error("--docs: '%s' is not lines, nul%s or whole", s, allow_jsonl ? ", jsonl" : "");
}

static int parse_format(const char *s)
{
	if (!strcmp(s, "u16"))
		return FMT_U16;
	if (!strcmp(s, "u32"))
		return FMT_U32;
	if (!strcmp(s, "text"))
		return FMT_TEXT;
	cli_usage_error("--format: '%s' is not u16, u32 or text", s);
}

struct out {
	struct loom_outfile f;
	int to_stdout;
};

static void out_open(struct out *o, const char *path)
{
	/* cli_die exits: remove an unfinished output on any exit */
	atexit(loom_outfile_unlink_all);
	o->to_stdout = !path || !strcmp(path, "-");
	if (loom_outfile_open(&o->f, o->to_stdout ? "-" : path))
		cli_die("%s", loom_outfile_error(&o->f));
}

static void out_write(struct out *o, const void *p, size_t n)
{
	if (!n)
		return;
	if (loom_outfile_write(&o->f, p, n)) {
		if (o->to_stdout && errno == EPIPE)
			exit(0); /* reader went away (| head) */
		const char *m = loom_outfile_error(&o->f);
		loom_outfile_abort(&o->f);
		cli_die("%s", m);
	}
}

static void out_commit(struct out *o)
{
	if (loom_outfile_commit(&o->f))
		cli_die("%s", loom_outfile_error(&o->f));
}

/* ---- id formatting ---------------------------------------------------- */

struct buf {
	uint8_t *p;
	size_t n, cap;
};

/* Room for extra more bytes; b->p is never NULL after it (memcpy of 0
 * bytes to NULL is undefined: a carry of 0 bytes after a 1 MB line). */
static void buf_need(struct buf *b, size_t extra)
{
	if (b->p && b->cap - b->n >= extra)
		return;
	size_t c = b->cap ? b->cap : 65536;
	while (c - b->n < extra)
		c *= 2;
	uint8_t *p = realloc(b->p, c);
	if (!p)
		cli_die("out of memory");
	b->p = p;
	b->cap = c;
}

/* Append ids in format fmt; for text, *sp says a space is due first. */
static void fmt_ids(struct buf *b, int fmt, const uint32_t *ids, size_t n, int *sp)
{
	if (fmt == FMT_U16) {
		buf_need(b, 2 * n);
		uint8_t *p = b->p + b->n;
		for (size_t i = 0; i < n; i++) {
			p[2 * i] = (uint8_t)ids[i];
			p[2 * i + 1] = (uint8_t)(ids[i] >> 8);
		}
		b->n += 2 * n;
	} else if (fmt == FMT_U32) {
		buf_need(b, 4 * n);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		memcpy(b->p + b->n, ids, 4 * n);
		b->n += 4 * n;
#else
		for (size_t i = 0; i < n; i++) {
			uint32_t x = ids[i];
			b->p[b->n++] = (uint8_t)x;
			b->p[b->n++] = (uint8_t)(x >> 8);
			b->p[b->n++] = (uint8_t)(x >> 16);
			b->p[b->n++] = (uint8_t)(x >> 24);
		}
#endif
	} else {
		buf_need(b, 11 * n);
		for (size_t i = 0; i < n; i++) {
			char t[10];
			int k = 0;
			uint32_t x = ids[i];
			if (*sp)
				b->p[b->n++] = ' ';
			*sp = 1;
			do {
				t[k++] = (char)('0' + x % 10);
				x /= 10;
			} while (x);
			while (k)
				b->p[b->n++] = (uint8_t)t[--k];
		}
	}
}

/* ---- encode ----------------------------------------------------------- */

struct enc_cfg {
	const struct loom_vocab *v;
	int docs, fmt, allow_special;
	uint32_t eos;           /* LOOM_VOCAB_NONE: none */
	uint64_t min_tokens;
	const char *field;
};

struct chunk {
	struct buf in;
	int cont_in, cont_out;  /* first doc continues / last doc continues */
	const char *file;
	uint64_t first_line;
	/* results */
	struct buf out;         /* formatted complete documents */
	struct loom_ids head, tail, scratch;
	int has_head, head_ends, has_tail;
	uint64_t docs, dropped, tokens;
	int failed;
	char err[700];
	int state;              /* 0 free, 1 queued, 2 done */
};

static void end_doc_fmt(struct buf *b, const struct enc_cfg *c, int *sp)
{
	if (c->eos != LOOM_VOCAB_NONE)
		fmt_ids(b, c->fmt, &c->eos, 1, sp);
	if (c->fmt == FMT_TEXT) {
		buf_need(b, 1);
		b->p[b->n++] = '\n';
	}
	*sp = 0;
}

/* Encode one document's text (or part) into ids; 0 or sets the error
 * (naming the input line when `line` is not 0). */
static int enc_text(struct chunk *ch, struct loom_bpe *e, const struct enc_cfg *c,
		    const uint8_t *s, size_t n, uint64_t line, struct loom_ids *ids)
{
	if (loom_bpe_encode(e, s, n, c->allow_special, ids)) {
		if (line)
			snprintf(ch->err, sizeof ch->err, "%s: line %llu: %s", ch->file,
				 (unsigned long long)line, loom_bpe_error(e));
		else
			snprintf(ch->err, sizeof ch->err, "%s: %s", ch->file, loom_bpe_error(e));
		ch->failed = 1;
		return -1;
	}
	return 0;
}

/* A complete document: keep or drop, format. */
static void full_doc(struct chunk *ch, const struct enc_cfg *c, const struct loom_ids *ids)
{
	if (ids->n == 0 || ids->n < c->min_tokens) {
		ch->dropped += ids->n > 0;
		return;
	}
	int sp = 0;
	fmt_ids(&ch->out, c->fmt, ids->v, ids->n, &sp);
	end_doc_fmt(&ch->out, c, &sp);
	ch->docs++;
	ch->tokens += ids->n + (c->eos != LOOM_VOCAB_NONE);
}

static int jsonl_text(struct chunk *ch, const struct enc_cfg *c, const uint8_t *s, size_t n,
		      uint64_t line, json_t **root, const char **txt, size_t *len)
{
	json_error_t je;
	*root = json_loadb((const char *)s, n, JSON_ALLOW_NUL, &je);
	if (!*root) {
		snprintf(ch->err, sizeof ch->err, "%s: line %llu: not JSON: %s", ch->file,
			 (unsigned long long)line, je.text);
		return -1;
	}
	json_t *f = json_is_object(*root) ? json_object_get(*root, c->field) : NULL;
	if (!f || !json_is_string(f)) {
		snprintf(ch->err, sizeof ch->err, "%s: line %llu: no string field \"%s\"", ch->file,
			 (unsigned long long)line, c->field);
		json_decref(*root);
		*root = NULL;
		return -1;
	}
	*txt = json_string_value(f);
	*len = json_string_length(f);
	return 0;
}

static void process_chunk(struct chunk *ch, struct loom_bpe *e, const struct enc_cfg *c)
{
	const uint8_t *s = ch->in.p;
	size_t n = ch->in.n, p = 0;
	int sep = c->docs == DOCS_NUL ? 0 : '\n';
	uint64_t line = ch->first_line;

	ch->out.n = ch->head.n = ch->tail.n = 0;
	ch->has_head = ch->head_ends = ch->has_tail = 0;
	ch->docs = ch->dropped = ch->tokens = 0;
	ch->failed = 0;
	if (c->docs == DOCS_WHOLE) {
		struct loom_ids *dst = ch->cont_in || ch->cont_out ? &ch->head : &ch->scratch;
		dst->n = 0;
		if (enc_text(ch, e, c, s, n, 0, dst))
			return;
		if (ch->cont_in || ch->cont_out) {
			/* a part of a long document: the writer joins the parts */
			ch->has_head = 1;
			ch->head_ends = !ch->cont_out;
		} else {
			full_doc(ch, c, dst);
		}
		return;
	}
	int first = 1;
	while (p < n || (first && ch->cont_in)) {
		const uint8_t *q = memchr(s + p, sep, n - p);
		size_t end = q ? (size_t)(q - s) : n;
		int last_open = !q && ch->cont_out;
		if (first && ch->cont_in) {
			ch->has_head = 1;
			ch->head_ends = !last_open;
			if (enc_text(ch, e, c, s + p, end - p, 0, &ch->head))
				return;
		} else if (last_open) {
			ch->has_tail = 1;
			if (enc_text(ch, e, c, s + p, end - p, sep ? line : 0, &ch->tail))
				return;
		} else if (c->docs == DOCS_JSONL) {
			size_t k = p;
			while (k < end && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r'))
				k++;
			if (k < end) {
				json_t *root;
				const char *txt;
				size_t len;
				if (jsonl_text(ch, c, s + p, end - p, line, &root, &txt, &len)) {
					ch->failed = 1;
					return;
				}
				ch->scratch.n = 0;
				int rc = enc_text(ch, e, c, (const uint8_t *)txt, len, line,
						  &ch->scratch);
				json_decref(root);
				if (rc)
					return;
				full_doc(ch, c, &ch->scratch);
			}
		} else {
			ch->scratch.n = 0;
			if (enc_text(ch, e, c, s + p, end - p, sep ? line : 0, &ch->scratch))
				return;
			full_doc(ch, c, &ch->scratch);
		}
		first = 0;
		line++;
		p = end + 1;
	}
}

/* Reader: cuts the input into chunks of whole documents (a document
 * longer than a chunk is cut where loom_pretok_safe_cut allows). */
struct reader {
	char **files;
	int nfiles, fi, fd, docs;
	const char *name;
	struct buf carry;
	int cont;
	uint64_t line, bytes;
	const struct loom_vocab *special; /* with --allow-special: its specials */
};

/* With --allow-special a cut must not split a special token: move it to
 * the start of one that straddles it (a special's start always separates
 * independently encoded text).  Returns the new cut, 0 if none is left. */
static size_t cut_before_special(const struct loom_vocab *v, const uint8_t *s, size_t n,
				 size_t cut)
{
	for (int again = 1; again && cut;) {
		again = 0;
		for (uint32_t k = 0; k < v->n_specials; k++) {
			size_t tl;
			const uint8_t *t = loom_vocab_token(v, v->specials[k], &tl);
			size_t lo = cut >= tl ? cut - tl + 1 : 0;
			size_t hi = cut + tl - 1 < n ? cut + tl - 1 : n;
			const uint8_t *f = hi > lo ? memmem(s + lo, hi - lo, t, tl) : NULL;
			if (f && (size_t)(f - s) < cut) {
				cut = (size_t)(f - s);
				again = 1;
			}
		}
	}
	return cut;
}

static int reader_open_next(struct reader *r)
{
	if (r->fi >= r->nfiles)
		return 0;
	const char *f = r->files[r->fi++];
	r->name = f;
	r->line = 1;
	if (!strcmp(f, "-")) {
		r->fd = 0;
		r->name = "(stdin)";
	} else if ((r->fd = open(f, O_RDONLY)) < 0) {
		cli_die("cannot open '%s': %s", f, strerror(errno));
	}
	cli_info("encode: reading %s", r->name);
	return 1;
}

static int reader_fill(struct reader *r, struct chunk *ch)
{
	int sep = r->docs == DOCS_NUL ? 0 : '\n';
	size_t want = CHUNK;
	for (;;) {
		if (r->fd < 0 && !reader_open_next(r))
			return 0;
		ch->in.n = 0;
		buf_need(&ch->in, r->carry.n + want + 1);
		if (r->carry.n)
			memcpy(ch->in.p, r->carry.p, r->carry.n);
		ch->in.n = r->carry.n;
		r->carry.n = 0;
		ch->file = r->name;
		ch->first_line = r->line;
		int eof = 0;
		for (;;) {
			while (ch->in.n < want) {
				buf_need(&ch->in, want - ch->in.n);
				ssize_t k = read(r->fd, ch->in.p + ch->in.n, ch->in.cap - ch->in.n);
				if (k < 0) {
					if (errno == EINTR)
						continue;
					cli_die("cannot read '%s': %s", r->name, strerror(errno));
				}
				if (k == 0) {
					eof = 1;
					break;
				}
				ch->in.n += (size_t)k;
				r->bytes += (size_t)k;
			}
			if (eof) {
				if (r->fd > 0)
					close(r->fd);
				r->fd = -1;
				ch->cont_in = r->cont;
				ch->cont_out = 0;
				r->cont = 0;
				if (ch->in.n == 0 && !ch->cont_in)
					break; /* empty file: next one */
				goto got;
			}
			size_t cut = 0;
			int open_doc = 0;
			if (r->docs != DOCS_WHOLE) {
				uint8_t *q = memrchr(ch->in.p, sep, ch->in.n);
				if (q)
					cut = (size_t)(q - ch->in.p) + 1;
			}
			if (!cut && r->docs != DOCS_JSONL) {
				cut = loom_pretok_safe_cut(ch->in.p, ch->in.n, 1 << 16);
				if (cut && r->special)
					cut = cut_before_special(r->special, ch->in.p, ch->in.n, cut);
				open_doc = cut > 0;
			}
			if (cut) {
				r->carry.n = 0;
				buf_need(&r->carry, ch->in.n - cut);
				memcpy(r->carry.p, ch->in.p + cut, ch->in.n - cut);
				r->carry.n = ch->in.n - cut;
				ch->in.n = cut;
				ch->cont_in = r->cont;
				ch->cont_out = open_doc;
				r->cont = open_doc;
				goto got;
			}
			want = ch->in.n * 2; /* no place to cut yet: read more */
		}
	}
got:
	if (r->docs == DOCS_JSONL) {
		const uint8_t *p = ch->in.p, *e = ch->in.p + ch->in.n;
		while ((p = memchr(p, '\n', (size_t)(e - p)))) {
			p++;
			r->line++;
		}
	}
	return 1;
}

/* Writer side: joins the parts of documents that span chunks. */
struct span {
	int active, flushed, sp;
	uint64_t count;
	struct loom_ids pending;
};

struct totals {
	uint64_t docs, dropped, tokens;
};

static void span_add(struct span *s, const struct enc_cfg *c, const struct loom_ids *ids,
		     struct buf *ob)
{
	s->count += ids->n;
	if (s->flushed) {
		fmt_ids(ob, c->fmt, ids->v, ids->n, &s->sp);
		return;
	}
	if (loom_ids_reserve(&s->pending, ids->n))
		cli_die("out of memory");
	memcpy(s->pending.v + s->pending.n, ids->v, ids->n * sizeof *ids->v);
	s->pending.n += ids->n;
	if (s->count >= c->min_tokens && s->count > 0) {
		fmt_ids(ob, c->fmt, s->pending.v, s->pending.n, &s->sp);
		s->pending.n = 0;
		s->flushed = 1;
	}
}

static void span_end(struct span *s, const struct enc_cfg *c, struct buf *ob, struct totals *t)
{
	if (s->flushed) {
		end_doc_fmt(ob, c, &s->sp);
		t->docs++;
		t->tokens += s->count + (c->eos != LOOM_VOCAB_NONE);
	} else if (s->count) {
		t->dropped++;
	}
	s->active = s->flushed = s->sp = 0;
	s->count = 0;
	s->pending.n = 0;
}

static void write_chunk(struct chunk *ch, const struct enc_cfg *c, struct span *s,
			struct buf *ob, struct out *o, struct totals *t)
{
	if (ch->failed) {
		loom_outfile_abort(&o->f);
		cli_die("%s", ch->err);
	}
	ob->n = 0;
	if (ch->has_head) {
		s->active = 1;
		span_add(s, c, &ch->head, ob);
		if (ch->head_ends)
			span_end(s, c, ob, t);
	}
	out_write(o, ob->p, ob->n);
	out_write(o, ch->out.p, ch->out.n);
	t->docs += ch->docs;
	t->dropped += ch->dropped;
	t->tokens += ch->tokens;
	if (ch->has_tail) {
		ob->n = 0;
		s->active = 1;
		span_add(s, c, &ch->tail, ob);
		out_write(o, ob->p, ob->n);
	}
}

struct pool {
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	struct chunk *slots;
	size_t nslots;
	uint64_t submitted, taken;
	int quit;
	const struct enc_cfg *cfg;
};

struct worker {
	struct pool *p;
	pthread_t th;
	struct loom_bpe *e;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct pool *p = w->p;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		while (p->taken == p->submitted && !p->quit)
			pthread_cond_wait(&p->work, &p->mu);
		if (p->taken == p->submitted) {
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
		struct chunk *ch = &p->slots[p->taken++ % p->nslots];
		pthread_mutex_unlock(&p->mu);
		process_chunk(ch, w->e, p->cfg);
		pthread_mutex_lock(&p->mu);
		ch->state = 2;
		pthread_cond_broadcast(&p->done);
		pthread_mutex_unlock(&p->mu);
	}
}

_Noreturn static void bpe_version(void)
{
	char extra[128];
	snprintf(extra, sizeof extra, "jansson %s, Unicode %s", JANSSON_VERSION, "15.0.0");
	cli_version(extra);
}

static int cmd_encode(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "vocab", required_argument, NULL, 5 },
		{ "docs", required_argument, NULL, 'd' },
		{ "field", required_argument, NULL, 1 },
		{ "eos", required_argument, NULL, 'e' },
		{ "min-tokens", required_argument, NULL, 'm' },
		{ "format", required_argument, NULL, 'f' },
		{ "allow-special", no_argument, NULL, 2 },
		{ "threads", required_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "force", no_argument, NULL, 3 },
		{ "progress", no_argument, NULL, 4 },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	const char *vspec = "gpt2", *eos_arg = NULL, *output = NULL;
	struct enc_cfg c = { .docs = DOCS_LINES, .fmt = FMT_DEFAULT, .min_tokens = 1,
			     .field = "text" };
	int threads = 1, force = 0, progress = 0, quiet = 0, opt;

	cli_init("loom-bpe", usage_encode);
	while ((opt = getopt_long(argc, argv, "d:e:m:f:j:o:vqhV", opts, NULL)) != -1) {
		switch (opt) {
		case 5: vspec = optarg; break;
		case 'd': c.docs = parse_docs(optarg, 1); break;
		case 1: c.field = optarg; break;
		case 'e': eos_arg = optarg; break;
		case 'm': c.min_tokens = cli_u64("--min-tokens", optarg, 0, UINT32_MAX); break;
		case 'f': c.fmt = parse_format(optarg); break;
		case 2: c.allow_special = 1; break;
		case 'j': threads = (int)cli_u64("--threads", optarg, 1, 256); break;
		case 'o': output = optarg; break;
		case 3: force = 1; break;
		case 4: progress = 1; break;
		case 'v': cli_verbose = 1; break;
		case 'q': quiet = 1; break;
		case 'h': cli_help();
		case 'V': bpe_version();
		default: cli_bad_option();
		}
	}
	if (quiet)
		cli_verbose = 0;
	struct loom_vocab *v = load_vocab(vspec);
	c.v = v;
	c.eos = v->eot;
	if (eos_arg) {
		if (!strcmp(eos_arg, "none"))
			c.eos = LOOM_VOCAB_NONE;
		else
			c.eos = (uint32_t)cli_u64("--eos", eos_arg, 0, UINT32_MAX);
		if (c.eos != LOOM_VOCAB_NONE && (c.eos >= v->n_ids || !v->present[c.eos]))
			cli_usage_error("--eos %s: not a token of vocabulary '%s' (%u ids)", eos_arg,
					vspec, v->n_ids);
	}
	int tty = !output && isatty(1);
	if (c.fmt == FMT_DEFAULT)
		c.fmt = tty ? FMT_TEXT : v->n_ids <= 65536 ? FMT_U16 : FMT_U32;
	if (c.fmt == FMT_U16 && v->n_ids > 65536) {
		uint32_t big = 0;
		for (uint32_t i = 65536; i < v->n_ids; i++)
			if (v->present[i]) {
				big = i;
				break;
			}
		size_t tl;
		const uint8_t *tb = loom_vocab_token(v, big, &tl);
		char name[130];
		tl = tl > 60 ? 60 : tl;
		name[loom_gpt2_bytes_to_str(tb, tl, name)] = 0;
		cli_die("--format u16: vocabulary '%s': entry \"%s\" has id %u, beyond 65535; use --format u32",
			vspec, name, big);
	}
	if (c.fmt != FMT_TEXT && !output)
		cli_no_binary_tty(1, force);

	struct reader r = { .files = argv + optind, .nfiles = argc - optind, .fd = -1,
			    .docs = c.docs, .special = c.allow_special ? v : NULL };
	static char *stdin_only[] = { "-" };
	if (r.nfiles == 0) {
		r.files = stdin_only;
		r.nfiles = 1;
	}
	struct out o;
	out_open(&o, output);
	struct cli_progress prog;
	cli_progress_init(&prog, progress);
	struct span span = { 0 };
	struct totals t = { 0 };
	struct buf ob = { 0 };
	double t0 = loom_now();

	if (threads == 1) {
		struct loom_bpe *e = loom_bpe_new(v);
		struct chunk ch = { 0 };
		if (!e)
			cli_die("out of memory");
		while (reader_fill(&r, &ch)) {
			process_chunk(&ch, e, &c);
			write_chunk(&ch, &c, &span, &ob, &o, &t);
			if (cli_progress_due(&prog))
				cli_progress_show(&prog, "encode: %llu documents, %.1f MB",
						  (unsigned long long)t.docs, r.bytes / 1e6);
		}
		free(ch.in.p);
		free(ch.out.p);
		loom_ids_release(&ch.head);
		loom_ids_release(&ch.tail);
		loom_ids_release(&ch.scratch);
		loom_bpe_free(e);
	} else {
		struct pool p = { .nslots = (size_t)threads * 3, .cfg = &c };
		pthread_mutex_init(&p.mu, NULL);
		pthread_cond_init(&p.work, NULL);
		pthread_cond_init(&p.done, NULL);
		p.slots = calloc(p.nslots, sizeof *p.slots);
		struct worker *w = calloc((size_t)threads, sizeof *w);
		if (!p.slots || !w)
			cli_die("out of memory");
		for (int i = 0; i < threads; i++) {
			w[i].p = &p;
			if (!(w[i].e = loom_bpe_new(v)))
				cli_die("out of memory");
			if (pthread_create(&w[i].th, NULL, worker_main, &w[i]))
				cli_die("cannot start a thread");
		}
		uint64_t written = 0;
		int eof = 0;
		for (;;) {
			if (!eof && p.submitted - written < p.nslots) {
				struct chunk *ch = &p.slots[p.submitted % p.nslots];
				if (!reader_fill(&r, ch)) {
					eof = 1;
					continue;
				}
				pthread_mutex_lock(&p.mu);
				ch->state = 1;
				p.submitted++;
				pthread_cond_signal(&p.work);
				pthread_mutex_unlock(&p.mu);
				continue;
			}
			if (written == p.submitted)
				break;
			struct chunk *ch = &p.slots[written % p.nslots];
			pthread_mutex_lock(&p.mu);
			while (ch->state != 2)
				pthread_cond_wait(&p.done, &p.mu);
			pthread_mutex_unlock(&p.mu);
			write_chunk(ch, &c, &span, &ob, &o, &t);
			ch->state = 0;
			written++;
			if (cli_progress_due(&prog))
				cli_progress_show(&prog, "encode: %llu documents, %.1f MB",
						  (unsigned long long)t.docs, r.bytes / 1e6);
		}
		pthread_mutex_lock(&p.mu);
		p.quit = 1;
		pthread_cond_broadcast(&p.work);
		pthread_mutex_unlock(&p.mu);
		for (int i = 0; i < threads; i++) {
			pthread_join(w[i].th, NULL);
			loom_bpe_free(w[i].e);
		}
		for (size_t i = 0; i < p.nslots; i++) {
			free(p.slots[i].in.p);
			free(p.slots[i].out.p);
			loom_ids_release(&p.slots[i].head);
			loom_ids_release(&p.slots[i].tail);
			loom_ids_release(&p.slots[i].scratch);
		}
		free(p.slots);
		free(w);
	}
	if (span.active) {
		ob.n = 0;
		span_end(&span, &c, &ob, &t);
		out_write(&o, ob.p, ob.n);
	}
	out_commit(&o);
	cli_progress_done(&prog);
	double dt = loom_now() - t0;
	if (!quiet)
		fprintf(stderr,
			"loom-bpe: encode: %llu documents (%llu dropped), %llu tokens, %llu bytes, "
			"%.4f tokens/byte, %.2f MB/s\n",
			(unsigned long long)t.docs, (unsigned long long)t.dropped,
			(unsigned long long)t.tokens, (unsigned long long)r.bytes,
			r.bytes ? (double)t.tokens / (double)r.bytes : 0.0,
			dt > 0 ? r.bytes / 1e6 / dt : 0.0);
	free(ob.p);
	free(r.carry.p);
	loom_ids_release(&span.pending);
	loom_vocab_free(v);
	return 0;
}

/* ---- decode ----------------------------------------------------------- */

static int cmd_decode(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "vocab", required_argument, NULL, 1 },
		{ "format", required_argument, NULL, 'f' },
		{ "docs", required_argument, NULL, 'd' },
		{ "eos", required_argument, NULL, 'e' },
		{ "output", required_argument, NULL, 'o' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	const char *vspec = "gpt2", *output = NULL, *eos_arg = NULL;
	int fmt = FMT_DEFAULT, docs = DOCS_WHOLE, quiet = 0, opt;

	cli_init("loom-bpe", usage_decode);
	while ((opt = getopt_long(argc, argv, "f:d:e:o:vqhV", opts, NULL)) != -1) {
		switch (opt) {
		case 1: vspec = optarg; break;
		case 'f': fmt = parse_format(optarg); break;
		case 'd': docs = parse_docs(optarg, 0); break;
		case 'e': eos_arg = optarg; break;
		case 'o': output = optarg; break;
		case 'v': cli_verbose = 1; break;
		case 'q': quiet = 1; break;
		case 'h': cli_help();
		case 'V': bpe_version();
		default: cli_bad_option();
		}
	}
	if (quiet)
		cli_verbose = 0;
	struct loom_vocab *v = load_vocab(vspec);
	if (fmt == FMT_DEFAULT)
		fmt = v->n_ids <= 65536 ? FMT_U16 : FMT_U32;
	uint32_t eos = v->eot;
	if (eos_arg)
		eos = (uint32_t)cli_u64("--eos", eos_arg, 0, UINT32_MAX);
	if (docs != DOCS_WHOLE && eos == LOOM_VOCAB_NONE)
		cli_usage_error("--docs %s: the vocabulary has no <|endoftext|>; give --eos ID",
				docs == DOCS_LINES ? "lines" : "nul");
	uint8_t sepc = docs == DOCS_NUL ? 0 : '\n';
	struct loom_bpe *e = loom_bpe_new(v);
	if (!e)
		cli_die("out of memory");
	struct out o;
	out_open(&o, output);
	static char *stdin_only[] = { "-" };
	char **files = argv + optind;
	int nfiles = argc - optind;
	if (!nfiles) {
		files = stdin_only;
		nfiles = 1;
	}
	uint8_t *in = malloc(CHUNK + 16), *ob = NULL;
	uint32_t *ids = malloc(CHUNK * sizeof *ids);
	size_t olen = 0, ocap = 0;
	uint64_t pos = 0, bytes_out = 0;
	double t0 = loom_now();
	if (!in || !ids)
		cli_die("out of memory");
	for (int fi = 0; fi < nfiles; fi++) {
		const char *name = strcmp(files[fi], "-") ? files[fi] : "(stdin)";
		int fd = strcmp(files[fi], "-") ? open(files[fi], O_RDONLY) : 0;
		size_t have = 0;       /* bytes carried (partial id / number) */
		uint64_t fpos = 0;     /* id index in this file */
		if (fd < 0)
			cli_die("cannot open '%s': %s", files[fi], strerror(errno));
		for (;;) {
			ssize_t k = read(fd, in + have, CHUNK - have);
			if (k < 0) {
				if (errno == EINTR)
					continue;
				cli_die("cannot read '%s': %s", name, strerror(errno));
			}
			size_t n = have + (size_t)k, nids = 0, used = 0;
			int end = k == 0;
			if (fmt == FMT_TEXT) {
				size_t i = 0;
				for (;;) {
					while (i < n && (in[i] == ' ' || in[i] == '\n' || in[i] == '\t' ||
							 in[i] == '\r'))
						i++;
					size_t st = i;
					uint64_t x = 0;
					while (i < n && in[i] >= '0' && in[i] <= '9' && i - st < 11)
						x = x * 10 + (in[i++] - '0');
					if (i == n && !end) {
						used = st;
						break;
					}
					if (i == st && i == n) {
						used = n;
						break;
					}
					if (i == st || (i < n && !(in[i] == ' ' || in[i] == '\n' ||
								   in[i] == '\t' || in[i] == '\r')) ||
					    x > UINT32_MAX) {
						loom_outfile_abort(&o.f);
						cli_die("%s: id %llu: not a decimal token id near \"%.12s\"",
							name, (unsigned long long)(fpos + nids),
							(const char *)in + st);
					}
					ids[nids++] = (uint32_t)x;
				}
			} else {
				size_t w = fmt == FMT_U16 ? 2 : 4;
				nids = n / w;
				for (size_t i = 0; i < nids; i++)
					ids[i] = w == 2 ? (uint32_t)in[2 * i] | (uint32_t)in[2 * i + 1] << 8
							: (uint32_t)in[4 * i] | (uint32_t)in[4 * i + 1] << 8 |
								  (uint32_t)in[4 * i + 2] << 16 |
								  (uint32_t)in[4 * i + 3] << 24;
				used = nids * w;
				if (end && used != n) {
					loom_outfile_abort(&o.f);
					cli_die("%s: truncated: %zu trailing bytes after id %llu are not a whole %s id",
						name, n - used, (unsigned long long)(fpos + nids),
						fmt == FMT_U16 ? "u16" : "u32");
				}
			}
			olen = 0;
			size_t a = 0;
			for (size_t i = 0; i <= nids; i++) {
				if (i < nids && (docs == DOCS_WHOLE || ids[i] != eos))
					continue;
				if (loom_bpe_decode(e, ids + a, i - a, fpos + a, &ob, &olen, &ocap)) {
					loom_outfile_abort(&o.f);
					cli_die("%s: %s", name, loom_bpe_error(e));
				}
				if (i < nids) {
					if (olen == ocap) {
						uint8_t *q = realloc(ob, ocap = ocap ? ocap * 2 : 4096);
						if (!q)
							cli_die("out of memory");
						ob = q;
					}
					ob[olen++] = sepc;
				}
				a = i + 1;
			}
			out_write(&o, ob, olen);
			bytes_out += olen;
			fpos += nids;
			pos += nids;
			memmove(in, in + used, n - used);
			have = n - used;
			if (end)
				break;
		}
		if (fd > 0)
			close(fd);
		cli_info("decode: %s: %llu ids", name, (unsigned long long)fpos);
	}
	out_commit(&o);
	double dt = loom_now() - t0;
	if (!quiet)
		fprintf(stderr, "loom-bpe: decode: %llu tokens, %llu bytes, %.2f MB/s\n",
			(unsigned long long)pos, (unsigned long long)bytes_out,
			dt > 0 ? bytes_out / 1e6 / dt : 0.0);
	free(in);
	free(ids);
	free(ob);
	loom_bpe_free(e);
	loom_vocab_free(v);
	return 0;
}

int main(int argc, char **argv)
{
	cli_init("loom-bpe", usage_main);
	if (argc < 2)
		cli_usage_error("missing command (encode, decode or train)");
	const char *cmd = argv[1];
	if (!strcmp(cmd, "encode"))
		return cmd_encode(argc - 1, argv + 1);
	if (!strcmp(cmd, "decode"))
		return cmd_decode(argc - 1, argv + 1);
	if (!strcmp(cmd, "train"))
		return bpe_train_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help"))
		cli_help();
	if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version"))
		bpe_version();
	cli_usage_error("unknown command '%s' (encode, decode or train)", cmd);
}
