#!/usr/bin/python3
"""PyTorch reference for tests/bench/train.sh: the same GPT-2 model as
loom-train (fp32, tied LM head, pre-LN, GELU tanh, learned positions),
AdamW, torch.set_num_threads(THREADS).  Prints "tokens_per_s X".
With PRECISION bf16 the forward runs under CPU autocast to bfloat16 (what
PyTorch users do for bf16 on CPU).
usage: train_torch.py B T STEPS THREADS [fp32|bf16]"""
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

B, T, STEPS, THREADS = (int(x) for x in sys.argv[1:5])
BF16 = len(sys.argv) > 5 and sys.argv[5] == "bf16"
L, C, NH, V, P = 12, 768, 12, 50257, 1024
torch.set_num_threads(THREADS)
torch.manual_seed(1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj2 = nn.Linear(4 * C, C)
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

    def forward(self, x):
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, NH, C // NH).transpose(1, 2)
        k = k.view(B, T, NH, C // NH).transpose(1, 2)
        v = v.view(B, T, NH, C // NH).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // NH))
        att = att.masked_fill(~self.mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.c_proj(y)
        return x + self.c_proj2(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(P, C)
        self.h = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))


model = GPT()
for name, p in model.named_parameters():  # GPT-2 initialisation
    if p.dim() == 2:
        nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L) if "c_proj" in name else 0.02)
    elif "ln" in name and name.endswith("weight"):
        nn.init.ones_(p)
    else:
        nn.init.zeros_(p)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
g = torch.Generator().manual_seed(1)
times = []
for step in range(STEPS):
    idx = torch.randint(0, V, (B, T), generator=g)
    tg = torch.randint(0, V, (B, T), generator=g)
    t0 = time.time()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=BF16):
        loss = model(idx, tg)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    times.append(time.time() - t0)
    print("step %d loss %.4f %.2f s" % (step + 1, loss.item(), times[-1]), file=sys.stderr)
timed = times[1:] if len(times) > 1 else times
print("tokens_per_s %.3f" % (B * T / min(timed)))  # best timed step
