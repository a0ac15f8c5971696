"""Hang: rank 0 alone validates through the DDP-wrapped model; every rank waits for good.

Reproduces the "DDP training freezes at the first validation, no error, 0 % GPU on every rank"
reports. To save time, only rank 0 runs validation every 50 steps, and the others wait for it
at ``dist.barrier()``. But validation calls the DDP-wrapped model, and DDP's forward first
broadcasts the module's buffers from rank 0 (``broadcast_buffers=True``, the default; a
BatchNorm's running statistics are buffers): a collective that rank 1, waiting in the
barrier, never joins. Rank 0 waits in the broadcast, rank 1 in the barrier, and nothing
crashes until the process group's timeout, many minutes later.

Run under torchrun with two ranks (gloo, CPU): ``torchrun --nproc-per-node 2
dist_eval_hang.py``.

Fix: validate through the wrapped module, ``model.module(x)`` (no collectives), or validate on
every rank (each on its own shard) and reduce the metric; a shorter
``init_process_group(timeout=...)`` turns such a hang into an error.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

FEATURES = 32
VAL_EVERY = 50


def validate(model: nn.Module, batches: list[torch.Tensor]) -> float:
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x in batches:
            total += model(x).abs().mean().item()
    model.train()
    return total / len(batches)


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    net = nn.Sequential(nn.Linear(FEATURES, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 8))
    model = nn.parallel.DistributedDataParallel(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    val_batches = [torch.randn(64, FEATURES) for _ in range(4)]
    for step in range(1, 501):
        x = torch.randn(64, FEATURES)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % VAL_EVERY == 0:
            if rank == 0:  # "only rank 0 needs the number"
                print(f"step {step} val {validate(model, val_batches):.4f}", flush=True)
            dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
