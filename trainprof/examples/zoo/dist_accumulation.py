"""Gradient accumulation under DDP without ``no_sync()``: every micro-batch all-reduces.

Two ranks (gloo, CPU) accumulate 4 micro-batches per optimizer step, the way single-process
accumulation is written: ``(loss / accum).backward()`` each micro-batch, ``opt.step()`` every
4th. Under DDP each of those backward passes all-reduces the whole gradient (a 5 MB MLP here),
where only the last one of the step is needed: the sum of the other three is overwritten by it.

Fix: the first 3 backward passes of a step inside ``model.no_sync()``. ``ZOO_NO_SYNC=1`` runs
that fixed loop (the control: no finding), which made the loop faster here.

Run it as ``trainprof run -- torchrun --nproc-per-node 2 dist_accumulation.py``. Started
without torchrun (``trainprof demo dist_accumulation``), it becomes torchrun itself.
"""

from __future__ import annotations

import os
import sys

if "RANK" not in os.environ:  # started directly (`trainprof demo`): become torchrun, 2 ranks
    os.execv(
        sys.executable,
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", *sys.argv],
    )

import contextlib
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

ACCUM = 4
STEPS = int(os.environ.get("ZOO_STEPS", "120"))
NO_SYNC = os.environ.get("ZOO_NO_SYNC") == "1"


def main() -> None:
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    n = STEPS * ACCUM * 16 * dist.get_world_size()
    data = TensorDataset(torch.randn(n, 256), torch.randint(0, 8, (n,)))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, drop_last=True))
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(
            nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 8)
        )
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i, (x, y) in enumerate(loader):
        last = (i + 1) % ACCUM == 0
        skip_sync = NO_SYNC and not last
        with model.no_sync() if skip_sync else contextlib.nullcontext():
            loss = nn.functional.cross_entropy(model(x), y) / ACCUM
            loss.backward()
        if last:
            opt.step()
            opt.zero_grad()
    # as dist_healthy: every rank done, then a pause before Python shuts down (gloo's thread)
    dist.barrier()
    dist.destroy_process_group()
    time.sleep(0.1)


if __name__ == "__main__":
    main()
