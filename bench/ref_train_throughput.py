"""The tiny model trained the way the DiLoCo-SWARM reference implementation trains it
(mikasenghaas/diloco-swarm, src/model.py and src/train.py, a nanoGPT-style loop), written
here from its published choices so that bench/train_throughput.sh can time it beside swarmrt:

- the token embedding and the head share one matrix (weight tying);
- the causal mask is a float buffer compared with 0 in every forward; dropout modules with p = 0;
- LayerNorm through F.layer_norm with explicit weight and bias; exact GELU;
- AdamW with torch's defaults (betas 0.9/0.999, weight decay 0.01 on every parameter), lr 1e-3;
- 16 sequences per step as 2 micro-batches of 8, the loss divided by 2, gradient clipping at 1.
Torch 1.13 has no scaled_dot_product_attention, so the reference's fallback path is its path.
THREADS go to OpenBLAS (OPENBLAS_NUM_THREADS, set by the caller) and torch's pool keeps one.

Usage: python3 ref_train_throughput.py DATA STEPS WARMUP THREADS
Prints one line of JSON."""
import json
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from train_step import make_step, seconds_for

N_LAYER, N_HEAD, N_EMBD, BLOCK, VOCAB = 4, 4, 128, 128, 256
MICRO_BATCH, MICRO_BATCHES = 8, 2


class LayerNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
        self.c_proj = nn.Linear(N_EMBD, N_EMBD)
        self.attn_dropout, self.resid_dropout = nn.Dropout(0.0), nn.Dropout(0.0)
        self.register_buffer("bias", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

    def forward(self, x):
        B, T, C = x.size()
        heads = lambda t: t.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
        q, k, v = map(heads, self.c_attn(x).split(N_EMBD, dim=2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        y = self.attn_dropout(F.softmax(att, dim=-1)) @ v
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = LayerNorm(N_EMBD), Attention(), LayerNorm(N_EMBD)
        self.c_fc, self.c_proj = nn.Linear(N_EMBD, 4 * N_EMBD), nn.Linear(4 * N_EMBD, N_EMBD)
        self.gelu, self.dropout = nn.GELU(), nn.Dropout(0.0)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.dropout(self.c_proj(self.gelu(self.c_fc(self.ln_2(x)))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, N_EMBD), nn.Embedding(BLOCK, N_EMBD)
        self.drop = nn.Dropout(0.0)
        self.h = nn.ModuleList([Block() for _ in range(N_LAYER)])
        self.ln_f = LayerNorm(N_EMBD)
        self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False)
        self.wte.weight = self.lm_head.weight  # tied
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * N_LAYER))
            elif p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias") and not name.startswith("ln"):
                nn.init.zeros_(p)

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def main():
    path, steps, warmup, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(1)
    torch.manual_seed(1337)
    data = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.uint8).long()
    model = GPT()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)

    step = make_step(model, opt, data, BLOCK, MICRO_BATCHES, MICRO_BATCH, VOCAB, gen)
    secs = seconds_for(step, warmup, steps)
    tokens = MICRO_BATCHES * MICRO_BATCH * BLOCK
    print(json.dumps({"impl": "reference-loop", "torch": torch.__version__, "threads": threads,
                      "steps": steps, "tokens_per_step": tokens, "seconds": secs,
                      "tokens_per_s": steps * tokens / secs}))


if __name__ == "__main__":
    main()
