"""Crash: variable-length sequences through the default collate, inside a DataLoader worker.

Reproduces seed 000, problem 3.1 (``RuntimeError: stack expects each tensor to be equal
size``): once real batching was switched on, the video-feature dataset's samples no longer
had one length and ``default_collate`` could not stack them. Here the features were resampled
to 64 snippets per video, except for a few videos from another extraction run that kept 96;
training runs until a batch contains one of those, then the worker raises and the main
process re-raises it wrapped in ``Caught RuntimeError in DataLoader worker process N ...
Original Traceback``.

(When a longer sample is entry 0 of its batch, or a shorter one comes after entry 0, the
worker's shared-memory collate fails first and the same bug reads ``Trying to resize storage
that is not resizable`` instead: see ``crash_ragged_short.py``.)

Fix: a padding ``collate_fn`` (``torch.nn.utils.rnn.pad_sequence`` plus a lengths/mask
tensor), pad/crop every sample to one length in ``__getitem__``, or bucket by length.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SNIPPETS = 64
DIM = 32


class VideoFeatures(Dataset):
    def __init__(self, n_videos: int = 480):
        g = torch.Generator().manual_seed(0)
        lengths = [SNIPPETS] * n_videos
        for index in (118, 305, 441):  # extracted at a different snippet rate
            lengths[index] = 96
        self.videos = [torch.randn(n, DIM, generator=g) for n in lengths]
        self.labels = torch.randint(0, 20, (n_videos,), generator=g)

    def __len__(self) -> int:
        return len(self.videos)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.videos[index], self.labels[index]


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    loader = DataLoader(VideoFeatures(), batch_size=16, shuffle=True, num_workers=2)
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
