"""What the main process's first batch is made of: tensors, numpy arrays or other objects.

A DataLoader worker hands its batch to the main process by pickling it: a tensor crosses in
shared memory (a handle), a numpy array or a Python object is pickled through a pipe and
unpickled by the main process, every byte of it. With ``num_workers=0`` nothing crosses, so
what adding workers would cost is only known from what the batch holds. The first batch the
main process makes leaves one record, ``{"batch_kind": {"tensors", "arrays", "other",
"array_bytes"}}``; the wrapper then takes itself away, so a steady batch pays nothing.
"""

from __future__ import annotations

import os
from typing import Any

from trainprof.probe import records
from trainprof.probe.batches import on_first_fetch

MAX_DEPTH = 4  # nested tuples, lists and dicts walked
MAX_LEAVES = 256  # leaves counted in one batch


def install(fetch_mod: Any) -> None:
    """Look at the first batch each dataset fetcher makes in this (the main) process."""
    main_pid = os.getpid()

    def see(batch: Any) -> None:
        if os.getpid() == main_pid:  # a worker's batch crosses by the rules measured there
            records.record_info({"batch_kind": kind_of(batch)})

    for cls in (fetch_mod._MapDatasetFetcher, fetch_mod._IterableDatasetFetcher):
        on_first_fetch(cls, see, "batch_kind")


def kind_of(batch: Any) -> dict[str, int]:
    """Counts of a batch's leaves by how a worker would hand them over, and the arrays' bytes."""
    import torch

    counts = {"tensors": 0, "arrays": 0, "other": 0, "array_bytes": 0}
    todo: list[tuple[Any, int]] = [(batch, 0)]
    leaves = 0
    while todo and leaves < MAX_LEAVES:
        obj, depth = todo.pop()
        if isinstance(obj, (list, tuple)) and depth < MAX_DEPTH:
            todo.extend((x, depth + 1) for x in obj)
            continue
        if isinstance(obj, dict) and depth < MAX_DEPTH:
            todo.extend((x, depth + 1) for x in obj.values())
            continue
        leaves += 1
        if isinstance(obj, torch.Tensor):
            counts["tensors"] += 1
        elif type(obj).__module__ == "numpy" and type(obj).__name__ == "ndarray":
            counts["arrays"] += 1
            counts["array_bytes"] += int(getattr(obj, "nbytes", 0))
        else:
            counts["other"] += 1
    return counts
