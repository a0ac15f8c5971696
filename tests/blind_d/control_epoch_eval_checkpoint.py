"""Control (healthy): a small audio-event CNN on precomputed log-mel patches, with an
evaluation and a checkpoint at the end of every epoch.

The trap: evaluation and ``torch.save`` inside the training loop, a validation
``DataLoader``, a ``.item()`` per step and a log line per epoch: every ingredient of an
eval stall or a checkpoint stall. Here they are the right size: the validation loader is
built once, outside the epoch loop (``num_workers=0``, tensors already in memory), and
each evaluation is 128 clips in inference mode (~3 % of an epoch's 1,536 clips' forward
and backward); the checkpoint (~40 KB: model, SGD momentum) is written once per epoch to
a temporary directory, well under 1 % of the run; the features were computed once, before
training, so ``__getitem__`` is an index and a random time shift (``torch.roll``).

An expert would report no problem: nearly all of the steady time is forward, backward and
the optimizer step. ``--fixed`` changes nothing.

Measured (2 CPUs shared with other work, load 2.5-2.7, OMP_NUM_THREADS=1; median of 3
interleaved /usr/bin/time runs): 5.97 s, and 5.46 s with ``--fixed`` (the same code: the
difference is the machine's noise).
"""

import argparse
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

CLASSES = 10
N_MELS = 32
FRAMES = 64


class MelPatches(Dataset):
    def __init__(self, feats, labels, shift):
        self.feats, self.labels, self.shift = feats, labels, shift

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = self.feats[i]
        if self.shift:
            x = torch.roll(x, int(torch.randint(-8, 9, ())), dims=1)
        return x, self.labels[i]


def synth(n, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    band = torch.arange(N_MELS).float()[None, :, None]
    centre = (labels.float() * 3 + 2)[:, None, None]
    feats = torch.exp(-((band - centre) ** 2) / 8.0).expand(n, N_MELS, FRAMES).clone()
    return feats + 1.5 * torch.randn(n, N_MELS, FRAMES, generator=g), labels


class EventCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * (N_MELS // 2), CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x.unsqueeze(1))), 2)
        return self.fc(F.relu(self.c2(x)).mean(dim=3).flatten(1))  # pool time, keep bands


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    correct = total = 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
        total += len(y)
    model.train()
    return correct / total


def train(fixed):
    del fixed  # healthy: nothing to fix
    epochs = int(os.environ.get("EPOCHS", "4"))
    train_x, train_y = synth(1536, 0)
    val_x, val_y = synth(128, 1)
    loader = DataLoader(MelPatches(train_x, train_y, shift=True), batch_size=32, shuffle=True)
    val_loader = DataLoader(TensorDataset(val_x, val_y), batch_size=128)
    model = EventCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with tempfile.TemporaryDirectory() as root:
        for epoch in range(epochs):
            running = 0.0
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                running += loss.item()
            acc = evaluate(model, val_loader)
            torch.save(
                {"epoch": epoch, "model": model.state_dict(), "optim": opt.state_dict()},
                os.path.join(root, "last.pt"),
            )
            print(f"epoch {epoch}: loss {running / len(loader):.4f} val acc {acc:.3f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="accepted, changes nothing")
    train(ap.parse_args().fixed)
