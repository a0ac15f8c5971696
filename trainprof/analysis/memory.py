"""Memory growth per process (main and each DataLoader worker, separately). Pure.

Growth is the least-squares slope of a process's memory over the steady window; it counts as
steady growth when the fit is good (R² ≥ ``MIN_R2``) so a one-off allocation is not "growth".
Workers are judged on USS (their own pages) where available, since RSS of a forked worker
includes pages it shares with the main process. Growth is also sustained only where each half
of the window rises (at a quarter of the whole window's rate or more): the allocator's swings
(a training process whose optimizer makes multi-MB temporaries each step went 327 → 380 → 327
MiB and back, over and over) fit a line well over a short window that catches one rise, and a
3-second window did, at R² 0.8; a leak rises in both halves. Both tests are judged against the
steps the job had done at each read where its steps are known: a leak filled step by step is a
line over them, and against time it bends wherever the job gets a CPU unevenly (R² 0.93-0.96
against time, 0.99 against steps, for one leak on a loaded machine); the rate stays per second.

A fit needs ``MIN_POINTS`` reads inside the window. At the host sampler's 0.5 s, five span 2 s:
a quick job's whole steady window (3.1 s for a 300 MiB leak on an idle 2-core machine) held
six reads, and a job a tick quicker holds five.
Fewer reads let chance fit more often: of a random walk, R² ≥ 0.95 with both halves rising
passes 1.6 % of the time at six reads, 2.5 % at five, 4.9 % at four.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from trainprof.analysis.stats import slope
from trainprof.store.session import ProcSeries

MIN_R2 = 0.8
MIN_POINTS = 5  # reads inside the window: each half then holds three
HALF_RATE = 0.25  # each half's slope, as a share of the whole window's, for sustained growth
COW_RSS_SHARE = 0.25  # RSS rose less than this share of the USS rise: copy-on-write


@dataclass(frozen=True)
class Growth:
    pid: int
    role: str
    metric: str  # "rss" | "uss"
    start_bytes: float
    end_bytes: float
    bytes_per_s: float
    r2: float
    seconds: float
    sustained: bool = True  # each half of the window rises too (not one swing of the allocator)
    # the fitted line's two ends, (time, bytes), for a chart to draw (None: not kept)
    line: tuple[tuple[float, float], tuple[float, float]] | None = None
    # judged on USS: how much its RSS rose over the same reads (None: not judged on USS)
    rss_rise: float | None = None

    @property
    def copy_on_write(self) -> bool:
        """A forked child's private memory rose while its resident memory stayed flat: pages
        it shared with its parent turned private (copy-on-write), none were added."""
        rise = self.end_bytes - self.start_bytes
        return self.rss_rise is not None and rise > 0 and self.rss_rise < COW_RSS_SHARE * rise


def growth(
    series: ProcSeries, role: str, t0: float, t1: float, progress: Sequence[float] = ()
) -> Growth | None:
    """The trend of a process's memory over [t0, t1]; None with fewer than ``MIN_POINTS`` reads.
    With ``progress`` (the job's step end times, sorted) the line is judged against the steps
    done at each read, the rate against time."""
    use_uss = role == "worker" and any(not math.isnan(v) for v in series.uss)
    values = series.uss if use_uss else series.rss
    pts = [
        (t, v) for t, v in zip(series.t, values, strict=True) if t0 <= t <= t1 and not math.isnan(v)
    ]
    rss_rise = None
    if use_uss:
        rss = [r for t, r, u in zip(series.t, series.rss, values, strict=True)
               if t0 <= t <= t1 and not math.isnan(u) and not math.isnan(r)]  # fmt: skip
        rss_rise = rss[-1] - rss[0] if rss else None
    if len(pts) < MIN_POINTS:
        return None
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    b = slope(xs, ys)
    if math.isnan(b):
        return None
    my = sum(ys) / len(ys)
    mx = sum(xs) / len(xs)
    steps = [float(bisect.bisect_right(progress, x)) for x in xs] if progress else []
    axis = steps if len(set(steps)) > 1 else xs
    r2, sustained = _fit(axis, ys)
    return Growth(
        series.pid,
        role,
        "uss" if use_uss else "rss",
        ys[0],
        ys[-1],
        b,
        r2,
        xs[-1] - xs[0],
        b > 0 and sustained,
        ((xs[0], my + b * (xs[0] - mx)), (xs[-1], my + b * (xs[-1] - mx))),
        rss_rise,
    )


def _fit(xs: list[float], ys: list[float]) -> tuple[float, bool]:
    """R² of the least-squares line of ys over xs, and whether each half of the points rises at
    ``HALF_RATE`` of its slope or more."""
    b = slope(xs, ys)
    if math.isnan(b):
        return 0.0, False
    my, mx = sum(ys) / len(ys), sum(xs) / len(xs)
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - (my + b * (x - mx))) ** 2 for x, y in zip(xs, ys, strict=True))
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else 0.0
    half = (len(xs) + 1) // 2  # the middle point, with an odd count, is in both halves
    sustained = b > 0 and all(
        slope(xs[lo:hi], ys[lo:hi]) >= HALF_RATE * b
        for lo, hi in ((0, half), (len(xs) - half, len(xs)))
    )
    return r2, sustained
