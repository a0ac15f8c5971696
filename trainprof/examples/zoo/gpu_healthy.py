"""GPU-only healthy control: a convnet that keeps the GPU busy, trained the tutorial way.

The pattern: an image classifier whose dataset already lives on the GPU (preloaded once; the
DataLoader only shuffles indices, pinned, and each batch is gathered on the device), bf16
autocast, and the PyTorch tutorial's ``running_loss += loss.item()`` after every step. That
``.item()`` is a device→host sync on every step, and it costs nothing here: the GPU is the
bottleneck, the sync only waits for work the GPU had to do anyway, and between steps the GPU
idles just for the fraction of a millisecond the host needs to launch the next step's first
kernel. trainprof must report no warning and call the job GPU-bound.

Nothing to fix. (When the GPU is *not* the bottleneck, per-step syncs do cost: see
``gpu_sync_heavy.py``.) Needs CUDA: trainprof's GPU tests run it on a lent GPU machine.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader

IMAGES = 4096
BATCH = 256
EPOCHS = 20  # 16 steps an epoch: 320 steps, about one in 16 timed on the GPU's clock
CLASSES = 100


def conv_bn(cin: int, cout: int, stride: int = 1) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


def convnet() -> nn.Module:
    return nn.Sequential(
        conv_bn(3, 64), conv_bn(64, 64), conv_bn(64, 64),  # 64 x 64
        conv_bn(64, 128, 2), conv_bn(128, 128), conv_bn(128, 128),  # 32 x 32
        conv_bn(128, 256, 2), conv_bn(256, 256), conv_bn(256, 256),  # 16 x 16
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, CLASSES),
    )  # fmt: skip


def main() -> None:
    device = torch.device("cuda")
    torch.manual_seed(0)
    g = torch.Generator(device=device).manual_seed(0)
    # The whole (synthetic) dataset, preloaded on the GPU: 200 MB of 64 x 64 images.
    images = torch.randn(IMAGES, 3, 64, 64, device=device, generator=g)
    labels = torch.randint(0, CLASSES, (IMAGES,), device=device, generator=g)
    loader = DataLoader(
        range(IMAGES),
        batch_size=BATCH,
        shuffle=True,
        drop_last=True,
        pin_memory=True,
        generator=torch.Generator().manual_seed(0),
    )
    model = convnet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(EPOCHS):
        model.train()
        running_loss = 0.0
        for idx in loader:
            idx = idx.to(device, non_blocking=True)
            x, y = images[idx], labels[idx]
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()  # the tutorial habit: a sync every step
        print(f"epoch {epoch}: mean loss {running_loss / len(loader):.4f}")


if __name__ == "__main__":
    main()
