"""cpu-starved on synthetic sessions: DataLoader workers on top of torch's intra-op threads
beyond the CPUs the job may use, while its loop waits for a CPU and not for data.

pytorch/examples' imagenet at its default ``-j 4`` on 2 CPUs: the workers are idle most of
their life (they keep ahead of the loop), so no worker counts as busy, yet the loop's thread
waited for a CPU ~13 % of the time and ``-j 0`` ran 10-13 % faster. The finding claims the
measured wait as its share, and names the knobs: fewer workers, torch.set_num_threads, and
the framework's own word for num_workers (-j in pytorch/examples).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from synth import DEFAULT_LOADER, process, session

from trainprof.analysis.findings import Finding
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session


def _job(
    runq: float,
    workers: int,
    threads: int,
    job_cpu: float = 1.7,
    machine_cpu: float = 98.0,
    wait_s: float = 0.0,
    usable: int = 2,
) -> Session:
    """process(100)'s steady window, 13 host samples a second apart: the main thread waited
    ``runq`` of the time; the training loader has ``workers`` workers, torch ``threads``
    intra-op threads; ``wait_s`` of each 0.1 s step waits for data."""
    rows: list[dict[str, Any]] = [
        {
            "t": 100.0 + i,
            "cpu": machine_cpu,
            "procs": [{"pid": 1000, "cpu": job_cpu * 100, "rq_wait": runq * i}],
        }
        for i in range(13)
    ]
    log = process(100, wait_s=wait_s, loader={**DEFAULT_LOADER, "num_workers": workers})
    log.add_line("X " + json.dumps({"t": 1, "precision": {"intra_op_threads": threads}}))
    return session(log, sample_rows=rows, cpu_count=usable, usable_cpus=usable)


def _finding(sess: Session) -> Finding | None:
    return next((f for f in analyze(sess)[1].findings if f.id == "cpu-starved"), None)


def test_four_workers_beside_two_intra_op_threads_on_two_cpus_are_named_with_the_knobs() -> None:
    f = _finding(_job(0.13, workers=4, threads=2))
    assert f is not None
    assert f.title == "CPU-starved: the training loop waits for a CPU 13% of the time"
    assert f.evidence[1] == (
        "torch's 2 intra-op threads (the training loop's thread one of them) and 4 DataLoader "
        "workers: 6 threads for the 2 CPUs the job may use; its processes used 1.7 CPUs on "
        "average"
    )
    assert f.evidence[2].startswith(
        "the loop waited for its workers' next batch 0.0% of the steady time"
    )
    assert f.fix[0].startswith(
        "fewer DataLoader workers, and torch's threads for the CPUs they leave: num_workers=1 "
        "and torch.set_num_threads(1) (or OMP_NUM_THREADS=1): workers and intra-op threads"
    )
    assert "num_workers at most CPUs - 1" in f.fix[0]
    assert f.fix[1].startswith("or num_workers=0:")
    assert len(f.fix) == 2  # no framework recognised: no framework's words
    # the claimed share is the measured wait
    assert f.impact == pytest.approx(0.13, abs=0.005)


def test_one_worker_beside_two_intra_op_threads_is_still_one_thread_too_many() -> None:
    """Measured on the zoo's job: -j 1 with torch's 2 threads, the loop waited 30 %."""
    f = _finding(_job(0.30, workers=1, threads=2))
    assert f is not None
    assert "1 DataLoader worker: 3 threads for the 2 CPUs" in f.evidence[1]
    assert f.fix[0].startswith(
        "torch's threads for the CPUs the workers leave: torch.set_num_threads(1)"
    )
    assert f.impact == pytest.approx(0.30, abs=0.005)


def test_a_larger_machine_keeps_half_its_cpus_for_the_workers() -> None:
    f = _finding(_job(0.2, workers=16, threads=8, job_cpu=7.5, machine_cpu=95.0, usable=8))
    assert f is not None
    assert "num_workers=4 and torch.set_num_threads(4)" in f.fix[0]


@pytest.mark.parametrize(
    ("what", "sess"),
    [
        # every CPU in use, but the loop's thread never waits: productive, not starved
        ("no wait", _job(0.02, workers=4, threads=2, job_cpu=1.95, machine_cpu=99.0)),
        # one thread and one worker fit 2 CPUs: the wait has no cause in the job
        ("threads fit", _job(0.2, workers=1, threads=1)),
    ],
)
def test_quiet_where_the_job_uses_its_cpus_without_oversubscribing_them(
    what: str, sess: Session
) -> None:
    assert _finding(sess) is None, what


def test_a_loop_that_waits_for_data_is_not_told_to_cut_workers() -> None:
    """The workers are behind (input-bound): fewer of them would starve the loop more."""
    f = _finding(_job(0.2, workers=4, threads=2, wait_s=0.04))
    assert f is None or "DataLoader worker" not in "\n".join(f.evidence), f


def test_other_processes_on_the_machine_are_named_not_the_workers() -> None:
    f = _finding(_job(0.3, workers=4, threads=2, job_cpu=0.8, machine_cpu=100.0))
    assert f is not None
    assert "other processes used" in f.evidence[1]
    assert not any("num_workers" in x for x in f.fix)
    assert f.impact == pytest.approx(0.3, abs=0.005)  # the loop's wait, its own bucket


def test_the_framework_that_builds_the_loader_gets_its_own_words_for_num_workers() -> None:
    """Lightning's loop stepped the optimizer: its words for num_workers follow the fixes."""
    sess = _job(0.13, workers=4, threads=2)
    site = "/venv/lib/python3.11/site-packages/lightning/pytorch/loops/fit_loop.py"
    callers = [["_FitLoop.run", site], ["<module>", "/home/u/train.py"]]
    sess.processes[0].infos.append({"t": 1, "step_callers": callers})
    f = _finding(sess)
    assert f is not None
    assert f.fix[-1].startswith("with Lightning: the training DataLoader")
    assert f.fix[-1].split(" — ")[0].endswith("num_workers=...")
