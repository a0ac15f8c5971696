"""GPU-only: a convnet trained entirely in fp32 on a Tensor-Core GPU, TF32 off (seed 001).

The pattern: the training loop never enters ``torch.autocast``, and TF32 was switched off for
bit-for-bit comparisons with a CPU reference (``torch.backends.cuda.matmul.allow_tf32 =
False``, ``torch.set_float32_matmul_precision("highest")``, ``torch.backends.cudnn.allow_tf32
= False``) and never switched back on. Every convolution and matmul then runs on the fp32
units: the Tensor Cores stay idle and an H100 trains several times slower than it could. The
data already lives on the GPU (the loader only shuffles indices), so the GPU really is the
bottleneck: nothing else is wrong.

The write-up's guide: on Volta and newer, fp16/bf16 autocast (and TF32 on Ampere) uses the
Tensor Cores. Fix: ``with torch.autocast("cuda", dtype=torch.bfloat16):`` around forward and
loss, and ``torch.set_float32_matmul_precision("high")`` for what stays in fp32.
Needs CUDA: trainprof's GPU tests run it on a lent GPU machine.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader

IMAGES = 4096
BATCH = 256
EPOCHS = 15  # 16 steps an epoch: 240 steps, about one in 16 timed on the GPU's clock
CLASSES = 10


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    device = torch.device("cuda")
    torch.manual_seed(0)
    g = torch.Generator(device=device).manual_seed(0)
    images = torch.randn(IMAGES, 3, 64, 64, device=device, generator=g)  # preloaded, 200 MB
    labels = torch.randint(0, CLASSES, (IMAGES,), device=device, generator=g)
    loader = DataLoader(
        range(IMAGES),
        batch_size=BATCH,
        shuffle=True,
        drop_last=True,
        pin_memory=True,
        generator=torch.Generator().manual_seed(0),
    )
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(),  # 64 x 64
        nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.ReLU(),  # 32 x 32
        nn.Conv2d(128, 128, 3, padding=1), nn.ReLU(),
        nn.Conv2d(128, 256, 3, stride=2, padding=1), nn.ReLU(),  # 16 x 16
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 512), nn.ReLU(),
        nn.Linear(512, CLASSES),
    ).to(device)  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(EPOCHS):
        for idx in loader:
            idx = idx.to(device, non_blocking=True)
            x, y = images[idx], labels[idx]
            loss = nn.functional.cross_entropy(model(x), y)  # fp32 throughout
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if epoch % 5 == 4:
            print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
