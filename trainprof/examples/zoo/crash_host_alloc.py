"""Crash: a host allocation the machine refuses, from a shape bug that training never showed.

A tabular regression model outputs ``(batch, 1)`` while the targets are ``(batch,)``, and the
loss is written by hand as ``((pred - target) ** 2).mean()``. Broadcasting makes that a
``(batch, batch)`` matrix: at a batch of 256 it is 256 KiB, the loss is quietly wrong, and
training runs. The validation after the epoch scores the whole held-out set in one call, and
the same line then asks for ``N x N`` floats: 233 TiB for 8 million rows, more address space
than a process has, so the allocator is refused at once on any machine (``DefaultCPUAllocator:
can't allocate memory: you tried to allocate ... bytes``), whatever its overcommit setting.

Fix: make the shapes match (``pred.squeeze(1)``, or ``nn.functional.mse_loss``, which warns
about the broadcast), and score large sets in batches rather than in one call.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 4
TRAIN_ROWS = 8_192
VAL_ROWS = 8_000_000  # (8e6)^2 float32 = 233 TiB: beyond a 47-bit user address space


def squared_error(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((pred - target) ** 2).mean()  # pred (N, 1) - target (N,) broadcasts to (N, N)


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    weights = torch.randn(FEATURES)
    x = torch.randn(TRAIN_ROWS, FEATURES)
    loader = DataLoader(TensorDataset(x, x @ weights), batch_size=256, shuffle=True)
    model = nn.Sequential(nn.Linear(FEATURES, 8), nn.ReLU(), nn.Linear(8, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step, (features, target) in enumerate(loader):
        loss = squared_error(model(features), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 8 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    x_val = torch.randn(VAL_ROWS, FEATURES)
    with torch.no_grad():
        val_loss = squared_error(model(x_val), x_val @ weights)
    print(f"validation loss {val_loss.item():.3f}")


if __name__ == "__main__":
    main()
