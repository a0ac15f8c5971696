"""Profiler left on: a ``torch.profiler.profile()`` block, with no schedule, around the loop.

A tabular MLP was profiled once to see where a step goes; the ``with profile(...)`` block
stayed around the training loop. With no ``schedule`` it records every op of every step and
keeps the events in memory until the block ends: on this MLP a step takes about twice as long
(1.3–1.8 against 0.75 ms, CPU) and the process grows ≈ 115 MiB per 1,000 steps.

Fix: record a few steps with ``schedule=torch.profiler.schedule(wait=5, warmup=2, active=5,
repeat=1)`` and ``prof.step()`` after each step, or take the block out.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import DataLoader, TensorDataset


def make_model(features: int, classes: int) -> nn.Module:
    layers: list[nn.Module] = []
    width = features
    for _ in range(6):
        layers += [nn.Linear(width, 64), nn.ReLU()]
        width = 64
    return nn.Sequential(*layers, nn.Linear(width, classes))


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    features = torch.randn(4096, 32)
    labels = (features[:, :4].sum(dim=1) > 0).long() + (features[:, 4] > 1).long()
    loader = DataLoader(TensorDataset(features, labels), batch_size=32, shuffle=True)
    model = make_model(32, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    # Left from looking at one step's ops (its table is no longer printed): no schedule, so
    # every step is recorded.
    with profile(activities=[ProfilerActivity.CPU]):
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
