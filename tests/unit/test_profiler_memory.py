"""A profiler left recording keeps every op's events in the main process, so that process's
memory grows in a straight line: profiler-left-on names that growth with its cause (and how
soon it runs the machine out), and memory-growth, whose fixes are caches to bound, leaves it
out; a worker's growth is still memory-growth's. Synthetic sessions: the probe's debug
reading at the first step, the host sampler's RSS/USS a second apart."""

from __future__ import annotations

import json
from typing import Any

from synth import process, session

from trainprof.analysis.findings import Finding
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session

MiB = 2**20


def profiled(
    recording: bool, main_mib_s: float, worker_mib_s: float = 0.0, avail_mib: float = 64_000
) -> Session:
    """A 60 s run (600 steps of 0.1 s) whose main process grows ``main_mib_s`` MiB/s and its one
    DataLoader worker ``worker_mib_s``, a profiler recording from the first step or not."""
    log = process(600, step_s=0.1)
    rec = {"anomaly": False, "check_nan": True, "profiler": recording, "launch_blocking": None}
    log.add_line("X " + json.dumps({"t": 2_000_000, "debug": rec}))
    worker = process(0, loader=None, role="worker", pid=1001)
    rows: list[dict[str, Any]] = [
        {
            "t": 100.0 + i,
            "mem": {"total": 128_000 * MiB, "available": avail_mib * MiB, "used": 0},
            "procs": [
                {"pid": 1000, "rss": (400 + main_mib_s * i) * MiB, "cpu": 90.0},
                {
                    "pid": 1001,
                    "rss": (300 + worker_mib_s * i) * MiB,
                    "uss": (100 + worker_mib_s * i) * MiB,
                },
            ],
        }
        for i in range(62)
    ]
    return session(log, worker, sample_rows=rows)


def findings(sess: Session) -> dict[str, Finding]:
    return {f.id: f for f in analyze(sess)[1].findings}


def test_the_main_process_growing_under_a_profiler_is_the_profilers() -> None:
    found = findings(profiled(True, main_mib_s=2.0))
    assert "memory-growth" not in found, found.keys()
    f = found["profiler-left-on"]
    assert "the main process's memory grew 120 MiB/min while it recorded" in f.evidence
    assert f.severity == "warning"  # 64,000 MiB last longer than an hour at this rate


def test_the_same_growth_without_a_profiler_is_memory_growth() -> None:
    found = findings(profiled(False, main_mib_s=2.0))
    assert "profiler-left-on" not in found
    assert found["memory-growth"].title == "Host memory grows steadily (120 MiB/min)"


def test_a_profiler_that_runs_the_machine_out_of_memory_soon_is_an_error() -> None:
    f = findings(profiled(True, main_mib_s=2.0, avail_mib=3000))["profiler-left-on"]
    assert f.severity == "error"
    assert "at 120 MiB/min the 3000 MiB still available run out in about 25 min" in f.evidence


def test_a_worker_growing_beside_a_profiler_is_still_memory_growth() -> None:
    found = findings(profiled(True, main_mib_s=2.0, worker_mib_s=3.0))
    grows = found["memory-growth"]
    assert [e.split(":")[0] for e in grows.evidence[:-1]] == ["worker process 1001"], grows
    assert "profiler-left-on" in found
