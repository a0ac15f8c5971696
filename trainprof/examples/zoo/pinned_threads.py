"""CPU-starved: a job pinned to one CPU that sizes torch's threads to the host's cores.

A launch script pins the job to one CPU (``taskset -c 0``, a cpuset, advice for a shared
machine), and the training script asks torch for a thread per core, as many do to "use every
core": ``torch.set_num_threads(os.cpu_count())``, the host's count, not the one CPU it may use.
The intra-op threads then take turns on that CPU: at every matmul the training loop's thread,
one of them, is ready to run and waits for it. Judged on the host's CPUs the job looks fine (2
threads for 2 CPUs); judged on its own one, it runs twice the threads it has CPUs.

The script pins itself to the first CPU it may use (as ``taskset`` would); ``ZOO_THREADS=<n>``
sets the threads (1: the fix), ``ZOO_SECONDS`` how long it trains.

Fix: size from the CPUs the job may use, ``len(os.sched_getaffinity(0))``: here
``torch.set_num_threads(1)``. Measured on 2 CPUs busy with other work (load average 11),
alternated, 4 s each: 2 threads 1.7 and 2.0 steps/s, 1 thread 105 and 145 steps/s (each thread
spins at OpenMP's barrier while the other waits for the CPU).
"""

from __future__ import annotations

import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the launch script's taskset -c
    torch.set_num_threads(int(os.environ.get("ZOO_THREADS", os.cpu_count() or 2)))  # the host's
    torch.manual_seed(0)
    x = torch.randn(8192, 256)
    y = (x[:, :4].sum(dim=1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=128, shuffle=True, drop_last=True)
    model = nn.Sequential(
        nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 2)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    start = time.monotonic()
    step = 0
    while time.monotonic() - start < seconds:
        for xb, yb in loader:
            loss = criterion(model(xb), yb)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            if time.monotonic() - start >= seconds:
                break
        print(f"{step} steps: loss {loss.item():.4f}")
    print(f"{step / (time.monotonic() - start):.1f} steps/s")


if __name__ == "__main__":
    main()
