"""Eval stall: a full validation pass every 20 optimizer steps.

Reproduces the "every 20000 iterations the speed drops" cause from seed 002: evaluation walks
the whole validation set between training steps (``model.eval()``, ``torch.no_grad()``, a
loop over the validation DataLoader, then ``model.train()``). Here the interval is short and
the validation set is large compared with the work done between evaluations, so most of the
wall time is spent evaluating, not training.

Fix: evaluate less often (per epoch, or every N >> current steps), on a fixed subset during
training with the full set at the end, with a larger eval batch size and
``torch.inference_mode()``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_split(n: int, generator: torch.Generator) -> TensorDataset:
    images = torch.randn(n, 3, 32, 32, generator=generator)
    labels = (images[:, 0, 8:24, 8:24].mean(dim=(1, 2)) > 0).long()  # learnable signal
    return TensorDataset(images, labels)


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(0.1),
        nn.Linear(32, 2),
    )


def evaluate(model: nn.Module, loader: DataLoader) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, labels in loader:
            correct += int((model(images).argmax(dim=1) == labels).sum())
            total += len(labels)
    model.train()
    return correct / total


def main() -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    train_loader = DataLoader(make_split(2048, g), batch_size=32, shuffle=True, drop_last=True)
    val_loader = DataLoader(make_split(2560, g), batch_size=32)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()
    eval_interval, max_iters = 20, 90

    iteration = 0
    model.train()
    while iteration < max_iters:
        for images, labels in train_loader:
            loss = criterion(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            iteration += 1
            if iteration % eval_interval == 0:
                accuracy = evaluate(model, val_loader)
                print(f"iter {iteration}: train loss {loss.item():.4f}  val acc {accuracy:.3f}")
            if iteration == max_iters:
                break


if __name__ == "__main__":
    main()
