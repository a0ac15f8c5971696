"""Train a metric-learning embedder with hard negatives mined from a memory bank.

What it does: trains an MLP embedder on synthetic 40-class data with a triplet loss for
``--steps`` steps. Each step's embeddings go into a ``MemoryBank`` (the last 1,024 samples,
detached, as in cross-batch memory). Every ``mine_every`` steps ``mine_hard_negatives``
finds, for every bank entry, its nearest entries of another class; each anchor then draws
its negative from its class's hard negatives until the next refresh.

Mistake: ``mine_hard_negatives`` walks the bank in Python, one anchor at a time, computing
its distances to the whole bank with numpy and filtering by class in a list comprehension:
~0.2 s of CPU every 40 steps, during which training stops.

Expert diagnosis: ``cpu-stall``, at ``mine_hard_negatives``.

Fix (``--fixed``): one ``torch.cdist`` of the bank against itself, mask same-class pairs,
``topk`` per anchor: the same table in a few milliseconds.

Measured cost (2026-11-29, 2 CPUs shared with other jobs, load average 2.5-2.6,
``OMP_NUM_THREADS=1``, median of 3 runs of ``/usr/bin/time``, noisy): plain 4.57 s,
``--fixed`` 3.21 s: the mistake costs 30 % of the plain run's wall time
(which includes ~3 s of torch import and set-up).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn


@dataclass
class Config:
    steps: int = int(os.environ.get("STEPS", "300"))
    classes: int = 40
    features: int = 96
    dim: int = 64
    batch_size: int = 96
    bank_size: int = 1024
    mine_every: int = 40
    hard_per_anchor: int = 4
    lr: float = 1e-3
    log_every: int = 50


class MemoryBank:
    """A ring buffer of the most recent detached embeddings and their labels."""

    def __init__(self, size: int, dim: int) -> None:
        self.emb = np.zeros((size, dim), dtype=np.float32)
        self.labels = np.full(size, -1, dtype=np.int64)
        self.ptr = 0
        self.full = False

    def add(self, emb: torch.Tensor, labels: torch.Tensor) -> None:
        n = emb.shape[0]
        idx = (self.ptr + np.arange(n)) % len(self.labels)
        self.emb[idx] = emb.detach().numpy()
        self.labels[idx] = labels.numpy()
        self.ptr = int(idx[-1] + 1) % len(self.labels)
        self.full = self.full or self.ptr < n


def mine_hard_negatives(bank: MemoryBank, k: int) -> np.ndarray:
    """For each bank entry, the indices of its ``k`` nearest entries of another class."""
    hard = np.zeros((len(bank.labels), k), dtype=np.int64)
    for i in range(len(bank.labels)):
        dist = np.sqrt(((bank.emb - bank.emb[i]) ** 2).sum(axis=1))
        others = [j for j in np.argsort(dist) if bank.labels[j] != bank.labels[i]]
        hard[i] = others[:k]
    return hard


def mine_hard_negatives_vectorized(bank: MemoryBank, k: int) -> np.ndarray:
    emb = torch.from_numpy(bank.emb)
    labels = torch.from_numpy(bank.labels)
    dist = torch.cdist(emb, emb)
    dist[labels[:, None] == labels[None, :]] = float("inf")
    return dist.topk(k, largest=False).indices.numpy()


def negatives_by_class(
    hard: np.ndarray, labels: np.ndarray, classes: int, per_class: int = 32
) -> torch.Tensor:
    """For each class, ``per_class`` bank indices that are hard negatives of its entries."""
    table = np.random.randint(len(labels), size=(classes, per_class))
    for c in range(classes):
        candidates = hard[labels == c].ravel()
        if len(candidates):
            table[c] = candidates[np.arange(per_class) % len(candidates)]
    return torch.from_numpy(table)


def make_batch(cfg: Config, centres: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.randint(cfg.classes, (cfg.batch_size,))
    return centres[y] + 4.0 * torch.randn(cfg.batch_size, cfg.features), y


def train(cfg: Config, fixed: bool) -> None:
    torch.manual_seed(0)
    np.random.seed(0)
    centres = torch.randn(cfg.classes, cfg.features)
    model = nn.Sequential(
        nn.Linear(cfg.features, 256),
        nn.ReLU(),
        nn.Linear(256, 256),
        nn.ReLU(),
        nn.Linear(256, cfg.dim),
    )
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    bank = MemoryBank(cfg.bank_size, cfg.dim)
    bank_x = torch.zeros(cfg.bank_size, cfg.features)
    neg_table: torch.Tensor | None = None
    mine = mine_hard_negatives_vectorized if fixed else mine_hard_negatives
    t0 = time.perf_counter()
    for step in range(1, cfg.steps + 1):
        x, y = make_batch(cfg, centres)
        emb = nn.functional.normalize(model(x), dim=1)
        x_pos = centres[y] + 4.0 * torch.randn_like(x)
        pos = nn.functional.normalize(model(x_pos), dim=1)
        if neg_table is None:
            neg = pos.roll(1, 0)
        else:
            rows = neg_table[y, torch.randint(neg_table.shape[1], (len(y),))]
            neg = nn.functional.normalize(model(bank_x[rows]), dim=1)
        loss = nn.functional.triplet_margin_loss(emb, pos, neg, margin=0.5)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        start = bank.ptr
        bank.add(emb, y)
        bank_x[(start + torch.arange(len(x))) % cfg.bank_size] = x
        if step % cfg.mine_every == 0 and bank.full:
            hard = mine(bank, cfg.hard_per_anchor)
            neg_table = negatives_by_class(hard, bank.labels, cfg.classes)
        if step % cfg.log_every == 0:
            elapsed = time.perf_counter() - t0
            print(f"step {step} triplet {loss.item():.4f} ({elapsed:.1f} s)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=Config.steps)
    parser.add_argument("--fixed", action="store_true", help="mine with one cdist and topk")
    args = parser.parse_args()
    train(Config(steps=args.steps), fixed=args.fixed)


if __name__ == "__main__":
    main()
