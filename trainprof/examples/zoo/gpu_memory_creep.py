"""GPU-only: loss tensors kept with their autograd graphs, step after step, until CUDA OOM.

The pattern: the loop keeps a history of losses as tensors, ``losses.append(loss)`` instead of
``loss.item()``, and also tracks a "running validation loss" on a fixed held-out batch, in
train code, without ``torch.no_grad()``. The training loss's graph is freed by its backward,
so that list costs little; the validation loss is never backpropagated, so each one keeps its
whole graph alive, with every activation the forward saved for a backward that never comes:
allocated GPU memory rises by a few MB every step, steadily, until the job dies with CUDA out
of memory hours later. The step itself is healthy (bf16 autocast, data already on the GPU,
the GPU busy).

Fix: store numbers, not tensors (``loss.item()`` when logging, or ``loss.detach()``), and
evaluate under ``torch.no_grad()`` (or ``torch.inference_mode()``).
``torch.cuda.memory._record_memory_history()`` for a few steps shows what holds the memory.
Needs CUDA: trainprof's GPU tests run it on a lent GPU machine.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

ROWS = 65536
FEATURES = 1024
WIDTH = 8192
BATCH = 2048
VAL_BATCH = 32
STEPS = 480
CLASSES = 10


def main() -> None:
    device = torch.device("cuda")
    torch.manual_seed(0)
    g = torch.Generator(device=device).manual_seed(0)
    features = torch.randn(ROWS, FEATURES, device=device, generator=g)  # preloaded, 256 MB
    labels = torch.randint(0, CLASSES, (ROWS,), device=device, generator=g)
    x_val, y_val = features[:VAL_BATCH].clone(), labels[:VAL_BATCH].clone()
    loader = DataLoader(
        range(ROWS),
        batch_size=BATCH,
        shuffle=True,
        drop_last=True,
        pin_memory=True,
        generator=torch.Generator().manual_seed(0),
    )
    model = nn.Sequential(
        nn.Linear(FEATURES, WIDTH), nn.GELU(),
        nn.Linear(WIDTH, WIDTH), nn.GELU(),
        nn.Linear(WIDTH, WIDTH), nn.GELU(),
        nn.Linear(WIDTH, CLASSES),
    ).to(device)  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    losses: list[torch.Tensor] = []
    val_losses: list[torch.Tensor] = []
    step = 0
    while step < STEPS:
        for idx in loader:
            idx = idx.to(device, non_blocking=True)
            x, y = features[idx], labels[idx]
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss)  # a tensor, not loss.item()
            val_losses.append(F.cross_entropy(model(x_val), y_val))  # keeps its whole graph
            step += 1
            if step == STEPS:
                break
    mb = torch.cuda.memory_allocated() / 2**20
    print(f"{step} steps: last loss {losses[-1].item():.4f}, val {val_losses[-1].item():.4f}, "
          f"{mb:.0f} MiB allocated")  # fmt: skip


if __name__ == "__main__":
    main()
