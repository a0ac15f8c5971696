"""On a terminal: the job sees a terminal, its output passes through, the live line is drawn."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest
from conftest import trainprof_cmd, write_script

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)


def test_run_on_a_terminal(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        "term_job.py",
        """
        import sys, time, torch
        print("isatty", sys.stdout.isatty(), flush=True)
        m = torch.nn.Linear(4, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)
        t = time.monotonic()
        while time.monotonic() - t < 2.5:
            o.zero_grad(); m(torch.randn(8, 4)).sum().backward(); o.step()
        print("done", flush=True)
        """,
    )
    returncode, text = run_on_pty(
        trainprof_cmd("run", "--run-dir", str(tmp_path / "run"), str(script)), tmp_path
    )
    assert returncode == 0, text[-2000:]
    assert "isatty True" in text
    assert "done" in text
    assert "trainprof 0:0" in text and "it/s" in text  # the live status line was drawn
    assert "trainprof report" in text


def run_on_pty(
    cmd: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    columns: int | None = None,
    chunks: list[tuple[float, bytes]] | None = None,
) -> tuple[int, str]:
    """Run ``cmd`` with a pty as its stdin, stdout and stderr; (exit code, all it wrote).
    ``columns`` sets the terminal's width; ``chunks`` collects (monotonic time, bytes) reads."""
    master, slave = os.openpty()
    if columns is not None:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(
        cmd,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        if chunks is not None:
            chunks.append((time.monotonic(), chunk))
        out += chunk
    os.close(master)
    proc.wait(timeout=60)
    return proc.returncode, out.decode(errors="replace")
