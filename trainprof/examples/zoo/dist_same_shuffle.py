"""A DDP job whose ``DistributedSampler`` never gets ``set_epoch``: every epoch, the same order.

Two ranks (gloo, CPU) train for 3 short epochs over a ``DistributedSampler(shuffle=True)``,
the loop written as in a single process: ``for epoch ...: for x, y in loader``. The sampler
seeds its shuffle with ``seed + epoch`` and its epoch stays 0, so each rank reads its shard in
the same order in every epoch. Nothing is slower or crashes: no timing shows it.

Fix: ``sampler.set_epoch(epoch)`` before each epoch, as ``dist_healthy.py`` does (the control).

Run it as ``trainprof run -- torchrun --nproc-per-node 2 dist_same_shuffle.py``; started
without torchrun (``trainprof demo dist_same_shuffle``), it becomes torchrun itself.
"""

from __future__ import annotations

import os
import sys

if "RANK" not in os.environ:  # started directly (`trainprof demo`): become torchrun, 2 ranks
    os.execv(
        sys.executable,
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", *sys.argv],
    )

import time

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS = 3


def main() -> None:
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    n = 400 * 32 * dist.get_world_size()  # 400 steps an epoch on each rank
    data = TensorDataset(torch.randn(n, 64), torch.randint(0, 8, (n,)))
    sampler = DistributedSampler(data, shuffle=True, drop_last=True)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _epoch in range(EPOCHS):
        for x, y in loader:  # sampler.set_epoch(epoch) never called
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    # as dist_healthy: every rank done, then a pause before Python shuts down (gloo's thread)
    dist.barrier()
    dist.destroy_process_group()
    time.sleep(0.1)


if __name__ == "__main__":
    main()
