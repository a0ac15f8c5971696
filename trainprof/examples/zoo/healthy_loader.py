"""Healthy control: a well-configured multi-worker DataLoader whose workers keep up.

Each sample gets a light random-crop/flip augmentation in ``__getitem__``; two persistent
workers (``persistent_workers=True``, default ``prefetch_factor``) prepare batches well ahead
of a model that takes longer per step than a batch takes to build, so the training loop
almost never waits for data, and epochs after the first start without re-creating workers.
``pin_memory`` stays off on a CPU-only machine. trainprof should report no warning or error.
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class AugmentedImages(Dataset):
    def __init__(self, n: int = 1280, side: int = 36, crop: int = 32, classes: int = 10):
        g = torch.Generator().manual_seed(0)
        self.images = (torch.rand(n, 3, side, side, generator=g) * 255).to(torch.uint8)
        self.labels = torch.randint(0, classes, (n,), generator=g)
        self.side, self.crop = side, crop

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        top = random.randint(0, self.side - self.crop)
        left = random.randint(0, self.side - self.crop)
        image = self.images[index, :, top : top + self.crop, left : left + self.crop]
        if random.random() < 0.5:
            image = image.flip(-1)
        return image.float().div(255.0).sub(0.5), self.labels[index]


class SmallResNet(nn.Module):
    def __init__(self, width: int = 32, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width)
        )
        self.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.max_pool2d(F.relu(self.stem(x)), 2)
        h = F.relu(h + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(h))))))
        return self.head(F.adaptive_avg_pool2d(h, 1).flatten(1))


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dataset = AugmentedImages()
    loader = DataLoader(
        dataset,
        batch_size=64,
        shuffle=True,
        num_workers=2,
        persistent_workers=True,
        pin_memory=False,
        drop_last=True,
    )
    model = SmallResNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    for epoch in range(3):
        model.train()
        running = torch.zeros(())
        for images, labels in loader:
            loss = criterion(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            running += loss.detach()
        print(f"epoch {epoch}: mean loss {running.item() / len(loader):.4f}")


if __name__ == "__main__":
    main()
