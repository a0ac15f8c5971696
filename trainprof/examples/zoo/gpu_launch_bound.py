"""GPU-only: launch-bound training, a deep stack of tiny layers at batch 8.

The pattern: a small residual MLP (48 blocks of LayerNorm + Linear(64, 64) + GELU) trained at
batch size 8, with an AdamW configured ``foreach=False`` (copied from a big-model config, "to
save memory"), so it updates its ~200 parameter tensors one by one. Every step launches about
two thousand kernels of a few microseconds each; the host needs tens of microseconds of
Python and dispatch per launch, so the GPU finishes each kernel long before the next one
arrives and sits mostly idle, although the data is already on the GPU and the loop neither
waits for data nor syncs.

Fix: more work per launch (a bigger batch: compare samples/s, not it/s), fewer launches: the
default ``foreach`` or ``fused=True`` optimizer (one kernel for all parameters), and
``torch.compile(model, mode="reduce-overhead")`` (CUDA graphs: one launch per step).
Needs CUDA: trainprof's GPU tests run it on a lent GPU machine.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

ROWS = 8192
WIDTH = 64
DEPTH = 48
BATCH = 8
STEPS = 320


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.gelu(self.fc(self.norm(x)))


def main() -> None:
    device = torch.device("cuda")
    torch.manual_seed(0)
    g = torch.Generator(device=device).manual_seed(0)
    inputs = torch.randn(ROWS, WIDTH, device=device, generator=g)  # preloaded on the GPU
    targets = inputs.roll(1, dims=1).tanh()
    loader = DataLoader(
        range(ROWS),
        batch_size=BATCH,
        shuffle=True,
        drop_last=True,
        pin_memory=True,
        generator=torch.Generator().manual_seed(0),
    )
    model = nn.Sequential(*[Block(WIDTH) for _ in range(DEPTH)], nn.Linear(WIDTH, WIDTH))
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    step = 0
    while step < STEPS:
        for idx in loader:
            idx = idx.to(device, non_blocking=True)
            x, y = inputs[idx], targets[idx]
            optimizer.zero_grad(set_to_none=True)
            loss = F.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            step += 1
            if step == STEPS:
                break
    print(f"{step} steps, final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
