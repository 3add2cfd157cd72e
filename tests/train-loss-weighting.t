#!/usr/bin/env bash
# loom-train with loss_weighting=inverse_count (the seed's weighted training
# loss, lib/train/loom_gpt.h): it trains on the weighted objective, logs the
# unweighted loss, keeps the key in its checkpoints and resumes exactly.
. "$(dirname "$0")/lib.sh"

# ids 0..7 with 40% noise: every row of 8 targets repeats ids, unevenly
make_frames 4 9 30 8 1 --noise 0.4 > "$T/frames"
export OMP_NUM_THREADS=2

run loom-train -q -c tiny --steps 20 --log "$T/none.json" < "$T/frames"
is_rc 0 "loss_weighting none (the default) trains"
run loom-train -q -c tiny --steps 20 --set loss_weighting=inverse_count --log "$T/w.json" \
	--save "$T/ck" --save-every 10 < "$T/frames"
is_rc 0 "loss_weighting=inverse_count trains"
losses "$T/none.json" > "$T/none.l"
losses "$T/w.json" > "$T/w.l"
# step 1's loss is measured on the same initial weights and the same frame:
# the logged value is the unweighted mean, bit for bit
is "$(sed -n 1p "$T/w.l" | cut -d' ' -f2)" "$(sed -n 1p "$T/none.l" | cut -d' ' -f2)" \
	"step 1: the weighted run logs the unweighted loss"
ok "step 1: the gradient is the weighted objective's (grad_norm differs)" \
	test "$(sed -n 1p "$T/w.l" | cut -d' ' -f4)" != "$(sed -n 1p "$T/none.l" | cut -d' ' -f4)"
ok "the runs part after step 1 (the weighting changed the updates)" \
	test "$(sed -n 2p "$T/w.l" | cut -d' ' -f2)" != "$(sed -n 2p "$T/none.l" | cut -d' ' -f2)"
first=$(sed -n 1p "$T/w.l" | cut -d' ' -f2)
last=$(tail -1 "$T/w.l" | cut -d' ' -f2)
ok "the weighted run learns: unweighted loss $first -> $last" \
	/usr/bin/python3 -c "import sys; sys.exit(not $last < $first - 0.5)"

like "$T/ck/latest/config.json" '"loss_weighting": "inverse_count"' "the checkpoint keeps loss_weighting"
run loom-train -q --resume "$T/ck/step-00000010" --steps 20 --log "$T/r.json" < "$T/frames"
is_rc 0 "--resume of a weighted run"
is "$(losses "$T/r.json")" "$(sed -n '11,20p' "$T/w.l")" \
	"resumed: the same losses, lr and grad norms at steps 11..20"

# the step-10 weights, measured unweighted two more ways on frame 10 (step
# 11's): a resume with loss_weighting=none logs the same step-11 loss, and
# loom-eval reports it too (in double, so to 1e-6)
run loom-train -q --resume "$T/ck/step-00000010" --set loss_weighting=none --steps 20 \
	--log "$T/n.json" < "$T/frames"
is_rc 0 "--resume with --set loss_weighting=none"
is "$(losses "$T/n.json" | sed -n 1p | cut -d' ' -f1,2)" "$(sed -n 11p "$T/w.l" | cut -d' ' -f1,2)" \
	"step 11: the same logged loss with and without the weighting"
make_frames 4 9 11 8 1 --noise 0.4 | tail -c $((64 + 4 * 9 * 2 + 64)) > "$T/frame10"
run loom-eval --checkpoint "$T/ck/step-00000010" < "$T/frame10"
is_rc 0 "loom-eval on the weighted run's step-10 checkpoint, frame 10"
/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["loss"])' "$out" > "$T/ev"
ok "loom-eval's loss $(cat "$T/ev") is the logged unweighted step-11 loss" /usr/bin/python3 -c "
import sys; a, b = $(cat "$T/ev"), $(sed -n 11p "$T/w.l" | cut -d' ' -f2); sys.exit(not abs(a - b) <= 1e-6 * b)"
done_testing
