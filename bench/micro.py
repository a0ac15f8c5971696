"""Per-call cost of each probe hook on the training hot path (run with the probe inside).

``python -m bench.micro`` in the environment ``trainprof run`` gives a job: importing torch
installs the probe's hooks. Each hook is then timed against what it wraps, with the inner
call made trivial so only the probe's own work is left: the optimizer post-hook as torch calls
it, and the DataLoader/fetch wrappers built by the probe's own wrapper factories around stand-in
callables (a ``__next__`` that returns a real ``[x, y]`` batch of 8). The ``torch.distributed``
wrappers (``trainprof.probe.collectives``) come apart (``distributed``): a Python collective's
timer around a trivial collective, and the ``autograd.backward`` wait timer of a DDP job around
a real backward (its hook and final callback run on the autograd engine; a job without DDP has
no such wrapper). Best case: hot caches, minimum of several timed
repeats. Prints one JSON line.

Uses the probe's internals by name (``steps``, ``loader``, ``fetch_timers``, ``watches``,
``device_marks``, ``collectives``); a hook whose factory has changed is reported as missing
rather than failing the benchmark.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
import time
import types
import weakref
from collections.abc import Callable
from typing import Any

REPEATS = 7
CALLS = 20000
BACKWARD_CALLS = 4000  # a real backward takes ~35 µs here: fewer calls for a similar timed span


class _SyncingModel:
    """Stands for a DDP model outside no_sync(): the probe reads this flag each backward."""

    require_backward_grad_sync = True


def _per_call(fn: Callable[[], Any], calls: int = CALLS) -> float:
    clock = time.perf_counter
    best = float("inf")
    for _ in range(REPEATS):
        t0 = clock()
        for _ in range(calls):
            fn()
        best = min(best, clock() - t0)
    return best / calls


def _added(hooked: Callable[[], Any], plain: Callable[[], Any], calls: int = CALLS) -> float:
    """µs the hook adds per call: min-of-repeats of each, interleaved, subtracted."""
    _per_call(hooked, calls // 10)
    _per_call(plain, calls // 10)
    return max(0.0, (_per_call(hooked, calls) - _per_call(plain, calls)) * 1e6)


def _floors(torch: Any, optim_mod: Any) -> list[dict[str, Any]]:
    """What any hook pays before doing its work: a clock read, an empty wrapper around a
    trivial callable, and an empty global optimizer post-hook through a real ``step()``."""

    def inner(*args: Any, **kwargs: Any) -> None:
        return None

    def fixed(x: Any) -> None:
        return None

    @functools.wraps(inner)
    def empty(*args: Any, **kwargs: Any) -> Any:
        return inner(*args, **kwargs)

    def empty_fixed(x: Any) -> Any:
        return fixed(x)

    out = [
        {"name": f"time.{name}()", "us": _per_call(getattr(time, name)) * 1e6}
        for name in ("monotonic", "perf_counter", "perf_counter_ns")
    ]
    out.append(
        {
            "name": "empty wrapper f(*args, **kwargs)",
            "us": _added(lambda: empty(1), lambda: inner(1)),
        }
    )
    out.append(
        {"name": "empty wrapper f(x)", "us": _added(lambda: empty_fixed(1), lambda: fixed(1))}
    )
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=0.1)
    param.grad = torch.zeros(1)

    def once(n: int = 500) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            opt.step()
        return (time.perf_counter() - t0) / n

    diffs, plains = [], []
    for _ in range(31):  # paired, a median: a step of one parameter is noisy, the hook small
        # (signed: below zero is the noise)
        plain = once()
        handle = optim_mod.register_optimizer_step_post_hook(lambda o, a, k: None)
        try:
            hooked = once()
        finally:
            handle.remove()
        diffs.append(hooked - plain)
        plains.append(plain)
    diffs.sort()
    plain = min(plains)
    hooked = plain + diffs[len(diffs) // 2]
    out.append({"name": "empty global post-hook, through SGD.step()", "us": (hooked - plain) * 1e6})
    out.append({"name": "SGD.step() of one parameter, for scale", "us": plain * 1e6})
    return out


def main() -> int:
    import torch
    import torch.optim.optimizer as optim_mod

    from trainprof.probe import records

    if records.writer() is None:
        print(json.dumps({"error": "the probe is not running (run under the probe's environment)"}))
        return 1
    from trainprof.probe import device_marks, fetch_timers, loader, steps, watches
    from trainprof.probe.state import state

    torch.set_num_threads(1)
    hooks: list[dict[str, Any]] = []
    missing: list[str] = []

    def add(name: str, per_step: float, measure: Callable[[], float]) -> None:
        try:
            hooks.append({"name": name, "us": measure(), "per_step": per_step})
        except Exception as exc:  # internals moved: say so, keep going
            missing.append(f"{name}: {type(exc).__name__}: {exc}")

    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=0.1)
    step_hooks = [
        h
        for h in optim_mod._global_optimizer_post_hooks.values()
        if getattr(h, "__globals__", {}).get("__name__") == steps.__name__
    ]

    def step_hook() -> float:
        (hook,) = step_hooks
        args: tuple[Any, ...] = (opt,)
        kwargs: dict[str, Any] = {}
        return _added(lambda: hook(opt, args, kwargs), lambda: None)

    add("optimizer step post-hook (S record)", 1, step_hook)

    batch = [torch.randn(8, 32), torch.randint(0, 10, (8,))]
    index = list(range(8))

    class FakeIter:
        def __next__(self) -> Any:
            return batch

        def _next_index(self) -> Any:
            return index

    class FakeLoader:
        batch_size = 8
        num_workers = 0

        def __iter__(self) -> Any:
            return FakeIter()

    plain_next = FakeIter.__next__
    plain_index = FakeIter._next_index
    fake = types.SimpleNamespace(_BaseDataLoaderIter=FakeIter, DataLoader=FakeLoader)

    def loader_next() -> float:
        loader._wrap_loader(fake)
        it = iter(FakeLoader())  # through the hooked __iter__, as a real epoch starts
        next(it)  # the first batch of an epoch writes its E record
        hooked = FakeIter.__next__
        return _added(lambda: hooked(it), lambda: plain_next(it))

    def next_index() -> float:
        it = FakeIter()
        hooked = FakeIter._next_index
        if hooked is plain_index:
            raise RuntimeError("_next_index is not wrapped")
        return _added(lambda: hooked(it), lambda: plain_index(it))

    def fetch() -> float:
        def inner(self: Any, idx: Any) -> Any:
            return batch

        wrapped = fetch_timers._timed_fetch(inner)
        return _added(lambda: wrapped(None, index), lambda: inner(None, index))

    def collate() -> float:
        class Fetcher:
            def __init__(self, collate_fn: Any) -> None:
                self.collate_fn = collate_fn

        def plain_collate(data: Any) -> Any:
            return data

        timed = fetch_timers._timed_collate(Fetcher.__init__)
        hooked_fetcher = Fetcher.__new__(Fetcher)
        timed(hooked_fetcher, plain_collate)
        return _added(lambda: hooked_fetcher.collate_fn(batch), lambda: plain_collate(batch))

    def backward_mark() -> float:
        def inner(*args: Any, **kwargs: Any) -> None:
            return None

        wrapped = steps._marked_backward(types.SimpleNamespace(), inner, True)
        # a CUDA job's steady step: an untimed one (a CPU job's wrapper left at its first step)
        saved = state.steps, state.timeline
        state.steps = max(state.steps, 1)
        state.timeline = dev.Timeline(FreeEvent, None, lambda _line: None, lambda _t: 0)
        try:
            return _added(lambda: wrapped(batch), lambda: inner(batch))
        finally:
            state.steps, state.timeline = saved

    def zero_grad() -> float:
        def inner(self: Any, set_to_none: bool = True) -> None:
            return None

        owner = type("Owner", (), {})  # where the wrapper would take itself out: not here
        wrapped = watches._noticed_zero_grad(owner, inner)
        return _added(lambda: wrapped(None), lambda: inner(None))

    # torch.distributed (probe/collectives.py): the backward wrapper is installed in every job
    # with torch.distributed and only checks a counter until a DDP model exists; in a DDP job
    # it hooks each backward's root and queues a final callback on the real autograd engine.
    from trainprof.probe import collectives as coll

    leaf = torch.ones(1, requires_grad=True)

    def backward_of(fn: Callable[[Any], Any]) -> Callable[[], None]:
        def one() -> None:
            fn((leaf * 2).sum())  # a real backward of a two-node graph

        return one

    plain_backward = inspect.unwrap(torch.autograd.backward)  # torch's own, under the probe's

    distributed: list[dict[str, Any]] = []

    def add_distributed(name: str, calls: str, measure: Callable[[], float]) -> None:
        st = coll._state
        saved = (st.ddp_models, st.engine, st.backend)
        # as in a DDP job on gloo, after its first collective noted the backend: one DDP model
        # that all-reduces in each backward (outside no_sync())
        model = _SyncingModel()
        st.ddp_models, st.backend = [weakref.ref(model)], "gloo"
        st.engine = torch.autograd.Variable._execution_engine
        try:
            distributed.append({"name": name, "us": measure(), "calls": calls})
        except Exception as exc:  # internals moved: say so, keep going
            missing.append(f"{name}: {type(exc).__name__}: {exc}")
        finally:
            st.ddp_models, st.engine, st.backend = saved

    def backward_ddp() -> float:
        wrapped = coll._waited_backward(plain_backward)
        return _added(backward_of(wrapped), backward_of(plain_backward), BACKWARD_CALLS)

    def collective() -> float:
        def inner(*args: Any, **kwargs: Any) -> None:
            return None

        wrapped = coll._timed(inner)  # its counters written every 0.25 s: included
        return _added(lambda: wrapped(batch), lambda: inner(batch))

    # The device timeline (CUDA jobs only; probe/device.py) with stand-in events that cost
    # nothing: what is left is its own Python per step, on an untimed step (every step) and on a
    # timed one (at most MAX_PER_S a second). Real CUDA event records and queries come on top.
    from trainprof.probe import device as dev

    class FreeEvent:
        def record(self, stream: Any = None) -> None:
            return None

        def query(self) -> bool:
            return True

        def elapsed_time(self, other: Any) -> float:
            return 1.0

    cuda_only: list[dict[str, Any]] = []

    def timeline(timed: bool) -> float:
        tl = dev.Timeline(FreeEvent, lambda: (1, 2, 3), lambda _line: None, lambda _t: 0)
        (post_step,) = step_hooks
        args: tuple[Any, ...] = (opt,)
        kwargs: dict[str, Any] = {}

        def step() -> None:
            # what the hooks do with a timeline: a mark is called on a timed step only, the
            # pre-step hook is registered around timed steps only, and the post-hook calls
            # step_ended only when the timeline has something to do
            state.timeline = tl
            if timed:  # make this step a timed one, whatever the stride and the rate cap say
                tl.next_timed, tl.not_before = tl.step, -1e9
            for name in ("batch", "backward"):
                if tl.active:
                    tl.mark(name)
            if timed:
                pre_step(opt, args, kwargs)
            post_step(opt, args, kwargs)

        def without() -> None:  # the same post-hook, no timeline (a CPU job's)
            state.timeline = None
            post_step(opt, args, kwargs)

        saved = state.timeline, state.primary_opt_id
        state.primary_opt_id = id(opt)
        try:
            return _added(step, without, CALLS // 4)
        finally:
            state.timeline, state.primary_opt_id = saved

    pre_step = device_marks._before_optimizer_step  # registered around timed steps

    for name, calls, timed in (
        ("device timeline, an untimed step (the post-hook's count)", "every step", False),
        (
            "device timeline, a timed step (5 events, read-out)",
            f"≤ {dev.MAX_PER_S:g} a second",
            True,
        ),
    ):
        try:
            cuda_only.append({"name": name, "us": timeline(timed), "calls": calls})
        except Exception as exc:  # internals moved: say so, keep going
            missing.append(f"{name}: {type(exc).__name__}: {exc}")

    add("DataLoader __next__ wrapper", 1, loader_next)
    add("sampler _next_index wrapper", 1, next_index)
    add("dataset fetch timer", 1, fetch)
    add("collate_fn timer", 1, collate)
    add("autograd.backward mark (CUDA jobs; a CPU job's leaves)", 1, backward_mark)
    add(f"Optimizer.zero_grad watch (first {watches.WATCH_STEPS} steps only)", 0, zero_grad)
    add_distributed("autograd.backward wait timer, DDP model", "1 per step", backward_ddp)
    add_distributed("Python collective timer (all_reduce, ...)", "1 per collective", collective)

    floors = _floors(torch, optim_mod)
    t0 = time.perf_counter()
    n = 100000
    w = records.writer()
    assert w is not None
    for _ in range(n):
        w.add("S 1 2 3 4 5 6 7\n")
    w.flush()
    queue_us = (time.perf_counter() - t0) / n * 1e6
    result = {
        "hooks": hooks,
        "distributed": distributed,
        "cuda_only": cuda_only,
        "backward_plain_us": _per_call(backward_of(plain_backward), BACKWARD_CALLS) * 1e6,
        "missing": missing,
        "floors": floors,
        "writer_add_and_flush_us": queue_us,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
