"""The loop's wait for a CPU as the ledger's own bucket (cpu_wait), the cpu-starved verdict it
leads to, the report's cpu_load, and the job's own usable CPUs: on synthetic ledgers and
sessions, with exact numbers."""

from __future__ import annotations

from typing import Any

import pytest
from synth import process, session

from trainprof.analysis.cpu_starvation import CpuStarvation
from trainprof.analysis.cpu_verdict import cpu_bottleneck
from trainprof.analysis.ledger import BUCKETS, Ledger, with_cpu_wait
from trainprof.analysis.pipeline import analyze
from trainprof.render.json_report import report_dict
from trainprof.store.host_totals import usable_cpus


def ledger(**seconds: float) -> Ledger:
    return Ledger(10.0, {b: seconds.get(b, 0.0) for b in BUCKETS}, "stack samples")


def starvation(runq: float, job: float, machine: float, **kw: Any) -> CpuStarvation:
    args: dict[str, Any] = {
        "runq": runq,
        "job_cpus": job,
        "machine_cpus": machine,
        "own_cpus": 0.0,
        "machine_total": 2,
        "usable": 2,
        "quota": None,
        "throttled": None,
        "throttled_s": None,
    }
    return CpuStarvation(**{**args, **kw})


def test_the_wait_is_taken_from_the_running_buckets_in_proportion() -> None:
    led = with_cpu_wait(ledger(forward=4.0, backward=4.0, fetch=1.0, idle=1.0), runq=0.45)
    assert led.get("cpu_wait") == pytest.approx(4.5)
    # 9 s of running time gave up half of each bucket; the idle second is untouched
    assert led.get("forward") == pytest.approx(2.0) and led.get("fetch") == pytest.approx(0.5)
    assert led.get("idle") == 1.0
    assert sum(led.seconds.values()) == pytest.approx(10.0)
    assert led.share("cpu_wait") == pytest.approx(0.45)


def test_stalls_already_counted_as_waits_are_part_of_it() -> None:
    led = with_cpu_wait(ledger(forward=8.0, stall_wait=2.0), runq=0.3)
    assert led.get("cpu_wait") == pytest.approx(1.0)  # 3 s waited, 2 s of it in stalls
    assert led.get("stall_wait") == 2.0 and led.get("forward") == pytest.approx(7.0)


def test_the_wait_never_exceeds_the_time_the_thread_ran() -> None:
    led = with_cpu_wait(ledger(forward=2.0, data_wait=8.0), runq=0.9)
    assert led.get("cpu_wait") == pytest.approx(2.0) and led.get("forward") == 0.0
    assert led.get("data_wait") == 8.0  # waiting on workers is not a wait for a CPU


def test_no_wait_leaves_the_ledger_as_it_was() -> None:
    led = ledger(forward=10.0)
    assert with_cpu_wait(led, runq=0.0) is led


def test_the_verdict_leads_with_other_processes_that_took_the_cpus() -> None:
    led = with_cpu_wait(ledger(forward=6.0, backward=3.0, optimizer=1.0), runq=0.6)
    b = cpu_bottleneck(led, starvation(0.6, job=0.4, machine=2.0))
    assert b is not None and b.verdict == "cpu-starved"
    assert b.reason == (
        "the job got 0.4 of its 2 CPUs: other processes used 1.6 of the machine's 2; "
        "the loop's thread waited for a CPU 60% of the steady time"
    )


def test_a_quota_or_the_jobs_own_threads_are_named_instead() -> None:
    led = with_cpu_wait(ledger(forward=10.0), runq=0.4)
    quota = starvation(0.4, job=1.0, machine=1.0, quota=1.0, throttled=0.5)
    b = cpu_bottleneck(led, quota)
    assert b is not None and b.reason.startswith("the cgroup's 1-CPU quota stopped the job in 50%")
    b = cpu_bottleneck(led, starvation(0.4, job=1.9, machine=2.0))
    assert b is not None and "its own threads compete for them" in b.reason


def test_a_small_wait_leaves_the_compute_verdict() -> None:
    led = with_cpu_wait(ledger(forward=6.0, backward=3.0, optimizer=1.0), runq=0.1)
    b = cpu_bottleneck(led, starvation(0.1, job=1.0, machine=1.2))
    assert b is not None and b.verdict == "compute-bound"


def _loaded_job(runq: float, cpus: int | None = None) -> Any:
    """process(100)'s steady window with host samples: the loop's thread waits ``runq`` of the
    time, other processes use 1.5 of the 2 CPUs; ``cpus``: its affinity as the sampler read."""
    rows = []
    for i in range(13):
        proc: dict[str, Any] = {"pid": 1000, "cpu": 50.0, "rq_wait": runq * i}
        if cpus is not None:
            proc["cpus"] = cpus
        rows.append({"t": 100.0 + i, "cpu": 100.0, "procs": [proc]})
    log = process(100, loader=None)
    return session(log, sample_rows=rows, cpu_count=2, usable_cpus=2)


def test_a_session_under_load_gets_the_bucket_the_verdict_and_its_load() -> None:
    sess = _loaded_job(0.5)
    m, verdict = analyze(sess)
    assert m.ledger is not None
    assert m.ledger.share("cpu_wait") == pytest.approx(0.5, abs=0.02)
    first = verdict.findings[0]
    assert first.id == "cpu-starved" and first.impact == pytest.approx(0.5, abs=0.02)
    report = report_dict(sess.meta, m, verdict)
    assert report["summary"]["cpu_load"] == {
        "waited": pytest.approx(0.5, abs=0.001),
        "job_cpus": 0.5,
        "others_cpus": 1.5,
        "trainprof_cpus": None,
        "usable_cpus": 2,
        "machine_cpus": 2,
    }


def test_the_jobs_own_affinity_is_its_usable_cpus() -> None:
    sess = _loaded_job(0.5, cpus=1)
    assert usable_cpus(sess.samples, 1000, 2) == 1
    m, _verdict = analyze(sess)
    assert m.usable_cpus == 1
    assert m.cpu_starvation is not None and m.cpu_starvation.usable == 1
    assert usable_cpus(sess.samples, 4242, 2) == 2  # not sampled: run.json's
    sess.samples.cpu_quota = 0.5
    assert usable_cpus(sess.samples, 1000, 2) == 1


def test_a_pinned_job_counts_others_only_beyond_the_cpus_it_may_not_use() -> None:
    """Pinned to 1 of 2 CPUs: of the 1.3 CPUs others used, at least 0.3 were on its own."""
    s = starvation(0.44, job=0.6, machine=1.9, usable=1)
    assert s.others_cpus == pytest.approx(1.3)
    assert s.others_on_its_cpus == pytest.approx(0.3)
    led = with_cpu_wait(ledger(forward=10.0), runq=0.44)
    b = cpu_bottleneck(led, s)
    assert b is not None and "and its own threads compete for them" in b.reason
    assert b.reason.startswith("the job got 0.6 of its 1 CPU: other processes used 1.3")


def test_more_threads_than_its_cpus_is_named_beside_other_load() -> None:
    """Pinned to 1 CPU with 2 intra-op threads, on a machine others keep busy: its own threads
    are the cause it can fix, said with the others' share."""
    from test_cpu_starved import _finding, _job

    f = _finding(_job(0.8, 0.3, 95.0, threads=2, cpu_count=2, usable_cpus=1))
    assert f is not None
    assert "torch's 2 intra-op threads compete for them" in f.evidence[1], f.evidence
    assert "the rest of the machine 1.6" in f.evidence[1]
    assert "torch.set_num_threads(1)" in f.fix[0]
