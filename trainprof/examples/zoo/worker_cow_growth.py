"""Workers' memory grows: a product catalogue kept as a list of dicts, read by forked workers.

A ranking model's Dataset holds its catalogue (already shuffled on disk) as 300,000 Python
dicts (title, price, category, tags). Two persistent DataLoader workers are forked with a view
of that list and read their batches' entries: every read bumps the reference counts of the
dict, its list and its ints, which writes the pages they live on, and the kernel copies each
such page into the worker (copy-on-write). Each worker's private memory (USS) climbs through
the epoch towards a full copy of the catalogue while its RSS stays flat; with 8 workers and a
real catalogue the job is OOM-killed (pytorch/pytorch#13246).

Fix: keep the catalogue in a few numpy arrays (or an Arrow table) instead of Python objects:
a read then touches no reference count, and the pages stay shared.
"""

from __future__ import annotations

import random

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

ITEMS = 300_000
CATEGORIES = 24


class Catalogue(Dataset):
    def __init__(self) -> None:
        rng = random.Random(0)
        self.items = [
            {
                "title": f"item {i} colour {i % 40} size {i % 9}",
                "price": 1.0 + (i * 7919) % 300,
                "category": rng.randrange(CATEGORIES),
                "tags": list(range(1000 + i % 7000, 1020 + i % 7000)),
            }
            for i in range(ITEMS)
        ]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        item = self.items[i]
        feats = torch.tensor(item["tags"], dtype=torch.float32) / 9000.0
        feats[0] = item["price"] / 300.0
        return feats, item["category"]


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = Catalogue()
    loader = DataLoader(data, batch_size=128, num_workers=2, persistent_workers=True)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, CATEGORIES))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            print(f"step {step}: loss {loss.item():.3f}")
        if step == 2200:
            break


if __name__ == "__main__":
    main()
