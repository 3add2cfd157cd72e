/* loom_bpe_train.c - byte-level BPE training (see loom_bpe_train.h) */
#include "loom_bpe_train.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "loom_common.h"
#include "loom_file.h"
#include "loom_pretok.h"
#include "loom_utf8.h"
#include "loom_vocab.h"

/* Make room for `need` elements of `size` bytes in the array *pp of *cap
 * elements (doubling, at least `first`): 0 or LOOM_ENOMEM. */
static int grow(void *pp, size_t *cap, size_t need, size_t size, size_t first)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : first;
	while (c < need)
		c *= 2;
	void *q = realloc(*(void **)pp, c * size);
	if (!q)
		return LOOM_ENOMEM;
	*(void **)pp = q;
	*cap = c;
	return 0;
}

/* ---- a string -> u64 hash table (pre-token counts, token lookup) ------- */

struct strtab {
	uint64_t *slot;     /* (hash >> 32) << 32 | (entry index + 1); 0 empty */
	size_t mask;        /* slots - 1 */
	uint64_t *off;      /* per entry: offset of its bytes in `bytes` */
	uint32_t *len;
	uint64_t *val;
	size_t n, cap;
	uint8_t *bytes;
	size_t nbytes, bytescap;
};

static uint64_t mix64(uint64_t a, uint64_t b)
{
	__uint128_t r = (__uint128_t)a * b;
	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static uint64_t hash_bytes(const uint8_t *s, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xa0761d6478bd642full);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v;
		memcpy(&v, s + i, 8);
		h = mix64(h ^ v, 0xe7037ed1a0b428dbull);
	}
	if (i < n) {
		uint64_t v = 0;
		memcpy(&v, s + i, n - i);
		h = mix64(h ^ v, 0x8ebc6af09c88c6e3ull);
	}
	return mix64(h, 0x589965cc75374cc3ull);
}

static int strtab_init(struct strtab *t, size_t slots)
{
	memset(t, 0, sizeof *t);
	t->slot = calloc(slots, sizeof *t->slot);
	if (!t->slot)
		return LOOM_ENOMEM;
	t->mask = slots - 1;
	return 0;
}

static void strtab_release(struct strtab *t)
{
	free(t->slot);
	free(t->off);
	free(t->len);
	free(t->val);
	free(t->bytes);
	memset(t, 0, sizeof *t);
}

static int strtab_grow_slots(struct strtab *t)
{
	size_t nslots = (t->mask + 1) * 2;
	uint64_t *ns = calloc(nslots, sizeof *ns);
	if (!ns)
		return LOOM_ENOMEM;
	for (size_t i = 0; i <= t->mask; i++) {
		uint64_t e = t->slot[i];
		if (!e)
			continue;
		uint32_t idx = (uint32_t)e - 1;
		size_t j = hash_bytes(t->bytes + t->off[idx], t->len[idx]) & (nslots - 1);
		while (ns[j])
			j = (j + 1) & (nslots - 1);
		ns[j] = e;
	}
	free(t->slot);
	t->slot = ns;
	t->mask = nslots - 1;
	return 0;
}

/* Find s; if absent and `add`, insert it with value 0.  Returns the entry
 * index, -1 if absent (add == 0), or LOOM_ENOMEM (as a value < -1). */
static long strtab_find(struct strtab *t, const uint8_t *s, size_t n, int add)
{
	uint64_t h = hash_bytes(s, n);
	uint64_t tag = h & 0xffffffff00000000ull;
	size_t j = h & t->mask;
	for (;;) {
		uint64_t e = t->slot[j];
		if (!e)
			break;
		if ((e & 0xffffffff00000000ull) == tag) {
			uint32_t idx = (uint32_t)e - 1;
			if (t->len[idx] == n && !memcmp(t->bytes + t->off[idx], s, n))
				return idx;
		}
		j = (j + 1) & t->mask;
	}
	if (!add)
		return -1;
	if (n > UINT32_MAX || t->n >= UINT32_MAX - 1)
		return LOOM_ERANGE;
	if (t->n == t->cap) {
		size_t c1 = t->cap, c2 = t->cap, c3 = t->cap;
		if (grow(&t->off, &c1, t->n + 1, sizeof *t->off, 1024) < 0 ||
		    grow(&t->len, &c2, t->n + 1, sizeof *t->len, 1024) < 0 ||
		    grow(&t->val, &c3, t->n + 1, sizeof *t->val, 1024) < 0)
			return LOOM_ENOMEM;
		t->cap = c1;
	}
	if (grow(&t->bytes, &t->bytescap, t->nbytes + n, 1, 4096) < 0)
		return LOOM_ENOMEM;
	size_t idx = t->n++;
	memcpy(t->bytes + t->nbytes, s, n);
	t->off[idx] = t->nbytes;
	t->len[idx] = (uint32_t)n;
	t->val[idx] = 0;
	t->nbytes += n;
	t->slot[j] = tag | (idx + 1);
	if (t->n * 2 > t->mask + 1) {
		int rc = strtab_grow_slots(t);
		if (rc < 0)
			return rc;
	}
	return (long)idx;
}

/* ---- GPT-2's byte order ------------------------------------------------ */

/* id -> byte and byte -> id: the bytes in the order of the code points
 * bytes_to_unicode prints them as (printable bytes first, as themselves). */
static void byte_order(uint8_t id2byte[256], uint16_t byte2id[256])
{
	int n = 0;
	for (uint32_t cp = 0; cp < 512 && n < 256; cp++) {
		int b = loom_gpt2_unicode_to_byte(cp);
		if (b >= 0)
			id2byte[n++] = (uint8_t)b;
	}
	for (int i = 0; i < 256; i++)
		byte2id[id2byte[i]] = (uint16_t)i;
}

/* ---- the trainer ------------------------------------------------------- */

struct pair {
	uint64_t key;       /* left id << 32 | right id */
	int64_t cnt;        /* weighted count */
	uint32_t *occ;      /* words that (may) contain the pair, no adjacent dups */
	uint32_t n, cap;
	uint32_t stamp;     /* merge step that last touched it */
};

/* Words longer than this many bytes are merged through position lists
 * (a linked list of symbols) instead of being rescanned: a pair's
 * occurrence list then holds (word | OCC_POS, position | OCC_POS) entries
 * for them, so a merge costs its occurrences, not the word's length, and a
 * huge single pre-token is not quadratic. */
#define LONG_WORD 256
#define OCC_POS 0x80000000u
#define NOPOS UINT32_MAX

struct word {
	uint64_t start;     /* first symbol in sym[] */
	uint64_t links;     /* long words: first entry in lnext/lprev */
	uint64_t count;     /* occurrences of the pre-token */
	uint32_t len;       /* symbols now */
	uint32_t stamp;     /* merge step that last visited it */
};

struct pslot {
	uint64_t key;
	uint32_t idx;       /* pair index + 1; 0 = empty */
};

struct heap_ent {
	uint64_t cnt;
	uint64_t key;
};

struct loom_bpe_trainer {
	struct loom_err err;
	/* counting */
	struct strtab words;      /* pre-token -> count */
	uint8_t *doc;
	size_t doclen, doccap, cut_at;
	struct loom_bpe_train_stats st;
	int learned;
	/* learning */
	uint8_t id2byte[256];
	uint16_t byte2id[256];
	uint32_t *sym;            /* all words' symbols */
	struct word *w;           /* per distinct pre-token */
	uint32_t *lnext, *lprev;  /* long words: symbol links (NOPOS = none) */
	size_t long_word;         /* threshold (bytes) for position lists */
	struct pair *pairs;
	size_t npairs, pairscap;
	struct pslot *pmap;       /* pair map: key -> index (open addressing) */
	size_t pmask;
	struct heap_ent *heap;
	size_t nheap, heapcap;
	uint32_t *touched;
	size_t ntouched, touchedcap;
	uint32_t step;
	/* results */
	struct strtab toks;       /* token bytes -> id */
	uint32_t *tokent;         /* id -> entry in toks (specials: UINT32_MAX) */
	size_t ntok, tokcap;
	uint32_t (*merges)[3];
	size_t nmerges, mergescap;
	char **special;           /* special texts, in the order given */
	uint32_t *special_id;
	size_t nspecial;
};

#define DOC_CUT (1u << 20)

struct loom_bpe_trainer *loom_bpe_trainer_new(void)
{
	struct loom_bpe_trainer *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	if (strtab_init(&t->words, 1 << 10) < 0) {
		free(t);
		return NULL;
	}
	t->cut_at = DOC_CUT;
	t->long_word = LONG_WORD;
	byte_order(t->id2byte, t->byte2id);
	return t;
}

void loom_bpe_trainer_free(struct loom_bpe_trainer *t)
{
	if (!t)
		return;
	strtab_release(&t->words);
	strtab_release(&t->toks);
	free(t->doc);
	free(t->sym);
	free(t->w);
	free(t->lnext);
	free(t->lprev);
	for (size_t i = 0; i < t->npairs; i++)
		free(t->pairs[i].occ);
	free(t->pairs);
	free(t->pmap);
	free(t->heap);
	free(t->touched);
	free(t->tokent);
	free(t->merges);
	for (size_t i = 0; i < t->nspecial; i++)
		free(t->special[i]);
	free(t->special);
	free(t->special_id);
	free(t);
}

const char *loom_bpe_trainer_error(const struct loom_bpe_trainer *t)
{
	return t->err.msg;
}

void loom_bpe_trainer_stats(const struct loom_bpe_trainer *t, struct loom_bpe_train_stats *s)
{
	*s = t->st;
	s->distinct = t->words.n;
}

/* ---- counting ---------------------------------------------------------- */

static int count_pieces(struct loom_bpe_trainer *t, const uint8_t *s, size_t n)
{
	for (size_t p = 0; p < n;) {
		size_t k = loom_pretok_next(s + p, n - p);
		long e = strtab_find(&t->words, s + p, k, 1);
		if (e < 0)
			return loom_err_set(&t->err, (int)e, "counting pre-tokens: %s",
					    loom_strerror((int)e));
		t->words.val[e]++;
		t->st.pretokens++;
		p += k;
	}
	return 0;
}

int loom_bpe_trainer_feed(struct loom_bpe_trainer *t, const void *buf, size_t n)
{
	if (t->learned)
		return loom_err_set(&t->err, LOOM_EINVAL, "feed after learn");
	if (!n)
		return 0;
	if (grow(&t->doc, &t->doccap, t->doclen + n, 1, 65536) < 0)
		return loom_err_set(&t->err, LOOM_ENOMEM, "out of memory");
	memcpy(t->doc + t->doclen, buf, n);
	t->doclen += n;
	t->st.bytes += n;
	if (t->doclen >= t->cut_at) {
		/* a long document: count what is certainly complete */
		size_t cut = loom_pretok_safe_cut(t->doc, t->doclen, 1u << 16);
		if (!cut) {
			t->cut_at = t->doclen * 2; /* no cut point yet: try later */
			return 0;
		}
		int rc = count_pieces(t, t->doc, cut);
		if (rc < 0)
			return rc;
		memmove(t->doc, t->doc + cut, t->doclen - cut);
		t->doclen -= cut;
		t->cut_at = t->doclen + DOC_CUT;
	}
	return 0;
}

int loom_bpe_trainer_end_doc(struct loom_bpe_trainer *t)
{
	if (t->learned)
		return loom_err_set(&t->err, LOOM_EINVAL, "feed after learn");
	int rc = count_pieces(t, t->doc, t->doclen);
	t->doclen = 0;
	t->cut_at = DOC_CUT;
	if (t->doccap > 4 * DOC_CUT) { /* give a huge document's buffer back */
		free(t->doc);
		t->doc = NULL;
		t->doccap = 0;
	}
	t->st.docs++;
	return rc;
}

int loom_bpe_trainer_add_doc(struct loom_bpe_trainer *t, const void *buf, size_t n)
{
	if (t->doclen || t->learned) {
		int rc = loom_bpe_trainer_feed(t, buf, n);
		return rc < 0 ? rc : loom_bpe_trainer_end_doc(t);
	}
	t->st.bytes += n;
	t->st.docs++;
	return count_pieces(t, buf, n);
}

int loom_bpe_trainer_feed_docs(struct loom_bpe_trainer *t, const void *buf, size_t n, int sep,
			       int *open)
{
	const uint8_t *b = buf;
	if (sep < 0) {
		*open = 1;
		return n ? loom_bpe_trainer_feed(t, b, n) : 0;
	}
	while (n) {
		const uint8_t *e = memchr(b, sep, n);
		if (!e) {
			*open = 1;
			return loom_bpe_trainer_feed(t, b, n);
		}
		size_t k = (size_t)(e - b);
		int rc = 0;
		if (*open && (rc = loom_bpe_trainer_feed(t, b, k)) >= 0)
			rc = loom_bpe_trainer_end_doc(t);
		else if (!*open && k)
			rc = loom_bpe_trainer_add_doc(t, b, k);
		if (rc < 0)
			return rc;
		*open = 0;
		b += k + 1;
		n -= k + 1;
	}
	return 0;
}

/* ---- learning: pairs, heap --------------------------------------------- */

static uint64_t key_hash(uint64_t k)
{
	return mix64(k ^ 0x2d358dccaa6c78a5ull, 0x8bb84b93962eacc9ull);
}

static int pmap_grow(struct loom_bpe_trainer *t)
{
	size_t nslots = t->pmask ? (t->pmask + 1) * 2 : 1 << 10;
	struct pslot *m = calloc(nslots, sizeof *m);
	if (!m)
		return LOOM_ENOMEM;
	for (size_t i = 0; i < t->npairs; i++) {
		size_t j = key_hash(t->pairs[i].key) & (nslots - 1);
		while (m[j].idx)
			j = (j + 1) & (nslots - 1);
		m[j].key = t->pairs[i].key;
		m[j].idx = (uint32_t)i + 1;
	}
	free(t->pmap);
	t->pmap = m;
	t->pmask = nslots - 1;
	return 0;
}

/* Index of the pair `key`, created (count 0) if missing; < 0 on ENOMEM. */
static long pair_get(struct loom_bpe_trainer *t, uint64_t key)
{
	size_t j = key_hash(key) & t->pmask;
	for (;;) {
		uint32_t i = t->pmap[j].idx;
		if (!i)
			break;
		if (t->pmap[j].key == key)
			return i - 1;
		j = (j + 1) & t->pmask;
	}
	if (grow(&t->pairs, &t->pairscap, t->npairs + 1, sizeof *t->pairs, 1024) < 0)
		return LOOM_ENOMEM;
	size_t idx = t->npairs++;
	struct pair *p = &t->pairs[idx];
	memset(p, 0, sizeof *p);
	p->key = key;
	p->stamp = UINT32_MAX;
	t->pmap[j].key = key;
	t->pmap[j].idx = (uint32_t)idx + 1;
	if (t->npairs * 2 > t->pmask + 1 && pmap_grow(t) < 0)
		return LOOM_ENOMEM;
	return (long)idx;
}

static long pair_find(const struct loom_bpe_trainer *t, uint64_t key)
{
	size_t j = key_hash(key) & t->pmask;
	for (;;) {
		uint32_t i = t->pmap[j].idx;
		if (!i)
			return -1;
		if (t->pmap[j].key == key)
			return i - 1;
		j = (j + 1) & t->pmask;
	}
}

/* Add delta * count(w) to pair (x, y); a positive delta also records that
 * w contains the pair and marks the pair as touched in this step. */
static int pair_add(struct loom_bpe_trainer *t, uint32_t x, uint32_t y, int delta,
		    uint32_t w, uint64_t wcount, uint32_t pos)
{
	long i = pair_get(t, (uint64_t)x << 32 | y);
	if (i < 0)
		return (int)i;
	struct pair *p = &t->pairs[i];
	p->cnt += delta * (int64_t)wcount;
	if (delta < 0)
		return 0;
	int add = pos != NOPOS ? 2 : !p->n || p->occ[p->n - 1] != w;
	if (add) {
		if (p->n + 2 > p->cap) {
			if (p->cap > UINT32_MAX / 2)
				return LOOM_ERANGE;
			uint32_t cap = p->cap ? p->cap * 2 : 4;
			uint32_t *o = realloc(p->occ, (size_t)cap * sizeof *o);
			if (!o)
				return LOOM_ENOMEM;
			p->occ = o;
			p->cap = cap;
		}
		if (pos == NOPOS) {
			p->occ[p->n++] = w;
		} else { /* a long word: (word, position), both tagged */
			p->occ[p->n++] = w | OCC_POS;
			p->occ[p->n++] = pos | OCC_POS;
		}
	}
	if (p->stamp != t->step) {
		p->stamp = t->step;
		if (grow(&t->touched, &t->touchedcap, t->ntouched + 1, sizeof *t->touched,
			 1024) < 0)
			return LOOM_ENOMEM;
		t->touched[t->ntouched++] = (uint32_t)i;
	}
	return 0;
}

/* Max-heap order: higher count first, then smaller (left, right) ids. */
static int heap_before(const struct heap_ent *x, const struct heap_ent *y)
{
	return x->cnt > y->cnt || (x->cnt == y->cnt && x->key < y->key);
}

static void heap_sift_down(struct heap_ent *h, size_t n, size_t i)
{
	struct heap_ent e = h[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && heap_before(&h[c + 1], &h[c]))
			c++;
		if (!heap_before(&h[c], &e))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = e;
}

static int heap_push(struct loom_bpe_trainer *t, uint64_t cnt, uint64_t key)
{
	if (grow(&t->heap, &t->heapcap, t->nheap + 1, sizeof *t->heap, 1024) < 0)
		return LOOM_ENOMEM;
	struct heap_ent e = { cnt, key };
	size_t i = t->nheap++;
	while (i) {
		size_t up = (i - 1) / 2;
		if (!heap_before(&e, &t->heap[up]))
			break;
		t->heap[i] = t->heap[up];
		i = up;
	}
	t->heap[i] = e;
	return 0;
}

static void heap_pop(struct loom_bpe_trainer *t)
{
	t->heap[0] = t->heap[--t->nheap];
	if (t->nheap)
		heap_sift_down(t->heap, t->nheap, 0);
}

/* ---- learning: tokens -------------------------------------------------- */

static int tok_push(struct loom_bpe_trainer *t, uint32_t entry)
{
	if (grow(&t->tokent, &t->tokcap, t->ntok + 1, sizeof *t->tokent, 1024) < 0)
		return LOOM_ENOMEM;
	t->tokent[t->ntok++] = entry;
	return 0;
}

/* The id of the token made of the bytes of a then b (new if needed). */
static long tok_concat(struct loom_bpe_trainer *t, uint32_t a, uint32_t b)
{
	uint32_t ea = t->tokent[a], eb = t->tokent[b];
	size_t la = t->toks.len[ea], lb = t->toks.len[eb];
	uint8_t small[256], *buf = small;
	if (la + lb > sizeof small && !(buf = malloc(la + lb)))
		return LOOM_ENOMEM;
	memcpy(buf, t->toks.bytes + t->toks.off[ea], la);
	memcpy(buf + la, t->toks.bytes + t->toks.off[eb], lb);
	long e = strtab_find(&t->toks, buf, la + lb, 1);
	if (buf != small)
		free(buf);
	if (e < 0)
		return e;
	if ((size_t)e == t->ntok) { /* a new string: the next id */
		t->toks.val[e] = t->ntok;
		int rc = tok_push(t, (uint32_t)e);
		if (rc < 0)
			return rc;
	}
	return (long)t->toks.val[e];
}

/* Merge (a, b) -> z at position pos of long word w if the pair still is
 * there.  A pair's positions in a word are recorded in increasing order
 * (a pair is new in the step that makes it, and that step walks each word
 * left to right), so this is the same left-to-right, non-overlapping merge
 * as merge_word. */
static int merge_at(struct loom_bpe_trainer *t, uint32_t w, uint32_t pos, uint32_t a,
		    uint32_t b, uint32_t z)
{
	struct word *wd = &t->w[w];
	uint32_t *s = t->sym + wd->start;
	uint32_t *nx = t->lnext + wd->links, *pv = t->lprev + wd->links;
	if (s[pos] != a)
		return 0;
	uint32_t n = nx[pos];
	if (n == NOPOS || s[n] != b)
		return 0;
	uint32_t p = pv[pos], nn = nx[n];
	uint64_t c = wd->count;
	int rc;
	if (p != NOPOS) {
		if ((rc = pair_add(t, s[p], a, -1, w, c, NOPOS)) < 0 ||
		    (rc = pair_add(t, s[p], z, 1, w, c, p)) < 0)
			return rc;
	}
	if (nn != NOPOS) {
		if ((rc = pair_add(t, b, s[nn], -1, w, c, NOPOS)) < 0 ||
		    (rc = pair_add(t, z, s[nn], 1, w, c, pos)) < 0)
			return rc;
		pv[nn] = pos;
	}
	s[pos] = z;
	s[n] = NOPOS;
	nx[pos] = nn;
	wd->len--;
	return 0;
}

/* Merge (a, b) -> z in word w, HuggingFace's Word::merge: left to right,
 * non-overlapping; each merge removes the neighbour pairs it breaks and
 * adds the ones it makes. */
static int merge_word(struct loom_bpe_trainer *t, uint32_t w, uint32_t a, uint32_t b,
		      uint32_t z)
{
	struct word *wd = &t->w[w];
	uint32_t *s = t->sym + wd->start;
	uint32_t n = wd->len, i = 0, j = 0;
	uint64_t c = wd->count;
	int rc = 0;
	while (i < n) {
		if (i + 1 < n && s[i] == a && s[i + 1] == b) {
			if (j > 0) {
				if ((rc = pair_add(t, s[j - 1], a, -1, w, c, NOPOS)) < 0 ||
				    (rc = pair_add(t, s[j - 1], z, 1, w, c, NOPOS)) < 0)
					return rc;
			}
			if (i + 2 < n) {
				if ((rc = pair_add(t, b, s[i + 2], -1, w, c, NOPOS)) < 0 ||
				    (rc = pair_add(t, z, s[i + 2], 1, w, c, NOPOS)) < 0)
					return rc;
			}
			s[j++] = z;
			i += 2;
		} else {
			s[j++] = s[i++];
		}
	}
	t->w[w].len = j;
	return 0;
}

static int check_specials(struct loom_bpe_trainer *t, const struct loom_bpe_train_opts *o)
{
	for (size_t i = 0; i < o->n_specials; i++) {
		const uint8_t *s = (const uint8_t *)o->specials[i];
		size_t n = strlen(o->specials[i]);
		if (!n)
			return loom_err_set(&t->err, LOOM_EINVAL, "special token %zu is empty",
					    i + 1);
		for (size_t p = 0; p < n;) {
			uint32_t cp;
			int valid;
			p += loom_utf8_decode(s + p, n - p, &cp, &valid);
			if (!valid)
				return loom_err_set(&t->err, LOOM_EINVAL,
						    "special token '%s' is not valid UTF-8",
						    o->specials[i]);
		}
		for (size_t k = 0; k < i; k++)
			if (!strcmp(o->specials[k], o->specials[i]))
				return loom_err_set(&t->err, LOOM_EINVAL,
						    "special token '%s' given twice",
						    o->specials[i]);
	}
	if (o->vocab_size < 256 + o->n_specials)
		return loom_err_set(&t->err, LOOM_EINVAL,
				    "vocabulary size %zu is smaller than 256 bytes + %zu special "
				    "token%s", o->vocab_size, o->n_specials,
				    o->n_specials == 1 ? "" : "s");
	if (o->vocab_size > UINT32_MAX / 2)
		return loom_err_set(&t->err, LOOM_EINVAL, "vocabulary size %zu is too large",
				    o->vocab_size);
	return 0;
}

static int add_specials(struct loom_bpe_trainer *t, const struct loom_bpe_train_opts *o)
{
	if (!o->n_specials)
		return 0;
	t->special = calloc(o->n_specials, sizeof *t->special);
	t->special_id = calloc(o->n_specials, sizeof *t->special_id);
	if (!t->special || !t->special_id)
		return LOOM_ENOMEM;
	for (size_t i = 0; i < o->n_specials; i++) {
		size_t n = strlen(o->specials[i]);
		uint8_t *raw = malloc(n + 1);
		if (!raw || !(t->special[i] = strdup(o->specials[i]))) {
			free(raw);
			return LOOM_ENOMEM;
		}
		t->nspecial = i + 1;
		size_t bad;
		long k = loom_gpt2_str_to_bytes(o->specials[i], n, raw, &bad);
		long e = k > 0 ? strtab_find(&t->toks, raw, (size_t)k, 0) : -1;
		free(raw);
		if (e >= 0 && t->toks.val[e] < t->ntok && t->tokent[t->toks.val[e]] == (uint32_t)e) {
			t->special_id[i] = (uint32_t)t->toks.val[e];
			continue;
		}
		t->special_id[i] = (uint32_t)t->ntok;
		int rc = tok_push(t, UINT32_MAX);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int learn(struct loom_bpe_trainer *t, const struct loom_bpe_train_opts *o)
{
	size_t nw = t->words.n;
	int rc;

	/* words as symbol arrays */
	t->sym = malloc((t->words.nbytes ? t->words.nbytes : 1) * sizeof *t->sym);
	t->w = malloc(nw * sizeof *t->w);
	if (!t->sym || !t->w)
		return LOOM_ENOMEM;
	if (nw >= OCC_POS)
		return LOOM_ERANGE;
	size_t nlinks = 0;
	for (size_t w = 0; w < nw; w++) {
		const uint8_t *s = t->words.bytes + t->words.off[w];
		uint32_t len = t->words.len[w];
		t->w[w].start = t->words.off[w];
		t->w[w].len = len;
		t->w[w].stamp = UINT32_MAX;
		t->w[w].count = t->words.val[w];
		t->w[w].links = UINT64_MAX;
		if (len > t->long_word) {
			if (len >= OCC_POS)
				return LOOM_ERANGE;
			t->w[w].links = nlinks;
			nlinks += len;
		}
		for (uint32_t i = 0; i < len; i++)
			t->sym[t->words.off[w] + i] = t->byte2id[s[i]];
	}
	if (nlinks) {
		t->lnext = malloc(nlinks * sizeof *t->lnext);
		t->lprev = malloc(nlinks * sizeof *t->lprev);
		if (!t->lnext || !t->lprev)
			return LOOM_ENOMEM;
		for (size_t w = 0; w < nw; w++) {
			if (t->w[w].links == UINT64_MAX)
				continue;
			uint32_t *nx = t->lnext + t->w[w].links, *pv = t->lprev + t->w[w].links;
			for (uint32_t i = 0; i < t->w[w].len; i++) {
				nx[i] = i + 1 < t->w[w].len ? i + 1 : NOPOS;
				pv[i] = i ? i - 1 : NOPOS;
			}
		}
	}
	/* the byte strings are now only needed as symbols */
	free(t->words.bytes);
	t->words.bytes = NULL;
	free(t->words.slot);
	t->words.slot = NULL;
	free(t->words.off);
	t->words.off = NULL;
	free(t->words.len);
	t->words.len = NULL;
	free(t->words.val);
	t->words.val = NULL;

	/* base tokens */
	if ((rc = strtab_init(&t->toks, 1 << 12)) < 0)
		return rc;
	for (int i = 0; i < 256; i++) {
		long e = strtab_find(&t->toks, &t->id2byte[i], 1, 1);
		if (e < 0)
			return (int)e;
		t->toks.val[e] = (uint64_t)i;
		if ((rc = tok_push(t, (uint32_t)e)) < 0)
			return rc;
	}

	/* initial pair counts */
	if ((rc = pmap_grow(t)) < 0)
		return rc;
	t->step = 0;
	for (size_t w = 0; w < nw; w++) {
		const uint32_t *s = t->sym + t->w[w].start;
		int lw = t->w[w].links != UINT64_MAX;
		for (uint32_t i = 0; i + 1 < t->w[w].len; i++)
			if ((rc = pair_add(t, s[i], s[i + 1], 1, (uint32_t)w, t->w[w].count,
					   lw ? i : NOPOS)) < 0)
				return rc;
	}
	for (size_t i = 0; i < t->npairs; i++)
		if ((rc = heap_push(t, (uint64_t)t->pairs[i].cnt, t->pairs[i].key)) < 0)
			return rc;
	t->ntouched = 0;

	uint64_t minf = o->min_frequency ? o->min_frequency : 1;
	size_t target = o->vocab_size - o->n_specials; /* tokens before specials */
	size_t done_target = target - 256;
	while (t->ntok < target && t->nheap) {
		struct heap_ent top = t->heap[0];
		long pi = pair_find(t, top.key);
		int64_t cur = t->pairs[pi].cnt;
		if ((uint64_t)cur != top.cnt) {
			heap_pop(t);
			if (cur > 0 && (rc = heap_push(t, (uint64_t)cur, top.key)) < 0)
				return rc;
			continue;
		}
		if (top.cnt < minf)
			break;
		heap_pop(t);
		uint32_t a = (uint32_t)(top.key >> 32), b = (uint32_t)top.key;
		long z = tok_concat(t, a, b);
		if (z < 0)
			return (int)z;
		if (grow(&t->merges, &t->mergescap, t->nmerges + 1, sizeof *t->merges, 1024) < 0)
			return LOOM_ENOMEM;
		t->merges[t->nmerges][0] = a;
		t->merges[t->nmerges][1] = b;
		t->merges[t->nmerges][2] = (uint32_t)z;
		t->nmerges++;
		t->step = (uint32_t)t->nmerges;
		t->ntouched = 0;
		for (uint32_t k = 0; k < t->pairs[pi].n; k++) {
			uint32_t w = t->pairs[pi].occ[k];
			if (w & OCC_POS) { /* long word: one position */
				uint32_t pos = t->pairs[pi].occ[++k] & ~OCC_POS;
				if ((rc = merge_at(t, w & ~OCC_POS, pos, a, b, (uint32_t)z)) < 0)
					return rc;
				continue;
			}
			if (t->w[w].stamp == t->step)
				continue;
			t->w[w].stamp = t->step;
			if ((rc = merge_word(t, w, a, b, (uint32_t)z)) < 0)
				return rc;
		}
		/* the pair is gone from every word */
		t->pairs[pi].cnt = 0;
		free(t->pairs[pi].occ);
		t->pairs[pi].occ = NULL;
		t->pairs[pi].n = t->pairs[pi].cap = 0;
		for (size_t k = 0; k < t->ntouched; k++) {
			struct pair *p = &t->pairs[t->touched[k]];
			if (p->cnt > 0 && (rc = heap_push(t, (uint64_t)p->cnt, p->key)) < 0)
				return rc;
		}
		if (o->progress && (t->nmerges & 63) == 0)
			o->progress(o->progress_ctx, t->ntok - 256, done_target);
	}
	if (o->progress)
		o->progress(o->progress_ctx, t->ntok - 256, done_target);
	t->st.merges = t->nmerges;
	return add_specials(t, o);
}

void loom_bpe_trainer_set_long_word(struct loom_bpe_trainer *t, size_t bytes)
{
	t->long_word = bytes;
}

int loom_bpe_trainer_check(struct loom_bpe_trainer *t, const struct loom_bpe_train_opts *o)
{
	return check_specials(t, o);
}

int loom_bpe_trainer_learn(struct loom_bpe_trainer *t, const struct loom_bpe_train_opts *o)
{
	int rc;
	if (t->learned)
		return loom_err_set(&t->err, LOOM_EINVAL, "learn called twice");
	if ((rc = check_specials(t, o)) < 0)
		return rc;
	if (t->doclen && (rc = loom_bpe_trainer_end_doc(t)) < 0)
		return rc;
	if (!t->words.n)
		return loom_err_set(&t->err, LOOM_EINVAL, "no text to learn from (empty input)");
	t->learned = 1;
	t->st.distinct = t->words.n;
	rc = learn(t, o);
	/* learning state is no longer needed */
	free(t->sym);
	t->sym = NULL;
	for (size_t i = 0; i < t->npairs; i++)
		free(t->pairs[i].occ);
	free(t->pairs);
	t->pairs = NULL;
	t->npairs = t->pairscap = 0;
	free(t->heap);
	t->heap = NULL;
	t->nheap = t->heapcap = 0;
	free(t->w);
	t->w = NULL;
	free(t->lnext);
	free(t->lprev);
	t->lnext = t->lprev = NULL;
	free(t->pmap);
	t->pmap = NULL;
	free(t->touched);
	t->touched = NULL;
	t->ntouched = t->touchedcap = 0;
	if (rc < 0)
		return loom_err_set(&t->err, rc, "learning merges: %s", loom_strerror(rc));
	t->st.vocab = t->ntok;
	return 0;
}

const uint8_t *loom_bpe_trainer_token(const struct loom_bpe_trainer *t, size_t id, size_t *len)
{
	if (!t->learned || id >= t->ntok)
		return NULL;
	uint32_t e = t->tokent[id];
	if (e == UINT32_MAX) {
		for (size_t i = 0; i < t->nspecial; i++)
			if (t->special_id[i] == id) {
				*len = strlen(t->special[i]);
				return (const uint8_t *)t->special[i];
			}
		return NULL;
	}
	*len = t->toks.len[e];
	return t->toks.bytes + t->toks.off[e];
}

int loom_bpe_trainer_merge(const struct loom_bpe_trainer *t, size_t rank, uint32_t *left,
			   uint32_t *right, uint32_t *result)
{
	if (!t->learned || rank >= t->nmerges)
		return LOOM_ERANGE;
	*left = t->merges[rank][0];
	*right = t->merges[rank][1];
	*result = t->merges[rank][2];
	return 0;
}

/* ---- output ------------------------------------------------------------ */

/* Token `id` as encoder.json spells it: bytes through bytes_to_unicode
 * (specials verbatim).  NUL-terminated, in a buffer of >= 2 * len + 1. */
static char *token_text(const struct loom_bpe_trainer *t, size_t id, char **buf, size_t *cap)
{
	size_t n;
	const uint8_t *s = loom_bpe_trainer_token(t, id, &n);
	if (*cap < 2 * n + 1) {
		char *b = realloc(*buf, 2 * n + 1);
		if (!b)
			return NULL;
		*buf = b;
		*cap = 2 * n + 1;
	}
	char *o = *buf;
	if (t->tokent[id] == UINT32_MAX) {
		memcpy(o, s, n);
		o[n] = 0;
		return o;
	}
	o += loom_gpt2_bytes_to_str(s, n, o);
	*o = 0;
	return *buf;
}

struct texts {
	char **s;           /* by id */
	size_t n;
};

static void texts_free(struct texts *x)
{
	for (size_t i = 0; x->s && i < x->n; i++)
		free(x->s[i]);
	free(x->s);
}

static int make_texts(const struct loom_bpe_trainer *t, struct texts *x)
{
	char *buf = NULL;
	size_t cap = 0;
	x->n = t->ntok;
	x->s = calloc(t->ntok, sizeof *x->s);
	if (!x->s)
		return LOOM_ENOMEM;
	for (size_t id = 0; id < t->ntok; id++) {
		char *s = token_text(t, id, &buf, &cap);
		if (!s || !(x->s[id] = strdup(s))) {
			free(buf);
			return LOOM_ENOMEM;
		}
	}
	free(buf);
	return 0;
}

/* encoder.json: {"tok": id, ...} in id order; specials reusing an id are
 * not listed twice. */
static json_t *vocab_object(const struct loom_bpe_trainer *t, const struct texts *x)
{
	json_t *v = json_object();
	if (!v)
		return NULL;
	for (size_t id = 0; id < t->ntok; id++)
		if (json_object_set_new(v, x->s[id], json_integer((json_int_t)id)) < 0) {
			json_decref(v);
			return NULL;
		}
	return v;
}

static char *merges_text(const struct loom_bpe_trainer *t, const struct texts *x, size_t *len)
{
	size_t n = 16;
	for (size_t r = 0; r < t->nmerges; r++)
		n += strlen(x->s[t->merges[r][0]]) + strlen(x->s[t->merges[r][1]]) + 2;
	char *out = malloc(n), *o = out;
	if (!out)
		return NULL;
	o += sprintf(o, "#version: 0.2\n");
	for (size_t r = 0; r < t->nmerges; r++)
		o += sprintf(o, "%s %s\n", x->s[t->merges[r][0]], x->s[t->merges[r][1]]);
	*len = (size_t)(o - out);
	return out;
}

static json_t *byte_level(int prefix_space, int trim_offsets)
{
	return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space",
			 prefix_space, "trim_offsets", trim_offsets, "use_regex", 1);
}

static json_t *hf_tokenizer(const struct loom_bpe_trainer *t, const struct texts *x)
{
	json_t *added = json_array(), *merges = json_array(), *vocab = vocab_object(t, x);
	if (!added || !merges || !vocab)
		goto fail;
	for (size_t i = 0; i < t->nspecial; i++) {
		json_t *a = json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id",
				      (json_int_t)t->special_id[i], "content", t->special[i],
				      "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0,
				      "special", 1);
		if (!a || json_array_append_new(added, a) < 0)
			goto fail;
	}
	for (size_t r = 0; r < t->nmerges; r++) {
		const char *l = x->s[t->merges[r][0]], *rr = x->s[t->merges[r][1]];
		size_t ll = strlen(l), lr = strlen(rr);
		char *m = malloc(ll + lr + 2);
		if (!m)
			goto fail;
		memcpy(m, l, ll);
		m[ll] = ' ';
		memcpy(m + ll + 1, rr, lr + 1);
		int bad = json_array_append_new(merges, json_string(m)) < 0;
		free(m);
		if (bad)
			goto fail;
	}
	json_t *model = json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:o, s:o}", "type", "BPE",
				  "dropout", "unk_token", "continuing_subword_prefix",
				  "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0,
				  "vocab", vocab, "merges", merges);
	vocab = merges = NULL;
	if (!model)
		goto fail;
	json_t *root = json_pack("{s:s, s:n, s:n, s:o, s:n, s:o, s:o, s:o, s:o}", "version", "1.0",
				 "truncation", "padding", "added_tokens", added, "normalizer",
				 "pre_tokenizer", byte_level(0, 1), "post_processor",
				 byte_level(1, 0), "decoder", byte_level(1, 1), "model", model);
	return root;
fail:
	json_decref(added);
	json_decref(merges);
	json_decref(vocab);
	return NULL;
}

int loom_bpe_trainer_render(struct loom_bpe_trainer *t, char *data[3], size_t len[3])
{
	struct texts x = { NULL, 0 };
	data[0] = data[1] = data[2] = NULL;
	len[0] = len[1] = len[2] = 0;
	if (!t->learned)
		return loom_err_set(&t->err, LOOM_EINVAL, "write before learn");
	if (make_texts(t, &x) < 0) {
		texts_free(&x);
		return loom_err_set(&t->err, LOOM_ENOMEM, "out of memory");
	}
	json_t *enc = vocab_object(t, &x);
	data[0] = enc ? json_dumps(enc, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII) : NULL;
	json_decref(enc);
	data[1] = merges_text(t, &x, &len[1]);
	json_t *hf = hf_tokenizer(t, &x);
	data[2] = hf ? json_dumps(hf, JSON_PRESERVE_ORDER | JSON_INDENT(2)) : NULL;
	json_decref(hf);
	texts_free(&x);
	if (!data[0] || !data[1] || !data[2]) {
		for (int i = 0; i < 3; i++) {
			free(data[i]);
			data[i] = NULL;
		}
		return loom_err_set(&t->err, LOOM_ENOMEM, "out of memory while writing JSON");
	}
	len[0] = strlen(data[0]);
	len[2] = strlen(data[2]);
	return 0;
}

int loom_bpe_trainer_write(struct loom_bpe_trainer *t, const char *dir)
{
	static const char *const names[3] = { "encoder.json", "vocab.bpe", "tokenizer.json" };
	struct loom_outfile out[3];
	char *data[3];
	size_t len[3];
	int rc, created = 0, opened = 0;
	struct stat sb;

	if ((rc = loom_bpe_trainer_render(t, data, len)) < 0)
		return rc;
	if (mkdir(dir, 0777) == 0 ||
	    (errno == ENOENT && loom_mkdir_parent(dir, &t->err) == 0 && mkdir(dir, 0777) == 0)) {
		created = 1;
	} else if (errno != EEXIST || stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
		rc = loom_err_errno(&t->err, LOOM_EIO, errno == EEXIST ? ENOTDIR : errno,
				    "cannot create directory '%s'", dir);
		goto done;
	}
	for (int i = 0; i < 3; i++) {
		char path[4096];
		if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= sizeof path) {
			rc = loom_err_set(&t->err, LOOM_EINVAL, "directory name too long: '%s'", dir);
			goto done;
		}
		if ((rc = loom_outfile_open(&out[i], path)) < 0) {
			loom_err_set(&t->err, rc, "%s", loom_outfile_error(&out[i]));
			goto done;
		}
		opened = i + 1;
		if ((rc = loom_outfile_write(&out[i], data[i], len[i])) < 0 ||
		    (i != 1 && (rc = loom_outfile_write(&out[i], "\n", 1)) < 0)) {
			loom_err_set(&t->err, rc, "%s", loom_outfile_error(&out[i]));
			goto done;
		}
	}
	for (int i = 0; i < 3; i++)
		if ((rc = loom_outfile_commit(&out[i])) < 0) {
			loom_err_set(&t->err, rc, "%s", loom_outfile_error(&out[i]));
			goto done;
		}
	opened = 0;
done:
	for (int i = 0; i < opened; i++)
		loom_outfile_abort(&out[i]);
	if (rc < 0 && created)
		rmdir(dir);
	for (int i = 0; i < 3; i++)
		free(data[i]);
	return rc;
}

void loom_bpe_train_summary(const struct loom_bpe_train_stats *s, double total, double count,
			    double learn, double peak_bytes, char *buf, size_t n)
{
	char b1[32], b2[32];
	snprintf(buf, n, "train: %llu document%s, %s, %llu pre-tokens (%llu distinct), "
		 "%llu merges, vocabulary %llu; %.2f s (count %.2f s, learn %.2f s), peak memory %s",
		 (unsigned long long)s->docs, s->docs == 1 ? "" : "s",
		 loom_fmt_bytes((double)s->bytes, b1, sizeof b1), (unsigned long long)s->pretokens,
		 (unsigned long long)s->distinct, (unsigned long long)s->merges,
		 (unsigned long long)s->vocab, total, count, learn,
		 loom_fmt_bytes(peak_bytes, b2, sizeof b2));
}
