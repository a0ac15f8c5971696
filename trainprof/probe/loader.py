"""The job's DataLoaders: each batch's wait, its sampler's share and samples; epochs; configuration.

Measured in the main process, per batch: the time inside ``__next__`` (the data wait) and,
within it, in the sampler (``_next_index``), the leading dimension of the batch's first tensor
(its samples); these add up until the optimizer post-hook (``steps.py``) ends the step. Before
the first optimizer step each batch is a record of its own. Once per pass over a loader: the
first batch's wait (an epoch record) and the sampler's epoch; once per DataLoader object: its
configuration. The device timeline's ``fetch`` and ``batch`` marks come from here too.
"""

from __future__ import annotations

import functools
import json
import time
from typing import Any

from trainprof.probe import overrides, records
from trainprof.probe import tracebacks as _tracebacks  # noqa: F401
from trainprof.probe.batches import leading_dim
from trainprof.probe.device_marks import mark
from trainprof.probe.state import state
from trainprof.probe.steps import early_step
from trainprof.probe.watches import mode_restored
from trainprof.store.schema import BATCH, EPOCH, LOADER

_clock = time.monotonic
# ``tracebacks`` is imported above, with this module, not when the job's excepthook needs it:
# an error beneath these wrappers (EMFILE, with the job's fds used up) can leave no fd to import
# it with then, and the job's traceback would show a frame of this module.


def install(torch: Any, off: frozenset[str]) -> None:
    """The DataLoader's ``__next__``, ``_next_index`` and ``__iter__`` wrappers (``loader``)."""
    if "loader" not in off:
        import torch.utils.data.dataloader as dl

        overrides.install(torch)  # trainprof tune's candidate settings, where it asks for some
        _wrap_loader(dl)


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
                _record_epoch(self, started, dt + getattr(self, "_tp_iter_s", 0.0))
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
        if overrides.active is not None:
            overrides.at_pass(self)
        t0 = _clock()
        it = orig_iter(self)
        # Starting workers happens here (with "spawn", until each has read its start-up data):
        # the loop waits for its data loader, as in __next__, and the epoch's first batch too.
        started_s = _clock() - t0
        state.wait += started_s
        try:
            it._tp_iter_s = started_s
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
    """A small integer per DataLoader object, kept on the object (an ``id`` is reused once a
    loader built each epoch is freed); its configuration is recorded the first time."""
    key = getattr(loader, "_tp_key", None)
    if type(key) is int:
        return key
    keys = state.loader_keys
    if id(loader) in keys:
        return keys[id(loader)]
    key = state.loader_count
    state.loader_count += 1
    try:
        loader._tp_key = key
    except Exception:  # a loader class with __slots__: by id, as good as it gets
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
        # the dataset object's identity in this process: a DataLoader built anew over the same
        # dataset (each epoch) is the same loader to the analysis
        "dataset_id": id(dataset) if dataset is not None else None,
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


def _record_loader_callers() -> None:
    """The stack that asks the DataLoader for a batch, with lines, read once, at the first
    fetch after the first optimizer step (the training loop's, not a sanity check's): the
    user's ``next(it)`` or ``for batch in loader`` line as a fact. py-spy's --nonblocking
    samples of a loop that fetches 64 batches a step were torn or failed (a quarter of them
    on a 2-core machine), and none named that line once."""
    records.record_callers("loader_callers", 3, lines=True)  # above the __next__ wrapper
