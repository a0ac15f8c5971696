"""A run directory whose trainprof process is still at work (its report is the report so far),
or died before the job ended: told, marked in its metadata, and the space it held given back."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil

from trainprof.store import rundir
from trainprof.store.session import Session


def process_started(pid: int) -> float | None:
    """When process ``pid`` started (psutil's create time), or None when it is gone."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def runner_died(session: Session) -> bool:
    """A run.json that its runner wrote at the start and never finished, and that runner is
    gone: the report says so (``stopped_by`` "runner-died", ``runner.died``) and covers what
    was recorded until then."""
    meta = session.meta
    runner = meta.get("runner") if "exit_code" not in meta else None
    if not isinstance(runner, dict) or not isinstance(runner.get("pid"), int):
        return False
    pid = runner["pid"]
    started = process_started(pid)
    then = runner.get("started")
    if started is not None and (then is None or abs(started - float(then)) < 1.0):
        return False  # still running (the same process: a reused pid started later)
    meta["runner"] = {**runner, "died": True}
    meta["stopped_by"] = "runner-died"
    if meta.get("wall_s") is None:
        meta["wall_s"] = recorded_until(session)
    rundir.release_space(Path(session.run_dir))  # the space it held for its last writes
    print(
        f"trainprof: this run's trainprof process (pid {pid}) ended before the job did "
        "(killed: SIGKILL, the OOM killer?); the report covers what was recorded until then",
        file=sys.stderr,
        flush=True,
    )
    return True


def still_running(session: Session) -> bool:
    """Whether this run's runner is still at work (no exit code yet, its process alive): a
    report of it is the report so far. Marks ``meta["running"]`` and its ``wall_s`` so far."""
    meta = session.meta
    runner = meta.get("runner") if "exit_code" not in meta else None
    if not isinstance(runner, dict) or not isinstance(runner.get("pid"), int):
        return False
    started = process_started(runner["pid"])
    then = runner.get("started")
    if started is None or (then is not None and abs(started - float(then)) >= 1.0):
        return False
    meta["running"] = True
    launched = meta.get("t_launch")
    if meta.get("wall_s") is None and isinstance(launched, (int, float)):
        meta["wall_s"] = max(time.monotonic() - float(launched), 0.0)
    return True


def recorded_until(session: Session) -> float | None:
    """Seconds from the job's launch to the last thing recorded (a sample, a step, a batch, a
    backward pass)."""
    launched = session.meta.get("t_launch")
    if not isinstance(launched, (int, float)):
        return None
    last = [session.samples.t[-1]] if len(session.samples.t) else []
    for p in session.processes:
        t0 = float(p.header.get("t0", 0.0))
        for col in (p.steps["t"], p.batches["t"], p.backwards):
            if len(col):
                last.append(t0 + col[-1] / 1e6)
    return max(last) - launched if last else None
