"""A rank that fails: rank 1 raises mid-training while rank 0 waits for it in the all-reduce.

Rank 1 meets a corrupt sample (its shard only) at step 40 and raises. torchrun reports a
``ChildFailedError`` with a "Root Cause" block naming the first failed rank; rank 0, blocked in
DDP's gradient all-reduce, gets a gloo error (connection closed by peer) or is terminated by
torchrun: a consequence, not a cause. Without help, the log reads as if every rank broke.

Run it as ``trainprof run -- torchrun --nproc-per-node 2 dist_rank_fails.py`` (gloo, CPU).
Started without torchrun (``trainprof demo dist_rank_fails``), it becomes torchrun itself.

Fix: the failed rank's own error (here: validate the data before training, or skip bad
samples in ``__getitem__``).
"""

from __future__ import annotations

import os
import sys

if "RANK" not in os.environ:  # started directly (`trainprof demo`): become torchrun, 2 ranks
    os.execv(
        sys.executable,
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", *sys.argv],
    )
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

FAIL_AT = 40


class Records(TensorDataset):
    def __getitem__(self, i: int) -> tuple[torch.Tensor, ...]:
        if dist.get_rank() == 1 and i % 997 == 13 and self.seen > FAIL_AT * 32:
            raise ValueError(f"corrupt record {i}: checksum mismatch")
        self.seen += 1
        return super().__getitem__(i)

    seen = 0


def main() -> None:
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = Records(torch.randn(8192, 32), torch.randint(0, 4, (8192,)))
    loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data))
    model = nn.parallel.DistributedDataParallel(nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
