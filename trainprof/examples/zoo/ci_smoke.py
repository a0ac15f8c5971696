"""Healthy control for `trainprof ci`: a small MLP classifier on an in-memory dataset.

Nothing to fix: batches are slices of a tensor held in memory, the loop does no per-step
printing, saving or evaluation. It starts fast and steps steadily, which makes it the
project's own CI self-check (`.ci/run`) and the throughput-gate tests' subject.

Options: ``--batch-size N`` (default 32); ``--stall-ms MS`` adds a synchronous wait to every
step (a blocking metrics upload, say), the regression a ``--baseline`` gate must catch;
``--epochs N`` (default 2).
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--stall-ms", type=float, default=0.0)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    features = torch.randn(4096, 1024)
    labels = (features[:, :16].sum(dim=1) > 0).long() + 2 * (features[:, 16:32].sum(dim=1) > 0)
    loader = DataLoader(
        TensorDataset(features, labels), batch_size=args.batch_size, shuffle=True, drop_last=True
    )
    model = nn.Sequential(
        nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 4)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        total = torch.zeros(())
        for x, y in loader:
            loss = criterion(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += loss.detach()
            if args.stall_ms:
                time.sleep(args.stall_ms / 1000)  # the synchronous call the change added
        print(f"epoch {epoch}: loss {total.item() / len(loader):.4f}")


if __name__ == "__main__":
    main()
