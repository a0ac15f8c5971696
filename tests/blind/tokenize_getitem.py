"""Text classifier whose Dataset.__getitem__ builds its tokenizer (vocab and regex) per sample.

Expert diagnosis: the loop waits for its data. `ReviewDataset.__getitem__` constructs a
`WordTokenizer` for every sample: it rebuilds the 20k-entry vocabulary dict and compiles a
fresh regex of the special tokens, and with `num_workers=0` all of that runs in the training
process between steps. Fix: build the tokenizer once in `__init__` (or pre-tokenize the whole
corpus once); then, if loading is still slow, use `num_workers>0`.

Measured (median of 3 wall times, start-up included, OMP_NUM_THREADS=1 on a shared 2-core
machine): plain 7.0 s, fixed 3.9 s: the mistake costs 45 % of the wall time.
"""

from __future__ import annotations

import random
import re
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

FIXED = "--fixed" in sys.argv
WORDS = [f"w{i}" for i in range(20_000)]
SPECIALS = ["<pad>", "<unk>", "<cls>", "<sep>", "<mask>"] + [f"<extra_{i}>" for i in range(100)]


class WordTokenizer:
    def __init__(self, words: list[str], specials: list[str]) -> None:
        self.vocab = {w: i for i, w in enumerate(specials + words)}
        alternatives = "|".join(re.escape(s) for s in specials)
        self.pattern = re.compile(rf"({alternatives})|\w+|[^\w\s]", re.IGNORECASE)

    def encode(self, text: str, max_len: int = 32) -> list[int]:
        unk = self.vocab["<unk>"]
        ids = [self.vocab.get(m.group(0), unk) for m in self.pattern.finditer(text)][:max_len]
        return ids + [0] * (max_len - len(ids))


class ReviewDataset(Dataset):
    def __init__(self, n: int) -> None:
        rng = random.Random(0)
        self.texts = [" ".join(rng.choice(WORDS[:2000]) for _ in range(24)) for _ in range(n)]
        self.labels = [rng.randrange(2) for _ in range(n)]
        self.tokenizer = WordTokenizer(WORDS, SPECIALS) if FIXED else None

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        tok = self.tokenizer if self.tokenizer is not None else WordTokenizer(WORDS, SPECIALS)
        return torch.tensor(tok.encode("<cls> " + self.texts[i])), self.labels[i]


class BagClassifier(nn.Module):
    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, 32)
        self.head = nn.Linear(32, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(ids))


def main() -> None:
    torch.manual_seed(0)
    loader = DataLoader(ReviewDataset(2000), batch_size=32, shuffle=True, num_workers=0)
    model = BagClassifier(len(WORDS) + len(SPECIALS))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(1):
        for step, (ids, y) in enumerate(loader):
            loss = nn.functional.cross_entropy(model(ids), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 50 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
