"""The probe's event writer and what its parts record through it: information records, the
stacks of callers, errors gone past, and the settings the runner gave in the environment."""

from __future__ import annotations

import json
import os
import sys
import time
import types
from typing import Any

from trainprof.probe.writer import EventWriter
from trainprof.store.schema import ENV_DISABLE, ENV_MAX_STEPS, ENV_STEPS_MIN_S, INFO

_writer: EventWriter | None = None
# Frames kept of a recorded stack, innermost first: the user's frames are the outermost, and a
# framework's loop (Lightning, HF Trainer) nests deep below them.
MAX_CALLERS = 256


def writer() -> EventWriter | None:
    """The process's event writer, or None before ``start()`` (or with the probe off)."""
    return _writer


def set_writer(w: EventWriter | None) -> None:
    """The process's event writer, from ``start()`` on; None again after ``stop()``."""
    global _writer
    _writer = w


def disabled_parts() -> frozenset[str]:
    return frozenset(p for p in os.environ.get(ENV_DISABLE, "").split(",") if p)


def max_steps() -> int | None:
    try:
        n = int(os.environ.get(ENV_MAX_STEPS, ""))
    except ValueError:
        return None
    return n if n > 0 else None


def steps_min_s() -> float:
    """With max_steps: the least time to run after the first step before stopping (0: none)."""
    try:
        s = float(os.environ.get(ENV_STEPS_MIN_S, ""))
    except ValueError:
        return 0.0
    return s if s > 0 else 0.0


def record_info(info: dict[str, object]) -> None:
    w = _writer
    if w is not None:
        info = {"t": w.us(time.monotonic()), **info}
        w.add(f"{INFO} {json.dumps(info, default=str)}\n")


def record_callers(key: str, depth: int, lines: bool) -> None:
    """The stack from ``depth`` frames above this function, innermost first, as one info
    record: each frame's name as py-spy gives it (``co_qualname`` on 3.11+, so the analysis
    can match them), its file, and with ``lines`` its line."""
    try:
        frame: types.FrameType | None = sys._getframe(depth)
        callers: list[list[Any]] = []
        while frame is not None and len(callers) < MAX_CALLERS:
            code = frame.f_code
            entry: list[Any] = [getattr(code, "co_qualname", code.co_name), code.co_filename]
            callers.append([*entry, frame.f_lineno] if lines else entry)
            frame = frame.f_back
        record_info({key: callers})
    except Exception as exc:
        record_error(key, exc)


_errors_said: set[str] = set()


def record_error(where: str, exc: Exception) -> None:
    """Fail open, but leave a trace the report shows (once per place): a fact the probe could
    not read must not pass for a clean bill."""
    if where in _errors_said:
        return
    _errors_said.add(where)
    record_info({"probe_error": f"{where}: {type(exc).__name__}: {exc}"[:300]})
