"""`trainprof tune`'s settings override: applied to the training DataLoader and torch's threads.

`trainprof tune` relaunches the job with ``TRAINPROF_OVERRIDES`` set to a JSON object of the
settings one candidate changes: the DataLoader's ``num_workers``, ``persistent_workers``,
``pin_memory`` and ``prefetch_factor``, and ``threads`` (torch's intra-op threads). They apply to
the training loader only: the first DataLoader iterated with gradients on and the model not in
``eval()`` mode (a validation pass runs under ``no_grad`` or after ``eval()``, and a sanity check
before training does both), and every DataLoader built later over the same dataset object (a
loop that builds its loader each epoch). The threads are set in the main process as that loader
starts its first pass, and the job's own later ``torch.set_num_threads`` calls get the candidate's
count instead; DataLoader workers keep theirs. In a job without a training DataLoader the
threads are set as torch is imported, in the main process.

Applied once per loader, as its pass starts (``DataLoader.__iter__``): nothing is added to a
step. What was applied is written to ``overrides-applied.json`` in the run directory, so `tune`
can tell a candidate that never reached the job from one that made no difference.
"""

from __future__ import annotations

import atexit
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
# The two ceilings: the loop with its input made free (its first batches replayed), and the
# training loader iterated alone, with no step.
CEILINGS = ("step", "input")
REPLAYED = 8  # batches fetched for real, then served again and again


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
    if raw.get("ceiling") in CEILINGS:
        out["ceiling"] = raw["ceiling"]
        window = raw.get("window_s")
        out["window_s"] = float(window) if isinstance(window, (int, float)) and window > 0 else 2.0
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
    import multiprocessing

    if multiprocessing.parent_process() is None:  # the job's main process, not a worker
        atexit.register(_threads_at_exit, torch, active)
        if "threads" in settings:  # a loop without a DataLoader gets them too
            active.threads_pid = os.getpid()
            torch.set_num_threads(settings["threads"])
            active.applied["threads"] = torch.get_num_threads()
            _write_applied(active)


def _threads_at_exit(torch: Any, o: Overrides) -> None:
    """The main process's thread count as the job ends: the job's own where no override set it
    (a loop without a DataLoader has no first pass to read it at)."""
    try:
        o.applied["threads_at_exit"] = torch.get_num_threads()
        _write_applied(o)
    except Exception:
        pass


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
        if o.settings.get("ceiling") == "step":
            o.applied["replayed"] = _replay_first_batches(loader)
        _write_applied(o)
    except Exception as exc:  # the job runs on with its own settings; tune sees none applied
        records.record_error("overrides", exc)
        return
    if o.settings.get("ceiling") == "input":
        o.applied["input_alone"] = _input_alone(loader, o.settings["window_s"])
        _write_applied(o)
        raise SystemExit(0)  # the measurement is all this run is for


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


def _input_alone(loader: Any, window_s: float) -> dict[str, float]:
    """Iterate the training loader alone, as many passes as ``window_s`` takes once each worker
    has made its first batch (its start-up), and count the samples: what the input pipeline
    gives with no step to wait for."""
    import time

    from trainprof.probe.batches import leading_dim

    warm = max(1, loader.num_workers)
    seen, samples, started = 0, 0, None
    while True:
        before = seen
        for batch in loader:  # the pass goes through the probe's hooks; this override is done
            seen += 1
            if started is None:
                if seen >= warm:
                    started = time.monotonic()
                continue
            samples += max(0, leading_dim(batch))
            if time.monotonic() - started >= window_s:
                return {"samples": samples, "seconds": time.monotonic() - started}
        if seen == before:  # an empty loader
            return {"samples": samples, "seconds": 0.0}


def _replay_first_batches(loader: Any) -> int:
    """From now on the loader serves its first ``REPLAYED`` batches again and again, in the
    main process, its sampler still ending each pass: the loop runs with its input made free.
    Returns how many batches were fetched for real."""
    from torch.utils.data.dataloader import _SingleProcessDataLoaderIter

    real = type(loader)._get_iterator(loader)
    cached = []
    for _ in range(REPLAYED):
        try:
            cached.append(next(real))
        except StopIteration:
            break
    del real  # its workers end with it
    if not cached:
        return 0
    _apply_loader(loader, {"num_workers": 0})

    class Replay(_SingleProcessDataLoaderIter):  # type: ignore[misc]
        served = 0

        def _next_data(self) -> Any:
            self._next_index()  # the pass ends where the job's own would
            batch = cached[Replay.served % len(cached)]
            Replay.served += 1
            return batch

    object.__setattr__(loader, "_get_iterator", lambda: Replay(loader))
    return len(cached)
