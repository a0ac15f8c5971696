"""Logging stall: every 10 steps a DEBUG log record formats a whole attention map.

A small transformer encoder for click-through prediction keeps a DEBUG ``FileHandler`` on its
module logger from a debugging session, and every 10 steps logs the last layer's attention
weights with lazy %-formatting: ``log.debug("attention %s", attn)``. Under
``torch.set_printoptions(threshold=sys.maxsize)`` (also left from that session) each record
formats every element of a 64×16×16 tensor into text. Nothing reaches the terminal; the step
that logs takes many times a normal step.

Fix: log a summary (``attn.mean().item()``, a histogram every few hundred steps), not the
tensor; drop the DEBUG handler (or raise its level) when the debugging is over.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

log = logging.getLogger("ctr")


class CTREncoder(nn.Module):
    def __init__(self, fields: int = 16, dim: int = 32):
        super().__init__()
        self.embed = nn.Linear(1, dim)
        self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
        self.head = nn.Linear(dim * fields, 1)
        self.last_attn: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x.unsqueeze(-1))
        out, weights = self.attn(h, h, h, need_weights=True)
        self.last_attn = weights.detach()
        return self.head((h + out).flatten(1)).squeeze(-1)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    torch.set_printoptions(threshold=sys.maxsize)
    handler = logging.FileHandler(os.path.join(tempfile.mkdtemp(), "ctr-debug.log"))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    x = torch.randn(16384, 16)
    y = (x[:, :4].sum(dim=1) > 0).float()
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, drop_last=True)
    model = CTREncoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for step, (inputs, target) in enumerate(loader):
            loss = nn.functional.binary_cross_entropy_with_logits(model(inputs), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 10 == 0:
                log.debug("step %d attention %s", step, model.last_attn)
            if step % 100 == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
