"""Stalls and saves that grow along the run say so: what they run over, or save, is never
trimmed (blind set D: k-means over a feature bank that is never cut, 68 → 551 ms a stall; a
checkpoint carrying a per-step metrics history, 2.4 → 3.2 MiB a save)."""

from __future__ import annotations

from synth import session

from trainprof.analysis.pipeline import analyze
from trainprof.analysis.rules.checkpoint_stall import _growing
from trainprof.analysis.stats import rising
from trainprof.store.events import ProcessLog


def test_a_rise_is_told_through_an_outlier_and_not_from_noise() -> None:
    saves_ms = [8, 10, 14, 19, 22, 25, 29, 33, 38, 151, 54, 59, 63, 66, 73, 75, 86, 87, 209]
    first_last = rising(saves_ms)
    assert first_last is not None and first_last[1] > 4 * first_last[0]
    assert rising([5.0] * 8) is None  # flat
    assert rising([1, 9, 2, 8, 3, 7]) is None  # no order
    assert rising([10, 11, 10, 11, 12, 11, 12]) is None  # a rise too small to tell
    assert rising([1, 2, 3]) is None  # too few


def _growing_stalls(grow: bool) -> ProcessLog:
    """300 steps of 20 ms; every 30th stalls on CPU work, 0.1 s at first, rising to ~0.9 s."""
    log = ProcessLog({"pid": 1000, "role": "main", "t0": 100.0, "version": 1})
    t, k = 0, 0
    for i in range(300):
        dur = int((2.0 if i == 0 else 0.02) * 1e6)
        if i > 20 and i % 30 == 0:
            k += 1
            dur += int((0.1 * k if grow else 0.4) * 1e6)
        t += dur
        log.add_line(f"S {t} {dur} 0 0 32 1 32")
    return log


def test_stalls_that_grow_say_what_they_run_over_grows() -> None:
    found = {f.id: f for f in analyze(session(_growing_stalls(True)))[1].findings}
    said = [e for e in found["cpu-stall"].evidence if e.startswith("each stall is longer")]
    assert said and "never trimmed" in said[0], found["cpu-stall"].evidence
    steady = {f.id: f for f in analyze(session(_growing_stalls(False)))[1].findings}
    assert not any(e.startswith("each stall") for e in steady["cpu-stall"].evidence)


def test_saves_that_grow_in_size_or_else_in_time_are_said() -> None:
    sizes = [int((2.2 + 0.06 * i) * 2**20) for i in range(19)]
    (line,) = _growing(sizes, [0.05] * 19)
    assert line.startswith("each save is larger than the last: 2.3 MiB at first, 3.1 MiB")
    (slower,) = _growing([2**20] * 6, [0.01, 0.02, 0.03, 0.05, 0.06, 0.08])
    assert slower.startswith("each save takes longer than the last")
    assert _growing([2**20] * 6, [0.05] * 6) == ()
