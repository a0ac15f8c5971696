"""Did the job load the probe? The answer for run.json (``meta["probe"]``) at the job's end, and
one line on stderr while the job runs when it did not: a job that runs for hours should not
learn at its end that none of its steps was seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from trainprof.collect.attach.target import is_python
from trainprof.collect.samplers.proctree import process_tree
from trainprof.store.schema import EVENT_FILE_PREFIX, PROBE_FAILED, PROBE_LOADED

# A Python process of the job this old without the probe loaded never will: the probe starts
# as the interpreter starts (the bootstrap sitecustomize), well within a second.
SILENT_PYTHON_S = 5.0
LOOK_EVERY_S = 2.0  # how often the job's processes are listed while no Python was found


def probe_state(run_dir: Path, blocked: str | None) -> dict[str, Any]:
    """``meta["probe"]``: did a process of the job load the probe; if none did, why."""
    if (run_dir / PROBE_LOADED).exists() or any(run_dir.glob(f"{EVENT_FILE_PREFIX}*")):
        return {"loaded": True}
    failed = read_failure(run_dir)
    if failed:
        return {"loaded": False, "reason": f"the job's Python could not start the probe: {failed}"}
    return {
        "loaded": False,
        "reason": blocked
        or "no process of the job loaded the probe (no Python process ran, or one ran with "
        "-I, -E or -S, or with PYTHONPATH replaced)",
    }


def read_failure(run_dir: Path) -> str | None:
    """What the bootstrap left when the probe's start failed in a process of the job."""
    try:
        with open(run_dir / PROBE_FAILED, encoding="utf-8", errors="replace") as f:
            return f.read(500).strip() or None
    except OSError:
        return None


class ProbeWatch:
    """Says once, while the job runs, that no process of it loaded the probe: at once when the
    bootstrap left the import's error, else once a Python process of the job has run for
    ``SILENT_PYTHON_S`` without it (a wrapper that replaced PYTHONPATH, ``python -I`` behind a
    shell script). Nothing when the command's own flags already said it at the start."""

    def __init__(self, run_dir: Path, job_pid: int, already_said: bool) -> None:
        self.run_dir = run_dir
        self.job_pid = job_pid
        self.done = already_said
        self.missing = already_said  # said that no process of the job loaded it
        self.next_look = 0.0

    def check(self, say: Callable[[str], None]) -> None:
        if self.done:
            return
        if (self.run_dir / PROBE_LOADED).exists():
            self.done = True  # loaded (by one process at least): the report says what it saw
            return
        failed = read_failure(self.run_dir)
        if failed is not None:
            self.done = self.missing = True
            say(
                f"trainprof: the job's Python could not start the probe: {failed}; the report "
                "will have host metrics only"
            )
            return
        now = time.monotonic()
        if now < self.next_look:
            return
        self.next_look = now + LOOK_EVERY_S
        python = self._silent_python()
        if python is not None:
            self.done = self.missing = True
            say(
                f"trainprof: {python} of the job has run for {SILENT_PYTHON_S:g} s without "
                "loading the probe (PYTHONPATH replaced by a wrapper, or python -I, -E or -S?); "
                "the report will have host metrics only"
            )

    def _silent_python(self) -> str | None:
        """A Python process of the job older than ``SILENT_PYTHON_S``, as "python3 (pid N)"."""
        for proc in process_tree(self.job_pid):
            try:
                old = time.time() - proc.create_time() >= SILENT_PYTHON_S
                if old and is_python(proc):
                    return f"{proc.name()} (pid {proc.pid})"
            except psutil.Error:
                continue
        return None
