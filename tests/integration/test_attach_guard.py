"""`trainprof attach` follows only the process it was given, refuses itself, and takes py-spy
with it when it is killed."""

from __future__ import annotations

import dataclasses
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import trainprof_cmd

from trainprof.collect.attach.target import resolve

pytestmark = [pytest.mark.slow, pytest.mark.parallel]  # judges no timing or load (CONTRIBUTING)
LOOPS = "import time\nprint('ready', flush=True)\nwhile True:\n    sum(range(1000)); time.sleep(0.001)\n"


@pytest.fixture
def target() -> Iterator[subprocess.Popen[str]]:
    """A Python process that loops until killed; yielded once it runs its loop."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LOOPS], stdout=subprocess.PIPE, text=True, stderr=subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_reused_pid_is_another_process(target: subprocess.Popen[str]) -> None:
    """The target is its pid and its start time: the same pid started at another time (the
    pid reused by a new process once the target exited) is not followed."""
    (t,) = resolve(target.pid).processes
    assert t.started == psutil.Process(target.pid).create_time()
    assert t.is_running()
    assert not dataclasses.replace(t, started=t.started - 5).is_running()  # type: ignore[operator]
    target.kill()
    target.wait()
    assert not t.is_running()


@pytest.mark.parametrize("who", ["itself", "its parent"])
def test_attach_refuses_itself_and_its_parent(tmp_path: Path, who: str) -> None:
    # quoted: the suite runs from a path with a space in it too; $$ is the shell's own pid
    cmd = shlex.join(trainprof_cmd("attach", "--duration", "1")) + " $$"
    # exec: the shell's pid becomes trainprof's; without it, the shell is trainprof's parent
    script = f"exec {cmd}" if who == "itself" else f"{cmd}; exit $?"
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    expected = "is this trainprof process" if who == "itself" else "is the parent of this"
    assert expected in lines[0], lines[0]


def _py_spies_of(pid: int) -> list[psutil.Process]:
    """py-spy processes sampling ``pid``."""
    found = []
    for p in psutil.process_iter(["name", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if "py-spy" in (p.info["name"] or "") and str(pid) in cmd:
            found.append(p)
    return found


def test_attach_killed_leaves_no_py_spy(target: subprocess.Popen[str], tmp_path: Path) -> None:
    """Was: `kill -9` of attach left py-spy sampling the target for the rest of --duration."""
    attach = subprocess.Popen(
        trainprof_cmd(
            "attach", "--duration", "120", "--run-dir", str(tmp_path / "run"), str(target.pid)
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not (spies := _py_spies_of(target.pid)):  # attach starts its py-spy
            assert attach.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        attach.send_signal(signal.SIGKILL)
        attach.wait()
        gone, alive = psutil.wait_procs(spies, timeout=15)
        assert not alive, f"py-spy still sampling after attach was killed: {alive}"
    finally:
        if attach.poll() is None:
            attach.kill()
        for p in _py_spies_of(target.pid):
            p.kill()
