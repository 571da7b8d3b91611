"""The tiny GPT written in Python PyTorch, timed the way bench_train_throughput times swarmrt:
same architecture, batch, optimizer and clipping, on the same bytes.
Usage: python3 py_train_throughput.py DATA STEPS WARMUP THREADS N_LAYER N_HEAD N_EMBD BLOCK MICRO_BATCH
                                     [MICRO_BATCHES] [LR]
THREADS go to OpenBLAS (set OPENBLAS_NUM_THREADS before starting Python) and torch's own pool
keeps one, the layout swarmrt uses (model/threads.cpp says why). Prints one line of JSON."""
import json
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from train_step import make_step, seconds_for


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("mask", torch.ones(block, block, dtype=torch.bool).tril())

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block):
        super().__init__()
        self.wte = nn.Embedding(256, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head, block) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, 256, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def main():
    path, steps, warmup, threads, n_layer, n_head, n_embd, block, mb = sys.argv[1:10]
    n_mb = int(sys.argv[10]) if len(sys.argv) > 10 else 1
    lr = float(sys.argv[11]) if len(sys.argv) > 11 else 4e-4
    steps, warmup, threads = int(steps), int(warmup), int(threads)
    n_layer, n_head, n_embd, block, mb = map(int, (n_layer, n_head, n_embd, block, mb))
    torch.set_num_threads(1)
    torch.manual_seed(1337)
    data = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.uint8).long()
    model = GPT(n_layer, n_head, n_embd, block)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(1)

    step = make_step(model, opt, data, block, n_mb, mb, 256, gen, set_to_none=False)
    secs = seconds_for(step, warmup, steps)
    print(json.dumps({"impl": "python-pytorch", "torch": torch.__version__, "threads": threads,
                      "steps": steps, "tokens_per_step": n_mb * mb * block, "seconds": secs,
                      "tokens_per_s": steps * n_mb * mb * block / secs}))


if __name__ == "__main__":
    main()
