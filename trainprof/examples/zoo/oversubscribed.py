"""CPU-starved: torch's intra-op threads sized for more cores than the job may use.

A CPU training job (an MLP over tabular features) in a container whose CPU quota is a fraction
of the host: ``os.cpu_count()`` and ``torch.get_num_threads()`` report the host's cores, so torch
starts a thread per host core for every matmul, and the threads take the job's CPUs from each
other (and, under a quota, use it up early in each 100 ms period and wait out the rest). The
training loop's own thread, one of them, is ready to run and waits for a CPU.

The script stands in for the host's cores by asking for four times the CPUs it may use (as
``hang_fd_limit`` lowers its own open-files limit); ``ZOO_THREADS=<n>`` sets the count, the fix
being the usable CPUs (``torch.set_num_threads(len(os.sched_getaffinity(0)))``). Measured on 2
CPUs: 8 threads 66 it/s, 2 threads 77 it/s, the main thread waiting for a CPU 36 % and 0 % of
the time.

Fix: size torch's threads to the CPUs the job may use (the quota, the affinity), not the
host's cores: ``torch.set_num_threads(n)`` or ``OMP_NUM_THREADS=n``, fewer for each busy
DataLoader worker.
"""

from __future__ import annotations

import os

import torch
from torch import nn


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main() -> None:
    threads = int(os.environ.get("ZOO_THREADS", 4 * usable_cpus()))  # the host's cores, seen
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 512), torch.randint(0, 10, (256,))
    for step in range(int(os.environ.get("ZOO_STEPS", 300))):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
