"""A job stopped by a signal (SIGSTOP, Ctrl-Z) and continued: its stop is said, and the steps
it spanned are no stalls of the job's code."""

from __future__ import annotations

from rich.console import Console
from synth import session
from test_rule_thresholds import periodic

from trainprof.analysis.pipeline import analyze
from trainprof.render import console as console_render
from trainprof.render.json_report import report_dict


def stopped_job(stopped: bool) -> tuple[object, ...]:
    """300 steps of 20 ms, every 30th 0.2 s longer: each long step, the job was stopped."""
    log = periodic(300, 0.02, 30, 0.2)
    spans = []
    for t_us, d_us in zip(log.steps["t"], log.steps["dur"], strict=True):
        if d_us > 60_000 and t_us > 2_000_000:
            start = log.t0 + (t_us - d_us) / 1e6 - 99.0  # seconds from the launch (t_launch 99)
            spans.append({"at_s": round(start + 0.01, 3), "for_s": 0.2})
    held = {"total_s": round(0.2 * len(spans), 2), "spans": spans}
    s = session(log, suspended=held) if stopped else session(log)
    return (s, *analyze(s))


def test_the_steps_a_stop_spans_are_no_stalls() -> None:
    _s, _m, verdict = stopped_job(False)
    assert "cpu-stall" in {f.id for f in verdict.findings}
    _s, _m, verdict = stopped_job(True)
    assert "cpu-stall" not in {f.id for f in verdict.findings}


def test_the_stop_is_said_in_the_report() -> None:
    s, m, verdict = stopped_job(True)
    data = report_dict(s.meta, m, verdict)
    assert data["run"]["suspended"]["total_s"] == 1.8
    out = Console(width=100, record=True, color_system=None)
    out.print(console_render.summary_table(s.meta, m))
    text = out.export_text()
    assert "stopped" in text and "stopped by a signal for 1.8 s (9 times)" in text
