"""Healthy control: an LSTM language model fed by a pure-Python padding collate_fn, num_workers=0.

Expert diagnosis: nothing to fix. The DataLoader runs in the training process
(`num_workers=0`) and its `collate_fn` pads variable-length sequences in a Python loop, which
looks like an input bottleneck; but the samples are already token ids in memory, so a batch
costs well under a millisecond to index and pad, against a 2-layer LSTM step (forward over
~100 time steps, backward, Adam) of tens of milliseconds. The loader is a small share of the
run, and workers would only add start-up and inter-process copies.

`--fixed` is accepted for symmetry and changes nothing (there is no mistake to fix).

Measured on 2026-11-29 with `OMP_NUM_THREADS=1` on a 2-core machine shared with other jobs
(load average ~2.5): 2 epochs of 60 steps, process wall time 11.7 s (9.3 s by the script's
timer), of which the loader 0.05 s, collate 0.03 s of it (the script's last line).
"""

from __future__ import annotations

import argparse
import os
import random
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


@dataclass
class Config:
    num_docs: int = 60 * 24
    vocab: int = 1000
    min_len: int = 40
    max_len: int = 120
    dim: int = 128
    batch_size: int = 24
    epochs: int = 2
    lr: float = 2e-3
    clip: float = 1.0
    pad_id: int = 0


class TokenizedCorpus(Dataset):
    """Documents already tokenized to ids (lists of int), of varying length."""

    def __init__(self, cfg: Config) -> None:
        rng = random.Random(0)
        self.docs = []
        for _ in range(cfg.num_docs):
            n = rng.randint(cfg.min_len, cfg.max_len)
            start = rng.randrange(1, cfg.vocab)
            step = rng.randrange(1, 7)
            self.docs.append([1 + (start + i * step) % (cfg.vocab - 1) for i in range(n)])

    def __len__(self) -> int:
        return len(self.docs)

    def __getitem__(self, i: int) -> list[int]:
        return self.docs[i]


class PadCollator:
    """Pads a batch to its longest document; returns inputs, targets and the time it spent."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id
        self.seconds = 0.0

    def __call__(self, docs: list[list[int]]):
        t0 = time.perf_counter()
        width = max(len(d) for d in docs)
        rows = [d + [self.pad_id] * (width - len(d)) for d in docs]
        ids = torch.tensor(rows, dtype=torch.long)
        self.seconds += time.perf_counter() - t0
        return ids[:, :-1], ids[:, 1:]


class LSTMLanguageModel(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.emb = nn.Embedding(cfg.vocab, cfg.dim, padding_idx=cfg.pad_id)
        self.lstm = nn.LSTM(cfg.dim, cfg.dim, num_layers=2, batch_first=True)
        self.out = nn.Linear(cfg.dim, cfg.vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.emb(ids))
        return self.out(h)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=int(os.environ.get("EPOCHS", 2)))
    parser.add_argument("--fixed", action="store_true", help="no effect: nothing to fix")
    args = parser.parse_args()
    torch.manual_seed(0)
    cfg = Config(epochs=args.epochs)
    collate = PadCollator(cfg.pad_id)
    loader = DataLoader(
        TokenizedCorpus(cfg), batch_size=cfg.batch_size, shuffle=True, collate_fn=collate
    )
    model = LSTMLanguageModel(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    t0 = time.perf_counter()
    fetch = 0.0
    for epoch in range(cfg.epochs):
        model.train()
        total, count = 0.0, 0
        it = iter(loader)
        while True:
            tf = time.perf_counter()
            try:
                inputs, targets = next(it)
            except StopIteration:
                break
            fetch += time.perf_counter() - tf
            logits = model(inputs)
            loss = F.cross_entropy(
                logits.reshape(-1, cfg.vocab), targets.reshape(-1), ignore_index=cfg.pad_id
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            opt.step()
            total += loss.item()
            count += 1
        print(f"epoch {epoch} loss {total / count:.4f}")
    print(
        f"total {time.perf_counter() - t0:.2f} s, loader {fetch:.3f} s (collate {collate.seconds:.3f} s)"
    )


if __name__ == "__main__":
    main()
