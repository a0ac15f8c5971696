"""Straggler rank by data: rank 1's shard is read from a slower disk.

Same job on both ranks, but rank 1's ``__getitem__`` takes ~0.3 ms more per sample (its node's
network filesystem, say): with ``num_workers=0`` it waits ~10 ms per step for data, and rank 0
waits as long in every gradient all-reduce. Rank 0's own profile shows only a long backward.

Run it as ``trainprof run -- torchrun --nproc-per-node 2 dist_data_straggler.py`` (gloo, CPU).
Started without torchrun (``trainprof demo dist_data_straggler``), it becomes torchrun itself.

Fix: give the slow rank's loader workers (``num_workers``, ``persistent_workers=True``), or fix
its node's storage; ``DistributedSampler(drop_last=True)`` for equal shards.
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

STEPS = int(os.environ.get("ZOO_STEPS", "200"))


class Shard(TensorDataset):
    def __getitem__(self, i: int) -> tuple[torch.Tensor, ...]:
        if dist.get_rank() == 1:
            time.sleep(0.0003)  # this rank's storage is slower
        return super().__getitem__(i)


def main() -> None:
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    n = STEPS * 64
    data = Shard(torch.randn(n, 32), torch.randint(0, 4, (n,)))
    loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data, drop_last=True))
    model = nn.parallel.DistributedDataParallel(nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    # Every rank done, then a pause before Python shuts down: gloo's worker thread frees a
    # collective's work just after it completes, which takes the GIL; once the interpreter is
    # shutting down, that aborts the process (torch 2.13: "terminate called without an active
    # exception", SIGABRT). Sleeping hands that thread the GIL first.
    dist.barrier()
    dist.destroy_process_group()
    time.sleep(0.1)


if __name__ == "__main__":
    main()
