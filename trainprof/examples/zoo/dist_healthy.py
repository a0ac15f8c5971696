"""A healthy DDP job: every rank does the same work, so none waits long for another.

Two ranks (gloo, CPU) train a small MLP on equal shards (``DistributedSampler(drop_last=True)``,
given ``set_epoch`` before each of its 2 epochs), metrics reduced as tensors every 50 steps on
every rank. The control for ``straggler-rank``: its ranks wait in the gradient all-reduce only
for the transfer itself; and for ``sampler-set-epoch``.

Run it as ``trainprof run -- torchrun --nproc-per-node 2 dist_healthy.py``; with two "nodes":
``torchrun --nnodes 2 --node-rank N --rdzv-backend c10d --rdzv-endpoint HOST:PORT ...``.
Started without torchrun (``trainprof demo dist_healthy``), it becomes torchrun itself.
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

# 1000 steps: a steady state of ~3 s on 2 slow cores, still over the rules' 1 s minimum on a machine
# several times faster (400 gave 1.24 s here, and 0.98 s on a loaded run: too short to judge)
STEPS = int(os.environ.get("ZOO_STEPS", "1000"))
EPOCHS = 2


def main() -> None:
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    world = dist.get_world_size()
    n = STEPS // EPOCHS * 32 * world
    data = TensorDataset(torch.randn(n, 64), torch.randint(0, 8, (n,)))
    sampler = DistributedSampler(data, drop_last=True)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(
            nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8)
        )
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    correct = torch.zeros(())
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)  # a new shuffle each epoch (the control for sampler-set-epoch)
        for step, (x, y) in enumerate(loader):
            opt.zero_grad()
            logits = model(x)
            nn.functional.cross_entropy(logits, y).backward()
            opt.step()
            correct += (logits.argmax(1) == y).sum()
            if step % 50 == 49:
                dist.all_reduce(correct)  # every rank, every 50 steps: nobody waits for one rank
                correct.zero_()
    # Every rank done, then a pause before Python shuts down: gloo's worker thread frees a
    # collective's work just after it completes, which takes the GIL; once the interpreter is
    # shutting down, that aborts the process (torch 2.13: "terminate called without an active
    # exception", SIGABRT). Sleeping hands that thread the GIL first.
    dist.barrier()
    dist.destroy_process_group()
    time.sleep(0.1)


if __name__ == "__main__":
    main()
