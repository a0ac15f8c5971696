"""Numpy augmentation in ``__getitem__``, ``num_workers=0``, a model sized to one CPU of several.

Small 32×32 images held in memory; each sample is flipped, cropped, noised and normalized in
numpy, in the training process. The model runs on one intra-op thread, so the job leaves a CPU
free while the loop waits for data: a DataLoader worker makes the next batch there, in
parallel with the step.

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


class FlippedImages(Dataset):
    def __init__(self, n: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.images = rng.integers(0, 256, size=(n, SIDE + 4, SIDE + 4, 3), dtype=np.uint8)
        self.labels = rng.integers(0, 10, size=n)
        self.rng = np.random.default_rng(seed + 1)
        self.mean = np.array([0.49, 0.48, 0.45], dtype=np.float32)
        self.std = np.array([0.25, 0.24, 0.26], dtype=np.float32)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        y, x = self.rng.integers(0, 5, size=2)
        image = self.images[i, y : y + SIDE, x : x + SIDE].astype(np.float32) / 255.0
        if self.rng.random() < 0.5:
            image = image[:, ::-1]
        for _ in range(20):  # colour jitter, in passes
            image = np.clip(image * self.rng.uniform(0.9, 1.1) + self.rng.normal(0, 0.02), 0, 1)
        image = (image - self.mean) / self.std
        chw = np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32)
        return torch.from_numpy(chw), int(self.labels[i])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the model is small: one intra-op thread runs it best
    torch.manual_seed(0)
    loader = DataLoader(
        FlippedImages(1024),
        batch_size=32,
        shuffle=True,
        num_workers=args.num_workers,
        persistent_workers=args.num_workers > 0,
    )
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(4),
        nn.Flatten(),
        nn.Linear(1024, 10),
    )
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
