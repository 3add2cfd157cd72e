#!/usr/bin/python3
"""An independent reader of loom checkpoints as HuggingFace reads them, for
tests/hf-compat.t (Python standard library only).

It loads DIR/config.json the way transformers' GPT2Config does (n_embd,
n_layer, n_head, n_positions, vocab_size, layer_norm_epsilon,
activation_function) and DIR/model.safetensors under the rules of the
safetensors library (8-byte header size, JSON header starting with '{',
tensors laid end to end in offset order covering the whole buffer, each
exactly dtype size x shape bytes) plus transformers' own check that
__metadata__ says format "pt".  The tensors must be exactly those of
GPT2LMHeadModel's state dict (transformer.* names; lm_head.weight may be
absent, it is tied to transformer.wte.weight).  Then it runs GPT-2's
forward as transformers' modeling_gpt2 defines it (Conv1D y = x @ W + b
with W [in, out]; c_attn output split into q | k | v; heads of n_embd /
n_head; scores / sqrt(head_dim); causal softmax; gelu_new; ln_f; logits
against wte) on the frames and prints the mean cross-entropy of the
targets.

usage: hf_gpt2.py CHECKPOINT_DIR FRAMES   (prints "loss X tokens N")
"""
import json
import math
import struct
import sys

F32 = 4


def fail(msg):
    sys.exit("hf_gpt2.py: " + msg)


def load_safetensors(path):
    data = open(path, "rb").read()
    if len(data) < 8:
        fail("%s: shorter than the 8-byte header size" % path)
    (n,) = struct.unpack_from("<Q", data, 0)
    if n > 100_000_000 or 8 + n > len(data):
        fail("%s: header size %d does not fit" % (path, n))
    header = data[8:8 + n].decode("utf-8")
    if not header.startswith("{"):
        fail("%s: header does not start with '{'" % path)
    h = json.loads(header)
    meta = h.pop("__metadata__", None)
    if not isinstance(meta, dict) or meta.get("format") not in ("pt", "tf", "flax", "mlx"):
        fail("%s: __metadata__ lacks format pt (transformers refuses such files)" % path)
    buf = memoryview(data)[8 + n:]
    end = 0
    tensors = {}
    for name, t in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"]):
        if t["dtype"] != "F32":
            fail("%s: %s is %s, not F32" % (path, name, t["dtype"]))
        a, b = t["data_offsets"]
        numel = math.prod(t["shape"])
        if a != end or b - a != numel * F32:
            fail("%s: %s: offsets [%d, %d) are not contiguous or do not match its shape"
                 % (path, name, a, b))
        end = b
        tensors[name] = (t["shape"], struct.unpack_from("<%df" % numel, buf, a))
    if end != len(buf):
        fail("%s: tensors cover %d of %d data bytes" % (path, end, len(buf)))
    return tensors


def expected_shapes(c):
    C, V, P = c["n_embd"], c["vocab_size"], c["n_positions"]
    e = {"transformer.wte.weight": [V, C], "transformer.wpe.weight": [P, C],
         "transformer.ln_f.weight": [C], "transformer.ln_f.bias": [C]}
    for i in range(c["n_layer"]):
        p = "transformer.h.%d." % i
        e.update({p + "ln_1.weight": [C], p + "ln_1.bias": [C],
                  p + "attn.c_attn.weight": [C, 3 * C], p + "attn.c_attn.bias": [3 * C],
                  p + "attn.c_proj.weight": [C, C], p + "attn.c_proj.bias": [C],
                  p + "ln_2.weight": [C], p + "ln_2.bias": [C],
                  p + "mlp.c_fc.weight": [C, 4 * C], p + "mlp.c_fc.bias": [4 * C],
                  p + "mlp.c_proj.weight": [4 * C, C], p + "mlp.c_proj.bias": [C]})
    return e


def rows(flat, r, c):
    return [flat[i * c:(i + 1) * c] for i in range(r)]


def conv1d(x, w, b):
    """HF Conv1D: x [N, in] @ w [in, out] + b [out]."""
    cols = list(zip(*w))
    return [[bj + sum(xi * wi for xi, wi in zip(xr, col)) for col, bj in zip(cols, b)]
            for xr in x]


def layernorm(x, w, b, eps):
    out = []
    for r in x:
        m = sum(r) / len(r)
        v = sum((a - m) ** 2 for a in r) / len(r)
        s = 1 / math.sqrt(v + eps)
        out.append([(a - m) * s * wi + bi for a, wi, bi in zip(r, w, b)])
    return out


def gelu_new(x):
    k = math.sqrt(2 / math.pi)
    return [[0.5 * a * (1 + math.tanh(k * (a + 0.044715 * a ** 3))) for a in r] for r in x]


def forward(c, W, seq):
    """Logits [T, V] for one sequence, as GPT2LMHeadModel computes them."""
    C, NH, T = c["n_embd"], c["n_head"], len(seq)
    hd, eps = C // NH, c["layer_norm_epsilon"]
    wte = rows(W["transformer.wte.weight"], c["vocab_size"], C)
    wpe = rows(W["transformer.wpe.weight"], c["n_positions"], C)
    x = [[a + b for a, b in zip(wte[tok], wpe[t])] for t, tok in enumerate(seq)]
    for i in range(c["n_layer"]):
        p = lambda k: W["transformer.h.%d.%s" % (i, k)]
        h = layernorm(x, p("ln_1.weight"), p("ln_1.bias"), eps)
        qkv = conv1d(h, rows(p("attn.c_attn.weight"), C, 3 * C), p("attn.c_attn.bias"))
        y = [[0.0] * C for _ in range(T)]
        for hh in range(NH):
            q = [r[hh * hd:(hh + 1) * hd] for r in qkv]
            k = [r[C + hh * hd:C + (hh + 1) * hd] for r in qkv]
            v = [r[2 * C + hh * hd:2 * C + (hh + 1) * hd] for r in qkv]
            for t in range(T):
                s = [sum(a * b for a, b in zip(q[t], k[j])) / math.sqrt(hd)
                     for j in range(t + 1)]
                m = max(s)
                e = [math.exp(a - m) for a in s]
                z = sum(e)
                for d in range(hd):
                    y[t][hh * hd + d] = sum(e[j] / z * v[j][d] for j in range(t + 1))
        a = conv1d(y, rows(p("attn.c_proj.weight"), C, C), p("attn.c_proj.bias"))
        x = [[u + w for u, w in zip(r1, r2)] for r1, r2 in zip(x, a)]
        h = layernorm(x, p("ln_2.weight"), p("ln_2.bias"), eps)
        h = gelu_new(conv1d(h, rows(p("mlp.c_fc.weight"), C, 4 * C), p("mlp.c_fc.bias")))
        m = conv1d(h, rows(p("mlp.c_proj.weight"), 4 * C, C), p("mlp.c_proj.bias"))
        x = [[u + w for u, w in zip(r1, r2)] for r1, r2 in zip(x, m)]
    x = layernorm(x, W["transformer.ln_f.weight"], W["transformer.ln_f.bias"], eps)
    return [[sum(a * b for a, b in zip(r, e)) for e in wte] for r in x]


def frames(path):
    data = open(path, "rb").read()
    off = 0
    while off + 64 <= len(data):
        dtype, flags, b, s = struct.unpack_from("<HHII", data, off + 8)
        (nbytes,) = struct.unpack_from("<Q", data, off + 40)
        off += 64
        if flags & 1:
            return
        fmt = "<%d%s" % (b * s, "H" if dtype == 1 else "I")
        tok = struct.unpack_from(fmt, data, off)
        off += nbytes
        for r in range(b):
            yield tok[r * s:(r + 1) * s]


def main():
    d, fr = sys.argv[1], sys.argv[2]
    c = json.load(open(d + "/config.json"))
    if c.get("model_type") != "gpt2" or c.get("activation_function") != "gelu_new":
        fail("config.json: not a gpt2 model with gelu_new")
    c.setdefault("layer_norm_epsilon", 1e-5)
    st = load_safetensors(d + "/model.safetensors")
    want = expected_shapes(c)
    extra = set(st) - set(want) - {"lm_head.weight"}
    missing = set(want) - set(st)
    if extra or missing:
        fail("state dict keys: unexpected %s, missing %s" % (sorted(extra), sorted(missing)))
    for k, shape in want.items():
        if st[k][0] != shape:
            fail("%s is %s, GPT2LMHeadModel expects %s" % (k, st[k][0], shape))
    W = {k: v[1] for k, v in st.items()}
    nll, n = 0.0, 0
    for rec in frames(fr):
        logits = forward(c, W, rec[:-1])
        for t, row in enumerate(logits):
            m = max(row)
            lse = m + math.log(sum(math.exp(a - m) for a in row))
            nll += lse - row[rec[t + 1]]
            n += 1
    print("loss %.7f tokens %d" % (nll / n, n))


main()
