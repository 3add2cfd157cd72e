// Reference encoders for tests/bench/bpe-encode.sh (run with NODE_PATH set
// to the scratch npm folder).  Documents: one per line, empty lines dropped,
// 50256 (<|endoftext|>) after each - the same as `loom-bpe encode`.
//   node bpe-ref.js ids FILE OUT       npm tiktoken 'gpt2' ids as u32 LE
//   node bpe-ref.js tiktoken FILE      time tiktoken-node (native Rust core)
//   node bpe-ref.js hf FILE VOCABDIR   time HuggingFace tokenizers (BPE + ByteLevel)
// Timings cover encoding only (not reading), single thread; printed as
// "MBPS <MB/s by wall time> <tokens> <seconds> <MB/s by process CPU time>"
// (CPU time is the fairer figure on a shared machine).
const fs = require('fs');
const [mode, file, arg] = process.argv.slice(2);
const docs = fs.readFileSync(file, 'utf8').split('\n').filter(d => d.length > 0);
const bytes = fs.statSync(file).size;

let c0;
function report(t0, tokens) {
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const c = process.cpuUsage(c0);
  const cs = (c.user + c.system) / 1e6;
  console.log(`MBPS ${(bytes / 1e6 / s).toFixed(3)} ${tokens} ${s.toFixed(3)} ${(bytes / 1e6 / cs).toFixed(3)}`);
}

async function main() {
  if (mode === 'ids') {
    const { get_encoding } = require('tiktoken');
    const enc = get_encoding('gpt2');
    const out = fs.openSync(arg, 'w');
    let buf = [];
    const flush = () => {
      fs.writeSync(out, Buffer.from(Uint32Array.from(buf).buffer));
      buf = [];
    };
    for (const d of docs) {
      for (const x of enc.encode(d, [], [])) buf.push(x);
      buf.push(50256);
      if (buf.length > 1 << 20) flush();
    }
    flush();
    fs.closeSync(out);
  } else if (mode === 'tiktoken') {
    const enc = require('tiktoken-node').getEncoding('gpt2');
    let tokens = 0;
    c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (const d of docs) tokens += enc.encode(d).length + 1;
    report(t0, tokens);
  } else if (mode === 'hf') {
    const T = require('tokenizers');
    const model = await T.BPE.fromFile(`${arg}/encoder.json`, `${arg}/vocab.bpe`);
    const tok = new T.Tokenizer(model);
    tok.setPreTokenizer(T.byteLevelPreTokenizer(false, true));
    let tokens = 0;
    c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < docs.length; i += 2000) {
      const encs = await tok.encodeBatch(docs.slice(i, i + 2000), { addSpecialTokens: false });
      for (const e of encs) tokens += e.getIds().length + 1;
    }
    report(t0, tokens);
  }
}
main().catch(e => { console.error(e.message); process.exit(1); });
