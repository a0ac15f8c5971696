"""Checkpoint stall: ``torch.save`` of the full model and optimizer state every few steps.

Reproduces the "every 5000 iterations the speed drops" cause from seed 002 (a 340 MB
checkpoint written synchronously, optimizer state included), in a common fine-tuning shape:
a small classifier head is trained on top of a large frozen pretrained embedding table, yet
every checkpoint serialises the whole ``state_dict()`` (frozen table included) plus the
optimizer state, twice (a numbered file and ``latest.pt``), every 20 steps, keeping every
file. Each save takes longer than the 20 steps before it, and training waits for it.

Fix: save less often; save only what changes (the trainable head:
``{k: v for k, v in model.state_dict().items() if ...}``), skip the optimizer state when you
will not resume from that file; keep only the last N files; or write in the background
(``torch.distributed.checkpoint.async_save``, or a thread that saves a CPU copy).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB = 50_000
DIM = 128
SEQ = 32
CLASSES = 4
# ZOO_SAVE_WITH=safetensors: the weights go through safetensors' save_model (the optimizer
# state, small here, still through torch.save), as the Hugging Face Trainer writes them.
SAVE_WITH = os.environ.get("ZOO_SAVE_WITH", "torch")


class FrozenEncoderClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, DIM, padding_idx=0)  # "pretrained", frozen below
        self.head = nn.Sequential(
            nn.Linear(DIM, 256), nn.GELU(), nn.Dropout(0.1), nn.Linear(256, CLASSES)
        )

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        mask = (tokens != 0).unsqueeze(-1).float()
        pooled = (self.embedding(tokens) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(pooled)


def save_checkpoint(
    path: str, step: int, model: nn.Module, optimizer: torch.optim.Optimizer
) -> None:
    if SAVE_WITH == "safetensors":  # the Hugging Face Trainer's way: weights, then the rest
        from safetensors.torch import save_model

        save_model(model, path.replace(".pt", ".safetensors"))
        torch.save({"step": step, "optimizer": optimizer.state_dict()}, path)
        return
    torch.save(
        {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, path
    )


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    out_dir = tempfile.mkdtemp(prefix="zoo-checkpoint-")
    try:
        tokens = torch.randint(1, VOCAB, (4096, SEQ))
        tokens[:, SEQ // 2 :] *= (torch.rand(4096, 1) < 0.5).long()  # half the texts are short
        labels = torch.randint(0, CLASSES, (4096,))
        loader = DataLoader(TensorDataset(tokens, labels), batch_size=64, shuffle=True)

        model = FrozenEncoderClassifier()
        model.embedding.weight.requires_grad_(False)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
        criterion = nn.CrossEntropyLoss()
        save_every, max_steps, step = 20, 430, 0  # ~1.9 s steady on a fast CPU (310: 1.35 s)
        while step < max_steps:
            model.train()
            for batch_tokens, batch_labels in loader:
                loss = criterion(model(batch_tokens), batch_labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step += 1
                if step % save_every == 0:
                    save_checkpoint(
                        os.path.join(out_dir, f"checkpoint_{step:06d}.pt"), step, model, optimizer
                    )
                    save_checkpoint(os.path.join(out_dir, "latest.pt"), step, model, optimizer)
                    print(f"step {step}: loss {loss.item():.4f}, checkpoint saved")
                if step == max_steps:
                    break
        files = os.listdir(out_dir)
        size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in files)
        print(f"{len(files)} checkpoint files, {size / 1e6:.0f} MB")
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
