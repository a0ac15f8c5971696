"""doctor's cpu-load row: other processes' CPU over a short sample of /proc/stat, said apart from
doctor's own probes; judged against the usable CPUs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import psutil

from trainprof.doctor.cpu import LoadInputs, check_load, gather_load

SPIN = "while True: pass"


@contextmanager
def others_spinning(n: int) -> Iterator[None]:
    """``n`` busy loops started by a short-lived python: other processes to this one."""
    code = (
        "import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', "
        f"{SPIN!r}], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
    )
    pids = [int(subprocess.check_output([sys.executable, "-c", code], text=True)) for _ in range(n)]
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)


def test_other_processes_taking_cpus_are_a_warning() -> None:
    row = check_load(LoadInputs(usable=2, busy=2.0, own=0.1, sample_s=0.5, loadavg=3.2))
    assert row.status == "warn" and row.finding.id == "cpu-load"
    assert row.finding.title == (
        "other processes take 1.9 of the 2 usable CPUs now: a job run beside them gets about 0.1"
    )
    assert "load average 3.20" in " ".join(row.finding.evidence)
    assert "torch.set_num_threads(1)" in row.finding.fix[1]


def test_a_quiet_machine_and_doctors_own_probes_are_ok() -> None:
    assert check_load(LoadInputs(2, 0.2, 0.0, 0.5, 0.1)).status == "ok"
    assert check_load(LoadInputs(2, 1.2, 1.0, 0.5, 1.0)).status == "ok"  # its own probe
    assert check_load(LoadInputs(2, None, 0.0, 0.5, None)).status == "ok"


def test_busy_loops_beside_it_are_measured_as_others() -> None:
    with others_spinning(2):
        got = gather_load(2, sample_s=0.5)
    assert got.busy is not None and got.busy - got.own >= 1.0, got
    assert check_load(got).status == "warn"


def test_its_own_children_are_not_others() -> None:
    child = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        spun = psutil.Process(child.pid)
        before = sum(spun.cpu_times()[:2])
        got = gather_load(2, sample_s=0.5)
        child_cpus = (sum(spun.cpu_times()[:2]) - before) / got.sample_s
    finally:
        child.kill()
        child.wait()
    assert child_cpus > 0.05, "the child never ran"
    assert got.own >= 0.8 * child_cpus, (got, child_cpus)  # its CPU is doctor's own
