"""Tabular churn model (embeddings for categorical columns plus an MLP) whose dataset maps
each row's country code to an index with a dict built from the first rows only; a DataLoader
worker crashes with a plain `KeyError` part-way through the epoch.

Diagnosis: `ChurnDataset.__init__` builds `self.country_index` from the first 5,000 rows (a
"sample to build the vocabulary" shortcut). Rows further on have country codes the sample
did not contain, and `__getitem__` looks them up with `self.country_index[code]`. The first
such row read by a worker raises `KeyError: 'LU'` inside the worker; the DataLoader re-raises
it in the main process ("Caught KeyError in DataLoader worker process 0") and the job exits
with status 1 after a few seconds of normal training.

Fix: build the vocabulary from the whole column, with an index for unknown values
(`self.country_index.get(code, UNKNOWN)`); `--fixed` does that and trains to the end.

Measured cost: the job crashes after about 180 of its 300 steps (exit status 1).
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

STEPS = int(os.environ.get("STEPS", "300"))
BATCH = 64
COUNTRIES = ["DE", "FR", "GB", "ES", "IT", "NL", "PL", "SE", "PT", "BE", "AT", "DK", "FI", "IE"]
RARE = ["LU", "MT", "CY", "IS"]


def make_table(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    country = rng.choice(COUNTRIES, n)
    # rare countries only appear in the later part of the file (sorted by sign-up date)
    rare = (np.arange(n) > int(n * 0.6)) & (rng.random(n) < 0.05)
    country[rare] = rng.choice(RARE, int(rare.sum()))
    return {
        "country": country,
        "plan": rng.integers(0, 5, n),
        "tenure": rng.gamma(2.0, 12.0, n).astype(np.float32),
        "spend": rng.lognormal(3.0, 1.0, n).astype(np.float32),
        "churn": (rng.random(n) < 0.2).astype(np.int64),
    }


class ChurnDataset(Dataset):
    def __init__(self, table: dict[str, np.ndarray], full_vocab: bool) -> None:
        self.t = table
        codes = table["country"] if full_vocab else table["country"][:5000]
        self.country_index = {c: i + 1 for i, c in enumerate(sorted(set(codes.tolist())))}
        self.full_vocab = full_vocab

    def __len__(self) -> int:
        return len(self.t["churn"])

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        code = str(self.t["country"][i])
        country = self.country_index.get(code, 0) if self.full_vocab else self.country_index[code]
        numeric = torch.tensor([np.log1p(self.t["tenure"][i]), np.log1p(self.t["spend"][i])])
        return (
            torch.tensor(country),
            torch.tensor(self.t["plan"][i]),
            numeric,
            torch.tensor(self.t["churn"][i]),
        )


class ChurnModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.country = nn.Embedding(len(COUNTRIES) + len(RARE) + 1, 8)
        self.plan = nn.Embedding(5, 4)
        self.mlp = nn.Sequential(
            nn.Linear(14, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2)
        )

    def forward(self, country, plan, numeric):
        return self.mlp(torch.cat([self.country(country), self.plan(plan), numeric], 1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixed", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    n = STEPS * BATCH
    ds = ChurnDataset(make_table(n), full_vocab=args.fixed)
    loader = DataLoader(ds, batch_size=BATCH, shuffle=False, num_workers=2)
    model = ChurnModel()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step, (country, plan, numeric, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(country, plan, numeric), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    print("done")


if __name__ == "__main__":
    main()
