#!/usr/bin/env bash
# loom-train's configuration: presets, files, --set, every rejection rule,
# --print-config JSON, --dry-run arithmetic.
. "$(dirname "$0")/lib.sh"

reject() { # name regex args...
	local name=$1 re=$2; shift 2
	run loom-train --print-config "$@"
	is_rc 2 "$name: exit 2"
	like "$err" "$re" "$name: message names the key and rule"
	is "$(wc -l < "$err")" 1 "$name: one line"
}

run loom-train --print-config
is_rc 0 "--print-config (default preset tiny)"
ok "--print-config is JSON" /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$out"
like "$out" '"preset": "tiny"' "tiny is the default preset"
like "$out" '"global_batch": 4' "global_batch derived"
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
reject "bad enum" '^loom-train: decay: must be one of linear\|cosine\|inverse_sqrt\|constant' --set decay=exp
reject "out of range" '^loom-train: dropout: 2 is outside' --set dropout=2
reject "out of range (attention dropout)" '^loom-train: attn_dropout: 1 is outside' --set attn_dropout=1
reject "hidden % heads" '^loom-train: n_embd: 100 is not divisible by n_head \(3\)$' --set n_embd=100,n_head=3
reject "global batch rule" '^loom-train: global_batch: 7 != micro_batch \(4\) x grad_accum \(2\) x data_parallel \(1\) = 8$' \
	--set global_batch=7,grad_accum=2
reject "seq_len > n_positions" '^loom-train: seq_len: 9 is larger than n_positions \(8\)$' --set seq_len=9
reject "seq_len > records" '^loom-train: seq_len: 8 needs records of 9 tokens, records have 8$' --set record_len=8
reject "min_lr > lr" '^loom-train: min_lr: .* is larger than lr' --set lr=1e-4,min_lr=1e-3
reject "both warmups" '^loom-train: warmup_steps: set either' --set warmup_steps=3,warmup_proportion=0.1
reject "ignore_id >= vocab" '^loom-train: ignore_id: 500 is not below vocab_size' --set ignore_id=500
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
	run loom-train --print-config -c "$3"
	is_rc 2 "$1: exit 2"
	like "$err" "$2" "$1: message names the file and the reason"
	is "$(wc -l < "$err")" 1 "$1: one line"
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
