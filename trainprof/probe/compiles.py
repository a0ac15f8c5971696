"""torch.compile's compiles, timed inside the job.

A compiled model compiles again whenever a guard of its cached graphs fails: an input of a new
shape under ``dynamic=False``, a Python number that changes, a flag the code branches on. Each
recompile holds the training loop for as long as the first compile took, and after
``torch._dynamo.config.recompile_limit`` (8) of them Dynamo gives up on the function and runs
it uncompiled from then on, with one warning on stderr. And code Dynamo cannot trace (a
``.item()`` to branch on, a ``print``) breaks the graph: the model runs as several graphs with
Python between them.

Dynamo calls its compile callbacks once when a compile starts and once when it ends (never per
step): each compile is recorded with its times, what started it (Dynamo tracing a frame, or the
backward compiled at its first run) and the line of the job's code it ran under. What Dynamo
says of each recompile (the guard that failed), whether it gave up, and where the graph broke
and why are in its compilation metrics and counters, which lag the callbacks: they are read
at the event writer's flush ticks, off the training thread. Cost: nothing per step; ≈ 5 µs per
compile.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import time
import types
from typing import Any

from trainprof.probe import records

MAX_RECORDS = 200  # compiles and recompile reasons a process (a job stuck recompiling is news once)
REASON_CHARS = 300
# Dynamo's name for the code after a graph break: torch_dynamo_resume_in_forward_at_9
RESUME = re.compile(r"torch_dynamo_resume_in_(?P<function>.+)_at_\d+")
_PROBE = os.path.dirname(os.path.abspath(__file__))
_STDLIB = os.path.dirname(os.path.abspath(os.__file__))


class _State:
    def __init__(self) -> None:
        self.started: float | None = None
        self.where: tuple[str, int, str] | None = None
        self.recorded = 0
        self.seen: set[tuple[object, object]] = set()  # metrics records already read
        self.newest: object = None  # the newest record at the last read: nothing new, no read
        self.breaks: set[tuple[str, int]] = set()  # graph breaks' lines already recorded
        self.break_reasons: set[str] = set()
        self.torch_dir = ""


_state = _State()


def install(dynamo: types.ModuleType) -> None:
    """Called once the job imports ``torch._dynamo`` (a job that compiles does)."""
    try:
        from torch._dynamo.callback import callback_handler
    except ImportError:  # a torch without compile callbacks: no compile records
        return
    w = records.writer()
    if w is None:
        return
    torch = sys.modules.get("torch")
    _state.torch_dir = os.path.dirname(os.path.abspath(getattr(torch, "__file__", "") or "."))
    callback_handler.register_start_callback(_started)
    callback_handler.register_end_callback(_ended)
    reset = getattr(dynamo, "reset", None)
    if callable(reset):
        dynamo.reset = _registering_again(reset, callback_handler)  # type: ignore[attr-defined]
    w.on_tick.append(read_reasons)


def _registering_again(reset: Any, handler: Any) -> Any:
    """``torch._dynamo.reset()`` (what ``torch.compiler.reset()`` calls) empties Dynamo's
    callback lists, ours with them: put ours back after it."""

    @functools.wraps(reset)
    def reset_then_register(*args: Any, **kwargs: Any) -> Any:
        out = reset(*args, **kwargs)
        try:
            if _started not in handler.start_callbacks:
                handler.register_start_callback(_started)
            if _ended not in handler.end_callbacks:
                handler.register_end_callback(_ended)
        except Exception as exc:
            records.record_error("compile callbacks after reset", exc)
        return out

    return reset_then_register


def _started(*_args: Any) -> None:
    # Called by Dynamo with a CallbackArgs (torch ≥ 2.6) or nothing (earlier): never raises.
    try:
        _state.started = time.monotonic()
        _state.where = _job_frame()
    except Exception as exc:
        records.record_error("compile start", exc)


def _ended(*args: Any) -> None:
    try:
        t1, t0 = time.monotonic(), _state.started
        _state.started = None
        w = records.writer()
        if w is None or t0 is None:
            return
        info = args[0] if args else None
        trigger = getattr(getattr(info, "callback_trigger", None), "name", None)
        compile_id = getattr(info, "compile_id", None)
        record: dict[str, object] = {"t0": w.us(t0), "t1": w.us(t1), "trigger": trigger}
        if compile_id is not None:
            record["id"] = str(compile_id)
        if _state.where is not None:
            record["file"], record["line"], record["function"] = _state.where
        _record("compile", record)
    except Exception as exc:
        records.record_error("compile end", exc)


def _job_frame() -> tuple[str, int, str] | None:
    """The innermost frame of the job's own code: the line that called what is compiled."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not (
            path.startswith((_state.torch_dir + os.sep, _PROBE + os.sep, _STDLIB + os.sep))
            or frame.f_code.co_filename.startswith("<")
        ):
            return path, frame.f_lineno, frame.f_code.co_name
        frame = frame.f_back
    return None


def read_reasons() -> None:
    """Record what Dynamo says of the compiles it finished since the last read: the guard that
    failed at each recompile and whether it gave up at its recompile limit; each graph break's
    line (Dynamo compiles the code after a break as a frame of its own, named for that line)
    and the reasons it gave for its breaks. At the writer's flush ticks and at exit."""
    utils = sys.modules.get("torch._dynamo.utils")
    metrics = getattr(utils, "_compilation_metrics", None)
    if not metrics or _state.recorded >= MAX_RECORDS:
        return
    try:
        if metrics[-1] is _state.newest:
            return
        records = list(metrics)  # a compile on another thread may append meanwhile
    except (RuntimeError, IndexError):
        return  # read at the next tick
    _state.newest = records[-1]
    for r in records:
        key = (getattr(r, "compile_id", None), getattr(r, "start_time_us", None))
        if key in _state.seen:
            continue
        _state.seen.add(key)
        _record_break(r)
        reason = getattr(r, "recompile_reason", None)
        failed = getattr(r, "fail_reason", None)
        if reason or failed:
            _record(
                "recompile",
                {
                    "id": str(key[0]),
                    "reason": str(reason or "")[:REASON_CHARS],
                    "gave_up": gave_up(str(failed or "")),
                },
            )
    _record_break_reasons(getattr(utils, "counters", None))


def _record(kind: str, fact: dict[str, object]) -> None:
    if _state.recorded < MAX_RECORDS:
        _state.recorded += 1
        records.record_info({kind: fact})


def _record_break(r: Any) -> None:
    """A compile of the code that resumes after a graph break: the break's line, once."""
    name, file, line = (getattr(r, a, None) for a in ("co_name", "co_filename", "co_firstlineno"))
    found = RESUME.fullmatch(name) if isinstance(name, str) else None
    if found is None or not isinstance(file, str) or not isinstance(line, int):
        return
    if (file, line) not in _state.breaks:
        _state.breaks.add((file, line))
        _record("graph_break", {"file": file, "line": line, "function": found["function"]})


def _record_break_reasons(counters: Any) -> None:
    """Dynamo's reasons for its graph breaks (its ``graph_break`` counter: reason → times met
    while tracing), each the first time it is seen."""
    try:
        reasons = dict(counters["graph_break"]) if counters is not None else {}
    except Exception:
        return
    for text in reasons:
        lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
        if not lines or lines[0][:REASON_CHARS] in _state.break_reasons:
            continue
        first = lines[0][:REASON_CHARS]
        _state.break_reasons.add(first)
        # Dynamo's first line names the kind ("Failed to trace builtin operator"), its
        # "Explanation:" line what it met ("builtin operator `print`")
        detail = next((ln for ln in lines[1:] if ln.startswith("Explanation:")), "")
        fact: dict[str, object] = {"reason": first}
        if detail:
            fact["detail"] = detail.removeprefix("Explanation:").strip()[:REASON_CHARS]
        _record("graph_break_reason", fact)


def gave_up(fail_reason: str) -> bool:
    """Dynamo's failure at its recompile limit (``recompile_limit`` since torch 2.6, the
    ``cache_size_limit`` before)."""
    text = fail_reason.lower()
    return "recompile limit" in text or "recompile_limit" in text or "cache_size_limit" in text
