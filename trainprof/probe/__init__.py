"""The probe: runs inside the user's job. Standard library only until torch is imported.

``start()`` is called once per process by the bootstrap ``sitecustomize``. It leaves the run's
``probe-loaded`` mark but opens nothing yet (the event file is created at the first record),
registers a post-import hook for torch, a fork handler, an exit flush and an exception
recorder. Everything is fail-open: an error in the probe switches the probe off, never the
job.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import sys
import time
import types
from typing import Any

from trainprof.probe.writer import EventWriter
from trainprof.store.schema import (
    ENV_DISABLE,
    ENV_MAX_STEPS,
    ENV_RUN_DIR,
    ENV_STEPS_MIN_S,
    INFO,
    PROBE_LOADED,
)

_writer: EventWriter | None = None
# Frames kept of a recorded stack, innermost first: the user's frames are the outermost, and a
# framework's loop (Lightning, HF Trainer) nests deep below them.
MAX_CALLERS = 256


def writer() -> EventWriter | None:
    return _writer


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


def start() -> None:
    """Start once per process; a second call (or a missing run directory) does nothing."""
    global _writer
    if _writer is not None:
        return
    run_dir = os.environ.get(ENV_RUN_DIR)
    if not run_dir or not os.path.isdir(run_dir) or "all" in disabled_parts():
        return
    _mark_loaded(run_dir)
    w = EventWriter(run_dir)
    if os.environ.get("RANK") is not None:
        w.set_role("rank")
    _writer = w
    os.register_at_fork(after_in_child=w.after_fork_in_child)
    atexit.register(_at_exit)
    os._exit = _flushing_first(os._exit)
    _chain_excepthook()
    from trainprof.probe.import_hook import call_after_import

    call_after_import("torch", _on_torch_imported)
    if "save" not in disabled_parts():
        from trainprof.probe.saves import HOOKS

        for name, hook in HOOKS.items():
            call_after_import(name, hook)


def _mark_loaded(run_dir: str) -> None:
    """Tell the runner the probe loaded (one failed open a process once the file exists), so
    a report can tell a job whose probe never loaded (python -I) from one without torch."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        os.close(os.open(os.path.join(run_dir, PROBE_LOADED), flags, 0o600))
    except OSError:
        pass


def _on_torch_imported(torch_module: object) -> None:
    try:
        from trainprof.probe import collectives, debug_modes, dynamo, torch_hooks

        torch_hooks.install(torch_module)
        if "debug" not in disabled_parts():
            debug_modes.install(torch_module)  # anomaly detection: where it is turned on
        collectives.install(torch_module)  # time in torch.distributed collectives, per rank
        dynamo.install()  # a job that compiles: Dynamo leaves the probe's hooks alone
    except Exception as exc:  # fail open, but say so in the record for the report
        record_error("install", exc)


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


def _at_exit() -> None:
    w = _writer
    if w is not None:
        try:
            # Registered first, so it runs last of the exit handlers: a process that dies after
            # this record died in the interpreter's shutdown, after its program had ended.
            record_info({"at_exit": True})
            w.run_ticks()  # the counters that moved, the compiles Dynamo finished
            w.close()
        except Exception:
            pass


def _flushing_first(os_exit: Any) -> Any:
    """``os._exit`` that first does what the exit handlers it skips would have done for the
    probe: a process leaving through it (a forked ``multiprocessing`` child always does, after
    its target returns; a script that ends on ``os._exit(0)`` to skip a slow teardown) lost its
    last half second of records, steps among them, and read as a process that never ended."""

    @functools.wraps(os_exit)
    def _exit(*args: Any, **kwargs: Any) -> Any:
        collectives = sys.modules.get("trainprof.probe.collectives")
        if collectives is not None:
            collectives.emit()  # its atexit handler, skipped too (it never raises)
        _at_exit()
        return os_exit(*args, **kwargs)

    return _exit


def _chain_excepthook() -> None:
    """Remember the exception that ends the job (type and message), then print it as it would
    print without trainprof: the probe's wrapper frames are taken out of the traceback."""
    previous = sys.excepthook

    def hook(exc_type, exc, tb):  # type: ignore[no-untyped-def]
        try:
            from trainprof.store.redact import redact_text

            message = redact_text(str(exc))[:2000]
            record_info({"exception": exc_type.__name__, "message": message})
            from trainprof.probe.tracebacks import without_probe_frames

            tb = without_probe_frames(exc, tb)
        except Exception:
            pass
        previous(exc_type, exc, tb)

    sys.excepthook = hook
