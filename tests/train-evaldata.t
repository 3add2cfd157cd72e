#!/usr/bin/env bash
# loom-train --eval-data: batch frames or a loom-shard manifest (told by
# content), the manifest read through loom_feed in stream order;
# --eval-batches bounds each evaluation.
. "$(dirname "$0")/lib.sh"
cd "$T"
export OMP_NUM_THREADS=1
make_frames 4 9 60 128 1 > frames
# 4 records of 9 tokens (ids < 128), one batch of the tiny preset
seq 0 39 | tr '\n' ' ' > ev.txt
run loom-shard -q -f text -L 9 --no-shuffle -o ev/e ev.txt
is_rc 0 "a 4-record eval set"
run loom-feed -q --manifest ev/e.manifest.json --batch 4 --seq 8 --seed 1 --epochs 1
cp "$out" ev.frames

run loom-train -c tiny --steps 4 --eval-every 2 --eval-data ev.frames --threads 1 < frames
is_rc 0 "--eval-data frames"
grep -o 'eval step .*loss [0-9.]*' "$err" > want
run loom-train -c tiny --steps 4 --eval-every 2 --eval-data ev/e.manifest.json --threads 1 --log log.json < frames
is_rc 0 "--eval-data a manifest"
grep -o 'eval step .*loss [0-9.]*' "$err" > got
is "$(wc -l < got)" 2 "two evaluations"
same_file got want "the manifest's records give the frames' eval loss"
like log.json '"eval_tokens":32\}' "  32 tokens (4 records of 8 targets)"

# 12 records: 3 batches; --eval-batches 2 takes the first two
seq 0 120 | tr '\n' ' ' | sed 's/1[0-9][0-9]/5/g' > ev12.txt
run loom-shard -q -f text -L 9 -n 3 -o ev12/e ev12.txt
run loom-train -q -c tiny --steps 2 --eval-every 2 --eval-data ev12/e.manifest.json --log a.json < frames
like a.json '"eval_tokens":96\}' "a manifest of 13 records: every whole batch (3 x 32 tokens)"
run loom-train -q -c tiny --steps 2 --eval-every 2 --eval-data ev12/e.manifest.json --eval-batches 2 --log b.json < frames
like b.json '"eval_tokens":64\}' "--eval-batches 2: 64 tokens"
run loom-train -q -c tiny --steps 2 --eval-every 2 --eval-data ev.frames --eval-batches 1 --log c.json < frames
like c.json '"eval_tokens":32\}' "--eval-batches with frames too"

# loom-shard's validation split, straight into loom-train
run loom-shard -q -f text -L 9 --val-records 4 -o sp/w ev12.txt
run loom-train -q -c tiny --steps 2 --eval-every 2 --eval-data sp/w.val.manifest.json --log d.json < frames
like d.json '"eval_tokens":32\}' "PREFIX.val.manifest.json as --eval-data"

# bad manifests: found before training, one line naming the file
echo '{"shards": []}' > bad.json
fails_with 1 "bad.json" "a manifest without shards" loom-train -q -c tiny --steps 2 --eval-every 1 --eval-data bad.json --save ck < frames
ok "  nothing saved" test ! -e ck/latest
rm ev/e-00000-of-00001.tfrecord
fails_with 1 "e-00000-of-00001.tfrecord" "a shard missing" loom-train -q -c tiny --steps 2 --eval-every 1 --eval-data ev/e.manifest.json < frames

# --eval-train N: the loss over the run's first N micro-batches, kept, at
# each evaluation (nanoGPT's estimate_loss on a fixed sample): the same
# number as --eval-data given those frames
make_frames 4 9 2 128 1 > first2
run loom-train -q -c tiny --steps 6 --eval-every 3 --eval-data first2 --eval-train 2 --threads 1 --log et.json < frames
is_rc 0 "--eval-train 2"
is "$(grep -c '"eval_train_loss"' et.json)" 2 "  one eval_train_loss line per evaluation"
is "$(grep -o '"eval_train_loss":[0-9.e-]*' et.json | cut -d: -f2)" \
	"$(grep -o '"eval_loss":[0-9.e-]*' et.json | cut -d: -f2)" \
	"  the first 2 frames' loss, as --eval-data of them gives it"
run loom-train -c tiny --steps 6 --eval-every 3 --eval-data first2 --eval-train 2 --threads 1 < frames
like "$err" '^loom-train: eval step 3: train sample loss [0-9.]+ \(the first 2 micro-batches\)$' "  and on stderr"
fails_with 2 "^loom-train: --eval-train needs --eval-data" "--eval-train without --eval-data" \
	loom-train -q -c tiny --steps 2 --eval-train 2 < frames

# task=squad: the features are kept too; the held-in loss is also
# TensorBoard's eval/train_loss, beside eval/loss
make_squad sq.json vocab.txt
run loom-squad prepare -q --vocab vocab.txt --seq 32 --stride 16 sq.json -o sq/sq
is_rc 0 "loom-squad prepare: 40 features"
loom-feed -q --manifest sq/sq.manifest.json --batch 8 --seed 1 --epochs 1 > sq1.frames
run sh -c "loom-feed -q --manifest sq/sq.manifest.json --batch 8 --seed 1 --epochs 0 |
	loom-train -c bert-tiny --set vocab_size=32 --steps 6 --eval-every 3 --eval-data sq1.frames \
	  --eval-batches 2 --eval-train 2 --threads 1 --log sq.json --tensorboard tb"
is_rc 0 "task=squad --eval-train 2"
is "$(grep -o '"eval_train_loss":[0-9.e-]*' sq.json | cut -d: -f2)" \
	"$(grep -o '"eval_loss":[0-9.e-]*' sq.json | cut -d: -f2)" \
	"  the first 2 micro-batches' loss (features), as --eval-data of them gives it"
like "$err" '^loom-train: eval step 6: train sample loss [0-9.]+ \(the first 2 micro-batches\)$' "  and on stderr"
run loom-plot -w 10 -y eval_train_loss,eval_loss tb/events.out.tfevents.*
is_rc 0 "loom-plot of the event file"
like "$out" '^eval_train_loss .*\(2 points, step 3\.\.6\)' "  eval/train_loss in TensorBoard: a point per evaluation"
ok "  under that tag" grep -q eval/train_loss tb/events.out.tfevents.*
tbv() { /usr/bin/python3 "$TESTS/tb_events.py" tb/events.* | awk -v t="$1" '$2 == t { print $1, $4 }'; }
is "$(tbv eval/train_loss | cut -d' ' -f1 | tr '\n' ' ')" "3 6 " "  eval/train_loss at steps 3 and 6"
is "$(tbv eval/train_loss)" "$(tbv eval/loss)" "  the same values as eval/loss there"
done_testing
