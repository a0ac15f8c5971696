"""Retail demand forecaster (a GRU over 28 days of sales) that reports the MAPE of the
batch's first store after each step, computed on Python floats, and crashes in the main
process when a store has a day without sales.

Diagnosis: `mape` divides by the true value with Python floats
(`abs(p - t) / abs(t)`); the synthetic series are Poisson counts, and once a store with
sparse sales comes up (here after some steps of normal training) a target is exactly 0:
`ZeroDivisionError: float division by zero` in the main process, exit status 1.

Fix: a metric that is defined at zero (sMAPE with an epsilon, or MAE/WAPE over the batch);
`--fixed` uses WAPE (sum of absolute errors over the sum of actuals, of the whole batch) and
trains to the end.

Measured cost: the job dies at its first batch containing a zero-sales target (exit status 1).
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import nn

STEPS = int(os.environ.get("STEPS", "300"))
WINDOW, HORIZON, BATCH = 28, 7, 64


def mape(pred: list[float], true: list[float]) -> float:
    return 100.0 * sum(abs(p - t) / abs(t) for p, t in zip(pred, true, strict=True)) / len(true)


def wape(pred: torch.Tensor, true: torch.Tensor) -> float:
    return float(100.0 * (pred - true).abs().sum() / true.abs().sum().clamp_min(1e-6))


def make_batch(step: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    # busy stores first; small stores (mean a few sales a day) join the sampling after step 180
    rate = 20.0 + 10.0 * torch.rand(BATCH, 1, generator=g)
    if step >= 180:
        rate[: BATCH // 4] = 0.5 + torch.rand(BATCH // 4, 1, generator=g)
    days = torch.arange(WINDOW + HORIZON).float()
    season = 1.0 + 0.3 * torch.sin(2 * torch.pi * days / 7)
    series = torch.poisson(rate * season, generator=g)
    return series[:, :WINDOW, None], series[:, WINDOW:]


class Forecaster(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(1, 64, num_layers=2, batch_first=True)
        self.head = nn.Linear(64, HORIZON)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.mean(1, keepdim=True) + 1.0
        h = self.gru(x / scale)[0][:, -1]
        return self.head(h) * scale.squeeze(-1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixed", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = Forecaster()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(STEPS):
        x, y = make_batch(step, g)
        pred = model(x)
        loss = nn.functional.l1_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if args.fixed:
            score = wape(pred.detach(), y)
        else:
            score = mape(pred[0].tolist(), y[0].tolist())
        if step % 50 == 0:
            print(f"step {step} l1 {loss.item():.3f} error {score:.1f}%", flush=True)
    print("done")


if __name__ == "__main__":
    main()
