#!/usr/bin/env bash
# loom-train's configuration: presets, files, --set, every rejection rule,
# --print-config JSON, --dry-run arithmetic.
. "$(dirname "$0")/lib.sh"

reject() { # name regex args...
	local name=$1 re=$2; shift 2
	fails_with 2 "$re" "$name" loom-train --print-config "$@"
}

run loom-train --print-config
is_rc 0 "--print-config (default preset tiny)"
ok "--print-config is JSON" /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$out"
like "$out" '"preset": "tiny"' "tiny is the default preset"
like "$out" '"global_batch": 4' "global_batch derived"
like "$out" '"loss_weighting": "none"' "loss_weighting defaults to none"
like "$out" '"decay_power": 0.5,' "decay_power defaults to 0.5"
run loom-train --print-config --set lr=0.003,min_lr=0.0003
like "$out" '"lr": 0.003,' "--print-config: the shortest decimal that reads back (0.003)"
like "$out" '"min_lr": 0.0003,' "  (0.0003, not 0.00029999999999999997)"
run loom-train --print-config --set loss_weighting=inverse_count,decay=polynomial,decay_power=0.8,cooldown_steps=50
is_rc 0 "the seed's loss and schedule keys"
/usr/bin/python3 - "$out" > "$T/vals" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(d["loss_weighting"], d["decay"], d["decay_power"], d["cooldown_steps"])
PY
is "$(cat "$T/vals")" "inverse_count polynomial 0.8 50" "--print-config shows them"
run loom-train --print-config -c gpt2 --set lr=0.001,decay=linear --set recompute=true --steps 7
is_rc 0 "gpt2 with overrides"
/usr/bin/python3 - "$out" > "$T/vals" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(d["n_layer"], d["n_embd"], d["n_head"], d["vocab_size"], d["n_positions"], d["lr"], d["decay"], d["recompute"], d["steps"])
PY
is "$(cat "$T/vals")" "12 768 12 50257 1024 0.001 linear True 7" "preset then --set then --steps"

cat > "$T/my.json" <<'JSON'
{ "n_layer": 3, "n_embd": 48, "n_head": 6, "dropout": 0.1 }
JSON
run loom-train --print-config -c "$T/my.json" --set n_layer=4
like "$out" '"n_layer": 4' "config file then --set"
like "$out" '"n_embd": 48' "config file applied"
like "$out" '"preset": "default"' "a file starts from the defaults"

reject "unknown key" '^loom-train: frobs: unknown configuration key' --set frobs=1
reject "wrong type (--set int)" '^loom-train: n_layer: must be an integer, not .abc.$' --set n_layer=abc
reject "wrong type (--set float)" '^loom-train: lr: must be a number' --set lr=fast
reject "wrong type (--set bool)" '^loom-train: recompute: must be a boolean' --set recompute=maybe
reject "bad enum" '^loom-train: decay: must be one of linear\|cosine\|inverse_sqrt\|constant\|polynomial, not .exp.$' --set decay=exp
reject "bad loss_weighting" '^loom-train: loss_weighting: must be one of none\|inverse_count, not .inverse.$' \
	--set loss_weighting=inverse
reject "decay_power above 4" '^loom-train: decay_power: 5 is outside \[0, 4\]$' --set decay=inverse_sqrt,decay_power=5
reject "decay_power 0" '^loom-train: decay_power: must be above 0 \(at most 4\)$' --set decay=inverse_sqrt,decay_power=0
reject "decay_power unused" '^loom-train: decay_power: only decay=inverse_sqrt or polynomial uses it \(decay is cosine\)$' \
	--set decay_power=0.8
reject "cooldown_steps unused" '^loom-train: cooldown_steps: only decay=polynomial uses it \(decay is linear\)$' \
	--set decay=linear,cooldown_steps=100
reject "out of range" '^loom-train: dropout: 2 is outside' --set dropout=2
reject "out of range (attention dropout)" '^loom-train: attn_dropout: 1 is outside' --set attn_dropout=1
reject "hidden % heads" '^loom-train: n_embd: 100 is not divisible by n_head \(3\)$' --set n_embd=100,n_head=3
reject "global batch rule" '^loom-train: global_batch: 7 != micro_batch \(4\) x grad_accum \(2\) x data_parallel \(1\) = 8$' \
	--set global_batch=7,grad_accum=2
reject "seq_len > n_positions" '^loom-train: seq_len: 9 is larger than n_positions \(8\)$' --set seq_len=9
reject "seq_len > records" '^loom-train: seq_len: 8 needs records of 9 tokens, records have 8$' --set record_len=8
reject "min_lr > lr" '^loom-train: min_lr: .* is larger than lr' --set lr=1e-4,min_lr=1e-3
reject "both warmups" '^loom-train: warmup_steps: set either' --set warmup_steps=3,warmup_proportion=0.1
reject "both warmups, two --set" '^loom-train: warmup_steps: set either' --set warmup_proportion=0.1 --set warmup_steps=3
run loom-train --print-config -c squad-base --set warmup_steps=60
is_rc 0 "--set warmup_steps=60 on squad-base (warmup_proportion 0.1): exit 0"
like "$out" '"warmup_steps": 60' "--set warmup_steps on a preset with warmup_proportion: taken"
like "$out" '"warmup_proportion": 0(\.0)?,' "... and the preset's warmup_proportion yields"
reject "ignore_id >= vocab" '^loom-train: ignore_id: 500 is not below vocab_size' --set ignore_id=500
reject "sparsity 1" '^loom-train: sparsity: 1 is not in \[0, 1\)$' --set sparsity=1
reject "sparsity < 0" '^loom-train: sparsity: -0.5 is outside' --set sparsity=-0.5
reject "block size not 8/16/32" '^loom-train: block_size: 12 is not 8, 16 or 32$' --set block_size=12
reject "block size vs widths" '^loom-train: block_size: 32 does not divide n_embd \(48\), a width of the sparse layers$' \
	--set n_embd=48,n_head=4,sparsity=0.5,block_size=32
reject "prune_every 0" '^loom-train: prune_every: must be at least 1 step, not 0$' --set prune_every=0
reject "sparse_layers unknown" "^loom-train: sparse_layers: must be a comma list of qkv,proj,fc,fcproj, not 'fc,mlp'$" \
	--set sparse_layers=fc,mlp
reject "sparse_layers twice" "^loom-train: sparse_layers: must be a comma list of qkv,proj,fc,fcproj, not 'fc,fc'$" \
	--set sparse_layers=fc,fc
reject "bad pooling" '^loom-train: pooling: must be one of avg\|max' --set pooling=sum
reject "bad prune_schedule" '^loom-train: prune_schedule: must be one of cosine\|constant' --set prune_schedule=linear
run loom-train --print-config
like "$out" '"sparsity": 0.0,' "sparsity: dense by default"
like "$out" '"sparse_layers": "qkv,proj,fc,fcproj",' "sparse_layers: all four projections by default"
like "$out" '"block_size": 16,' "block_size 16 by default"
like "$out" '"prune_schedule": "cosine",' "cosine prune schedule by default"
like "$out" '"pooling": "avg",' "avg pooling by default"
run loom-train --print-config --set sparsity=0.9,sparse_layers=fc,fcproj,block_size=8,pooling=max,prune_every=50
is_rc 0 "--set with a list value among other keys"
like "$out" '"sparse_layers": "fc,fcproj",' "the list value runs over its commas"
like "$out" '"prune_every": 50,' "keys after the list still apply"
like "$out" '"pooling": "max",' "pooling max"
echo '{ "sparsity": 0.5, "sparse_layers": "qkv,fcproj" }' > "$T/sp.json"
run loom-train --print-config -c "$T/sp.json"
like "$out" '"sparse_layers": "qkv,fcproj",' "sparse_layers from a config file"
reject "--set without =" "^loom-train: --set 'lr': expected key=value" --set lr

echo '{ "lr": "high" }' > "$T/bad.json"
run loom-train --print-config -c "$T/bad.json"
is_rc 2 "file with a wrong type: exit 2 (a configuration error)"
like "$err" "^loom-train: $T/bad.json: lr: must be a number, not a string$" "file type error names file and key"
echo '{ "recompute": 1 }' > "$T/bad.json"
run loom-train --print-config -c "$T/bad.json"
like "$err" 'recompute: must be a boolean, not a number' "bool key refuses numbers"
echo '{ "n_layer": 2.5 }' > "$T/bad.json"
run loom-train --print-config -c "$T/bad.json"
like "$err" 'n_layer: must be an integer, not a fraction' "int key refuses fractions"
echo '{ "whatever": 1 }' > "$T/bad.json"
run loom-train --print-config -c "$T/bad.json"
like "$err" 'whatever: unknown configuration key' "unknown key in a file"
printf '{ "n_layer": 2,\n  "n_embd": }\n' > "$T/bad.json"
run loom-train --print-config -c "$T/bad.json"
is_rc 2 "JSON syntax error: exit 2"
like "$err" "$T/bad.json:2: " "syntax error names file and line"
echo '[1, 2]' > "$T/bad.json"
run loom-train --print-config -c "$T/bad.json"
like "$err" 'must be a JSON object' "a config must be an object"
run loom-train --print-config -c nosuchpreset
is_rc 2 "unknown preset: exit 2"
like "$err" "preset 'nosuchpreset': no such preset" "unknown preset named"

# every configuration file error: exit 2, one line naming the file, never
# a line number of -1
bad_file() { # name regex file
	fails_with 2 "$2" "$1" loom-train --print-config -c "$3"
	unlike "$err" ':-1:' "$1: no line number -1"
}
cd "$T"
run loom-train --print-config -c ./nope.json
cd - > /dev/null
is_rc 2 "missing config file: exit 2"
like "$err" "^loom-train: cannot open './nope.json': No such file or directory$" "missing config file named"
unlike "$err" ':-1:' "missing config file: no line number -1"
printf '{ "lr": 0.1,\n  "lr": 0.2 }\n' > "$T/dup.json"
bad_file "duplicate key" "^loom-train: $T/dup.json:2: duplicate object key" "$T/dup.json"
/usr/bin/python3 -c 'print("{\"a\":" * 3000 + "1" + "}" * 3000)' > "$T/deep.json"
bad_file "too deep nesting" "^loom-train: $T/deep.json:1: maximum parsing depth" "$T/deep.json"
echo '{ "lr": 1e400 }' > "$T/huge.json"
bad_file "1e400" "^loom-train: $T/huge.json:1: real number overflow" "$T/huge.json"

for p in tiny test small mini gpt2 gpt3-125M gpt3-2.7B gpt3-175B; do
	run loom-train --print-config -c "$p"
	is_rc 0 "preset $p is valid"
done

run loom-train --dry-run -c gpt3-175B
is_rc 0 "--dry-run gpt3-175B"
like "$out" '^parameters: 174604259328 \(174\.604B\)$' "gpt3-175B: ~175B parameters"
like "$out" 'activations +[0-9.]+ GB \([0-9.]+ GB with recompute\)' "memory plan with and without recompute"
like "$out" 'AdamW m \+ v +1\.4 TB' "AdamW moments in the plan"
like "$out" '^FLOPs per token: 1\.077e\+12 training' "FLOPs per token"
run loom-train --dry-run -c gpt2
like "$out" '^parameters: 124439808 ' "gpt2: 124439808 parameters (as HuggingFace's GPT-2)"
# attention keeps no [B, NH, T, T] tensor: the plan is linear in T
run loom-train --dry-run -c gpt2 --set micro_batch=8,seq_len=1024
like "$out" 'activations +2\.9 GB \(680\.2 MB with recompute\)' "gpt2 B=8,T=1024: 2.9 GB of activations"
like "$out" 'total +4\.9 GB \(2\.7 GB with recompute\)' "gpt2 B=8,T=1024: 4.9 GB in all"
run loom-train --dry-run -c gpt3-2.7B
like "$out" '^parameters: 26[0-9]{8} \(2\.6[0-9]*B\)' "gpt3-2.7B: ~2.65B parameters"
done_testing
