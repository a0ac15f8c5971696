"""Small pure statistics helpers (no numpy: the CLI must stay light)."""

from __future__ import annotations

import bisect
import math
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate, islice, repeat
from operator import floordiv, truediv
from typing import TypeVar

T = TypeVar("T")


def finite(values: Iterable[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def tail(values: Sequence[T], start: int) -> Iterator[T]:
    """The items of ``values[start:]``, without copying them (a million-step column)."""
    return islice(values, start, None)


def scaled(values: Sequence[int], start: int, scale: float) -> array[float]:
    """``array('d', (v / scale for v in values[start:]))``, built a block at a time into an
    array of its exact size (no slice, no over-allocation)."""
    n = max(0, len(values) - start)
    out = array("d", [0.0]) * n
    for i in range(0, n, _BLOCK):
        block = values[start + i : start + min(n, i + _BLOCK)]
        out[i : i + _BLOCK] = array("d", map(truediv, block, repeat(scale)))
    return out


_BLOCK = 1 << 16


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values (q in 0..100)."""
    if not sorted_values:
        return math.nan
    return _interpolate(sorted_values.__getitem__, len(sorted_values), q)


def _ranks_of(n: int, q: float) -> tuple[int, int]:
    """The two 0-based ranks whose values ``percentile`` interpolates between (n > 0)."""
    k = (n - 1) * q / 100.0
    return math.floor(k), math.ceil(k)


def _interpolate(at: Callable[[int], float], n: int, q: float) -> float:
    """``percentile`` of n sorted values, ``at(i)`` being the i-th smallest."""
    if not n:
        return math.nan
    k = (n - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    if lo == hi:
        return float(at(lo))
    return at(lo) + (at(hi) - at(lo)) * (k - lo)


def int_percentiles(
    values: Sequence[int],
    qs: Sequence[float],
    start: int = 0,
    low: int | None = None,
    scale: float | None = None,
) -> list[float]:
    """``percentile(sorted(vs), q)`` for each q, where vs are the integers of
    ``values[start:]`` that are ``>= low`` (all without ``low``), each divided by ``scale``
    (``v / scale``) if given: the same floats, without a sorted copy of a million values.

    Exact: the values of the ranks ``percentile`` needs are found by counting the values
    at C speed: each distinct value when there are at most ``_BUCKETS`` of them (one pass),
    else in buckets of equal width, narrowing to the buckets that hold the ranks (a few
    passes); memory is that of the counts. Dividing by a positive scale keeps the order, so
    the k-th smallest quotient is the quotient of the k-th smallest integer."""
    if not _all_ints(values):
        vs: Iterable[int] = tail(values, start)
        if low is not None:
            vs = filter(low.__le__, vs)
        ordered = sorted(v / scale for v in vs) if scale is not None else sorted(vs)
        return [percentile(ordered, q) for q in qs]
    counts = _value_counts(values, start, low)
    if counts is not None:
        n = sum(counts.values())
        found = {r: v for v, (_, _, rs) in _locate(counts, 0, _wanted(n, qs)).items() for r in rs}
    else:
        n = len(values) - start if low is None else sum(map(low.__le__, tail(values, start)))
        found = _select(values, start, low, _wanted(n, qs))
    if scale is None:
        return [_interpolate(found.__getitem__, n, q) for q in qs]
    return [_interpolate(lambda r: found[r] / scale, n, q) for q in qs]


_BUCKETS = 1 << 16  # distinct values, or buckets, counted at once (a few MB)
_FEW = 1 << 15  # values few enough to sort


def _all_ints(values: Sequence[int]) -> bool:
    if isinstance(values, array):
        return values.typecode in "bBhHiIlLqQ"
    return all(type(v) is int for v in values)


def _wanted(n: int, qs: Sequence[float]) -> list[int]:
    return sorted({r for q in qs for r in _ranks_of(n, q)}) if n > 0 else []


def _value_counts(values: Sequence[int], start: int, low: int | None) -> Counter[int] | None:
    """How often each value of ``values[start:]`` (``>= low``) occurs; None when there are
    more than ``_BUCKETS`` distinct values."""
    counts: Counter[int] = Counter()
    for i in range(max(0, start), len(values), _BLOCK):
        counts.update(values[i : i + _BLOCK])
        if len(counts) > _BUCKETS:
            return None
    if low is not None:
        for v in [v for v in counts if v < low]:
            del counts[v]
    return counts


def _locate(
    counts: Counter[int], first: int, ranks: list[int]
) -> dict[int, tuple[int, int, list[int]]]:
    """The keys (values, or buckets in value order) whose counted values hold the ranks,
    each with the rank of its first value, its count and the ranks it holds; ``first`` is
    the rank of the first counted value."""
    keys = sorted(counts)
    starts = list(accumulate((counts[k] for k in keys), initial=first))
    out: dict[int, tuple[int, int, list[int]]] = {}
    for r in ranks:
        i = bisect.bisect_right(starts, r) - 1
        out.setdefault(keys[i], (starts[i], counts[keys[i]], []))[2].append(r)
    return out


def _select(values: Sequence[int], start: int, low: int | None, ranks: list[int]) -> dict[int, int]:
    """The values of the given 0-based ranks among the integers of ``values[start:]`` that
    are ``>= low``: counted in ``_BUCKETS`` buckets of equal width over their range, then
    again within the buckets that hold the ranks, until a bucket is one value wide or holds
    few enough values to sort."""

    def scan(within: range | None = None) -> Iterator[int]:
        it: Iterator[int] = tail(values, start)
        if within is not None:
            return filter(within.__contains__, it)  # O(1) for ints
        return filter(low.__le__, it) if low is not None else it

    found: dict[int, int] = {}
    if not ranks:
        return found
    todo = [(range(min(scan()), max(scan()) + 1), 0, ranks)]
    while todo:
        span, first, targets = todo.pop()
        width = -(-(span.stop - span.start) // _BUCKETS)
        if width == 1:
            counts = Counter(scan(span))
        else:
            counts = Counter(map(floordiv, scan(span), repeat(width)))
        for b, (below, c, inside) in _locate(counts, first, targets).items():
            if width == 1:
                found.update(dict.fromkeys(inside, b))
                continue
            sub = range(max(span.start, b * width), min(span.stop, (b + 1) * width))
            if c <= _FEW:
                ordered = sorted(scan(sub))
                found.update((r, ordered[r - below]) for r in inside)
            else:
                todo.append((sub, below, inside))
    return found


def median(values: Iterable[float]) -> float:
    return percentile(sorted(values), 50)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def mean_between(ts: Sequence[float], vs: Sequence[float], lo: float, hi: float) -> float | None:
    """The mean of the measured values sampled inside [lo, hi] (None: none measured there)."""
    vals = [v for t, v in zip(ts, vs, strict=True) if lo <= t <= hi and not math.isnan(v)]
    return mean(vals) if vals else None


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


# A series rises when its order follows time this closely (Spearman's rank correlation) and
# the median of its last third is this many times the median of its first.
RISING_RHO = 0.8
RISING_FACTOR = 1.25


def rising(values: Sequence[float]) -> tuple[float, float] | None:
    """(first third's median, last third's median) of 4+ values that rise along the series
    (rank correlation with their order ≥ 0.8, the last third ≥ 1.25× the first); an outlier
    or two do not hide the trend. None for any other series."""
    n = len(values)
    if n < 4:
        return None
    order = sorted(range(n), key=lambda i: values[i])
    ranks = [0.0] * n
    i = 0
    while i < n:  # tied values share their mean rank
        j = i
        while j + 1 < n and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    xs = [float(x) for x in range(n)]
    mr = (n - 1) / 2
    cov = sum((x - mr) * (r - mr) for x, r in zip(xs, ranks, strict=True))
    spread = math.sqrt(sum((x - mr) ** 2 for x in xs) * sum((r - mr) ** 2 for r in ranks))
    third = max(1, n // 3)
    first, last = median(values[:third]), median(values[-third:])
    if spread == 0 or cov / spread < RISING_RHO or first <= 0 or last < RISING_FACTOR * first:
        return None
    return first, last
