"""Crash: an uncaught ``ValueError`` in the training loop's own code, mid-run.

A forecasting job computes a learning-rate warm-up factor from ``math.log`` of a ratio that
reaches 0 at the step where the warm-up ends: ``ValueError: math domain error``, no known
signature. The exception, the user's line that raised it and the exit code come first.

Fix: guard the schedule's edge (``max(ratio, 1e-8)``), or use a scheduler of
``torch.optim.lr_scheduler`` (``LinearLR``, ``OneCycleLR``).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

WARMUP = 60


def warmup_factor(step: int) -> float:
    ratio = (WARMUP - step) / WARMUP
    return 1.0 - math.log(ratio) / math.log(1e-3) if step else 0.01


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    series = torch.randn(4096, 48).cumsum(dim=1)
    x, y = series[:, :36], series[:, 36:]
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(36, 96), nn.Tanh(), nn.Linear(96, 12))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step, (inputs, target) in enumerate(loader):
        for group in optimizer.param_groups:
            group["lr"] = 1e-3 * warmup_factor(step)
        loss = nn.functional.mse_loss(model(inputs), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
