"""No fix adds DataLoader workers whose measured cost exceeds what they save: receiving a batch
from a worker (rebuilding its tensors, or unpickling a batch that is not tensors) against a
worker's time to make it; and without workers, batches the loop makes quickly are told a
larger batch before workers, whose hand-over that run did not measure."""

from __future__ import annotations

import json

import pytest
from synth import DEFAULT_LOADER, process, session
from test_worker_transfer import LOOP, NEXT, RECEIVE, TRAIN, WAIT

from trainprof.analysis.attribution import data_part
from trainprof.analysis.findings import Finding
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session
from trainprof.store.stacks import StackSpan

CONNECTION = "/usr/lib/python3.11/multiprocessing/connection.py"
# the main thread reading a pickled batch (a numpy array) from the workers' queue
UNPICKLE = (
    *LOOP,
    *NEXT,
    ("_ConnectionBase.recv_bytes", CONNECTION, 216),
    ("Connection._recv_bytes", CONNECTION, 437),
    ("Connection._recv", CONNECTION, 395),
)
FORWARD = (
    ("<module>", TRAIN, 1),
    ("main", TRAIN, 11),
    ("Module._call_impl", "/venv/site-packages/torch/nn/modules/module.py", 1),
)


def _job(receive_share: float, worker_batch_s: float, receive: tuple = UNPICKLE) -> Session:
    """100 steps of 0.1 s, half of each waiting for data, ``receive_share`` of that wait
    receiving the batch; 2 workers that make a batch in ``worker_batch_s``."""
    workers = [process(0, loader=None, role="worker", pid=2000 + i) for i in range(2)]
    for w in workers:
        w.add_line(f"F 1 100 {int(100 * worker_batch_s * 1e6)} 0 0")
    sess = session(process(100, step_s=0.1, wait_s=0.05), *workers)
    sess.source[(TRAIN, 10)] = "    for x, y in loader:"
    sess.source[(TRAIN, 11)] = "        loss = model(x)"
    spans, t = [], 102.0
    while t < 112.0:
        got = 0.05 * receive_share
        spans += [
            StackSpan(t, t + got, receive),
            StackSpan(t + got, t + 0.05, WAIT),
            StackSpan(t + 0.05, t + 0.1, FORWARD),
        ]
        t += 0.1
    sess.spans = spans
    return sess


def _no_workers(batch_ms: float) -> Session:
    """num_workers=0: half of each 100 ms step waits for data, the main process making each
    batch in ``batch_ms``."""
    loader = {**DEFAULT_LOADER, "num_workers": 0, "persistent_workers": False}
    log = process(100, step_s=0.1, wait_s=0.05, loader=None)
    log.add_line(f"L 0 {json.dumps(loader)}")
    log.add_line(f"F 9000000 100 {int(100 * batch_ms * 1e3)} 0 0")
    return session(log)


def _input_bound(sess: Session) -> Finding:
    first = analyze(sess)[1].findings[0]
    assert first.id == "input-bound", first
    return first


def _adds_workers(f: Finding) -> bool:
    return any(
        x.startswith(("more workers", "DataLoader(..., num_workers=")) or "num_workers=1," in x
        for x in f.fix
    )


def test_reading_a_pickled_batch_is_receiving_it_and_polling_is_waiting() -> None:
    assert data_part(UNPICKLE) == "transfer"
    assert data_part(RECEIVE) == "transfer"
    assert data_part(WAIT) == "data_wait"


def test_workers_that_cost_more_than_they_save_are_told_none() -> None:
    """Receiving a pickled batch takes 40 ms; a worker makes one in 1 ms."""
    first = _input_bound(_job(receive_share=0.8, worker_batch_s=0.001))
    text = " ".join(first.evidence)
    assert "pickles it into a pipe" in text and "cost the loop more than they take off" in text
    assert first.fix[0].startswith("num_workers=0: a worker makes a batch in 1.0 ms"), first.fix
    assert any(f.startswith("return tensors from the dataset and collate_fn") for f in first.fix)
    assert not _adds_workers(first), first.fix
    assert not any("set_sharing_strategy" in f for f in first.fix)  # nothing crosses by fd


def test_a_small_hand_over_that_still_costs_more_is_judged_too() -> None:
    """Receiving is under half the wait (15 ms of 50), but a worker makes a batch in 10 ms: the
    workers are still not worth their hand-over, where the wait alone read as slow workers."""
    first = _input_bound(_job(receive_share=0.3, worker_batch_s=0.010, receive=RECEIVE))
    assert first.fix[0].startswith("num_workers=0"), first.fix
    assert any("fewer, larger tensors per batch" in f for f in first.fix)
    assert not _adds_workers(first), first.fix


def test_workers_that_save_more_than_they_cost_keep_the_workers_fix() -> None:
    """Receiving takes 15 ms, a worker makes a batch in 40 ms: workers pay."""
    first = _input_bound(_job(receive_share=0.3, worker_batch_s=0.040, receive=RECEIVE))
    assert not any(f.startswith("num_workers=0") for f in first.fix), first.fix
    assert _adds_workers(first) or any("compete for" in f for f in first.fix), first.fix


def test_without_workers_cheap_batches_are_told_a_larger_batch_first() -> None:
    """The loop makes a batch in 0.3 ms: that is all workers could take off it, and what
    receiving a batch from one costs was not measured."""
    first = _input_bound(_no_workers(batch_ms=0.3))
    assert first.fix[0].startswith("a larger batch_size: per batch, the loop makes it in 0.3 ms")
    assert any("try num_workers=1 and run trainprof again" in f for f in first.fix)
    assert not _adds_workers(first), first.fix


def test_without_workers_costly_batches_keep_the_workers_fix() -> None:
    first = _input_bound(_no_workers(batch_ms=5.0))
    assert first.fix[0].startswith("DataLoader(..., num_workers=3, persistent_workers=True)")


def _no_workers_batch_of(kind: dict[str, int]) -> Session:
    sess = _no_workers(batch_ms=5.0)
    sess.processes[0].infos.append({"t": 1, "batch_kind": kind})
    return sess


def test_without_workers_a_batch_of_numpy_arrays_is_told_tensors_before_workers() -> None:
    """A collate_fn that keeps numpy arrays: a worker would pickle them through a pipe."""
    kind = {"tensors": 0, "arrays": 2, "other": 0, "array_bytes": 3 * 2**20}
    first = _input_bound(_no_workers_batch_of(kind))
    assert any(
        e.startswith("a batch holds 2 numpy arrays of 3.0 MiB and no tensor: made in a worker")
        for e in first.evidence
    ), first.evidence
    assert first.fix[0].startswith("before adding workers, return tensors from the collate_fn")
    assert first.fix[1].startswith("DataLoader(..., num_workers=3, persistent_workers=True)")


@pytest.mark.parametrize(
    "kind",
    [
        {"tensors": 2, "arrays": 0, "other": 1, "array_bytes": 0},
        # small arrays cross from a worker faster than tensors do
        {"tensors": 0, "arrays": 2, "other": 0, "array_bytes": 2**20 - 1},
    ],
)
def test_without_workers_tensors_or_small_arrays_are_told_workers_alone(
    kind: dict[str, int],
) -> None:
    first = _input_bound(_no_workers_batch_of(kind))
    assert first.fix[0].startswith("DataLoader(..., num_workers=3, persistent_workers=True)")
    assert not any("a batch holds" in e for e in first.evidence)


def test_a_tensor_dataset_gathered_sample_by_sample_is_told_to_index_by_batch_first() -> None:
    loader = {
        **DEFAULT_LOADER,
        "num_workers": 0,
        "persistent_workers": False,
        "dataset": "torch.utils.data.dataset.TensorDataset",
    }
    log = process(100, step_s=0.1, wait_s=0.05, loader=None)
    log.add_line(f"L 0 {json.dumps(loader)}")
    log.add_line(f"F 9000000 100 {int(100 * 0.4 * 1e3)} 0 0")  # 0.4 ms a batch
    first = _input_bound(session(log))
    assert first.fix[0].startswith("the dataset is tensors in memory (TensorDataset)")
    assert "sampler=BatchSampler(RandomSampler(dataset), batch_size" in first.fix[0]
