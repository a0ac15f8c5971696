"""Unsplit stream: an IterableDataset of shards read by two DataLoader workers that never ask
which worker they are, so each yields every shard.

The shape of a streaming corpus reader (webdataset-like shards, a tokenized text stream):
``__iter__`` walks all shards. A map-style dataset is split among workers by the sampler; an
IterableDataset is not, so with ``num_workers=2`` every sample reaches the loop twice an epoch.
Nothing fails: the loss goes down, an epoch just takes twice the steps it should, and the
model sees each sample twice in a row. trainprof should name ``iterable-unsplit``.

Fix: split the shards in ``__iter__`` by ``torch.utils.data.get_worker_info()``
(``healthy_stream.py`` does).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset


class Shards(IterableDataset):
    def __init__(self, shards: int = 8, per_shard: int = 256, features: int = 64) -> None:
        g = torch.Generator().manual_seed(0)
        self.shards = [
            (torch.randn(per_shard, features, generator=g), torch.randint(0, 10, (per_shard,)))
            for _ in range(shards)
        ]

    def __iter__(self):  # type: ignore[no-untyped-def]
        for x, y in self.shards:  # every shard, in every worker
            yield from zip(x, y, strict=True)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    loader = DataLoader(Shards(), batch_size=64, num_workers=2, persistent_workers=True)
    model = nn.Sequential(
        nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(4):
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
