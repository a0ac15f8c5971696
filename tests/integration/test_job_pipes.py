"""The job's output streams behave as without trainprof: a reader that goes away breaks the
job's pipe, and a process the job leaves behind keeps its output but not trainprof."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import trainprof_cmd, write_script

pytestmark = [pytest.mark.slow, pytest.mark.parallel]  # judges no timing or load (CONTRIBUTING)


def _into_head(cmd: list[str], cwd: Path) -> tuple[int, bytes, float]:
    """``cmd | head -1``: the command's exit code, what head printed, and how long it took."""
    t0 = time.monotonic()
    writer = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert writer.stdout is not None
    head = subprocess.Popen(["head", "-1"], stdin=writer.stdout, stdout=subprocess.PIPE)
    writer.stdout.close()  # head holds the only read end, as in a shell's pipeline
    try:
        out, _ = head.communicate(timeout=60)
        code = writer.wait(timeout=60)
        code = 128 - code if code < 0 else code  # killed by signal N: 128+N, as a shell says
    finally:
        for p in (writer, head):
            if p.poll() is None:
                p.kill()
    return code, out, time.monotonic() - t0


def test_yes_into_head_ends_at_once_with_the_plain_exit_code(tmp_path: Path) -> None:
    """Was: `trainprof run -- yes | head -1` ran until killed (trainprof drained the pipe)."""
    plain, _, _ = _into_head(["yes"], tmp_path)
    code, out, took = _into_head(
        trainprof_cmd("run", "--quiet", "--run-dir", str(tmp_path / "run"), "--", "yes"), tmp_path
    )
    assert out == b"y\n"
    assert code == plain == 141  # killed by SIGPIPE
    assert took < 20  # it ran until killed
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["signal"] == "SIGPIPE"


PRINTS_LINES = """
    for i in range(200_000):
        print(i)
"""


def test_a_python_job_sees_its_broken_pipe_as_without_trainprof(tmp_path: Path) -> None:
    """Was: exit 0 under trainprof where plain Python exits 1 (BrokenPipeError)."""
    script = write_script(tmp_path, "prints.py", PRINTS_LINES)
    plain, _, _ = _into_head([sys.executable, str(script)], tmp_path)
    code, out, _ = _into_head(
        trainprof_cmd(
            "run", "--quiet", "--no-stacks", "--run-dir", str(tmp_path / "run"), str(script)
        ),
        tmp_path,
    )
    assert out == b"0\n"
    assert plain != 0 and code == plain


LEAVES_A_DAEMON = """
    import os, sys
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:  # a daemon, holding the job's stdout and stderr
            with open(sys.argv[1]) as fifo:
                fifo.read()  # until the test says trainprof has ended
            try:
                print("daemon done", flush=True)
                said = "wrote"
            except BrokenPipeError:
                said = "broken pipe"
            with open(sys.argv[2], "w") as f:
                f.write(said)
            os._exit(0)
        os._exit(0)
    print("job done", flush=True)
"""


def test_a_daemon_holding_the_output_does_not_hold_trainprof(tmp_path: Path) -> None:
    """Was: trainprof waited 10 s for the daemon's end of the pipe, said "exited 0 in 12.46 s"
    of a 2.4 s job, and the daemon died of a broken pipe once trainprof ended."""
    script = write_script(tmp_path, "daemon.py", LEAVES_A_DAEMON)
    fifo, said = tmp_path / "go", tmp_path / "said"
    os.mkfifo(fifo)
    run_dir = tmp_path / "run"
    cmd = trainprof_cmd(
        "run",
        "--quiet",
        "--no-stacks",
        "--run-dir",
        str(run_dir),
        str(script),
        str(fifo),
        str(said),
    )
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.wait(timeout=60) == 0
        took = time.monotonic() - t0
        meta = json.loads((run_dir / "run.json").read_text())
        with open(fifo, "w") as go:  # the daemon writes once trainprof has ended
            go.write("go")
        assert proc.stdout is not None
        out = proc.stdout.read()  # to the end: the relay's, once the daemon has ended
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out.splitlines() == [b"job done", b"daemon done"]
    assert said.read_text() == "wrote"
    assert meta["wall_s"] < 5, meta["wall_s"]  # the job's time, not the daemon's
    assert took < meta["wall_s"] + 8  # the report's time; it held trainprof 10 s more
