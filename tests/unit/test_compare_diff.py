"""`trainprof compare`'s verdict on two reports: faster, slower or within noise from the
windows' spread; the it/s note across batch sizes; findings and settings that changed."""

from __future__ import annotations

import dataclasses
import statistics

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
    assert "verdict: not measured: B has no samples/s (no steady state" in text
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


def loop_side(rates: list[float], unit: str = "backward pass") -> Side:
    """A hand-written loop: no DataLoader, so no batch size and no samples/s."""
    r = report(samples_per_s=None, steps_per_s=statistics.median(rates), unit=unit)
    r["settings"].update(batch_size=None, samples_per_step=None)
    return Side("loop", r, tuple(Window(20, 0.07, None, x, 0.003) for x in rates))


def test_loops_without_samples_per_s_compare_by_it_per_s() -> None:
    """It said "not measured (A has no samples/s)" for every such pair."""
    c = compare(loop_side([300, 310, 305]), loop_side([240, 250, 245]))
    assert c.trend == "slower" and c.measure == "it/s", c.why
    assert c.change is not None and round(c.change, 3) == round(245 / 305 - 1, 3)
    data = c.to_json()["verdict"]
    assert data["measure"] == "it/s" and data["change"] == c.change
    assert data["samples_per_s_change"] is None  # it/s is not samples/s
    assert compare(loop_side([300, 310, 305]), loop_side([305, 300, 312])).trend == "within noise"


def test_it_per_s_of_different_kinds_of_step_are_not_compared() -> None:
    c = compare(loop_side([300, 310, 305]), loop_side([900, 910, 905], unit="batch"))
    assert c.trend == "not measured" and c.measure is None and c.change is None
    assert "A counts backward passes, B batches" in c.why


def test_the_console_names_the_measure_the_verdict_used() -> None:
    from rich.console import Console

    from trainprof.compare.render import render_comparison

    console = Console(record=True, width=120, color_system=None)
    render_comparison(console, compare(loop_side([300, 310, 305]), loop_side([400, 410, 405])))
    assert "verdict: B is faster: it/s +32.8% (B's slowest window beats A's fastest)" in (
        console.export_text()
    )


def test_an_attach_run_is_named_as_what_has_no_rate() -> None:
    """An attach report has no measured steps: it said "A has no samples/s (no steady state, or
    no batches)", which sent the user looking for a problem in the job."""
    attached = report(samples_per_s=None, steps_per_s=None)
    attached["run"]["attach"] = {"pid": 42}
    c = compare(Side("attach", attached, ()), side([1000, 1100, 1050]))
    assert c.trend == "not measured" and c.why.startswith("A is an attach run"), c.why


def test_an_epochs_short_last_batch_is_no_change_of_batch_size() -> None:
    """Two runs of batch 64: the mean samples per step (63.83, 63.73) differs by the short last
    batch of each epoch; it/s stays comparable and no setting is said to differ."""
    a = side([1000, 1010, 1005], batch_size=64, samples_per_step=63.83)
    b = side([1020, 1030, 1025], batch_size=64, samples_per_step=63.73)
    c = compare(a, b)
    assert c.batch_note is None
    assert c.settings == ()


def test_a_change_of_usable_cpus_is_a_setting_that_differs() -> None:
    c = compare(side([1000, 1010, 1005]), side([600, 610, 605], usable_cpus=1))
    assert ("usable_cpus", 2, 1) in c.settings


def loaded(rates: list[float], waited: float, others: float) -> Side:
    """A side whose windows measured the main thread's wait for a CPU and others' CPUs."""
    s = side(rates)
    ws = tuple(
        dataclasses.replace(w, other_cpus=others, cpu_wait_s=waited * w.seconds) for w in s.windows
    )
    return Side("run", s.report, ws)


def test_runs_under_very_different_load_say_so_with_the_waits_taken_out() -> None:
    """B ran beside two busy loops: its main thread waited 80 % of the time; with those waits
    taken out of each window, the two runs' samples/s are about the same."""
    quiet = loaded([1000, 1010, 1005], waited=0.02, others=0.1)
    busy = loaded([200, 205, 198], waited=0.8, others=1.9)
    c = compare(quiet, busy)
    assert c.trend == "slower"
    assert c.load_note is not None
    assert "very different load" in c.load_note
    assert "A's main thread waited for a CPU 2%, other processes 0.1 CPUs" in c.load_note
    assert "B's waited for a CPU 80%, other processes 1.9 CPUs" in c.load_note
    assert "without those waits samples/s is" in c.load_note
    assert c.to_json()["load_note"] == c.load_note
    assert c.to_json()["b"]["load"] == {"waited": 0.8, "others_cpus": 1.9, "usable_cpus": 2}
    assert compare(quiet, loaded([990, 1000, 995], waited=0.03, others=0.2)).load_note is None


def test_the_reports_own_load_is_read_first() -> None:
    a = Side("a", report(cpu_load={"waited": 0.88, "others_cpus": 1.9}), ())
    b = Side("b", report(cpu_load={"waited": 0.01, "others_cpus": 0.0}), ())
    c = compare(a, b)
    assert c.load_note is not None and "the machine's load as much as the code's" in c.load_note
