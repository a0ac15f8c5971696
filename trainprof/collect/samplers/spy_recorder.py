"""The py-spy recorder: ``py-spy record`` runs of one process, one after another, each a trace.

``run`` records the main thread in chunks (``samplers/stacks.py``), ``attach`` a process and its
subprocesses in segments (``attach/record.py``); both start, stop and read py-spy here. Each run
is a piece: the trace py-spy writes when it stops (its time is µs since ``started_at``), the
rate it sampled at and the py-spy process. A piece's py-spy is stopped with SIGINT, so that it
writes what it recorded; it writes it by itself when its duration runs out or its target exits.
"""

from __future__ import annotations

import math
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from trainprof.collect.samplers.pyspy import interrupt, py_spy_path, record_command, start_record

NOT_FOUND = "py-spy not found"


@dataclass(frozen=True)
class Piece:
    """One py-spy run: the trace it writes, when it started (its trace's zero), its rate."""

    path: Path
    started_at: float  # time.monotonic() just before py-spy started
    rate_hz: int
    proc: subprocess.Popen[bytes]


class SpyRecorder:
    """``py-spy record`` of one process (and, with ``subprocesses``, the processes it starts),
    one piece after another; its output goes to ``log``."""

    def __init__(self, pid: int, log: Path, subprocesses: bool = False) -> None:
        self.pid = pid
        self.log = log
        self.subprocesses = subprocesses
        self.pieces: list[Piece] = []

    def record(self, path: Path, rate_hz: int, duration_s: float) -> str | None:
        """Start one more piece, into ``path``: None, or why py-spy did not start."""
        exe = py_spy_path()
        if exe is None:
            return NOT_FOUND
        seconds = max(1, math.ceil(duration_s))
        cmd = record_command(exe, self.pid, rate_hz, seconds, path, self.subprocesses)
        started = time.monotonic()
        proc = start_record(cmd, self.log)
        if isinstance(proc, str):
            return proc
        self.pieces.append(Piece(path, started, rate_hz, proc))
        return None

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        """The latest piece's py-spy (its own session: pgid = pid)."""
        return self.pieces[-1].proc if self.pieces else None

    @property
    def spy_pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ended_by_itself(self) -> bool:
        """The latest py-spy exited by itself and wrote what it had (a failed run wrote nothing)."""
        proc = self.proc
        return proc is not None and proc.poll() is not None and self.pieces[-1].path.is_file()

    def stop(self, timeout: float) -> None:
        """Stop the latest py-spy with SIGINT, so that it writes what it recorded; killed if hung."""
        if self.proc is not None:
            interrupt(self.proc, timeout)

    def log_tail(self) -> str | None:
        """The last line py-spy wrote to its log (why it wrote no trace), if any."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return None
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith("py-spy> Visit")]
        return lines[-1][:300] if lines else None
