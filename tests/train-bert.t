#!/usr/bin/env bash
# loom-train model=bert: the presets and their sizes, the combinations
# refused, task=squad from loom-squad prepare | loom-feed --manifest
# (a set the model can learn: the loss falls), --eval-data, task=mlm from
# token frames.  Every file is written here.
. "$(dirname "$0")/lib.sh"
cd "$T"
export OMP_NUM_THREADS=1

# --- configuration ------------------------------------------------------
run loom-train -c bert-tiny --print-config
is_rc 0 "--print-config bert-tiny"
is "$(/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))
print(c["model"], c["task"], c["n_layer"], c["n_embd"], c["n_head"], c["intermediate"],
      c["n_positions"], c["type_vocab_size"], c["layer_norm_epsilon"], c["init_std"],
      c["dropout"], c["attn_dropout"], c["vocab_size"])' "$out")" \
	"bert squad 2 128 2 512 512 2 1e-12 0.02 0.1 0.1 30522" "  HF bert-tiny's hyper-parameters"
run loom-train -c tiny --print-config
unlike "$out" '"(model|task|intermediate|type_vocab_size|init_std|cls_id)"' \
	"a GPT's configuration has no BERT keys (its JSON, and so its checkpoints, as before)"
run loom-train -c squad-base --print-config
is "$(/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))
print(c["seq_len"], c["global_batch"], c["lr"], c["warmup_proportion"], c["decay"], c["min_lr"],
      c["weight_decay"], c["beta2"], c["eps"])' "$out")" "384 32 3e-05 0.1 linear 0.0 0.01 0.999 1e-06" \
	"squad-base: the seed's recipe (global batch 32 by grad_accum)"
run loom-train -c squad-large --print-config
like "$out" '"global_batch": 128' "squad-large: global batch 128"

# parameters: HuggingFace's BertForQuestionAnswering / BertForMaskedLM
for pt in "bert-tiny squad 4369666" "bert-base squad 108893186" "bert-base mlm 109514298" \
	"bert-large squad 334094338"; do
	set -- $pt
	run loom-train -c "$1" --set task="$2" --dry-run
	like "$out" "^parameters: $3 " "--dry-run $1 task=$2: $3 parameters"
done
like "$out" '^memory plan at micro_batch 8 x seq_len 384' "  a memory plan"
like "$out" 'rows run at their real length, so a batch takes [0-9.]+ [MG]B per 1,000 real tokens; training with qa_loss=all computes the padding' \
	"  what a batch of real tokens takes (and that the default QA loss computes the padding)"
run loom-train -c bert-base --set task=squad,qa_loss=real --dry-run
unlike "$out" 'computes the padding' "  qa_loss=real: no padding computed"

fails_with 2 '^loom-train: task: squad trains a BERT, but model is gpt' "task=squad on a gpt" \
	loom-train --set task=squad --print-config
fails_with 2 "^loom-train: task: lm is the GPT's; model=bert trains task=squad or task=mlm" \
	"model=bert task=lm" loom-train -c bert-tiny --set task=lm --print-config
fails_with 2 "^loom-train: sparsity: RigL sparsity is the GPT's" "bert with sparsity" \
	loom-train -c bert-tiny --set sparsity=0.5 --dry-run
fails_with 2 '^loom-train: cls_id: 101 is not below vocab_size \(30\)' "mlm ids outside the vocabulary" \
	loom-train -c bert-tiny --set task=mlm,vocab_size=30 --print-config
fails_with 2 '^loom-train: --sample-every: only a GPT samples' "--sample-every with bert" \
	loom-train -c bert-tiny --sample-every 2 --print-config

# --- task=squad -----------------------------------------------------------
# 40 paragraphs of two sentences, a question on one of them: the answer's
# place moves, so the model must read the question (tests/mksquad.py).
make_squad sq.json vocab.txt
run loom-squad prepare -q --vocab vocab.txt --seq 32 --stride 16 sq.json -o sq/sq
is_rc 0 "loom-squad prepare: 40 features"
loom-feed -q --manifest sq/sq.manifest.json --batch 8 --seed 2 > eval.frames
set_ok="vocab_size=32,dropout=0,attn_dropout=0,lr=2e-3,warmup_proportion=0,decay=constant"
run sh -c "loom-feed -q --manifest sq/sq.manifest.json --batch 8 --seed 1 --epochs 0 |
	loom-train -c bert-tiny --set $set_ok,doc_stride=16 --steps 60 --log log.jsonl --eval-data eval.frames --eval-every 60 \
	  --eval-squad sq.json --vocab vocab.txt --save ck60 --tensorboard tb"
is_rc 0 "loom-squad prepare | loom-feed --manifest | loom-train -c bert-tiny: 60 steps"
like "$err" '^loom-train: bert-tiny: 466946 parameters, .* B=8 T=32 ' "  the model line: B and T from the frames"
losses log.jsonl > losses
first=$(head -1 losses | cut -d' ' -f2)
last=$(/usr/bin/python3 -c 'import sys; l=[float(x.split()[1]) for x in open(sys.argv[1])]; print(sum(l[-10:])/10)' losses)
ok "  first loss $first is about ln(32) (3.47): a uniform guess" \
	/usr/bin/python3 -c "import sys; sys.exit(not 2.8 < $first < 4.0)"
ok "  mean loss of the last 10 steps $last: below 1, it learned where answers are" \
	/usr/bin/python3 -c "import sys; sys.exit(not $last < 1.0)"
like log.jsonl '^\{"step":60,"eval_loss":[0-9.]+,"eval_acc":[0-9.]+,"eval_features":40\}$' \
	"  --eval-data: the loss over the 40 features (no perplexity for task=squad)"
like log.jsonl '^\{"step":60,"eval_exact_match":[0-9.]+,"eval_f1":[0-9.]+\}$' \
	"  --eval-squad: the official exact match and F1 in the log"
like "$err" '^loom-train: eval step 60: exact_match [0-9.]+ f1 [0-9.]+ \(40 questions, 40 features, ' \
	"  and on stderr"
unlike "$err" 'eval step 60: loss [0-9.]+ ppl' "  no perplexity on stderr"
run loom-plot -w 10 -y eval_exact_match,eval_f1 tb/events.out.tfevents.*
like "$out" '^eval_exact_match .*\(1 points' "  and in TensorBoard: eval/exact_match, one point"
like "$out" '^eval_f1 .*\(1 points' "  eval/f1, one point"
ok "  no eval/perplexity" sh -c '! grep -q eval/perplexity tb/events.out.tfevents.*' 
run loom-train -c bert-tiny --eval-squad sq.json --steps 1 < /dev/null
is "$rc:$(head -1 "$err")" "2:loom-train: --eval-squad needs --eval-data (the file's features, loom-squad prepare)" \
	"--eval-squad without --eval-data: usage error"
run loom-train -c tiny --eval-squad sq.json --eval-data eval.frames --steps 1 < /dev/null
is "$rc:$(head -1 "$err")" "2:loom-train: --eval-squad: task=squad only (the task is not)" \
	"--eval-squad for a GPT: usage error"
em=$(/usr/bin/python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "eval_f1" in l][0]["eval_exact_match"])' log.jsonl)
run loom-eval squad -q -c ck60/latest --data sq.json --predictions p60.json
is "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["exact_match"])' "$out")" "$em" \
	"  the exact match loom-eval squad -c gives the checkpoint ($em)"
run sh -c "loom-feed -q --manifest sq/sq.manifest.json --batch 8 --seed 1 --epochs 0 |
	loom-train -q -c bert-tiny --set $set_ok --steps 60 --log log2.jsonl --eval-data eval.frames --eval-every 60"
is "$(losses log2.jsonl)" "$(cat losses)" "  the same run twice: the same losses"
run sh -c "loom-feed -q --manifest sq/sq.manifest.json --batch 8 --seed 1 --epochs 0 |
	loom-train -q -c bert-tiny --set $set_ok --steps 2 --eval-data sq/sq.manifest.json --eval-every 2"
is_rc 0 "--eval-data the squad-features manifest"
run sh -c "loom-feed -q --manifest sq/sq.manifest.json --batch 8 --seed 1 |
	loom-train -q -c bert-tiny --set vocab_size=32,seq_len=20 --steps 2"
is_rc 1 "--set seq_len=20 on features of 32 tokens: exit 1"
like "$err" '^loom-train: stdin: frame 0: seq_len: 20 needs records of 20 tokens, the batches have 32 \(seq_len is from --set: change it to 32 there, or feed features of loom-squad prepare --seq 20\)$' \
	"  a feature is never cut: the line says where to change it"
run sh -c "loom-feed -q --batch 8 --seq 31 --seed 1 sq/sq-00000-of-00001.tfrecord |
	loom-train -q -c bert-tiny --set vocab_size=32 --steps 2"
is_rc 1 "token frames (version 1) for task=squad: exit 1"
like "$err" '^loom-train: stdin: frame 0: token frames \(version 1\), but task=squad reads the features of loom-squad prepare' \
	"  one line naming the frame"
is "$(wc -l < "$err")" 1 "  only that line"
run sh -c "loom-feed -q --manifest sq/sq.manifest.json --batch 8 --seed 1 | loom-train -q --steps 2"
is_rc 1 "squad-features frames for the GPT: exit 1"
like "$err" 'this reader reads token frames only; SQuAD features train task=squad, which needs a BERT preset \(-c squad-base, bert-base, bert-tiny\)$' \
	"  refused in one line saying task=squad needs a BERT preset"
is "$(wc -l < "$err")" 1 "  only that line"

run sh -c "loom-feed -q --manifest sq/sq.manifest.json --batch 8 --seed 1 --epochs 0 |
	loom-train -q -c bert-tiny --set vocab_size=32 --steps 5 --log plain.jsonl"
run sh -c "loom-feed -q --manifest sq/sq.manifest.json --batch 8 --seed 1 --epochs 0 |
	loom-train -q -c bert-tiny --set vocab_size=32 --steps 5 --recompute --log recomp.jsonl"
is_rc 0 "--recompute (dropout on)"
is "$(cut -d, -f1-4 recomp.jsonl)" "$(cut -d, -f1-4 plain.jsonl)" "  the same losses and gradient norms"

# --- checkpoints: HuggingFace's layout, resume exact -------------------------
F="loom-feed -q --manifest sq/sq.manifest.json --batch 8 --seed 1 --epochs 0"
run sh -c "$F | loom-train -q -c bert-tiny --set vocab_size=32 --steps 6 --log full.jsonl"
is_rc 0 "squad, dropout on: 6 steps in one run"
run sh -c "$F | loom-train -q -c bert-tiny --set vocab_size=32 --steps 6 --save-every 3 --save ck --vocab vocab.txt --log part.jsonl"
is_rc 0 "  the same with --save-every 3 --vocab vocab.txt"
is "$(ls ck/step-00000003 | tr '\n' ' ')" "config.json model.safetensors optimizer.safetensors state.json tokenizer_config.json vocab.txt " \
	"  a checkpoint: HF's files, loom's state, the tokenizer"
same_file ck/step-00000003/vocab.txt vocab.txt "  vocab.txt as given"
is "$(/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))
print(c["model_type"], c["architectures"], c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["loom"]["task"])' ck/step-00000003/config.json)" \
	"bert ['BertForQuestionAnswering'] 128 2 32 squad" "  config.json: BertForQuestionAnswering"
run sh -c "$F --resume ck/step-00000003 | loom-train -q --resume ck/step-00000003 --save ck2 --log part.jsonl"
is_rc 0 "  --resume from step 3 to 6"
is "$(cut -d, -f1-4 part.jsonl)" "$(cut -d, -f1-4 full.jsonl)" \
	"  steps 4-6 after the resume: the uninterrupted run's loss, lr and gradient norm"
ok "  its checkpoint keeps the tokenizer" test -f ck2/step-00000006/vocab.txt

# --- task=mlm -------------------------------------------------------------
# Token frames of WordPiece ids ([SEP] between documents): rows are [CLS],
# the first T-2 tokens of a record, [SEP]; records of 30 tokens give T=32.
for i in $(seq 1 30); do echo "the cat sat on the mat and the dog ran to the park number $i ."; done > text.txt
loom-bpe encode -q --vocab bert-base-uncased < text.txt | loom-shard -q --seq-len 30 -o mlm/m
run sh -c "loom-feed -q --manifest mlm/m.manifest.json --batch 4 --seq 29 --seed 1 --epochs 0 |
	loom-train -c bert-tiny --set task=mlm,dropout=0,attn_dropout=0,lr=2e-3,warmup_proportion=0,decay=constant \
		--steps 60 --log mlm.jsonl"
is_rc 0 "loom-bpe encode --vocab bert-base-uncased | loom-shard | loom-feed | loom-train task=mlm: 60 steps"
like "$err" '^loom-train: bert-tiny: 4416698 parameters, .* B=4 T=32 ' "  T = the records' 30 tokens + [CLS] and [SEP]"
losses mlm.jsonl > mlosses
first=$(head -1 mlosses | cut -d' ' -f2)
last=$(/usr/bin/python3 -c 'import sys; l=[float(x.split()[1]) for x in open(sys.argv[1])]; print(sum(l[-10:])/10)' mlosses)
ok "  first loss $first is about ln(30522) (10.3)" /usr/bin/python3 -c "import sys; sys.exit(not 9.5 < $first < 11.5)"
ok "  mean loss of the last 10 steps $last: below 5" /usr/bin/python3 -c "import sys; sys.exit(not $last < 5)"
run sh -c "loom-feed -q --manifest mlm/m.manifest.json --batch 4 --seq 29 --seed 1 --epochs 0 |
	loom-train -q -c bert-tiny --set task=mlm,seq_len=20 --steps 2 --log mlm2.jsonl --eval-data mlm/m.manifest.json --eval-every 2"
is_rc 0 "--set seq_len=20: rows of 18 tokens of each record; --eval-data a manifest"
like mlm2.jsonl '^\{"step":2,"eval_loss":[0-9.]+,"eval_ppl":[0-9.]+,"eval_acc":[0-9.]+,"eval_masked":[1-9][0-9]*\}$' \
	"  the eval line counts the masked tokens"

run sh -c "loom-feed -q --manifest mlm/m.manifest.json --batch 4 --seq 29 --seed 1 --epochs 0 |
	loom-train -q -c bert-tiny --set task=mlm --steps 4 --log mfull.jsonl"
run sh -c "loom-feed -q --manifest mlm/m.manifest.json --batch 4 --seq 29 --seed 1 --epochs 0 |
	loom-train -q -c bert-tiny --set task=mlm --steps 4 --save-every 2 --save mck --vocab bert-base-uncased --log mpart.jsonl"
is_rc 0 "mlm with checkpoints"
like mck/step-00000002/config.json '"BertForMaskedLM"' "  config.json: BertForMaskedLM"
like mck/step-00000002/tokenizer_config.json '"do_lower_case": true' "  bert-base-uncased lower-cases"
run sh -c "loom-feed -q --manifest mlm/m.manifest.json --batch 4 --seq 29 --seed 1 --epochs 0 --resume mck/step-00000002 |
	loom-train -q --resume mck/step-00000002 --log mpart.jsonl"
is_rc 0 "  --resume from step 2"
is "$(cut -d, -f1-4 mpart.jsonl)" "$(cut -d, -f1-4 mfull.jsonl)" "  steps 3-4: the same masks, the same losses"
# casing (loom_wordpiece_open): what was used is recorded, --lowercase --cased refused
run sh -c "loom-feed -q --manifest mlm/m.manifest.json --batch 4 --seq 29 --seed 1 --epochs 0 |
	loom-train -q -c bert-tiny --set task=mlm --steps 1 --save mcased --vocab bert-base-uncased --cased"
is_rc 0 "--cased: given, it wins"
like mcased/step-00000001/tokenizer_config.json '"do_lower_case": false' "  tokenizer_config.json records it"
run loom-train -c bert-tiny --set task=mlm --steps 1 --vocab bert-base-uncased --lowercase --cased
is_rc 2 "--lowercase --cased: exit 2"
is "$(cat "$err")" "loom-train: --lowercase and --cased contradict each other: give one
Try 'loom-train --help' for more information." "  one line and the hint"
mkdir -p mine && { cat "$SHARE/vocab/bert-base-uncased/vocab.txt"; echo Hello; } > mine/vocab.txt
run sh -c "loom-feed -q --manifest mlm/m.manifest.json --batch 4 --seq 29 --seed 1 --epochs 0 |
	loom-train -q -c bert-tiny --set task=mlm,vocab_size=30523 --steps 1 --save mc2 --vocab mine/vocab.txt"
is_rc 0 "a vocab.txt with an upper-case token"
like mc2/step-00000001/tokenizer_config.json '"do_lower_case": false' "  is trained cased, and says so"
run loom-train -c gpt2 --lowercase --print-config
is_rc 2 "--lowercase with a GPT: exit 2"
like "$err" "for a WordPiece vocabulary \(model=bert\)" "  says why"

# --init-from a HuggingFace directory (config.json without loom's keys +
# model.safetensors): the pretrained masked-LM model fine-tuned for squad
mkdir hf
cp mck/step-00000004/model.safetensors mck/step-00000004/vocab.txt hf/
/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c.pop("loom"); c.pop("loom_vocab", None)
json.dump(c, open("hf/config.json", "w"))' mck/step-00000004/config.json
run sh -c "$F | loom-train -c bert-tiny --init hf --steps 2"
is_rc 0 "--init HF-DIR (a BertForMaskedLM) for task=squad"
like "$err" '^loom-train: --init-from: the encoder \(2 layers, 128 wide, 2 heads, vocab 30522, 512 positions\) loaded; .*/hf has no question-answering \(qa_outputs\) head: initialised from the seed$' \
	"  what was loaded and the new head, in one line"
run sh -c "$F | loom-train -q -c bert-tiny --init hf --steps 2 --set vocab_size=32"
is_rc 2 "--init with another vocab_size: exit 2"
is "$(head -1 "$err")" "loom-train: vocab_size: --set 32, but $T/hf/config.json has vocab_size 30522 (--init-from takes the shape from there)" \
	"  one line naming the key and both values (and the --help hint of a usage error)"
run sh -c "$F | loom-train -q -c bert-tiny --init hf --steps 2 --set n_layer=4"
is "$rc:$(head -1 "$err")" "2:loom-train: n_layer: --set 4, but $T/hf/config.json has num_hidden_layers 2 (--init-from takes the shape from there)" \
	"  the same for n_layer"
# a PyTorch-only directory: the message points to the conversion
mkdir pt
cp hf/config.json hf/vocab.txt pt/
printf 'PK\003\004 not read' > pt/pytorch_model.bin
run sh -c "$F | loom-train -q -c bert-tiny --init pt --steps 2"
is "$rc:$(cat "$err")" "1:loom-train: $T/pt: model.safetensors is missing (it has pytorch_model.bin, which loom does not read: convert it, loom-train(1) HUGGINGFACE WEIGHTS)" \
	"--init-from a directory with only pytorch_model.bin: one line pointing to the conversion"
# the shape comes from the directory, the recipe from the preset: squad-base
# (12 layers, 768 wide) with a 2-layer, 128-wide directory
run loom-train -c squad-base --init-from hf --print-config
is_rc 0 "-c squad-base --init-from a bert-tiny directory --print-config"
like "$out" '"n_layer": 2,' "  n_layer from config.json"
like "$out" '"n_embd": 128,' "  n_embd from config.json"
like "$out" '"n_head": 2,' "  n_head from config.json"
like "$out" '"intermediate": 512,' "  intermediate from config.json"
like "$out" '"lr": 3e-05,' "  lr from the preset"
like "$out" '"micro_batch": 8,' "  micro_batch from the preset"
run sh -c "$F | loom-train -c squad-base --init hf --steps 2 --set micro_batch=8,grad_accum=1,seq_len=32"
is_rc 0 "  and it trains"
like "$err" "^loom-train: --init-from: the encoder \(2 layers, 128 wide" "  the loaded line"
run sh -c "$F | loom-train -q -c bert-tiny --init hf --steps 2 --save qa1"
run sh -c "$F | loom-train -c bert-tiny --init qa1/latest --steps 1 --set seq_len=32"
like "$err" '^loom-train: --init-from: the encoder \(2 layers, 128 wide, 2 heads, vocab 30522, 512 positions\) and its question-answering \(qa_outputs\) head loaded from .*qa1/step-00000002$' \
	"--init-from a QA checkpoint: the head loaded, one line"

done_testing
