"""CPU stall: every 15 steps a retrieval job re-mines hard negatives in pure Python.

A dual-encoder trains on (query, passage) pairs; every 15 steps ``mine_hard_negatives`` scores
a pool of 160 queries against 400 cached passage vectors with Python lists and keeps each
query's top 5 (about a quarter of a second), then training goes on. Seen from outside
(``trainprof attach``), the function comes in bursts with long gaps at a period: a periodic
stall, not work of every step.

Fix: mine in a background process from a snapshot of the embeddings (or vectorise it:
``torch.topk(q @ p.T, 5)``), and pick the result up when it is ready.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

DIM = 24


def mine_hard_negatives(queries: list[list[float]], passages: list[list[float]]) -> list[list[int]]:
    mined = []
    for q in queries:
        scores = [sum(a * b for a, b in zip(q, p, strict=True)) for p in passages]
        mined.append(sorted(range(len(passages)), key=scores.__getitem__)[-5:])
    return mined


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    n = 6400
    queries, passages = torch.randn(n, 32), torch.randn(n, 32)
    loader = DataLoader(TensorDataset(queries, passages), batch_size=32, shuffle=True)
    encoder = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, DIM))
    optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    bank = torch.randn(400, DIM)
    negatives: list[list[int]] = []
    for step, (q, p) in enumerate(loader):
        qe, pe = encoder(q), encoder(p)
        logits = qe @ pe.T
        loss = nn.functional.cross_entropy(logits, torch.arange(len(q)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        bank = torch.cat([bank[len(p) :], pe.detach()])
        if step % 15 == 0:
            negatives = mine_hard_negatives(qe.detach()[:32].tolist() * 5, bank.tolist())
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.3f} negatives {len(negatives)}")


if __name__ == "__main__":
    main()
