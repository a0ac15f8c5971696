"""Subprocess per step: the loop asks ``ps`` for its own memory after every optimizer step.

A tabular regression job tracks its resident memory in the step's metrics by running
``ps -o rss= -p <pid>`` through ``subprocess.run`` after every step. Each call forks, execs
``ps`` and waits for it to exit: the main thread sits off the CPU in ``subprocess`` for about
as long as the step itself, every step.

Fix: read the number without a child process (``/proc/self/statm``, ``resource.getrusage``,
``psutil.Process().memory_info()``), or sample it every N steps, or in a background thread.
"""

from __future__ import annotations

import os
import subprocess

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def resident_mb() -> float:
    out = subprocess.run(
        ["ps", "-o", "rss=", "-p", str(os.getpid())], capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip() or 0) / 1024


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    n = 12_288
    x = torch.randn(n, 24)
    y = x[:, :4].sum(dim=1, keepdim=True) + 0.1 * torch.randn(n, 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, drop_last=True)
    model = nn.Sequential(
        nn.Linear(24, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    history: list[tuple[float, float]] = []
    for epoch in range(2):
        for step, (inputs, target) in enumerate(loader):
            loss = nn.functional.mse_loss(model(inputs), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            history.append((loss.item(), resident_mb()))
            if step % 50 == 0:
                print(
                    f"epoch {epoch} step {step}: loss {history[-1][0]:.4f} rss {history[-1][1]:.0f} MB"
                )


if __name__ == "__main__":
    main()
