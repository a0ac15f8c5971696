"""Crash: a shape bug right after the first batch (``IndexError: Dimension out of range``).

Reproduces seed 000, problem 3.4: the loss concatenated foreground/background pseudo-label
tensors along ``dim=2`` expecting ``(batch, snippets, 1)``, but after collation the stored
pseudo-labels were 2-D ``(batch, snippets)``, so the very first training step fails with
``IndexError: Dimension out of range (expected to be in range of [-2, 1], but got 2)``.

Fix: check shapes where the batch enters the loss (``assert pseudo.dim() == 3``), and give
the tensors the dimension the code expects (``pseudo.unsqueeze(-1)``) in the dataset or
``collate_fn`` rather than patching it at every use.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SNIPPETS = 32
DIM = 48


class PseudoLabelledVideos(Dataset):
    def __init__(self, n_videos: int = 256):
        g = torch.Generator().manual_seed(0)
        self.features = torch.randn(n_videos, SNIPPETS, DIM, generator=g)
        self.foreground = (torch.rand(n_videos, SNIPPETS, generator=g) > 0.7).float()

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        fg = self.foreground[index]
        return {"features": self.features[index], "pseudo_fg": fg, "pseudo_bg": 1.0 - fg}


class TotalLoss(nn.Module):
    def forward(self, cas: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        # cas: (B, T, 2) foreground/background activation sequence.
        pseudo = torch.cat([batch["pseudo_fg"], batch["pseudo_bg"]], dim=2)  # expects (B, T, 1)
        return nn.functional.binary_cross_entropy_with_logits(cas, pseudo)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    loader = DataLoader(PseudoLabelledVideos(), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = TotalLoss()
    for epoch in range(5):
        for batch in loader:
            cas = model(batch["features"])
            loss = criterion(cas, batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
