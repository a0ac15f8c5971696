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


def test_a_leak_filled_step_by_step_fits_its_steps_when_cpu_comes_unevenly() -> None:
    # 2 MiB a step; the job gets a CPU unevenly (20 steps a read, then 2 while starved, then 20)
    done = [0, 20, 40, 60, 62, 64, 66, 68, 70, 90, 110, 130]
    s = series([300.0 + 2 * n for n in done])
    reads = list(s.t)
    ends = [reads[0] + 0.001]  # the end time of each step, spread within its read's interval
    for i in range(1, len(done)):
        k = done[i] - done[i - 1]
        ends += [reads[i - 1] + 0.5 * (j + 1) / (k + 1) for j in range(k)]
    on_time = growth(s, "main", reads[0], reads[-1])
    on_steps = growth(s, "main", reads[0], reads[-1], ends)
    assert on_time is not None and on_steps is not None
    assert on_time.r2 < 0.95  # a short window's bar: missed against time
    assert on_steps.r2 > 0.99 and on_steps.sustained
    assert on_steps.bytes_per_s == on_time.bytes_per_s  # the rate stays per second
    assert steadily_growing([on_steps]) == [on_steps]


def test_a_swing_of_the_allocator_is_no_line_against_steps_either() -> None:
    mib = [400.0, 430.0, 460.0, 490.0, 460.0, 430.0, 400.0]
    s = series(mib)
    ends = [s.t[0] + 0.05 * i for i in range(1, 61)]  # 10 steps a read, evenly
    g = growth(s, "main", s.t[0], s.t[-1], ends)
    assert g is not None and not g.sustained
    assert steadily_growing([g]) == []


def test_reads_that_all_fall_between_the_same_two_steps_are_fitted_against_time() -> None:
    s = series(QUICK_LEAK)
    g = growth(s, "main", 100.0, 102.0, [99.0, 103.0])  # one step before, one after
    assert g is not None and g.r2 > 0.95 and g.sustained
