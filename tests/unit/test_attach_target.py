"""Which process `trainprof attach PID` samples, and the one-line errors for a PID it cannot:
real processes (a dead PID, a shell, a Python under a shell), and the permission message from
the inputs `trainprof doctor`'s attach check reads."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from trainprof.collect.attach import access, target
from trainprof.doctor.ptrace import PtraceInputs, check_ptrace
from trainprof.errors import TrainprofError

ROOT = Path(__file__).resolve().parents[2]
READY = "import time; print('ready', flush=True); time.sleep(60)"


def _started(cmd: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()  # started: the line it prints first
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait()


def test_a_dead_pid_is_one_line() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with pytest.raises(TrainprofError, match=rf"no process with pid {proc.pid}"):
        target.resolve(proc.pid)


def test_a_pid_that_is_not_python_and_runs_none_is_one_line() -> None:
    proc = _started(["sh", "-c", "echo ready; exec sleep 60"])
    try:
        with pytest.raises(TrainprofError, match="not a Python process and runs no Python"):
            target.resolve(proc.pid)
    finally:
        _stop(proc)


def test_a_shell_launcher_leads_to_the_python_under_it_when_named_one() -> None:
    proc = _started(["sh", "-c", f'{shlex.quote(sys.executable)} -c "{READY}"; true'])
    try:
        # not said to be a launcher: under a process that is not Python may run anyone's jobs
        with pytest.raises(TrainprofError, match=rf"attach --launcher {proc.pid}`") as error:
            target.resolve(proc.pid)
        found = target.resolve(proc.pid, launcher=True)
        assert len(found.processes) == 1
        child = found.processes[0]
        assert child.pid != proc.pid and child.command[0] == sys.executable
        assert str(child.pid) in str(error.value)  # the refusal names what runs under it
        assert found.note is not None and "(named one by --launcher)" in found.note
    finally:
        _stop(proc)


def test_pid_1_is_no_launcher_unless_named_one() -> None:
    """`attach 1` sampled every Python process of the machine: other people's jobs, as root."""
    with pytest.raises(TrainprofError, match="attach --launcher 1`|runs no Python"):
        target.resolve(1)


def test_a_launcher_leaves_zombies_out_and_says_so() -> None:
    """A zombie under a launcher (exited, its parent never reaped it) has a Python name still:
    it was taken as a training process."""
    exe = shlex.quote(sys.executable)
    # sh starts a Python that trains and one that exits, then becomes sleep, which never reaps
    say = "print('ready', flush=True)"
    proc = subprocess.Popen(
        ["sh", "-c", f'{exe} -c "{READY}" & {exe} -c "{say}" & exec sleep 60'],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        seen = ""
        while seen.count("ready") < 2:  # both started (their lines may interleave)
            line = proc.stdout.readline()
            assert line, seen
            seen += line
        deadline = time.monotonic() + 30
        while not (
            zombies := [
                c.pid for c in psutil.Process(proc.pid).children() if c.status() == "zombie"
            ]
        ):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        found = target.resolve(proc.pid, launcher=True)
        assert len(found.processes) == 1 and found.processes[0].pid not in zombies
        assert (
            found.note is not None and f"left out: pid {zombies[0]} exited (zombies)" in found.note
        )
    finally:
        _stop(proc)


def test_a_python_process_is_itself() -> None:
    proc = _started([sys.executable, "-c", READY])
    try:
        found = target.resolve(proc.pid)
        assert [p.pid for p in found.processes] == [proc.pid] and found.note is None
    finally:
        _stop(proc)


def test_a_forked_child_with_the_same_command_is_a_worker_of_its_parent() -> None:
    code = (
        "import os, sys, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    time.sleep(60)\n"
        "print(pid, flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    try:
        found = target.resolve(child)
        assert [p.pid for p in found.processes] == [proc.pid]
        assert (
            found.note
            == f"pid {child} is a DataLoader worker of pid {proc.pid}: attaching to {proc.pid}"
        )
    finally:
        os.kill(child, 9)
        _stop(proc)


def test_the_cli_says_it_in_one_line_and_exits_2() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    done = subprocess.run(
        [sys.executable, "-m", "trainprof", "attach", str(proc.pid), "--duration", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == f"trainprof: no process with pid {proc.pid} (it is not running)"


INPUTS = PtraceInputs(
    py_spy="/opt/venv/bin/py-spy",
    ptrace_scope=1,
    euid=1000,
    cap_sys_ptrace=False,
    container="/.dockerenv present",
    attach_ok=False,
    attach_detail="permission denied",
)


def test_permission_denied_names_the_fixes_doctor_names() -> None:
    message = access.denied_message(4242, "permission denied", INPUTS)
    assert "\n" not in message
    assert "ptrace_scope 1" in message and "uid 1000 without CAP_SYS_PTRACE" in message
    assert "setcap cap_sys_ptrace+ep /opt/venv/bin/py-spy" in message
    assert "docker run --cap-add SYS_PTRACE" in message
    assert "capabilities: {add: [SYS_PTRACE]}" in message
    assert "sudo trainprof" not in message and "sudo env" not in message
    doctor = check_ptrace(INPUTS).finding
    assert all(fix in message for fix in doctor.fix)  # the same fixes, word for word


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv"
)
def test_a_real_refusal_is_that_message_not_py_spys() -> None:
    """py-spy run as another user (nobody) cannot ptrace our process: the kernel refuses."""
    proc = _started([sys.executable, "-c", READY])
    try:
        runner = ("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups")
        with pytest.raises(TrainprofError) as err:
            access.check(proc.pid, runner)
        text = str(err.value)
        assert text.startswith(f"cannot read the stacks of pid {proc.pid}: the kernel refused")
        assert "--cap-add SYS_PTRACE" in text and "sudo env" not in text
    finally:
        _stop(proc)


def test_a_busy_training_loop_is_readable_despite_torn_non_blocking_dumps() -> None:
    """A non-blocking dump of a loop whose Python frames change fast (the paced zoo job,
    unthrottled) fails now and then: 5 of 40 here on a quiet machine, more on a loaded one,
    where 3 tries all failed once in a CI run. The access check tries again, a moment later, so
    attach does not refuse a job that merely runs fast. Real py-spy, eight checks in a row."""
    paced = Path(__file__).parents[2] / "trainprof" / "examples" / "zoo" / "attach_paced.py"
    job = [sys.executable, str(paced), "--rate", "100000", "--seconds", "60", "--report", "100"]
    proc = _started(job)  # its first line: "training", once the first step is done
    try:
        for _ in range(8):
            assert access.check(proc.pid)
    finally:
        _stop(proc)
