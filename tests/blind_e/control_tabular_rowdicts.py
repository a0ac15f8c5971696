"""Healthy control: churn model on tabular rows kept as dicts, collated in Python.

The trap: the table is a list of row dicts (what `DataFrame.to_dict("records")` or a
JSON export gives), `ChurnRows.__getitem__` returns the dict, and `collate_rows` builds
the batch in a Python loop over 256 rows (category look-ups, standardisation, missing
values), in the main process (`num_workers=0`). It looks like per-sample Python work
starving the loop, but it costs 1.4 ms a batch against a 38 ms step of the
embedding + 3x1024 MLP model: 3.6 % (measured in-process, see EXPECTED.md).

Expert diagnosis: none (healthy).

`--fixed` is accepted and changes nothing.

Measured: see EXPECTED.md and the line below (median of 3 interleaved `/usr/bin/time`
runs, OMP_NUM_THREADS=1).
5.26 s plain, 5.19 s with `--fixed` (same code; load 2.1).
"""

import argparse
import os
import random
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

PLANS = ["basic", "standard", "premium", "family", "student"]
REGIONS = ["north", "south", "east", "west", "central", "islands"]
CHANNELS = ["web", "store", "partner", "phone"]
NUMERIC = ["tenure_months", "monthly_fee", "support_calls", "data_gb", "late_payments", "age"]
STATS = {
    "tenure_months": (30.0, 20.0),
    "monthly_fee": (45.0, 15.0),
    "support_calls": (2.0, 2.0),
    "data_gb": (12.0, 8.0),
    "late_payments": (0.5, 1.0),
    "age": (40.0, 12.0),
}


def make_rows(n, seed=0):
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        row = {
            "customer_id": f"C{i:06d}",
            "plan": rnd.choice(PLANS),
            "region": rnd.choice(REGIONS),
            "channel": rnd.choice(CHANNELS),
            "tenure_months": rnd.randint(0, 80),
            "monthly_fee": round(rnd.uniform(10, 90), 2),
            "support_calls": rnd.randint(0, 9),
            "data_gb": round(rnd.expovariate(1 / 12), 1),
            "late_payments": rnd.randint(0, 4),
            "age": rnd.randint(18, 80) if rnd.random() > 0.05 else None,
        }
        risk = (
            row["support_calls"] * 0.4
            + row["late_payments"] * 0.6
            - row["tenure_months"] / 30
            + (row["plan"] == "basic") * 0.5
            + rnd.gauss(0, 0.5)
        )
        row["churned"] = int(risk > 1.0)
        rows.append(row)
    return rows


class ChurnRows(Dataset):
    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


VOCABS = {
    "plan": {v: i for i, v in enumerate(PLANS)},
    "region": {v: i for i, v in enumerate(REGIONS)},
    "channel": {v: i for i, v in enumerate(CHANNELS)},
}


def collate_rows(rows):
    cats, nums, labels = [], [], []
    for r in rows:
        cats.append([VOCABS[k][r[k]] for k in VOCABS])
        num = []
        for k in NUMERIC:
            v = r[k]
            mean, std = STATS[k]
            num.append(0.0 if v is None else (v - mean) / std)
        num.append(1.0 if r["age"] is None else 0.0)
        nums.append(num)
        labels.append(r["churned"])
    return torch.tensor(cats), torch.tensor(nums), torch.tensor(labels, dtype=torch.float32)


class ChurnNet(nn.Module):
    def __init__(self, hidden=1024):
        super().__init__()
        self.embs = nn.ModuleList(nn.Embedding(len(v), 16) for v in VOCABS.values())
        d_in = 16 * len(VOCABS) + len(NUMERIC) + 1
        self.mlp = nn.Sequential(
            nn.Linear(d_in, hidden),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, cats, nums):
        e = [emb(cats[:, i]) for i, emb in enumerate(self.embs)]
        return self.mlp(torch.cat(e + [nums], dim=1)).squeeze(1)


def train(model, loader, epochs):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    for epoch in range(epochs):
        total, n = 0.0, 0
        for cats, nums, y in loader:
            loss = F.binary_cross_entropy_with_logits(model(cats, nums), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach()
            n += 1
        print(f"epoch {epoch}: loss {float(total) / n:.4f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixed", action="store_true")  # accepted; nothing to fix
    ap.parse_args()
    epochs = int(os.environ.get("EPOCHS", "2"))
    torch.manual_seed(0)
    rows = make_rows(10000)
    loader = DataLoader(
        ChurnRows(rows), batch_size=256, shuffle=True, num_workers=0, collate_fn=collate_rows
    )
    model = ChurnNet()
    train(model, loader, epochs)
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(model.state_dict(), os.path.join(tmp, "churn.pt"))


if __name__ == "__main__":
    main()
