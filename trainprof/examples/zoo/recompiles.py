"""Recompiles: a compiled text classifier fed batches padded to their longest sequence.

``torch.compile(model, dynamic=False)`` (set for speed: static shapes make the fastest kernels)
with a ``collate_fn`` that pads each batch to its own longest sequence: nearly every batch has
a new length, every new length fails the compiled graph's shape guard, and the step compiles a
new graph. After ``torch._dynamo.config.recompile_limit`` (8) graphs Dynamo gives up and the
model runs uncompiled for the rest of the run, with one warning on stderr that is easy to miss
among the job's output.

The model compiles with ``backend="aot_eager"`` (Dynamo and AOTAutograd trace forward and
backward as under the default backend, no kernels are generated), so the case runs in seconds:
a recompile costs ~0.14 s here. Under the default Inductor backend the same recompile
generated and built C++ kernels, ~2.5 s each on these 2 CPUs with a cold cache; on a GPU it
generates Triton kernels. ``ZOO_PAD=64`` is the control: every batch padded to a multiple of 64
(all 64 here), one graph.

Fix: pad to a few fixed lengths (buckets), or mark the length dynamic
(``torch._dynamo.mark_dynamic(tokens, 1)``, ``torch.compile(dynamic=True)``).
"""

from __future__ import annotations

import os
import random

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB = 1000
CLASSES = 4


class Reviews(Dataset[tuple[torch.Tensor, int]]):
    """Token ids of short texts, 8 to 64 tokens long."""

    def __init__(self, n: int = 16000) -> None:
        rng = random.Random(0)
        self.lengths = [rng.randint(8, 64) for _ in range(n)]

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(i)
        return torch.randint(1, VOCAB, (self.lengths[i],), generator=g), i % CLASSES


def pad_batch(batch: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    longest = max(len(tokens) for tokens, _ in batch)
    bucket = int(os.environ.get("ZOO_PAD", "0"))
    if bucket:
        longest = -(-longest // bucket) * bucket
    out = torch.zeros(len(batch), longest, dtype=torch.long)
    for row, (tokens, _) in enumerate(batch):
        out[row, : len(tokens)] = tokens
    return out, torch.tensor([label for _, label in batch])


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 64, padding_idx=0)
        self.mix = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))
        self.head = nn.Linear(64, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.mix(self.embed(tokens)).mean(dim=1))


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Classifier()
    compiled = torch.compile(model, dynamic=False, backend="aot_eager")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(Reviews(), batch_size=16, shuffle=True, collate_fn=pad_batch)
    for step, (tokens, labels) in enumerate(loader):
        loss = nn.functional.cross_entropy(compiled(tokens), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)
        if step + 1 == int(os.environ.get("ZOO_STEPS", 900)):
            break


if __name__ == "__main__":
    main()
