"""Unsplit stream: an IterableDataset read by several DataLoader workers, none of which asks
which worker it is, so each yields the whole stream.

A map-style dataset is split among the workers by the sampler; an ``IterableDataset`` is not:
each worker runs its own copy of ``__iter__`` from the start. Unless ``__iter__`` (or a
``worker_init_fn``) splits the stream by ``torch.utils.data.get_worker_info()``, every sample
reaches the loop ``num_workers`` times an epoch: the job trains on duplicates, an "epoch" is
``num_workers`` epochs, and the extra workers buy no speed. PyTorch's own documentation warns
of it; nothing fails, so it goes unseen. The proof is in the run: two workers whose first
batches are equal (a checksum of each worker's first batch; a random or a queued stream
differs from worker to worker, and is left alone).

Anti-pattern::

    class Shards(IterableDataset):
        def __iter__(self):
            for path in self.paths:
                yield from read(path)

    DataLoader(Shards(paths), batch_size=64, num_workers=4)

Best practice::

    class Shards(IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            mine = self.paths if info is None else self.paths[info.id :: info.num_workers]
            for path in mine:
                yield from read(path)
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import primary_loader
from trainprof.analysis.rules.registry import rule


@rule(
    id="iterable-unsplit",
    examples=("iterable_unsplit",),
    title="Unsplit IterableDataset",
    family="input",
    harm="results",
    needs=("steps", "loader"),
)
def check(m: Metrics) -> Finding | None:
    loader = primary_loader(m)
    if loader is None or not loader.iterable or m.workers_asked_info is not False:
        return None  # map-style, no worker recorded, or a worker asked (it can split)
    cfg = loader.config
    workers = cfg.get("num_workers")
    if not isinstance(workers, int) or workers < 2 or cfg.get("worker_init_fn"):
        return None  # one worker duplicates nothing; a worker_init_fn may split the stream
    same = _same_first_batch(m.workers_first_batches)
    if same is None:
        return None  # their first batches differ (a random or a queued stream): no proof
    dataset = str(cfg.get("dataset") or "the dataset").rsplit(".", 1)[-1]
    return Finding(
        id="iterable-unsplit",
        severity="warning",
        title=(
            f"Each of the {workers} DataLoader workers yields the whole {dataset} stream: every "
            f"sample reaches the loop {workers} times an epoch"
        ),
        evidence=(
            f"the training loader reads {dataset}, an IterableDataset, with num_workers={workers}",
            "none of its workers called torch.utils.data.get_worker_info(), and the loader has "
            "no worker_init_fn: each worker ran the whole __iter__ from its start",
            f"workers {same[0]} and {same[1]} began with the same first batch (equal checksums "
            "of its first values)",
        ),
        fix=(
            "split the stream in __iter__: info = torch.utils.data.get_worker_info(); take "
            "every info.num_workers-th shard or sample from the info.id-th (all of it when "
            "info is None, in the main process)",
            "or use a map-style Dataset (__getitem__ and __len__): the sampler then splits it",
        ),
        where=loader.user_code_at("getitem"),
    )


def _same_first_batch(firsts: tuple[tuple[int, int], ...]) -> tuple[int, int] | None:
    """Two worker ids whose first batches were equal (one worker started again in a later
    epoch repeats its own: not a duplicate)."""
    seen: dict[int, int] = {}
    for worker_id, crc in firsts:
        other = seen.setdefault(crc, worker_id)
        if other != worker_id:
            return (min(other, worker_id), max(other, worker_id))
    return None
