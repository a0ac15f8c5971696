"""GPU-only: the GPU waits for images decoded and augmented on the CPU in the training loop.

The pattern (seeds 002/003 on a GPU: "GPU utilisation < 50 % because of data loading"): the
images are stored compressed, and each ``__getitem__`` decompresses one, then does a random
resized crop, a flip and a colour jitter on the CPU. With ``num_workers=0`` all of it runs
serially in the training process, batch after batch, while the model (a convnet in bf16,
fast on any modern GPU) finishes each step in a few milliseconds and then has nothing to do.
The loader is otherwise well configured (pinned memory, non-blocking copies).

Fix: ``num_workers`` > 0 (up to the usable cores) with ``persistent_workers=True`` and a
larger ``prefetch_factor``; cache decoded samples (bounded) or decode offline; move the
augmentation to the GPU (batched). Needs CUDA: trainprof's GPU tests run it on a lent GPU
machine.
"""

from __future__ import annotations

import ctypes
import random
import zlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

SIDE = 128
CROP = 112
IMAGES = 512
BATCH = 64
EPOCHS = 28  # 8 steps an epoch: 224 steps
CLASSES = 10


def compressed_images(n: int) -> list[bytes]:
    """Smooth synthetic 'photos', stored as zlib-compressed HWC uint8 (like files on disk)."""
    g = torch.Generator().manual_seed(0)
    noise = 0.03 * torch.randn(3, SIDE, SIDE, generator=g)
    out = []
    for i in range(n):
        coarse = torch.rand(1, 3, 6, 6, generator=g)
        image = F.interpolate(coarse, size=(SIDE, SIDE), mode="bilinear", align_corners=False)[0]
        pixels = ((image + noise.roll(i, dims=-1)).clamp(0, 1) * 255).to(torch.uint8)
        hwc = pixels.permute(1, 2, 0).contiguous()
        out.append(zlib.compress(ctypes.string_at(hwc.data_ptr(), hwc.nbytes), 1))
    return out


class CompressedImages(Dataset):
    def __init__(self, blobs: list[bytes]):
        self.blobs = blobs
        self.labels = [i % CLASSES for i in range(len(blobs))]
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        self.std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.blobs)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        raw = zlib.decompress(self.blobs[index])  # decode
        hwc = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(SIDE, SIDE, 3)
        image = hwc.permute(2, 0, 1).float().div_(255.0)
        size = int(SIDE * random.uniform(0.5, 1.0))  # random resized crop
        top, left = random.randint(0, SIDE - size), random.randint(0, SIDE - size)
        crop = image[None, :, top : top + size, left : left + size]
        crop = F.interpolate(crop, size=(CROP, CROP), mode="bilinear", antialias=True)[0]
        if random.random() < 0.5:
            crop = crop.flip(-1)
        crop = crop * random.uniform(0.8, 1.2)  # colour jitter: brightness, contrast
        gray = crop.mean()
        crop = (crop - gray) * random.uniform(0.8, 1.2) + gray
        return (crop.clamp(0, 1) - self.mean) / self.std, self.labels[index]


def main() -> None:
    device = torch.device("cuda")
    torch.manual_seed(0)
    random.seed(0)
    dataset = CompressedImages(compressed_images(IMAGES))
    loader = DataLoader(
        dataset, batch_size=BATCH, shuffle=True, drop_last=True, num_workers=0, pin_memory=True
    )
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),  # 56 x 56
        nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(),  # 28
        nn.Conv2d(128, 256, 3, stride=2, padding=1), nn.BatchNorm2d(256), nn.ReLU(),  # 14
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, CLASSES),
    ).to(device)  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(EPOCHS):
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
        if epoch % 7 == 6:
            print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
