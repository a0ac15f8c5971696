"""The loop's iteration rate estimated from the rhythm of its stack samples, or why not: never
a number the samples did not give."""

from __future__ import annotations

from collections.abc import Sequence

from trainprof.analysis import attribution, periodicity
from trainprof.analysis.gap_stalls import PROGRESS, category_key, find_stalls
from trainprof.analysis.outside_view import (
    RateEstimate,
)
from trainprof.analysis.stalls import (
    Stall,
)
from trainprof.store.stacks import StackSpan

MIN_OF_RUNS = 0.85  # an estimate below this share of the steps the stacks prove is rejected
# No rhythm, and the steps the stacks prove come to this share of the fastest rhythm the
# sampling shows: a loop faster than the sampling is the likely reason (its samples fall at
# random phases of its steps, and its proven stretches saturate near a quarter of the samples)
NEAR_LIMIT = 0.25


def rate_of(
    spans: Sequence[StackSpan],
    source: dict[tuple[str, int], str],
    rate_hz: int,
    window: tuple[float, float],
) -> tuple[periodicity.Rhythm, list[Stall]]:
    """The loop's rhythm, judged outside its stalls (a stall is no step), and the stalls."""
    dt = 1.0 / max(1, rate_hz)
    states = periodicity.state_series(spans, window[0], window[1], dt, category_key(source))
    first = find_stalls(spans, source)
    for st in first:
        if st.cause == "data":
            continue  # a slow batch is part of the loop's rhythm, not time away from it
        for k in range(
            max(0, int((st.t0 - window[0]) / dt)),
            min(len(states), int((st.t1 - window[0]) / dt) + 1),
        ):
            states[k] = -1
    loop_s = (window[1] - window[0]) - sum(st.t1 - st.t0 for st in first if st.cause != "data")
    rhythm = periodicity.rhythm(states, dt, loop_s)
    return rhythm, first


def progress_runs(
    spans: Sequence[StackSpan],
    source: dict[tuple[str, int], str],
    stalls: Sequence[Stall],
    dt: float,
) -> int:
    """Separate stretches of backward/optimizer stacks outside stalls: each is a different
    step, so their count is a lower bound on the steps (stretches less than two samples
    apart are merged: a sample of loop code inside one step must not split it)."""
    category = attribution.categoriser(source)
    busy = [(st.t0, st.t1) for st in stalls]
    runs, last = 0, None
    for s in spans:
        if category(s.frames) not in PROGRESS:
            continue
        if any(a <= s.t0 < b for a, b in busy):
            continue
        if last is None or s.t0 - last > 0.5 * dt:
            runs += 1
        last = s.t1
    return runs


def rate_estimate(
    rhythm: periodicity.Rhythm,
    window: tuple[float, float],
    stalls: Sequence[Stall],
    runs: int = 0,
) -> RateEstimate:
    span = window[1] - window[0]
    if rhythm.period_s is None:
        return _not_estimated(rhythm, _with_lower_bound(rhythm.reason, runs, span, rhythm.grid_s))
    lost = sum(st.excess_s for st in stalls if st.cause != "data")
    loop_s = span - lost
    if loop_s < periodicity.MIN_PERIODS * rhythm.period_s:
        return _not_estimated(
            rhythm,
            f"the loop ran {loop_s:.1f} s outside stalls: fewer than {periodicity.MIN_PERIODS} "
            "periods",
            rhythm.period_s,
        )
    steps = loop_s / rhythm.period_s + sum(1 for st in stalls if st.cause != "data")
    # A window of n periods overlaps up to n + 1 steps (a part of one at each end), and each
    # run is a step the window touched: compare the runs with that, or a correct rhythm over
    # a short window (8 steps at 2 it/s in 4 s, 9 runs) is rejected for its edges.
    if steps + 1 < MIN_OF_RUNS * runs:
        # More separate backward/optimizer stretches than the rhythm has steps: the rhythm
        # found is a pattern over several steps, not one step. The runs are a lower bound:
        # steps shorter than a few samples merge into one run, so whether --rate or
        # --duration helps cannot be told from them.
        return _not_estimated(
            rhythm,
            f"{_proven(runs, span)}, but its stacks repeat only every "
            f"{rhythm.period_s * 1e3:.0f} ms, a pattern over several steps (a higher --rate "
            "or a longer --duration may resolve them)",
        )
    return RateEstimate(
        steps / span,
        rhythm.period_s,
        periodicity.METHOD,
        rhythm.confidence,
        rhythm.score,
        rhythm.harmonics,
        None,
    )


def _not_estimated(
    rhythm: periodicity.Rhythm, reason: str | None, period_s: float | None = None
) -> RateEstimate:
    return RateEstimate(
        None, period_s, periodicity.METHOD, "none", rhythm.score, rhythm.harmonics, reason
    )


def _proven(runs: int, span: float) -> str:
    """The steps the stacks prove: separate backward/optimizer stretches are separate steps."""
    bound = window_rate(runs, span)
    return (
        f"the loop runs at least {bound:.{0 if bound >= 10 else 1}f} it/s ({runs} separate "
        f"backward/optimizer stretches in {span:.1f} s)"
    )


def _with_lower_bound(reason: str | None, runs: int, span: float, grid_s: float) -> str | None:
    """No rhythm: what the stacks still prove, the separate backward/optimizer stretches as a
    lower bound on it/s; and, where that bound comes near the fastest loop whose rhythm the
    sampling shows, that a faster loop needs a higher --rate (a loop of 830 it/s sampled at
    197 Hz showed no rhythm, and the report said only that)."""
    if not runs or span <= 0:
        return reason
    limit = 1.0 / (periodicity.SAMPLES_PER_STEP * grid_s)
    text = f"{reason}; {_proven(runs, span)}"
    if window_rate(runs, span) >= NEAR_LIMIT * limit:
        text += (
            f", and {1 / grid_s:.0f} stack samples a second show a rhythm up to ≈ {limit:.0f} "
            "it/s: a faster loop needs a higher --rate (or `trainprof run`, which times each step)"
        )
    return text


def window_rate(runs: int, span: float) -> float:
    return runs / span if span > 0 else 0.0
