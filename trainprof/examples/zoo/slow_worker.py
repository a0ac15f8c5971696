"""Input-bound on one worker: pure-Python feature extraction in ``__getitem__``.

A text classifier whose dataset hashes each document's character trigrams into a bag-of-
features vector in Python, per sample (the seed 003 situation: "GPU < 50 % from data
loading", the worker count not derived from the CPU count). ``num_workers=1`` moves the work
off the training process but one worker cannot keep up: it makes a batch in about as long as
the loop waits for one. The main process spends that wait inside receiving the batch (its
tensors arrive over a connection the busy worker answers between its own bytecodes), which
looks like a slow hand-over; the sharing strategy changes nothing, a second worker nearly doubles
the rate.

Fix: more workers (up to the usable cores: the main process mostly waits), or compute the
features once, offline, or vectorised.
"""

from __future__ import annotations

import random

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

FEATURES, CLASSES = 256, 4
LETTERS = "abcdefghijklmnopqrstuvwxyz     "


class HashedTrigrams(Dataset):
    def __init__(self, n: int, length: int = 2000) -> None:
        rng = random.Random(0)
        self.docs = ["".join(rng.choice(LETTERS) for _ in range(length)) for _ in range(n)]

    def __len__(self) -> int:
        return len(self.docs)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        doc = self.docs[i]
        counts = [0.0] * FEATURES
        for rounds in range(4):  # four hash seeds, as a count-min sketch would
            for k in range(len(doc) - 2):
                counts[hash((rounds, doc[k : k + 3])) % FEATURES] += 1.0
        return torch.tensor(counts) / len(doc), i % CLASSES


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    loader = DataLoader(
        HashedTrigrams(768), batch_size=32, shuffle=True, num_workers=1, persistent_workers=True
    )
    model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, CLASSES))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for x, y in loader:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
