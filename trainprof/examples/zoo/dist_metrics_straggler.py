"""Straggler rank: rank 0 alone computes epoch metrics in pure Python after every step.

The pattern behind "my 8-GPU job is no faster than 1 GPU": the loop does bookkeeping only
``if rank == 0`` (a running confusion matrix, per-class accuracy, a moving average, from
``.tolist()`` predictions in Python loops), about 10 ms a step. DDP's gradient all-reduce makes
every other rank wait for rank 0 at the end of each ``backward()``: the whole job runs at rank
0's pace, although rank 0's own profile only shows "loop overhead".

Run it as ``trainprof run -- torchrun --nproc-per-node 2 dist_metrics_straggler.py`` (gloo, CPU).
Started without torchrun (``trainprof demo dist_metrics_straggler``), it becomes torchrun itself.

With ``ZOO_SLOW_RANK=1`` rank 1 does that bookkeeping instead: a straggler that is not rank 0,
whose cause only its own stacks show. With ``ZOO_LAUNCH=spawn`` the script starts its two ranks
itself with ``torch.multiprocessing.spawn`` (the PyTorch DDP tutorial's way: no torchrun, so no
``RANK`` in the environment; each rank passes its number to ``init_process_group``).

Fix: compute metrics on the device as tensors (``torch.bincount``) on every rank, reduce them
every N steps with one ``all_reduce``; or do rank 0's extra work every N steps.
"""

from __future__ import annotations

import os
import sys

if "RANK" not in os.environ and os.environ.get("ZOO_LAUNCH") != "spawn":  # become torchrun
    os.execv(
        sys.executable,
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", *sys.argv],
    )

import time

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CLASSES = 8
SPAWN = os.environ.get("ZOO_LAUNCH") == "spawn"  # torch.multiprocessing.spawn starts the ranks
STEPS = int(os.environ.get("ZOO_STEPS", "300"))
SLOW_RANK = int(os.environ.get("ZOO_SLOW_RANK", "0"))  # the rank that keeps the metrics


class RunningMetrics:
    """One rank's bookkeeping: per-class ROC AUC over the last WINDOW samples, recomputed from
    scratch in Python after every step (what a "live dashboard" callback often does)."""

    WINDOW = 4096

    def __init__(self) -> None:
        self.scores: list[list[float]] = []
        self.targets: list[int] = []

    def update(self, logits: torch.Tensor, target: torch.Tensor) -> float:
        self.scores.extend(logits.softmax(1).tolist())
        self.targets.extend(target.tolist())
        del self.scores[: -self.WINDOW], self.targets[: -self.WINDOW]
        aucs = []
        for c in range(CLASSES):
            ranked = sorted(zip((s[c] for s in self.scores), self.targets, strict=True))
            pos = sum(1 for _s, t in ranked if t == c)
            below = rank_sum = 0
            for _s, t in ranked:
                if t == c:
                    rank_sum += below
                else:
                    below += 1
            neg = len(ranked) - pos
            aucs.append(rank_sum / (pos * neg) if pos and neg else 0.5)
        return sum(aucs) / CLASSES


def main() -> None:
    dist.init_process_group("gloo")
    train()


def spawned(rank: int, world_size: int, port: int) -> None:
    """``torch.multiprocessing.spawn``'s entry: the rank comes in as an argument."""
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size
    )
    train()


def train() -> None:
    torch.set_num_threads(1)
    rank = dist.get_rank()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(STEPS * 64, 32), torch.randint(0, CLASSES, (STEPS * 64,)))
    loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data, drop_last=True))
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    metrics = RunningMetrics() if rank == SLOW_RANK else None
    for x, y in loader:
        opt.zero_grad()
        logits = model(x)
        nn.functional.cross_entropy(logits, y).backward()
        opt.step()
        if metrics is not None:
            metrics.update(logits.detach(), y)
    # Every rank done, then a pause before Python shuts down: gloo's worker thread frees a
    # collective's work just after it completes, which takes the GIL; once the interpreter is
    # shutting down, that aborts the process (torch 2.13: "terminate called without an active
    # exception", SIGABRT). Sleeping hands that thread the GIL first.
    dist.barrier()
    dist.destroy_process_group()
    time.sleep(0.1)


if __name__ == "__main__":
    if SPAWN:
        import socket

        with socket.socket() as sock:  # a free port for the ranks to meet on
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        torch.multiprocessing.spawn(spawned, args=(2, port), nprocs=2)
    else:
        main()
