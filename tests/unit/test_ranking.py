"""Findings are ranked by what their cause harms first: a model trained on wrong data (or part
of it not at all) before a debugging mode left on, before time alone, whatever the shares."""

from __future__ import annotations

from test_rule_thresholds import stream

from trainprof.analysis.findings import Finding, rank
from trainprof.analysis.pipeline import analyze
from trainprof.analysis.rules import all_rules


def test_wrong_results_rank_before_a_debug_mode_before_time() -> None:
    slow = Finding("input-bound", "warning", "waits for data", impact=0.6)
    duplicated = Finding("iterable-unsplit", "warning", "every sample twice", harm="results")
    debug = Finding("anomaly-detection", "warning", "anomaly mode on", impact=0.1, harm="debug")
    running_out = Finding("memory-growth", "error", "runs out within the hour")
    said = Finding("worker-startup", "info", "for information", harm="results")
    order = [f.id for f in rank([slow, running_out, said, debug, duplicated])]
    assert order == [
        "iterable-unsplit",
        "anomaly-detection",
        "memory-growth",
        "input-bound",
        "worker-startup",
    ]


def test_a_finding_carries_its_rules_harm() -> None:
    """The pipeline sets it from the rule's declaration: a duplicated stream of a 4-worker
    loader is about results."""
    found = {f.id: f for f in analyze(stream(4))[1].findings}
    assert found["iterable-unsplit"].harm == "results"
    harms = {r.id: r.harm for r in all_rules()}
    assert harms["sampler-set-epoch"] == "results" and harms["input-bound"] == "time"
