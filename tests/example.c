/* Unit tests for loom_example: the hand-written fast path is byte-identical
 * to protobuf-c on random inputs, decodes any valid encoding, rejects
 * non-Examples cleanly and agrees with protobuf-c on what is an Example. */
#include <stdlib.h>

#include "loom_example.h"
#include "tap.h"
#include "tensorflow/example.pb-c.h"

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A value whose varint length is uniformly 1..10 bytes. */
static int64_t rnd_value(void)
{
	unsigned bits = (unsigned)(rnd() % 64) + 1;
	uint64_t v = rnd() >> (64 - bits);
	return (int64_t)v;
}

/* Known vector: {"input_ids": [1, 2, 3]}. */
static void case_known_vector(void)
{
	static const uint8_t vec[] = { 0x0a, 0x16, 0x0a, 0x14, 0x0a, 0x09, 'i', 'n', 'p', 'u', 't',
				       '_', 'i', 'd', 's', 0x12, 0x07, 0x1a, 0x05, 0x0a, 0x03,
				       0x01, 0x02, 0x03 };
	uint32_t ids3[] = { 1, 2, 3 };
	uint8_t buf[256];
	size_t n = loom_example_encode_u32("input_ids", ids3, 3, buf);
	ok(n == sizeof vec && memcmp(buf, vec, n) == 0, "encode {input_ids:[1,2,3]} == known bytes");
}

/* Byte identity with protobuf-c on many random inputs. */
static void case_protobuf_c_identity(void)
{
	struct loom_err e;
	int same_i64 = 1, same_u32 = 1, roundtrip = 1, bound_ok = 1;
	size_t maxn = 5000;
	int64_t *v = malloc(maxn * sizeof *v), *back = malloc(maxn * sizeof *back);
	uint32_t *v32 = malloc(maxn * sizeof *v32), *back32 = malloc(maxn * sizeof *back32);
	uint8_t *out = malloc(loom_example_bound(64, maxn));
	const char *keys[] = { "input_ids", "x", "a_rather_long_feature_name_for_a_two_byte_length_"
				 "prefix_on_the_key_field_of_the_entry_xxxxxxxxxxxxxxxxxxxxxxxxxxxx" };
	int trials = 600;
	for (int t = 0; t < trials; t++) {
		size_t cnt = t < 20 ? (size_t)t : (size_t)(rnd() % (t % 10 == 0 ? maxn : 300));
		const char *key = keys[t % 3];
		int small = t % 2; /* u32 token ids vs arbitrary int64 */
		for (size_t i = 0; i < cnt; i++) {
			v[i] = small ? (int64_t)(rnd() % (t % 4 == 1 ? 50257 : 4294967296ull))
				     : rnd_value();
			v32[i] = (uint32_t)v[i];
		}
		uint8_t *ref;
		size_t rlen;
		if (loom_example_encode_pbc(key, v, cnt, &ref, &rlen, &e) < 0) {
			same_i64 = 0;
			break;
		}
		size_t l = loom_example_encode_i64(key, v, cnt, out);
		bound_ok &= l <= loom_example_bound(strlen(key), cnt);
		if (l != rlen || memcmp(out, ref, l)) {
			same_i64 = 0;
			diag("i64 mismatch: trial %d, %zu values, %zu vs %zu bytes", t, cnt, l, rlen);
		}
		if (small) {
			l = loom_example_encode_u32(key, v32, cnt, out);
			if (l != rlen || memcmp(out, ref, l)) {
				same_u32 = 0;
				diag("u32 mismatch: trial %d", t);
			}
		}
		size_t got = 0;
		int rc = loom_example_decode_i64(ref, rlen, key, back, maxn, &got, &e);
		if (rc || got != cnt || memcmp(back, v, cnt * sizeof *v)) {
			roundtrip = 0;
			diag("decode failed: trial %d rc %d %s", t, rc, e.msg);
		}
		if (small) {
			rc = loom_example_decode_u32(ref, rlen, key, back32, maxn, &got, &e);
			if (rc || got != cnt || memcmp(back32, v32, cnt * sizeof *v32))
				roundtrip = 0;
		}
		if (loom_example_check(ref, rlen, &e) || loom_example_check_pbc(ref, rlen, &e))
			roundtrip = 0;
		free(ref);
	}
	ok(same_i64, "encode_i64 == protobuf-c on %d random messages (all varint sizes)", trials);
	ok(same_u32, "encode_u32 == protobuf-c on the token-id messages");
	ok(bound_ok, "encoded sizes within loom_example_bound");
	ok(roundtrip, "fast decode(protobuf-c bytes) == values; both checks accept");
	free(v);
	free(back);
	free(v32);
	free(back32);
	free(out);
}

/* Decoding other valid encodings (this case and the two below): unpacked
 * values, extra features, repeated entries (last wins), merged
 * submessages. */
static void case_unpacked(void)
{
	struct loom_err e;
	/* Unpacked int64 list: 0a 0d 0a 0b 0a 01 'k' 12 06 1a 04 08 05 08 07 */
	static const uint8_t unpacked[] = { 0x0a, 0x0d, 0x0a, 0x0b, 0x0a, 0x01, 'k', 0x12, 0x06,
					    0x1a, 0x04, 0x08, 0x05, 0x08, 0x07 };
	size_t got;
	int64_t vals[4];
	is_int(loom_example_decode_i64(unpacked, sizeof unpacked, "k", vals, 4, &got, &e), 0,
	       "unpacked int64 values decode");
	ok(got == 2 && vals[0] == 5 && vals[1] == 7, "  values 5, 7");
	Tensorflow__Example *ex = tensorflow__example__unpack(NULL, sizeof unpacked, unpacked);
	ok(ex && ex->features->feature[0]->value->int64_list->n_value == 2,
	   "  protobuf-c agrees");
	tensorflow__example__free_unpacked(ex, NULL);
}

static void case_empty_name(void)
{
	struct loom_err e;
	/* An empty feature name is proto3's default: protobuf-c omits the
	 * key field, and so must loom (it wrote 0a 00) */
	static const uint8_t want[] = { 0x0a, 0x09, 0x0a, 0x07, 0x12, 0x05, 0x1a, 0x03,
					0x0a, 0x01, 0x01 };
	int64_t one = 1, back[2];
	uint8_t enc[64], *ref = NULL;
	size_t l = loom_example_encode_i64("", &one, 1, enc), rl = 0, got = 0;
	ok(l == sizeof want && !memcmp(enc, want, l), "empty name: no key field (%zu bytes)", l);
	ok(loom_example_encode_pbc("", &one, 1, &ref, &rl, &e) == 0 && rl == l &&
	   !memcmp(ref, enc, l), "  byte-identical to protobuf-c");
	free(ref);
	ok(loom_example_decode_i64(enc, l, "", back, 2, &got, &e) == 0 && got == 1 &&
	   back[0] == 1, "  decodes back");
}

static void case_repeated_entries(void)
{
	struct loom_err e;
	/* Two entries: "a" bytes ["hi"], "k" int64 [9]; then "k" again [1,2] (wins). */
	uint8_t m[128], *p = m;
	const uint8_t e1[] = { 0x0a, 0x01, 'a', 0x12, 0x06, 0x0a, 0x04, 0x0a, 0x02, 'h', 'i' };
	const uint8_t e2[] = { 0x0a, 0x01, 'k', 0x12, 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x09 };
	const uint8_t e3[] = { 0x0a, 0x01, 'k', 0x12, 0x06, 0x1a, 0x04, 0x0a, 0x02, 0x01, 0x02 };
	size_t fl = 2 + sizeof e1 + 2 + sizeof e2 + 2 + sizeof e3;
	*p++ = 0x0a;
	*p++ = (uint8_t)fl;
	*p++ = 0x0a;
	*p++ = sizeof e1;
	memcpy(p, e1, sizeof e1);
	p += sizeof e1;
	*p++ = 0x0a;
	*p++ = sizeof e2;
	memcpy(p, e2, sizeof e2);
	p += sizeof e2;
	*p++ = 0x0a;
	*p++ = sizeof e3;
	memcpy(p, e3, sizeof e3);
	p += sizeof e3;
	size_t ml = (size_t)(p - m), got;
	int64_t vals[4];
	is_int(loom_example_decode_i64(m, ml, "k", vals, 4, &got, &e), 0,
	       "multi-entry example decodes");
	ok(got == 2 && vals[0] == 1 && vals[1] == 2, "  last entry for a key wins");
	is_int(loom_example_decode_i64(m, ml, "a", vals, 4, &got, &e), LOOM_EFORMAT,
	       "  bytes feature is not an int64 list");
	is_str(e.msg, "feature 'a' is a bytes list, not an int64 list", "  message");
	is_int(loom_example_decode_i64(m, ml, "zz", vals, 4, &got, &e), LOOM_EFORMAT,
	       "  missing feature");
	is_str(e.msg, "no feature 'zz'", "  message");
	char *js;
	size_t jl;
	is_int(loom_example_to_json(m, ml, &js, &jl, &e), 0, "  to JSON");
	is_str(js, "{\"a\":[\"hi\"],\"k\":[1,2]}", "  JSON, sorted, last wins");
	free(js);
}

/* Decode limits. */
static void case_decode_limits(void)
{
	struct loom_err e;
	uint8_t buf[256];
	uint32_t big[] = { 5, 4294967295u, 70000 };
	int64_t neg[] = { -1, 3 };
	size_t l = loom_example_encode_u32("input_ids", big, 3, buf), got;
	uint32_t o32[3];
	is_int(loom_example_decode_u32(buf, l, "input_ids", o32, 2, &got, &e), LOOM_ERANGE,
	       "output too small -> LOOM_ERANGE");
	is_int(got, 3, "  with the needed count");
	is_int(loom_example_decode_u32(buf, l, "input_ids", o32, 3, &got, &e), 0,
	       "2^32-1 fits a u32");
	l = loom_example_encode_i64("input_ids", neg, 2, buf);
	is_int(loom_example_decode_u32(buf, l, "input_ids", o32, 3, &got, &e), LOOM_ERANGE,
	       "negative id rejected for u32");
	ok(strstr(e.msg, "value -1 at byte") != NULL, "  %s", e.msg);
}

/* JSON of all feature kinds, through protobuf-c-made bytes. */
static void case_json_of_every_kind(void)
{
	struct loom_err e;
	uint8_t buf[256];
	Tensorflow__BytesList bl = TENSORFLOW__BYTES_LIST__INIT;
	ProtobufCBinaryData bv[2] = { { 3, (uint8_t *)"a\"c" }, { 2, (uint8_t *)"\xff\x00" } };
	bl.n_value = 2;
	bl.value = bv;
	Tensorflow__FloatList fl = TENSORFLOW__FLOAT_LIST__INIT;
	float fv[2] = { 0.5f, 0.1f };
	fl.n_value = 2;
	fl.value = fv;
	Tensorflow__Int64List il = TENSORFLOW__INT64_LIST__INIT;
	int64_t iv[2] = { -1, 1234567890123 };
	il.n_value = 2;
	il.value = iv;
	Tensorflow__Feature f[3] = { TENSORFLOW__FEATURE__INIT, TENSORFLOW__FEATURE__INIT,
				     TENSORFLOW__FEATURE__INIT };
	f[0].kind_case = TENSORFLOW__FEATURE__KIND_BYTES_LIST;
	f[0].bytes_list = &bl;
	f[1].kind_case = TENSORFLOW__FEATURE__KIND_FLOAT_LIST;
	f[1].float_list = &fl;
	f[2].kind_case = TENSORFLOW__FEATURE__KIND_INT64_LIST;
	f[2].int64_list = &il;
	Tensorflow__Features__FeatureEntry en[3] = {
		TENSORFLOW__FEATURES__FEATURE_ENTRY__INIT,
		TENSORFLOW__FEATURES__FEATURE_ENTRY__INIT,
		TENSORFLOW__FEATURES__FEATURE_ENTRY__INIT
	};
	const char *names[3] = { "text", "score", "ids" };
	Tensorflow__Features__FeatureEntry *ep[3];
	for (int i = 0; i < 3; i++) {
		en[i].key = (char *)names[i];
		en[i].value = &f[i];
		ep[i] = &en[i];
	}
	Tensorflow__Features fs = TENSORFLOW__FEATURES__INIT;
	fs.n_feature = 3;
	fs.feature = ep;
	Tensorflow__Example x = TENSORFLOW__EXAMPLE__INIT;
	x.features = &fs;
	size_t l = tensorflow__example__pack(&x, buf);
	char *js;
	size_t jl;
	is_int(loom_example_check(buf, l, &e), 0, "mixed example passes the check");
	is_int(loom_example_to_json(buf, l, &js, &jl, &e), 0, "mixed example to JSON");
	is_str(js, "{\"ids\":[-1,1234567890123],\"score\":[0.5,0.100000001],"
		   "\"text\":[\"a\\\"c\",{\"base64\":\"/wA=\"}]}", "  JSON of every kind");
	free(js);
	int64_t vals[2];
	size_t got;
	is_int(loom_example_decode_i64(buf, l, "score", vals, 2, &got, &e), LOOM_EFORMAT,
	       "float feature is not an int64 list");
}

/* Long varints at every position of a packed body (the check looks at 16 and
 * 8 bytes at a time): 10 bytes is the limit, 11 is too long. */
static void case_long_varints(void)
{
	int agree = 1, valid10 = 1;
	for (int len = 10; len <= 11; len++)
		for (int at = 0; at + len <= 60; at++) {
			uint8_t body[60];
			memset(body, 0x05, sizeof body);
			memset(body + at, 0xff, (size_t)len - 1);
			body[at + len - 1] = 0x01;
			uint8_t m[128];
			/* Example{ features{ "k": int64_list{ packed body } } } */
			uint8_t *q = m;
			*q++ = 0x0a; *q++ = 2 + 69; /* Features */
			*q++ = 0x0a; *q++ = 3 + 2 + 64; /* entry */
			*q++ = 0x0a; *q++ = 1; *q++ = 'k';
			*q++ = 0x12; *q++ = 2 + 2 + 60;
			*q++ = 0x1a; *q++ = 2 + 60;
			*q++ = 0x0a; *q++ = 60;
			memcpy(q, body, 60);
			q += 60;
			size_t ml = (size_t)(q - m);
			int a = loom_example_check(m, ml, NULL) == 0;
			int b = loom_example_check_pbc(m, ml, NULL) == 0;
			size_t got;
			int64_t vals[64];
			int c = loom_example_decode_i64(m, ml, "k", vals, 64, &got, NULL) == 0;
			agree &= a == b && a == c;
			if (len == 10)
				valid10 &= a;
			else
				valid10 &= !a;
		}
	ok(valid10, "10-byte varints pass, 11-byte ones fail, at every offset");
	ok(agree, "  check == protobuf-c == decoder on all of them");
}

/* Non-Examples are rejected cleanly, and the hand-written check agrees with
 * protobuf-c (no unknown fields) on random mutations. */
static void case_non_examples(void)
{
	struct loom_err e;
	uint8_t buf[256];
	const char *text = "hello world, this is not a protobuf";
	is_int(loom_example_check((const uint8_t *)text, strlen(text), &e), LOOM_EFORMAT,
	       "text payload rejected");
	diag("%s", e.msg);
	ok(strncmp(e.msg, "not a tf.train.Example: ", 24) == 0, "  message: %s", e.msg);
	size_t got;
	int64_t vals[4];
	is_int(loom_example_decode_i64((const uint8_t *)text, strlen(text), "input_ids", vals,
				       4, &got, &e), LOOM_EFORMAT, "  decode rejects it too");
	const uint8_t trunc[] = { 0x0a, 0x16, 0x0a, 0x14 };
	is_int(loom_example_check(trunc, sizeof trunc, &e), LOOM_EFORMAT, "truncated rejected");
	is_str(e.msg, "not a tf.train.Example: length 22 at byte 1 runs past the end",
	       "  message");
	is_int(loom_example_check(buf, 0, &e), 0, "empty payload is an empty Example");
	is_int(loom_example_decode_i64(buf, 0, "input_ids", vals, 4, &got, &e), LOOM_EFORMAT,
	       "  without input_ids");

	int agree = 1, accepted = 0, disagreements = 0;
	for (int t = 0; t < 20000; t++) {
		uint32_t ids[8];
		size_t cnt = rnd() % 8;
		for (size_t i = 0; i < cnt; i++)
			ids[i] = (uint32_t)(rnd() % 300);
		size_t l = loom_example_encode_u32("input_ids", ids, cnt, buf);
		int muts = 1 + (int)(rnd() % 3);
		for (int k = 0; k < muts; k++) {
			size_t at = rnd() % l;
			switch (rnd() % 3) {
			case 0:
				buf[at] ^= (uint8_t)(1u << (rnd() % 8));
				break;
			case 1:
				buf[at] = (uint8_t)rnd();
				break;
			default:
				l = at; /* truncate */
			}
			if (!l)
				break;
		}
		int a = loom_example_check(buf, l, NULL) == 0;
		int b = loom_example_check_pbc(buf, l, NULL) == 0;
		accepted += a;
		if (a != b) {
			agree = 0;
			if (disagreements++ < 3)
				diag("disagree on trial %d: hand %d protobuf-c %d", t, a, b);
		}
	}
	ok(agree, "check == protobuf-c's verdict on 20000 mutated payloads (%d accepted)",
	   accepted);
}

/* Several features (as loom-squad prepare writes them) == protobuf-c
 * packing the same entries in the same order. */
static void case_multi_feature(void)
{
	int64_t *v = malloc(5000 * sizeof *v); /* 4 + 500 + 3 x 3 values at most */
	int same = 1, bounded = 1;
	const char *mk[] = { "unique_ids", "input_ids", "", "token_start", "x" };
	for (int t = 0; t < 200 && same; t++) {
		struct loom_example_i64 f[5];
		Tensorflow__Int64List lists[5];
		Tensorflow__Feature feats[5];
		Tensorflow__Features__FeatureEntry ents[5], *ep[5];
		size_t nf = 1 + (size_t)(rnd() % 5), off = 0;
		for (size_t k = 0; k < nf; k++) {
			size_t cnt = (size_t)(rnd() % (k == 1 ? 500 : 4));
			for (size_t i = 0; i < cnt; i++)
				v[off + i] = t % 2 ? rnd_value() : (int64_t)(rnd() % 3) - 1;
			f[k] = (struct loom_example_i64){ mk[k], v + off, cnt };
			tensorflow__int64_list__init(&lists[k]);
			lists[k].n_value = cnt;
			lists[k].value = v + off;
			tensorflow__feature__init(&feats[k]);
			feats[k].kind_case = TENSORFLOW__FEATURE__KIND_INT64_LIST;
			feats[k].int64_list = &lists[k];
			tensorflow__features__feature_entry__init(&ents[k]);
			ents[k].key = (char *)mk[k];
			ents[k].value = &feats[k];
			ep[k] = &ents[k];
			off += cnt;
		}
		Tensorflow__Features fs = TENSORFLOW__FEATURES__INIT;
		Tensorflow__Example ex = TENSORFLOW__EXAMPLE__INIT;
		fs.n_feature = nf;
		fs.feature = ep;
		ex.features = &fs;
		size_t rl = tensorflow__example__get_packed_size(&ex);
		uint8_t *ref = malloc(rl + 1), *mine = malloc(loom_example_bound_i64s(f, nf));
		tensorflow__example__pack(&ex, ref);
		size_t l = loom_example_encode_i64s(f, nf, mine);
		same = l == rl && memcmp(mine, ref, l) == 0;
		bounded &= l <= loom_example_bound_i64s(f, nf);
		free(ref);
		free(mine);
	}
	ok(same, "encode_i64s == protobuf-c on 200 random multi-feature Examples");
	ok(bounded, "encode_i64s stays within loom_example_bound_i64s");
	free(v);
}

int main(void)
{
	case_known_vector();
	case_protobuf_c_identity();
	case_unpacked();
	case_empty_name();
	case_repeated_entries();
	case_decode_limits();
	case_json_of_every_kind();
	case_long_varints();
	case_non_examples();
	case_multi_feature();
	return done_testing();
}
