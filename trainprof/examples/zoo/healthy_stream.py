"""Healthy control: an IterableDataset of shards that two DataLoader workers split between
them by ``torch.utils.data.get_worker_info()``, each reading every other shard.

The fixed ``iterable_unsplit.py``: each sample reaches the loop once an epoch, and the workers
keep ahead of the model. trainprof should report no warning or error.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class Shards(IterableDataset):
    def __init__(self, shards: int = 8, per_shard: int = 256, features: int = 64) -> None:
        g = torch.Generator().manual_seed(0)
        self.shards = [
            (torch.randn(per_shard, features, generator=g), torch.randint(0, 10, (per_shard,)))
            for _ in range(shards)
        ]

    def __iter__(self):  # type: ignore[no-untyped-def]
        info = get_worker_info()
        mine = self.shards if info is None else self.shards[info.id :: info.num_workers]
        for x, y in mine:
            yield from zip(x, y, strict=True)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    loader = DataLoader(Shards(), batch_size=64, num_workers=2, persistent_workers=True)
    model = nn.Sequential(
        nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(8):
        steps = 0
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            steps += 1
        print(f"epoch {epoch}: {steps} steps, loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
