"""Does a DataLoader worker ask which worker it is? An ``IterableDataset`` runs whole in every
worker; one that never calls ``torch.utils.data.get_worker_info()`` (to split its stream) has
each worker yield every sample. ``get_worker_info`` is wrapped once torch is imported (before
the job's own ``from torch.utils.data import get_worker_info``); the first call that returns a
worker's info to the job's code (torch's own collate asks too) leaves one record,
``{"asked_worker_info": true}``. In the main process it returns None and records nothing;
each call costs one Python call more."""

from __future__ import annotations

import functools
import sys
from typing import Any

from trainprof import probe

_said = False
_TORCH_DATA = "/torch/utils/data/"


def install(torch: Any) -> None:
    if probe.writer() is None or "loader" in probe.disabled_parts():
        return
    import torch.utils.data as data
    import torch.utils.data._utils.worker as worker_mod

    original = worker_mod.get_worker_info
    asked = _noting(original)
    worker_mod.get_worker_info = asked
    if getattr(data, "get_worker_info", None) is original:
        data.get_worker_info = asked


def _noting(original: Any) -> Any:
    @functools.wraps(original)
    def get_worker_info() -> Any:
        global _said
        info = original()
        if info is not None and not _said:
            # torch's own calls do not split a stream (default_collate asks, every batch, to
            # collate into shared memory): only the job's, or a data library's, count
            caller = sys._getframe(1).f_code.co_filename.replace("\\", "/")
            if _TORCH_DATA not in caller:
                _said = True
                probe.record_info({"asked_worker_info": True})
        return info

    return get_worker_info
