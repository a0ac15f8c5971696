"""The device timeline's wiring into the hooks: started once, marked on timed steps, failing open.

A CUDA job's first optimizer step starts the timeline (``device.py``); the hooks then mark its
timed steps (``mark``; callers test ``tl.active`` first, since most steps are not timed) and the
optimizer post-hook keeps the pre-step hook, the ``optimizer`` mark, in torch's global pre-step
hooks around timed steps only (``sync_pre_step``). An error stops the timeline alone.
"""

from __future__ import annotations

from typing import Any

from trainprof.probe import records
from trainprof.probe.device import Timeline, cuda_timeline
from trainprof.probe.state import State, state


def start_timeline(torch: Any, device: Any) -> None:
    """The CUDA device timeline, once, and the means to register its pre-step hook (a timed
    step's "optimizer" mark, see ``sync_pre_step``); a failure stops the timeline alone, and the
    report says so."""
    w = state.writer
    if w is None or state.device_off or state.timeline is not None:
        return
    try:
        import torch.optim.optimizer as optim_mod  # torch.optim deletes its "optimizer" name

        # Registered once for a key of its own, then taken out until the first timed step.
        handle = optim_mod.register_optimizer_step_pre_hook(_before_optimizer_step)
        handle.remove()
        state.pre_step_hooks = optim_mod._global_optimizer_pre_hooks
        state.pre_step_key = handle.id
        state.timeline = cuda_timeline(torch, device, w.add, w.us)
    except Exception as exc:
        timeline_failed(exc)


def sync_pre_step(s: State, active: bool) -> None:
    """The pre-step hook (the timeline's ``optimizer`` mark) is in torch's global pre-step hooks
    while the timeline is active (a timed step, or the gap after it being closed) and out after:
    on every other step torch calls no hook of the probe's before the optimizer step (a call a
    step costs microseconds on a GPU host's cold caches). Called by the post-hook, which decides
    the next timed step, so the hook is in before that step's optimizer step. Always under the
    same key: where Dynamo traces a compiled optimizer step's wrapper it guards on these hooks
    (the probe's own code it skips, see ``dynamo.py``), and a new key each time (a new
    registration) would recompile the wrapper each time, to the recompile limit; with one key
    there are two states to compile, once."""
    hooks = s.pre_step_hooks
    if hooks is None or active == s.pre_step_in:
        return
    if active:
        hooks[s.pre_step_key] = _before_optimizer_step
    else:
        hooks.pop(s.pre_step_key, None)
    s.pre_step_in = active


def _before_optimizer_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    """Registered around the CUDA timeline's timed steps (CPU jobs never pay for it)."""
    tl = state.timeline
    if tl is not None and tl.active and id(optimizer) == state.primary_opt_id:
        mark(tl, "optimizer")


def mark(tl: Timeline, name: str) -> None:
    """A mark on a timed step (callers test ``tl.active`` first: most steps are not timed)."""
    try:
        tl.mark(name)
    except Exception as exc:
        timeline_failed(exc)


def timeline_failed(exc: Exception) -> None:
    """Fail open: the timeline stops, the job goes on."""
    state.timeline = None
    sync_pre_step(state, False)
    state.pre_step_hooks = None
    records.record_info({"device_timeline_error": f"{type(exc).__name__}: {exc}"[:300]})
