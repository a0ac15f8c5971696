"""Small pure statistics helpers (no numpy: the CLI must stay light)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def finite(values: Iterable[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values (q in 0..100)."""
    if not sorted_values:
        return math.nan
    k = (len(sorted_values) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    if lo == hi:
        return float(sorted_values[lo])
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def median(values: Iterable[float]) -> float:
    return percentile(sorted(values), 50)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs (NaN when undefined)."""
    n = len(xs)
    if n < 2:
        return math.nan
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return math.nan
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


def bins(values: Sequence[float], n: int) -> list[float]:
    """Mean of values in n equal consecutive bins (for a sparkline)."""
    if not values:
        return []
    n = min(n, len(values))
    out = []
    for i in range(n):
        chunk = values[i * len(values) // n : (i + 1) * len(values) // n]
        out.append(sum(chunk) / len(chunk))
    return out
