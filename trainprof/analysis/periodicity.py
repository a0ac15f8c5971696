"""Iterations per second from the periodicity of the main thread's stacks. Pure.

A training loop repeats the same sequence of stacks every step (the DataLoader, forward,
backward, the optimizer, the loop's own lines), so the main thread's state, sampled on a
regular grid, is a periodic signal. Its normalised autocorrelation (over categorical states:
the chance that two samples a lag apart are in the same state, beyond what chance alone gives)
peaks at the step period and its multiples. The first strong peak gives the period; the
peaks at its multiples refine it (a lag is known to one sample, so the k-th multiple pins
the period k times finer). The peak's height is the confidence: a loop without a steady
rhythm gives no clear peak, and then nothing is estimated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trainprof.store.stacks import StackSpan

METHOD = "autocorrelation of the main thread's stack states"
MIN_PEAK = 0.06  # a candidate period's own peak, when many multiples confirm it
MIN_PEAK_FEW = 0.3  # ... and when fewer than FEW multiples fit in what was sampled
FEW = 6
HIGH_PEAK = 0.2  # the period's peak, with 3+ multiples agreeing: high confidence
MEDIUM_PEAK = 0.1  # below it: low (a weak rhythm; on data-bound loops whose batches vary, the
# estimate has been seen to lock onto a pattern of several steps)
MIN_PERIODS = 4  # the loop must repeat at least this often within what was sampled
SAMPLES_PER_STEP = 2.5  # a rhythm shows up to one step per this many samples (--rate/2.5 it/s)
MIN_STATE_SAMPLES = 5  # a state seen fewer times than this (or this share) is noise
MIN_STATE_SHARE = 0.01
MAX_BLOCK_S = 30.0  # the autocorrelation is averaged over blocks of at most this long...
MAX_BLOCKS = 4  # ...and this many (bounds the analysis of a long attach to ~1 s)
HIT_RATE = 0.75  # the period: the first lag with a peak at this share of its multiples
MIN_CONTRAST = 0.04  # peaks over troughs, on average over the multiples


@dataclass(frozen=True)
class Rhythm:
    """The loop's period, or why there is none. ``score``: the peak's normalised
    autocorrelation (0..1); ``harmonics``: multiples of the period whose peaks agreed."""

    period_s: float | None
    score: float
    harmonics: int
    grid_s: float
    reason: str | None = None

    @property
    def confidence(self) -> str:
        if self.period_s is None:
            return "none"
        if self.score >= HIGH_PEAK and self.harmonics >= 3:
            return "high"
        return "medium" if self.score >= MEDIUM_PEAK else "low"


def state_series(
    spans: Sequence[StackSpan], t0: float, t1: float, dt: float, key: Callable[[StackSpan], object]
) -> list[int]:
    """The state at each grid point t0, t0+dt, ... (−1 where no sample covers it)."""
    ids: dict[object, int] = {}
    out: list[int] = []
    i = 0
    n = int((t1 - t0) / dt)
    for k in range(n):
        t = t0 + k * dt
        while i < len(spans) and spans[i].t1 <= t:
            i += 1
        if i < len(spans) and spans[i].t0 <= t:
            out.append(ids.setdefault(key(spans[i]), len(ids)))
        else:
            out.append(-1)
    return out


def autocorrelation(states: Sequence[int], max_lag: int) -> list[float]:
    """Normalised autocorrelation of a categorical series, lags 0..max_lag (index = lag).

    Per state c, of its indicator: (P(c at t and at t+lag) − p_c²) / (p_c − p_c²); then the
    mean over the states. Each state weighs the same, so the short phases of a step (the
    backward, the optimizer) count as much as a long wait for data, which would otherwise
    drown their rhythm. Unknown points (−1) are left out. Indicators are bit masks: a lag is
    a shift, a count is ``int.bit_count``, so a 30 s block at 200 Hz takes milliseconds."""
    n = len(states)
    known_n = sum(1 for s in states if s >= 0)
    if known_n < 2:
        return [0.0] * (max_lag + 1)
    masks: dict[int, int] = {}
    for i, s in enumerate(states):
        if s >= 0:
            masks[s] = masks.get(s, 0) | (1 << i)
    known = 0
    for m in masks.values():
        known |= m
    floor = max(MIN_STATE_SAMPLES, MIN_STATE_SHARE * known_n)
    kept = [m for m in masks.values() if m.bit_count() >= floor]
    if len(kept) < 2:
        return [0.0] * (max_lag + 1)  # one state only: no rhythm to see
    out = [1.0]
    for lag in range(1, min(max_lag, n - 1) + 1):
        pairs = (known & (known >> lag)).bit_count()
        if pairs == 0:
            out.append(0.0)
            continue
        total = 0.0
        for m in kept:
            p = m.bit_count() / known_n
            both = (m & (m >> lag)).bit_count() / pairs
            total += (both - p * p) / (p - p * p)
        out.append(total / len(kept))
    out.extend([0.0] * (max_lag + 1 - len(out)))
    return out


def _blocks(n: int, size: int) -> list[tuple[int, int]]:
    if n <= size:
        return [(0, n)]
    count = min(MAX_BLOCKS, n // size)
    step = (n - size) / max(1, count - 1) if count > 1 else 0
    return [(int(i * step), int(i * step) + size) for i in range(count)]


def rhythm(states: Sequence[int], dt: float, loop_s: float | None = None) -> Rhythm:
    """The period of a state series sampled every ``dt`` seconds."""
    n = len(states)
    size = min(n, int(MAX_BLOCK_S / dt))
    max_lag = size // 3  # lags up to a third: the period and its double fit in 4 periods
    if max_lag < 3:
        return Rhythm(None, 0.0, 0, dt, "too few stack samples to see a rhythm")
    acs = [autocorrelation(states[a:b], max_lag) for a, b in _blocks(n, size)]
    ac = [sum(col) / len(acs) for col in zip(*acs, strict=True)]
    return _period(ac, dt, loop_s)


def _peaks(ac: Sequence[float]) -> list[int]:
    return [
        i for i in range(2, len(ac) - 1) if ac[i] > 0 and ac[i] >= ac[i - 1] and ac[i] >= ac[i + 1]
    ]


def _refine(ac: Sequence[float], i: int) -> float:
    """Sub-sample peak position by a parabola through the peak and its neighbours."""
    if i <= 0 or i >= len(ac) - 1:
        return float(i)
    a, b, c = ac[i - 1], ac[i], ac[i + 1]
    den = a - 2 * b + c
    return i + (0.5 * (a - c) / den if den < 0 else 0.0)


def _multiples(ac: Sequence[float], p: int) -> tuple[float, int, int, float]:
    """Follow the multiples of a candidate lag: (refined lag, multiples tried, peaks found at
    them, contrast). A multiple counts when it is a local peak above the trough half a period
    before it; each one found narrows the lag (least squares through zero). The contrast is
    the mean height of the peaks over that of the troughs."""
    num, den = _refine(ac, p), 1.0
    tried, found, contrast = 0, 0, 0.0
    for k in range(1, len(ac)):
        lag = num / den
        centre = k * lag
        if centre >= len(ac) - 2:
            break
        tried += 1
        half = max(1, round(0.15 * lag))
        lo, hi = max(1, int(centre) - half), min(len(ac) - 2, int(centre) + half + 1)
        j = max(range(lo, hi + 1), key=lambda x: ac[x])
        trough = ac[max(1, round(centre - lag / 2))]
        if ac[j] >= ac[j - 1] and ac[j] >= ac[j + 1] and ac[j] > trough:
            if k > 1:
                num += k * _refine(ac, j)
                den += k * k
            found += 1
            contrast += ac[j] - trough
    return num / den, tried, found, contrast / max(1, tried)


def _period(ac: Sequence[float], dt: float, loop_s: float | None) -> Rhythm:
    """The smallest lag whose multiples all show peaks: a multiple of the step period (a
    pattern every few steps) has peaks only at some of them, a fraction of it at few."""
    best: Rhythm | None = None
    for p in (i for i in _peaks(ac) if ac[i] >= MIN_PEAK):
        lag, tried, found, contrast = _multiples(ac, p)
        if tried < 2 or found < HIT_RATE * tried or contrast < MIN_CONTRAST:
            continue
        if tried < FEW and ac[p] < MIN_PEAK_FEW:
            continue  # a few multiples can line up by chance: ask for a clear peak
        best = Rhythm(lag * dt, ac[p], found, dt)
        break
    if best is None or best.period_s is None:
        top = max((ac[i] for i in _peaks(ac)), default=0.0)
        return Rhythm(
            None,
            top,
            0,
            dt,
            "the main thread's stacks show no steady rhythm: no autocorrelation peak "
            f"(the highest is {top:.2f}) recurs at the multiples of its lag",
        )
    if loop_s is not None and loop_s < MIN_PERIODS * best.period_s:
        return Rhythm(
            None,
            best.score,
            best.harmonics,
            dt,
            f"the loop ran only {loop_s:.1f} s, fewer than {MIN_PERIODS} periods of "
            f"{best.period_s * 1e3:.0f} ms",
        )
    return best
