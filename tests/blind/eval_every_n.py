"""Argparse script whose train_one_epoch() runs a full validate() every 20 steps.

Expert diagnosis: the job spends a large share of its time evaluating, not training.
`train_one_epoch()` calls `validate()` (a forward pass over the whole validation set under
`torch.no_grad()`) every `--eval-every 20` optimizer steps, and the validation set is as large
as 40 % of the training set. Fix: validate once per epoch (or every few thousand steps), on a
fixed subset of the validation set, with a larger eval batch size.

Measured (median of 3 wall times, start-up included, OMP_NUM_THREADS=1 on a shared 2-core
machine): plain 8.5 s, fixed 5.8 s: the mistake costs 32 % of the wall time.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--fixed", action="store_true", help="validate once per epoch")
    return p.parse_args()


def build_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv1d(8, 32, 5, padding=2),
        nn.ReLU(),
        nn.Conv1d(32, 32, 5, padding=2),
        nn.ReLU(),
        nn.AdaptiveAvgPool1d(1),
        nn.Flatten(),
        nn.Linear(32, 4),
    )


def make_loaders(batch_size: int) -> tuple[DataLoader, DataLoader]:
    g = torch.Generator().manual_seed(0)
    xtr = torch.randn(6400, 8, 128, generator=g)
    ytr = torch.randint(0, 4, (6400,), generator=g)
    xva = torch.randn(2560, 8, 128, generator=g)
    yva = torch.randint(0, 4, (2560,), generator=g)
    train = DataLoader(TensorDataset(xtr, ytr), batch_size=batch_size, shuffle=True)
    val = DataLoader(TensorDataset(xva, yva), batch_size=batch_size)
    return train, val


@torch.no_grad()
def validate(model: nn.Module, loader: DataLoader, loss_fn: nn.Module) -> tuple[float, float]:
    model.eval()
    total, correct, loss_sum = 0, 0, 0.0
    for x, y in loader:
        out = model(x)
        loss_sum += loss_fn(out, y).item() * len(y)
        correct += (out.argmax(1) == y).sum().item()
        total += len(y)
    model.train()
    return loss_sum / total, correct / total


def train_one_epoch(
    model: nn.Module,
    train_loader: DataLoader,
    val_loader: DataLoader,
    opt: torch.optim.Optimizer,
    loss_fn: nn.Module,
    args: argparse.Namespace,
    step: int,
) -> int:
    model.train()
    for x, y in train_loader:
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if not args.fixed and step % args.eval_every == 0:
            vloss, vacc = validate(model, val_loader, loss_fn)
            if step % 100 == 0:
                print(f"step {step} val_loss {vloss:.3f} val_acc {vacc:.3f}", flush=True)
    return step


def save(model: nn.Module, out_dir: str, epoch: int) -> None:
    torch.save(model.state_dict(), os.path.join(out_dir, f"epoch{epoch}.pt"))


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    model = build_model()
    train_loader, val_loader = make_loaders(args.batch_size)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as out_dir:
        for epoch in range(args.epochs):
            step = train_one_epoch(model, train_loader, val_loader, opt, loss_fn, args, step)
            if args.fixed:
                vloss, vacc = validate(model, val_loader, loss_fn)
                print(f"epoch {epoch} val_loss {vloss:.3f} val_acc {vacc:.3f}", flush=True)
            save(model, out_dir, epoch)
    print(f"{step} steps in {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
