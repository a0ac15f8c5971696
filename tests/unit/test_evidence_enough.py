"""Whether a run is judged comes from its evidence, not a wall-clock floor: 492 timed steps in
under a second are judged; and time the ledger shows that no rule could judge is said, never
left beside "no problem found"."""

from __future__ import annotations

from conftest import assert_rules_ran
from synth import loop_spans, process, session

from trainprof.analysis.pipeline import analyze
from trainprof.render.quiet_note import quiet_note


def test_five_hundred_steps_in_under_a_second_are_judged() -> None:
    """A 3.6 s job of 512 steps showed printing 37 % in its panel, and its findings said the
    steady state was too short to judge (492 steps in 966 ms)."""
    s = session(process(512, step_s=0.002), output={"stdout_lines": 512, "stdout_bytes": 20000})
    steady = (100.0 + 2.0 + 26 * 0.002, 100.0 + 2.0 + 511 * 0.002)
    loop_spans(s, {"print(f'step {step} loss {loss}')": 0.37, "model(x)": 0.63}, *steady, 0.01)
    m, verdict = analyze(s)
    assert m.steady is not None and m.steady.duration_s < 1.0 and m.steady.count >= 400
    assert [f.id for f in verdict.findings][:1] == ["logging-overhead"]
    assert_rules_ran(verdict)


def test_a_few_milliseconds_of_steps_are_still_too_few() -> None:
    """57 steps in 0.14 s, 80 % of them waiting: too little to judge, for the input rules and
    for the unowned time alike."""
    _m, verdict = analyze(session(process(60, step_s=0.0025, wait_s=0.002, loader=None)))
    assert verdict.findings == ()
    assert any("too short to judge" in s.reason for s in verdict.skipped)


def test_time_no_rule_could_judge_is_said() -> None:
    """A third of every step waited for data, but the probe saw no torch DataLoader, so the
    input rules were skipped: the report says so instead of "no problem found"."""
    m, verdict = analyze(session(process(200, step_s=0.1, wait_s=0.033, loader=None)))
    (f,) = [f for f in verdict.findings if f.severity != "info"]
    assert f.id == "unowned-time" and f.impact is not None and abs(f.impact - 0.33) < 0.02
    assert "input-bound was not judged: no torch DataLoader was iterated" in f.evidence[0]
    assert f.evidence[-1] == "measured from 190 timed steps"
    assert f.claimed == (("data_wait", f.claimed[0][1]),)


def test_time_under_a_rules_threshold_is_no_finding_but_no_all_clear() -> None:
    """15 % of every step waits for data: under input-bound's threshold, so no finding; but the
    panel shows it, so the report names it instead of "no problems found"."""
    m, verdict = analyze(session(process(200, step_s=0.1, wait_s=0.015)))
    assert verdict.findings == ()
    note, all_clear = quiet_note({"exit_code": 0}, m, verdict.findings)
    assert not all_clear and "No problems found" not in note
    assert note.startswith("No finding passed its rule's threshold, but")
    assert '"DataLoader: waiting on workers, or its own code" takes 15%' in note


def test_time_under_ten_percent_is_an_all_clear() -> None:
    m, verdict = analyze(session(process(200, step_s=0.1, wait_s=0.005)))
    assert verdict.findings == ()
    assert quiet_note({"exit_code": 0}, m, verdict.findings) == ("No problems found. ✓", True)
