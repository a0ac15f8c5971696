"""Checkpoint stall: ``torch.save`` of model + optimizer state every few steps, in the loop.

Reproduces the "every 5000 iterations the speed drops" cause from seed 002 (a 340 MB checkpoint
written synchronously, optimizer state included): this text classifier keeps a large embedding
table, so its state dict plus Adam's two moment buffers is ~3x the parameter bytes, and the
loop writes it twice (a numbered file and ``latest.pt``) every 8 steps, keeping every file.
Training stops while the state is serialised and written.

Fix: save less often; skip the optimizer state when you will not resume from that file; keep
only the last N files; or write in the background
(``torch.distributed.checkpoint.async_save``, or a thread that saves a CPU copy).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB = 40_000
SEQ = 48


class BagOfEmbeddings(nn.Module):
    def __init__(self, vocab: int = VOCAB, dim: int = 64, classes: int = 4):
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim, padding_idx=0)
        self.head = nn.Sequential(nn.Linear(dim, 128), nn.GELU(), nn.Linear(128, classes))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        mask = (tokens != 0).unsqueeze(-1).float()
        pooled = (self.embedding(tokens) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(pooled)


def save_checkpoint(path: str, step: int, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    out_dir = tempfile.mkdtemp(prefix="zoo-checkpoint-")
    try:
        tokens = torch.randint(1, VOCAB, (2048, SEQ))
        tokens[:, SEQ // 2 :] *= torch.rand(2048, 1) < 0.5  # half the documents are short
        labels = torch.randint(0, 4, (2048,))
        loader = DataLoader(TensorDataset(tokens, labels), batch_size=32, shuffle=True)
        model = BagOfEmbeddings()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        criterion = nn.CrossEntropyLoss()
        save_every, step = 8, 0
        for epoch in range(2):
            for batch_tokens, batch_labels in loader:
                loss = criterion(model(batch_tokens), batch_labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step += 1
                if step % save_every == 0:
                    save_checkpoint(os.path.join(out_dir, f"checkpoint_{step:06d}.pt"), step, model, optimizer)
                    save_checkpoint(os.path.join(out_dir, "latest.pt"), step, model, optimizer)
            print(f"epoch {epoch}: step {step} loss {loss.item():.4f}")
        size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
        print(f"{len(os.listdir(out_dir))} checkpoint files, {size / 1e6:.0f} MB")
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
