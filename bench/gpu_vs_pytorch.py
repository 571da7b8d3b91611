"""swarmrt's gpt2-small preset written as a plain PyTorch training loop, the yardstick of
bench/gpu_vs_pytorch.sh: the same model (12 layers, 12 heads, d 768, context 1024, byte
vocabulary 256, GELU MLP, untied head), bf16 autocast with the loss in float32, fused AdamW
(weight decay 0.1 on matrices), gradient clip 1.0, 16,384 tokens a step. Tokens are drawn on
the GPU: nothing is loaded, the loop is the ceiling a data pipeline can only lower.

Usage: python3 gpu_vs_pytorch.py VARIANT MICRO_BATCHES MICRO_BATCH STEPS
  VARIANT: sdpa (scaled_dot_product_attention), math (the [T, T] scores, masked, softmax:
  swarmrt's attention before LibTorch 2), compile (sdpa under torch.compile).
Prints one line of JSON: tokens/s (median step after the 5th), how long the host took to queue
a step (launch_s, the median) beside the step (step_s), peak memory allocated and
reserved by PyTorch's allocator, parameters, TFLOP/s (nanoGPT's 6N + 12 L T d per token)."""
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

V, T, L, H, D = 256, 1024, 12, 12, 768


class Block(nn.Module):
    def __init__(self, math_attention):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.c_attn, self.attn_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.c_fc, self.mlp_proj = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.math_attention = math_attention
        self.register_buffer("future", torch.ones(T, T, dtype=torch.bool).triu(1), persistent=False)

    def attention(self, x):
        B, t, C = x.shape
        q, k, v = self.c_attn(x).split(C, 2)
        q, k, v = (z.view(B, t, H, C // H).transpose(1, 2) for z in (q, k, v))
        if self.math_attention:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
            y = F.softmax(att.masked_fill(self.future[:t, :t], float("-inf")), -1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.attn_proj(y.transpose(1, 2).contiguous().view(B, t, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, math_attention):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.h = nn.ModuleList(Block(math_attention) for _ in range(L))
        self.ln_f, self.lm_head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def main():
    variant, micro, mb, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.manual_seed(0)
    model = GPT(variant == "math").cuda()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), fused=True)
    forward = torch.compile(model) if variant == "compile" else model
    times, launches = [], []
    for _ in range(steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(micro):
            x = torch.randint(0, V, (mb, T), device="cuda")
            y = torch.randint(0, V, (mb, T), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = forward(x)
            (F.cross_entropy(logits.float().view(-1, V), y.view(-1)) / micro).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        launches.append(time.perf_counter() - start)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    n = sum(p.numel() for p in model.parameters())
    tokens, median = micro * mb * T, statistics.median(times[5:])
    print(json.dumps({"variant": variant, "micro_batches": micro, "micro_batch": mb,
                      "tokens_per_s": tokens / median, "params": n,
                      "step_s": median, "launch_s": statistics.median(launches[5:]),
                      "tflops": (6 * n + 12 * L * T * D) * tokens / median / 1e12,
                      "peak_allocated_mib": torch.cuda.max_memory_allocated() / 2**20,
                      "peak_reserved_mib": torch.cuda.max_memory_reserved() / 2**20,
                      "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}), flush=True)


if __name__ == "__main__":
    main()
