"""Input-bound by the hand-over: workers return each batch as a dict of small tensors.

A text classifier over a corpus tokenized once, up front, and kept in memory: the dataset's
``__getitem__`` only indexes tensors and returns the Hugging Face-style dict (``input_ids``,
``attention_mask``, ``token_type_ids``, ``labels``). The loader still has the
``num_workers=2, persistent_workers=True`` copied from an image tutorial. Making a batch is
cheap; handing it over is not: each tensor of each batch crosses to the main process on its
own (with the default ``file_descriptor`` sharing, a new connection to the worker per
tensor), so four small tensors per batch of 16 cost the main process more than the step.

Fix: data already in memory needs no workers (``num_workers=0``); or larger batches and fewer
tensors per batch; or ``torch.multiprocessing.set_sharing_strategy("file_system")``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB, SEQ, CLASSES = 8_000, 48, 6


class TokenizedCorpus(Dataset):
    def __init__(self, n: int, g: torch.Generator) -> None:
        lengths = torch.randint(8, SEQ + 1, (n,), generator=g)
        self.input_ids = torch.randint(1, VOCAB, (n, SEQ), generator=g)
        self.attention_mask = (torch.arange(SEQ)[None, :] < lengths[:, None]).long()
        self.input_ids *= self.attention_mask
        self.token_type_ids = torch.zeros(n, SEQ, dtype=torch.long)
        self.labels = self.input_ids[:, 0] % CLASSES

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.input_ids[i],
            "attention_mask": self.attention_mask[i],
            "token_type_ids": self.token_type_ids[i],
            "labels": self.labels[i],
        }


class BagClassifier(nn.Module):
    def __init__(self, dim: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim, padding_idx=0)
        self.head = nn.Sequential(nn.Linear(dim, 128), nn.GELU(), nn.Linear(128, CLASSES))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (self.embed(input_ids) * mask).sum(1) / mask.sum(1)
        return self.head(pooled)


def main() -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(
        TokenizedCorpus(4_096, g),
        batch_size=16,
        shuffle=True,
        num_workers=2,
        persistent_workers=True,
    )
    model = BagClassifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for batch in loader:
            logits = model(batch["input_ids"], batch["attention_mask"])
            loss = nn.functional.cross_entropy(logits, batch["labels"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
