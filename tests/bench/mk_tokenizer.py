#!/usr/bin/python3
"""Write a synthetic byte-level BPE tokenizer.json of about MB megabytes
(HuggingFace's layout: model.vocab then model.merges as "a b" strings),
for tests/bench/vocab-load.sh.  Deterministic for a given size.
    mk_tokenizer.py MB OUT
Every merge joins two earlier tokens into a new one of at most 12 bytes,
so the file is a valid vocabulary for loom and for HF tokenizers."""
import json, random, sys

mb, out = float(sys.argv[1]), sys.argv[2]
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + n)
        n += 1
byte_tok = [chr(c) for _, c in sorted(zip(bs, cs))]
rng = random.Random(1)
toks = byte_tok[:]
nbytes = [1] * 256
seen = set(toks)
# most merges draw from letters and earlier merges, as a real vocabulary's
letters = list(range(97, 123)) + [32]  # ids of the single-byte tokens
merges = []
size = 0
target = mb * 1e6
while size < target:
    i = rng.randrange(len(toks)) if rng.random() < 0.7 else rng.choice(letters)
    j = rng.randrange(len(toks)) if rng.random() < 0.7 else rng.choice(letters)
    if nbytes[i] + nbytes[j] > 12:
        continue
    t = toks[i] + toks[j]
    if t in seen:
        continue
    seen.add(t)
    toks.append(t)
    nbytes.append(nbytes[i] + nbytes[j])
    m = toks[i] + " " + toks[j]
    merges.append(m)
    size += 2 * len(t.encode()) + len(m.encode()) + 16
toks.append("<|endoftext|>")
bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
doc = {"version": "1.0", "truncation": None, "padding": None,
       "added_tokens": [{"id": len(toks) - 1, "content": "<|endoftext|>", "single_word": False,
                         "lstrip": False, "rstrip": False, "normalized": True, "special": True}],
       "normalizer": None, "pre_tokenizer": bl, "post_processor": bl, "decoder": bl,
       "model": {"type": "BPE", "dropout": None, "unk_token": None,
                 "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                 "byte_fallback": False, "vocab": {t: i for i, t in enumerate(toks)},
                 "merges": merges}}
with open(out, "w", encoding="utf-8") as f:
    json.dump(doc, f, ensure_ascii=False, indent=2)
