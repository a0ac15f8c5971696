"""accumulation-allreduce on synthetic DDP jobs: every micro-batch's backward all-reduces (the
probe's count of backward passes outside no_sync()), its measured wait on gloo, and not
measured under NCCL (never read as 0)."""

from __future__ import annotations

import json

from synth import process, session

from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session


def _ddp_job(syncs_per_step: int, backend: str = "gloo", fetches: int = 4) -> Session:
    """Two ranks, 100 steps of 0.1 s of ``fetches`` batches each; every backward waits 5 ms at its
    end for the all-reduce (20 ms a step with 4 of them)."""
    ranks = []
    for r in range(2):
        log = process(100, step_s=0.1, fetches=fetches, pid=1000 + r)
        log.header.update(role="rank", rank=r)
        t_us = 2_000_000
        for i in range(1, 100):
            t_us += 100_000
            if i % 5 == 0 or i in (1, 99):
                wait = 0.005 * syncs_per_step * i
                c = {"s": 0.0, "n": 0, "ddp_s": wait, "ddp_n": fetches * i, "backend": backend}
                c["sync_n"] = syncs_per_step * i
                log.add_line("X " + json.dumps({"t": t_us, "collectives": c}))
        ranks.append(log)
    return session(*ranks)


def test_every_micro_batch_all_reducing_is_a_warning_with_the_measured_wait() -> None:
    (f,) = [f for f in analyze(_ddp_job(4))[1].findings if f.id == "accumulation-allreduce"]
    assert f.severity == "warning"
    assert f.title.startswith("Gradients are all-reduced after every micro-batch (4 times")
    assert "4 backward passes; DDP all-reduced the gradients in 4 of them" in f.evidence[0]
    assert "rank 0 waited 20.0 ms per step" in f.evidence[1]
    assert "15.0 ms of it (15% of the step) for the 3 not needed" in f.evidence[1]
    assert f.impact is not None and abs(f.impact - 0.15) < 0.01
    assert "model.no_sync()" in f.fix[0]


def test_under_nccl_the_cost_is_not_measured_and_the_finding_is_information() -> None:
    (f,) = [
        f
        for f in analyze(_ddp_job(4, backend="nccl"))[1].findings
        if f.id == "accumulation-allreduce"
    ]
    assert f.severity == "info" and f.impact is None
    assert (
        "was not measured" in f.evidence[1] and "4 times per step instead of once" in f.evidence[1]
    )


def test_one_all_reduce_a_step_or_one_batch_a_step_is_left_alone() -> None:
    assert not [f for f in analyze(_ddp_job(1))[1].findings if f.id == "accumulation-allreduce"]
    one = analyze(_ddp_job(1, fetches=1))[1].findings
    assert not [f for f in one if f.id == "accumulation-allreduce"]
