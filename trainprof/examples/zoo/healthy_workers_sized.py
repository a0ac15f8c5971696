"""Healthy control: DataLoader workers and torch's intra-op threads sized to the CPUs together.

The ``workers_oversubscribed`` job (pytorch/examples' ``imagenet/main.py`` in shape: workers
decode and augment images, the main process trains a convnet) with the fix applied: one worker
fewer than the CPUs it may use (``-j 1`` on 2 CPUs) and ``torch.set_num_threads`` for the rest,
so that no thread of the job waits for another's CPU. Measured under trainprof on 2 CPUs shared
with other work (the job's session given priority), four runs: the loop's thread waited for a
CPU 1-4 % of the time. The same ``-j 1`` with torch's default 2 intra-op threads is 3 threads on
2 CPUs, and its loop waited 30-31 %: fewer workers alone do not make room. trainprof should
report no warning or error.
"""

from __future__ import annotations

import argparse
import os
import random
import zlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

SIDE, CROP = 72, 56
BLUR_PASSES = 6  # the decode's cost: a JPEG's inverse DCT and colour conversion, in its place


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class EncodedImages(Dataset):
    """Compressed images decoded and augmented in ``__getitem__``, as ImageFolder with
    RandomResizedCrop, RandomHorizontalFlip, ToTensor and Normalize does."""

    def __init__(self, n: int = 1280, classes: int = 10):
        g = torch.Generator().manual_seed(0)
        coarse = torch.rand(32, 3, SIDE // 8, SIDE // 8, generator=g)
        images = (F.interpolate(coarse, size=SIDE, mode="bilinear") * 255).to(torch.uint8)
        self.blobs = [zlib.compress(images[i % 32].numpy().tobytes(), 6) for i in range(n)]
        self.labels = torch.randint(0, classes, (n,), generator=g).tolist()
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        self.std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.blobs)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        raw = bytearray(zlib.decompress(self.blobs[index]))
        image = torch.frombuffer(raw, dtype=torch.uint8).view(1, 3, SIDE, SIDE).float() / 255
        for _ in range(BLUR_PASSES):
            image = F.avg_pool2d(image, 3, 1, 1)
        side = random.randint(CROP, SIDE)
        top, left = random.randint(0, SIDE - side), random.randint(0, SIDE - side)
        crop = image[:, :, top : top + side, left : left + side]
        image = F.interpolate(crop, size=(CROP, CROP), mode="bilinear", align_corners=False)[0]
        if random.random() < 0.5:
            image = image.flip(-1)
        return (image - self.mean) / self.std, self.labels[index]


def convnet(classes: int = 10) -> nn.Module:
    def block(cin: int, cout: int) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()
        )

    return nn.Sequential(
        block(3, 32),
        nn.MaxPool2d(2),
        block(32, 64),
        nn.MaxPool2d(2),
        block(64, 64),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, classes),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="ImageNet-style training, small")
    parser.add_argument("-j", "--workers", default=max(1, usable_cpus() - 1), type=int)
    parser.add_argument("-b", "--batch-size", default=32, type=int)
    parser.add_argument("--epochs", default=2, type=int)
    parser.add_argument("--lr", default=0.1, type=float)
    parser.add_argument("-p", "--print-freq", default=20, type=int)
    args = parser.parse_args()
    torch.set_num_threads(max(1, usable_cpus() - args.workers))  # the CPUs the workers leave
    torch.manual_seed(0)
    random.seed(0)
    train_loader = DataLoader(
        EncodedImages(), batch_size=args.batch_size, shuffle=True, num_workers=args.workers
    )
    model = convnet()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)
    for epoch in range(args.epochs):
        model.train()
        for i, (images, target) in enumerate(train_loader):
            output = model(images)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if i % args.print_freq == 0:
                print(
                    f"Epoch: [{epoch}][{i}/{len(train_loader)}] Loss {loss.item():.4f}", flush=True
                )


if __name__ == "__main__":
    main()
