"""Loop with a SystemMonitor that shells out (an nvidia-smi-like query) every 4 steps.

Expert diagnosis: every 4 steps the loop blocks while `SystemMonitor.query_device_stats()` runs
`subprocess.run([...])` and waits for the child to start, answer and exit; the training process
sits idle meanwhile. Real `nvidia-smi` or `git rev-parse` calls cost the same kind of wait.
Fix: query once at start-up (the git revision never changes), or every few hundred steps, or
from a background thread; for GPU stats read NVML in-process (`pynvml`).

Measured (median of 3 wall times, start-up included, OMP_NUM_THREADS=1 on a shared 2-core
machine): plain 4.3 s, fixed 2.7 s: the mistake costs 37 % of the wall time.
"""

from __future__ import annotations

import subprocess
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FIXED = "--fixed" in sys.argv


class SystemMonitor:
    def __init__(self, every: int) -> None:
        self.every = every
        self.samples: list[dict[str, float]] = []

    def query_device_stats(self) -> dict[str, float]:
        # stands in for `nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv`
        out = subprocess.run(
            [sys.executable, "-c", "print('37, 1024')"], capture_output=True, text=True, check=True
        )
        util, mem = (float(v) for v in out.stdout.split(","))
        return {"util": util, "mem": mem, "t": time.time()}

    def maybe_sample(self, step: int) -> None:
        if step % self.every == 0:
            self.samples.append(self.query_device_stats())


def train(model: nn.Module, loader: DataLoader, monitor: SystemMonitor, epochs: int) -> None:
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = 0
    for epoch in range(epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            monitor.maybe_sample(step)
        print(
            f"epoch {epoch} loss {loss.item():.4f} ({len(monitor.samples)} monitor samples)",
            flush=True,
        )


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(6144, 32)
    y = torch.sin(x[:, :8]).sum(1, keepdim=True)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = nn.Sequential(
        nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 1)
    )
    monitor = SystemMonitor(every=400 if FIXED else 4)
    train(model, loader, monitor, epochs=3)


if __name__ == "__main__":
    main()
