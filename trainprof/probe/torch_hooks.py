"""Hooks installed into torch once the user's code has imported it.

Measured per optimizer step (the primary optimizer: the first one that steps, so a GAN's
second optimizer does not split steps): wall time since the previous step, time inside
DataLoader ``__next__`` (data wait) and, within it, in the sampler (``_next_index``), the
leading dimension of the first tensor of the batch, the number of fetches and samples.
Before the first optimizer step, and in jobs that never step one, each fetch is its own
record; in a job that has made neither, each ``backward()`` return is. Also: each DataLoader's
configuration, each epoch's first-batch wait, ``torch.save`` calls, top-level
``train()``/``eval()`` switches, dataset fetch time (in workers too), and a DataLoader worker's
identity.

Everything on the hot path is a few clock reads and integer adds; formatting happens once per
step. Any probe error disables that hook's bookkeeping, never the job's call.
"""

from __future__ import annotations

import functools
import json
import os
import time
from typing import Any

from trainprof.probe import records, saves, steps, watches, worker_info
from trainprof.probe.batches import leading_dim
from trainprof.probe.device_marks import mark
from trainprof.probe.state import state
from trainprof.probe.steps import early_step
from trainprof.probe.watches import mode_restored
from trainprof.store.schema import BATCH, EPOCH, FETCH, LOADER, TORCH

_clock = time.monotonic


def install(torch: Any) -> None:
    w = records.writer()
    if w is None:
        return
    off = records.disabled_parts()
    state.writer = w
    state.last_boundary = w.t0
    # --steps counts the steps the "steps" part sees (with it off, nothing is counted)
    state.max_steps = records.max_steps() if "steps" not in off else None
    state.steps_min_s = records.steps_min_s()
    state.device_off = "device" in off  # the pre-step hook comes with a CUDA timeline
    w.add(f"{TORCH} {w.us(_clock())}\n")
    w.on_tick.append(flush_counters)
    import torch.utils.data._utils.fetch as fetch_mod
    import torch.utils.data._utils.worker as worker_mod
    import torch.utils.data.dataloader as dl

    steps.install(torch, off)
    if "loader" not in off:
        _wrap_loader(dl)
    if "fetch" not in off:
        for cls in (fetch_mod._MapDatasetFetcher, fetch_mod._IterableDatasetFetcher):
            cls.fetch = _timed_fetch(cls.fetch)  # type: ignore[method-assign]
        base_fetcher = fetch_mod._BaseDatasetFetcher
        base_fetcher.__init__ = _timed_collate(base_fetcher.__init__)  # type: ignore[method-assign]
        import torch.utils.data._utils.pin_memory as pin_mod

        pin_mod.pin_memory = _timed_pin(pin_mod.pin_memory)
    worker_mod._worker_loop = _worker_loop(worker_mod._worker_loop)
    if "save" not in off:
        torch.save = saves.timed(torch.save, "f")
    watches.install(torch, off)


def flush_counters() -> None:
    """Write the cumulative counters that moved (called at flush points): dataset fetches, and
    the optimizers that stepped (which one is counted, and how often each stepped)."""
    w = records.writer()
    if w is None:
        return
    _report_optimizers()
    if state.fetch_count == state.fetch_reported:
        return
    state.fetch_reported = state.fetch_count
    s = state
    w.add(
        f"{FETCH} {w.us(_clock())} {s.fetch_count} {int(s.fetch_time * 1e6)} "
        f"{int(s.collate_time * 1e6)} {int(s.pin_time * 1e6)}\n"
    )


def _report_optimizers() -> None:
    s = state
    total = sum(n for _label, n in s.optimizer_log)
    if len(s.optimizer_log) < 2 or total == s.optimizers_reported:
        return
    s.optimizers_reported = total
    counted = s.optimizers.get(s.primary_opt_id) if s.primary_opt_id is not None else None
    records.record_info(
        {
            "optimizers": {
                "counted": counted[1][0] if counted else None,
                "steps": {label: n for label, n in s.optimizer_log},
            }
        }
    )


def _record_loader_callers() -> None:
    """The stack that asks the DataLoader for a batch, with lines, read once, at the first
    fetch after the first optimizer step (the training loop's, not a sanity check's): the
    user's ``next(it)`` or ``for batch in loader`` line as a fact. py-spy's --nonblocking
    samples of a loop that fetches 64 batches a step were torn or failed (a quarter of them
    on a 2-core machine), and none named that line once."""
    records.record_callers("loader_callers", 3, lines=True)  # above the __next__ wrapper


# ---------------------------------------------------------------- DataLoader


def _wrap_loader(dl: Any) -> None:
    base = dl._BaseDataLoaderIter
    orig_next = base.__next__
    orig_next_index = base._next_index
    orig_iter = dl.DataLoader.__iter__

    @functools.wraps(orig_next)
    def __next__(self: Any) -> Any:
        s = state
        tl = s.timeline
        if s.fetches and tl is not None and tl.active:
            mark(tl, "fetch")  # a later micro-batch of the step
        t0 = _clock()
        if s.training is False:
            mode_restored(s, t0)
        batch = orig_next(self)
        dt = _clock() - t0
        s.wait += dt
        s.fetches += 1
        # The common batches inline (a tensor, or a list or tuple whose first item is one): a
        # call a step is dear on a GPU host's cold caches; anything else goes to leading_dim.
        first = batch[0] if type(batch) in (tuple, list) and batch else batch
        shape = getattr(first, "shape", None)
        n = int(shape[0]) if isinstance(shape, tuple) and shape else leading_dim(batch)
        if s.fetches == 1:
            s.batch_size = n
        if n > 0:
            s.samples += n
        if s.epochs_pending:  # an iterator of __iter__'s whose first batch is not recorded
            started = getattr(self, "_tp_epoch_start", None)
            if started is not None:
                self._tp_epoch_start = None
                s.epochs_pending -= 1
                _record_epoch(self, started, dt)
        if not s.loader_caller_recorded:  # steps never fall: after this, nothing to test
            if s.steps:
                s.loader_caller_recorded = True
                _record_loader_callers()
            else:
                s.batches_seen = True
                w = records.writer()
                if w is not None:
                    w.add(f"{BATCH} {w.us(t0 + dt)} {int(dt * 1e6)} {int(s.sampler * 1e6)} {n}\n")
                    if s.max_steps is not None:
                        early_step(s, t0 + dt, w, trains=s.backward_seen)
        # Last: on a GPU that waits for the host, the time of the probe's own work above would
        # count as the step's forward on the device; after the mark it is the gap's, like the fetch
        tl = s.timeline
        if tl is not None and tl.active:
            mark(tl, "batch")
        return batch

    @functools.wraps(orig_next_index)
    def _next_index(self: Any) -> Any:
        t0 = _clock()
        try:
            return orig_next_index(self)
        finally:
            state.sampler += _clock() - t0

    @functools.wraps(orig_iter)
    def __iter__(self: Any) -> Any:
        t0 = _clock()
        it = orig_iter(self)
        try:
            key = _loader_key(self)
            it._tp_epoch_start = t0
            it._tp_loader_key = key
            state.epochs_pending += 1
            _record_sampler_epoch(self, key)
        except Exception as exc:  # no epoch record for this loader: say why, once
            records.record_error("DataLoader.__iter__", exc)
        return it

    base.__next__ = __next__
    base._next_index = _next_index
    dl.DataLoader.__iter__ = __iter__


def _record_sampler_epoch(loader: Any, key: int) -> None:
    """A shuffling sampler that seeds its order with an epoch (``DistributedSampler``): its
    epoch as each pass over the loader starts. Unchanged from pass to pass, ``set_epoch`` was
    never called and every epoch is shuffled the same way. The passes over one dataset count
    as one loader's, the first one's: a loop that builds its DataLoader and sampler anew each
    epoch, each at epoch 0, reads the same order each time too. Once a pass: not on the hot
    path."""
    sampler = getattr(loader, "sampler", None)
    epoch = getattr(sampler, "epoch", None)
    if type(epoch) is int and getattr(sampler, "shuffle", False) is True:
        first = state.shuffled_datasets.setdefault(id(getattr(loader, "dataset", None)), key)
        records.record_info({"sampler_epoch": [first, epoch]})


def _record_epoch(it: Any, started: float, first_wait: float) -> None:
    w = records.writer()
    if w is not None:
        key = getattr(it, "_tp_loader_key", -1)
        w.add(f"{EPOCH} {key} {w.us(started)} {int(first_wait * 1e6)}\n")


def _loader_key(loader: Any) -> int:
    """A small integer per DataLoader object; its configuration is recorded the first time."""
    keys = state.loader_keys
    key = keys.get(id(loader))
    if key is not None:
        return key
    key = len(keys)
    keys[id(loader)] = key
    w = records.writer()
    if w is not None:
        w.add(f"{LOADER} {key} {json.dumps(_loader_config(loader), default=str)}\n")
    return key


def _loader_config(loader: Any) -> dict[str, Any]:
    import torch.multiprocessing as mp
    from torch.utils.data import IterableDataset

    dataset = getattr(loader, "dataset", None)
    iterable = isinstance(dataset, IterableDataset)
    sampler = getattr(loader, "sampler", None)
    batch_sampler = getattr(loader, "batch_sampler", None)
    collate = getattr(loader, "collate_fn", None)
    try:
        length: int | None = len(loader)
    except Exception:
        length = None
    return {
        "batch_size": getattr(loader, "batch_size", None),
        "num_workers": getattr(loader, "num_workers", None),
        "pin_memory": getattr(loader, "pin_memory", None),
        "persistent_workers": getattr(loader, "persistent_workers", None),
        "prefetch_factor": getattr(loader, "prefetch_factor", None),
        "drop_last": getattr(loader, "drop_last", None),
        "sampler": _qualname(sampler),
        "batch_sampler": _qualname(batch_sampler),
        "collate_fn": _qualname(collate),
        "worker_init_fn": _qualname(getattr(loader, "worker_init_fn", None)),
        "dataset": _qualname(dataset),
        # An IterableDataset makes its samples in __iter__ (its __getitem__ is the base class's)
        "iterable": iterable,
        "getitem_at": _code_at(
            getattr(type(dataset), "__iter__" if iterable else "__getitem__", None)
        ),
        "collate_at": _code_at(collate),
        "len": length,
        "sharing_strategy": mp.get_sharing_strategy(),
        "start_method": mp.get_start_method(allow_none=True),
    }


def _code_at(fn: Any) -> list[Any] | None:
    """[file, first line, qualname] of a Python function or callable object (None for
    builtins): where a dataset's __getitem__ or a collate_fn is defined."""
    if callable(fn) and not hasattr(fn, "__code__") and not hasattr(fn, "__func__"):
        fn = type(fn).__call__  # a collator object: its __call__
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return None
    return [code.co_filename, code.co_firstlineno, getattr(fn, "__qualname__", code.co_name)]


def _qualname(obj: Any) -> str | None:
    if obj is None:
        return None
    target = obj if callable(obj) and hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"


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
                worker_info.watch_in_worker()  # an IterableDataset: does this worker split it?
            except Exception as exc:
                records.record_error("worker_info", exc)
        try:
            return orig(*args, **kwargs)
        finally:
            if w is not None:
                flush_counters()
                w.flush()

    return loop
