"""py-spy, run from outside the job: where its binary is, the one ``record`` command line that
``run`` (main thread, in chunks) and ``attach`` (the process and its subprocesses) both start,
and how to stop a recording so that it writes what it has.

Every recording is ``--nonblocking`` (the job is never paused: an NCCL job never stalls on us,
and the probe's overhead budget is untouched), ``--idle`` (a thread blocked in I/O or a lock is
where the time goes too) and ``--full-filenames`` (the rules read the user's source lines).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from trainprof.store.rundir import open_private


def py_spy_path() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.is_file() else shutil.which("py-spy")


def record_command(
    exe: str, pid: int, rate_hz: int, duration_s: int, output: Path, subprocesses: bool = False
) -> list[str]:
    """``py-spy record`` of ``pid`` into a Chrome trace at ``output``."""
    cmd = [exe, "record", "--pid", str(pid), "--nonblocking", "--idle"]
    if subprocesses:
        cmd.append("--subprocesses")  # DataLoader workers too
    return cmd + [
        "--full-filenames", "--rate", str(rate_hz), "--duration", str(duration_s),
        "--format", "chrometrace", "--output", str(output),
    ]  # fmt: skip


def start_record(cmd: list[str], log: Path) -> subprocess.Popen[bytes] | str:
    """Start a recording, its output appended to ``log``: the process, or why it did not start."""
    with open_private(log, "ab") as out:
        try:
            return subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C at the terminal is ours to pass on
                umask=0o077,  # py-spy creates the trace itself: 0600, as every run file
            )
        except OSError as exc:
            return f"py-spy could not start: {exc.strerror}"


def interrupt(proc: subprocess.Popen[Any], timeout: float) -> None:
    """Stop a py-spy record: SIGINT makes it write what it recorded; killed if it hangs."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
