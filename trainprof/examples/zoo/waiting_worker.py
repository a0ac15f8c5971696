"""Input-bound on workers that wait: each sample is a request to a remote object store.

A dataset of records kept in an object store (S3, GCS, an HTTP blob service), read one
``GET`` a sample in ``__getitem__``; the latency of each request (4 ms here, ``time.sleep``
standing in for the network round trip: the thread is off the CPU either way) dominates, the
decoding is small. Two workers on a two-core machine look like "as many workers as CPUs",
and the usual advice (a cheaper ``__getitem__``, no more workers than cores) does nothing: the
workers use a few percent of a CPU each while the loop waits for them.

Fix: many more workers than CPUs (waiting workers do not compete for them), or read a
batch's samples concurrently with a thread pool in ``__getitems__``: 15 workers took this loop
from 30 to 136 it/s, a 16-thread pool in the 2 workers to 112 it/s (its own compute is then the
limit); or copy the data next to the job once.
"""

from __future__ import annotations

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

FEATURES, CLASSES = 64, 4
LATENCY_S = 0.004  # one request's round trip to the store


class RemoteRecords(Dataset):
    def __init__(self, n: int) -> None:
        self.keys = [f"records/{i:06d}.bin" for i in range(n)]

    def __len__(self) -> int:
        return len(self.keys)

    def _get(self, key: str) -> bytes:
        time.sleep(LATENCY_S)  # the GET's round trip: waiting on the network, not computing
        seed = int(key[8:14])
        return (
            torch.randn(FEATURES, generator=torch.Generator().manual_seed(seed)).numpy().tobytes()
        )

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        blob = self._get(self.keys[i])
        return torch.frombuffer(bytearray(blob), dtype=torch.float32), i % CLASSES


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    loader = DataLoader(
        RemoteRecords(2048), batch_size=16, shuffle=True, num_workers=2, persistent_workers=True
    )
    model = nn.Sequential(
        nn.Linear(FEATURES, 1024),
        nn.ReLU(),
        nn.Linear(1024, 1024),
        nn.ReLU(),
        nn.Linear(1024, CLASSES),
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step, (x, y) in enumerate(loader):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if step % 40 == 0:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)
        if step == 119:
            break


if __name__ == "__main__":
    main()
