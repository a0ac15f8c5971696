"""LightningModule-style fitter with a DistributedSampler whose set_epoch() is never called.

Expert diagnosis: every epoch sees the samples in exactly the same order. The loader in
`Fitter.fit` uses a shuffling `DistributedSampler` (one replica here, as in a single-GPU run of
a DDP script), whose permutation is seeded by `seed + epoch`; `sampler.set_epoch(epoch)` is
never called, so the epoch stays 0 and the "shuffle" repeats. Costs no time, but training sees
a fixed order (worse generalisation, a periodic loss pattern). Fix: call
`loader.sampler.set_epoch(epoch)` at the start of each epoch.

Measured (median of 3 wall times, start-up included, OMP_NUM_THREADS=1 on a shared 2-core
machine): plain 3.3 s, fixed 3.3 s: the mistake costs no measurable time (the difference is
noise); its cost is the order: the first sample of every epoch is the same one.
"""

from __future__ import annotations

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

FIXED = "--fixed" in sys.argv


class Points(Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 16, generator=g)
        self.y = (self.x.pow(2).sum(1) > 16).long()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        return self.x[i], self.y[i], i


class LitClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 2)
        )

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y, _ = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    def train_dataloader(self) -> DataLoader:
        ds = Points(16384)
        sampler = DistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=42)
        return DataLoader(ds, batch_size=64, sampler=sampler)


class Fitter:
    def __init__(self, max_epochs: int) -> None:
        self.max_epochs = max_epochs

    def fit(self, module: LitClassifier) -> None:
        loader = module.train_dataloader()
        opt = module.configure_optimizers()
        first_ids: list[int] = []
        for epoch in range(self.max_epochs):
            if FIXED:
                loader.sampler.set_epoch(epoch)  # type: ignore[attr-defined]
            total = 0.0
            for i, batch in enumerate(loader):
                if i == 0:
                    first_ids.append(int(batch[2][0]))
                loss = module.training_step(batch)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item()
            print(
                f"epoch {epoch} loss {total / len(loader):.4f} first sample {first_ids[-1]}",
                flush=True,
            )


if __name__ == "__main__":
    torch.manual_seed(0)
    Fitter(max_epochs=5).fit(LitClassifier())
