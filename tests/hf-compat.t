#!/usr/bin/env bash
# HuggingFace interchange: a loom checkpoint read by an independent GPT-2
# implementation that follows transformers' GPT2Config / GPT2LMHeadModel /
# safetensors loading rules (tests/hf_gpt2.py) gives the loss loom-eval
# reports.  transformers itself is not installable here; this checks the
# names, shapes, Conv1D layouts, q|k|v order, head split, LayerNorm eps,
# gelu_new and tied head that from_pretrained relies on.
. "$(dirname "$0")/lib.sh"

REF="/usr/bin/python3 $TESTS/hf_gpt2.py"
make_frames 4 9 300 128 1 --noise 0.1 > "$T/train.bin"
make_frames 2 9 3 128 9 --noise 0.1 > "$T/val.bin"

# attention dropout on: the eval path must not apply it
run loom-train -q -c tiny --steps 300 --threads 1 --set attn_dropout=0.1,dropout=0.05,lr=3e-3,warmup_steps=10 \
	--save "$T/ck" < "$T/train.bin"
is_rc 0 "train tiny with dropout, save"
is "$(/usr/bin/python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
print(c["resid_pdrop"], c["embd_pdrop"], c["attn_pdrop"])' "$T/ck/latest/config.json")" \
	"0.05 0.05 0.1" "config.json carries the dropout rates under HF's names"

run loom-eval --checkpoint "$T/ck" -j 1 < "$T/val.bin"
is_rc 0 "loom-eval"
loom=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["loss"])' "$out")

run $REF "$T/ck/latest" "$T/val.bin"
is_rc 0 "the HF-rules reader accepts the checkpoint"
is "$(cat "$err")" "" "and says nothing on stderr"
like "$out" '^loss [0-9.]+ tokens 48$' "it scores the 48 target tokens"
ref=$(awk '{print $2}' "$out")
ok "same loss as loom-eval (loom $loom, reference $ref)" \
	/usr/bin/python3 -c "import sys; sys.exit(not abs($loom - $ref) <= 1e-4 * $ref)"
ok "the checkpoint has learned (loss $ref < 2.5; chance is 4.85), so the match is not trivial" \
	/usr/bin/python3 -c "import sys; sys.exit(not $ref < 2.5)"

# the reader has teeth: a transposed c_fc (a Linear layout instead of
# Conv1D) with the same shape header would be refused by shape
cp -r "$T/ck/latest/." "$T/bad"
/usr/bin/python3 - "$T/bad/model.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
d = bytearray(open(p, "rb").read())
n = struct.unpack_from("<Q", d, 0)[0]
h = json.loads(d[8:8 + n])
h["transformer.h.0.mlp.c_fc.weight"]["shape"] = [256, 64]
s = json.dumps(h, separators=(",", ":")).encode()
s += b" " * (-len(s) % 8)
open(p, "wb").write(struct.pack("<Q", len(s)) + s + d[8 + n:])
PY
run $REF "$T/bad" "$T/val.bin"
is_rc 1 "a Linear-layout shape is refused by the reference"
like "$err" "mlp.c_fc.weight is \\[256, 64\\], GPT2LMHeadModel expects \\[64, 256\\]" "names the tensor"
done_testing
