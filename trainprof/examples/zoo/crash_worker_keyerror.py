"""Crash: a plain ``KeyError`` in a DataLoader worker's ``__getitem__``, a few dozen steps in.

A speaker-ID job maps each utterance's speaker name to a class index through a dict built from
the training manifest's first shard; an utterance of a speaker only the second shard has
reaches ``__getitem__`` in a worker, whose ``KeyError`` ends the job. No known signature: the
exception itself, where the user's code raised it, is the cause.

Fix: build the label map from every shard (or the full manifest) before training, or map
unknown speakers to an ``<unk>`` class.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Utterances(Dataset):
    def __init__(self, n: int = 4096):
        g = torch.Generator().manual_seed(0)
        self.feats = torch.randn(n, 40, generator=g)
        self.speakers = [f"spk{(i * 7) % 31:03d}" for i in range(n)]
        self.speakers[2100] = "spk900"  # a speaker of the second shard
        self.label_of = {s: k for k, s in enumerate(sorted(set(self.speakers[:2000])))}

    def __len__(self) -> int:
        return len(self.feats)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.feats[i], self.label_of[self.speakers[i]]


def main() -> None:
    torch.manual_seed(0)
    data = Utterances()
    loader = DataLoader(data, batch_size=32, num_workers=2)
    model = nn.Sequential(nn.Linear(40, 64), nn.ReLU(), nn.Linear(64, 31))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
