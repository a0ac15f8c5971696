"""A new classification head that never trains: the optimizer was built before it replaced the
old one.

Fine-tuning a small pretrained network for a new task: the script builds the model, its
optimizer, and then swaps the 100-class head for a 10-class one, the order in which such a
script often grows (the optimizer line came with the first version). The new head gets
gradients every step, but it is in no optimizer: it keeps its random initialisation, the
backbone trains around it, and the loss falls slowly. Nothing crashes; every step is as fast as
a healthy one.

Fix: build the optimizer after the head is replaced (``AdamW(model.parameters())`` once the
model is final), or ``optimizer.add_param_group({"params": model.head.parameters()})``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU())
        self.head = nn.Linear(128, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Net(classes=100)  # as pretrained on the old task
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.head = nn.Linear(128, 10)  # the new task's head: built after the optimizer

    x = torch.randn(8192, 64)
    y = (x[:, :10].argmax(1) + torch.randint(0, 2, (8192,))) % 10
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    for epoch in range(3):  # no model.train(): a module is built in training mode
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
