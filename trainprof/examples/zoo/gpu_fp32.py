"""GPU-only: a small convnet trained entirely in fp32 on a Tensor-Core GPU (seed 001).

The write-up's guide: on Volta and newer, fp16/bf16 autocast (and TF32 on Ampere) uses the
Tensor Cores; pure fp32 leaves them idle. Fix: ``with torch.autocast("cuda",
dtype=torch.bfloat16):`` around forward and loss, and ``torch.set_float32_matmul_precision("high")``.
Needs CUDA: trainprof's GPU tests run it on a lent GPU machine.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    device = torch.device("cuda")
    images = torch.randn(4096, 3, 64, 64)
    labels = torch.randint(0, 10, (4096,))
    loader = DataLoader(
        TensorDataset(images, labels), batch_size=128, shuffle=True, pin_memory=True
    )
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10),
    ).to(device)  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _epoch in range(3):
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    print(f"final loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
