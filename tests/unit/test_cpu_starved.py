"""cpu-starved on synthetic sessions: the main thread's run-queue wait, and what took the CPUs
(a cgroup quota, the job's own threads, other processes), each with its own fix; quiet where
nothing measured says why, and on a GPU job whose GPU is busy anyway."""

from __future__ import annotations

import json
from typing import Any

import pytest
from synth import process, session

from trainprof.analysis.findings import Finding
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session


def _job(
    runq: float,
    job_cpu: float,
    machine_cpu: float,
    quota: dict[str, Any] | None = None,
    workers: int = 0,
    threads: int | None = None,
    own_cpu: float | None = None,
    **meta: Any,
) -> Session:
    """13 host samples a second apart over process(100)'s steady window (102.5 .. 111.9 s);
    ``own_cpu``: CPUs trainprof's own processes used."""
    rows = []
    for i in range(13):
        procs = [{"pid": 1000, "cpu": job_cpu * 100, "rq_wait": runq * i}]
        row: dict[str, Any] = {"t": 100.0 + i, "cpu": machine_cpu, "procs": procs}
        if own_cpu is not None:
            row["self_cpu"] = own_cpu * 100
        if quota is not None:
            row["quota"] = {
                "cpus": quota["cpus"],
                "periods": 10 * i,
                "throttled": round(10 * i * quota["throttled"]),
                "throttled_s": 0.5 * i,
            }
        rows.append(row)
    log = process(100, loader=None)  # no DataLoader: workers are a cause of their own
    if threads is not None:
        log.add_line("X " + json.dumps({"t": 1, "precision": {"intra_op_threads": threads}}))
    return session(log, sample_rows=rows, **{"cpu_count": 64, "usable_cpus": 4, **meta})


def _finding(sess: Session) -> Finding | None:
    return next((f for f in analyze(sess)[1].findings if f.id == "cpu-starved"), None)


def test_a_quota_that_throttles_is_named_with_its_size_and_the_threads_to_fit_it() -> None:
    f = _finding(_job(0.4, 3.9, 20.0, quota={"cpus": 4.0, "throttled": 0.6}, threads=64))
    assert f is not None
    assert f.title == "CPU-starved: the training loop waits for a CPU 40% of the time"
    text = "\n".join(f.evidence)
    assert "waited for a CPU 40% of the steady time" in text
    assert "the cgroup's CPU quota (4 CPUs) stopped the job in 60% of its 100 ms periods" in text
    assert "with torch's 64 intra-op threads" in text
    assert f.fix[0].startswith("size the job to the quota, not to the host's 64 cores:")
    assert "torch.set_num_threads(4)" in f.fix[0]
    assert f.impact == pytest.approx(0.4, abs=0.01)  # the wait is its own bucket, claimed


def test_a_quota_throttling_a_job_whose_threads_fit_it_asks_for_more_quota() -> None:
    f = _finding(_job(0.5, 1.0, 20.0, quota={"cpus": 1.0, "throttled": 0.4}, threads=1))
    assert f is not None
    assert f.fix[0].startswith("raise the quota"), f.fix


def test_the_jobs_own_threads_beyond_its_cpus_are_named() -> None:
    f = _finding(_job(0.2, 3.8, 95.0, cpu_count=4, threads=16))
    assert f is not None
    assert (
        "used 3.8 of the 4 CPUs it may use: torch's 16 intra-op threads compete" in (f.evidence[1])
    )
    assert f.fix[0].startswith("size torch's threads to the 4 CPUs: torch.set_num_threads(4)")


def test_threads_bursting_onto_every_cpu_are_the_jobs_own_below_a_busy_mean() -> None:
    """The zoo's oversubscribed job attached (no thread count): 8 threads on 2 CPUs take both
    for each matmul and wait between, so the mean is 1.49 CPUs; nothing else runs, and the
    loop's thread waits 36 % of the time. Only its own threads can be taking the CPUs."""
    f = _finding(_job(0.36, 1.49, 79.5, cpu_count=2, usable_cpus=2))
    assert f is not None
    assert (
        "used 1.5 of the 2 CPUs it may use on average, the rest of the machine 0.1: its threads "
        "compete" in f.evidence[1]
    )
    # another process's use is another explanation: then nothing is claimed for the job's own
    assert _finding(_job(0.36, 1.0, 79.5, cpu_count=2, usable_cpus=2)) is None


def test_other_processes_on_a_full_machine_are_named() -> None:
    f = _finding(_job(0.3, 1.0, 95.0, cpu_count=4))
    assert f is not None
    got = "the job got 1.0 of its 4 CPUs: other processes used 2.8 of the machine's 4 (95% busy"
    assert got in f.evidence[1]
    # the threads to the CPUs the others leave (4 - 2.8: 1) first; what it gains depends on
    # the others' load, not predicted; a pin only with its risk
    assert f.fix[0].startswith("size the job's threads to the CPUs the other processes leave")
    assert "torch.set_num_threads(1)" in f.fix[0] and "effect not predicted" in f.fix[0]
    pin = next(x for x in f.fix if "taskset" in x)
    assert "risk: a pinned job keeps to those CPUs once the other load is gone" in pin


def test_trainprofs_own_processes_are_not_other_processes() -> None:
    """On a 2-core machine trainprof's sampler and py-spy take a share of a CPU: they are said
    apart from the competition, and are no competition of the machine's to blame."""
    f = _finding(_job(0.3, 1.0, 95.0, cpu_count=4, own_cpu=0.3))
    assert f is not None
    assert (
        "other processes used 2.5 of the machine's 4 (95% busy in all; trainprof's own 0.3 apart)"
        in f.evidence[1]
    )
    # what was "other processes" is trainprof's own: said so, with less sampling as the fix
    f = _finding(_job(0.3, 1.0, 95.0, cpu_count=4, own_cpu=2.5))
    assert f is not None
    assert "2.5 CPUs of it trainprof's own (its sampler and py-spy)" in f.evidence[1]
    assert f.fix[0].startswith("sample less: `--no-stacks`")


def test_quiet_below_the_threshold_and_where_nothing_says_why() -> None:
    assert _finding(_job(0.05, 3.9, 99.0, quota={"cpus": 4.0, "throttled": 0.6})) is None
    # waiting, but the job uses 1 of its 4 CPUs and the machine is half idle: no cause to name
    assert _finding(_job(0.3, 1.0, 50.0, cpu_count=4)) is None


def test_a_quota_that_does_not_throttle_is_not_blamed() -> None:
    f = _finding(_job(0.3, 3.9, 20.0, quota={"cpus": 8.0, "throttled": 0.0}, threads=8))
    assert f is not None and "quota" not in "\n".join(f.evidence)
    # as many threads as CPUs, busy: waiting for something this rule cannot name
    assert _finding(_job(0.3, 3.9, 20.0, threads=4)) is None


def test_slow_steps_of_the_loops_own_code_while_it_waits_for_a_cpu_are_no_cpu_stall() -> None:
    """A 1-CPU quota pauses the job every 100 ms period: every few steps one runs long, in
    the loop's own code. With the main thread's measured wait for a CPU covering those slow
    steps they are not CPU work of the loop's own (cpu-stall), and cpu-starved names the
    quota; the same slow steps with no wait measured stay a periodic CPU stall."""
    from test_rule_thresholds import periodic

    from trainprof.store.stacks import StackSpan

    def job(waits: bool) -> Session:
        log = periodic(300, 0.02, 30, 0.3)  # 9 steps 0.3 s too long, every 30 (3 s in all)
        train = "/home/user/proj/train.py"
        frames = (("<module>", train, 1), ("main", train, 11))
        spans, end = [], log.t0
        for t_us in log.steps["t"]:
            spans.append(StackSpan(end, log.t0 + t_us / 1e6, frames))
            end = log.t0 + t_us / 1e6
        rows = []
        for i in range(12):
            procs = [{"pid": 1000, "cpu": 100.0, "rq_wait": (0.4 if waits else 0.0) * i}]
            quota = {"cpus": 1.0, "periods": 10 * i, "throttled": 8 * i, "throttled_s": 0.4 * i}
            rows.append({"t": 100.0 + i, "cpu": 50.0, "procs": procs, "quota": quota})
        sess = session(log, sample_rows=rows, cpu_count=2, usable_cpus=1)
        sess.source[(train, 11)] = "loss = model(x)"
        sess.spans = spans
        return sess

    m, verdict = analyze(job(True))
    waiting = {f.id: f for f in verdict.findings}
    assert "cpu-stall" not in waiting and "cpu-starved" in waiting, waiting
    assert m.ledger is not None and m.ledger.get("stall_compute") == 0.0
    f = waiting["cpu-starved"]  # the steps that stood still (2.7 s of 8.3) and the other waits
    assert 0.25 < m.ledger.share("stall_wait") < 0.4
    assert f.impact == pytest.approx(m.ledger.share("stall_wait", "cpu_wait"))
    assert f.impact == pytest.approx(0.4, abs=0.01), f.impact
    stood = "9 steps of the loop's own code stood still for 300.0 ms"
    assert any(stood in line for line in f.evidence), f.evidence
    assert "cpu-stall" in {f.id for f in analyze(job(False))[1].findings}
