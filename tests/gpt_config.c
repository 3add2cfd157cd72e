/* loom_config: learning-rate schedules, JSON round trip, arithmetic, the
 * memory plan per rank. */
#include <jansson.h>
#include <math.h>

#include "loom_config.h"
#include "loom_gpt.h"
#include "tap.h"
#include "testlib.h"

#define near(a, b) (fabs((a) - (b)) < 1e-12 * (1 + fabs(b)))

/* The configuration the cases change step by step (c), and a second one
 * (d). */
static struct loom_config c, d;

/* Warm-up, cosine, linear and inverse square root decay; decay_power. */
static void case_schedules(void)
{
	loom_config_defaults(&c);
	c.steps = 110;
	c.lr = 1.0;
	c.min_lr = 0.1;
	c.warmup_steps = 10;
	c.decay = LOOM_DECAY_COSINE;
	is_int(loom_config_validate(&c), 0, "valid");
	ok(near(loom_config_lr(&c, 1), 0.1), "warm-up step 1: lr/10");
	ok(near(loom_config_lr(&c, 5), 0.5), "warm-up step 5");
	ok(near(loom_config_lr(&c, 10), 1.0), "end of warm-up: peak");
	ok(near(loom_config_lr(&c, 60), 0.55), "cosine half way: (lr+min)/2");
	ok(near(loom_config_lr(&c, 110), 0.1), "cosine end: min_lr");
	ok(near(loom_config_lr(&c, 500), 0.1), "after the end: min_lr");
	c.decay = LOOM_DECAY_LINEAR;
	ok(near(loom_config_lr(&c, 35), 0.775), "linear quarter way");
	c.decay = LOOM_DECAY_INVSQRT;
	ok(near(loom_config_lr(&c, 40), 0.5), "inverse sqrt: lr*sqrt(10/40)");
	ok(near(loom_config_lr(&c, 100000), 0.1), "inverse sqrt floored at min_lr");
	/* decay_power: lr * (w/step)^p after warm-up, floored at min_lr */
	is_int(loom_config_set(&c, "decay_power", "1"), 0, "decay_power=1");
	is_int(loom_config_validate(&c), 0, "decay_power with inverse_sqrt: valid");
	ok(near(loom_config_lr(&c, 40), 0.25), "inverse_sqrt power 1: lr*10/40");
	ok(near(loom_config_lr(&c, 10), 1.0), "inverse_sqrt power 1: peak at the end of warm-up");
	ok(near(loom_config_lr(&c, 200), 0.1), "inverse_sqrt power 1: floored at min_lr (10/200 < 0.1)");
	c.decay_power = 2;
	ok(near(loom_config_lr(&c, 20), 0.25), "inverse_sqrt power 2: lr*(10/20)^2");
	c.decay_power = 0.8;
	ok(near(loom_config_lr(&c, 40), pow(0.25, 0.8)), "inverse_sqrt power 0.8: lr*(10/40)^0.8");
	c.decay_power = 0.5;
	ok(near(loom_config_lr(&c, 40), 0.5), "inverse_sqrt power 0.5 is 1/sqrt");
}

/* Polynomial (the seed's schedule): min + (lr - min) * (1 - s/D)^p, s = step
 * - warm-up, D = cooldown_steps or the steps after warm-up. */
static void case_polynomial(void)
{
	c.decay = LOOM_DECAY_POLY;
	ok(near(loom_config_lr(&c, 5), 0.5), "polynomial: linear warm-up");
	ok(near(loom_config_lr(&c, 10), 1.0), "polynomial: peak at the end of warm-up");
	ok(near(loom_config_lr(&c, 60), 0.1 + 0.9 * sqrt(0.5)), "polynomial power 0.5 half way");
	ok(near(loom_config_lr(&c, 110), 0.1), "polynomial: min_lr at steps");
	c.decay_power = 1;
	ok(near(loom_config_lr(&c, 35), 0.775), "polynomial power 1 = linear decay");
	c.decay_power = 2;
	c.cooldown_steps = 40;
	ok(near(loom_config_lr(&c, 30), 0.1 + 0.9 * 0.25), "cooldown 40, power 2: step 30");
	ok(near(loom_config_lr(&c, 50), 0.1), "cooldown 40: min_lr after 40 steps of decay");
	ok(near(loom_config_lr(&c, 500), 0.1), "cooldown 40: min_lr from then on");
	is_int(loom_config_validate(&c), 0, "polynomial with cooldown_steps: valid");
}

/* Validation: one line naming the key. */
static void case_validation(void)
{
	c.decay = LOOM_DECAY_COSINE;
	is_int(loom_config_validate(&c), LOOM_EINVAL, "decay_power with cosine refused");
	is_str(loom_config_error(&c), "decay_power: only decay=inverse_sqrt or polynomial uses it (decay is cosine)",
	       "message");
	c.decay_power = 0.5;
	is_int(loom_config_validate(&c), LOOM_EINVAL, "cooldown_steps with cosine refused");
	is_str(loom_config_error(&c), "cooldown_steps: only decay=polynomial uses it (decay is cosine)",
	       "message");
	c.cooldown_steps = 0;
	c.decay = LOOM_DECAY_INVSQRT;
	is_int(loom_config_set(&c, "decay_power", "0"), 0, "decay_power=0 parses");
	is_int(loom_config_validate(&c), LOOM_EINVAL, "decay_power 0 refused");
	is_int(loom_config_set(&c, "decay_power", "4.5"), LOOM_ERANGE, "decay_power above 4 refused");
	c.decay_power = 0.5;
	is_int(loom_config_validate(&c), 0, "valid again");
	c.decay = LOOM_DECAY_CONSTANT;
	ok(near(loom_config_lr(&c, 77), 1.0), "constant");
	c.warmup_steps = 0;
	c.warmup_proportion = 0.1;
	c.steps = 200;
	ok(near(loom_config_lr(&c, 10), 0.5), "warm-up proportion 0.1 of 200 steps = 20");
}

/* JSON round trip. */
static void case_json_round_trip(void)
{
	c.seed = 0x7eedfacecafebeefull;
	c.dropout = 0.125;
	c.decay_power = 0.75;
	c.cooldown_steps = 33;
	c.loss_weighting = LOOM_LOSSW_INVCOUNT;
	json_t *j = loom_config_to_json(&c);
	ok(j != NULL, "to_json");
	loom_config_defaults(&d);
	is_int(loom_config_apply_json(&d, j), 0, "apply_json of to_json");
	json_decref(j);
	ok(d.seed == c.seed && d.dropout == c.dropout && d.decay == c.decay &&
	   d.warmup_proportion == c.warmup_proportion && d.steps == c.steps &&
	   d.decay_power == 0.75 && d.cooldown_steps == 33 && d.loss_weighting == LOOM_LOSSW_INVCOUNT,
	   "round trip keeps every value (seed %llx)", (unsigned long long)d.seed);
	is_int(loom_config_set(&d, "seed", "-1"), LOOM_EINVAL, "seed refuses negatives");
	is_int(loom_config_set(&d, "steps", "99999999999999999999"), LOOM_EINVAL, "steps overflow");
	is_int(loom_config_apply_sets(&d, "n_layer=3,n_head=2,n_embd=10"), 0, "apply_sets");
	ok(d.n_layer == 3 && d.n_head == 2 && d.n_embd == 10, "apply_sets values");
}

/* Parameter and FLOP counts (dense and RigL), frames vs seq_len. */
static void case_arithmetic(void)
{
	loom_config_defaults(&d);
	d.n_layer = 12; d.n_embd = 768; d.n_head = 12; d.vocab_size = 50257; d.n_positions = 1024;
	d.seq_len = 1024;
	is_int((long long)loom_config_n_params(&d), 124439808, "GPT-2 small parameter count");
	ok(near(loom_config_flops_per_token(&d), 6.0 * 124439808 + 12.0 * 12 * 1024 * 768),
	   "training FLOPs per token");
	{ /* RigL: 0.9 of the MLP's 12 x 8 C^2 weights dead; updates at 100..700 of 1000 */
		struct loom_config sp = d;
		sp.sparsity = 0.9;
		sp.sparse_layers = LOOM_SL_FC | LOOM_SL_FCPROJ;
		sp.steps = 1000;
		sp.prune_every = 100;
		sp.prune_end = 750;
		double dead = 0.9 * 12 * 8 * 768.0 * 768;
		is_int((long long)loom_config_sparse_weights(&sp), 12LL * 8 * 768 * 768,
		       "sparse weights: the MLP's");
		ok(near(loom_config_flops_per_token(&sp), 6.0 * (124439808 - dead) + 2.0 * dead * 7 / 1000 +
							     12.0 * 12 * 1024 * 768),
		   "sparse training FLOPs per token: live weights, plus the dense weight gradients of 7 updates");
		ok(near(loom_config_fwd_flops_per_token(&sp), 2.0 * (124439808 - dead) + 4.0 * 12 * 1024 * 768),
		   "sparse forward FLOPs per token");
	}
	is_int(loom_config_check_data(&d, 8, 1025), LOOM_EINVAL, "micro_batch vs frames");
	d.micro_batch = 4;
	is_int(loom_config_check_data(&d, 4, 1025), 0, "frames of T+1 tokens fit");
	is_int(loom_config_check_data(&d, 4, 1024), LOOM_EINVAL, "records one token short");
	is_str(loom_config_error(&d), "seq_len: 1024 needs records of 1025 tokens, the batches have 1024",
	       "message");
}

/* The memory plan per rank (loom_gpt_memory_plan) of the tiny GPT (2
 * layers, C 16, vocab 23, 8 positions: 7088 parameters; a layer 12 C^2 +
 * 13 C, the last with ln_f 2 C more: 3312; the embeddings (23 + 8) x 16 =
 * 496) at B 2, T 4 on 1, 3 and 4 ranks. */
static void case_memory_plan(void)
{
	struct loom_config x = tiny_gpt_cfg(2, 4);
	struct loom_model_mem one, w1, o4, w4, w3;
	is_int(loom_config_n_params(&x), 7088, "tiny GPT: 7088 parameters");
	loom_gpt_memory_plan(&x, 2, 4, 0, &one);
	x.sharding = LOOM_SHARD_WEIGHTS;
	loom_gpt_memory_plan(&x, 2, 4, 0, &w1);
	ok(!memcmp(&one, &w1, sizeof one), "1 rank: sharding=weights plans as sharding=optimizer");
	is_int(one.params, 7088 * 4, "1 rank: whole weights");
	is_int(one.adam, 7088 * 8, "1 rank: whole moments");
	is_int(one.gshard + one.gathered, 0, "1 rank: no gradient shard, no gathered buffers");

	x.data_parallel = 4;
	x.sharding = LOOM_SHARD_OPTIMIZER;
	loom_gpt_memory_plan(&x, 2, 4, 0, &o4);
	is_int(o4.params, 7088 * 4, "optimizer, 4 ranks: whole weights");
	is_int(o4.grads, 7088 * 4, "  whole gradients");
	is_int(o4.adam, 1772 * 8, "  1/4 of the moments");
	is_int(o4.gshard, 1772 * 4, "  a gradient shard of 1/4");
	is_int(o4.gathered, 0, "  no gathered buffers");
	is_int(o4.acts, one.acts, "  the activations of 1 rank");
	is_int(o4.total, o4.params + o4.grads + o4.adam + o4.gshard + o4.acts, "  total");

	x.sharding = LOOM_SHARD_WEIGHTS;
	loom_gpt_memory_plan(&x, 2, 4, 0, &w4);
	is_int(w4.params, 1772 * 4, "weights, 4 ranks: 1/4 of the weights");
	is_int(w4.grads, 1772 * 4, "  of the gradients");
	is_int(w4.adam, 1772 * 8, "  of the moments");
	is_int(w4.gshard, 0, "  no gradient shard");
	is_int(w4.gathered, (496 + 4 * 3312) * 4,
	       "  gathered: the embeddings, 2 layers' params and 2 layers' grads");
	is_int(w4.gathered_head, 0, "  (more than at the LM head: 2 x 496)");
	is_int(w4.acts, one.acts + 2 * 4 * 16 * 4, "  activations + the embedding output's [B T, C]");
	is_int(w4.total, w4.params + w4.grads + w4.adam + w4.gathered + w4.acts, "  total");
	x.data_parallel = 3;
	loom_gpt_memory_plan(&x, 2, 4, 0, &w3);
	is_int(w3.params, 2363 * 4, "3 ranks: a slice rounds up (7088 / 3 -> 2363)");

	/* a vocabulary of 4000: the LM head's set is the larger, 2 x the
	 * embeddings (4008 x 16) */
	x.vocab_size = 4000;
	x.data_parallel = 4;
	loom_gpt_memory_plan(&x, 2, 4, 0, &w4);
	is_int(w4.gathered, 2 * 64128 * 4, "vocab 4000: gathered at the LM head");
	is_int(w4.gathered_head, 1, "  said so");

	/* bf16: a copy of the gathered params only (the embeddings and 2
	 * layers: 64128 + 2 x 3312) instead of the whole model's */
	x.precision = LOOM_PREC_BF16;
	x.data_parallel = 1;
	loom_gpt_memory_plan(&x, 2, 4, 0, &one);
	x.data_parallel = 4;
	loom_gpt_memory_plan(&x, 2, 4, 0, &w4);
	is_int(w4.bf16, one.bf16 - loom_config_n_params(&x) * 2 + (64128 + 2 * 3312) * 2,
	       "bf16, weights: the gathered params' copy, the same operand scratch");
	x.sharding = LOOM_SHARD_OPTIMIZER;
	loom_gpt_memory_plan(&x, 2, 4, 0, &o4);
	is_int(o4.bf16, one.bf16, "bf16, optimizer: the whole model's copy");
}

int main(void)
{
	case_schedules();
	case_polynomial();
	case_validation();
	case_json_round_trip();
	case_arithmetic();
	case_memory_plan();
	return done_testing();
}
