"""py-spy on the processes of a running job, from outside: ``record --nonblocking`` (the job is
never paused, so an NCCL job never stalls on us), ``--idle`` (a thread blocked in I/O or a lock
is where the time goes too) and ``--subprocesses`` (DataLoader workers).

py-spy writes one Chrome trace for the whole tree when it stops (``--duration`` ran out, it
was sent SIGINT, or the target exited). ``split`` turns it into one trace per process, the
format ``store/stacks.py`` reads for `trainprof run`, so the same loader and analysis apply.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trainprof.samplers.pyspy import interrupt, py_spy_path, record_command, start_record
from trainprof.store.rundir import write_private_text

RAW = "py-spy-raw.json"
LOG = "py-spy.log"


def stacks_file(pid: int) -> str:
    return f"stacks-{pid}.json"


class SpyRecorder:
    """One ``py-spy record`` of one process and its subprocesses."""

    def __init__(self, pid: int, run_dir: Path, rate_hz: int, duration_s: float) -> None:
        self.pid = pid
        self.run_dir = run_dir
        self.rate_hz = rate_hz
        self.duration_s = duration_s
        self.started_at: float | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.error: str | None = None
        self.raw = run_dir / f"py-spy-raw-{pid}.json"

    def start(self) -> bool:
        exe = py_spy_path()
        if exe is None:
            self.error = "py-spy not found (pip install py-spy)"
            return False
        duration = max(1, int(self.duration_s + 0.999))
        cmd = record_command(exe, self.pid, self.rate_hz, duration, self.raw, subprocesses=True)
        proc = start_record(cmd, self.run_dir / LOG)
        if isinstance(proc, str):
            self.error = proc
            return False
        self.proc = proc
        self.started_at = time.monotonic()
        return True

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> None:
        """SIGINT: py-spy writes what it recorded (it does by itself when the target exits)."""
        proc = self.proc
        if proc is None:
            return
        interrupt(proc, timeout)
        if not self.raw.is_file():
            self.error = _last_line(self.run_dir / LOG) or "py-spy wrote no samples"


def _last_line(path: Path) -> str | None:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return None
    lines = [ln for ln in lines if not ln.startswith("py-spy> Visit")]
    return lines[-1][:300] if lines else None


def split(raw: Path, run_dir: Path, cwd: str | None = None) -> dict[int, tuple[str, int]]:
    """Write one trace per process of py-spy's whole-tree trace: ``{pid: (file, events)}``.

    py-spy roots each stack of a subprocess in a ``process N:"cmd"`` frame: dropped, so the
    stacks read as `trainprof run`'s do. A relative file name (a script started as ``python
    train.py``) is made absolute against that process's working directory, so its lines can
    be read and named from anywhere (workers share their parent's ``cwd``)."""
    try:
        with open(raw, encoding="utf-8", errors="replace") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    if not isinstance(events, list):
        return {}
    by_pid: dict[int, list[dict[str, Any]]] = {}
    for ev in events:
        if not isinstance(ev, dict) or not isinstance(ev.get("pid"), int):
            continue
        raw_args = ev.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        name = str(ev.get("name", ""))
        if not args.get("filename") and name.startswith("process "):
            continue
        fn = args.get("filename")
        if cwd and isinstance(fn, str) and fn and not os.path.isabs(fn) and not fn.startswith("<"):
            ev = {**ev, "args": {**args, "filename": os.path.normpath(os.path.join(cwd, fn))}}
        by_pid.setdefault(ev["pid"], []).append(ev)
    out: dict[int, tuple[str, int]] = {}
    for pid, evs in by_pid.items():
        name = stacks_file(pid)
        write_private_text(run_dir / name, json.dumps(evs, separators=(",", ":")))
        out[pid] = (name, len(evs))
    return out


def remove(paths: Iterable[Path]) -> None:
    for p in paths:
        with contextlib.suppress(OSError):
            p.unlink()
