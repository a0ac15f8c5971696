"""Checkpoint saves the training loop waits for: ``torch.save``, safetensors' ``save_file``
and Lightning's ``_atomic_save``.

Each call is one record (its end, duration, bytes written and path), from which the report
finds checkpoint stalls. safetensors is how the Hugging Face Trainer and accelerate write
model weights (the optimizer state still goes through ``torch.save``); Lightning serialises a
checkpoint with ``torch.save`` into memory, then writes it through fsspec, all inside its
``_atomic_save``. Each is wrapped the moment its module finishes importing, before a library
binds the name (``from safetensors.torch import save_file``). A save inside a save (Lightning's
``torch.save`` into its buffer) is part of the outer one, not a record of its own.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from types import ModuleType
from typing import Any

from trainprof.probe import records
from trainprof.store.schema import SAVE

_clock = time.monotonic
_saving = threading.local()  # .depth: saves this thread is inside


def timed(orig: Any, path_kw: str) -> Any:
    """``orig(obj, path, ...)`` with a SAVE record; the path is its second argument or
    ``path_kw``. It returns what ``orig`` returns and raises what it raises."""

    @functools.wraps(orig)
    def save(*args: Any, **kwargs: Any) -> Any:
        if getattr(_saving, "depth", 0):
            return orig(*args, **kwargs)
        _saving.depth = 1
        t0 = _clock()
        try:
            return orig(*args, **kwargs)
        finally:
            _saving.depth = 0
            t1 = _clock()
            w = records.writer()
            if w is not None:
                f = args[1] if len(args) > 1 else kwargs.get(path_kw)
                w.add(
                    f"{SAVE} {w.us(t1)} {int((t1 - t0) * 1e6)} {saved_bytes(f)} "
                    f"{json.dumps(str(getattr(f, 'name', f)))}\n"  # a file object: its path
                )

    return save


def saved_bytes(f: Any) -> int:
    """The file's size after the save (a path), or the stream's position (a file object)."""
    try:
        if isinstance(f, (str, os.PathLike)):
            return os.path.getsize(f)
        return int(f.tell())
    except Exception:
        return -1


def wrap_safetensors(module: ModuleType) -> None:
    """The post-import hook for ``safetensors.torch``."""
    save_file = getattr(module, "save_file", None)
    if callable(save_file):
        module.save_file = timed(save_file, "filename")  # type: ignore[attr-defined]


def wrap_lightning(module: ModuleType) -> None:
    """The post-import hook for Lightning's ``cloud_io`` (``lightning.fabric`` and the older
    ``lightning_fabric``)."""
    atomic_save = getattr(module, "_atomic_save", None)
    if callable(atomic_save):
        module._atomic_save = timed(atomic_save, "filepath")  # type: ignore[attr-defined]


# module → its post-import hook
HOOKS = {
    "safetensors.torch": wrap_safetensors,
    "lightning.fabric.utilities.cloud_io": wrap_lightning,
    "lightning_fabric.utilities.cloud_io": wrap_lightning,
}
