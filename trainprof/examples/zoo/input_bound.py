"""Input-bound training: every sample is read, decoded and augmented in the main process.

Reproduces the data-loading half of seeds 002 and 003 ("GPU utilisation < 50 % because of data
loading", "image decoding, resize ... reading from disk is slow"): images sit on disk as
compressed files, and each ``__getitem__`` reads one, decompresses it, then does a random
resized crop, a blur, a flip and a colour jitter. With ``num_workers=0`` all of that runs
serially in the training process while the (small) model waits, so most of every step is the
wait for the next batch.

Fix: ``num_workers`` > 0 (up to the usable cores), ``persistent_workers=True``, a larger
``prefetch_factor``; cache decoded samples (bounded), or move fixed preprocessing offline.
"""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import tempfile
import zlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

SIDE = 256
CROP = 112


def write_image_folder(root: str, n_images: int, classes: int) -> list[tuple[str, int]]:
    """Writes smooth synthetic 'photos' as zlib-compressed HWC uint8 files; returns (path, label)."""
    g = torch.Generator().manual_seed(0)
    noise = 0.03 * torch.randn(3, SIDE, SIDE, generator=g)
    samples = []
    for i in range(n_images):
        coarse = torch.rand(1, 3, 6, 6, generator=g)
        image = F.interpolate(coarse, size=(SIDE, SIDE), mode="bilinear", align_corners=False)[0]
        pixels = ((image + noise.roll(i, dims=-1)).clamp(0, 1) * 255).to(torch.uint8)
        hwc = pixels.permute(1, 2, 0).contiguous()
        path = os.path.join(root, f"img_{i:05d}.z")
        with open(path, "wb") as f:
            f.write(zlib.compress(ctypes.string_at(hwc.data_ptr(), hwc.nbytes), 1))
        samples.append((path, int(torch.randint(0, classes, (1,), generator=g))))
    return samples


class ImageFolderDataset(Dataset):
    def __init__(self, samples: list[tuple[str, int]]):
        self.samples = samples
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        self.std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
        self.kernel = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0]) / 16.0

    def __len__(self) -> int:
        return len(self.samples)

    def load(self, path: str) -> torch.Tensor:
        with open(path, "rb") as f:
            raw = zlib.decompress(f.read())
        hwc = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(SIDE, SIDE, 3)
        return hwc.permute(2, 0, 1).float().div_(255.0)

    def augment(self, image: torch.Tensor) -> torch.Tensor:
        # Random resized crop.
        size = int(SIDE * random.uniform(0.5, 1.0))
        top, left = random.randint(0, SIDE - size), random.randint(0, SIDE - size)
        crop = image[None, :, top : top + size, left : left + size]
        crop = F.interpolate(crop, size=(CROP, CROP), mode="bilinear", antialias=True)
        # Separable Gaussian blur.
        k = self.kernel
        crop = F.conv2d(
            F.pad(crop, (2, 2, 0, 0), mode="reflect"),
            k.view(1, 1, 1, 5).expand(3, 1, 1, 5),
            groups=3,
        )
        crop = F.conv2d(
            F.pad(crop, (0, 0, 2, 2), mode="reflect"),
            k.view(1, 1, 5, 1).expand(3, 1, 5, 1),
            groups=3,
        )
        crop = crop[0]
        if random.random() < 0.5:
            crop = crop.flip(-1)
        # Colour jitter: brightness, contrast, saturation.
        crop = crop * random.uniform(0.8, 1.2)
        gray = crop.mean(dim=0, keepdim=True)
        crop = (crop - gray.mean()) * random.uniform(0.8, 1.2) + gray.mean()
        crop = gray + (crop - gray) * random.uniform(0.8, 1.2)
        return (crop.clamp(0, 1) - self.mean) / self.std

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        return self.augment(self.load(path)), label


def small_cnn(classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 5, stride=4, padding=2),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, classes),
    )


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    random.seed(0)
    root = tempfile.mkdtemp(prefix="zoo-input-bound-")
    try:
        dataset = ImageFolderDataset(write_image_folder(root, n_images=192, classes=10))
        loader = DataLoader(dataset, batch_size=16, shuffle=True, num_workers=0)
        model = small_cnn(classes=10)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        criterion = nn.CrossEntropyLoss()

        for epoch in range(8):  # ~2 s of steady state on a fast CPU (5 gave 1.27 s)
            model.train()
            running = 0.0
            for images, labels in loader:
                loss = criterion(model(images), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                running += loss.item()
            print(f"epoch {epoch}: mean loss {running / len(loader):.4f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
