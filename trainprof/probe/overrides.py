"""`trainprof tune`'s settings override: applied to the training DataLoader and torch's threads.

`trainprof tune` relaunches the job with ``TRAINPROF_OVERRIDES`` set to a JSON object of the
settings one candidate changes: the DataLoader's ``num_workers``, ``persistent_workers``,
``pin_memory`` and ``prefetch_factor``, and ``threads`` (torch's intra-op threads). They apply to
the training loader only: the first DataLoader iterated with gradients on and the model not in
``eval()`` mode (a validation pass runs under ``no_grad`` or after ``eval()``, and a sanity check
before training does both), and every DataLoader built later over the same dataset object (a
loop that builds its loader each epoch). The threads are set in the main process as that loader
starts its first pass, and the job's own later ``torch.set_num_threads`` calls get the candidate's
count instead; DataLoader workers keep theirs.

Applied once per loader, as its pass starts (``DataLoader.__iter__``): nothing is added to a
step. What was applied is written to ``overrides-applied.json`` in the run directory, so `tune`
can tell a candidate that never reached the job from one that made no difference.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

from trainprof.probe import records
from trainprof.probe.state import state
from trainprof.store.schema import ENV_RUN_DIR

ENV_OVERRIDES = "TRAINPROF_OVERRIDES"
APPLIED_FILE = "overrides-applied.json"
LOADER_SETTINGS = ("num_workers", "persistent_workers", "pin_memory", "prefetch_factor")


class Overrides:
    """The candidate's settings and where they were applied, in this process."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.dataset_id: int | None = None  # the training loader's dataset, once chosen
        self.threads_pid: int | None = None  # the process whose threads were set
        self.applied: dict[str, Any] = {"pid": os.getpid(), "loaders": 0}


active: Overrides | None = None  # None: no override asked (every DataLoader pass checks it)


def parse(text: str | None) -> dict[str, Any] | None:
    """The settings in ``TRAINPROF_OVERRIDES``, only the known ones of the right type; None
    when the variable is unset or holds no JSON object."""
    if not text:
        return None
    try:
        raw = json.loads(text)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    out: dict[str, Any] = {}
    for key in ("num_workers", "prefetch_factor", "threads"):
        v = raw.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v >= (1 if key == "threads" else 0):
            out[key] = v
    for key in ("persistent_workers", "pin_memory"):
        if isinstance(raw.get(key), bool):
            out[key] = raw[key]
    return out


def install(torch: Any) -> None:
    """Read the override from the environment; with ``threads``, wrap ``torch.set_num_threads``."""
    global active
    settings = parse(os.environ.get(ENV_OVERRIDES))
    if settings is None:
        return
    active = Overrides(settings)
    if "threads" in settings:
        torch.set_num_threads = _held_threads(torch.set_num_threads, active)


def at_pass(loader: Any) -> None:
    """Called as a DataLoader's pass starts: apply the settings if it is the training loader."""
    o = active
    if o is None or getattr(loader, "_tp_overridden", False):
        return
    try:
        dataset_id = id(getattr(loader, "dataset", None))
        if o.dataset_id is None:
            if not _training_now():
                return
            o.dataset_id = dataset_id
        elif dataset_id != o.dataset_id:
            return
        before = {k: getattr(loader, k, None) for k in LOADER_SETTINGS}
        _apply_loader(loader, o.settings)
        object.__setattr__(loader, "_tp_overridden", True)
        o.applied["loaders"] += 1
        o.applied["before"] = before
        o.applied["after"] = {k: getattr(loader, k, None) for k in LOADER_SETTINGS}
        o.applied["dataset"] = type(loader.dataset).__qualname__
        if "threads_job" not in o.applied:
            import torch

            o.applied["threads_job"] = torch.get_num_threads()  # the job's own, as it trains
        if "threads" in o.settings and o.threads_pid is None:
            import torch

            o.threads_pid = os.getpid()
            torch.set_num_threads(o.settings["threads"])  # the wrapper: the candidate's count
            o.applied["threads"] = torch.get_num_threads()
        _write_applied(o)
    except Exception as exc:  # the job runs on with its own settings; tune sees none applied
        records.record_error("overrides", exc)


def _training_now() -> bool:
    """Gradients on and the model not in ``eval()`` mode: a training pass is starting. A model
    put back in training mode by assignment (Lightning, after its sanity check) counts too."""
    import torch

    if not torch.is_grad_enabled():
        return False
    if state.training is not False:
        return True
    ref = state.model_ref
    model = ref() if ref is not None else None
    return getattr(model, "training", False) is True


def _apply_loader(loader: Any, settings: dict[str, Any]) -> None:
    """The loader's settings changed in place, kept as consistent as ``DataLoader()`` requires:
    no ``prefetch_factor`` nor persistent workers without workers, a ``prefetch_factor`` of 2
    (torch's default) with them."""
    workers = settings.get("num_workers", loader.num_workers)
    if workers == 0:
        prefetch, persistent = None, False
    else:
        prefetch = settings.get("prefetch_factor", loader.prefetch_factor or 2)
        persistent = settings.get("persistent_workers", loader.persistent_workers)
    values = {
        "num_workers": workers,
        "prefetch_factor": prefetch,
        "persistent_workers": persistent,
        "pin_memory": settings.get("pin_memory", loader.pin_memory),
    }
    if getattr(loader, "_iterator", None) is not None:  # persistent workers of an earlier pass
        object.__setattr__(loader, "_iterator", None)
    for name, value in values.items():
        object.__setattr__(loader, name, value)  # persistent_workers is read-only after init


def _held_threads(orig: Any, o: Overrides) -> Any:
    """``torch.set_num_threads`` that, once the override set the threads in this process, sets
    the candidate's count whatever the job asks (a DataLoader worker's own call passes)."""

    @functools.wraps(orig)
    def set_num_threads(n: int) -> None:
        if o.threads_pid == os.getpid():
            n = o.settings["threads"]
        orig(n)

    return set_num_threads


def _write_applied(o: Overrides) -> None:
    run_dir = os.environ.get(ENV_RUN_DIR)
    if not run_dir:
        return
    record = {"settings": o.settings, **o.applied}
    try:
        with open(os.path.join(run_dir, APPLIED_FILE), "w", encoding="utf-8") as f:
            json.dump(record, f)
    except OSError as exc:
        records.record_error("overrides", exc)
