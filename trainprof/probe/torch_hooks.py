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

from trainprof.probe import debug_modes, models, optimized, records, saves, structure, worker_info
from trainprof.probe.batches import leading_dim
from trainprof.probe.device_marks import mark, start_timeline, sync_pre_step, timeline_failed
from trainprof.probe.flops import StepFlops
from trainprof.probe.state import State, state, weak
from trainprof.probe.writer import FLUSH_EVERY_RECORDS
from trainprof.store.schema import (
    BACKWARD,
    BATCH,
    ENV_FLOPS,
    EPOCH,
    FETCH,
    LOADER,
    MODE,
    TORCH,
)

_clock = time.monotonic
# How the job calls zero_grad() and autocast is read over its first optimizer steps; then those
# wrappers take themselves out (a training loop calls both the same way every step, and each
# wrapper is a Python call a step, dear on the cold caches of a fast GPU loop).
WATCH_STEPS = 2


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
    w.add(f"{TORCH} {w.us(_clock())}\n")
    w.on_tick.append(flush_counters)
    import torch.optim.optimizer as optim_mod
    import torch.utils.data._utils.fetch as fetch_mod
    import torch.utils.data._utils.worker as worker_mod
    import torch.utils.data.dataloader as dl

    if "steps" not in off:
        optim_mod.register_optimizer_step_post_hook(_on_optimizer_step)
    state.device_off = "device" in off  # the pre-step hook comes with a CUDA timeline
    if not state.device_off or "steps" not in off:
        import torch.autograd as autograd

        autograd.backward = _marked_backward(autograd, autograd.backward, "steps" not in off)
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
    if "mode" not in off:
        torch.nn.Module.train = _watched_train(torch.nn.Module.train)
    if "precision" not in off:
        ac = torch.amp.autocast_mode.autocast
        ac.__enter__ = _noticed_autocast(ac, ac.__enter__)
        opt_cls = torch.optim.Optimizer
        opt_cls.zero_grad = _noticed_zero_grad(opt_cls, opt_cls.zero_grad)
    if "steps" not in off:
        opt_cls = torch.optim.Optimizer
        opt_cls.__init__ = _noticed_optimizer(opt_cls, opt_cls.__init__)  # type: ignore[method-assign]


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


# ---------------------------------------------------------------- optimizer steps


def _on_optimizer_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    s = state
    if s.primary_ref() is optimizer:
        s.primary_entry[1] += 1  # the common case: the counted optimizer stepped again
        s.other_stepped_twice = None
    else:
        key = id(optimizer)
        if not _counts_as_step(s, optimizer, key, s.optimizers.get(key)):
            return
        s.primary_ref, s.primary_entry = s.optimizers[key]
    now = _clock()
    w = s.writer
    if w is None:
        return
    s.steps += 1
    # the writer's add_step, inline (a call a step is dear on cold caches)
    queued = w.steps
    queued.append((now, s.last_boundary, s.wait, s.sampler, s.batch_size, s.fetches, s.samples))
    if len(queued) >= FLUSH_EVERY_RECORDS or now >= w.step_check_at:
        w.steps_queued(now)
    s.last_boundary = now
    s.wait = s.sampler = 0.0
    s.fetches = s.samples = 0
    tl = s.timeline
    if tl is not None:
        if (
            tl.active
            or tl.pending
            or s.pre_step_in
            or (tl.step + 1 >= tl.next_timed and now >= tl.not_before)
        ):
            try:
                tl.step_ended()
                sync_pre_step(s, tl.active)
            except Exception as exc:
                timeline_failed(exc)
        else:
            tl.step += 1  # an untimed step with nothing to read: all step_ended would do
    if s.flops is not None:
        _count_flops(s)
    if s.first_step_t is None:
        s.first_step_t = now
    if s.max_steps is not None and s.steps >= s.max_steps:
        _stop_if_long_enough(s, s.steps, now, w)


def _stop_if_long_enough(s: State, steps: int, now: float, w: Any) -> None:
    """``--steps``: ``steps`` have been made since ``first_step_t``; stop the job cleanly once
    they have also spanned ``steps_min_s`` (a fast job's few steps would leave the rules no
    steady state to judge)."""
    if now - (s.first_step_t or now) >= s.steps_min_s:
        records.record_info({"stop": "steps", "steps": steps})
        w.flush()
        raise SystemExit(0)


def _early_step(s: State, now: float, w: Any, trains: bool) -> None:
    """A DataLoader batch or a backward return before any optimizer step, in a job given
    ``--steps``: each ends a step of a job without a torch optimizer (the report counts them
    so), so they stop it too where they are training (``trains``): a backward return always, a
    batch once a backward pass has come among the batches (a pass over the loader for
    statistics, before the optimizer is built, must not stop the job). Not in a job that has
    built an optimizer: its first step may come after many micro-batches (gradient
    accumulation), and its steps count from there."""
    if s.optimizer_made or s.max_steps is None:
        return
    s.early_steps += 1
    if s.first_step_t is None:
        s.first_step_t = now
    if trains and s.early_steps >= s.max_steps:
        _stop_if_long_enough(s, s.early_steps, now, w)


def _counts_as_step(s: State, optimizer: Any, key: int, known: Any) -> bool:
    """Book a step of an optimizer that is new, not the counted one, or whose id was reused;
    True if it is the counted (primary) optimizer's step."""
    if known is None or known[0]() is not optimizer:
        if known is not None and key == s.primary_opt_id:
            s.primary_opt_id = None  # the counted optimizer is gone; its id is reused
            s.other_stepped_twice = key  # ...by its replacement: counted from this step
        entry: list[Any] = [f"{type(optimizer).__name__}#{len(s.optimizer_log)}", 0]
        s.optimizer_log.append(entry)
        known = s.optimizers[key] = (weak(optimizer), entry)
    known[1][1] += 1
    if s.primary_opt_id is None and s.other_stepped_twice == key:
        s.primary_opt_id = key
    elif s.primary_opt_id is None:
        s.primary_opt_id = key
        _record_step_callers()
        found = _models_at_first_step(optimizer)
        _record_precision(optimizer, found.models)
        _record_unoptimized(optimizer, found)
        debug_modes.at_first_step()
    elif key != s.primary_opt_id:
        # A GAN's two optimizers alternate: keep counting the first. One that steps twice while
        # the counted one does not has replaced it (a new optimizer per phase): follow it.
        if s.other_stepped_twice != key:
            s.other_stepped_twice = key
            return False
        s.primary_opt_id = key
    s.other_stepped_twice = None
    return True


def _record_step_callers() -> None:
    """The functions on the stack that steps the optimizer, read once, at the first step: the
    training loop and its train-step helpers as a fact. Stack samples alone can miss them (a
    loop whose steps take a few ms between long stalls gets a handful of backward samples)."""
    records.record_callers("step_callers", 3, lines=False)  # from the optimizer hook up


def _record_loader_callers() -> None:
    """The stack that asks the DataLoader for a batch, with lines, read once, at the first
    fetch after the first optimizer step (the training loop's, not a sanity check's): the
    user's ``next(it)`` or ``for batch in loader`` line as a fact. py-spy's --nonblocking
    samples of a loop that fetches 64 batches a step were torn or failed (a quarter of them
    on a 2-core machine), and none named that line once."""
    records.record_callers("loader_callers", 3, lines=True)  # above the __next__ wrapper


def _count_flops(s: State) -> None:
    flops = s.flops
    if flops is None:
        return
    try:
        if not flops.done:
            flops.begin(s.steps)
        else:
            flops.end(s.steps)
            if flops.counter is None:
                s.flops = None
    except Exception as exc:  # fail open: no FLOP count, the job goes on
        s.flops = None
        records.record_info({"flops": {"skipped": f"{type(exc).__name__}: {exc}"[:300]}})


def _marked_backward(owner: Any, orig: Any, count: bool) -> Any:
    """``torch.autograd.backward`` (what ``Tensor.backward`` calls): the device timeline's mark,
    and, in a job that has made neither an optimizer step nor a DataLoader batch (a hand-written
    loop and update), a record of each return, which then counts as its step. Once either comes,
    one integer test a call and an attribute read (the timeline's, on an untimed step); a job
    whose first optimizer step brought no CUDA timeline has no use for it: it leaves."""

    @functools.wraps(orig)
    def backward(*args: Any, **kwargs: Any) -> Any:
        s = state
        tl = s.timeline
        if tl is not None and tl.active:
            mark(tl, "backward")
        if s.steps or s.batches_seen or not count:
            if tl is None and s.steps:
                _unwrap(owner, "backward", backward, orig)
            elif not s.steps and s.max_steps is not None:
                s.backward_seen = True  # among batches: they are training (see _early_step)
            return orig(*args, **kwargs)
        out = orig(*args, **kwargs)
        w = records.writer()
        if w is not None and not s.steps:  # an optimizer stepped inside it (a grad hook): no
            now = _clock()
            w.add(f"{BACKWARD} {w.us(now)}\n")
            if s.max_steps is not None:
                _early_step(s, now, w, trains=True)
        return out

    return backward


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
            _mode_restored(s, t0)
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
                        _early_step(s, t0 + dt, w, trains=s.backward_seen)
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


# ---------------------------------------------------------------- precision (once per process)


def _models_at_first_step(optimizer: Any) -> models.Found:
    """The job's models and its name for ``optimizer`` (``models.py``); the ``train()`` module
    alone where the frames cannot be read."""
    trained = state.model_ref() if state.model_ref is not None else None
    try:
        import torch

        return models.found(torch, trained, optimizer)
    except Exception as exc:
        records.record_error("models", exc)
        return models.Found([("model", trained)] if trained is not None else [], None)


def _record_precision(optimizer: Any, found: list[tuple[str, Any]]) -> None:
    """Where and in which dtype the model trains, and the TF32 settings: read once, at the
    first optimizer step, for the mixed-precision and pinned-memory rules."""
    try:
        import torch

        param = optimizer.param_groups[0]["params"][0]
        info: dict[str, Any] = {
            "device": param.device.type,
            "dtype": str(param.dtype).replace("torch.", ""),
            "matmul_precision": torch.get_float32_matmul_precision(),
            "cuda_matmul_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
            "torch": str(torch.__version__),
            # the CUDA version torch was built for, None for a CPU-only build (no CUDA call)
            "cuda_build": torch.version.cuda,
            # torch's intra-op threads (one per core it sees: a container's host cores)
            "intra_op_threads": torch.get_num_threads(),
        }
        if param.device.type != "cuda":
            # a GPU hidden on purpose (CUDA_VISIBLE_DEVICES="") is no GPU left unused
            info["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        if param.device.type == "cuda":
            info["capability"] = list(torch.cuda.get_device_capability(param.device))
            info["gpu_name"] = torch.cuda.get_device_name(param.device)
            start_timeline(torch, param.device)
            props = torch.cuda.get_device_properties(param.device)
            info["memory_total"] = props.total_memory
            # Which of the machine's GPUs this is, in NVML's terms (store/gpus.py).
            uuid = getattr(props, "uuid", None)
            if uuid is not None:
                info["gpu_uuid"] = str(uuid)
        counted = param.device.type == "cuda" or os.environ.get(ENV_FLOPS) == "cpu"
        if counted and "flops" not in records.disabled_parts():
            state.flops = StepFlops(torch)
        records.record_info({"precision": info})
        trained = state.model_ref() if state.model_ref is not None else None
        model = models.main_model(found, trained, optimizer)
        records.record_info({"structure": structure.facts(torch, model, optimizer)})
    except Exception as exc:
        records.record_error("precision", exc)


def _record_unoptimized(optimizer: Any, found: models.Found) -> None:
    """The job's models' parameters with a gradient that no optimizer made so far holds, once,
    at the first optimizer step (``optimized.py``); nothing where no model was found."""
    s = state
    if found.models:
        try:
            made = [opt for ref in s.made_optimizers if (opt := ref()) is not None]
            mine = made if any(opt is optimizer for opt in made) else [optimizer, *made]
            facts = optimized.facts(found.models, mine)
            records.record_info({"unoptimized": {**facts, "optimizer_name": found.optimizer_name}})
        except Exception as exc:
            records.record_error("unoptimized", exc)
    s.made_optimizers = []


def _mode_restored(s: State, now: float) -> None:
    """Called for each batch while the probe thinks the model evaluates: a model put back in
    training mode without ``train()`` (Lightning restores each module's ``training`` flag by
    assignment after validation) ends the evaluation here, as its next training batch comes."""
    ref = s.model_ref
    model = ref() if ref is not None else None
    if model is None or getattr(model, "training", False) is not True:
        return
    s.training = True
    w = records.writer()
    if w is not None:
        w.add(f"{MODE} {w.us(now)} 1\n")


def _remember_model(module: Any) -> None:
    import weakref

    try:
        state.model_ref = weakref.ref(module)
    except TypeError:
        pass


def _noticed_zero_grad(owner: type, orig: Any) -> Any:
    """``Optimizer.zero_grad``: a call with ``set_to_none=False`` is recorded once; the wrapper
    leaves once that is seen or the job has made ``WATCH_STEPS`` optimizer steps."""

    @functools.wraps(orig)
    def zero_grad(self: Any, set_to_none: bool = True) -> Any:
        s = state
        if not set_to_none and not s.zero_grad_kept:
            s.zero_grad_kept = True
            records.record_info({"zero_grad_set_to_none": False})
        if s.zero_grad_kept or s.steps >= WATCH_STEPS:
            _unwrap(owner, "zero_grad", zero_grad, orig)
        return orig(self, set_to_none)

    return zero_grad


def _noticed_optimizer(owner: type, orig: Any) -> Any:
    """``Optimizer.__init__`` until the first optimizer step: the job has a torch optimizer (with
    ``--steps``, its optimizer steps are what it counts: see ``_early_step``), and each one made
    before training, whose parameters the first step compares with the model's (a GAN's two,
    say: ``_record_unoptimized``). Leaves at the first optimizer made after that step."""

    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        s = state
        s.optimizer_made = True
        if s.steps:
            _unwrap(owner, "__init__", __init__, orig)
        else:
            s.made_optimizers.append(weak(self))
        orig(self, *args, **kwargs)

    return __init__


def _noticed_autocast(owner: type, orig: Any) -> Any:
    """``autocast.__enter__``: each enabled device and dtype is recorded once; the wrapper leaves
    at the first enabled autocast after ``WATCH_STEPS`` optimizer steps (the training step's
    own has been seen by then). A job without autocast never calls it."""
    seen: set[tuple[str, str]] = set()

    @functools.wraps(orig)
    def __enter__(self: Any) -> Any:
        if getattr(self, "_enabled", True):
            key = (str(getattr(self, "device", "?")), str(getattr(self, "fast_dtype", "?")))
            if key not in seen:
                seen.add(key)
                records.record_info({"autocast": key[0], "dtype": key[1]})
            if state.steps >= WATCH_STEPS:
                _unwrap(owner, "__enter__", __enter__, orig)
        return orig(self)

    return __enter__


def _unwrap(owner: type, name: str, wrapper: Any, orig: Any) -> None:
    """Put ``orig`` back, unless something else has wrapped ``wrapper`` since."""
    if vars(owner).get(name) is wrapper:
        setattr(owner, name, orig)


# ---------------------------------------------------------------- checkpoints and modes


def _watched_train(orig: Any) -> Any:
    @functools.wraps(orig)
    def train(self: Any, mode: bool = True) -> Any:
        s = state
        s.train_depth += 1
        try:
            return orig(self, mode)
        finally:
            s.train_depth -= 1
            if s.train_depth == 0 and s.model_ref is None:
                _remember_model(self)
            if s.train_depth == 0 and s.training is not bool(mode):
                s.training = bool(mode)
                w = records.writer()
                if w is not None:
                    w.add(f"{MODE} {w.us(_clock())} {int(bool(mode))}\n")

    return train
