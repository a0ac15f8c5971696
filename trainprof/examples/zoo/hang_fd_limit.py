"""Hang: a low open-files limit with the default ``file_descriptor`` sharing strategy.

Reproduces the multiprocessing failures of seed 000 (problem 4.1: worker communication errors
traced, after a wrong guess at ``/dev/shm``, to a low ``ulimit -n``; the authors gave up and
set ``num_workers=0``). With the default ``file_descriptor`` strategy, every tensor storage a
worker sends costs the worker two open descriptors while the batch is pickled and one until
the main process picks it up, and costs the main process one for as long as the tensor lives.
This region-crop dataset returns one tensor per object (crops of different sizes cannot be
stacked, so the ``collate_fn`` keeps them as lists). The training epoch (a few objects per
image, 120 steps) runs fine; the validation split starts with two crowded scenes, and its
first batch needs more descriptors than the limit allows. The fresh validation worker's queue
feeder thread fails (``RuntimeError: unable to open shared memory object </torch_...> in
read-write mode: Too many open files (24)`` and/or ``OSError: [Errno 24] Too many open
files`` in ``DupFd``, printed to stderr; the batch is dropped) and the validation loop waits
forever for that batch. It does not crash; it hangs.

The script lowers its own soft ``RLIMIT_NOFILE`` to 128 to stand in for the low limits found in
containers and on shared clusters (1024 is common); with 1024, the same thing happens with
~8x more tensors per batch.

Fix: raise the limit (``ulimit -n 65536`` in the launching shell, ``--ulimit nofile=...`` in
Docker, ``securityContext``/node limits in Kubernetes, ``--propagate``/limits.conf under
SLURM), or call ``torch.multiprocessing.set_sharing_strategy("file_system")`` at start-up, or
send fewer, larger tensors (pad and stack the crops).
"""

from __future__ import annotations

import resource

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

NOFILE_SOFT_LIMIT = 128


class RegionCrops(Dataset):
    """Per image: the image, its object labels, and one crop tensor per object (varied sizes)."""

    def __init__(self, n_objects: list[int], seed: int):
        g = torch.Generator().manual_seed(seed)
        self.n_objects = n_objects
        self.sizes = torch.randint(8, 24, (len(n_objects), max(n_objects), 2), generator=g).tolist()
        self.seed = seed

    def __len__(self) -> int:
        return len(self.n_objects)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + index)
        image = torch.rand(3, 64, 64, generator=g)
        k = self.n_objects[index]
        crops = []
        for h, w in self.sizes[index][:k]:
            top, left = (
                int(torch.randint(0, 64 - h, (), generator=g)),
                int(torch.randint(0, 64 - w, (), generator=g)),
            )
            crops.append(image[:, top : top + h, left : left + w].clone())
        labels = torch.randint(0, 5, (k,), generator=g)
        return image, crops, labels


def collate_regions(
    batch: list[tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]],
) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    images = torch.stack([image for image, _, _ in batch])
    crops = [crop for _, image_crops, _ in batch for crop in image_crops]
    labels = torch.cat([labels for _, _, labels in batch])
    return images, crops, labels


class RegionClassifier(nn.Module):
    def __init__(self, classes: int = 5):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4)
        )
        self.head = nn.Linear(16 * 16, classes)

    def forward(self, crops: list[torch.Tensor]) -> torch.Tensor:
        return self.head(torch.cat([self.encoder(c[None]).flatten(1) for c in crops]))


def main() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE_SOFT_LIMIT, hard))
    torch.set_num_threads(1)
    torch.manual_seed(0)
    counts = torch.Generator().manual_seed(0)
    train_set = RegionCrops(torch.randint(2, 5, (480,), generator=counts).tolist(), seed=1)
    # Validation scenes are denser: a couple of crowded ones come first.
    val_set = RegionCrops([48, 48] + torch.randint(2, 9, (62,), generator=counts).tolist(), seed=2)
    train_loader = DataLoader(
        train_set, batch_size=4, shuffle=True, num_workers=2, collate_fn=collate_regions
    )
    val_loader = DataLoader(val_set, batch_size=4, num_workers=2, collate_fn=collate_regions)
    model = RegionClassifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        model.train()
        for step, (_images, crops, labels) in enumerate(train_loader):
            loss = criterion(model(crops), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 40 == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item():.4f}", flush=True)
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for _images, crops, labels in val_loader:
                correct += int((model(crops).argmax(dim=1) == labels).sum())
                total += len(labels)
        print(f"epoch {epoch}: val accuracy {correct / total:.3f}", flush=True)


if __name__ == "__main__":
    main()
