/* bpe_encode.c - `loom-bpe encode`: text documents -> token ids, in input
 * order, on one thread or several (tools/bpe.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpe.h"
#include "cli.h"
#include "loom_bpe.h"
#include "loom_file.h"
#include "loom_pretok.h"
#include "loom_reader.h"
#include "loom_vocab.h"

struct enc_cfg {
	const struct tok *t;
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

/* One thread's encoder: BPE or WordPiece, as the vocabulary is. */
struct encoder {
	struct loom_bpe *bpe;
	struct loom_wordpiece *wp;
};

static void encoder_init(struct encoder *e, const struct tok *t)
{
	e->bpe = t->v ? loom_bpe_new(t->v) : NULL;
	e->wp = t->wp ? loom_wordpiece_dup(t->wp) : NULL;
	if (!e->bpe && !e->wp)
		cli_die("out of memory");
}

static void encoder_release(struct encoder *e)
{
	loom_bpe_free(e->bpe);
	loom_wordpiece_free(e->wp);
}

/* Encode one document's text (or part) into ids; 0 or sets the error
 * (naming the input line when `line` is not 0). */
static int enc_text(struct chunk *ch, struct encoder *e, const struct enc_cfg *c,
		    const uint8_t *s, size_t n, uint64_t line, struct loom_ids *ids)
{
	if (e->wp ? loom_wordpiece_encode(e->wp, s, n, ids, NULL, 0)
		  : loom_bpe_encode(e->bpe, s, n, c->allow_special, ids)) {
		const char *m = e->wp ? loom_wordpiece_error(e->wp) : loom_bpe_error(e->bpe);
		if (line)
			snprintf(ch->err, sizeof ch->err, "%s: line %llu: %s", ch->file,
				 (unsigned long long)line, m);
		else
			snprintf(ch->err, sizeof ch->err, "%s: %s", ch->file, m);
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
			 (unsigned long long)line, loom_json_reason(je.text));
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

static void process_chunk(struct chunk *ch, struct encoder *e, const struct enc_cfg *c)
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
 * longer than a chunk is cut where loom_pretok_safe_cut, or for WordPiece
 * loom_wordpiece_safe_cut, allows). */
struct reader {
	char **files;
	int nfiles, fi, docs;
	const char *name;
	struct loom_reader rd; /* the file being read (rd.buf NULL: none) */
	int cont;
	uint64_t line, bytes;
	const struct loom_vocab *special; /* with --allow-special: its specials */
	int wordpiece;          /* cut long documents at white space */
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
	int fd = 0;
	r->name = f;
	r->line = 1;
	if (!strcmp(f, "-"))
		r->name = "(stdin)";
	else if ((fd = open(f, O_RDONLY)) < 0)
		cli_die("cannot open '%s': %s", f, strerror(errno));
	if (loom_reader_init(&r->rd, fd, CHUNK))
		cli_die("out of memory");
	cli_info("encode: reading %s", r->name);
	return 1;
}

static void reader_close(struct reader *r)
{
	if (r->rd.fd > 0)
		close(r->rd.fd);
	loom_reader_release(&r->rd);
}

static int reader_fill(struct reader *r, struct chunk *ch)
{
	int sep = r->docs == DOCS_NUL ? 0 : '\n';
	size_t want = CHUNK, take;
	for (;;) {
		if (!r->rd.buf && !reader_open_next(r))
			return 0;
		struct loom_err e;
		ssize_t n = loom_reader_fill_err(&r->rd, want, r->name, &e);
		if (n < 0)
			cli_die("%s", e.msg);
		const uint8_t *p = r->rd.buf + r->rd.start;
		ch->file = r->name;
		ch->first_line = r->line;
		if (r->rd.eof) {
			take = (size_t)n;
			ch->cont_in = r->cont;
			ch->cont_out = 0;
			r->cont = 0;
			if (take == 0 && !ch->cont_in) {
				reader_close(r); /* empty file: next one */
				continue;
			}
			break;
		}
		size_t cut = 0;
		int open_doc = 0;
		if (r->docs != DOCS_WHOLE) {
			const uint8_t *q = memrchr(p, sep, (size_t)n);
			if (q)
				cut = (size_t)(q - p) + 1;
		}
		if (!cut && r->docs != DOCS_JSONL) {
			cut = r->wordpiece ? loom_wordpiece_safe_cut(p, (size_t)n, 1 << 16)
					   : loom_pretok_safe_cut(p, (size_t)n, 1 << 16);
			if (cut && r->special)
				cut = cut_before_special(r->special, p, (size_t)n, cut);
			open_doc = cut > 0;
		}
		if (cut) {
			take = cut;
			ch->cont_in = r->cont;
			ch->cont_out = open_doc;
			r->cont = open_doc;
			break;
		}
		want = (size_t)n * 2; /* no place to cut yet: read more */
	}
	ch->in.n = 0;
	buf_need(&ch->in, take + 1);
	memcpy(ch->in.p, r->rd.buf + r->rd.start, take);
	ch->in.n = take;
	r->rd.start += take;
	r->bytes += take;
	if (r->rd.eof)
		reader_close(r);
	if (r->docs == DOCS_JSONL) {
		const uint8_t *q = ch->in.p, *e = ch->in.p + ch->in.n;
		while ((q = memchr(q, '\n', (size_t)(e - q)))) {
			q++;
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
	struct encoder e;
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
		process_chunk(ch, &w->e, p->cfg);
		pthread_mutex_lock(&p->mu);
		ch->state = 2;
		pthread_cond_broadcast(&p->done);
		pthread_mutex_unlock(&p->mu);
	}
}
static const char *vspec = "gpt2", *eos_arg, *output;
static struct enc_cfg enc = { .docs = DOCS_LINES, .fmt = FMT_DEFAULT, .min_tokens = 1,
			      .field = "text" };
static int threads = 1, force;

static void on_docs(const char *opt, const char *arg)
{
	(void)opt;
	enc.docs = parse_docs(arg, 1);
}

static void on_format(const char *opt, const char *arg)
{
	(void)opt;
	enc.fmt = parse_format(arg);
}

static const struct cli_opt opts[] = {
	OPT_STRING(0, "vocab", &vspec, "V",
		   "gpt2 (default, shipped), a directory with\n"
		   "encoder.json + vocab.bpe, ENCODER.json,VOCAB.bpe,\n"
		   "a HuggingFace tokenizer.json (FILE.json; byte-level\n"
		   "BPE, its ids) or a tiktoken rank file NAME.tiktoken;\n"
		   "WordPiece: bert-base-uncased (shipped), a vocab.txt\n"
		   "(FILE.txt or a directory holding it) or a\n"
		   "tokenizer.json with a WordPiece model"),
	OPT_CASING(),
	OPT_ENUM_CALLBACK('d', "docs", on_docs, "MODE", "lines nul jsonl whole",
			  "lines: one document per line (default); nul:\n"
			  "NUL-separated (keeps newlines); jsonl: one JSON\n"
			  "object per line, text in --field; whole: each\n"
			  "input file is one document"),
	OPT_STRING(0, "field", &enc.field, "NAME", "the JSON field with the text (default: text)"),
	OPT_STRING('e', "eos", &eos_arg, "ID|none",
		   "token appended after each document (default: the\n"
		   "vocabulary's <|endoftext|>; WordPiece: [SEP])"),
	OPT_U64('m', "min-tokens", &enc.min_tokens, "N", 0, UINT32_MAX,
		"drop documents with fewer than N tokens (default: 1;\n"
		"empty documents are dropped)"),
	OPT_ENUM_CALLBACK('f', "format", on_format, "F", "u16 u32 text",
			  "u16 | u32 (little-endian) | text (one document per\n"
			  "line); default: u16 (u32 if the vocabulary has more\n"
			  "than 65536 ids), text when stdout is a terminal"),
	OPT_BOOL(0, "allow-special", &enc.allow_special,
		 "recognise special tokens (<|endoftext|>) in the\n"
		 "text; by default they are plain text (BPE only)"),
	OPT_INT('j', "threads", &threads, "N", 1, 256,
		"encoding threads (default: 1); output order is kept"),
	OPT_STRING('o', "output", &output, "FILE", "write FILE atomically instead of stdout"),
	OPT_BOOL(0, "force", &force, "write binary ids to a terminal"),
	OPT_PROGRESS(NULL, "progress on stderr even when it is not a terminal"),
	OPT_VERBOSE("the vocabulary loaded (source, size) and each\n"
		    "input file read, on stderr"),
	OPT_QUIET(NULL, "no summary on stderr (and no -v lines)"),
	OPT_END()
};

static const struct cli_cmd cmd = {
	.prog = "loom-bpe",
	.usage = "usage: loom-bpe encode [options] [FILE...]\n"
		 "Encode documents from FILEs (or stdin) into token ids on stdout.\n",
	.opts = opts,
	.footer = "Summary on stderr: documents, tokens, bytes, tokens per byte, MB/s.\n",
	.version = bpe_versions,
};

/* --eos and --format against the vocabulary (usage errors) */
static void settle_eos_format(const struct tok *t)
{
	enc.t = t;
	enc.eos = t->eos;
	if (t->wp && enc.allow_special)
		cli_usage_error("--allow-special: vocabulary '%s' is WordPiece, whose [CLS] [SEP] ... "
				"are not looked for in the text", vspec);
	if (eos_arg) {
		if (!strcmp(eos_arg, "none"))
			enc.eos = LOOM_VOCAB_NONE;
		else
			enc.eos = (uint32_t)cli_u64("--eos", eos_arg, 0, UINT32_MAX);
		if (enc.eos != LOOM_VOCAB_NONE &&
		    (enc.eos >= t->n_ids || (t->v && !t->v->present[enc.eos])))
			cli_usage_error("--eos %s: not a token of vocabulary '%s' (%u ids)", eos_arg,
					vspec, t->n_ids);
	} else if (enc.eos == LOOM_VOCAB_NONE) { /* the default is missing: not dropped silently */
		cli_usage_error("vocabulary '%s' has no %s, the default end-of-document token: give "
				"--eos ID, or --eos none for documents without one", vspec,
				t->wp ? "[SEP]" : "<|endoftext|>");
	}
	int tty = !output && isatty(1);
	if (enc.fmt == FMT_DEFAULT)
		enc.fmt = tty ? FMT_TEXT : t->n_ids <= 65536 ? FMT_U16 : FMT_U32;
	if (enc.fmt == FMT_U16 && t->n_ids > 65536) {
		uint32_t big = 65536;
		while (t->v && !t->v->present[big])
			big++;
		size_t tl;
		const uint8_t *tb = tok_token(t, big, &tl);
		char name[130];
		tl = tl > 60 ? 60 : tl;
		if (t->v)
			tl = loom_gpt2_bytes_to_str(tb, tl, name);
		else
			memcpy(name, tb, tl);
		name[tl] = 0;
		cli_die("--format u16: vocabulary '%s': entry \"%s\" has id %u, beyond 65535; use --format u32",
			vspec, name, big);
	}
	if (enc.fmt != FMT_TEXT && !output)
		cli_no_binary_tty(1, force);
}

/* One encoding run: the input, the output and what was written. */
struct run {
	struct reader r;
	struct out o;
	struct cli_progress prog;
	struct span span;
	struct totals t;
	struct buf ob;
};

static void show_progress(struct run *u)
{
	if (cli_progress_due(&u->prog))
		cli_progress_show(&u->prog, "encode: %llu documents, %.1f MB",
				  (unsigned long long)u->t.docs, u->r.bytes / 1e6);
}

static void chunk_release(struct chunk *ch)
{
	free(ch->in.p);
	free(ch->out.p);
	loom_ids_release(&ch->head);
	loom_ids_release(&ch->tail);
	loom_ids_release(&ch->scratch);
}

static void encode_serial(struct run *u)
{
	struct encoder e;
	struct chunk ch = { 0 };
	encoder_init(&e, enc.t);
	while (reader_fill(&u->r, &ch)) {
		process_chunk(&ch, &e, &enc);
		write_chunk(&ch, &enc, &u->span, &u->ob, &u->o, &u->t);
		show_progress(u);
	}
	chunk_release(&ch);
	encoder_release(&e);
}

/* Chunks encoded by `threads` workers, written in input order. */
static void encode_parallel(struct run *u)
{
	struct pool p = { .nslots = (size_t)threads * 3, .cfg = &enc };
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.work, NULL);
	pthread_cond_init(&p.done, NULL);
	p.slots = calloc(p.nslots, sizeof *p.slots);
	struct worker *w = calloc((size_t)threads, sizeof *w);
	if (!p.slots || !w)
		cli_die("out of memory");
	for (int i = 0; i < threads; i++) {
		w[i].p = &p;
		encoder_init(&w[i].e, enc.t);
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]))
			cli_die("cannot start a thread");
	}
	uint64_t written = 0;
	int eof = 0;
	for (;;) {
		if (!eof && p.submitted - written < p.nslots) {
			struct chunk *ch = &p.slots[p.submitted % p.nslots];
			if (!reader_fill(&u->r, ch)) {
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
		write_chunk(ch, &enc, &u->span, &u->ob, &u->o, &u->t);
		ch->state = 0;
		written++;
		show_progress(u);
	}
	pthread_mutex_lock(&p.mu);
	p.quit = 1;
	pthread_cond_broadcast(&p.work);
	pthread_mutex_unlock(&p.mu);
	for (int i = 0; i < threads; i++) {
		pthread_join(w[i].th, NULL);
		encoder_release(&w[i].e);
	}
	for (size_t i = 0; i < p.nslots; i++)
		chunk_release(&p.slots[i]);
	free(p.slots);
	free(w);
}

int bpe_encode_main(int argc, char **argv)
{
	cli_parse(&cmd, argc, argv);
	static struct tok t;
	load_tok(&t, vspec, cli_casing);
	settle_eos_format(&t);

	static struct run u;
	u.r = (struct reader){ .files = argv + optind, .nfiles = argc - optind,
			       .docs = enc.docs, .special = enc.allow_special ? t.v : NULL,
			       .wordpiece = t.wp != NULL };
	static char *stdin_only[] = { "-" };
	if (u.r.nfiles == 0) {
		u.r.files = stdin_only;
		u.r.nfiles = 1;
	}
	out_open(&u.o, output);
	cli_progress_init(&u.prog, cli_force_progress);
	double t0 = loom_now();

	if (threads == 1)
		encode_serial(&u);
	else
		encode_parallel(&u);
	if (u.span.active) {
		u.ob.n = 0;
		span_end(&u.span, &enc, &u.ob, &u.t);
		out_write(&u.o, u.ob.p, u.ob.n);
	}
	out_commit(&u.o);
	cli_progress_done(&u.prog);
	double dt = loom_now() - t0;
	cli_summary("encode: %llu document%s (%llu dropped), %llu tokens, %llu bytes, "
		    "%.4f tokens/byte, %.2f MB/s",
		    (unsigned long long)u.t.docs, u.t.docs == 1 ? "" : "s",
		    (unsigned long long)u.t.dropped,
		    (unsigned long long)u.t.tokens, (unsigned long long)u.r.bytes,
		    u.r.bytes ? (double)u.t.tokens / (double)u.r.bytes : 0.0,
		    dt > 0 ? u.r.bytes / 1e6 / dt : 0.0);
	free(u.ob.p);
	loom_ids_release(&u.span.pending);
	tok_free(&t);
	return 0;
}
