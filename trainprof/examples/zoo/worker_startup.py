"""Worker start-up: short epochs with ``persistent_workers=False`` and an expensive worker init.

Reproduces the "workers are re-created every epoch" cost from seeds 002 and 004
(``persistent_workers=True`` "avoids re-creating the worker processes"): every DataLoader
worker opens the annotation database in ``worker_init_fn`` (here: parses a large JSON
annotation file and builds its lookup tables, the way an LMDB/HDF5/COCO index is opened
per worker). Without persistent workers the loader forks fresh workers at the start of every
epoch, so every epoch begins with a long wait for the first batch while both workers re-parse
the same file; with short epochs that wait is most of the wall time.

Fix: ``persistent_workers=True`` (workers and their opened index survive across epochs); make
the per-worker initialisation lighter (a binary index, memory-mapped arrays) or do it once in
the main process before the workers fork.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

FEATURES = 24
CLASSES = 8


def write_annotations(root: str, n_records: int) -> str:
    g = torch.Generator().manual_seed(0)
    features = torch.randn(n_records, FEATURES, generator=g).mul(1e4).round().div(1e4).tolist()
    labels = torch.randint(0, CLASSES, (n_records,), generator=g).tolist()
    records = [
        {
            "id": f"clip_{i:06d}",
            "label": labels[i],
            "features": features[i],
            "meta": {"camera": i % 12, "fps": 30, "split": "train"},
        }
        for i in range(n_records)
    ]
    path = os.path.join(root, "annotations.json")
    with open(path, "w") as f:
        json.dump(records, f)
    return path


class AnnotatedClips(Dataset):
    """Samples are looked up in an annotation index that each worker opens for itself."""

    def __init__(self, annotation_path: str, n_train: int):
        self.annotation_path = annotation_path
        self.n_train = n_train
        self.features: torch.Tensor | None = None
        self.labels: torch.Tensor | None = None

    def open_annotations(self) -> None:
        with open(self.annotation_path) as f:
            records = json.load(f)
        by_id = {r["id"]: r for r in records}
        ordered = [by_id[f"clip_{i:06d}"] for i in range(len(records))]
        self.features = torch.tensor([r["features"] for r in ordered])
        self.labels = torch.tensor([r["label"] for r in ordered])

    def __len__(self) -> int:
        return self.n_train

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.features is None or self.labels is None:
            self.open_annotations()
        assert self.features is not None and self.labels is not None
        return self.features[index], self.labels[index]


def worker_init_fn(worker_id: int) -> None:
    info = get_worker_info()
    assert info is not None
    random.seed(1234 + worker_id)
    info.dataset.open_annotations()  # type: ignore[union-attr]


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    root = tempfile.mkdtemp(prefix="zoo-worker-startup-")
    try:
        dataset = AnnotatedClips(write_annotations(root, n_records=12_000), n_train=768)
        loader = DataLoader(
            dataset,
            batch_size=64,
            shuffle=True,
            num_workers=2,
            persistent_workers=False,
            worker_init_fn=worker_init_fn,
        )
        model = nn.Sequential(
            nn.Linear(FEATURES, 1024),
            nn.ReLU(),
            nn.Linear(1024, 1024),
            nn.ReLU(),
            nn.Linear(1024, CLASSES),
        )
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        criterion = nn.CrossEntropyLoss()
        for epoch in range(6):
            model.train()
            correct = 0
            for features, labels in loader:
                logits = model(features)
                loss = criterion(logits, labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                correct += int((logits.argmax(dim=1) == labels).sum())
            print(f"epoch {epoch}: loss {loss.item():.4f} train acc {correct / len(dataset):.3f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
