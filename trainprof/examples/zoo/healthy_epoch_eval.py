"""Healthy control: the MNIST example's shape, evaluating once per epoch.

A small CNN on 28 x 28 digits held in memory (``TensorDataset``), trained for a few epochs; after
each epoch the test set is run once under ``model.eval()`` and ``torch.no_grad()``, and the
loss and accuracy printed, as pytorch/examples' ``mnist/main.py`` does. Evaluating once per
epoch at a few percent of the run is normal practice, and the time is the model's own forward
and backward: trainprof should call it compute-bound and warn about nothing (the evaluation is
a note).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.fc1 = nn.Linear(16 * 12 * 12, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return F.log_softmax(self.fc2(x), dim=1)


def digits(n: int, g: torch.Generator) -> TensorDataset:
    labels = torch.randint(0, 10, (n,), generator=g)
    images = torch.rand(n, 1, 28, 28, generator=g) * 0.3
    images[:, 0, 4:24, 4:24] += labels.view(-1, 1, 1).float() / 10  # learnable
    return TensorDataset(images, labels)


def test(model: nn.Module, loader: DataLoader) -> tuple[float, float]:
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            loss += F.nll_loss(out, y, reduction="sum").item()
            correct += int((out.argmax(1) == y).sum())
    model.train()
    n = len(loader.dataset)  # type: ignore[arg-type]
    return loss / n, correct / n


def main() -> None:
    torch.manual_seed(1)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    train_loader = DataLoader(digits(4800, g), batch_size=64, shuffle=True)
    test_loader = DataLoader(digits(400, g), batch_size=400)
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    for epoch in range(1, 4):
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = F.nll_loss(model(x), y)
            loss.backward()
            optimizer.step()
        test_loss, accuracy = test(model, test_loader)
        print(f"epoch {epoch}: test loss {test_loss:.4f}, accuracy {accuracy:.1%}", flush=True)


if __name__ == "__main__":
    main()
