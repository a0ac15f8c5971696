"""Paced control for `trainprof attach`: a healthy loop held at a fixed step rate.

Each step loads a batch whose ``__getitem__`` waits for the next tick of a fixed schedule (as
a reader throttled by a remote store would), then runs forward, backward and the optimizer on
a small MLP sized so the compute takes about half the step. The rate is set by
``--rate`` (it/s), so tests can compare the iteration rate `trainprof attach` estimates from
the stacks with the one `trainprof run` measures, at any rate. It prints its own measured rate
every ``--report`` seconds, and ``training`` once the first step is done.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Throttled(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Samples that become available one batch per tick of a fixed schedule."""

    def __init__(self, period_s: float, batch: int, dim: int) -> None:
        self.period_s, self.batch, self.dim = period_s, batch, dim
        self.next_tick = time.monotonic()

    def __len__(self) -> int:
        return 10**9

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if i % self.batch == 0:  # the first sample of a batch waits for its tick
            self.next_tick += self.period_s
            delay = self.next_tick - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                self.next_tick = time.monotonic()  # behind: do not try to catch up
        return torch.randn(self.dim), torch.tensor(i % 10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=10.0, help="steps per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to train")
    parser.add_argument("--report", type=float, default=1.0, help="print the rate this often")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    period = 1.0 / args.rate
    dim, batch = 64, 16
    model = nn.Sequential(
        nn.Linear(dim, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    # Size the work to about half a step (a real loop at 2 it/s computes, it does not sleep):
    # time forward and backward after a warm-up and scale the batch, a few rounds (time is not
    # linear in the batch size for a small model).
    criterion = nn.CrossEntropyLoss()
    x, y = torch.randn(batch, dim), torch.randint(0, 10, (batch,))
    repeats = 1
    for _ in range(3):
        xs, ys = x.repeat(repeats, 1), y.repeat(repeats)
        times = []
        for i in range(12):
            start = time.perf_counter()
            loss = criterion(model(xs), ys)
            model.zero_grad()
            loss.backward()  # no optimizer step: the steps trainprof counts are training's
            if i >= 2:  # the first passes allocate
                times.append(time.perf_counter() - start)
        one = sorted(times)[len(times) // 2]
        repeats = max(1, round(repeats * 0.5 * period / one))
    loader = DataLoader(Throttled(period, batch, dim), batch_size=batch)
    t_end = time.monotonic() + args.seconds
    last, steps, step = time.monotonic(), 0, 0
    for xb, yb in loader:
        inputs = xb.repeat(repeats, 1)
        targets = yb.repeat(repeats)
        loss = criterion(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        steps += 1
        now = time.monotonic()
        if step == 1:
            print("training", flush=True)
        if now - last >= args.report:
            print(f"rate {steps / (now - last):.3f} it/s at {now:.3f}", flush=True)
            last, steps = now, 0
        if now > t_end:
            break


if __name__ == "__main__":
    main()
