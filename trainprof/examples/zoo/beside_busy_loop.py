"""CPU-starved: a healthy job on a machine whose CPUs another process keeps busy.

A small MLP trains on an in-memory dataset with one intra-op thread (nothing to fix in the job
itself), while a neighbour (another user's job, a data-preparation script left running) spins
on every CPU the job may use. The kernel shares each CPU between the runnable threads: the
training loop's thread is ready to run and waits for a CPU most of the time, and the job is
several times slower than alone, although its own profile (forward, backward, optimizer) looks
like any compute-bound job's. trainprof must lead with the wait, not "compute-bound".

The neighbour is started outside the job's process tree (as a stranger's process would be: a
process that starts it and exits at once), two busy loops per usable CPU (the job's thread gets
about 2 CPUs in 5, and waits about 60 % of its time), and is stopped when
the job ends; each loop also ends by itself once the job is gone or after two minutes.
``ZOO_NEIGHBOURS=<n>`` sets the number of busy loops (0: the same job alone, the control);
``ZOO_SECONDS`` how long the job trains.

Fix: run it where its CPUs are its own (stop or move the other work), or size its threads to
the CPUs the others leave.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

# One busy loop: ends once the job (argv[1]) is gone, or after argv[2] seconds.
SPIN = """
import os, sys, time
job, end, n = int(sys.argv[1]), time.monotonic() + float(sys.argv[2]), 0
while True:
    n += 1
    if n % 100000 == 0:
        if time.monotonic() > end:
            break
        try:
            os.kill(job, 0)
        except ProcessLookupError:
            break
"""
# Starts a busy loop and exits: the loop is reparented away from the job's process tree.
START = """
import subprocess, sys
loop = subprocess.Popen(
    [sys.executable, "-c", sys.argv[1], sys.argv[2], "120"],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    start_new_session=True,
)
print(loop.pid)
"""


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def start_neighbour(loops: int) -> list[int]:
    """Busy loops outside this process's tree; their pids."""
    pids = []
    for _ in range(loops):
        out = subprocess.run(
            [sys.executable, "-c", START, SPIN, str(os.getpid())],
            capture_output=True,
            text=True,
            check=True,
        )
        pids.append(int(out.stdout))
    return pids


def stop(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(4096, 256)
    y = (x[:, :8].sum(dim=1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, drop_last=True)
    model = nn.Sequential(
        nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 2)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    seconds = float(os.environ.get("ZOO_SECONDS", "6"))
    neighbour = start_neighbour(int(os.environ.get("ZOO_NEIGHBOURS", 2 * usable_cpus())))
    try:
        end, epoch = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            total = torch.zeros(())
            for xb, yb in loader:
                loss = criterion(model(xb), yb)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += loss.detach()
                if time.monotonic() >= end:
                    break
            print(f"epoch {epoch}: loss {total.item() / len(loader):.4f}")
            epoch += 1
    finally:
        stop(neighbour)


if __name__ == "__main__":
    main()
