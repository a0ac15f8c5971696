"""Time each rank spends waiting in ``torch.distributed`` collectives, from inside the rank.

Two seams, because DDP does not call the Python collectives:

- **Python collectives** (``all_reduce``, ``all_gather``, ``broadcast``, ``barrier``,
  ``reduce_scatter_tensor``, ... called by the user's code or by FSDP): each synchronous call is
  timed in full; a nested call (``all_gather_object`` calls ``all_gather``) counts once. An
  ``async_op=True`` call returns at once, so only its launch is timed.
- **DDP's gradient all-reduce** runs in C++ and the rank blocks for it at the end of
  ``backward()``. Once a DDP model exists, each ``backward()`` hooks its root tensor: at the
  start of backward the hook queues an autograd final callback, which the engine runs once
  every gradient is computed, before DDP's own callback (queued later, when its last bucket is
  ready) waits for the all-reduce. From that callback to ``backward()`` returning is the time
  the rank waited for the all-reduce, and so for the slower ranks. One hook per backward, not
  one per parameter.

A backward during which a DDP model would all-reduce (its ``require_backward_grad_sync``, which
``no_sync()`` turns off) is counted apart (``sync_n``): gradient accumulation over micro-batches
without ``no_sync()`` all-reduces every micro-batch, where once a step would do.

All are cumulative counters, written as an info record ``{"collectives": {"s", "n", "ddp_s",
"ddp_n", "sync_n", "backend"}}`` at most every ``EMIT_EVERY_S`` and at exit, so the analysis can
read the time spent in any window (a steady state) from the counters around it. On the hot path:
two clock reads per collective; per backward once a DDP model exists (none before), a hook, a
callback and a read of each DDP model's flag; and float adds.

With NCCL the host does not block in a collective (it is queued on the GPU's streams), so
these host times are no wait there; the record names the backend and the analysis says
"not measured" for an NCCL job instead of reading them as one.
"""

from __future__ import annotations

import atexit
import functools
import os
import time
import weakref
from typing import Any

from trainprof.probe import records

EMIT_EVERY_S = 0.25
NAMES = (
    "all_reduce",
    "all_reduce_coalesced",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "monitored_barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "gather_object",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
)

_clock = time.monotonic


class _State:
    def __init__(self) -> None:
        self.coll_s = 0.0  # seconds inside synchronous Python collectives
        self.coll_n = 0
        self.ddp_s = 0.0  # seconds from a DDP rank's last gradient to backward() returning
        self.ddp_n = 0
        self.sync_n = 0  # backward passes in which a DDP model all-reduced the gradients
        self.ddp_models: list[Any] = []  # weak references to the DDP models made
        self.depth = 0  # collectives in progress (nested ones count once)
        self.last_grad = 0.0  # when the last DDP parameter's gradient was accumulated
        self.next_emit = 0.0
        self.emitted: tuple[float, int, float, int, int] | None = None
        self.engine: Any = None  # torch's autograd engine (queue_callback)
        self.backend: str | None = None  # the default (or DDP's) process group's backend


_state = _State()


def install(torch: Any) -> None:
    """Wrap the collectives, DDP's constructor and ``torch.autograd.backward`` (fail-open: the
    caller records an error and the job goes on unwrapped)."""
    if records.writer() is None or "collectives" in records.disabled_parts():
        return
    dist = torch.distributed
    if not dist.is_available():
        return
    import torch.distributed.distributed_c10d as c10d

    for name in NAMES:
        fn = getattr(c10d, name, None)
        if fn is None:
            continue
        timed = _timed(fn)
        setattr(c10d, name, timed)
        if getattr(dist, name, None) is fn:
            setattr(dist, name, timed)
    if os.environ.get("RANK") is None:  # no launcher said the rank: learn it when it is set
        init = c10d.init_process_group
        noted = _noting_rank(init)
        c10d.init_process_group = noted
        if getattr(dist, "init_process_group", None) is init:
            dist.init_process_group = noted
    ddp = torch.nn.parallel.DistributedDataParallel
    ddp.__init__ = _hooked_ddp_init(ddp.__init__)
    atexit.register(emit)  # runs before the probe's own exit flush (registered earlier)


def _noting_rank(init: Any) -> Any:
    """``init_process_group`` in a process no launcher gave a ``RANK`` (the DDP tutorial's
    ``torch.multiprocessing.spawn``, the rank passed in by hand): once the group exists, its
    rank and world size go into the record, which makes the process a rank for the report, as
    torchrun's environment does. Called once per process: nothing on the hot path."""

    @functools.wraps(init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        out = init(*args, **kwargs)
        try:
            import torch.distributed as dist

            records.record_info({"rank": dist.get_rank(), "world_size": dist.get_world_size()})
        except Exception as exc:
            records.record_error("rank", exc)
        return out

    return init_process_group


def _timed(fn: Any) -> Any:
    @functools.wraps(fn)
    def collective(*args: Any, **kwargs: Any) -> Any:
        st = _state
        if st.depth:
            return fn(*args, **kwargs)
        st.depth = 1
        t0 = _clock()
        try:
            return fn(*args, **kwargs)
        finally:
            t1 = _clock()
            st.depth = 0
            st.coll_s += t1 - t0
            st.coll_n += 1
            if st.backend is None:
                _note_backend()
            if t1 >= st.next_emit:
                emit(t1)

    return collective


def _hooked_ddp_init(init: Any) -> Any:
    """DDP's constructor; the first DDP model wraps ``torch.autograd.backward`` (a job without
    DDP keeps torch's own: no wrapper call on its backward)."""

    @functools.wraps(init)
    def ddp_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        _state.ddp_models.append(weakref.ref(self))
        _note_backend(getattr(self, "process_group", None))
        if _state.engine is None:
            _wrap_backward()

    return ddp_init


def _wrap_backward() -> None:
    try:
        import torch.autograd as autograd

        engine = autograd.Variable._execution_engine
        autograd.backward = _waited_backward(autograd.backward)
        _state.engine = engine
    except Exception as exc:  # fail open: no DDP wait measured, the job goes on
        records.record_error("ddp backward", exc)


def _compute_done() -> None:
    _state.last_grad = _clock()


def _queue_mark(_grad: Any) -> None:
    """At the start of backward (the root's gradient): queue a final callback. The engine runs
    final callbacks in order once every gradient is computed; DDP queues its own (which waits
    for the all-reduce) later, when its last bucket is ready, so ours runs first."""
    _state.engine.queue_callback(_compute_done)


def _root(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    tensors = args[0] if args else kwargs.get("tensors")
    if isinstance(tensors, (tuple, list)):
        tensors = tensors[0] if tensors else None
    return tensors if getattr(tensors, "requires_grad", False) else None


def _waited_backward(backward: Any) -> Any:
    @functools.wraps(backward)
    def waited_backward(*args: Any, **kwargs: Any) -> Any:
        st = _state
        handle = None
        try:
            root = _root(args, kwargs)
            if root is not None:
                handle = root.register_hook(_queue_mark)
        except Exception:  # a leaf without grad_fn, an odd argument: time nothing, run it
            handle = None
        st.last_grad = 0.0
        for ref in st.ddp_models:  # inline: a call a backward costs more than the test
            model = ref()
            if model is not None and getattr(model, "require_backward_grad_sync", True):
                st.sync_n += 1  # it all-reduces in this backward (not inside no_sync())
                break
        try:
            out = backward(*args, **kwargs)
        finally:
            if handle is not None:
                handle.remove()
        if st.last_grad:
            t1 = _clock()
            st.ddp_s += t1 - st.last_grad
            st.ddp_n += 1
            if t1 >= st.next_emit:
                emit(t1)
        return out

    return waited_backward


def _note_backend(group: Any = None) -> None:
    """The process group's backend, once: NCCL's collectives run on the GPU's streams and the
    host does not wait in them, so the analysis must not read their host time as a wait."""
    if _state.backend is not None:
        return
    try:
        import torch.distributed as dist

        _state.backend = str(dist.get_backend(group)) if dist.is_initialized() else None
    except Exception:
        _state.backend = "unknown"


def emit(now: float | None = None) -> None:
    """Write the counters if they moved (at most every EMIT_EVERY_S while training)."""
    st = _state
    now = _clock() if now is None else now
    st.next_emit = now + EMIT_EVERY_S
    counters = (st.coll_s, st.coll_n, st.ddp_s, st.ddp_n, st.sync_n)
    if counters == st.emitted or not (st.coll_n or st.ddp_n):
        return
    st.emitted = counters
    try:
        records.record_info(
            {
                "collectives": {
                    "s": round(st.coll_s, 6),
                    "n": st.coll_n,
                    "ddp_s": round(st.ddp_s, 6),
                    "ddp_n": st.ddp_n,
                    "sync_n": st.sync_n,
                    "backend": st.backend,
                }
            }
        )
    except Exception:
        pass
