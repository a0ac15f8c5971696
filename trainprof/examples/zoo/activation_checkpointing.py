"""Healthy control: activation checkpointing, and an EMA of the weights under @torch.no_grad().

Memory-bound models trade compute for memory with ``torch.utils.checkpoint``: each block keeps
only its input, and autograd runs the block's forward again during backward to get the
activations it needs. py-spy then sees module forward frames under ``loss.backward()``: that
time is backward's (it was read as forward, 43 % of the step instead of ~28 %). The EMA update
runs in a function decorated with ``@torch.no_grad()``, under torch/autograd's grad-mode
wrapper, which is not backward either. trainprof should report no warning.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, TensorDataset

STEPS = 80  # ~4 s of steady state on a fast CPU: enough 50 Hz samples to split the step


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.ff(self.norm(x))


class DeepMLP(nn.Module):
    def __init__(self, dim: int = 192, depth: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)  # recomputed during backward
        return self.head(x)


@torch.no_grad()
def update_ema(ema: nn.Module, model: nn.Module, decay: float = 0.999) -> None:
    for e, p in zip(ema.parameters(), model.parameters(), strict=True):
        e.lerp_(p, 1.0 - decay)


def main() -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    x = torch.randn(256 * 30, 192, generator=g)
    y = x[:, :10].argmax(dim=1)
    loader = DataLoader(TensorDataset(x, y), batch_size=256, shuffle=True, drop_last=True)
    model = DeepMLP()
    ema = copy.deepcopy(model).requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = 0
    while step < STEPS:
        for features, labels in loader:
            loss = nn.functional.cross_entropy(model(features), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            update_ema(ema, model)
            step += 1
            if step % 30 == 0:
                print(f"step {step}: loss {loss.item():.3f}")
            if step == STEPS:
                break


if __name__ == "__main__":
    main()
