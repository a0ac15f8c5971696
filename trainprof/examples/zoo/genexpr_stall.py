"""CPU stall hidden in a generator expression: pseudo-labelling by nearest prototype every 20 steps.

Reproduces a semi-supervised (self-training) loop: labelled samples stream in from an
``IterableDataset``; every 20 steps the loop embeds an unlabelled pool with the current
model and calls ``pseudo_label_search`` to give each unlabelled sample the label of its most
similar class prototype (the embedding of one curated exemplar per class), then mixes
pseudo-labelled samples into every batch. The search takes each dot product as a generator
expression, ``sum(a * b for a, b in zip(e, p, strict=True))``, over plain Python lists: it looks
harmless, but it is a pool x classes x dim triple loop in the interpreter, about a third of
a second each time, while the training steps take a few milliseconds. In a profiler the hot frame is the anonymous
``pseudo_label_search.<locals>.<genexpr>``, not a named function.

Fix: one matrix product (``(emb @ protos.T).argmax(dim=1)``) on tensors instead of Python
lists; refresh pseudo-labels less often (per epoch); or compute them in a background process.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

DIM = 48
CLASSES = 32
EMBED = 128


class LabelledStream(IterableDataset):
    """An endless stream of labelled feature vectors (e.g. read from a message queue)."""

    def __init__(self, centers: torch.Tensor, seed: int):
        self.centers, self.seed = centers, seed

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed)
        while True:
            labels = torch.randint(0, CLASSES, (256,), generator=g)
            features = self.centers[labels] + 0.8 * torch.randn(256, DIM, generator=g)
            yield from zip(features, labels, strict=True)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(DIM, 256), nn.ReLU(), nn.Linear(256, EMBED))
        self.head = nn.Linear(EMBED, CLASSES)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.body(x), dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x))


def pseudo_label_search(embeddings: list[list[float]], prototypes: list[list[float]]) -> list[int]:
    """Label of the most similar prototype (dot product of unit vectors) for each embedding."""
    labels = []
    for e in embeddings:
        best_k, best = 0, float("-inf")
        for k, p in enumerate(prototypes):
            similarity = sum(a * b for a, b in zip(e, p, strict=True))
            if similarity > best:
                best_k, best = k, similarity
        labels.append(best_k)
    return labels


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    centers = 1.5 * torch.randn(CLASSES, DIM, generator=g)
    exemplars = centers + 0.3 * torch.randn(CLASSES, DIM, generator=g)  # one curated per class
    unlabelled = centers[torch.randint(0, CLASSES, (1536,), generator=g)]
    unlabelled += 0.8 * torch.randn(1536, DIM, generator=g)

    loader = DataLoader(LabelledStream(centers, seed=1), batch_size=64)
    model = Encoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    refresh_every, max_steps, pseudo_weight = 20, 240, 0.3  # 120 steps: < 1 s steady, fast CPU
    pseudo_labels = torch.zeros(len(unlabelled), dtype=torch.long)

    for step, (x, y) in enumerate(itertools.islice(loader, max_steps)):
        if step % refresh_every == 0 and step > 0:
            with torch.no_grad():
                emb = model.embed(unlabelled).tolist()
                protos = F.normalize(model.body(exemplars), dim=1).tolist()
            pseudo_labels = torch.tensor(pseudo_label_search(emb, protos))
        idx = torch.randint(0, len(unlabelled), (64,))
        loss = F.cross_entropy(model(x), y)
        if step >= refresh_every:
            loss = loss + pseudo_weight * F.cross_entropy(
                model(unlabelled[idx]), pseudo_labels[idx]
            )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 40 == 0:
            print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
