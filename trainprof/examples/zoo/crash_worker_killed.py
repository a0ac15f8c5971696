"""Crash: a DataLoader worker is SIGKILLed mid-epoch (``DataLoader worker (pid N) is killed by
signal: Killed``).

Stands in for the way workers really die on training machines: the kernel's OOM killer (or a
container's memory limit, or an operator's ``kill -9``) picks a worker whose memory has grown,
and the main process only learns about it from the loader's SIGCHLD handler or a failed
queue read. To keep the reproduction safe, worker 1 sends itself SIGKILL when it reaches a
particular sample (a real OOM would need real memory pressure on the machine); everything
after that (the main process's error and exit) is the genuine article.

Fix depends on the cause: if memory grew (see ``memory-growth``), bound the caches and use
fewer workers or a smaller ``prefetch_factor``; check ``dmesg``/the container's OOM events
for the killer; if nothing killed it on purpose, the worker crashed in native code.
"""

from __future__ import annotations

import os
import signal

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

POISONED_SAMPLE = 700


class Spectrograms(Dataset):
    def __init__(self, n: int = 2048):
        g = torch.Generator().manual_seed(0)
        self.clips = torch.randn(n, 1, 40, 64, generator=g)
        self.labels = torch.randint(0, 12, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        info = get_worker_info()
        if info is not None and info.id == 1 and index == POISONED_SAMPLE:
            os.kill(os.getpid(), signal.SIGKILL)  # what the OOM killer does
        return self.clips[index], self.labels[index]


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    # Sequential order so the poisoned sample is reached after a fixed number of steps.
    loader = DataLoader(Spectrograms(), batch_size=32, shuffle=False, num_workers=2)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 12),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        for step, (clips, labels) in enumerate(loader):
            loss = criterion(model(clips), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
