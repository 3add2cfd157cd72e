/* loom_encode_mt.c - see loom_encode_mt.h */
#include "loom_encode_mt.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom_bpe.h"
#include "loom_buf.h"
#include "loom_pretok.h"
#include "loom_reader.h"

#define CHUNK (1u << 20) /* bytes of input a chunk aims at */

/* A growing byte buffer; p is never NULL after buf_need (memcpy of 0
 * bytes to NULL is undefined: a carry of 0 bytes after a 1 MB line). */
struct buf {
	uint8_t *p;
	size_t n, cap;
};

static int buf_need(struct buf *b, size_t extra)
{
	if (b->p && b->cap - b->n >= extra)
		return 0;
	return loom_buf_grow(&b->p, b->n, &b->cap, extra ? extra : 1);
}

/* Append ids in format fmt; for text, *sp says a space is due first. */
static int fmt_ids(struct buf *b, enum loom_tokfmt fmt, const uint32_t *ids, size_t n, int *sp)
{
	if (fmt == LOOM_TOK_U16) {
		if (buf_need(b, 2 * n))
			return LOOM_ENOMEM;
		uint8_t *p = b->p + b->n;
		for (size_t i = 0; i < n; i++) {
			p[2 * i] = (uint8_t)ids[i];
			p[2 * i + 1] = (uint8_t)(ids[i] >> 8);
		}
		b->n += 2 * n;
	} else if (fmt == LOOM_TOK_U32) {
		if (buf_need(b, 4 * n))
			return LOOM_ENOMEM;
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
		if (buf_need(b, 11 * n))
			return LOOM_ENOMEM;
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
	return 0;
}

/* The end of a document: eos, and a newline in text. */
static int end_doc_fmt(struct buf *b, const struct loom_encode_mt_opts *c, int *sp)
{
	if (c->eos != LOOM_VOCAB_NONE && fmt_ids(b, c->fmt, &c->eos, 1, sp))
		return LOOM_ENOMEM;
	*sp = 0;
	if (c->fmt == LOOM_TOK_TEXT) {
		if (buf_need(b, 1))
			return LOOM_ENOMEM;
		b->p[b->n++] = '\n';
	}
	return 0;
}

/* ---- a chunk and its encoding -------------------------------------------- */

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
	struct loom_err err;    /* err.code < 0: the chunk failed */
	int state;              /* 0 free, 1 queued, 2 done */
};

static void chunk_release(struct chunk *ch)
{
	free(ch->in.p);
	free(ch->out.p);
	loom_ids_release(&ch->head);
	loom_ids_release(&ch->tail);
	loom_ids_release(&ch->scratch);
}

static int chunk_nomem(struct chunk *ch)
{
	return loom_err_set(&ch->err, LOOM_ENOMEM, "%s: out of memory", ch->file);
}

/* One thread's encoder: BPE or WordPiece, as the vocabulary is. */
struct encoder {
	struct loom_bpe *bpe;
	struct loom_wordpiece *wp;
};

static int encoder_init(struct encoder *e, const struct loom_encode_mt_opts *c)
{
	e->bpe = c->vocab ? loom_bpe_new(c->vocab) : NULL;
	e->wp = c->wp ? loom_wordpiece_dup(c->wp) : NULL;
	return e->bpe || e->wp ? 0 : LOOM_ENOMEM;
}

static void encoder_release(struct encoder *e)
{
	loom_bpe_free(e->bpe);
	loom_wordpiece_free(e->wp);
}

/* Encode one document's text (or part) into ids; 0 or the chunk's error
 * (naming the input line when `line` is not 0). */
static int enc_text(struct chunk *ch, struct encoder *e, const struct loom_encode_mt_opts *c,
		    const uint8_t *s, size_t n, uint64_t line, struct loom_ids *ids)
{
	int rc = e->wp ? loom_wordpiece_encode(e->wp, s, n, ids, NULL, 0)
		       : loom_bpe_encode(e->bpe, s, n, c->allow_special, ids);
	if (!rc)
		return 0;
	const char *m = e->wp ? loom_wordpiece_error(e->wp) : loom_bpe_error(e->bpe);
	rc = rc < 0 ? rc : LOOM_EFORMAT;
	if (line)
		return loom_err_set(&ch->err, rc, "%s: line %llu: %s", ch->file,
				    (unsigned long long)line, m);
	return loom_err_set(&ch->err, rc, "%s: %s", ch->file, m);
}

/* A complete document: keep or drop, format. */
static int full_doc(struct chunk *ch, const struct loom_encode_mt_opts *c,
		    const struct loom_ids *ids)
{
	if (ids->n == 0 || ids->n < c->min_tokens) {
		ch->dropped += ids->n > 0;
		return 0;
	}
	int sp = 0;
	if (fmt_ids(&ch->out, c->fmt, ids->v, ids->n, &sp) || end_doc_fmt(&ch->out, c, &sp))
		return chunk_nomem(ch);
	ch->docs++;
	ch->tokens += ids->n + (c->eos != LOOM_VOCAB_NONE);
	return 0;
}

static int jsonl_text(struct chunk *ch, const struct loom_encode_mt_opts *c, const uint8_t *s,
		      size_t n, uint64_t line, json_t **root, const char **txt, size_t *len)
{
	json_error_t je;
	*root = json_loadb((const char *)s, n, JSON_ALLOW_NUL, &je);
	if (!*root)
		return loom_err_set(&ch->err, LOOM_EFORMAT, "%s: line %llu: not JSON: %s",
				    ch->file, (unsigned long long)line, loom_json_reason(je.text));
	json_t *f = json_is_object(*root) ? json_object_get(*root, c->field) : NULL;
	if (!f || !json_is_string(f)) {
		json_decref(*root);
		*root = NULL;
		return loom_err_set(&ch->err, LOOM_EFORMAT, "%s: line %llu: no string field \"%s\"",
				    ch->file, (unsigned long long)line, c->field);
	}
	*txt = json_string_value(f);
	*len = json_string_length(f);
	return 0;
}

/* One jsonl line (blank: nothing). */
static int jsonl_doc(struct chunk *ch, struct encoder *e, const struct loom_encode_mt_opts *c,
		     const uint8_t *s, size_t n, uint64_t line)
{
	size_t k = 0;
	while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r'))
		k++;
	if (k == n)
		return 0;
	json_t *root;
	const char *txt;
	size_t len;
	if (jsonl_text(ch, c, s, n, line, &root, &txt, &len))
		return ch->err.code;
	ch->scratch.n = 0;
	int rc = enc_text(ch, e, c, (const uint8_t *)txt, len, line, &ch->scratch);
	json_decref(root);
	return rc ? rc : full_doc(ch, c, &ch->scratch);
}

static int process_chunk(struct chunk *ch, struct encoder *e, const struct loom_encode_mt_opts *c)
{
	const uint8_t *s = ch->in.p;
	size_t n = ch->in.n, p = 0;
	int sep = c->docs == LOOM_DOCS_NUL ? 0 : '\n', rc;
	uint64_t line = ch->first_line;

	ch->out.n = ch->head.n = ch->tail.n = 0;
	ch->has_head = ch->head_ends = ch->has_tail = 0;
	ch->docs = ch->dropped = ch->tokens = 0;
	ch->err.code = 0;
	if (c->docs == LOOM_DOCS_WHOLE) {
		struct loom_ids *dst = ch->cont_in || ch->cont_out ? &ch->head : &ch->scratch;
		dst->n = 0;
		if ((rc = enc_text(ch, e, c, s, n, 0, dst)))
			return rc;
		if (!ch->cont_in && !ch->cont_out)
			return full_doc(ch, c, dst);
		/* a part of a long document: the writer joins the parts */
		ch->has_head = 1;
		ch->head_ends = !ch->cont_out;
		return 0;
	}
	for (int first = 1; p < n || (first && ch->cont_in); first = 0, line++) {
		const uint8_t *q = memchr(s + p, sep, n - p);
		size_t end = q ? (size_t)(q - s) : n;
		int last_open = !q && ch->cont_out;
		if (first && ch->cont_in) {
			ch->has_head = 1;
			ch->head_ends = !last_open;
			rc = enc_text(ch, e, c, s + p, end - p, 0, &ch->head);
		} else if (last_open) {
			ch->has_tail = 1;
			rc = enc_text(ch, e, c, s + p, end - p, sep ? line : 0, &ch->tail);
		} else if (c->docs == LOOM_DOCS_JSONL) {
			rc = jsonl_doc(ch, e, c, s + p, end - p, line);
		} else {
			ch->scratch.n = 0;
			rc = enc_text(ch, e, c, s + p, end - p, sep ? line : 0, &ch->scratch);
			if (!rc)
				rc = full_doc(ch, c, &ch->scratch);
		}
		if (rc)
			return rc;
		p = end + 1;
	}
	return 0;
}

/* ---- reader: the input cut into chunks of whole documents ----------------- */

struct reader {
	const char *const *files;
	size_t nfiles, fi;
	const char *name;
	struct loom_reader rd;  /* the file being read (rd.buf NULL: none) */
	int cont;
	uint64_t line, bytes;
};

/* With allow_special a cut must not split a special token: move it to
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

struct loom_encode_mt {
	struct loom_encode_mt_opts o;
	struct reader r;
	struct loom_encode_mt_stats st;
	struct loom_err err;
	int ran;
};

/* 1: the next file is open, 0: none is left, or an error. */
static int reader_open_next(struct loom_encode_mt *m)
{
	struct reader *r = &m->r;
	if (r->fi >= r->nfiles)
		return 0;
	const char *f = r->files[r->fi++];
	int fd = 0;
	r->name = f;
	r->line = 1;
	if (!strcmp(f, "-"))
		r->name = "(stdin)";
	else if ((fd = open(f, O_RDONLY)) < 0)
		return loom_err_errno(&m->err, LOOM_EIO, errno, "cannot open '%s'", f);
	if (loom_reader_init(&r->rd, fd, CHUNK)) {
		if (fd > 0)
			close(fd);
		return loom_err_set(&m->err, LOOM_ENOMEM, "%s: out of memory", r->name);
	}
	if (m->o.on_file)
		m->o.on_file(m->o.ctx, r->name);
	return 1;
}

static void reader_close(struct reader *r)
{
	if (r->rd.buf && r->rd.fd > 0)
		close(r->rd.fd);
	loom_reader_release(&r->rd);
	r->rd.fd = 0;
}

/* Where to cut the n bytes at p (0: nowhere yet); *open_doc: the cut is
 * inside a document. */
static size_t find_cut(const struct loom_encode_mt_opts *c, const uint8_t *p, size_t n,
		       int *open_doc)
{
	size_t cut = 0;
	*open_doc = 0;
	if (c->docs != LOOM_DOCS_WHOLE) {
		const uint8_t *q = memrchr(p, c->docs == LOOM_DOCS_NUL ? 0 : '\n', n);
		if (q)
			return (size_t)(q - p) + 1;
	}
	if (c->docs != LOOM_DOCS_JSONL) {
		cut = c->wp ? loom_wordpiece_safe_cut(p, n, 1 << 16) : loom_pretok_safe_cut(p, n, 1 << 16);
		if (cut && c->allow_special && c->vocab)
			cut = cut_before_special(c->vocab, p, n, cut);
		*open_doc = cut > 0;
	}
	return cut;
}

/* The next chunk into ch: 1, 0 at the end of the input, or an error. */
static int reader_fill(struct loom_encode_mt *m, struct chunk *ch)
{
	struct reader *r = &m->r;
	size_t want = CHUNK, take;
	int rc;
	for (;;) {
		if (!r->rd.buf && (rc = reader_open_next(m)) <= 0)
			return rc;
		ssize_t n = loom_reader_fill_err(&r->rd, want, r->name, &m->err);
		if (n < 0)
			return (int)n;
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
		int open_doc;
		size_t cut = find_cut(&m->o, p, (size_t)n, &open_doc);
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
	if (buf_need(&ch->in, take + 1))
		return loom_err_set(&m->err, LOOM_ENOMEM, "%s: out of memory", r->name);
	memcpy(ch->in.p, r->rd.buf + r->rd.start, take);
	ch->in.n = take;
	r->rd.start += take;
	r->bytes += take;
	m->st.bytes = r->bytes;
	if (r->rd.eof)
		reader_close(r);
	if (m->o.docs == LOOM_DOCS_JSONL) {
		const uint8_t *q = ch->in.p, *e = ch->in.p + ch->in.n;
		while ((q = memchr(q, '\n', (size_t)(e - q)))) {
			q++;
			r->line++;
		}
	}
	return 1;
}

/* ---- writer side: in input order, joining documents across chunks ------- */

struct span {
	int active, flushed, sp;
	uint64_t count;
	struct loom_ids pending;
};

static int span_add(struct span *s, const struct loom_encode_mt_opts *c,
		    const struct loom_ids *ids, struct buf *ob)
{
	s->active = 1;
	s->count += ids->n;
	if (s->flushed)
		return fmt_ids(ob, c->fmt, ids->v, ids->n, &s->sp);
	if (loom_ids_reserve(&s->pending, ids->n))
		return LOOM_ENOMEM;
	memcpy(s->pending.v + s->pending.n, ids->v, ids->n * sizeof *ids->v);
	s->pending.n += ids->n;
	if (s->count >= c->min_tokens && s->count > 0) {
		if (fmt_ids(ob, c->fmt, s->pending.v, s->pending.n, &s->sp))
			return LOOM_ENOMEM;
		s->pending.n = 0;
		s->flushed = 1;
	}
	return 0;
}

static int span_end(struct span *s, const struct loom_encode_mt_opts *c, struct buf *ob,
		    struct loom_encode_mt_stats *t)
{
	if (s->flushed) {
		if (end_doc_fmt(ob, c, &s->sp))
			return LOOM_ENOMEM;
		t->docs++;
		t->tokens += s->count + (c->eos != LOOM_VOCAB_NONE);
	} else if (s->count) {
		t->dropped++;
	}
	s->active = s->flushed = s->sp = 0;
	s->count = 0;
	s->pending.n = 0;
	return 0;
}

/* What the caller's thread keeps while writing. */
struct writer {
	struct span span;
	struct buf ob;
};

static int put(struct loom_encode_mt *m, const void *p, size_t n)
{
	int rc = n ? m->o.write(m->o.ctx, p, n) : 0;
	if (rc < 0)
		return loom_err_set(&m->err, rc, "cannot write the ids");
	return 0;
}

static int write_chunk(struct loom_encode_mt *m, struct writer *w, struct chunk *ch)
{
	const struct loom_encode_mt_opts *c = &m->o;
	if (ch->err.code < 0) {
		m->err = ch->err;
		return ch->err.code;
	}
	w->ob.n = 0;
	if (ch->has_head && (span_add(&w->span, c, &ch->head, &w->ob) ||
			     (ch->head_ends && span_end(&w->span, c, &w->ob, &m->st))))
		goto nomem;
	if (put(m, w->ob.p, w->ob.n) || put(m, ch->out.p, ch->out.n))
		return m->err.code;
	m->st.docs += ch->docs;
	m->st.dropped += ch->dropped;
	m->st.tokens += ch->tokens;
	if (ch->has_tail) {
		w->ob.n = 0;
		if (span_add(&w->span, c, &ch->tail, &w->ob))
			goto nomem;
		if (put(m, w->ob.p, w->ob.n))
			return m->err.code;
	}
	if (c->progress)
		c->progress(c->ctx, &m->st);
	return 0;
nomem:
	return loom_err_set(&m->err, LOOM_ENOMEM, "%s: out of memory", ch->file);
}

/* The end of the input: a document still open is complete. */
static int write_end(struct loom_encode_mt *m, struct writer *w)
{
	if (!w->span.active)
		return 0;
	w->ob.n = 0;
	if (span_end(&w->span, &m->o, &w->ob, &m->st))
		return loom_err_set(&m->err, LOOM_ENOMEM, "out of memory");
	return put(m, w->ob.p, w->ob.n);
}

/* ---- one thread, or an ordered pool of workers ---------------------------- */

static int encode_serial(struct loom_encode_mt *m, struct writer *w)
{
	struct encoder e;
	struct chunk ch = { 0 };
	int rc;
	if (encoder_init(&e, &m->o)) {
		encoder_release(&e);
		return loom_err_set(&m->err, LOOM_ENOMEM, "out of memory");
	}
	while ((rc = reader_fill(m, &ch)) > 0) {
		process_chunk(&ch, &e, &m->o);
		if ((rc = write_chunk(m, w, &ch)))
			break;
	}
	chunk_release(&ch);
	encoder_release(&e);
	return rc;
}

struct pool {
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	struct chunk *slots;
	size_t nslots;
	uint64_t submitted, taken;
	int quit;
	const struct loom_encode_mt_opts *cfg;
};

struct worker {
	struct pool *p;
	pthread_t th;
	int started;
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
		if (p->quit) {
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

/* Read chunks into free slots, write the done ones in order. */
static int pool_loop(struct loom_encode_mt *m, struct writer *w, struct pool *p)
{
	uint64_t written = 0;
	int eof = 0, rc;
	for (;;) {
		if (!eof && p->submitted - written < p->nslots) {
			struct chunk *ch = &p->slots[p->submitted % p->nslots];
			if ((rc = reader_fill(m, ch)) < 0)
				return rc;
			eof = rc == 0;
			if (eof)
				continue;
			pthread_mutex_lock(&p->mu);
			ch->state = 1;
			p->submitted++;
			pthread_cond_signal(&p->work);
			pthread_mutex_unlock(&p->mu);
			continue;
		}
		if (written == p->submitted)
			return 0;
		struct chunk *ch = &p->slots[written % p->nslots];
		pthread_mutex_lock(&p->mu);
		while (ch->state != 2)
			pthread_cond_wait(&p->done, &p->mu);
		pthread_mutex_unlock(&p->mu);
		if ((rc = write_chunk(m, w, ch)))
			return rc;
		ch->state = 0;
		written++;
	}
}

static int encode_parallel(struct loom_encode_mt *m, struct writer *w)
{
	int n = m->o.threads, rc = 0;
	struct pool p = { .nslots = (size_t)n * 3, .cfg = &m->o };
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.work, NULL);
	pthread_cond_init(&p.done, NULL);
	p.slots = calloc(p.nslots, sizeof *p.slots);
	struct worker *wk = calloc((size_t)n, sizeof *wk);
	if (!p.slots || !wk)
		rc = loom_err_set(&m->err, LOOM_ENOMEM, "out of memory");
	for (int i = 0; rc == 0 && i < n; i++) {
		wk[i].p = &p;
		if (encoder_init(&wk[i].e, &m->o))
			rc = loom_err_set(&m->err, LOOM_ENOMEM, "out of memory");
		else if ((errno = pthread_create(&wk[i].th, NULL, worker_main, &wk[i])))
			rc = loom_err_errno(&m->err, LOOM_ENOMEM, errno, "cannot start a thread");
		else
			wk[i].started = 1;
	}
	if (rc == 0)
		rc = pool_loop(m, w, &p);
	pthread_mutex_lock(&p.mu);
	p.quit = 1;
	pthread_cond_broadcast(&p.work);
	pthread_mutex_unlock(&p.mu);
	for (int i = 0; wk && i < n; i++) {
		if (wk[i].started)
			pthread_join(wk[i].th, NULL);
		encoder_release(&wk[i].e);
	}
	for (size_t i = 0; p.slots && i < p.nslots; i++)
		chunk_release(&p.slots[i]);
	free(p.slots);
	free(wk);
	pthread_cond_destroy(&p.done);
	pthread_cond_destroy(&p.work);
	pthread_mutex_destroy(&p.mu);
	return rc;
}

/* ---- the object ------------------------------------------------------------ */

struct loom_encode_mt *loom_encode_mt_new(const struct loom_encode_mt_opts *o,
					  struct loom_err *err)
{
	if (!o->vocab == !o->wp || !o->write || o->threads < 1 || o->threads > 256 ||
	    o->docs > LOOM_DOCS_WHOLE || o->fmt > LOOM_TOK_TEXT) {
		loom_err_set(err, LOOM_EINVAL,
			     "loom_encode_mt: needs one vocabulary, a write function, 1 to 256 "
			     "threads, a document mode and a format");
		return NULL;
	}
	struct loom_encode_mt *m = calloc(1, sizeof *m);
	if (!m) {
		loom_err_set(err, LOOM_ENOMEM, "out of memory");
		return NULL;
	}
	m->o = *o;
	if (!m->o.field)
		m->o.field = "text";
	return m;
}

int loom_encode_mt_run(struct loom_encode_mt *m, const char *const *files, size_t nfiles)
{
	if (m->ran)
		return loom_err_set(&m->err, LOOM_EINVAL, "loom_encode_mt_run: runs once");
	m->ran = 1;
	m->r = (struct reader){ .files = files, .nfiles = nfiles };
	struct writer w = { 0 };
	int rc = m->o.threads == 1 ? encode_serial(m, &w) : encode_parallel(m, &w);
	if (rc == 0)
		rc = write_end(m, &w);
	reader_close(&m->r);
	free(w.ob.p);
	loom_ids_release(&w.span.pending);
	return rc;
}

void loom_encode_mt_get_stats(const struct loom_encode_mt *m, struct loom_encode_mt_stats *st)
{
	*st = m->st;
}

const char *loom_encode_mt_error(const struct loom_encode_mt *m)
{
	return m->err.msg;
}

void loom_encode_mt_free(struct loom_encode_mt *m)
{
	free(m);
}
