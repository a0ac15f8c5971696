"""Evaluations that wait for their DataLoader's workers to start say so, with the fix (blind
set D's recommender built a 2-worker validation DataLoader inside evaluate(): 14 % of each
evaluation waited for its first batch, and the finding did not say why)."""

from __future__ import annotations

import json

from synth import DEFAULT_LOADER, process, session

from trainprof.analysis.pipeline import analyze


def _evaluations(first_wait_s: float):
    """100 steps of 0.5 s, 8 evaluations of 0.35 s inside them, each waiting ``first_wait_s`` for the first
    batch of a validation loader with 2 workers that do not persist."""
    log = process(100, step_s=0.5)
    val = dict(DEFAULT_LOADER, persistent_workers=False)
    log.add_line(f"L 1 {json.dumps(val)}")
    for i in range(10, 90, 10):
        start = int(log.steps["t"][i]) + 1
        log.add_line(f"M {start} 0")
        log.add_line(f"E 1 {start + 1000} {int(first_wait_s * 1e6)}")
        log.add_line(f"M {start + 350_000} 1")
    return session(log)


def test_evaluations_waiting_for_their_workers_to_start_say_so() -> None:
    found = {f.id: f for f in analyze(_evaluations(0.1))[1].findings}
    f = found["eval-stall"]
    said = [e for e in f.evidence if "waits for the validation loader's first batch" in e]
    assert said and "2 workers start" in said[0] and "persistent_workers=False" in said[0]
    assert f.fix[1].startswith("build the validation DataLoader once"), f.fix


def test_a_start_too_short_to_matter_is_not_said() -> None:
    f = {f.id: f for f in analyze(_evaluations(0.01))[1].findings}["eval-stall"]
    assert not any("validation loader's first batch" in e for e in f.evidence)
    assert not any(x.startswith("build the validation DataLoader") for x in f.fix)
