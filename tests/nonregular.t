#!/usr/bin/env bash
# Files loom opens by name itself (a checkpoint's files, a manifest and the
# shards it names) must be regular files read with a size bound: a FIFO or
# a link to /dev/zero there is refused with one line naming the file, never
# read until memory runs out or blocked on.  Config files and vocabularies
# the user names may be pipes, read with the same bound.
# `timeout` only turns a hang into a failure; no test depends on it.
. "$(dirname "$0")/lib.sh"

TO="timeout 120"
F=$T/frames
make_frames 4 9 12 128 1 > "$F"
export OMP_NUM_THREADS=1
run loom-train -q -c tiny --steps 4 --threads 1 \
	--set sparsity=0.5,block_size=8,prune_every=2,prune_ratio=0.4 --save "$T/ck" < "$F"
is_rc 0 "a tiny sparse checkpoint"
C=$T/ck/step-00000004
ok "it has sparsity.safetensors" test -s "$C/sparsity.safetensors"
mkfifo "$T/fifo"

# $T/b: a copy of the checkpoint whose FILE is replaced by what $2.. makes
bad() { # FILE CMD...
	local f=$1; shift
	rm -rf "$T/b"; cp -r "$C" "$T/b"; rm -f "$T/b/$f"; "$@" "$T/b/$f"
}
for f in model.safetensors sparsity.safetensors config.json state.json; do
	bad $f mkfifo
	run $TO loom-eval --checkpoint "$T/b" -j 1 < "$F"
	is_rc 1 "loom-eval: $f is a FIFO: exit 1"
	like "$err" "^loom-eval: '[^']*/b/$f' is not a regular file$" "  one line naming it"
	run $TO loom-train -q --resume "$T/b" --steps 6 --threads 1 < "$F"
	is_rc 1 "loom-train --resume: $f is a FIFO: exit 1"
	like "$err" "^loom-train: '[^']*/b/$f' is not a regular file$" "  one line naming it"
	bad $f ln -s /dev/zero
	run $TO loom-eval --checkpoint "$T/b" -j 1 < "$F"
	is_rc 1 "loom-eval: $f links to /dev/zero: exit 1"
	like "$err" "^loom-eval: [^ ]*/b: $f is a symbolic link to '/dev/zero', outside the checkpoint$" \
		"  refused by name"
done
for f in vocab.json merges.txt; do
	bad $f mkfifo
	other=merges.txt; [ $f = merges.txt ] && other=vocab.json
	printf '{}' > "$T/b/$other"
	run $TO loom-eval generate --checkpoint "$T/b" --prompt a -n 2 -j 1
	is_rc 1 "loom-eval generate: the checkpoint's $f is a FIFO: exit 1"
	like "$err" "'[^']*/b/$f' is not a regular file$" "  one line naming it"
done

# links and names that leave the directory
bad model.safetensors ln -s ../ck/step-00000004/model.safetensors
run $TO loom-eval --checkpoint "$T/b" -j 1 < "$F"
is_rc 1 "model.safetensors links out of the checkpoint (to a good copy): exit 1"
like "$err" "^loom-eval: [^ ]*/b: model.safetensors is a symbolic link to '[^']*/ck/step-00000004/model.safetensors', outside the checkpoint$" \
	"  refused by name"
rm -rf "$T/b"; cp -r "$C" "$T/b"; mkdir "$T/b/w"; mv "$T/b/model.safetensors" "$T/b/w/"
ln -s w/model.safetensors "$T/b/model.safetensors"
run $TO loom-eval --checkpoint "$T/b" -j 1 < "$F"
is_rc 0 "a link that stays inside the checkpoint is fine"
for name in ../x /etc/passwd; do
	rm -rf "$T/b"; cp -r "$C" "$T/b"
	/usr/bin/python3 - "$T/b/state.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["files"][sys.argv[2]] = {"bytes": 1, "crc32c": "00000000"}
json.dump(d, open(sys.argv[1], "w"))
PY
	run $TO loom-eval --checkpoint "$T/b" -j 1 < "$F"
	is_rc 1 "state.json lists '$name': exit 1"
	like "$err" "state.json: files: bad file name '$name'$" "  names it"
done

# A HuggingFace directory (no state.json) may hold links (its cache links
# snapshots to blobs), but only to regular files.
rm -rf "$T/hf"; mkdir "$T/hf"; cp "$C/model.safetensors" "$T/hf/"
/usr/bin/python3 - "$C/config.json" "$T/hf/config.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d.pop("loom"); json.dump(d, open(sys.argv[2], "w"))
PY
run $TO loom-eval --checkpoint "$T/hf" -j 1 < "$F"
is_rc 0 "a HuggingFace directory (no state.json) is read"
cp "$out" "$T/hf.json"
mv "$T/hf/model.safetensors" "$T/blob"; ln -s "$T/blob" "$T/hf/model.safetensors"
run $TO loom-eval --checkpoint "$T/hf" -j 1 < "$F"
is_rc 0 "HuggingFace directory: model.safetensors may link to a blob elsewhere"
is "$(cut -d, -f3-5 "$out")" "$(cut -d, -f3-5 "$T/hf.json")" "  the same loss"
rm "$T/hf/model.safetensors"; ln -s /dev/zero "$T/hf/model.safetensors"
run $TO loom-eval --checkpoint "$T/hf" -j 1 < "$F"
is_rc 1 "HuggingFace directory: model.safetensors links to /dev/zero: exit 1"
like "$err" "^loom-eval: '[^']*/hf/model.safetensors' is not a regular file$" "  one line naming it"

# --resume trims the log of steps after the checkpoint, but a log that is a
# FIFO (read by another program) has nothing to trim: it is only written
mkfifo "$T/log.fifo"
$TO cat "$T/log.fifo" > "$T/log.txt" &
reader=$!
run $TO loom-train -q --resume "$C" --steps 6 --threads 1 --log "$T/log.fifo" < "$F"
is_rc 0 "loom-train --resume --log FIFO: exit 0 (not blocked reading the FIFO)"
wait $reader
like "$T/log.txt" '^\{"step":6,' "  the log went through the FIFO"

# --- config files ----------------------------------------------------------------
# a configuration the user names may be a pipe or a FIFO (ordinary shell
# use: -c <(...)); its read is bounded; a device is refused by name
run $TO loom-train -c /dev/zero --steps 1 < "$F"
is_rc 2 "loom-train -c /dev/zero: exit 2 (a configuration error)"
like "$err" "^loom-train: '/dev/zero' is a device, not a file or a pipe$" "  one line naming it"
run $TO loom-train -c <(head -c 16777217 /dev/zero) --steps 1 < "$F"
is_rc 2 "loom-train -c <(16 MiB + 1 bytes): exit 2"
like "$err" "^loom-train: '/dev/fd/[0-9]+' holds more than the 16777216 bytes such a file may have$" \
	"  one line naming it and the bound"
echo '{"lr": "x"}' > "$T/bad.json"
run $TO loom-train -c <(cat "$T/bad.json") --steps 1 < "$F"
is_rc 2 "loom-train -c <(...): the configuration is read from the pipe"
like "$err" "^loom-train: /dev/fd/[0-9]+: lr: must be a number, not a string$" "  its content judged"
$TO cat "$T/bad.json" > "$T/fifo" &
writer=$!
run $TO loom-train -c "$T/fifo" --steps 1 < "$F"
wait $writer
is_rc 2 "loom-train -c FIFO (with a writer): read, not refused"
like "$err" "^loom-train: [^ ]*/fifo: lr: must be a number, not a string$" "  its content judged"

# --- manifests and shards ----------------------------------------------------------
python3 -c "print(' '.join(str(i % 128) for i in range(400)))" > "$T/tok.txt"
run loom-shard -q -f text -L 9 -o "$T/d" "$T/tok.txt"
is_rc 0 "shards"
M=$T/d.manifest.json
run $TO loom-feed -m "$T/fifo" -b 2 -t 8 -s 1 -q
is_rc 1 "loom-feed -m FIFO: exit 1"
like "$err" "^loom-feed: '[^']*/fifo' is not a regular file$" "  one line naming it"
sed 's|"file": *"[^"]*"|"file": "/dev/zero"|' "$M" > "$T/zero.manifest.json"
run $TO loom-feed -m "$T/zero.manifest.json" --verify -b 2 -t 8 -s 1 -q
is_rc 1 "loom-feed --verify, a manifest entry naming /dev/zero: exit 1"
like "$err" "^loom-feed: [^ ]*/zero.manifest.json: shard '/dev/zero' is not a regular file$" \
	"  one line naming the manifest and the shard"
/usr/bin/python3 - "$M" "$T/zero2.manifest.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["shards"]: s.pop("bytes", None); s["file"] = "/dev/zero"
json.dump(d, open(sys.argv[2], "w"))
PY
run $TO loom-feed -m "$T/zero2.manifest.json" --verify -b 2 -t 8 -s 1 -q
is_rc 1 "  the same without \"bytes\": exit 1"
like "$err" "shard '/dev/zero' is not a regular file$" "  one line naming the shard"
shard=$(ls "$T"/d-*.tfrecord | head -1)
mv "$shard.index" "$T/index.keep"; mkfifo "$shard.index"
run $TO loom-feed -m "$M" -b 2 -t 8 -s 1 -q
is_rc 1 "a shard's index is a FIFO: exit 1"
like "$err" "^loom-feed: '$shard.index' is not a regular file$" "  one line naming it"
rm "$shard.index"; mv "$T/index.keep" "$shard.index"

# --- vocabularies ------------------------------------------------------------------
# a vocabulary the user names may be a pipe (tests/bad-input-4.t), not a
# device
run $TO loom-bpe encode --vocab /dev/zero,/dev/zero <<< "hello"
is_rc 1 "loom-bpe encode --vocab /dev/zero,/dev/zero: exit 1"
like "$err" "'/dev/zero' is a device, not a file or a pipe$" "  one line naming it"
# data inputs may still be pipes
run $TO loom-bpe encode --vocab gpt2 -f text -q <(echo hello)
is_rc 0 "loom-bpe encode FILE still reads a pipe"
is "$(cat "$out")" "31373 50256" "  and encodes it"
done_testing
