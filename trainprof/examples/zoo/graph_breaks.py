"""Graph breaks: a compiled model that rescales its activations by a Python number.

A tabular MLP under ``torch.compile`` whose forward keeps its hidden activations in range the
hand-written way: it reads their mean magnitude with ``.item()`` and divides by it when it is
large. Dynamo cannot trace ``.item()`` (by default), so it ends the graph there, runs the line
in Python and compiles the rest as a second graph: every step runs two graphs with a host sync
between them, and nothing says so. (``backend="aot_eager"``, as in ``recompiles``, keeps the
compile short; the graphs are the same under Inductor.)

Fix: keep the value a tensor (``h = h / torch.clamp(h.abs().mean(), min=1.0)``), or let Dynamo
trace it (``torch._dynamo.config.capture_scalar_outputs = True``); ``fullgraph=True`` makes a
break an error.
"""

from __future__ import annotations

import os

import torch
from torch import nn


class Rescaled(nn.Module):
    def __init__(self, features: int = 32, hidden: int = 128, classes: int = 4) -> None:
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.out = nn.Sequential(nn.GELU(), nn.Linear(hidden, hidden), nn.GELU())
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        scale = h.abs().mean().item()
        if scale > 4.0:
            h = h / scale
        return self.head(self.out(h))


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Rescaled()
    compiled = torch.compile(model, backend="aot_eager")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))
    for step in range(int(os.environ.get("ZOO_STEPS", 600))):
        loss = nn.functional.cross_entropy(compiled(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 200 == 0:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
