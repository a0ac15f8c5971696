"""Workers that cost more than they save: numpy batches pickled through the workers' pipe.

A linear probe over embeddings computed once and kept in memory as a numpy array. Making a
batch is cheap (a row per sample, one ``np.stack``); the loader still has ``num_workers=2``,
and a ``numpy_collate`` copied from a JAX tutorial, so each 2 MiB batch leaves its worker as a
numpy array: pickled, written to a pipe, read and unpickled by the main process, which does
nothing else meanwhile. Receiving a batch costs the loop more than making it would; more
workers cannot share that, as only the main process receives.

Fix: ``num_workers=0`` (data already in memory needs no workers); or return tensors from the
collate (``torch.from_numpy``), which cross in shared memory instead of being pickled.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

FEATURES, CLASSES = 2048, 10


class Embeddings(Dataset):
    """Precomputed embeddings held in memory: a sample is one row."""

    def __init__(self, n: int) -> None:
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((n, FEATURES), dtype=np.float32)
        self.y = (self.x[:, :CLASSES].argmax(1)).astype(np.int64)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.int64]:
        return self.x[i], self.y[i]


def numpy_collate(batch: list[tuple[np.ndarray, np.int64]]) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = zip(*batch, strict=True)
    return np.stack(xs), np.array(ys)


def main() -> None:
    torch.set_num_threads(1)
    loader = DataLoader(
        Embeddings(8192),
        batch_size=256,
        shuffle=True,
        num_workers=2,
        persistent_workers=True,
        collate_fn=numpy_collate,
    )
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(4):
        for x, y in loader:
            logits = model(torch.from_numpy(x))
            loss = nn.functional.cross_entropy(logits, torch.from_numpy(y))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
