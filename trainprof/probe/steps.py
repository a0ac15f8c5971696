"""The optimizer post-hook that counts and ends each step; ``--steps``; backward returns before one.

Measured per optimizer step (the primary optimizer: the first one that steps, so a GAN's second
optimizer does not split steps): wall time since the previous step, and what the DataLoader
hooks added up since (``loader.py``), queued as one ``S`` record. In a job that has made
neither an optimizer step nor a DataLoader batch, each ``backward()`` return is a record of its
own. The post-hook's common case is a clock read, integer adds and a tuple queued: the writer
formats the queued steps as it flushes.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from trainprof.probe import records
from trainprof.probe.device_marks import mark, sync_pre_step, timeline_failed
from trainprof.probe.first_step import at_first_step
from trainprof.probe.state import State, state, weak
from trainprof.probe.watches import unwrap
from trainprof.probe.writer import FLUSH_EVERY_RECORDS
from trainprof.store.schema import BACKWARD

_clock = time.monotonic


def install(torch: Any, off: frozenset[str]) -> None:
    """The post-hook (the ``steps`` part) and ``torch.autograd.backward``'s mark, where the
    steps or the device timeline need it."""
    import torch.optim.optimizer as optim_mod

    if "steps" not in off:
        optim_mod.register_optimizer_step_post_hook(_on_optimizer_step)
    if not state.device_off or "steps" not in off:
        import torch.autograd as autograd

        autograd.backward = _marked_backward(autograd, autograd.backward, "steps" not in off)


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


def early_step(s: State, now: float, w: Any, trains: bool) -> None:
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
        at_first_step(optimizer)
    elif key != s.primary_opt_id:
        # A GAN's two optimizers alternate: keep counting the first. One that steps twice while
        # the counted one does not has replaced it (a new optimizer per phase): follow it.
        if s.other_stepped_twice != key:
            s.other_stepped_twice = key
            return False
        s.primary_opt_id = key
    s.other_stepped_twice = None
    return True


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
                unwrap(owner, "backward", backward, orig)
            elif not s.steps and s.max_steps is not None:
                s.backward_seen = True  # among batches: they are training (see early_step)
            return orig(*args, **kwargs)
        out = orig(*args, **kwargs)
        w = records.writer()
        if w is not None and not s.steps:  # an optimizer stepped inside it (a grad hook): no
            now = _clock()
            w.add(f"{BACKWARD} {w.us(now)}\n")
            if s.max_steps is not None:
                early_step(s, now, w, trains=True)
        return out

    return backward
