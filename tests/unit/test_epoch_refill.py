"""Persistent workers do not restart, yet each epoch's first batches are made afresh while the
loop waits: that wait is input-bound's (blind set D's keyword spotter, 32 % of its run in epoch
starts, was owned by no finding: worker-startup leaves persistent workers alone)."""

from __future__ import annotations

import json

from synth import DEFAULT_LOADER, session

from trainprof.analysis.pipeline import analyze
from trainprof.store.events import ProcessLog


def _epochs(persistent: bool, first_wait_s: float = 0.2) -> ProcessLog:
    """8 epochs of 25 steps of 20 ms; each epoch's first step waits ``first_wait_s`` for data."""
    log = ProcessLog({"pid": 1000, "role": "main", "t0": 100.0, "version": 1})
    t = 0
    for i in range(200):
        first = i % 25 == 0 and i > 0
        wait = int(first_wait_s * 1e6) if first else 500
        dur = int(2e6) if i == 0 else 20_000 + wait
        if first:
            log.add_line(f"E 0 {t + 1000} {wait}")
        t += dur
        log.add_line(f"S {t} {dur} {wait} 0 32 1 32")
    loader = dict(DEFAULT_LOADER, persistent_workers=persistent)
    log.add_line("L 0 " + json.dumps(loader))
    return log


def test_an_epochs_first_batches_from_persistent_workers_are_input_bound() -> None:
    m, verdict = analyze(session(_epochs(persistent=True)))
    found = {f.id: f for f in verdict.findings}
    assert "worker-startup" not in found
    f = found["input-bound"]
    assert m.ledger is not None and m.ledger.share("worker_start") > 0.2
    assert f.impact is not None and f.impact >= m.ledger.share("worker_start")
    assert any("persistent workers do not restart" in e for e in f.evidence), f.evidence


def test_workers_that_restart_leave_those_waits_to_worker_startup() -> None:
    _m, verdict = analyze(session(_epochs(persistent=False)))
    found = {f.id: f for f in verdict.findings}
    assert "worker-startup" in found
    assert "input-bound" not in found  # the steady batches wait 0.5 ms of 20
