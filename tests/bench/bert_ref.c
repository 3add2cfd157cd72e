/* bert_ref PRESET DIR: a BERT question-answering model of PRESET's shape
 * (lib/train/loom_bert.h) with random weights, written as a HuggingFace
 * checkpoint into DIR (model.safetensors with HF's tensor names and
 * shapes, config.json with BertConfig's keys), and its start/end logits
 * for fixed inputs with padding printed as JSON on stdout, for
 * tests/bench/bert_ref.py to check against an independent float64 forward
 * (tests/bench/bert-ref.sh).  The weights are HF's init (N(0, 0.02)) with
 * LayerNorm gains 1 + N(0, 0.1) and biases N(0, 0.1), so every parameter
 * shows in the logits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom_bert.h"
#include "loom_kernels.h"
#include "loom_safetensors.h"

enum { B = 2, T = 48, LEN1 = 29 };

int main(int argc, char **argv)
{
	struct loom_bert_config c;
	if (argc != 3 || loom_bert_preset(argv[1], LOOM_BERT_QA, &c)) {
		fprintf(stderr, "usage: bert_ref bert-tiny|bert-base|bert-large DIR\n");
		return 2;
	}
	struct loom_bert *b = loom_bert_new(&c);
	if (!b) {
		fprintf(stderr, "bert_ref: out of memory\n");
		return 1;
	}
	loom_bert_init_weights(b, 2024);
	for (int i = 0; i < b->n_tensors; i++) {
		const struct loom_tensor *t = &b->tensors[i];
		if (t->ndim != 1)
			continue;
		float *p = b->params + t->offset;
		loom_model_normal(p, t->numel, 0.1f, loom_model_init_key(77, i));
		if (strstr(t->name, "LayerNorm.weight"))
			for (size_t j = 0; j < t->numel; j++)
				p[j] += 1.0f;
	}
	static int32_t ids[B * T], seg[B * T], mask[B * T];
	for (int i = 0; i < B * T; i++) {
		int r = i / T, t = i % T, real = r == 0 || t < LEN1;
		ids[i] = real ? 1 + (int32_t)(loom_splitmix64(i + 5) % (uint64_t)(c.vocab_size - 1)) : 0;
		seg[i] = real && t >= 11;
		mask[i] = real;
	}
	struct loom_bert_batch x = { ids, seg, mask, NULL, NULL, NULL };
	if (loom_bert_forward(b, &x, B, T, 0, 0, NULL)) {
		fprintf(stderr, "bert_ref: %s\n", loom_bert_error(b));
		return 1;
	}

	/* the checkpoint */
	char path[4096];
	struct loom_st_tensor *st = calloc((size_t)b->n_tensors, sizeof *st);
	for (int i = 0; i < b->n_tensors; i++) {
		const struct loom_tensor *t = &b->tensors[i];
		st[i].name = t->name;
		st[i].dtype = LOOM_ST_F32;
		st[i].ndim = t->ndim;
		st[i].shape[0] = (uint64_t)t->shape[0];
		st[i].shape[1] = (uint64_t)t->shape[1];
		st[i].data = b->params + t->offset;
	}
	struct loom_err err = { 0 };
	snprintf(path, sizeof path, "%s/model.safetensors", argv[2]);
	const char *meta[] = { "format", "pt", NULL };
	if (loom_st_write(path, st, (size_t)b->n_tensors, meta, NULL, &err)) {
		fprintf(stderr, "bert_ref: %s\n", err.msg);
		return 1;
	}
	snprintf(path, sizeof path, "%s/config.json", argv[2]);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return 1;
	}
	fprintf(f, "{\n  \"architectures\": [\"BertForQuestionAnswering\"],\n"
		"  \"model_type\": \"bert\",\n  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n"
		"  \"num_attention_heads\": %d,\n  \"intermediate_size\": %d,\n"
		"  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n"
		"  \"type_vocab_size\": %d,\n  \"layer_norm_eps\": %g,\n  \"hidden_act\": \"gelu\",\n"
		"  \"hidden_dropout_prob\": %g,\n  \"attention_probs_dropout_prob\": %g,\n"
		"  \"initializer_range\": %g,\n  \"pad_token_id\": %d\n}\n",
		c.hidden, c.n_layer, c.n_head, c.intermediate, c.vocab_size, c.max_positions,
		c.type_vocab_size, c.layer_norm_eps, c.dropout, c.attn_dropout, c.init_std,
		c.pad_token_id);
	if (fclose(f)) {
		perror(path);
		return 1;
	}

	/* inputs and logits */
	const float *sl = loom_bert_start_logits(b), *el = loom_bert_end_logits(b);
	const int32_t *arr[3] = { ids, seg, mask };
	const char *names[3] = { "input_ids", "segment_ids", "input_mask" };
	printf("{\"B\": %d, \"T\": %d", B, T);
	for (int k = 0; k < 3; k++) {
		printf(", \"%s\": [", names[k]);
		for (int i = 0; i < B * T; i++)
			printf("%s%d", i ? ", " : "", arr[k][i]);
		printf("]");
	}
	for (int k = 0; k < 2; k++) {
		printf(", \"%s\": [", k ? "end_logits" : "start_logits");
		for (int i = 0; i < B * T; i++)
			printf("%s%.9g", i ? ", " : "", (k ? el : sl)[i]);
		printf("]");
	}
	printf("}\n");
	free(st);
	loom_bert_free(b);
	return 0;
}
