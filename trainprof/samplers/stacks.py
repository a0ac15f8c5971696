"""Main-thread stack samples of the job, taken from outside with py-spy (``--nonblocking``: the
job is never paused, so the probe's overhead budget is untouched).

py-spy writes a Chrome trace (begin/end events per frame with microsecond timestamps relative
to its own start) when it is stopped; the runner notes the monotonic time it started py-spy so
the analysis can line stack samples up with steps.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

STACKS_FILE = "stacks.json"
DEFAULT_RATE_HZ = 50


def py_spy_path() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.is_file() else shutil.which("py-spy")


class StackRecorder:
    def __init__(self, pid: int, run_dir: Path, rate_hz: int = DEFAULT_RATE_HZ) -> None:
        self.pid = pid
        self.path = run_dir / STACKS_FILE
        self.rate_hz = rate_hz
        self.started_at: float | None = None
        self.error: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = run_dir / "py-spy.log"

    def start(self) -> bool:
        exe = py_spy_path()
        if exe is None:
            self.error = "py-spy not found"
            return False
        cmd = [
            exe, "record", "--pid", str(self.pid), "--nonblocking", "--idle", "--full-filenames",
            "--rate", str(self.rate_hz), "--format", "chrometrace", "--output", str(self.path),
        ]  # fmt: skip
        self.started_at = time.monotonic()
        with open(self._log, "wb") as log:
            try:
                self._proc = subprocess.Popen(
                    cmd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError as exc:
                self.error = f"py-spy could not start: {exc.strerror}"
                return False
        return True

    def stop(self, timeout: float = 10.0) -> None:
        """py-spy writes its file when interrupted (or when the target exits by itself)."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if not self.path.is_file():
            try:
                self.error = self._log.read_text(errors="replace").strip().splitlines()[-1][:300]
            except (OSError, IndexError):
                self.error = "py-spy wrote no samples"
