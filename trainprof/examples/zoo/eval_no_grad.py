"""Eval stall without ``model.eval()``: a full validation pass under ``torch.no_grad()`` every 20 steps.

Reproduces a character-level language model whose ``fit`` function computes validation
perplexity every 20 optimizer steps by walking a separate validation DataLoader inside
``with torch.no_grad():``. There is no ``model.eval()`` / ``model.train()`` around it (a
common omission: ``no_grad`` feels like "eval mode"), so the only sign that the loop is
evaluating is the no-grad forward passes over another loader. The validation set is large
next to 20 training steps, so a large share of the wall time goes to evaluation, and, since
dropout stays on, the validation numbers are also noisier and worse than they should be.

Fix: evaluate less often, on a fixed subset during training and the full set at the end;
use ``torch.inference_mode()`` and a larger eval batch; and wrap it in ``model.eval()`` /
``model.train()`` so dropout is off while validating.
"""

from __future__ import annotations

import math
import random

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SEQ_LEN = 64


def make_text(n_sentences: int, rng: random.Random) -> str:
    """Toy English from a tiny grammar: enough structure for a char model to learn."""
    subjects = ["the cat", "a dog", "my neighbour", "the old sailor", "every child", "she", "he"]
    verbs = ["sees", "likes", "follows", "draws", "remembers", "carries", "finds"]
    objects = ["the red ball", "a small boat", "the moon", "his hat", "a quiet song", "the river"]
    tails = ["", " at night", " in the garden", " every morning", " near the harbour"]
    return " ".join(
        f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}{rng.choice(tails)}."
        for _ in range(n_sentences)
    )


class CharChunks(Dataset):
    def __init__(self, ids: torch.Tensor):
        self.ids = ids

    def __len__(self) -> int:
        return (len(self.ids) - 1) // SEQ_LEN

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        chunk = self.ids[index * SEQ_LEN : (index + 1) * SEQ_LEN + 1]
        return chunk[:-1], chunk[1:]


class CharLM(nn.Module):
    def __init__(self, vocab: int, dim: int = 64, hidden: int = 96):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.drop = nn.Dropout(0.2)
        self.rnn = nn.GRU(dim, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.drop(self.embed(x)))
        return self.out(self.drop(h))


def fit(
    model: nn.Module,
    train_loader: DataLoader,
    val_loader: DataLoader,
    max_steps: int,
    val_every: int = 20,
) -> None:
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss()
    step = 0
    while step < max_steps:
        for x, y in train_loader:
            logits = model(x)
            loss = criterion(logits.flatten(0, 1), y.flatten())
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            if step % val_every == 0:
                total, count = 0.0, 0
                with torch.no_grad():
                    for vx, vy in val_loader:
                        total += criterion(model(vx).flatten(0, 1), vy.flatten()).item() * len(vx)
                        count += len(vx)
                print(
                    f"step {step}: train loss {loss.item():.3f}  val ppl {math.exp(total / count):.2f}"
                )
            if step == max_steps:
                break


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rng = random.Random(0)
    train_text, val_text = make_text(3000, rng), make_text(1200, rng)
    chars = sorted(set(train_text + val_text))
    lookup = {c: i for i, c in enumerate(chars)}
    encode = lambda text: torch.tensor([lookup[c] for c in text])  # noqa: E731
    train_loader = DataLoader(
        CharChunks(encode(train_text)), batch_size=32, shuffle=True, drop_last=True
    )
    val_loader = DataLoader(CharChunks(encode(val_text)), batch_size=32)
    fit(CharLM(len(chars)), train_loader, val_loader, max_steps=90)


if __name__ == "__main__":
    main()
