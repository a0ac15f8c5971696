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
import os
import sys
from typing import Any

from trainprof.probe import records
from trainprof.probe.writer import EventWriter
from trainprof.store.schema import ENV_RUN_DIR, PROBE_LOADED


def start() -> None:
    """Start once per process; a second call (or a missing run directory) does nothing."""
    if records.writer() is not None:
        return
    run_dir = os.environ.get(ENV_RUN_DIR)
    if not run_dir or not os.path.isdir(run_dir) or "all" in records.disabled_parts():
        return
    _mark_loaded(run_dir)
    w = EventWriter(run_dir)
    if os.environ.get("RANK") is not None:
        w.set_role("rank")
    records.set_writer(w)
    os.register_at_fork(after_in_child=w.after_fork_in_child)
    atexit.register(_at_exit)
    os._exit = _flushing_first(os._exit)
    _chain_excepthook()
    from trainprof.probe.import_hook import call_after_import

    call_after_import("torch", _on_torch_imported)
    if "save" not in records.disabled_parts():
        from trainprof.probe.saves import HOOKS

        for name, hook in HOOKS.items():
            call_after_import(name, hook)
    from trainprof.probe import trackers

    trackers.install()  # the job's own MLflow or W&B run, for --mlflow and --wandb


def stop() -> list[str]:
    """Flush, stop recording and take the probe out of this process; what could not be undone."""
    w = records.writer()
    if w is None:
        return []
    try:
        w.run_ticks()
        w.close()
    finally:
        records.set_writer(None)
    atexit.unregister(_at_exit)
    thread = getattr(w, "_thread", None)
    if thread is not None and thread.is_alive():
        thread.join(timeout=5)
    from trainprof.probe import collectives, compiles, debug_modes
    from trainprof.probe.state import state
    from trainprof.probe.unload import unload

    left = unload()
    fresh: tuple[Any, ...] = (state, collectives._state, compiles._state, debug_modes._state)
    for each in fresh:
        type(each).__init__(each)  # a next start() counts from nothing
    return left


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
        if "debug" not in records.disabled_parts():
            debug_modes.install(torch_module)  # anomaly detection: where it is turned on
        collectives.install(torch_module)  # time in torch.distributed collectives, per rank
        dynamo.install()  # a job that compiles: Dynamo leaves the probe's hooks alone
    except Exception as exc:  # fail open, but say so in the record for the report
        records.record_error("install", exc)


def _at_exit() -> None:
    w = records.writer()
    if w is not None:
        try:
            # Registered first, so it runs last of the exit handlers: a process that dies after
            # this record died in the interpreter's shutdown, after its program had ended.
            records.record_info({"at_exit": True})
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

    @functools.wraps(previous)
    def hook(exc_type, exc, tb):  # type: ignore[no-untyped-def]
        try:
            from trainprof.store.redact import configure_in_job

            message = configure_in_job().text(str(exc))[:2000]
            records.record_info({"exception": exc_type.__name__, "message": message})
            from trainprof.probe.tracebacks import without_probe_frames

            tb = without_probe_frames(exc, tb)
        except Exception:
            pass
        previous(exc_type, exc, tb)

    sys.excepthook = hook
