"""Heavy numpy augmentation in ``__getitem__``, ``num_workers=0``, a CNN that fills the CPUs.

Small 32×32 images held in memory; each sample is rotated, blurred, gamma-corrected, noised and
cut out in numpy, in the training process. The model's forward and backward use every CPU
(torch's intra-op threads), so the job already keeps its CPUs busy: moving ``__getitem__``
into a DataLoader worker cannot make it free, the worker takes its CPU from the step. What
helps is a cheaper ``__getitem__``.

``--num-workers N`` sets the loader's workers (to measure that advice); the last line printed
is the steady rate, ``samples/s: X``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SIDE = 32


class AugmentedImages(Dataset):
    def __init__(self, n: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.images = rng.integers(0, 256, size=(n, SIDE, SIDE, 3), dtype=np.uint8)
        self.labels = rng.integers(0, 10, size=n)
        self.rng = np.random.default_rng(seed + 1)
        yy, xx = np.mgrid[0:SIDE, 0:SIDE].astype(np.float32)
        self.grid = (yy - SIDE / 2, xx - SIDE / 2)

    def __len__(self) -> int:
        return len(self.images)

    def rotate(self, image: np.ndarray) -> np.ndarray:
        angle = self.rng.uniform(-0.5, 0.5)
        c, s = np.cos(angle), np.sin(angle)
        yy, xx = self.grid
        src_y = np.clip(np.rint(c * yy - s * xx + SIDE / 2), 0, SIDE - 1).astype(np.intp)
        src_x = np.clip(np.rint(s * yy + c * xx + SIDE / 2), 0, SIDE - 1).astype(np.intp)
        return image[src_y, src_x]

    def blur(self, image: np.ndarray) -> np.ndarray:
        padded = np.pad(image, ((2, 2), (2, 2), (0, 0)), mode="reflect")
        out = np.zeros_like(image)
        for dy in range(5):
            for dx in range(5):
                out += padded[dy : dy + SIDE, dx : dx + SIDE]
        return out / 25.0

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        image = self.images[i].astype(np.float32) / 255.0
        image = self.rotate(image)
        image = self.blur(self.blur(image))
        image = np.power(image, self.rng.uniform(0.7, 1.4))  # gamma
        image = image + self.rng.normal(0.0, 0.05, size=image.shape).astype(np.float32)
        y, x = self.rng.integers(0, SIDE - 8, size=2)
        image[y : y + 8, x : x + 8] = 0.0  # cutout
        chw = np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32)
        return torch.from_numpy(chw), int(self.labels[i])


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 8 * 8, 10),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=12)
    args = parser.parse_args()
    torch.manual_seed(0)
    loader = DataLoader(
        AugmentedImages(512),
        batch_size=32,
        shuffle=True,
        num_workers=args.num_workers,
        persistent_workers=args.num_workers > 0,
    )
    model = cnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    seen, start = 0, None
    for epoch in range(args.epochs):
        running = 0.0
        for images, labels in loader:
            loss = criterion(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            if start is None:
                start = time.perf_counter()  # the first step is warm-up
            else:
                seen += len(labels)
        print(f"epoch {epoch}: mean loss {running / len(loader):.4f}")
    print(f"samples/s: {seen / (time.perf_counter() - (start or 0.0)):.1f}")


if __name__ == "__main__":
    main()
