"""Timers of a batch's making: dataset fetch, collate_fn and pin_memory, in workers too.

Each dataset fetch (``__getitem__`` calls and the collate) adds to cumulative counters, in
whichever process makes the batch: a DataLoader worker resets them as it starts, names itself
as a worker, and flushes them as it ends; ``counters.py`` writes them at flush points.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

from trainprof.probe import batch_kind, records, worker_info
from trainprof.probe.counters import flush_counters
from trainprof.probe.state import state

_clock = time.monotonic


def install(torch: Any, off: frozenset[str]) -> None:
    """The fetch, collate and pin timers (the ``fetch`` part); the worker loop's wrapper always."""
    import torch.utils.data._utils.fetch as fetch_mod
    import torch.utils.data._utils.worker as worker_mod

    if "fetch" not in off:
        for cls in (fetch_mod._MapDatasetFetcher, fetch_mod._IterableDatasetFetcher):
            cls.fetch = _timed_fetch(cls.fetch)  # type: ignore[method-assign]
        base_fetcher = fetch_mod._BaseDatasetFetcher
        base_fetcher.__init__ = _timed_collate(base_fetcher.__init__)  # type: ignore[method-assign]
        import torch.utils.data._utils.pin_memory as pin_mod

        pin_mod.pin_memory = _timed_pin(pin_mod.pin_memory)
        batch_kind.install(fetch_mod)  # outermost: it takes itself away after one batch
    worker_mod._worker_loop = _worker_loop(worker_mod._worker_loop)


def _timed_fetch(orig: Any) -> Any:
    @functools.wraps(orig)
    def fetch(self: Any, possibly_batched_index: Any) -> Any:
        t0 = _clock()
        try:
            return orig(self, possibly_batched_index)
        finally:
            state.fetch_time += _clock() - t0
            state.fetch_count += 1

    return fetch


def _timed_collate(orig_init: Any) -> Any:
    """Each fetcher (main process or worker) gets a timed copy of its collate_fn, so the
    loader's cost splits into __getitem__ and collate (a tokenizing collate_fn is common)."""

    @functools.wraps(orig_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(self, *args, **kwargs)
        collate = getattr(self, "collate_fn", None)
        if collate is None:
            return

        def timed(data: Any) -> Any:
            t0 = _clock()
            try:
                return collate(data)
            finally:
                state.collate_time += _clock() - t0

        timed.__wrapped__ = collate  # type: ignore[attr-defined]
        self.collate_fn = timed

    return __init__


def _timed_pin(orig: Any) -> Any:
    """pin_memory's top-level call; it recurses through the module global, so only the
    outermost call adds time."""
    depth = [0]

    @functools.wraps(orig)
    def pin_memory(data: Any, *args: Any, **kwargs: Any) -> Any:
        if depth[0]:
            return orig(data, *args, **kwargs)
        depth[0] += 1
        t0 = _clock()
        try:
            return orig(data, *args, **kwargs)
        finally:
            depth[0] -= 1
            state.pin_time += _clock() - t0

    return pin_memory


def _worker_loop(orig: Any) -> Any:
    @functools.wraps(orig)
    def loop(*args: Any, **kwargs: Any) -> Any:
        w = records.writer()
        if w is not None:
            state.fetch_count = state.fetch_reported = 0
            state.fetch_time = state.collate_time = state.pin_time = 0.0
            worker_id = kwargs.get("worker_id", args[10] if len(args) > 10 else None)
            w.set_role("worker", worker_id=worker_id, parent_pid=os.getppid())
            w.start_timer()
            try:
                kind = kwargs.get("dataset_kind", args[0] if args else None)
                # an IterableDataset (_DatasetKind.Iterable == 1): does this worker split it?
                worker_info.watch_in_worker(iterable=kind != 0)
            except Exception as exc:
                records.record_error("worker_info", exc)
        try:
            return orig(*args, **kwargs)
        finally:
            if w is not None:
                flush_counters()
                w.flush()

    return loop
