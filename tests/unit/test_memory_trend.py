"""The memory trend is fitted on the reads a quick job's steady window holds, and no fewer."""

from __future__ import annotations

from trainprof.analysis.memory import MIN_POINTS, growth
from trainprof.analysis.rules.memory_growth import steadily_growing
from trainprof.store.session import ProcSeries

MB = 2**20
NAN = float("nan")


def series(mib: list[float], every_s: float = 0.5) -> ProcSeries:
    s = ProcSeries(1000, "python")
    for i, v in enumerate(mib):
        s.t.append(100.0 + i * every_s)
        s.rss.append(v * MB)
        s.uss.append(NAN)
        s.pss.append(NAN)
    return s


# The blind set's feature cache on an idle 2-core machine: its whole steady window was 3.1 s, and
# the host sampler's ticks fell inside it five or six times (these are the first five RSS reads).
QUICK_LEAK = [357.0, 440.0, 490.0, 546.0, 597.0]


def test_a_leak_over_a_quick_jobs_window_is_fitted_on_five_reads() -> None:
    g = growth(series(QUICK_LEAK), "main", 100.0, 102.0)
    assert g is not None
    assert g.sustained and g.r2 > 0.95
    assert steadily_growing([g]) == [g]


def test_fewer_reads_than_the_minimum_fit_nothing() -> None:
    assert MIN_POINTS == 5
    assert growth(series(QUICK_LEAK[:4]), "main", 100.0, 101.5) is None
    # only the reads inside the window count
    assert growth(series(QUICK_LEAK), "main", 100.25, 102.0) is None


def test_one_swing_of_the_allocator_over_five_reads_is_not_growth() -> None:
    # up by 60 MiB and back down: the second half does not rise
    g = growth(series([400.0, 430.0, 460.0, 430.0, 400.0]), "main", 100.0, 102.0)
    assert g is not None and not g.sustained
    assert steadily_growing([g]) == []
    # a rise that stops: most of the 60 MiB in the first half, the line still fits well
    g = growth(series([400.0, 440.0, 458.0, 459.0, 460.0]), "main", 100.0, 102.0)
    assert g is not None and not g.sustained
    assert steadily_growing([g]) == []
