"""torch's debug switches, read inside the job: autograd's anomaly detection, and
CUDA_LAUNCH_BLOCKING.

``torch.autograd.set_detect_anomaly(True)`` makes autograd keep the Python stack of every op of
the forward pass, formatted as text, and check every gradient of the backward pass for NaN: a
debugging aid that made a small MLP's step 2.6–3.7× slower here, and, left on, slows every step
after. The switch is global, not per thread: it is read at the first optimizer step, then at
the event writer's flush ticks (off the training thread), and recorded again only when it
changed. Where it was turned on is read when ``torch.set_anomaly_enabled(True)`` is called
(what ``set_detect_anomaly`` and ``detect_anomaly`` call): the stack that called it, once.
Cost: nothing per step.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from trainprof import probe

LAUNCH_BLOCKING = "CUDA_LAUNCH_BLOCKING"


class _State:
    def __init__(self) -> None:
        self.torch: Any = None
        self.last: tuple[bool, bool] | None = None  # (anomaly on, NaN checks on) last recorded
        self.site_recorded = False


_state = _State()


def install(torch: Any) -> None:
    """Called once the job imports torch: note where anomaly detection gets turned on."""
    _state.torch = torch
    enable = getattr(torch, "set_anomaly_enabled", None)
    if callable(enable):
        torch.set_anomaly_enabled = _noting_site(enable)


def _noting_site(enable: Any) -> Any:
    @functools.wraps(enable)
    def set_anomaly_enabled(*args: Any, **kwargs: Any) -> Any:
        if not _state.site_recorded and (args[0] if args else kwargs.get("enabled")):
            _state.site_recorded = True
            probe.record_callers("anomaly_callers", 2, lines=True)  # above this wrapper
        return enable(*args, **kwargs)

    return set_anomaly_enabled


def at_first_step() -> None:
    """Read the switches once the job trains, and watch anomaly detection from then on."""
    w = probe.writer()
    if w is None or _state.torch is None:
        return
    _record(launch_blocking=os.environ.get(LAUNCH_BLOCKING))
    w.on_tick.append(_read_again)


def _read_again() -> None:
    if _modes() != _state.last:
        _record()


def _modes() -> tuple[bool, bool]:
    torch = _state.torch
    return bool(torch.is_anomaly_enabled()), bool(torch.is_anomaly_check_nan_enabled())


def _record(**extra: Any) -> None:
    try:
        anomaly, check_nan = _state.last = _modes()
    except Exception as exc:
        probe.record_error("debug modes", exc)
        return
    probe.record_info({"debug": {"anomaly": anomaly, "check_nan": check_nan, **extra}})
