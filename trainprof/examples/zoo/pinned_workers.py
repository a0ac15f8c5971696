"""CPU-starved: a job pinned to one CPU that sizes its DataLoader workers to the host's cores.

A launch script pins the job to one CPU (``taskset -c 0``, a cpuset, advice for a shared
machine), and the training script sizes its workers as most do, from ``os.cpu_count()``: the
host's count, not the one CPU it may use. A worker then shares that CPU with the training
loop's thread: the worker keeps ahead (the loop hardly waits for data), but each batch it makes
takes the CPU from the loop, whose thread is ready to run and waits. Judged on the host's CPUs
the job looks fine (one worker for two CPUs); judged on its own one, it runs two busy threads.

The script pins itself to the first CPU it may use before torch starts (as ``taskset`` would);
``ZOO_WORKERS=<n>`` sets num_workers (0: the fix), ``ZOO_STEPS`` the steps.

Fix: size from the CPUs the job may use, ``len(os.sched_getaffinity(0))``: here num_workers=0.
Measured on 2 CPUs, busy with other work (load average 10), the whole script for 600 steps,
alternated: num_workers=1 38.4 s and 40.0 s, num_workers=0 35.9 s and 28.9 s.
"""

from __future__ import annotations

import os

os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the launch script's taskset -c

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402


class Features(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Tabular rows with a cheap per-row transform: a worker makes batches faster than the
    loop uses them."""

    def __init__(self, n: int = 8192) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 128, generator=g)
        self.y = (self.x[:, :4].sum(dim=1) > 0).long()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        row = self.x[i]
        return (row - row.mean()) / (row.std() + 1e-6), self.y[i]


def main() -> None:
    torch.manual_seed(0)
    workers = int(os.environ.get("ZOO_WORKERS", (os.cpu_count() or 2) - 1))  # the host's count
    loader = DataLoader(Features(), batch_size=64, shuffle=True, num_workers=workers)
    model = nn.Sequential(
        nn.Linear(128, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 2)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    steps = int(os.environ.get("ZOO_STEPS", "300"))
    step = 0
    while step < steps:
        for x, y in loader:
            loss = criterion(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            if step % 100 == 0:
                print(f"step {step}: loss {loss.item():.4f}")
            if step >= steps:
                break


if __name__ == "__main__":
    main()
