#!/usr/bin/python3
"""mksquad.py SQUAD.json VOCAB.txt [N]: a small SQuAD v1.1 file a BERT can
learn and the WordPiece vocabulary of its words (32 ids, [PAD] 0 .. [MASK]
4).  Each of the N (40) paragraphs tells where a cat and a dog went, in
either order; its one question asks about one of them, so the answer's
place moves and a model must read the question to find it."""
import json
import random
import sys

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "who",
         "what", "?", ".", "where", "did", "dog", "a", "run", "red", "blue", "green", "big",
         "small", "house", "tree", "car", "park", "ran", "to", "went", "go"]
PLACES = ["mat", "house", "tree", "car", "park"]
ADJ = ["red", "blue", "green", "big", "small"]


def main():
    out, vocab = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    rnd = random.Random(3)
    paras = []
    for i in range(n):
        s = [(rnd.choice(ADJ), a, rnd.choice(["sat on", "ran to", "went to"]), rnd.choice(PLACES))
             for a in ("cat", "dog")]
        rnd.shuffle(s)
        ctx = " ".join("the %s %s %s the %s ." % x for x in s)
        k = rnd.randrange(2)
        sent = "the %s %s %s the %s ." % s[k]
        start = ctx.index(sent) + sent.index("the %s ." % s[k][3])
        paras.append({"context": ctx, "qas": [{
            "id": "q%d" % i, "question": "where did the %s go ?" % s[k][1],
            "answers": [{"text": "the " + s[k][3], "answer_start": start}]}]})
    with open(out, "w") as f:
        json.dump({"version": "1.1", "data": [{"title": "T", "paragraphs": paras}]}, f)
    with open(vocab, "w") as f:
        f.write("\n".join(WORDS) + "\n")


main()
