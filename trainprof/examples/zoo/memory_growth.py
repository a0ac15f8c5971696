"""Memory growth: an unbounded in-RAM cache of decoded samples inside each DataLoader worker.

Reproduces seed 003 (VRT-Spike, host memory "explodes" until OOM): the dataset keeps every
decoded (blurred, sharp) frame pair in a plain ``dict`` so later epochs skip decoding. Each
DataLoader worker is a separate process with its own copy of that dict, so resident memory
grows by the size of every decoded sample the worker has seen, in every worker, for as long
as the run lasts (and a sample seen by both workers is cached twice). Nothing is ever
evicted; on a real dataset this ends in the OOM killer.

Fix: bound the cache (an LRU with a byte budget, as the authors did), cache the compressed
bytes rather than decoded float tensors, or size it per worker (budget / num_workers); keep
large read-only data in NumPy arrays or tensors created before the workers fork, not in
Python objects that copy-on-write duplicates.
"""

from __future__ import annotations

import ctypes
import zlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

SIDE = 64


def _encode(frame: torch.Tensor) -> bytes:
    """Compressed bytes of a contiguous uint8 frame (what would be read from disk)."""
    return zlib.compress(ctypes.string_at(frame.data_ptr(), frame.nbytes), 1)


class DeblurPairs(Dataset):
    """(blurred, sharp) frame pairs stored compressed, decoded to float on access."""

    # 3200 frames, one epoch of 200 steps: the memory trend needs 5 host samples (0.5 s apart)
    # in the steady window, with room to spare on a fast CPU
    def __init__(self, n_frames: int = 3200, distinct: int = 64):
        g = torch.Generator().manual_seed(0)
        coarse = torch.rand(distinct, 3, 8, 8, generator=g)
        sharp = F.interpolate(coarse, size=(SIDE, SIDE), mode="bilinear", align_corners=False)
        blurred = F.avg_pool2d(sharp, 5, stride=1, padding=2, count_include_pad=False)
        pairs = [
            (_encode((b * 255).to(torch.uint8)), _encode((s * 255).to(torch.uint8)))
            for b, s in zip(blurred, sharp, strict=True)
        ]
        self.blobs = [pairs[i % distinct] for i in range(n_frames)]
        self.shifts = [i // distinct for i in range(n_frames)]
        self.cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # no size limit

    def __len__(self) -> int:
        return len(self.blobs)

    def _decode_frame(self, blob: bytes, shift: int) -> torch.Tensor:
        raw = bytearray(zlib.decompress(blob))
        frame = torch.frombuffer(raw, dtype=torch.uint8).view(3, SIDE, SIDE).float() / 255.0
        return frame.roll(shift, dims=-1)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if index not in self.cache:
            blurred_blob, sharp_blob = self.blobs[index]
            shift = self.shifts[index]
            self.cache[index] = (
                self._decode_frame(blurred_blob, shift),
                self._decode_frame(sharp_blob, shift),
            )
        return self.cache[index]


class TinyDeblurNet(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, 3, 3, padding=1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dataset = DeblurPairs()
    loader = DataLoader(
        dataset, batch_size=16, shuffle=True, num_workers=2, persistent_workers=True
    )
    model = TinyDeblurNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step, (blurred, sharp) in enumerate(loader):
        loss = F.l1_loss(model(blurred), sharp)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step}/{len(loader)}: l1 {loss.item():.4f}")


if __name__ == "__main__":
    main()
