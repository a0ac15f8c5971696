"""Crash: ragged batches again, in the message variant that hides the cause
(``Trying to resize storage that is not resizable``).

The same bug as ``crash_ragged.py`` (seed 000, problem 3.1: samples of different lengths
through ``default_collate``), in its other common shape: every video is cropped to a
64-snippet window, which silently returns fewer snippets for the few videos shorter than the
window. Inside a DataLoader worker, ``default_collate`` first allocates one shared-memory
buffer sized from the batch and reshapes it to ``len(batch) x shape-of-entry-0``; when a
later entry is *shorter* than entry 0 the buffer is too small, and the worker fails with
``RuntimeError: Trying to resize storage that is not resizable`` (wrapped in ``Caught
RuntimeError in DataLoader worker process N``) before ``torch.stack`` can say which shapes
differ. With ``num_workers=0`` the same batch reports ``stack expects each tensor to be equal
size``.

Fix: pad short clips to the window in ``__getitem__`` (or a padding ``collate_fn`` with
``torch.nn.utils.rnn.pad_sequence`` and a mask), or drop clips shorter than the window.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

WINDOW = 64
DIM = 32


class CroppedVideoFeatures(Dataset):
    def __init__(self, n_videos: int = 480):
        g = torch.Generator().manual_seed(0)
        lengths = torch.randint(WINDOW, 4 * WINDOW, (n_videos,), generator=g)
        lengths[[37, 211, 400]] = torch.tensor([41, 23, 58])  # a few clips shorter than the window
        self.videos = [torch.randn(int(n), DIM, generator=g) for n in lengths]
        self.labels = torch.randint(0, 20, (n_videos,), generator=g)

    def __len__(self) -> int:
        return len(self.videos)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        video = self.videos[index]
        start = int(torch.randint(0, max(len(video) - WINDOW, 0) + 1, ()))
        return video[start : start + WINDOW], self.labels[index]


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    loader = DataLoader(CroppedVideoFeatures(), batch_size=16, shuffle=True, num_workers=2)
    model = nn.Sequential(
        nn.Conv1d(DIM, 64, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveMaxPool1d(1),
        nn.Flatten(),
        nn.Linear(64, 20),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        for step, (clips, labels) in enumerate(loader):
            loss = criterion(model(clips.transpose(1, 2)), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 5 == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
