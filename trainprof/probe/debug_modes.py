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
starts recording: the stack that called it, once each. torch's own ``detect_anomaly`` blocks
(AOTAutograd turns it on while it traces a compiled graph, to keep each node's stack) are not
the job's switch: while one is open the switch reads as it was before. Cost: nothing per step.
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
        self.torch_dir = ""  # torch's package folder, its real path with a trailing separator
        self.in_torch_blocks = 0  # torch's own anomaly blocks open now
        self.before_torch: tuple[bool, bool] = (False, False)  # the switch as torch found it


_state = _State()


def install(torch: Any) -> None:
    """Called once the job imports torch: note where anomaly detection gets turned on, and
    where a profiler starts recording."""
    _state.torch = torch
    _state.torch_dir = os.path.join(os.path.realpath(os.path.dirname(torch.__file__)), "")
    enable = getattr(torch, "set_anomaly_enabled", None)
    if callable(enable):
        noting = _noting_site("anomaly_callers", enable, first_arg=True, depth=3)
        torch.set_anomaly_enabled = _minding_torch_blocks(enable, noting)
    profiler = sys.modules.get("torch.autograd.profiler")
    start = getattr(profiler, "_run_on_profiler_start", None)
    if callable(start):  # what every torch profiler calls as it starts recording
        profiler._run_on_profiler_start = _noting_site("profiler_callers", start)  # type: ignore[union-attr]


def _noting_site(key: str, fn: Any, first_arg: bool = False, depth: int = 2) -> Any:
    """``fn``, recording the stack ``depth`` frames up the first time it is called (with
    ``first_arg``: the first time its first argument is true)."""

    @functools.wraps(fn)
    def noting(*args: Any, **kwargs: Any) -> Any:
        if key not in _state.sites and (
            not first_arg or (args[0] if args else kwargs.get("enabled"))
        ):
            _state.sites.add(key)
            records.record_callers(key, depth, lines=True)  # above the wrappers
        return fn(*args, **kwargs)

    return noting


def _minding_torch_blocks(enable: Any, noting: Any) -> Any:
    """``torch.set_anomaly_enabled``: through ``noting`` when the job calls it; counting the
    blocks open when torch's own code enters or leaves a ``detect_anomaly`` block."""

    @functools.wraps(enable)
    def minding(*args: Any, **kwargs: Any) -> Any:
        opener = _torch_opener()
        if opener is None:
            return noting(*args, **kwargs)
        if opener == "__exit__":
            try:
                return enable(*args, **kwargs)
            finally:
                _state.in_torch_blocks = max(0, _state.in_torch_blocks - 1)
        if _state.in_torch_blocks == 0:
            torch = _state.torch
            _state.before_torch = (
                bool(torch.is_anomaly_enabled()),
                bool(torch.is_anomaly_check_nan_enabled()),
            )
        _state.in_torch_blocks += 1
        return enable(*args, **kwargs)

    return minding


def _torch_opener() -> str | None:
    """The anomaly block's method (``__enter__``, ``__exit__``, ``__init__``) when torch's own
    code, not the job's, uses the block; else None."""
    try:
        frame = sys._getframe(2)  # above minding: the block's method, or the job's line
        method = frame.f_code.co_name
        if not frame.f_code.co_filename.endswith(os.path.join("autograd", "anomaly_mode.py")):
            return None
        caller = frame.f_back
        while caller is not None and caller.f_code.co_filename == frame.f_code.co_filename:
            caller = caller.f_back  # set_detect_anomaly's __init__ via its own helpers
        if caller is None or not _state.torch_dir:
            return None
        inside = os.path.realpath(caller.f_code.co_filename).startswith(_state.torch_dir)
        return method if inside else None
    except Exception:  # a frame layout this torch does not have: the job's call
        return None


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
    anomaly = (
        _state.before_torch
        if _state.in_torch_blocks
        else (bool(torch.is_anomaly_enabled()), bool(torch.is_anomaly_check_nan_enabled()))
    )
    return (*anomaly, getattr(profiler, "_is_profiler_enabled", False) is True)


def _record(**extra: Any) -> None:
    try:
        anomaly, check_nan, profiler = _state.last = _modes()
    except Exception as exc:
        records.record_error("debug modes", exc)
        return
    fact = {"anomaly": anomaly, "check_nan": check_nan, "profiler": profiler, **extra}
    records.record_info({"debug": fact})
