"""Healthy data-parallel control for `trainprof attach` through a launcher: torchrun ranks
(gloo, CPU) training a small MLP with DDP for ``--seconds``; each rank prints ``rank N
training`` after its first step, so a test can attach once both train.

Run it as ``torchrun --nproc-per-node 2 attach_dist.py`` and attach to torchrun's PID.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(4096, 64), torch.randint(0, 10, (4096,)))
    sampler = DistributedSampler(data, drop_last=True)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    end = time.monotonic() + args.seconds
    first, epoch = True, 0
    while time.monotonic() < end:
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            if first:
                print(f"rank {dist.get_rank()} training", flush=True)
                first = False
            if time.monotonic() > end:
                break
        epoch += 1
    # Every rank done, then a pause before Python shuts down: gloo's worker thread frees a
    # collective's work just after it completes, which takes the GIL; once the interpreter is
    # shutting down, that aborts the process (torch 2.13: "terminate called without an active
    # exception", SIGABRT). Sleeping hands that thread the GIL first.
    dist.barrier()
    dist.destroy_process_group()
    time.sleep(0.1)


if __name__ == "__main__":
    main()
