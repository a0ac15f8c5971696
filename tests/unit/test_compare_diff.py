"""`trainprof compare`'s verdict on two reports: faster, slower or within noise from the
windows' spread; the it/s note across batch sizes; findings and settings that changed."""

from __future__ import annotations

from test_ci_gates import finding, report

from trainprof.compare.diff import Side, compare
from trainprof.compare.windows import Window


def side(rates: list[float], **settings: object) -> Side:
    r = report()
    r["settings"].update(settings)
    per_step = float(r["settings"]["samples_per_step"])
    ws = tuple(Window(20, 0.5, x, x / per_step, 0.02) for x in rates)
    return Side("run", r, ws)


def test_overlapping_windows_are_within_noise() -> None:
    c = compare(side([1000, 1100, 1050]), side([1080, 1200, 1150]))
    assert c.trend == "within noise" and c.change is not None and c.change > 0


def test_separate_windows_are_faster_or_slower() -> None:
    assert compare(side([1000, 1100, 1050]), side([1300, 1250, 1400])).trend == "faster"
    c = compare(side([1000, 1100, 1050]), side([600, 650, 640]))
    assert c.trend == "slower" and "A's slowest window beats B's fastest" in c.why


def test_without_windows_the_spread_is_said_to_be_unmeasured() -> None:
    a, b = Side("a", report(samples_per_s=1000.0), ()), Side("b", report(samples_per_s=1030.0), ())
    c = compare(a, b)
    assert c.trend == "within noise" and "spread not measured" in c.why


def test_a_bigger_batch_lowers_it_per_s_but_samples_per_s_decides() -> None:
    small = side([400, 420, 410], batch_size=4, samples_per_step=4.0)
    big = side([900, 950, 930], batch_size=16, samples_per_step=16.0)
    c = compare(small, big)
    assert c.trend == "faster"  # samples/s up, although it/s fell
    assert big.steps is not None and small.steps is not None
    assert big.steps.median < small.steps.median
    assert c.batch_note is not None and "it/s went -43%" in c.batch_note
    assert "not comparable across batch sizes; samples/s is" in c.batch_note
    assert ("batch_size", 4, 16) in c.settings


def test_more_batches_per_step_is_accumulation_not_a_batch_size() -> None:
    one = side([300, 310, 305], batch_size=16, samples_per_step=16.0, batches_per_step=1)
    four = side([310, 320, 315], batch_size=16, samples_per_step=64.0, batches_per_step=4)
    c = compare(one, four)
    assert c.batch_note is not None
    assert "not comparable across gradient accumulation steps" in c.batch_note
    assert ("batches_per_step", 1, 4) in c.settings


def test_findings_that_appeared_and_disappeared() -> None:
    a, b = side([1000, 1010, 1020]), side([1000, 1010, 1020])
    a.report["findings"] = [finding("input-bound", "warning")]
    b.report["findings"] = [finding("cpu-stall", "warning")]
    c = compare(a, b)
    assert c.appeared == ("cpu-stall",) and c.disappeared == ("input-bound",)
    assert c.settings == ()


def test_the_console_shows_both_runs_and_what_was_not_measured() -> None:
    from rich.console import Console

    from trainprof.compare.render import render_comparison

    crashed = report(samples_per_s=None, steps_per_s=None, step_time_s=None)
    del crashed["settings"]
    console = Console(record=True, width=120, color_system=None)
    render_comparison(console, compare(side([1000, 1010, 1020]), Side("old.json", crashed, ())))
    text = console.export_text()
    assert "verdict: not measured (B has no samples/s" in text
    assert "settings: B's report records none" in text
    assert "1010.0 (median of 3 windows, 1000.0–1020.0, ±1%)" in text
    assert "step time" in text and "not measured" in text


def test_the_json_holds_what_the_console_shows_and_null_for_what_was_not_measured() -> None:
    import json

    crashed = report(samples_per_s=None, steps_per_s=None, step_time_s=None)
    data = compare(side([1000, 1010, 1020], batch_size=8), Side("new.json", crashed, ())).to_json()
    json.dumps(data)  # plain JSON types only
    assert data["a"]["samples_per_s"] == {
        "median": 1010,
        "low": 1000,
        "high": 1020,
        "windows": 3,
    }
    assert data["b"]["samples_per_s"] is None and data["b"]["path"] == "new.json"
    assert data["verdict"]["trend"] == "not measured"
    assert data["verdict"]["samples_per_s_change"] is None
