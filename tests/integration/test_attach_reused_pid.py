"""`trainprof attach` does not follow its target's pid to the next process that gets it.

The pid is reused for real: in a pid namespace of its own (``unshare``), the kernel hands out
the next pid from ``ns_last_pid``, which the scenario sets back to the target's once the target
is gone. attach is held stopped meanwhile, so it sees the swap, not the exit alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import trainprof_cmd

pytestmark = [pytest.mark.slow, pytest.mark.parallel]  # judges no timing or load (CONTRIBUTING)
SCENARIO = """
import json, os, signal, subprocess, sys, time
import psutil

LOOPS = "import time\\nprint('ready', flush=True)\\nwhile True:\\n    sum(range(1000)); time.sleep(0.001)\\n"
run_dir, cmd = sys.argv[1], json.loads(sys.argv[2])

def loop():
    p = subprocess.Popen([sys.executable, "-c", LOOPS], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "ready\\n"
    return p

def spies(pid):
    return [p for p in psutil.process_iter(["name", "cmdline"])
            if "py-spy" in (p.info["name"] or "") and str(pid) in (p.info["cmdline"] or [])]

target = loop()
pid = target.pid
attach = subprocess.Popen(cmd + ["--run-dir", run_dir, str(pid)], stderr=subprocess.PIPE, text=True)
deadline = time.monotonic() + 60
while not spies(pid):
    assert attach.poll() is None and time.monotonic() < deadline, "attach started no py-spy"
    time.sleep(0.1)
time.sleep(1.0)  # a second of the target's stacks
attach.send_signal(signal.SIGSTOP)  # it sees the pid again only once another process has it
target.kill()
target.wait()
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(pid - 1))
other = loop()
attach.send_signal(signal.SIGCONT)
t0 = time.monotonic()
_, err = attach.communicate(timeout=90)
print(json.dumps({"target": pid, "other": other.pid, "attach_s": time.monotonic() - t0,
                  "code": attach.returncode, "stderr": err[-3000:]}))
other.kill()
"""


def test_a_reused_pid_is_not_followed(tmp_path: Path) -> None:
    """Was: attach restarted py-spy on the new process, mixed its CPU and memory into the run,
    and said "the target is still running"."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare(1) is not installed")
    probe = subprocess.run([unshare, "-pf", "--mount-proc", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no pid namespace here: {probe.stderr.decode().strip()}")
    run_dir = tmp_path / "run"
    cmd = trainprof_cmd("attach", "--duration", "60")
    done = subprocess.run(
        [
            unshare,
            "-pf",
            "--mount-proc",
            sys.executable,
            "-c",
            SCENARIO,
            str(run_dir),
            json.dumps(cmd),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["other"] == out["target"], out  # the pid was reused
    assert out["code"] == 0, out["stderr"]
    assert out["attach_s"] < 30, out  # it did not sample the new process for the --duration
    att = json.loads((run_dir / "run.json").read_text())["attach"]
    (target,) = att["targets"]
    assert target["py_spy_restarts"] == 0, att  # not started again on the new process
    assert att["target_exit"].startswith("exited during sampling"), att
