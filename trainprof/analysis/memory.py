"""Memory growth per process (main and each DataLoader worker, separately). Pure.

Growth is the least-squares slope of a process's memory over the steady window; it counts as
steady growth when the fit is good (R² ≥ ``MIN_R2``) so a one-off allocation is not "growth".
Workers are judged on USS (their own pages) where available, since RSS of a forked worker
includes pages it shares with the main process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainprof.analysis.stats import slope
from trainprof.store.session import ProcSeries

MIN_R2 = 0.8
MIN_POINTS = 6


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


def growth(series: ProcSeries, role: str, t0: float, t1: float) -> Growth | None:
    use_uss = role == "worker" and any(not math.isnan(v) for v in series.uss)
    values = series.uss if use_uss else series.rss
    pts = [
        (t, v) for t, v in zip(series.t, values, strict=True) if t0 <= t <= t1 and not math.isnan(v)
    ]
    if len(pts) < MIN_POINTS:
        return None
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    b = slope(xs, ys)
    if math.isnan(b):
        return None
    my = sum(ys) / len(ys)
    mx = sum(xs) / len(xs)
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - (my + b * (x - mx))) ** 2 for x, y in zip(xs, ys, strict=True))
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else 0.0
    return Growth(
        series.pid, role, "uss" if use_uss else "rss", ys[0], ys[-1], b, r2, xs[-1] - xs[0]
    )
