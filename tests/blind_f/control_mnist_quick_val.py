"""Healthy control in the style of pytorch/examples' mnist/main.py (synthetic 28x28 digits).

Trap: a validation pass inside the training loop every 100 batches, and `loss.item()`
printed every 20 batches. Both look like the usual mistakes, but the validation pass reads
two batches of 64 (no_grad), and the `.item()` on the CPU is no sync: together they cost
well under 5 % of the run. `--fixed` is accepted and changes nothing.

Expert diagnosis: none.

Measured: 4.28 s plain, 4.30 s with `--fixed` (same code), median of 3
interleaved `/usr/bin/time` runs, OMP_NUM_THREADS=1, 2 shared CPUs: no cost.
"""

import argparse
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

steps = int(os.environ.get("STEPS", 300))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1)
        self.conv2 = nn.Conv2d(16, 32, 3, 1)
        self.fc1 = nn.Linear(32 * 12 * 12, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return F.log_softmax(self.fc2(x), dim=1)


def quick_val(model, val_loader, n_batches=2):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i, (data, target) in enumerate(val_loader):
            if i >= n_batches:
                break
            correct += (model(data).argmax(1) == target).sum().item()
    model.train()
    return correct / (n_batches * val_loader.batch_size)


def train(model, optimizer, train_loader, val_loader):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        if batch_idx >= steps:
            break
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % 20 == 0:
            print(f"batch {batch_idx} loss {loss.item():.6f}")
        if batch_idx % 100 == 0:
            print(f"quick val acc {quick_val(model, val_loader):.3f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixed", action="store_true")  # nothing to fix
    parser.parse_args()
    torch.manual_seed(1)
    batch_size = 16
    x = torch.randn(steps * batch_size, 1, 28, 28)
    y = torch.randint(0, 10, (steps * batch_size,))
    train_loader = DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True)
    val_loader = DataLoader(TensorDataset(x[:1024], y[:1024]), batch_size=64)
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    train(model, optimizer, train_loader, val_loader)
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(model.state_dict(), os.path.join(tmp, "mnist_cnn.pt"))


if __name__ == "__main__":
    main()
