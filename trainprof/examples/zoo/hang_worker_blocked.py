"""Hang: DataLoader workers wait forever for a shard their prefetch thread never delivered.

Reproduces the "training freezes after N steps, no error, all processes alive, 0 % CPU"
reports from jobs that stream sharded data from object storage. Each DataLoader worker starts
a background thread that downloads the shards in order and signals a ``threading.Event`` per
shard; ``__getitem__`` waits on the event of the shard it needs. When one download fails (here
the store times out on shard 2), the thread logs a warning, says it "will retry on demand",
and moves on, but nothing ever retries and nothing ever sets that shard's event. The first
20 optimizer steps (shards 0 and 1) train normally; then both workers block in
``__getitem__`` on ``ready.wait()`` with no timeout, and the main process blocks in the
DataLoader's result queue waiting for a batch that will never come. Nothing crashes, so
nothing exits: the job hangs until something kills it.

Fix: never wait without a timeout in a dataset (``event.wait(timeout=...)`` and raise, so the
DataLoader surfaces the error); make a failed download fail the sample (re-raise, or retry
with a bounded budget) instead of logging and continuing; set ``DataLoader(timeout=...)`` so a
stuck worker becomes an error; use py-spy dump on the workers to see where they wait.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

log = logging.getLogger("shards")

FEATURES = 32
CLASSES = 8
SHARD_SIZE = 160


class ObjectStore:
    """Stand-in for an S3/GCS client: ``get`` returns a shard after some network latency."""

    def __init__(self, bucket: str, unavailable: set[int]):
        self.bucket = bucket
        self.unavailable = unavailable  # shards whose GET times out (a flaky replica)

    def get(self, shard: int) -> dict[str, torch.Tensor]:
        time.sleep(0.02)
        if shard in self.unavailable:
            raise TimeoutError(f"GET {self.bucket}/train-{shard:05d}.pt: read timed out")
        g = torch.Generator().manual_seed(1000 + shard)
        features = torch.randn(SHARD_SIZE, FEATURES, generator=g)
        target = (features[:, :CLASSES] * 2).argmax(dim=1)
        return {"features": features, "target": target}


class StreamingShards(Dataset):
    """Map-style view over remote shards, downloaded in the background by each worker."""

    def __init__(self, store: ObjectStore, n_shards: int):
        self.store = store
        self.n_shards = n_shards
        self._owner_pid: int | None = None

    def __len__(self) -> int:
        return self.n_shards * SHARD_SIZE

    def _start_prefetch(self) -> None:
        # Lazily, once per process: each DataLoader worker gets its own copy of the dataset.
        self._owner_pid = os.getpid()
        self._cache: dict[int, dict[str, torch.Tensor]] = {}
        self._ready = [threading.Event() for _ in range(self.n_shards)]
        threading.Thread(target=self._prefetch, name="shard-prefetch", daemon=True).start()

    def _prefetch(self) -> None:
        for shard in range(self.n_shards):
            try:
                self._cache[shard] = self.store.get(shard)
            except Exception as exc:
                log.warning("prefetch of shard %d failed (%s); will retry on demand", shard, exc)
                continue
            self._ready[shard].set()

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if self._owner_pid != os.getpid():
            self._start_prefetch()
        shard, offset = divmod(index, SHARD_SIZE)
        self._ready[shard].wait()  # the shard "will be there soon"
        data = self._cache[shard]
        return {"features": data["features"][offset], "target": data["target"][offset]}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    store = ObjectStore("s3://corpus-v3/shards", unavailable={2})
    dataset = StreamingShards(store, n_shards=6)
    # Shards are read in order (shuffling happens inside a shard in the real pipeline).
    loader = DataLoader(dataset, batch_size=16, shuffle=False, num_workers=2)
    model = nn.Sequential(
        nn.Linear(FEATURES, 1536),
        nn.ReLU(),
        nn.Linear(1536, 1536),
        nn.ReLU(),
        nn.Linear(1536, 1536),
        nn.ReLU(),
        nn.Linear(1536, CLASSES),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    step = 0
    for epoch in range(3):
        for batch in loader:
            loss = criterion(model(batch["features"]), batch["target"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 5 == 0:
                log.info("epoch %d step %d: loss %.4f", epoch, step, loss.item())


if __name__ == "__main__":
    main()
