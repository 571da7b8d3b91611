"""The training step the Python throughput references share, and its timing: `n_mb`
micro-batches of `mb` random windows of `block` tokens, cross-entropy over `vocab`, the
gradient clipped at norm 1.0, one optimizer step."""
import time

import torch
import torch.nn.functional as F


def make_step(model, opt, data, block, n_mb, mb, vocab, gen, set_to_none=True):
    def step():
        opt.zero_grad(set_to_none=set_to_none)
        for _ in range(n_mb):
            ix = torch.randint(0, (len(data) - 1) // block, (mb,), generator=gen) * block
            x = torch.stack([data[i:i + block] for i in ix])
            y = torch.stack([data[i + 1:i + 1 + block] for i in ix])
            loss = F.cross_entropy(model(x).view(-1, vocab), y.view(-1)) / n_mb
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return step


def seconds_for(step, warmup, steps):
    """Wall-clock seconds of `steps` steps after `warmup` untimed ones."""
    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - start
