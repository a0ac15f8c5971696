"""Collate-bound: the batch is tokenized in pure Python inside ``collate_fn``, in the main process.

Reproduces a common text-classification setup: the dataset keeps raw strings and returns
``{"text": str, "label": int}``; a ``collate_fn`` normalises each text, splits it into words,
maps each word to ids with a hand-written greedy WordPiece (longest vocabulary prefix, then
``##`` continuations), truncates and pads the batch, and builds the tensors. With
``num_workers=0`` that collate runs serially in the training process for every batch, and the
model (an ``EmbeddingBag`` and a linear layer) is so cheap that most of each step is spent
tokenizing, not training.

Fix: tokenize once, ahead of time (``datasets.map(tokenize, batched=True)`` or a cached tensor
file) and keep only padding in the collate; or use a fast (Rust) tokenizer with batch
encoding; or at least move the collate to DataLoader workers (``num_workers`` > 0,
``persistent_workers=True``).
"""

from __future__ import annotations

import random
import unicodedata

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

PAD, UNK = 0, 1
MAX_LEN = 256
LABELS = ("world", "sports", "business", "science")


def make_corpus(n: int, rng: random.Random) -> tuple[list[dict], list[str]]:
    """Synthetic news snippets: topic words mixed into filler; some words are out of vocabulary."""
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "pe", "dra", "qu", "ly"]
    words = sorted({"".join(rng.choices(syllables, k=rng.randint(2, 4))) for _ in range(3000)})
    topic_words = [words[i::4][:40] for i in range(4)]
    samples = []
    for _ in range(n):
        label = rng.randrange(len(LABELS))
        tokens = []
        for _ in range(rng.randint(150, 230)):
            roll = rng.random()
            if roll < 0.15:
                tokens.append(rng.choice(topic_words[label]))
            elif roll < 0.25:  # names, typos, rare words: not in the vocabulary
                tokens.append(rng.choice(words) + rng.choice(syllables) + rng.choice("xzjw"))
            else:
                tokens.append(rng.choice(words))
            if rng.random() < 0.08:
                tokens[-1] = tokens[-1].capitalize() + rng.choice([",", ".", ";", "!"])
        samples.append({"text": " ".join(tokens), "label": label})
    vocab = ["[PAD]", "[UNK]", *words, *(f"##{s}" for s in syllables), *"xzjw", "##x", "##z"]
    return samples, vocab


class NewsDataset(Dataset):
    def __init__(self, samples: list[dict]):
        self.samples = samples

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> dict:
        return self.samples[index]


class WordPieceCollator:
    def __init__(self, vocab: list[str], max_len: int = MAX_LEN):
        self.ids = {token: i for i, token in enumerate(vocab)}
        self.max_len = max_len

    def normalize(self, text: str) -> str:
        text = unicodedata.normalize("NFKC", text).lower()
        return "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)

    def wordpiece(self, word: str) -> list[int]:
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.ids:
                    pieces.append(self.ids[piece])
                    break
                end -= 1
            else:
                return [UNK]
            start = end
        return pieces

    def __call__(self, batch: list[dict]) -> dict[str, torch.Tensor]:
        rows = []
        for sample in batch:
            ids: list[int] = []
            for word in self.normalize(sample["text"]).split():
                ids.extend(self.wordpiece(word))
            rows.append(ids[: self.max_len])
        width = max(len(row) for row in rows)
        input_ids = [row + [PAD] * (width - len(row)) for row in rows]
        return {
            "input_ids": torch.tensor(input_ids),
            "labels": torch.tensor([sample["label"] for sample in batch]),
        }


class BagOfWordsClassifier(nn.Module):
    def __init__(self, vocab_size: int, dim: int = 64, classes: int = len(LABELS)):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab_size, dim, mode="mean", padding_idx=PAD)
        self.head = nn.Linear(dim, classes)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(input_ids))


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    samples, vocab = make_corpus(1024, random.Random(0))
    loader = DataLoader(
        NewsDataset(samples),
        batch_size=32,
        shuffle=True,
        num_workers=0,
        collate_fn=WordPieceCollator(vocab),
    )
    model = BagOfWordsClassifier(len(vocab))
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    criterion = nn.CrossEntropyLoss()

    # 8 epochs of 32 steps: a steady state of ~2 s on a fast CPU (5 gave 1.21 s there, near the
    # rules' 1 s minimum)
    for epoch in range(8):
        model.train()
        correct = seen = 0
        for batch in loader:
            logits = model(batch["input_ids"])
            loss = criterion(logits, batch["labels"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            correct += int((logits.argmax(dim=1) == batch["labels"]).sum())
            seen += len(batch["labels"])
        print(f"epoch {epoch}: loss {loss.item():.4f}  train acc {correct / seen:.3f}")


if __name__ == "__main__":
    main()
