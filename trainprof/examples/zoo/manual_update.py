"""Healthy control: a hand-written training loop, with neither torch.optim nor a DataLoader.

The way a from-scratch tutorial trains: batches sliced from tensors in memory, ``loss.backward()``
and a manual SGD update with momentum under ``torch.no_grad()``. trainprof sees no optimizer
step and no DataLoader batch, so it counts each ``backward()`` as the step, and judges the job
on those: it should report no warning.
"""

from __future__ import annotations

import torch
from torch import nn

STEPS = 600
BATCH = 128
LR, MOMENTUM = 0.05, 0.9


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x = torch.randn(16_384, 256)
    y = (x[:, :10] * 3).argmax(1)  # a learnable target
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))  # fmt: skip
    velocity = [torch.zeros_like(p) for p in model.parameters()]
    for step in range(STEPS):
        i = (step * BATCH) % (len(x) - BATCH)
        loss = nn.functional.cross_entropy(model(x[i : i + BATCH]), y[i : i + BATCH])
        loss.backward()
        with torch.no_grad():
            for p, v in zip(model.parameters(), velocity, strict=True):
                v.mul_(MOMENTUM).add_(p.grad)
                p.sub_(LR * v)
                p.grad = None
        if step % 500 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
