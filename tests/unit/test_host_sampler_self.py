"""The job's process tree read from /proc (not from every process of the machine), and the
host sampler's measure of trainprof's own processes apart from the job's: this process and
its children outside the job's tree (py-spy, in a real run). Real processes: a busy child that
is not the job is counted; the job, busy too, is not."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from trainprof.collect.samplers.host import HostSampler
from trainprof.collect.samplers.proctree import child_pids, tree_pids

BUSY = "import time\nt = time.time()\nwhile time.time() - t < 3: pass"


def test_a_busy_helper_is_trainprofs_own_and_the_busy_job_is_not() -> None:
    job = subprocess.Popen([sys.executable, "-c", BUSY])
    helper = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        assert sorted(child_pids(os.getpid()) or []) == sorted([job.pid, helper.pid])
        sampler = HostSampler(job.pid)
        sampler.sample()  # the helper's first reading: no interval yet
        time.sleep(1.0)
        row = sampler.sample()
        # the helper's CPU (≈ one CPU while it spins), not twice that with the job's
        assert 30 <= row["self_cpu"] <= 150, row["self_cpu"]
        assert [p["pid"] for p in row["procs"]] == [job.pid]
    finally:
        for p in (job, helper):
            p.kill()
            p.wait()


def test_the_tree_from_proc_is_psutils_tree() -> None:
    """/proc/PID/task/TID/children walked down from the root lists what psutil's children()
    finds by reading every process of the machine: here a child and its grandchild."""
    code = "import subprocess, time\np = subprocess.Popen(['sleep', '30'])\ntime.sleep(30)"
    root = subprocess.Popen([sys.executable, "-c", code])
    try:
        want = None
        for _ in range(100):  # until the grandchild is started
            want = [root.pid, *(c.pid for c in psutil.Process(root.pid).children(recursive=True))]
            if len(want) == 2:
                break
            time.sleep(0.05)
        assert want is not None and len(want) == 2
        assert tree_pids(root.pid) == want
    finally:
        for c in psutil.Process(root.pid).children(recursive=True):
            c.kill()
        root.kill()
        root.wait()
    assert tree_pids(root.pid) == []  # gone
