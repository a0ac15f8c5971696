"""The bundled demo job: a small CPU model trained with two classic mistakes.

1. Fake batching (seed 000): the DataLoader yields one sample at a time and a Python loop
   calls next() eight times per optimizer step, accumulating gradients, instead of asking
   for batch_size=8.
2. A slow dataset read in the main process (num_workers=0): every sample costs a few
   milliseconds of "decoding" while the model waits.
"""

from __future__ import annotations

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

ACCUMULATE = 8
STEPS = 400  # about 3 s of steady state on a fast CPU: the rules need 1 s of it


class SlowImages(Dataset):
    def __init__(self, n: int = 4096) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.0005)  # stands in for reading and decoding a file from disk
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), i % 10


def main() -> None:
    torch.set_num_threads(1)
    model = nn.Sequential(
        nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SlowImages(), batch_size=1, shuffle=True)
    it = iter(loader)
    for step in range(STEPS):
        opt.zero_grad()
        for _ in range(ACCUMULATE):
            x, y = next(it)
            loss = nn.functional.cross_entropy(model(x), y) / ACCUMULATE
            loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item() * ACCUMULATE:.3f}")


if __name__ == "__main__":
    main()
