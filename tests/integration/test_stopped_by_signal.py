"""`run` and `attach` stopped by a signal name the signal that came, not "Ctrl-C"."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import trainprof_cmd

pytestmark = [pytest.mark.slow, pytest.mark.parallel]  # judges no timing or load (CONTRIBUTING)

SPIN = """\
import time
print("ready", flush=True)
t = time.monotonic()
while time.monotonic() - t < 120:
    sum(range(10000))
"""


def flat(text: str) -> str:
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_run_stopped_by_sigterm_says_so(tmp_path: Path) -> None:
    """Was: "recorded before Ctrl-C stopped the job" after a SIGTERM."""
    (tmp_path / "spin.py").write_text(SPIN)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        trainprof_cmd("run", "-q", "--no-stacks", "--run-dir", str(run_dir), "spin.py"),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]  # the job's, killed by it
    assert "before SIGTERM stopped the job" in flat(err), err[-3000:]
    assert "Ctrl-C" not in err
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["stop_signal"] == "SIGTERM"


def test_attach_stopped_by_sigterm_says_so(tmp_path: Path) -> None:
    """Was: "interrupted (Ctrl-C)" after a SIGTERM."""
    (tmp_path / "spin.py").write_text(SPIN)
    job = subprocess.Popen(
        [sys.executable, "spin.py"], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    try:
        assert job.stdout is not None and job.stdout.readline() == "ready\n"
        run_dir = tmp_path / "run"
        proc = subprocess.Popen(
            trainprof_cmd("attach", "-q", "--run-dir", str(run_dir), str(job.pid)),
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not (run_dir / "py-spy.log").exists():  # sampling has begun
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
    finally:
        job.kill()
        job.wait()
    assert proc.returncode == 0, err[-3000:]
    assert "interrupted (SIGTERM) — partial report" in flat(err), err[-3000:]
    assert "Ctrl-C" not in err
    assert json.loads((run_dir / "run.json").read_text())["stop_signal"] == "SIGTERM"
