"""Healthy control: a model written as the user's own tensor code, with no nn.Module.

A two-tower contrastive model the way papers' reference code often has it: weights as plain
tensors, the towers as functions (``x @ w``), an InfoNCE loss by hand, torch.optim.AdamW and a
DataLoader. py-spy shows no torch module frame under this forward pass, only the user's lines;
trainprof places them by where they run, before the ``backward()`` call, so they are the forward
pass and not loop overhead: it should report no warning.
"""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 14
BATCH = 256
DIM, HIDDEN, EMBED = 128, 384, 64


def init_tower(g: torch.Generator) -> list[torch.Tensor]:
    w1 = torch.randn(DIM, HIDDEN, generator=g) / DIM**0.5
    w2 = torch.randn(HIDDEN, EMBED, generator=g) / HIDDEN**0.5
    return [w.requires_grad_() for w in (w1, torch.zeros(HIDDEN), w2)]


def tower(x: torch.Tensor, params: list[torch.Tensor]) -> torch.Tensor:
    w1, b1, w2 = params
    h = torch.relu(x @ w1 + b1)
    z = h @ w2
    return z / z.norm(dim=1, keepdim=True)


def info_nce(a: torch.Tensor, b: torch.Tensor, temperature: float = 0.1) -> torch.Tensor:
    logits = a @ b.T / temperature
    logp_ab = logits - logits.logsumexp(dim=1, keepdim=True)
    logp_ba = logits.T - logits.T.logsumexp(dim=1, keepdim=True)
    return -(logp_ab.diagonal().mean() + logp_ba.diagonal().mean()) / 2


def main() -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    view_a = torch.randn(8192, DIM, generator=g)
    view_b = view_a + 0.3 * torch.randn(8192, DIM, generator=g)  # two noisy views of one item
    loader = DataLoader(TensorDataset(view_a, view_b), batch_size=BATCH, shuffle=True)
    towers = init_tower(g), init_tower(g)
    optimizer = torch.optim.AdamW([p for t in towers for p in t], lr=1e-3)
    for epoch in range(EPOCHS):
        for a, b in loader:
            loss = info_nce(tower(a, towers[0]), tower(b, towers[1]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
