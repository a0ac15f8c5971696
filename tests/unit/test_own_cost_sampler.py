"""The host sampler's cumulative CPU seconds of trainprof's own processes: this process, and its
children outside the job's tree (py-spy in a real run), each counted up to its last reading
after it ends. Real processes; the helper's CPU is read back from the kernel at its exit."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from trainprof.collect.samplers.host import HostSampler

SPIN = "import time\nt = time.time()\nwhile time.time() - t < 1.0: pass"


def _spin_here(cpu_s: float) -> None:
    start = time.thread_time()
    while time.thread_time() - start < cpu_s:
        pass


def test_a_helper_counts_up_to_its_end_and_this_process_counts_too() -> None:
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        sampler = HostSampler(job.pid)
        before = sampler.sample()["own_s"]
        helper = subprocess.Popen([sys.executable, "-c", SPIN])
        rows = []
        while True:  # sampled while it spins, until it exits; its exact CPU from wait4
            pid, status, usage = os.wait4(helper.pid, os.WNOHANG)
            if pid:
                helper.returncode = os.waitstatus_to_exitcode(status)
                break
            rows.append(sampler.sample()["own_s"])
            time.sleep(0.05)
        _spin_here(0.3)  # trainprof's own process at work
        after = sampler.sample()["own_s"]
    finally:
        job.kill()
        job.wait()
    assert before == [before[0], 0.0] and before[0] >= 0
    used = usage.ru_utime + usage.ru_stime
    # up to its last reading: at most one interval (50 ms here, on a busy machine a little
    # more) short of what it used, never more
    assert used - 0.15 <= after[1] <= used + 0.02, (after, used)
    assert after[1] == rows[-1][1]  # gone, still counted: never dropped
    assert after[0] - before[0] >= 0.3  # this process's own spin
    assert all(b[1] >= a[1] for a, b in zip(rows, rows[1:], strict=False))  # cumulative
