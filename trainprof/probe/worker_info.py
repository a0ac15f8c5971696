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
from typing import Any

from trainprof import probe

_TORCH_DATA = "/torch/utils/data/"


def watch_in_worker() -> None:
    """At a DataLoader worker's start (``_worker_loop``); fail-open like every probe hook."""
    if "loader" in probe.disabled_parts():
        return
    import torch.utils.data as data
    import torch.utils.data._utils.worker as worker_mod

    original = worker_mod.get_worker_info
    if getattr(original, "_tp_original", None) is not None:
        return  # a worker forked from a worker that already watches
    asked = _noting(original)
    data.get_worker_info = asked
    worker_mod.get_worker_info = asked
    for module in list(sys.modules.values()):
        try:  # a lazy module may import on attribute access, and fail: leave it be
            names = module.__dict__
            for name, value in list(names.items()):
                if value is original:
                    names[name] = asked
        except Exception:
            continue


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
                probe.record_info({"asked_worker_info": True})
        return info

    get_worker_info._tp_original = original  # type: ignore[attr-defined]
    return get_worker_info
