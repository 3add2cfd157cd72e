#!/usr/bin/python3
"""tests/squad_bert.py - the independent side of tests/eval-squad-bert.t
(Python standard library only).

  squad_bert.py make DIR [--no-vocab]
      a HuggingFace BertForQuestionAnswering directory: config.json,
      model.safetensors (HF names), vocab.txt, tokenizer_config.json.  A
      small random BERT whose layers barely change their input (their
      weights are small, LayerNorm keeps the embeddings), and whose QA head
      reads dimension 0 as the start logit and dimension 1 as the end
      logit: the word "paris" has a large dimension 0, "seine" a large
      dimension 1, so the span "paris ... seine" must win where it is valid.
  squad_bert.py post DATA.json LOGITS.jsonl VOCAB --seq T --stride S
          --max-query Q --n-best N --max-answer A
      run_squad.py's post-processing of the logits loom-eval wrote, with a
      tokenizer of its own (basic split + greedy WordPiece, with byte
      offsets; enough for ASCII text) and its own windows, checking that
      loom's features are the same tokens; prints {id: answer} as JSON.
"""
import json
import random
import struct
import sys

C, L, NH, I, P = 32, 2, 2, 64, 64
WORDS = ("the capital of france is paris , on river seine . it has many museum ##s "
         "and people live there what where which city flows through a in famous "
         "tower eiffel was built 1889 when large art louvre ? who are")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS.split()


def make(d, with_vocab):
    rnd = random.Random(20)
    V = len(VOCAB)
    tensors = []

    def add(name, shape, fill):
        n = 1
        for s in shape:
            n *= s
        tensors.append((name, shape, [fill(k) for k in range(n)]))

    small = lambda k: rnd.gauss(0, 0.02)
    ones = lambda k: 1.0
    zero = lambda k: 0.0

    def word(k):
        tok, dim = divmod(k, C)
        w = VOCAB[tok]
        if w == "paris" and dim == 0:
            return 8.0
        if w == "seine" and dim == 1:
            return 8.0
        return rnd.gauss(0, 1)

    add("bert.embeddings.word_embeddings.weight", [V, C], word)
    add("bert.embeddings.position_embeddings.weight", [P, C], small)
    add("bert.embeddings.token_type_embeddings.weight", [2, C], small)
    add("bert.embeddings.LayerNorm.weight", [C], ones)
    add("bert.embeddings.LayerNorm.bias", [C], zero)
    for l in range(L):
        p = "bert.encoder.layer.%d." % l
        for m in ("query", "key", "value"):
            add(p + "attention.self.%s.weight" % m, [C, C], small)
            add(p + "attention.self.%s.bias" % m, [C], small)
        add(p + "attention.output.dense.weight", [C, C], small)
        add(p + "attention.output.dense.bias", [C], small)
        add(p + "attention.output.LayerNorm.weight", [C], ones)
        add(p + "attention.output.LayerNorm.bias", [C], zero)
        add(p + "intermediate.dense.weight", [I, C], small)
        add(p + "intermediate.dense.bias", [I], small)
        add(p + "output.dense.weight", [C, I], small)
        add(p + "output.dense.bias", [C], small)
        add(p + "output.LayerNorm.weight", [C], ones)
        add(p + "output.LayerNorm.bias", [C], zero)
    add("qa_outputs.weight", [2, C], lambda k: 10.0 if k in (0, C + 1) else 0.0)
    add("qa_outputs.bias", [2], zero)

    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, shape, vals in tensors:
        b = struct.pack("<%df" % len(vals), *vals)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(d + "/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    cfg = {"architectures": ["BertForQuestionAnswering"], "attention_probs_dropout_prob": 0.1,
           "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": C,
           "initializer_range": 0.02, "intermediate_size": I, "layer_norm_eps": 1e-12,
           "max_position_embeddings": P, "model_type": "bert", "num_attention_heads": NH,
           "num_hidden_layers": L, "pad_token_id": 0, "type_vocab_size": 2,
           "vocab_size": V}
    with open(d + "/config.json", "w") as f:
        json.dump(cfg, f, indent=2)
    if with_vocab:
        with open(d + "/vocab.txt", "w") as f:
            f.write("\n".join(VOCAB) + "\n")
        with open(d + "/tokenizer_config.json", "w") as f:
            json.dump({"do_lower_case": True, "tokenizer_class": "BertTokenizer"}, f)


def tokenize(text, vocab):
    """BERT's basic tokenizer + WordPiece for ASCII text: ids and byte spans."""
    ids, spans, i, n = [], [], 0, len(text)
    words = []
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif not c.isalnum():
            words.append((i, i + 1))
            i += 1
        else:
            j = i
            while j < n and text[j].isalnum():
                j += 1
            words.append((i, j))
            i = j
    for a, b in words:
        w = text[a:b].lower()
        pieces, s = [], 0
        while s < len(w):
            e = len(w)
            while e > s and (("##" if s else "") + w[s:e]) not in vocab:
                e -= 1
            if e == s:
                pieces = None
                break
            pieces.append((vocab[("##" if s else "") + w[s:e]], a + s, a + e))
            s = e
        if pieces is None:
            pieces = [(vocab["[UNK]"], a, b)]
        for t, x, y in pieces:
            ids.append(t)
            spans.append((x, y))
    return ids, spans


def best_indexes(logits, n):
    return sorted(range(len(logits)), key=lambda i: logits[i], reverse=True)[:n]


def post(argv):
    data, logits, vocab_path = argv[:3]
    opt = {argv[k].lstrip("-"): int(argv[k + 1]) for k in range(3, len(argv), 2)}
    vocab = {w: i for i, w in enumerate(open(vocab_path).read().split("\n")) if w}
    feats = [json.loads(line) for line in open(logits)]
    qas = []
    for art in json.load(open(data))["data"]:
        for para in art["paragraphs"]:
            for qa in para["qas"]:
                qas.append((qa["id"], qa["question"], para["context"]))
    by_id, k = {}, 0
    seq, stride = opt["seq"], opt["stride"]
    for qid, question, context in qas:
        # run_squad.py's windows, on our own tokens
        ctx_ids, spans = tokenize(context, vocab)
        q_ids = tokenize(question, vocab)[0][:opt["max-query"]]
        room = seq - 3 - len(q_ids)
        wins, start = [], 0
        while True:
            length = min(len(ctx_ids) - start, room)
            wins.append((start, length))
            if start + length >= len(ctx_ids):
                break
            start += min(length, stride)
        best = None
        for w, (first, length) in enumerate(wins):
            f = feats[k]
            k += 1
            want = [vocab["[CLS]"]] + q_ids + [vocab["[SEP]"]] + ctx_ids[first:first + length] + [vocab["[SEP]"]]
            want += [vocab["[PAD]"]] * (seq - len(want))
            assert f["id"] == qid and f["window"] == w, (f["id"], qid, w)
            assert f["input_ids"] == want, (qid, w, f["input_ids"], want)
            doc_start = len(q_ids) + 2

            def max_context(tok):
                top, top_score = None, None
                for j, (a, n) in enumerate(wins):
                    if a <= tok < a + n:
                        score = min(tok - a, a + n - 1 - tok) + 0.01 * n
                        if top is None or score > top_score:
                            top, top_score = j, score
                return top == w

            sl, el = f["start_logits"], f["end_logits"]
            for s in best_indexes(sl, opt["n-best"]):
                for e in best_indexes(el, opt["n-best"]):
                    if not (doc_start <= s < doc_start + length and doc_start <= e < doc_start + length):
                        continue
                    if not max_context(first + s - doc_start):
                        continue
                    if e < s or e - s + 1 > opt["max-answer"]:
                        continue
                    score = sl[s] + el[e]
                    if best is None or score > best[0]:
                        best = (score, first + s - doc_start, first + e - doc_start)
        if best is None:
            by_id[qid] = ""
        else:
            by_id[qid] = context[spans[best[1]][0]:spans[best[2]][1]]
    assert k == len(feats), (k, len(feats))
    json.dump(by_id, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], "--no-vocab" not in sys.argv)
    else:
        post(sys.argv[2:])
