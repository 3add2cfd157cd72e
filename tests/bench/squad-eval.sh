#!/usr/bin/env bash
# loom-eval squad against the official evaluate-v1.1.py on SQuAD's dev set
# (../shared/data/squad): for several prediction files (the gold answers,
# the first words of each context, random spans, missing ids, articles /
# punctuation / case / Unicode variants of the gold answers) the two must
# print byte-identical lines; then the time of each.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${LOOM_BUILD:-$ROOT/build}
SHARED=${LOOM_SHARED:-$ROOT/../shared}
DEV=$SHARED/data/squad/dev-v1.1.json
REF=$SHARED/data/squad/evaluate-v1.1.py
EVAL=$BUILD/bin/loom-eval
W=$BUILD/bench-squad
[ -f "$DEV" ] && [ -f "$REF" ] || { echo "squad-eval: $DEV or $REF missing: skipped"; exit 0; }
[ -x "$EVAL" ] || { echo "squad-eval: $EVAL missing (make all)"; exit 1; }
mkdir -p "$W"
. tests/bench/fig.bash

/usr/bin/python3 - "$DEV" "$W" <<'PY'
import json, random, sys
dev, out = sys.argv[1], sys.argv[2]
d = json.load(open(dev, encoding="utf-8"))
rnd = random.Random(20)
qs = [(p["context"], q) for a in d["data"] for p in a["paragraphs"] for q in p["qas"]]
def variant(t, i):
    k = i % 6
    if k == 0: return "The " + t.upper() + "!"   # Greek: final sigma
    if k == 1: return "  an " + t.lower().replace(" ", "  ,") + " ."
    if k == 2: return t.replace("e", "\u00e9").replace("a", "\u00c5")
    if k == 3: return "a " + t + " the"
    if k == 4: return t + " \u2014 \u00ab" + t[: len(t) // 2] + "\u00bb"
    return "\u0130" + t.title() + "\u00df\ufb01"
files = {
    "gold": {q["id"]: q["answers"][0]["text"] for c, q in qs},
    "first-words": {q["id"]: " ".join(c.split()[:1 + i % 5]) for i, (c, q) in enumerate(qs)},
    "random-spans": {},
    "missing-ids": {q["id"]: q["answers"][-1]["text"] for i, (c, q) in enumerate(qs) if i % 3},
    "variants": {q["id"]: variant(q["answers"][i % len(q["answers"])]["text"], i)
                 for i, (c, q) in enumerate(qs)},
    "empty-and-extra": dict([(q["id"], "") for c, q in qs[::2]] + [("not-a-question", "x")]),
}
for c, q in qs:
    w = c.split()
    a = rnd.randrange(len(w))
    files["random-spans"][q["id"]] = " ".join(w[a:a + rnd.randrange(1, 8)])
for name, p in files.items():
    with open("%s/%s.json" % (out, name), "w", encoding="utf-8") as f:
        json.dump(p, f, ensure_ascii=rnd.random() < 0.5)
PY

fail=0 tl=0 tr=0
for f in gold first-words random-spans missing-ids variants empty-and-extra; do
	P=$W/$f.json
	/usr/bin/time -f '%e' -o "$W/t.ref" /usr/bin/python3 "$REF" "$DEV" "$P" > "$W/ref.out" 2>/dev/null
	/usr/bin/time -f '%e' -o "$W/t.loom" "$EVAL" squad -q --data "$DEV" --predictions "$P" > "$W/loom.out"
	tr=$(awk -v a="$tr" '{ print a + $1 }' "$W/t.ref")
	tl=$(awk -v a="$tl" '{ print a + $1 }' "$W/t.loom")
	if cmp -s "$W/ref.out" "$W/loom.out"; then
		echo "squad-eval: $f: identical: $(cat "$W/loom.out")"
	else
		echo "squad-eval: $f: DIFFERENT: official $(cat "$W/ref.out") loom $(cat "$W/loom.out")"
		fail=1
	fi
done
echo "squad-eval: official script ${tr}s, loom-eval squad ${tl}s for the 6 files"
fig "loom-eval squad lines identical to evaluate-v1.1.py (6 prediction files)" "$((1 - fail))" ">=" 1 ""
exit "$fail"
