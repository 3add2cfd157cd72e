#!/usr/bin/env bash
# Token ids at the edge of 32 bits.  Ids are unsigned 32-bit in shards and
# frames (formats/batch.md): --pad takes any of 0..4294967295 and training
# and evaluation then work; an id outside the model's vocabulary is named
# as the unsigned number it is, never as a negative one.
. "$(dirname "$0")/lib.sh"

U32=4294967295
python3 -c "print(' '.join(str(i % 128) for i in range(2000)))" > "$T/tok.txt"
run loom-shard -q -f text -L 6 -o "$T/p" "$T/tok.txt"
is_rc 0 "shards of 6-token records"
M=$T/p.manifest.json

# --- --pad at the top of the range --------------------------------------------------
run loom-feed -m "$M" -b 4 -t 8 -s 1 --pad $U32 -q
is_rc 0 "loom-feed --pad $U32"
cp "$out" "$T/pad.bin"
run loom-train -c tiny --steps 20 --threads 1 -q --save "$T/ck" < "$T/pad.bin"
is_rc 0 "loom-train on frames padded with $U32"
is "$(cat "$err")" "" "  nothing on stderr"
run loom-eval --checkpoint "$T/ck" -j 1 < "$T/pad.bin"
is_rc 0 "loom-eval on them"
cut -d, -f3-7 "$out" > "$T/eval-top.txt"
loom-feed -m "$M" -b 4 -t 8 -s 1 --pad 1000 -q | loom-eval --checkpoint "$T/ck" -j 1 |
	cut -d, -f3-7 > "$T/eval-1000.txt"
same_file "$T/eval-top.txt" "$T/eval-1000.txt" "  the same loss, accuracy and tokens as with --pad 1000"
like "$T/eval-top.txt" '"tokens":1660,' "  padding is not counted (83 frames x 4 records x 5 targets)"

for opt in "loom-feed -m $M -b 4 -t 8 -s 1 --pad" "loom-bpe encode --vocab gpt2 --eos" \
	   "loom-shard -f text -L 6 -o $T/x --vocab-size"; do
	name=${opt%% *}
	big=4294967296; [ "$name" = loom-shard ] && big=4294967297
	run $opt $big < "$T/tok.txt"
	is_rc 2 "$name ${opt##* } $big: exit 2"
	is "$(head -1 "$err")" "$name: ${opt##* }: '$big' is out of range [$([ $name = loom-shard ] && echo 1 || echo 0), $((big - 1))]" \
		"  one line naming the allowed range"
done

# --- an id outside the vocabulary, at the top of the range ---------------------------
python3 -c "print(' '.join(str(i % 128) if i != 50 else '$U32' for i in range(2000)))" > "$T/big.txt"
run loom-shard -q -f text -L 9 -o "$T/b" "$T/big.txt"
is_rc 0 "shards holding id $U32"
loom-feed -m "$T/b.manifest.json" -b 4 -t 8 -s 1 -q > "$T/big.bin"
run loom-train -c tiny --steps 60 --threads 1 -q < "$T/big.bin"
is_rc 1 "loom-train: exit 1"
is "$(cat "$err")" "loom-train: stdin: frame 44: token $U32 (record 3, position 5) is outside the vocabulary: vocab_size is at most 16777216, so ids are 0..16777215" \
	"  names the id unsigned, and the range a vocabulary can have"
python3 -c "print(' '.join(str(i % 300) for i in range(2000)))" > "$T/300.txt"
loom-shard -q -f text -L 9 -o "$T/t" "$T/300.txt" &&
	loom-feed -m "$T/t.manifest.json" -b 4 -t 8 -s 1 -q > "$T/300.bin"
run loom-train -c tiny --steps 2 --threads 1 -q < "$T/300.bin"
like "$err" "token [0-9]+ .*at least 2[0-9][0-9] \\(gpt2: 50257\\)$" \
	"  a smaller id: the vocab_size it needs"
run loom-train -c tiny --steps 1 --threads 1 -q --eval-data "$T/big.bin" --eval-every 1 < "$T/pad.bin"
is_rc 1 "loom-train --eval-data holding id $U32: exit 1"
is "$(cat "$err")" "loom-train: $T/big.bin: frame 44: token $U32 (record 3, position 5) is outside the vocabulary of 128 ids" \
	"  names the file, frame and id"
run loom-eval --checkpoint "$T/ck" -j 1 < "$T/big.bin"
is_rc 1 "loom-eval: exit 1"
is "$(cat "$err")" "loom-eval: stdin: frame 44: token $U32 (record 3, position 5) is outside the model's vocabulary of 128 ids" \
	"  names the id unsigned"
done_testing
