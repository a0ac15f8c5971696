"""Healthy control: a small CNN on an ``.npz`` dataset read once, with per-sample augmentation.

What it does: writes a synthetic 10-class image set (2,048 images, 3x32x32) to one ``.npz``
file, then trains a small CNN for ``--steps`` steps. ``PreloadedImages`` loads the archive
once in ``__init__``; ``__getitem__`` does a random crop with padding and a random flip in
numpy. The DataLoader has ``num_workers=0``.

Why it looks suspicious: a Dataset backed by an ``.npz`` file, numpy work per sample in
``__getitem__``, no DataLoader workers, a print every 25 steps.

Why it is fine: the archive is read once; a crop and flip of one 3x32x32 image take tens
of microseconds, so a batch of 32 is ready in about 2 ms, against a convolution step of
35-50 ms (measured: 2.0 ms and 36.5 ms, 5 %). The loop does not wait for its data.

Expert diagnosis: none (no warning or error); where: -.

``--fixed`` changes nothing (it exists for the harness). Measured (2026-11-29, 2 CPUs shared
with other jobs, load average 1.8-2.0, ``OMP_NUM_THREADS=1``, median of 3 runs of
``/usr/bin/time``, noisy): plain 5.00 s, ``--fixed`` 5.11 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


@dataclass
class Config:
    steps: int = int(os.environ.get("STEPS", "70"))
    images: int = 2048
    batch_size: int = 32
    lr: float = 1e-3
    pad: int = 4
    log_every: int = 25


class PreloadedImages(Dataset):
    """Images and labels of one npz archive, in memory, with crop-and-flip augmentation."""

    def __init__(self, path: str, pad: int, seed: int = 0) -> None:
        with np.load(path) as archive:
            self.images = archive["images"]
            self.labels = archive["labels"].astype(np.int64)
        self.pad = pad
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = self.images[index]
        p = self.pad
        padded = np.pad(image, ((0, 0), (p, p), (p, p)), mode="reflect")
        dy, dx = self.rng.integers(0, 2 * p + 1, size=2)
        crop = padded[:, dy : dy + image.shape[1], dx : dx + image.shape[2]]
        if self.rng.random() < 0.5:
            crop = crop[:, :, ::-1]
        return torch.from_numpy(np.ascontiguousarray(crop)), int(self.labels[index])


def write_dataset(path: str, n: int) -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, size=n)
    images = rng.standard_normal((n, 3, 32, 32), dtype=np.float32) * 0.5
    images += labels[:, None, None, None].astype(np.float32) / 10
    np.savez(path, images=images, labels=labels)


def build_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )


def train(cfg: Config) -> None:
    torch.manual_seed(0)
    root = tempfile.mkdtemp(prefix="images-")
    try:
        path = os.path.join(root, "train.npz")
        write_dataset(path, cfg.images)
        loader = DataLoader(
            PreloadedImages(path, cfg.pad), batch_size=cfg.batch_size, shuffle=True, drop_last=True
        )
        model = build_model()
        opt = torch.optim.SGD(model.parameters(), lr=cfg.lr * 50, momentum=0.9, nesterov=True)
        loss_fn = nn.CrossEntropyLoss()
        step, t0 = 0, time.perf_counter()
        while step < cfg.steps:
            for images, labels in loader:
                loss = loss_fn(model(images), labels)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                step += 1
                if step % cfg.log_every == 0:
                    elapsed = time.perf_counter() - t0
                    print(f"step {step} loss {loss.item():.4f} ({elapsed:.1f} s)", flush=True)
                if step >= cfg.steps:
                    break
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=Config.steps)
    parser.add_argument("--fixed", action="store_true", help="accepted; changes nothing")
    args = parser.parse_args()
    train(Config(steps=args.steps))


if __name__ == "__main__":
    main()
