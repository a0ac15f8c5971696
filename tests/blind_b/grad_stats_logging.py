"""Small CNN trainer whose per-step logging callback formats every layer's gradient statistics.

Expert diagnosis: logging overhead. `GradStatsLogger.on_step_end` runs after every optimizer
step and sends one `logging.info` record per parameter tensor, with the gradient's norm, mean
and max passed as tensors, so each record formats tensor reprs (`tensor(0.0123)`), and the
records go to both a console handler and a file. A few milliseconds of formatting and I/O per
step, on steps that take a few milliseconds themselves.

Fix (`--fixed`): log a summary every `log_every` steps (and call `.item()` on the values
first); the per-step records go.

Measured on 2026-11-29 with `OMP_NUM_THREADS=1` on a 2-core machine shared with other jobs
(load average ~2.5; one run each, so expect noise), 500 steps, process wall time:
plain 8.8 s (7.2 s by the script's timer), `--fixed` 5.5 s (3.9 s): the per-step logging costs
about 1.9x.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

log = logging.getLogger("trainer")


@dataclass
class Config:
    steps: int = 500
    batch_size: int = 32
    lr: float = 1e-3
    log_every: int = 100
    per_step_grad_logging: bool = True


class Callback:
    def on_step_end(self, trainer: Trainer, step: int, loss: torch.Tensor) -> None:
        pass


class GradStatsLogger(Callback):
    """Logs the loss and per-layer gradient statistics."""

    def __init__(self, every_step: bool, log_every: int) -> None:
        self.every_step = every_step
        self.log_every = log_every

    def on_step_end(self, trainer: Trainer, step: int, loss: torch.Tensor) -> None:
        if self.every_step:
            log.info("step %d loss %s", step, loss.detach())
            for name, p in trainer.model.named_parameters():
                g = p.grad.detach()
                log.info("  %-24s norm %s mean %s max %s", name, g.norm(), g.mean(), g.abs().max())
        elif step % self.log_every == 0:
            norms = [p.grad.detach().norm().item() for p in trainer.model.parameters()]
            log.info("step %d loss %.4f grad-norm max %.4f", step, loss.item(), max(norms))


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class Trainer:
    def __init__(self, cfg: Config, callbacks: list[Callback]) -> None:
        self.cfg = cfg
        self.model = SmallCNN()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=cfg.lr * 10, momentum=0.9)
        self.callbacks = callbacks
        gen = torch.Generator().manual_seed(0)
        self.images = torch.randn(2048, 1, 28, 28, generator=gen)
        self.labels = torch.randint(0, 10, (2048,), generator=gen)

    def batches(self):
        n = self.images.shape[0]
        while True:
            perm = torch.randperm(n)
            for i in range(0, n - self.cfg.batch_size + 1, self.cfg.batch_size):
                idx = perm[i : i + self.cfg.batch_size]
                yield self.images[idx], self.labels[idx]

    def fit(self) -> None:
        self.model.train()
        it = self.batches()
        for step in range(1, self.cfg.steps + 1):
            x, y = next(it)
            loss = F.cross_entropy(self.model(x), y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            for cb in self.callbacks:
                cb.on_step_end(self, step, loss)


def setup_logging(run_dir: str) -> None:
    log.setLevel(logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    for handler in (
        logging.StreamHandler(sys.stdout),
        logging.FileHandler(os.path.join(run_dir, "train.log")),
    ):
        handler.setFormatter(fmt)
        log.addHandler(handler)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=int(os.environ.get("STEPS", 500)))
    parser.add_argument("--fixed", action="store_true", help="log a summary every 100 steps")
    args = parser.parse_args()
    torch.manual_seed(0)
    cfg = Config(steps=args.steps, per_step_grad_logging=not args.fixed)
    with tempfile.TemporaryDirectory() as run_dir:
        setup_logging(run_dir)
        t0 = time.perf_counter()
        trainer = Trainer(cfg, [GradStatsLogger(cfg.per_step_grad_logging, cfg.log_every)])
        trainer.fit()
        print(f"total {time.perf_counter() - t0:.2f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
