"""Receiving the workers' batches: the main thread's loader samples that rebuild a batch's
tensors (``rebuild_storage_fd``: a new connection to the worker per tensor) are the ledger's
``transfer`` bucket, and an input-bound job whose wait is mostly that is told so, with fixes
that do not add workers."""

from __future__ import annotations

import pytest
from synth import process, session

from trainprof.analysis import ledger
from trainprof.analysis.attribution import data_part
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session
from trainprof.store.stacks import StackSpan

TRAIN = "/home/user/proj/train.py"
TORCH = "/venv/site-packages/torch"
LOOP = (("<module>", TRAIN, 1), ("main", TRAIN, 10))
NEXT = (
    ("_BaseDataLoaderIter.__next__", f"{TORCH}/utils/data/dataloader.py", 733),
    ("_MultiProcessingDataLoaderIter._next_data", f"{TORCH}/utils/data/dataloader.py", 1480),
    ("_MultiProcessingDataLoaderIter._get_data", f"{TORCH}/utils/data/dataloader.py", 1430),
    ("Queue.get", "/usr/lib/python3.11/multiprocessing/queues.py", 122),
)
RECEIVE = (
    *LOOP,
    *NEXT,
    ("rebuild_storage_fd", f"{TORCH}/multiprocessing/reductions.py", 541),
    ("DupFd.detach", "/usr/lib/python3.11/multiprocessing/resource_sharer.py", 57),
    ("answer_challenge", "/usr/lib/python3.11/multiprocessing/connection.py", 980),
)
WAIT = (*LOOP, *NEXT, ("Connection._poll", "/usr/lib/python3.11/multiprocessing/connection.py", 1))
FORWARD = (
    ("<module>", TRAIN, 1),
    ("main", TRAIN, 11),
    ("Module._call_impl", f"{TORCH}/nn/modules/module.py", 1),
)


def test_a_rebuilt_tensor_is_a_transfer() -> None:
    assert data_part(RECEIVE) == "transfer"
    assert data_part(WAIT) == "data_wait"


def test_the_transfer_share_needs_samples_to_judge_by() -> None:
    assert ledger.transfer_frac({"transfer": 0.3, "data_wait": 0.1}, min_s=0.2) == pytest.approx(
        0.75
    )
    assert ledger.transfer_frac({"transfer": 0.03, "data_wait": 0.01}, min_s=0.2) == 0.0
    assert ledger.transfer_frac({}, min_s=0.0) == 0.0


def _job(receive_share: float, worker_batch_s: float | None = None) -> Session:
    """100 steps of 0.1 s, half of each waiting for data; ``receive_share`` of that wait is
    spent rebuilding the batch's tensors. Its 2 workers, measured, take ``worker_batch_s``
    to make a batch."""
    workers = []
    if worker_batch_s is not None:
        workers = [process(0, loader=None, role="worker", pid=2000 + i) for i in range(2)]
        for w in workers:
            w.add_line(f"F 1 100 {int(100 * worker_batch_s * 1e6)} 0 0")  # 100 batches
    sess = session(process(100, step_s=0.1, wait_s=0.05), *workers)
    sess.source[(TRAIN, 10)] = "    for x, y in loader:"
    sess.source[(TRAIN, 11)] = "        loss = model(x)"
    spans, t = [], 102.0
    while t < 112.0:
        receive = 0.05 * receive_share
        spans += [
            StackSpan(t, t + receive, RECEIVE),
            StackSpan(t + receive, t + 0.05, WAIT),
            StackSpan(t + 0.05, t + 0.1, FORWARD),
        ]
        t += 0.1
    sess.spans = spans
    return sess


def test_an_input_bound_job_that_waits_on_the_hand_over_is_told_so() -> None:
    metrics, verdict = analyze(_job(receive_share=0.8))
    assert metrics.ledger is not None
    buckets = metrics.ledger.seconds
    assert buckets["transfer"] > 3 * buckets["data_wait"] > 0
    first = verdict.findings[0]
    assert first.id == "input-bound"
    assert any("receiving each batch from the workers" in e for e in first.evidence)
    assert not any("more workers if" in f for f in first.fix)
    assert any("fewer, larger tensors per batch" in f for f in first.fix)
    assert any("set_sharing_strategy('file_system')" in f for f in first.fix)


def test_workers_at_capacity_are_the_limit_wherever_the_main_process_waits() -> None:
    """2 workers making a batch in 190 ms deliver at most 10.5 batches/s to a loop taking 10/s:
    the main process waits inside receiving (a busy worker answers its fd requests late), but
    more workers are the fix (a real job: a second worker doubled the rate; the sharing
    strategy changed nothing)."""
    first = analyze(_job(receive_share=0.8, worker_batch_s=0.19))[1].findings[0]
    assert first.id == "input-bound"
    text = " ".join(first.evidence)
    assert "2 workers deliver at most 10.5 batches/s; the loop asks for 10.0/s" in text, text
    assert "but the workers are the limit" in text and "receiving each batch" not in text
    assert first.fix[0].startswith("more workers if"), first.fix
    assert not any("set_sharing_strategy" in f for f in first.fix)
    # with room to spare (50 ms a batch: 40/s), the hand-over is the limit again
    spare = analyze(_job(receive_share=0.8, worker_batch_s=0.05))[1].findings[0]
    assert any("receiving each batch from the workers" in e for e in spare.evidence)


def test_waiting_on_slow_workers_keeps_the_workers_fix() -> None:
    report = analyze(_job(receive_share=0.1))[1]
    first = report.findings[0]
    assert first.id == "input-bound"
    assert not any("receiving each batch" in e for e in first.evidence)
    assert any("more workers if" in f for f in first.fix)


def test_the_trace_draws_the_receiving_share_in_each_wait() -> None:
    from test_trace import check_trace

    from trainprof.render import trace, trace_events

    sess = _job(receive_share=0.8)
    data = trace.build(sess, analyze(sess)[0])
    assert check_trace(data) == []
    steps = [
        e for e in data["traceEvents"] if e["ph"] == "X" and e["tid"] == trace_events.TID_STEPS
    ]
    step9 = next(e for e in steps if e["name"] == "step 9")
    inside = [e["name"] for e in steps if e["cat"] == "data" and e["ts"] >= step9["ts"]
              and e["ts"] < step9["ts"] + step9["dur"] and e["name"] != "data wait"]  # fmt: skip
    assert inside == ["receiving batches from workers (mean share)", "waiting on workers"]
