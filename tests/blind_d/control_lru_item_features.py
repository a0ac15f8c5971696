"""Control (healthy): click-through-rate model on (user, item) pairs whose item features are
built on demand in the Dataset and memoised with ``functools.lru_cache``, read by one
persistent DataLoader worker.

The trap: a cache inside the Dataset, filled in a worker, across several epochs — the shape
of the unbounded per-worker cache that grows memory and is thrown away with each epoch's
workers. Here none of that happens: the cache is an ``lru_cache(maxsize=4096)`` over a
catalogue of 3,000 items, so it fills during the first epoch and then only hits (the
worker's memory levels off after a few MiB); the loader has ``persistent_workers=True``,
so its one worker starts once, and the cache survives the epochs. Once the cache is warm,
a 256-row batch is 256 dictionary hits and a collate in the worker, cheaper than the
step it feeds. ``loss.item()`` every step feeds a
running mean printed once per epoch (on the CPU it is not a sync).

An expert would report no problem: the loop does not wait for data, memory is flat after
the first epoch, and the worker starts once. ``--fixed`` changes nothing.

Measured (2 CPUs shared with other work, load 2.1-2.5, OMP_NUM_THREADS=1; median of 3
interleaved /usr/bin/time runs): 3.53 s, and 3.39 s with ``--fixed`` (the same code: the
difference is the machine's noise).
"""

import argparse
import functools
import hashlib
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

N_ITEMS = 3000
N_USERS = 2000
ITEM_DIM = 32


@functools.lru_cache(maxsize=4096)
def item_features(item_id):
    """Hashed category/brand features and a price bucket, as the feature service does."""
    h = hashlib.blake2b(str(item_id).encode(), digest_size=16).digest()
    cats = np.frombuffer(h, dtype=np.uint8).astype(np.float32) / 255.0
    price = np.array([np.log1p(item_id % 500), (item_id % 7) / 7.0], dtype=np.float32)
    return np.concatenate([cats, price, np.sin(cats * 3.0)[: ITEM_DIM - 18]])


class Impressions(Dataset):
    def __init__(self, n, seed=0):
        rng = np.random.default_rng(seed)
        self.users = rng.integers(0, N_USERS, n)
        self.items = rng.integers(0, N_ITEMS, n)
        affinity = np.sin(self.users * 0.7) * np.cos(self.items * 0.3)
        self.clicks = (affinity + rng.normal(0, 0.5, n) > 0.3).astype(np.float32)

    def __len__(self):
        return len(self.clicks)

    def __getitem__(self, i):
        feats = torch.from_numpy(item_features(int(self.items[i])))
        return int(self.users[i]), feats, float(self.clicks[i])


class CTRModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.user = nn.Embedding(N_USERS, 32)
        self.mlp = nn.Sequential(
            nn.Linear(32 + ITEM_DIM, 256),
            nn.ReLU(),
            nn.Linear(256, 256),
            nn.ReLU(),
            nn.Linear(256, 1),
        )

    def forward(self, u, feats):
        return self.mlp(torch.cat([self.user(u), feats], dim=1)).squeeze(1)


def train(fixed):
    del fixed  # healthy: nothing to fix
    epochs = int(os.environ.get("EPOCHS", "5"))
    ds = Impressions(12288)
    loader = DataLoader(ds, batch_size=256, shuffle=True, num_workers=1, persistent_workers=True)
    model = CTRModel()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        running = 0.0
        for u, feats, y in loader:
            loss = F.binary_cross_entropy_with_logits(model(u, feats), y.float())
            opt.zero_grad()
            loss.backward()
            opt.step()
            running += loss.item()
        print(f"epoch {epoch}: logloss {running / len(loader):.4f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="accepted, changes nothing")
    train(ap.parse_args().fixed)
