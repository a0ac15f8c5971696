"""Numpy in the forward: a custom autograd Function quantizes activations in numpy.

A small intent classifier over bag-of-words features simulates 4-bit activations with a straight-through estimator written
as a ``torch.autograd.Function`` whose ``forward`` leaves torch: it copies the tensor to numpy,
computes each sample's percentiles for its clipping range, row by row, rounds, and copies back. The model's own
operators are a small part of the step; the Python and numpy called from inside the forward
are most of it, every step.

Fix: write the quantizer in torch operators on the tensor (``torch.quantile`` or a running
min/max, ``torch.round``, ``clamp``), with no copy to numpy, or use
``torch.fake_quantize_per_tensor_affine``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES, CLASSES = 300, 6


class FakeQuant4(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        a = x.detach().numpy()
        q = np.empty_like(a)
        for r, row in enumerate(a):  # each sample's own clipping range
            lo, hi = np.percentile(row, [1, 99])
            scale = max(hi - lo, 1e-6) / 15.0
            q[r] = np.round((np.clip(row, lo, hi) - lo) / scale) * scale + lo
        return torch.from_numpy(q)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return grad


class QuantIntentClassifier(nn.Module):
    def __init__(self, dim: int = 128):
        super().__init__()
        self.stem = nn.Linear(FEATURES, dim)
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(3))
        self.head = nn.Linear(dim, CLASSES)

    def forward(self, bag: torch.Tensor) -> torch.Tensor:
        h = FakeQuant4.apply(torch.relu(self.stem(bag)))
        for layer in self.layers:
            h = FakeQuant4.apply(torch.relu(layer(h)))
        return self.head(h)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    n = 8192
    bags = (torch.rand(n, FEATURES) < 0.05).float()
    labels = bags[:, :CLASSES].argmax(dim=1)
    loader = DataLoader(TensorDataset(bags, labels), batch_size=128, shuffle=True, drop_last=True)
    model = QuantIntentClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(2):
        for step, (x, y) in enumerate(loader):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 40 == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
