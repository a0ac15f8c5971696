"""torch's debug switches, read inside the job: autograd's anomaly detection, the autograd
profiler (what ``torch.profiler.profile`` records with), and CUDA_LAUNCH_BLOCKING.

``torch.autograd.set_detect_anomaly(True)`` makes autograd keep the Python stack of every op of
the forward pass, formatted as text, and check every gradient of the backward pass for NaN: a
debugging aid that made a small MLP's step 2.6–3.7× slower here, and, left on, slows every step
after. A profiler left recording (a ``with torch.profiler.profile():`` around the whole loop,
no schedule) records every op and keeps the events in memory until it stops. Both switches are
global, not per thread: they are read at the first optimizer step, then at the event writer's
flush ticks (off the training thread), and recorded again only when they changed. Where anomaly
detection was turned on is read when ``torch.set_anomaly_enabled(True)`` is called (what
``set_detect_anomaly`` and ``detect_anomaly`` call), and where a profiler started when it
starts recording: the stack that called it, once each. Cost: nothing per step.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

from trainprof.probe import records

LAUNCH_BLOCKING = "CUDA_LAUNCH_BLOCKING"


class _State:
    def __init__(self) -> None:
        self.torch: Any = None
        # (anomaly detection on, its NaN checks on, the profiler recording) last recorded
        self.last: tuple[bool, bool, bool] | None = None
        self.sites: set[str] = set()  # the call sites recorded (once each)


_state = _State()


def install(torch: Any) -> None:
    """Called once the job imports torch: note where anomaly detection gets turned on, and
    where a profiler starts recording."""
    _state.torch = torch
    enable = getattr(torch, "set_anomaly_enabled", None)
    if callable(enable):
        torch.set_anomaly_enabled = _noting_site("anomaly_callers", enable, first_arg=True)
    profiler = sys.modules.get("torch.autograd.profiler")
    start = getattr(profiler, "_run_on_profiler_start", None)
    if callable(start):  # what every torch profiler calls as it starts recording
        profiler._run_on_profiler_start = _noting_site("profiler_callers", start)  # type: ignore[union-attr]


def _noting_site(key: str, fn: Any, first_arg: bool = False) -> Any:
    """``fn``, recording the stack that called it the first time (with ``first_arg``: the
    first time its first argument is true)."""

    @functools.wraps(fn)
    def noting(*args: Any, **kwargs: Any) -> Any:
        if key not in _state.sites and (
            not first_arg or (args[0] if args else kwargs.get("enabled"))
        ):
            _state.sites.add(key)
            records.record_callers(key, 2, lines=True)  # above this wrapper
        return fn(*args, **kwargs)

    return noting


def at_first_step() -> None:
    """Read the switches once the job trains, and watch anomaly detection and the profiler
    from then on."""
    w = records.writer()
    if w is None or _state.torch is None:
        return
    _record(launch_blocking=os.environ.get(LAUNCH_BLOCKING))
    w.on_tick.append(_read_again)


def _read_again() -> None:
    if _modes() != _state.last:
        _record()


def _modes() -> tuple[bool, bool, bool]:
    torch = _state.torch
    # torch's own flag for "a profiler records" (set by its start and stop), read off the
    # module: no import from this thread
    profiler = sys.modules.get("torch.autograd.profiler")
    return (
        bool(torch.is_anomaly_enabled()),
        bool(torch.is_anomaly_check_nan_enabled()),
        getattr(profiler, "_is_profiler_enabled", False) is True,
    )


def _record(**extra: Any) -> None:
    try:
        anomaly, check_nan, profiler = _state.last = _modes()
    except Exception as exc:
        records.record_error("debug modes", exc)
        return
    fact = {"anomaly": anomaly, "check_nan": check_nan, "profiler": profiler, **extra}
    records.record_info({"debug": fact})
