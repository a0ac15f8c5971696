"""Does a DataLoader worker ask which worker it is? An ``IterableDataset`` runs whole in every
worker; one that never calls ``torch.utils.data.get_worker_info()`` (to split its stream) has
each worker yield every sample.

Watched in the workers only (the main process's ``default_collate`` calls it for every tensor
of every batch, and must not pay for a wrapper): at a worker's start, ``get_worker_info`` is
replaced in torch's modules and in every loaded module that imported the name itself (``from
torch.utils.data import get_worker_info``, bound before the worker started). The first call
from outside torch's data package (``default_collate`` asks too) leaves one record,
``{"asked_worker_info": true}``; later calls cost one Python call more each."""

from __future__ import annotations

import functools
import sys
import zlib
from typing import Any

from trainprof.probe import records
from trainprof.probe.batches import on_first_fetch

_TORCH_DATA = "/torch/utils/data/"


def watch_in_worker(iterable: bool = True) -> None:
    """At a DataLoader worker's start (``_worker_loop``), for an IterableDataset; fail-open."""
    if not iterable or "loader" in records.disabled_parts():
        return
    import torch.utils.data as data
    import torch.utils.data._utils.worker as worker_mod

    original = worker_mod.get_worker_info
    if getattr(original, "_tp_original", None) is not None:
        return  # a worker forked from a worker that already watches
    _fingerprint_first_batch()
    asked = _noting(original)
    data.get_worker_info = asked
    worker_mod.get_worker_info = asked
    # One lookup a module, by the name: walking every module's items would touch the refcount
    # of every object the parent made, and copy most of its heap into each forked worker.
    for module in list(sys.modules.values()):
        try:  # a lazy module may import on attribute access, and fail: leave it be
            names = module.__dict__
            if names.get("get_worker_info") is original:
                names["get_worker_info"] = asked
        except Exception:
            continue


def _fingerprint_first_batch() -> None:
    """The worker's first batch from an IterableDataset leaves a checksum of its first tensor's
    first values, ``{"first_batch": crc32}``: two workers whose first batches are equal are the
    proof that they read the same stream (random or queued streams differ). The wrapper goes
    away after that batch: a steady batch pays nothing."""
    import torch.utils.data._utils.fetch as fetch_mod

    def see(batch: Any) -> None:
        values = _first_values(batch)
        if values is not None:
            _record_now({"first_batch": zlib.crc32(repr(values).encode())})

    on_first_fetch(fetch_mod._IterableDatasetFetcher, see, "first_batch")


def _first_values(batch: Any) -> list[Any] | None:
    """Up to 64 values of the first tensor found in a batch (nested tuples, lists, dicts)."""
    from trainprof.probe.batches import first_tensor

    tensor = first_tensor(batch)
    if tensor is None or not hasattr(tensor, "reshape"):
        return None
    return list(tensor.reshape(-1)[:64].tolist())


def _noting(original: Any) -> Any:
    said = False

    @functools.wraps(original)
    def get_worker_info() -> Any:
        nonlocal said
        info = original()
        if not said:
            caller = sys._getframe(1).f_code.co_filename.replace("\\", "/")
            if _TORCH_DATA not in caller:
                said = True
                _record_now({"asked_worker_info": True})
        return info

    get_worker_info._tp_original = original  # type: ignore[attr-defined]
    return get_worker_info


def _record_now(info: dict[str, object]) -> None:
    """Once per worker, written at once: a worker of a short job is often killed at the job's
    exit before its writer's next tick, and these records would go with it."""
    records.record_info(info)
    w = records.writer()
    if w is not None:
        w.flush()
