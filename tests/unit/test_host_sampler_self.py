"""The host sampler measures trainprof's own processes apart from the job's: this process and
its children outside the job's tree (py-spy, in a real run). Real processes: a busy child that
is not the job is counted; the job, busy too, is not."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from trainprof.samplers.host import HostSampler, _child_pids

BUSY = "import time\nt = time.time()\nwhile time.time() - t < 3: pass"


def test_a_busy_helper_is_trainprofs_own_and_the_busy_job_is_not() -> None:
    job = subprocess.Popen([sys.executable, "-c", BUSY])
    helper = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        assert sorted(_child_pids(os.getpid()) or []) == sorted([job.pid, helper.pid])
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
