"""Healthy control: compute-bound training on an in-memory dataset.

Nothing to fix: the whole dataset is a tensor in memory, so fetching a batch costs a fraction
of a millisecond next to the forward/backward pass; there are no periodic side tasks, no
per-step printing (one line per epoch), no checkpoints and no growing caches. trainprof should
report throughput and no warning or error.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_model(classes: int = 10) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 8 * 8, 128),
        nn.ReLU(),
        nn.Linear(128, classes),
    )


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    images = torch.randn(1536, 3, 32, 32)
    labels = (images[:, :, 12:20, 12:20].mean(dim=(1, 2, 3)) * 20).long().clamp(-5, 4) + 5
    loader = DataLoader(TensorDataset(images, labels), batch_size=48, shuffle=True, drop_last=True)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=4 * len(loader))
    criterion = nn.CrossEntropyLoss()

    for epoch in range(4):
        model.train()
        total_loss = torch.zeros(())
        correct = torch.zeros((), dtype=torch.long)
        for x, y in loader:
            logits = model(x)
            loss = criterion(logits, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            total_loss += loss.detach()
            correct += (logits.argmax(dim=1) == y).sum()
        n = len(loader) * 48
        print(
            f"epoch {epoch}: loss {total_loss.item() / len(loader):.4f}  acc {correct.item() / n:.3f}"
        )


if __name__ == "__main__":
    main()
