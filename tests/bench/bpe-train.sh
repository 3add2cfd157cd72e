#!/usr/bin/env bash
# Benchmark: loom-bpe train (vocab 30000) on ~10 MB of real text against
# HuggingFace tokenizers' BpeTrainer (npm `tokenizers`, ByteLevel
# pre-tokenizer, one thread) on the same text; then the round trip:
# `loom-bpe encode` with the trained encoder.json/vocab.bpe must give the
# same ids as HuggingFace tokenizers loading the written tokenizer.json.
#
# Text: loom-extract output of ../shared/data/wiki/*.xml.bz2 when
# loom-extract is built (else the raw dump XML), plus English prose from
# the machine (vim's and perl's documentation) to about 10 MB.  Figures
# are noisy: the machine has 2 shared cores.
#   BENCH_MB=10  text size;  RAYON_NUM_THREADS=1 for HF (one core).
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${LOOM_BUILD:-$here/build}
shared=${LOOM_SHARED:-$here/../shared}
mb=${BENCH_MB:-10}
work=$build/bench-bpe-train
npmdir=$build/bench-npm
mkdir -p "$work"
command -v loom-bpe >/dev/null || { echo "bpe-train: loom-bpe not on PATH (make first)"; exit 1; }

# --- the text -------------------------------------------------------------
corpus=$work/corpus-${mb}mb.txt
if [ ! -s "$corpus" ]; then
	# half wiki text (Japanese + English dump samples), half English prose
	for f in "$shared"/data/wiki/*.xml.bz2; do
		case $f in *index*) continue ;; esac
		[ -e "$f" ] || continue
		if command -v loom-extract >/dev/null; then
			loom-extract "$f" 2>/dev/null
		else
			bzcat "$f"
		fi
	done >"$work/wiki.raw"
	cat /usr/share/vim/vim*/doc/*.txt /usr/share/perl/*/pod/*.pod >"$work/prose.raw" 2>/dev/null
	python3 -c '
import sys
n = int(sys.argv[1]) * 1000 * 1000
# valid UTF-8 (HF reads files as text), whole lines, no trailing white
# space on a line (HF trains on lines with their newline, loom --docs lines
# on lines without: a trailing space would join the newline only in HF)
def lines(path):
	for l in open(path, "rb").read().decode("utf-8", "ignore").split("\n"):
		l = l.rstrip().encode("utf-8")
		if l:
			yield l
out, size = [], 0
for path, cap in ((sys.argv[2], n // 2), (sys.argv[3], n)):
	for l in lines(path):
		if size + len(l) + 1 > cap:
			break
		out.append(l); size += len(l) + 1
sys.stdout.buffer.write(b"\n".join(out) + b"\n")
' "$mb" "$work/wiki.raw" "$work/prose.raw" >"$corpus.tmp" && mv "$corpus.tmp" "$corpus"
	rm -f "$work/wiki.raw" "$work/prose.raw"
fi
bytes=$(wc -c <"$corpus")
echo "text: $corpus, $bytes bytes, $(wc -l <"$corpus") lines"

# --- loom -----------------------------------------------------------------
rm -rf "$work/loom"
t0=$(date +%s.%N)
loom-bpe train --vocab-size 30000 --min-frequency 0 -o "$work/loom" "$corpus" 2>"$work/loom.err" \
	|| { cat "$work/loom.err"; echo "bpe-train: loom-bpe train failed"; exit 1; }
t1=$(date +%s.%N)
loom_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
cat "$work/loom.err"
loom_mem=$(sed -n 's/.*peak memory \(.*\)$/\1/p' "$work/loom.err")
printf 'loom-bpe train: %.2f s (whole process), peak memory %s\n' "$loom_s" "$loom_mem"

# --- HuggingFace tokenizers -------------------------------------------------
if [ ! -d "$npmdir/node_modules/tokenizers" ]; then
	if command -v npm >/dev/null; then
		echo "installing npm tokenizers into $npmdir"
		mkdir -p "$npmdir"
		npm install --prefix "$npmdir" --no-audit --no-fund tokenizers >"$work/npm.log" 2>&1 \
			|| echo "bpe-train: npm install tokenizers failed (see $work/npm.log)"
	else
		echo "bpe-train: npm is missing"
	fi
fi
if [ ! -d "$npmdir/node_modules/tokenizers" ] || ! command -v node >/dev/null; then
	echo "FIGURE loom-bpe train vs HF tokenizers: SKIPPED (cannot install npm tokenizers / node)"
	exit 0
fi
export NODE_PATH=$npmdir/node_modules
cat >"$work/hftrain.js" <<'EOF'
// HF BpeTrainer defaults (the node binding exposes no trainer options):
// vocab 30000, min frequency 0, no specials, alphabet = characters seen.
const { Tokenizer, BPE, byteLevelPreTokenizer } = require('tokenizers');
const [file, out] = process.argv.slice(2);
const tok = new Tokenizer(BPE.empty());
tok.setPreTokenizer(byteLevelPreTokenizer(false, true));
const t0 = process.hrtime.bigint();
tok.train([file]);
const t1 = process.hrtime.bigint();
tok.save(out, false);
console.log(`HFSECONDS ${Number(t1 - t0) / 1e9}`);
EOF
timecmd=()
[ -x /usr/bin/time ] && timecmd=(/usr/bin/time -f 'HFMAXRSS %M')
RAYON_NUM_THREADS=1 "${timecmd[@]}" node "$work/hftrain.js" "$corpus" "$work/hf.json" \
	>"$work/hf.out" 2>"$work/hf.err" || { tail -5 "$work/hf.err"; echo "bpe-train: HF training failed"; exit 1; }
hf_s=$(sed -n 's/^HFSECONDS //p' "$work/hf.out")
hf_kb=$(sed -n 's/^HFMAXRSS //p' "$work/hf.err")
printf 'HF tokenizers BpeTrainer (1 thread): %.2f s (training only), peak memory %s\n' "$hf_s" \
	"${hf_kb:+$((hf_kb / 1024)) MB}"

ratio=$(awk -v a="$hf_s" -v b="$loom_s" 'BEGIN { print a / b }')
verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 2) ? 1 : 0 }')
printf 'FIGURE loom-bpe train vs HF tokenizers BpeTrainer (vocab 30000, %s MB, 1 thread): %.2fx faster (target >= 2x) %s\n' \
	"$mb" "$ratio" "$([ "$verdict" = 1 ] && echo ok || echo FAIL)"
echo "FIGURE loom-bpe train peak memory: $loom_mem (HF: ${hf_kb:+$((hf_kb / 1024)) MB})"

# the same merges (HF's ids differ only by its smaller alphabet)
python3 - "$work/hf.json" "$work/loom/vocab.bpe" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1], encoding="utf-8"))["model"]["merges"]
m = [x if isinstance(x, str) else " ".join(x) for x in m]
lo = [l for l in open(sys.argv[2], encoding="utf-8").read().split("\n")[1:] if l]
n = min(len(m), len(lo))
same = 0
while same < n and m[same] == lo[same]:
    same += 1
print("FIGURE loom-bpe train merges equal to HF BpeTrainer's: %d of %d %s"
      % (same, n, "ok" if same == n else "FAIL (first difference at rank %d: HF %r, loom %r)"
         % (same, m[same], lo[same])))
EOF

# --- round trip: loom-bpe encode vs HF with the written tokenizer.json -------
sample=$work/sample.txt
head -c 4000000 "$corpus" | sed '$d' >"$sample"
if ! loom-bpe encode --vocab "$work/loom" --docs lines --eos none --format u32 \
	"$sample" >"$work/loom.ids" 2>"$work/enc.err"; then
	cat "$work/enc.err"
	echo "FIGURE loom-bpe train round trip (encode vs HF tokenizer.json): FAIL (loom-bpe encode failed)"
	exit 1
fi
cat >"$work/hfenc.js" <<'EOF'
// Encode each line with HF tokenizers loading loom's tokenizer.json; compare
// with loom-bpe encode's u32 ids.
const fs = require('fs');
const { Tokenizer } = require('tokenizers');
const [tokjson, text, idsfile] = process.argv.slice(2);
(async () => {
	const tok = Tokenizer.fromFile(tokjson);
	const lines = fs.readFileSync(text, 'utf8').split('\n');
	if (lines[lines.length - 1] === '') lines.pop();
	const buf = fs.readFileSync(idsfile);
	const loom = new Uint32Array(buf.buffer, buf.byteOffset, buf.length / 4);
	let pos = 0, n = 0;
	for (let i = 0; i < lines.length; i += 1000) {
		const encs = await tok.encodeBatch(lines.slice(i, i + 1000));
		for (let j = 0; j < encs.length; j++) {
			const ids = encs[j].getIds();
			for (let k = 0; k < ids.length; k++, pos++) {
				if (pos >= loom.length || loom[pos] !== ids[k]) {
					console.log(`MISMATCH line ${i + j + 1} token ${k}: HF ${ids[k]}, loom ${loom[pos]}`);
					process.exit(1);
				}
			}
			n += ids.length;
		}
	}
	if (pos !== loom.length) {
		console.log(`MISMATCH loom has ${loom.length - pos} extra ids`);
		process.exit(1);
	}
	console.log(`EQUAL ${n} ids on ${lines.length} lines`);
})();
EOF
res=$(node "$work/hfenc.js" "$work/loom/tokenizer.json" "$sample" "$work/loom.ids" 2>&1 | tail -1)
case $res in
EQUAL*) echo "FIGURE loom-bpe train round trip: loom-bpe encode == HF tokenizers(tokenizer.json) on $(wc -c <"$sample") bytes: ${res#EQUAL } ok" ;;
*) echo "FIGURE loom-bpe train round trip: loom-bpe encode vs HF tokenizers(tokenizer.json): FAIL ($res)"; exit 1 ;;
esac
