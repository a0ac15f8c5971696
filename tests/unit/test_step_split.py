"""The step's own time is split into forward/backward/optimizer/loop code by the stack samples
taken outside stalls, saves and evaluations, and only where there are enough of them. The
blocking-upload zoo case (10 steps of ~4 ms between 250 ms uploads, sampled at 50 Hz) had two
such samples, both in the upload's socket calls just past a stall's edge, and its report read
"step 13%: main thread idle (sleeping or waiting)" for the time its steps computed."""

from __future__ import annotations

from rich.console import Console
from synth import session

from trainprof.analysis.pipeline import analyze
from trainprof.render.console import ledger_table
from trainprof.store.events import ProcessLog
from trainprof.store.session import Session
from trainprof.store.stacks import StackSpan

TRAIN = "/home/user/proj/train.py"
UPLOAD = (("main", TRAIN, 98), ("SocketIO.readinto", "/usr/lib/python3.11/socket.py", 706))
FORWARD = (
    ("main", TRAIN, 91),
    ("Module._call_impl", "/venv/site-packages/torch/nn/modules/module.py", 1),
)
RATE = {"stacks": {"chunks": [{"file": "stacks-0.json", "started_at": 0.0, "rate_hz": 50}]}}


def job(step_ms: int, sampled: bool, **meta: object) -> Session:
    """100 steps of ``step_ms``, every 10th also held 250 ms by an upload. ``sampled``: each
    20 ms between the uploads has a forward sample (50 Hz); else only two upload samples fall
    outside the stalls, as in the zoo case."""
    log = ProcessLog({"pid": 1000, "role": "main", "t0": 100.0, "version": 1})
    step_us = step_ms * 1000
    t_us = 0
    uploads = []
    for i in range(100):
        dur = step_us + 250_000 if i % 10 == 9 else step_us
        start = 102.0 + t_us / 1e6
        if dur > step_us:
            uploads.append(StackSpan(start + step_us / 1e6, start + dur / 1e6, UPLOAD))
        t_us += dur
        log.add_line(f"S {2_000_000 + t_us} {dur} 0 0 32 1 32")
    spans = list(uploads)
    if sampled:
        for a, b in zip(uploads, uploads[1:], strict=False):
            n = int((b.t0 - a.t1) / 0.02)
            spans += [StackSpan(a.t1 + k * 0.02, a.t1 + (k + 1) * 0.02, FORWARD) for k in range(n)]
    else:
        spans += [StackSpan(u.t1 + 0.001, u.t1 + 0.021, UPLOAD) for u in uploads[2:4]]
    spans.sort(key=lambda s: s.t0)
    log.torch_imported_us = 1000
    s = session(log, **meta)
    s.spans = spans
    return s


def test_two_samples_do_not_split_the_step() -> None:
    m, verdict = analyze(job(4, sampled=False, **RATE))
    assert m.ledger is not None and m.ledger.step_split == "not split"
    assert m.ledger.share("idle") == 0 and m.ledger.share("step") > 0.1
    console = Console(record=True, width=200, color_system=None)
    console.print(ledger_table(m, verdict))
    text = console.export_text()
    assert "too few stack samples outside stalls" in text
    assert "main thread idle" not in text


def test_enough_samples_split_it() -> None:
    m, _verdict = analyze(job(20, sampled=True, **RATE))
    assert m.ledger is not None and m.ledger.step_split == "stack samples"
    assert m.ledger.share("forward") > 0.1 and m.ledger.share("step") == 0


def test_a_run_that_recorded_no_rate_splits_as_before() -> None:
    m, _verdict = analyze(job(4, sampled=False))
    assert m.ledger is not None and m.ledger.step_split == "stack samples"
