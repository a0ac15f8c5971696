"""DataLoader workers busy making batches at a few % of a CPU wait on something else (a
store's round trip, a lock, a sleep): input-bound says so and advises overlapping the waits
(more workers than CPUs, threads inside them), where workers that compute, or that wait for a
CPU, keep the usual advice."""

from __future__ import annotations

from typing import Any

import pytest
from synth import process, session

from trainprof.analysis.pipeline import analyze
from trainprof.analysis.worker_load import worker_load
from trainprof.store.events import ProcessLog
from trainprof.store.session import Session

WORKERS = (2000, 2001)


EVAL_WORKERS = (3000, 3001)


def _rows(
    worker_cpu: float, worker_runq: float, idle_eval_workers: bool = False
) -> list[dict[str, Any]]:
    """Host samples every 0.5 s from launch to past the last step: each worker at
    ``worker_cpu`` % of a CPU, its main thread waiting runnable ``worker_runq`` of the time (and
    an evaluation loader's two persistent workers, idle, at 0 %)."""
    rows = []
    for i in range(30):
        t = 99.0 + 0.5 * i
        procs = [{"pid": 1000, "cpu": 20.0, "rss": 1e8, "rq_wait": 0.0}]
        procs += [
            {"pid": pid, "cpu": worker_cpu, "rss": 1e8, "rq_wait": worker_runq * (t - 99.0)}
            for pid in WORKERS
        ]
        if idle_eval_workers:
            procs += [{"pid": pid, "cpu": 0.0, "rss": 1e8, "rq_wait": 0.0} for pid in EVAL_WORKERS]
        rows.append({"t": t, "procs": procs})
    return rows


def _worker(pid: int, batches: int, batch_s: float) -> ProcessLog:
    """A worker alive from launch that made ``batches`` batches of ``batch_s`` by 12 s."""
    w = process(0, loader=None, role="worker", pid=pid, t0=99.5)
    w.add_line(f"F 12000000 {batches} {int(batches * batch_s * 1e6)} 0 0")
    return w


def _job(
    worker_cpu: float,
    worker_runq: float = 0.01,
    batch_s: float = 0.19,
    idle_eval_workers: bool = False,
    usable_cpus: int = 2,
) -> Session:
    """100 steps of 0.1 s, half of each waiting for data, from 2 workers that take ``batch_s``
    to make a batch (0.19 s: at most 10.5 batches/s for a loop taking 10/s, at capacity)."""
    n = max(1, round(11.0 / batch_s))  # busy nearly all of their 12 s, whatever a batch takes
    workers = [_worker(pid, n, batch_s) for pid in WORKERS]
    if idle_eval_workers:
        workers += [_worker(pid, 2, batch_s) for pid in EVAL_WORKERS]
    return session(
        process(100, step_s=0.1, wait_s=0.05),
        *workers,
        sample_rows=_rows(worker_cpu, worker_runq, idle_eval_workers),
        usable_cpus=usable_cpus,
    )


def test_the_workers_load_is_their_mean_cpu_and_run_queue_share_in_the_window() -> None:
    sess = _job(worker_cpu=3.0, worker_runq=0.1)
    load = worker_load(sess.samples, WORKERS, (102.0, 111.0))
    assert load is not None and load.workers == 2
    assert load.cpu == pytest.approx(0.03)
    assert load.runq == pytest.approx(0.1)
    assert worker_load(sess.samples, (1000,), (200.0, 210.0)) is not None  # falls back: all run
    assert worker_load(sess.samples, (4242,), None) is None  # not sampled


def test_workers_busy_at_a_few_percent_of_a_cpu_wait_and_more_of_them_help() -> None:
    first = analyze(_job(worker_cpu=3.0))[1].findings[0]
    assert first.id == "input-bound"
    text = " ".join(first.evidence)
    assert "using 3% of a CPU each, and waited 1% of the time for one" in text, text
    assert "__getitem__ waits (storage, the network, a lock or a sleep)" in text
    # the step's own work is 50 ms: 1.25 x 0.19 s / 0.05 s = 4.75, so 5 workers keep pace
    assert first.fix[0].startswith("num_workers=5, beyond the 2 CPUs"), first.fix
    assert "5 can feed the loop's 50.0 ms of work a step" in first.fix[0]
    assert "__getitems__(self, indices)" in first.fix[1]
    assert not any("make __getitem__ cheaper" in f for f in first.fix)


def test_past_sixteen_workers_threads_inside_them_come_first() -> None:
    """A batch of 2 s (a slow store) for a loop doing 50 ms of work: ~50 workers would keep
    pace; 16 processes are suggested, after threads."""
    first = analyze(_job(worker_cpu=1.0, batch_s=2.0))[1].findings[0]
    assert first.fix[0].startswith("overlap a batch's reads inside each worker"), first.fix
    assert first.fix[1].startswith("num_workers=16, "), first.fix
    assert "about 50 would keep pace" in first.fix[1], first.fix


@pytest.mark.parametrize(
    "cpu, runq",
    [
        (95.0, 0.01),  # they compute: a cheaper __getitem__ (or more CPUs) is the fix
        (30.0, 0.6),  # too few CPUs: they wait for one, runnable
    ],
)
def test_workers_that_compute_or_wait_for_a_cpu_keep_the_usual_advice(
    cpu: float, runq: float
) -> None:
    first = analyze(_job(worker_cpu=cpu, worker_runq=runq))[1].findings[0]
    assert first.id == "input-bound"
    assert not any("rather than computes" in e for e in first.evidence), first.evidence
    assert any("make __getitem__ cheaper" in f for f in first.fix), first.fix


def test_an_evaluation_loaders_idle_workers_do_not_make_busy_workers_look_waiting() -> None:
    """Training workers at 95 % of a CPU beside an evaluation loader's persistent workers,
    idle at 0 % between evaluations: the mean of all four would be 48 %, "waiting"; the idle
    ones made batches a few % of their life and are left out."""
    first = analyze(_job(worker_cpu=95.0, idle_eval_workers=True))[1].findings[0]
    assert first.id == "input-bound"
    assert not any("rather than computes" in e for e in first.evidence), first.evidence


def test_workers_with_capacity_to_spare_are_not_judged_waiting() -> None:
    """Workers at 3 % of a CPU that could deliver 4x what the loop takes are idle, not slow."""
    first = analyze(_job(worker_cpu=3.0, batch_s=0.05))[1].findings[0]
    assert not any("rather than computes" in e for e in first.evidence), first.evidence


def test_the_usual_workers_fix_leaves_out_what_the_loader_already_has() -> None:
    """The loader has persistent_workers=True: the fix does not ask for it again."""
    first = analyze(_job(worker_cpu=95.0, usable_cpus=8))[1].findings[0]
    more = next(f for f in first.fix if f.startswith("more workers if"))
    assert "persistent_workers=True" not in more and "prefetch_factor=4" in more, more


def test_workers_that_fill_the_cpus_are_not_told_to_add_more() -> None:
    """2 workers computing at 95 % of a CPU each, on 2 usable CPUs: more would take turns."""
    first = analyze(_job(worker_cpu=95.0))[1].findings[0]
    assert first.id == "input-bound"
    assert not any(f.startswith("more workers") for f in first.fix), first.fix
    assert any(f.startswith("not more workers: 2 workers already fill") for f in first.fix)
