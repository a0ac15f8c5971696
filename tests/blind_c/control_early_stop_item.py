"""Healthy control: a regression MLP with per-step ``loss.item()`` early stopping.

What it does: trains a 3-layer MLP (512 wide) on a synthetic regression task for up to
``--steps`` steps. Every step it reads ``loss.item()`` into an exponential moving average
and an ``EarlyStopping`` tracker with patience (plain floats), clips gradients, prints every
100 steps and saves one checkpoint at the end.

Why it looks suspicious: a ``.item()`` and a Python ``if`` on the loss every step, gradient
clipping, a ``torch.save``, a ``print`` in the loop.

Why it is fine: on the CPU ``.item()`` is a read of one float, not a device sync; the
tracker is a few float comparisons; the print runs 4 times and the checkpoint once. The
forward and backward of the 0.56M-parameter MLP at batch 64 are nearly all of the time.

Expert diagnosis: none (no warning or error); where: -.

``--fixed`` changes nothing (it exists for the harness). Measured (2026-11-29, 2 CPUs shared
with other jobs, load average 1.9-2.3, ``OMP_NUM_THREADS=1``, median of 3 runs of
``/usr/bin/time``, noisy): plain 4.23 s, ``--fixed`` 4.25 s.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class Config:
    steps: int = int(os.environ.get("STEPS", "400"))
    features: int = 64
    hidden: int = 512
    batch_size: int = 64
    lr: float = 3e-4
    patience: int = 200
    min_delta: float = 1e-4
    log_every: int = 100


class EarlyStopping:
    """Says stop when the smoothed loss has not improved by ``min_delta`` for ``patience`` steps."""

    def __init__(self, patience: int, min_delta: float) -> None:
        self.patience = patience
        self.min_delta = min_delta
        self.best = math.inf
        self.bad_steps = 0

    def should_stop(self, value: float) -> bool:
        if value < self.best - self.min_delta:
            self.best = value
            self.bad_steps = 0
        else:
            self.bad_steps += 1
        return self.bad_steps >= self.patience


def train(cfg: Config) -> None:
    torch.manual_seed(0)
    w1 = torch.randn(cfg.features, 16)
    model = nn.Sequential(
        nn.Linear(cfg.features, cfg.hidden),
        nn.SiLU(),
        nn.Linear(cfg.hidden, cfg.hidden),
        nn.SiLU(),
        nn.Linear(cfg.hidden, cfg.hidden),
        nn.SiLU(),
        nn.Linear(cfg.hidden, 1),
    )
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    stopper = EarlyStopping(cfg.patience, cfg.min_delta)
    smoothed = None
    t0 = time.perf_counter()
    step = 0
    for step in range(1, cfg.steps + 1):
        x = torch.randn(cfg.batch_size, cfg.features)
        y = torch.tanh(x @ w1).sum(1, keepdim=True)
        loss = nn.functional.smooth_l1_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        value = loss.item()
        smoothed = value if smoothed is None else 0.98 * smoothed + 0.02 * value
        if stopper.should_stop(smoothed):
            print(f"early stop at step {step}: best {stopper.best:.4f}", flush=True)
            break
        if step % cfg.log_every == 0:
            elapsed = time.perf_counter() - t0
            print(f"step {step} loss {smoothed:.4f} ({elapsed:.1f} s)", flush=True)
    out = tempfile.mkdtemp(prefix="run-")
    try:
        torch.save({"step": step, "model": model.state_dict()}, os.path.join(out, "final.pt"))
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=Config.steps)
    parser.add_argument("--fixed", action="store_true", help="accepted; changes nothing")
    args = parser.parse_args()
    train(Config(steps=args.steps))


if __name__ == "__main__":
    main()
