"""A batch's first tensor and its leading dimension, for counting the samples a batch holds;
and a look at the next batch a dataset fetcher makes, once."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from trainprof.probe import records


def leading_dim(batch: Any) -> int:
    """Leading dimension of the first tensor found in the batch (-1 if none)."""
    tensor = first_tensor(batch)
    if tensor is None:
        return -1
    return int(tensor.shape[0]) if len(tensor.shape) else 1


def first_tensor(batch: Any) -> Any:
    """The first tensor (anything with a ``shape``) in a batch of nested tuples, lists and
    dicts, up to 4 deep; None if there is none."""
    obj = batch
    for _ in range(4):
        if getattr(obj, "shape", None) is not None:
            return obj
        if isinstance(obj, (list, tuple)) and obj:
            obj = obj[0]
        elif isinstance(obj, dict) and obj:
            obj = next(iter(obj.values()))
        else:
            return None
    return None


def on_first_fetch(cls: Any, see: Callable[[Any], None], part: str) -> None:
    """Show the next batch ``cls.fetch`` makes to ``see``, once; the wrapper takes itself away
    first, so a steady batch (or a raising fetch) pays nothing. ``see``'s errors are recorded
    as ``part``'s."""
    fetch = cls.fetch

    @functools.wraps(fetch)
    def first_fetch(self: Any, possibly_batched_index: Any) -> Any:
        cls.fetch = fetch
        batch = fetch(self, possibly_batched_index)
        try:
            see(batch)
        except Exception as exc:
            records.record_error(part, exc)
        return batch

    cls.fetch = first_fetch
