"""Cold compile: ``torch.compile`` with an empty Inductor cache, and a short run to pay it off.

Reproduces the "my first step takes half a minute and then it's fast" reports that follow
turning on ``torch.compile``: the first call of the compiled module traces it with Dynamo,
lowers forward and backward with AOTAutograd and generates and builds C++ kernels with
Inductor, all before the first optimizer step. Nothing is wrong with the training itself
(an MLP on in-memory tabular features, wide enough that batching them is a small share of a
step, 400 optimizer steps in a ``train_one_epoch`` helper: the seconds the step rules need to
judge it); it is just that the one-off compile costs far more than the whole run it is meant
to speed up. Each run starts on a fresh ``TORCHINDUCTOR_CACHE_DIR`` (a new CI container, a fresh
cluster node, a cleared ``/tmp``), so nothing is reused from earlier runs.

Fix: for short jobs, debugging sessions and small models do not compile; for long jobs keep
the Inductor/FX-graph cache on persistent storage (``TORCHINDUCTOR_CACHE_DIR`` on a shared
disk, or ``torch.compiler.save_cache_artifacts``/``load_cache_artifacts``), try
``mode="reduce-overhead"``/``dynamic=False`` to avoid recompiles, and exclude the compile from
throughput numbers.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

# Must be set before torch is imported: Inductor reads it when it first builds its caches.
CACHE_DIR = tempfile.mkdtemp(prefix="zoo-compile-cold-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = CACHE_DIR

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

FEATURES = 24
CLASSES = 4


class TabularMLP(nn.Module):
    def __init__(self, features: int = FEATURES, hidden: int = 512, classes: int = CLASSES):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        self.body = nn.Sequential(
            nn.Linear(features, hidden),
            nn.GELU(),
            nn.Linear(hidden, hidden),
            nn.GELU(),
        )
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(self.norm(x))
        return self.head(h)


def train_one_epoch(
    model: nn.Module,
    loader: DataLoader,
    optimizer: torch.optim.Optimizer,
    criterion: nn.Module,
    epoch: int,
) -> float:
    model.train()
    total = 0.0
    for step, (x, y) in enumerate(loader):
        started = time.perf_counter()
        loss = criterion(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        total += loss.item()
        if epoch == 0 and step == 0:
            print(f"first step (compile): {time.perf_counter() - started:.2f} s", flush=True)
    return total / len(loader)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(1280, FEATURES)
    y = (x[:, :4].sum(dim=1) > 0).long() + 2 * (x[:, 4] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=128, shuffle=True, drop_last=True)
    model = torch.compile(TabularMLP())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss()
    try:
        for epoch in range(40):  # 40 x 10 = 400 optimizer steps
            started = time.perf_counter()
            loss = train_one_epoch(model, loader, optimizer, criterion, epoch)
            print(f"epoch {epoch}: loss {loss:.4f}  {time.perf_counter() - started:.2f} s")
    finally:
        shutil.rmtree(CACHE_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
