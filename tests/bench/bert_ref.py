"""BERT in plain torch, from transformers' modeling_bert.py equations
(BertEmbeddings, BertSelfAttention with the additive padding mask,
BertSelfOutput, BertIntermediate with GELU erf, BertOutput, the qa_outputs
head); the transformers package is not needed.

bert_ref.py check DIR LOGITS.json: a float64 forward of the HuggingFace
BERT question-answering checkpoint in DIR (config.json, model.safetensors)
compared with the logits loom printed (tests/bench/bert_ref.c); prints the
largest absolute differences (tests/bench/bert-ref.sh).

bert_ref.py step PRESET B T STEPS: times fp32 training steps of the same
model (dropout 0.1, QA loss, AdamW with decay off for LayerNorms and
biases) on torch's threads (tests/bench/bert-step.sh); prints the best and
median step in ms.

bert_ref.py predict DIR FEATURES.jsonl MODE THREADS: times fp32 inference
of the checkpoint in DIR on SQuAD features (loom-cat's JSON lines of
loom-squad prepare's records) with torch's own fused ops (F.linear,
F.layer_norm, F.gelu), as a PyTorch user predicts: MODE "padded" runs
batches of 8 features padded to their --seq (run_squad.py's
predict_batch_size), "real" one feature at a time cut to its real length
(dynamic padding); prints features_per_s (tests/bench/squad-varlen.sh)."""
import json
import math
import statistics
import struct
import sys
import time

import torch
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "F64": torch.float64, "BF16": torch.bfloat16, "F16": torch.float16}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        buf = bytearray(data[base + a:base + b])
        x = torch.frombuffer(buf, dtype=DTYPES[t["dtype"]]) if buf else torch.zeros(0)
        out[name] = x.reshape(t["shape"]).to(torch.float64)
    return out


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def linear(x, w, b):  # nn.Linear: w [out, in]
    return x @ w.T + b


def gelu(x):  # ACT2FN["gelu"]: the exact erf form
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def forward(cfg, W, ids, seg, mask, pdrop=0.0):
    def drop(t):
        return F.dropout(t, pdrop, training=True) if pdrop > 0 else t

    B, T = ids.shape
    C, NH, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    hs = C // NH
    e = "bert.embeddings."
    x = (W[e + "word_embeddings.weight"][ids] + W[e + "token_type_embeddings.weight"][seg]
         + W[e + "position_embeddings.weight"][torch.arange(T)][None])
    h = drop(layer_norm(x, W[e + "LayerNorm.weight"], W[e + "LayerNorm.bias"], eps))
    # get_extended_attention_mask: (1 - mask) * finfo.min, added to the scores
    dt = h.dtype
    ext = (1.0 - mask.to(dt))[:, None, None, :] * torch.finfo(dt).min
    for i in range(cfg["num_hidden_layers"]):
        p = "bert.encoder.layer.%d." % i

        def heads(t):
            return t.view(B, T, NH, hs).transpose(1, 2)

        q = heads(linear(h, W[p + "attention.self.query.weight"], W[p + "attention.self.query.bias"]))
        k = heads(linear(h, W[p + "attention.self.key.weight"], W[p + "attention.self.key.bias"]))
        v = heads(linear(h, W[p + "attention.self.value.weight"], W[p + "attention.self.value.bias"]))
        scores = q @ k.transpose(-1, -2) / math.sqrt(hs) + ext
        ctx = (drop(torch.softmax(scores, dim=-1)) @ v).transpose(1, 2).reshape(B, T, C)
        a = layer_norm(drop(linear(ctx, W[p + "attention.output.dense.weight"],
                                   W[p + "attention.output.dense.bias"])) + h,
                       W[p + "attention.output.LayerNorm.weight"],
                       W[p + "attention.output.LayerNorm.bias"], eps)
        inter = gelu(linear(a, W[p + "intermediate.dense.weight"], W[p + "intermediate.dense.bias"]))
        h = layer_norm(drop(linear(inter, W[p + "output.dense.weight"], W[p + "output.dense.bias"])) + a,
                       W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"], eps)
    logits = linear(h, W["qa_outputs.weight"], W["qa_outputs.bias"])
    return logits[..., 0], logits[..., 1]


def check(d, lp):
    with open(d + "/config.json") as f:
        cfg = json.load(f)
    assert cfg["architectures"] == ["BertForQuestionAnswering"] and cfg["hidden_act"] == "gelu"
    W = load_safetensors(d + "/model.safetensors")
    with open(lp) as f:
        got = json.load(f)
    B, T = got["B"], got["T"]

    def arr(k, dt):
        return torch.tensor(got[k], dtype=dt).view(B, T)

    ids, seg, mask = arr("input_ids", torch.long), arr("segment_ids", torch.long), arr("input_mask", torch.long)
    with torch.no_grad():
        s, e = forward(cfg, W, ids, seg, mask)
    ds = (s - arr("start_logits", torch.float64)).abs()
    de = (e - arr("end_logits", torch.float64)).abs()
    real = mask.bool()
    print("max_abs_diff %.3g real_positions %.3g logit_scale %.3g params %d" % (
        max(ds.max().item(), de.max().item()),
        max(ds[real].max().item(), de[real].max().item()),
        s.abs().max().item(), sum(t.numel() for t in W.values())))


PRESETS = {"bert-tiny": (2, 128, 2), "bert-base": (12, 768, 12), "bert-large": (24, 1024, 16)}


def step(preset, B, T, steps):
    L, C, NH = PRESETS[preset]
    cfg = {"hidden_size": C, "num_attention_heads": NH, "num_hidden_layers": L,
           "layer_norm_eps": 1e-12}
    V, P, I = 30522, 512, 4 * C
    shapes = {"bert.embeddings.word_embeddings.weight": (V, C),
              "bert.embeddings.position_embeddings.weight": (P, C),
              "bert.embeddings.token_type_embeddings.weight": (2, C),
              "bert.embeddings.LayerNorm.weight": (C,), "bert.embeddings.LayerNorm.bias": (C,),
              "qa_outputs.weight": (2, C), "qa_outputs.bias": (2,)}
    for i in range(L):
        p = "bert.encoder.layer.%d." % i
        for n in ("query", "key", "value"):
            shapes[p + "attention.self.%s.weight" % n] = (C, C)
            shapes[p + "attention.self.%s.bias" % n] = (C,)
        for n, o, k in (("attention.output", C, C), ("intermediate", I, C), ("output", C, I)):
            shapes[p + n + ".dense.weight"] = (o, k)
            shapes[p + n + ".dense.bias"] = (o,)
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[p + n + ".weight"] = (C,)
            shapes[p + n + ".bias"] = (C,)
    W = {}
    for n, s in shapes.items():
        t = torch.empty(s)
        if len(s) == 2:
            torch.nn.init.normal_(t, 0, 0.02)
        else:
            t.fill_(1.0 if "LayerNorm.weight" in n else 0.0)
        W[n] = t.requires_grad_()
    decay = [t for n, t in W.items() if "bias" not in n and "LayerNorm" not in n]
    rest = [t for n, t in W.items() if "bias" in n or "LayerNorm" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": rest, "weight_decay": 0.0}], lr=1e-5, eps=1e-6)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, V, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[3::4, 3 * T // 4:] = 0
    seg = (torch.arange(T)[None] >= T // 4).long() * mask
    sp = torch.full((B,), T // 2)
    ep = sp + 3
    times = []
    for s in range(steps + 1):
        t0 = time.perf_counter()
        st, en = forward(cfg, W, ids, seg, mask, 0.1)
        loss = (F.cross_entropy(st, sp) + F.cross_entropy(en, ep)) / 2
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(W.values()), 1.0)
        opt.step()
        if s:
            times.append((time.perf_counter() - t0) * 1e3)
    print("best_ms %.1f median_ms %.1f tokens_per_s %.1f" % (
        min(times), statistics.median(times), B * T / (min(times) * 1e-3)))


def fast_forward(cfg, W, ids, seg, mask):
    B, T = ids.shape
    C, NH, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    hs = C // NH
    e = "bert.embeddings."
    x = (W[e + "word_embeddings.weight"][ids] + W[e + "token_type_embeddings.weight"][seg]
         + W[e + "position_embeddings.weight"][:T][None])
    h = F.layer_norm(x, (C,), W[e + "LayerNorm.weight"], W[e + "LayerNorm.bias"], eps)
    ext = (1.0 - mask.float())[:, None, None, :] * torch.finfo(torch.float32).min
    for i in range(cfg["num_hidden_layers"]):
        p = "bert.encoder.layer.%d." % i

        def proj(t, n):
            return F.linear(t, W[p + n + ".weight"], W[p + n + ".bias"])

        def heads(t):
            return t.view(B, T, NH, hs).transpose(1, 2)

        q, k, v = (heads(proj(h, "attention.self." + n)) for n in ("query", "key", "value"))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hs) + ext, dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(B, T, C)
        a = F.layer_norm(proj(ctx, "attention.output.dense") + h, (C,),
                         W[p + "attention.output.LayerNorm.weight"],
                         W[p + "attention.output.LayerNorm.bias"], eps)
        h = F.layer_norm(proj(F.gelu(proj(a, "intermediate.dense")), "output.dense") + a, (C,),
                         W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"], eps)
    return F.linear(h, W["qa_outputs.weight"], W["qa_outputs.bias"])


def predict(d, features, mode):
    with open(d + "/config.json") as f:
        cfg = json.load(f)
    W = {k: v.float() for k, v in load_safetensors(d + "/model.safetensors").items()}
    W = {k[5:] if k.startswith("bert.bert.") else k: v for k, v in W.items()}
    feats = [json.loads(l) for l in open(features)]
    t0 = time.perf_counter()
    with torch.no_grad():
        if mode == "padded":
            for i in range(0, len(feats), 8):
                fs = feats[i:i + 8]
                def col(k):
                    return torch.tensor([f[k] for f in fs], dtype=torch.long)
                fast_forward(cfg, W, col("input_ids"), col("segment_ids"), col("input_mask"))
        else:
            for f in feats:
                n = sum(f["input_mask"])
                def col(k):
                    return torch.tensor([f[k][:n]], dtype=torch.long)
                fast_forward(cfg, W, col("input_ids"), col("segment_ids"), col("input_mask"))
    s = time.perf_counter() - t0
    print("features %d seconds %.2f features_per_s %.3f" % (len(feats), s, len(feats) / s))


if sys.argv[1] == "check":
    check(sys.argv[2], sys.argv[3])
elif sys.argv[1] == "predict":
    torch.set_num_threads(int(sys.argv[5]))
    predict(sys.argv[2], sys.argv[3], sys.argv[4])
else:
    torch.set_num_threads(int(sys.argv[6]) if len(sys.argv) > 6 else 2)
    step(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
