"""Healthy control: an MLP trainer that validates every 100 steps and keeps the best checkpoint.

Expert diagnosis: nothing to fix. The loop evaluates every 100 steps and calls `torch.save`
inside the training loop, both of which are classic causes of stalls; but here the
validation is a fixed 4-batch slice run under `torch.no_grad()`, and the checkpoint is a
small model (about 70 k parameters, under 1 MiB with its optimizer state) written only when
validation improves. Together they take a few per cent of the run.

`--fixed` is accepted for symmetry and changes nothing (there is no mistake to fix).

Measured on 2026-11-29 with `OMP_NUM_THREADS=1` on a 2-core machine shared with other jobs
(load average ~2.5): 2000 steps, process wall time 5.9 s (4.3 s by the script's timer), of
which validation 0.10 s and checkpoints 0.04 s (the script's last line): about 3 % together.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


@dataclass
class Config:
    steps: int = 2000
    batch_size: int = 128
    lr: float = 1e-3
    eval_every: int = 100
    eval_batches: int = 4
    num_features: int = 32


def make_split(n: int, seed: int, cfg: Config) -> TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, cfg.num_features, generator=gen)
    y = (x[:, :4].sum(1) > 0).long() + (x[:, 4] > 1).long()
    return TensorDataset(x, y)


class EarlyStoppingCheckpoint:
    """Saves model and optimizer state when the validation loss improves."""

    def __init__(self, run_dir: str) -> None:
        self.path = os.path.join(run_dir, "best.pt")
        self.best = float("inf")
        self.seconds = 0.0

    def update(
        self, val_loss: float, step: int, model: nn.Module, opt: torch.optim.Optimizer
    ) -> None:
        if val_loss >= self.best:
            return
        t0 = time.perf_counter()
        self.best = val_loss
        torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict()}, self.path)
        self.seconds += time.perf_counter() - t0


class Trainer:
    def __init__(self, cfg: Config, run_dir: str) -> None:
        self.cfg = cfg
        self.train_loader = DataLoader(
            make_split(50_000, 0, cfg), batch_size=cfg.batch_size, shuffle=True
        )
        self.val_loader = DataLoader(make_split(cfg.eval_batches * 256, 1, cfg), batch_size=256)
        self.model = nn.Sequential(
            nn.Linear(cfg.num_features, 256),
            nn.ReLU(),
            nn.Linear(256, 256),
            nn.ReLU(),
            nn.Linear(256, 3),
        )
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        self.ckpt = EarlyStoppingCheckpoint(run_dir)
        self.eval_seconds = 0.0

    @torch.no_grad()
    def validate(self) -> float:
        t0 = time.perf_counter()
        self.model.eval()
        total, n = 0.0, 0
        for x, y in self.val_loader:
            total += F.cross_entropy(self.model(x), y, reduction="sum").item()
            n += len(y)
        self.model.train()
        self.eval_seconds += time.perf_counter() - t0
        return total / n

    def fit(self) -> None:
        step = 0
        self.model.train()
        while step < self.cfg.steps:
            for x, y in self.train_loader:
                loss = F.cross_entropy(self.model(x), y)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt.step()
                step += 1
                if step % self.cfg.eval_every == 0:
                    val = self.validate()
                    self.ckpt.update(val, step, self.model, self.opt)
                    print(
                        f"step {step} train {loss.item():.4f} val {val:.4f} best {self.ckpt.best:.4f}"
                    )
                if step >= self.cfg.steps:
                    break


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=int(os.environ.get("STEPS", 2000)))
    parser.add_argument("--fixed", action="store_true", help="no effect: nothing to fix")
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as run_dir:
        t0 = time.perf_counter()
        trainer = Trainer(Config(steps=args.steps), run_dir)
        trainer.fit()
        total = time.perf_counter() - t0
        print(
            f"total {total:.2f} s, validation {trainer.eval_seconds:.3f} s, checkpoints {trainer.ckpt.seconds:.3f} s"
        )


if __name__ == "__main__":
    main()
