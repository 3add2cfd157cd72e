// HuggingFace tokenizers' BERT WordPiece (BertTokenizerFast's pipeline:
// BertNormalizer, BertPreTokenizer, WordPiece with [UNK] and "##", 100
// characters a word), for tests/bench/wordpiece.sh.
//   node wordpiece-ref.js ids  VOCAB.txt CORPUS OUT   one line of ids a line
//   node wordpiece-ref.js time VOCAB.txt CORPUS       "MBPS wall cpu tokens N" of
//                                                    encoding in batches of 2000 lines
const t = require('tokenizers');
const fs = require('fs');
const [mode, vocab, corpus, out] = process.argv.slice(2);
(async () => {
  let model = t.WordPiece.fromFile(vocab, { unkToken: '[UNK]', continuingSubwordPrefix: '##',
                                           maxInputCharsPerWord: 100 });
  if (model && model.then) model = await model;
  const tok = new t.Tokenizer(model);
  tok.setNormalizer(t.bertNormalizer({ cleanText: true, handleChineseChars: true, lowercase: true }));
  tok.setPreTokenizer(t.bertPreTokenizer());
  const text = fs.readFileSync(corpus, 'utf8');
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const ids = [];
  let tokens = 0;
  const c0 = process.cpuUsage(), w0 = process.hrtime.bigint();
  if (mode === 'ids') {
    for (const l of lines) {
      let e = tok.encode(l);
      if (e && e.then) e = await e;
      ids.push(e.getIds().join(' '));
    }
  } else {
    // batches of lines, as bpe-ref.js: one call per line would time the
    // promise and N-API crossing more than the tokenizer
    for (let i = 0; i < lines.length; i += 2000) {
      const encs = await tok.encodeBatch(lines.slice(i, i + 2000), { addSpecialTokens: false });
      for (const e of encs) tokens += e.getIds().length;
    }
  }
  const wall = Number(process.hrtime.bigint() - w0) / 1e9, c = process.cpuUsage(c0);
  const cpu = (c.user + c.system) / 1e6, mb = Buffer.byteLength(text) / 1e6;
  if (mode === 'ids') fs.writeFileSync(out, ids.join('\n') + '\n');
  else console.log(`MBPS ${(mb / wall).toFixed(3)} ${(mb / cpu).toFixed(3)} tokens ${tokens}`);
})().catch(e => { console.error('wordpiece-ref:', e.message || e); process.exit(1); });
